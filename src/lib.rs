//! ctf-reader reads training data in the CNTK Text Format (CTF).
//!
//! The crate is layered like CNTK's reader: [`config`] turns a BrainScript reader section into
//! a typed [`ReaderConfig`]; [`parser`] turns bytes into columnar per-input buffers;
//! [`reader`] streams files through the parser and applies the error policy. The `ctf`
//! command-line tool is built on these.
#![deny(missing_docs)]

pub mod config;
pub mod diag;
pub mod parser;
pub mod reader;

pub use config::{InputConfig, Precision, ReaderConfig, ReaderForm, StorageFormat};
pub use diag::{Diagnostic, Severity};
pub use parser::{Element, ParsedSequences, Sample};
