//! The CNTK Text Format parser: bytes of sequences in, columnar per-input buffers out.
//!
//! [`number`] scans and converts numbers, [`line`](mod@line) parses the samples of one line,
//! [`columns`] holds the decoded data, and [`stream`] drives them over a byte stream,
//! grouping lines into sequences (`word` holds the word-at-a-time helpers they share with
//! the index scan, `block` the byte masks of 64-byte blocks, `quote` the rendering of data
//! bytes in messages, `seen_keys` the keys the stream has met). Nothing here does I/O or knows about files or threads.

pub(crate) mod block;
pub mod columns;
pub(crate) mod dense_digits;
pub(crate) mod entry_vectors;
pub mod indices;
pub mod line;
pub(crate) mod line_blocks;
pub(crate) mod long_mantissa;
pub(crate) mod lookup;
pub mod number;
pub(crate) mod seen_keys;
pub mod stream;
pub mod values;
pub(crate) mod word;

pub use columns::{
    BufferLengths, ColumnOverflow, InputColumn, ParsedSequences, Sample, SequenceInfo,
    MAX_COLUMN_ENTRIES,
};
pub use indices::{IndexIter, SampleIndices};
pub use line::LineParser;
pub(crate) use lookup::SequenceLookup;
pub use number::Element;
pub use stream::{
    FatalDataError, InvalidSequence, KeyMode, ParseCounts, ParsedRun, RepeatedKey, StreamOptions,
    StreamParser,
};
pub use values::SampleValues;
