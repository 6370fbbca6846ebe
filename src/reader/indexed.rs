//! Sequential reading through the index, chunk by chunk in file order: the path
//! [`SequenceReader`](super::SequenceReader) takes for a composite reader, whose sequences
//! are the primary deserializer's joined with the others' by key (`ctf dump` prints them in
//! primary file order). Memory is one chunk of the primary deserializer with its joined
//! sequences.

use std::sync::Arc;

use crate::chunks::{ChunkLoader, LoadError, ParsedChunk};
use crate::config::ReaderConfig;
use crate::index::build::{build_index, IndexingOptions, OpenedIndex};
use crate::index::{CorpusIndex, IndexError, WarningSink};
use crate::parser::{Element, FatalDataError, ParseCounts};
use crate::Severity;

use super::ReadError;

/// Loads the chunks of an indexed corpus one after the other.
pub(super) struct IndexedWalk<T> {
    index: Arc<CorpusIndex>,
    /// Keeps the background index-cache writers alive (dropping it waits for them).
    _opened: OpenedIndex,
    loader: ChunkLoader<T>,
    /// The chunk loaded last.
    pub(super) chunk: ParsedChunk<T>,
    next_chunk: u32,
    counts: ParseCounts,
    /// Warnings of indexing, the background cache writers' included.
    index_warnings: Arc<std::sync::atomic::AtomicU64>,
}

impl<T: Element> IndexedWalk<T> {
    /// Indexes the corpus of `config` (index caches as its `cacheIndex` says); the warnings
    /// of indexing (such as keys only a joined deserializer has) go to `on_warning`, and are
    /// counted.
    pub(super) fn open(config: &ReaderConfig, on_warning: WarningSink) -> Result<Self, ReadError> {
        let mut options = IndexingOptions::for_config(config);
        // A count of the warnings one sink saw, not a synchronization point of the pipeline:
        // from `std`, not from `crate::sync`.
        let index_warnings = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let report = on_warning;
        let counted = Arc::clone(&index_warnings);
        options.on_warning = Arc::new(move |w| {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            report(w);
        });
        let opened = build_index(config, &options).map_err(index_error)?;
        let index = Arc::clone(&opened.index);
        Ok(IndexedWalk {
            index_warnings,
            loader: ChunkLoader::new(Arc::clone(&index), config),
            chunk: ParsedChunk::new(&config.inputs),
            index,
            _opened: opened,
            next_chunk: 0,
            counts: ParseCounts::default(),
        })
    }

    /// Number of data files of every deserializer.
    pub(super) fn file_count(&self) -> usize {
        self.index.data_file_count()
    }

    /// Counts of the chunks loaded so far: sequences, invalid sequences, errors and
    /// warnings, those of indexing included (lines are not counted on this path).
    pub(super) fn counts(&self) -> ParseCounts {
        let index_warnings = self
            .index_warnings
            .load(std::sync::atomic::Ordering::Relaxed);
        ParseCounts {
            warnings: self.counts.warnings + index_warnings,
            ..self.counts
        }
    }

    /// Loads the next chunk into [`chunk`](Self::chunk); returns the file its diagnostics
    /// refer to, or `None` after the last chunk.
    pub(super) fn next_chunk(&mut self) -> Result<Option<&str>, ReadError> {
        let id = self.next_chunk;
        let Some(c) = self.index.chunks.get(id as usize) else {
            return Ok(None);
        };
        self.next_chunk += 1;
        self.loader.load(id, &mut self.chunk).map_err(load_error)?;
        let counts = &mut self.counts;
        counts.sequences += self.chunk.sequences.len() as u64;
        counts.invalid_sequences += self.chunk.invalid.len() as u64;
        for d in &self.chunk.diagnostics {
            match d.severity {
                Severity::Error => counts.errors += 1,
                Severity::Warning => counts.warnings += 1,
            }
        }
        Ok(Some(&self.index.files[c.file as usize].name))
    }
}

/// The read error of a failed indexing.
fn index_error(error: IndexError) -> ReadError {
    match error {
        IndexError::Io { file, error } => ReadError::Io { file, error },
        IndexError::Data {
            file,
            line,
            col,
            message,
        } => ReadError::Fatal {
            file,
            error: FatalDataError { line, col, message },
        },
    }
}

/// The read error of a failed chunk load.
fn load_error(error: LoadError) -> ReadError {
    match error {
        LoadError::Io { file, error } => ReadError::Io { file, error },
        LoadError::Changed { file, detail } => ReadError::Fatal {
            file,
            error: FatalDataError {
                line: 0,
                col: 0,
                message: format!("data file changed since it was indexed ({detail})"),
            },
        },
        LoadError::Panicked { file } => ReadError::Fatal {
            file,
            error: FatalDataError {
                line: 0,
                col: 0,
                message: "internal error (a bug in ctf-reader): a loader thread panicked \
                          while parsing it"
                    .to_string(),
            },
        },
    }
}
