//! ctf-reader reads training data in the CNTK Text Format (CTF).
//!
//! ```
//! use ctf_reader::reader::{stderr_sink, ErrorPolicy, SequenceReader};
//! use ctf_reader::{InputConfig, ReaderConfig, Sample};
//!
//! // The reader section of `examples/pos.cntk`, built in Rust.
//! let config = ReaderConfig::builder()
//!     .file("examples/pos.ctf")
//!     .input(InputConfig::sparse("words", 1000).with_alias("w"))
//!     .input(InputConfig::dense("features", 3).with_alias("x"))
//!     .input(InputConfig::sparse("tags", 12).with_alias("t"))
//!     .build()?;
//! let mut reader = SequenceReader::<f32>::new(&config, ErrorPolicy::Budget, stderr_sink());
//! let mut feature_samples = 0;
//! while let Some(batch) = reader.next_batch()? {
//!     for seq in 0..batch.len() {
//!         for sample in batch.samples(seq, 1) {
//!             if let Sample::Dense(values) = sample {
//!                 assert_eq!(values.len(), 3);
//!                 feature_samples += 1;
//!             }
//!         }
//!     }
//! }
//! assert_eq!(feature_samples, 82);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The crate is layered like CNTK's reader: [`config`] turns a BrainScript reader section into
//! a typed [`ReaderConfig`]; [`parser`] turns bytes into columnar per-input buffers;
//! [`reader`] streams files through the parser and applies the error policy; [`index`] maps a
//! corpus into sequences and chunks, which [`chunks`] loads; [`randomize`] and [`timeline`]
//! decide which sequences form each minibatch on each worker; [`minibatch`] packs them; and
//! [`source::MinibatchSource`] puts these together behind one call, on loader, planner and
//! packer threads ([`pipeline`]). The `ctf` command-line
//! tool is built on these.
#![deny(missing_docs)]

pub mod chunks;
pub mod config;
pub mod diag;
pub mod ffi;
pub mod index;
pub mod minibatch;
pub mod parser;
pub mod pipeline;
mod prefetch;
mod quote;
pub mod randomize;
pub mod reader;
pub mod source;
pub mod sync;
#[cfg(test)]
mod test_rng;
pub mod timeline;

pub use config::{
    InputConfig, JoinedDeserializer, Precision, RandomizerKind, ReaderConfig, ReaderForm,
    StorageFormat, WindowSize,
};
pub use diag::{Diagnostic, JoinedPosition, Severity};
pub use parser::{Element, ParsedSequences, Sample, SampleValues};
