//! Support code for the property tests of the parser (`tests/parser_props.rs`), the index
//! (`tests/index.rs`) and the engines (`tests/engine_props.rs`).
//!
//! - [`entropy`]: a byte-driven choice source, so proptest shrinks a failing dataset by
//!   shrinking the bytes that chose it (a zero byte always means "the simplest choice").
//! - [`grammar`]: the SPEC §7.2 number grammar and exact decimal expansions, written
//!   independently of the crate.
//! - [`model`]: a random valid dataset, rendered to CTF text with random variations, plus the
//!   sequences the text must parse to.
//! - [`corpus`]: several generated files, some damaged, read by the naive reference as one
//!   corpus.
//! - [`reference`]: a deliberately naive parser (split lines, split on `|`, split on
//!   whitespace, `str::parse`) used as a second, independent oracle.
//! - [`run`]: runs the real parser over a byte string cut into pieces and snapshots the result.

pub mod corpus;
pub mod entropy;
pub mod grammar;
pub mod model;
pub mod reference;
pub mod run;
