//! The map of the data: where every sequence of the corpus lies, grouped into chunks.
//!
//! The indexer makes one pass over each data file at memchr speed ([`scan`]), finding sequence
//! boundaries, keys and sample counts without decoding a value, and groups the sequences of
//! each file into chunks of about `chunkSizeInBytes` ([`chunking`]). On the threaded
//! engine's cold start it can parse the parts it reads instead, deriving the same index
//! from the parse and keeping the sequences for the loaders (`stash`). The result, a
//! [`CorpusIndex`], is what the randomizer plans with and what the chunk loader
//! ([`crate::chunks`]) reads by. With `cacheIndex = true` the index of each file is saved
//! next to it ([`cache`]) and reused while the file and the indexing options are unchanged.
//!
//! The index holds 24 bytes per sequence ([`SequenceEntry`]) plus a few per chunk and file;
//! nothing proportional to the file's bytes.

pub mod build;
pub mod cache;
pub mod chunking;
pub mod files;
pub mod join;
mod join_cache;
mod repeats;
pub mod scan;
mod search;
mod segments;
pub(crate) mod stash;

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use crate::quote::file_name;

pub use crate::parser::{KeyMode, RepeatedKey};
pub use build::{build_index, IndexSource, IndexingOptions, OpenedIndex};
pub use files::{expand_file_patterns, FileStamp};
pub use join::{JoinedIndex, NO_MATCH};

/// Receives the warnings of indexing, also those of the background cache writer.
pub type WarningSink = Arc<dyn Fn(&IndexWarning) + Send + Sync>;

/// A warning sink printing to standard error.
pub fn stderr_warnings() -> WarningSink {
    Arc::new(|w| crate::diag::write_stderr_line(w))
}

/// One sequence of the index: 24 bytes.
///
/// An entry is a span the parser will turn into one sequence, or find invalid, or (for an
/// id-mode run holding no configured input and no error) into nothing; `samples` is then 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SequenceEntry {
    /// The sequence key: its id, or in line mode its 0-based line number across the corpus
    /// (`u64::MAX` for an id too long for 64 bits, which the parser reports).
    pub key: u64,
    /// Byte offset of its first line from the start of its chunk.
    pub offset: u32,
    /// Length in bytes, line feeds included.
    pub len: u32,
    /// Sample count E: lines holding a configured input, or, with `definesMBSize`, lines
    /// holding that input. Exact for every valid sequence.
    pub samples: u32,
    /// Line of its first line, counted from the chunk's first line (0 for the first).
    pub line: u32,
}

/// A chunk: consecutive sequences of one file, read and parsed as a unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Index of the file in [`CorpusIndex::files`].
    pub file: u32,
    /// Byte offset of the chunk's first sequence in its file.
    pub start: u64,
    /// Bytes from `start` to the end of its last sequence (lines between its sequences
    /// included).
    pub len: u32,
    /// 1-based line number of its first sequence's first line in the file.
    pub first_line: u64,
    /// Its sequences, as indices into [`CorpusIndex::sequences`].
    pub sequences: Range<u32>,
    /// Sum of its sequences' sample counts.
    pub samples: u64,
}

impl Chunk {
    /// Byte offset just past its last sequence.
    pub fn end(&self) -> u64 {
        self.start + u64::from(self.len)
    }
}

/// One data file of the corpus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedFile {
    /// The file as written in the configuration, or as a glob pattern expanded to
    /// (diagnostics name it so).
    pub name: String,
    /// The path it was opened by.
    pub path: PathBuf,
    /// Size, modification time and identity when it was indexed.
    pub stamp: FileStamp,
    /// XXH3-64 of its first and last 64 KiB when it was indexed.
    pub content_hash: u64,
    /// Id or line mode.
    pub mode: KeyMode,
    /// Physical lines in the file (a last line without a line feed counts).
    pub lines: u64,
    /// Line-mode key of its first line: the lines of the files before it.
    pub key_base: u64,
    /// Its chunks, as indices into [`CorpusIndex::chunks`].
    pub chunks: Range<u32>,
    /// Lines holding a sample of each configured input (configuration order), as counted by
    /// the indexer.
    pub input_lines: Vec<u64>,
}

/// The index of a whole corpus: files, chunks and sequences, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CorpusIndex {
    /// The files, in configuration order (a glob's matches sorted).
    pub files: Vec<IndexedFile>,
    /// The chunks, file by file in file order; chunk ids are positions in this vector.
    pub chunks: Vec<Chunk>,
    /// The sequences, in file order.
    pub sequences: Vec<SequenceEntry>,
    /// Sequences whose key an earlier sequence of the corpus already used (sorted): each is
    /// invalid, as SPEC §7.1 requires of the later of two non-adjacent equal ids. Keys are
    /// compared whatever their kind: an id equal to the line-mode key of a sequence in an
    /// earlier file without ids repeats it, and the other way round.
    pub repeated: Vec<u32>,
    /// Id-mode sequences whose id does not fit in 64 bits (sorted); their key is `u64::MAX`,
    /// they never repeat an id, and the parser reports each as invalid.
    pub overflowing_ids: Vec<u32>,
    /// A composite reader's joined deserializers, matched to these sequences by key (empty
    /// for a single deserializer). The sample counts above are then those of the joined
    /// sequences.
    pub joined: Vec<JoinedIndex>,
}

impl CorpusIndex {
    /// The chunk with id `chunk`.
    pub fn chunk(&self, chunk: u32) -> &Chunk {
        &self.chunks[chunk as usize]
    }

    /// The sequence entries of a chunk.
    pub fn chunk_sequences(&self, chunk: u32) -> &[SequenceEntry] {
        let range = &self.chunk(chunk).sequences;
        &self.sequences[range.start as usize..range.end as usize]
    }

    /// Total sample count of the corpus.
    pub fn total_samples(&self) -> u64 {
        self.chunks.iter().map(|c| c.samples).sum()
    }

    /// Total bytes of the data files (of the first deserializer, for a composite reader).
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.stamp.size).sum()
    }

    /// Total bytes of the data files of every deserializer: what a sweep reads.
    pub fn data_bytes(&self) -> u64 {
        self.total_bytes()
            + self
                .joined
                .iter()
                .map(|j| j.index.data_bytes())
                .sum::<u64>()
    }

    /// Number of data files of every deserializer.
    pub fn data_file_count(&self) -> usize {
        self.files.len()
            + self
                .joined
                .iter()
                .map(|j| j.index.data_file_count())
                .sum::<usize>()
    }

    /// The sequences of file `file`, as indices into [`sequences`](Self::sequences).
    pub fn file_sequences(&self, file: u32) -> Range<u32> {
        let chunks = &self.files[file as usize].chunks;
        if chunks.is_empty() {
            // A file without chunks has no sequences; place the empty range after the
            // previous file's.
            let start = self.chunks[..chunks.start as usize]
                .last()
                .map_or(0, |c| c.sequences.end);
            return start..start;
        }
        self.chunks[chunks.start as usize].sequences.start
            ..self.chunks[chunks.end as usize - 1].sequences.end
    }

    /// Whether sequence `ordinal` repeats a key used earlier in the corpus.
    pub fn is_repeated(&self, ordinal: u32) -> bool {
        self.repeated.binary_search(&ordinal).is_ok()
    }

    /// The sequences among `ordinals`, of chunk `chunk`, that repeat a key used earlier in
    /// the corpus, as [`crate::parser::StreamParser::start_range`] takes them.
    pub fn repeated_keys(&self, chunk: u32, ordinals: Range<u32>) -> Vec<RepeatedKey> {
        repeats::repeated_keys(self, chunk, ordinals)
    }
}

/// Why the corpus could not be indexed.
#[derive(Debug)]
pub enum IndexError {
    /// A file could not be found, opened or read, or a pattern matched no file.
    Io {
        /// The file or pattern, as written in the configuration.
        file: String,
        /// The underlying error.
        error: io::Error,
    },
    /// A file-level problem with a position: empty file, UTF-16 text, a sequence longer than
    /// 4 GiB, more than 2^32 − 1 sequences, or a file that changed while it was read.
    Data {
        /// The file.
        file: String,
        /// 1-based line, or 0 when the error concerns the whole file.
        line: u64,
        /// 1-based column, or 0.
        col: u64,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IndexError::Io { file, error } => write!(f, "{}: error: {error}", file_name(file)),
            IndexError::Data {
                file,
                line: 0,
                message,
                ..
            } => write!(f, "{}: error: {message}", file_name(file)),
            IndexError::Data {
                file,
                line,
                col,
                message,
            } => write!(f, "{}:{line}:{col}: error: {message}", file_name(file)),
        }
    }
}

impl std::error::Error for IndexError {}

/// A problem that does not stop the read: an index cache that cannot be used or written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexWarning {
    /// The file concerned (the index cache or the data file).
    pub file: String,
    /// What happened and what the reader did about it.
    pub message: String,
}

impl fmt::Display for IndexWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: warning: {}", file_name(&self.file), self.message)
    }
}
