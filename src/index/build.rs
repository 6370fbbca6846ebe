//! Building the index of a corpus: expand the file list, then for each file reuse a valid
//! index cache or scan the file, and group its sequences into chunks; finally find repeated
//! ids across the corpus and start writing the caches that were missing or stale.
//!
//! The scan reads each file sequentially in blocks with `read` (no mmap: a file truncated
//! while it is scanned gives a short read, not SIGBUS, and scanned pages do not count against
//! the process's memory). Memory is the block buffer plus 24 bytes per sequence.

use std::fs::File;
use std::io::{self, Read};
use std::sync::Arc;

use crate::config::ReaderConfig;
use crate::index::cache::{
    cache_path, read_cache, write_cache, CacheJob, CacheKey, CacheRead, CacheWriter,
    IndexFingerprint,
};
use crate::index::chunking::{FileChunker, IndexLimits};
use crate::index::files::{content_hash, expand_file_patterns, DataFile, FileStamp};
use crate::index::repeats::find_repeats;
use crate::index::scan::{FileSummary, ScannedSequence, Scanner};
use crate::index::{
    stderr_warnings, CorpusIndex, IndexError, IndexWarning, IndexedFile, WarningSink,
};

/// Size of one read of the scan.
pub const SCAN_BLOCK_SIZE: usize = 1 << 20;

/// What to do with index caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheMode {
    /// Neither read nor write them (`cacheIndex = false`).
    Off,
    /// Use a valid cache; scan a file without one and write its cache in the background
    /// (`cacheIndex = true`).
    Use,
    /// Scan every file and write every cache before returning (`ctf index`).
    Rebuild,
}

/// Reports bytes scanned so far, for progress bars.
pub type ProgressSink = Arc<dyn Fn(u64) + Send + Sync>;

/// How to build an index.
#[derive(Clone)]
pub struct IndexingOptions {
    /// Whether to read and write index caches.
    pub cache: CacheMode,
    /// Where warnings go (unusable or unwritable caches).
    pub on_warning: WarningSink,
    /// Called after each block with the total bytes scanned so far in the corpus.
    pub progress: Option<ProgressSink>,
    /// Limits of the index's fields (lowered in tests).
    pub limits: IndexLimits,
}

impl IndexingOptions {
    /// The options a configuration asks for: caches as `cacheIndex` says, warnings to
    /// standard error unless `traceLevel = 0`.
    pub fn for_config(config: &ReaderConfig) -> Self {
        IndexingOptions {
            cache: if config.cache_index {
                CacheMode::Use
            } else {
                CacheMode::Off
            },
            on_warning: if config.trace_level >= 1 {
                stderr_warnings()
            } else {
                Arc::new(|_| {})
            },
            progress: None,
            limits: IndexLimits::default(),
        }
    }
}

/// Where a file's index came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexSource {
    /// The file was scanned.
    Scanned,
    /// A valid index cache was read.
    Cache,
}

/// A built index, and the thread still writing its caches.
pub struct OpenedIndex {
    /// The index.
    pub index: Arc<CorpusIndex>,
    /// Per file, where its index came from.
    pub sources: Vec<IndexSource>,
    /// Caches written before returning ([`CacheMode::Rebuild`]).
    pub caches_written: usize,
    /// The background writer of missing caches ([`CacheMode::Use`]); dropping it waits for
    /// it.
    pub cache_writer: Option<CacheWriter>,
}

/// Builds the index of the corpus `config` describes.
pub fn build_index(
    config: &ReaderConfig,
    options: &IndexingOptions,
) -> Result<OpenedIndex, IndexError> {
    let files = expand_file_patterns(&config.files)
        .map_err(|(file, error)| IndexError::Io { file, error })?;
    let fingerprint = IndexFingerprint::of(config);
    let mut builder = Builder {
        config,
        options,
        index: CorpusIndex::default(),
        overflowing: Vec::new(),
        scanner: Scanner::new(&config.inputs, config.skip_sequence_ids),
        buffer: vec![0; SCAN_BLOCK_SIZE],
        scanned_bytes: 0,
    };
    let mut sources = Vec::new();
    let mut jobs = Vec::new();
    let mut key_base = 0;
    for (number, data) in files.iter().enumerate() {
        let cache = cache_path(&data.path, &fingerprint);
        let (indexed, source) =
            builder.add_file(number as u32, data, key_base, &cache, &fingerprint)?;
        if source == IndexSource::Scanned && options.cache != CacheMode::Off {
            jobs.push(CacheJob {
                file: number as u32,
                path: cache,
            });
        }
        key_base += indexed.lines;
        builder.index.files.push(indexed);
        sources.push(source);
    }
    let mut index = builder.index;
    index.overflowing_ids = builder.overflowing;
    index.repeated = find_repeats(&index);
    let index = Arc::new(index);
    let mut opened = OpenedIndex {
        index: Arc::clone(&index),
        sources,
        caches_written: 0,
        cache_writer: None,
    };
    match options.cache {
        CacheMode::Off => {}
        CacheMode::Use if jobs.is_empty() => {}
        CacheMode::Use => {
            opened.cache_writer = Some(CacheWriter::spawn(
                index,
                jobs,
                fingerprint,
                Arc::clone(&options.on_warning),
            ));
        }
        CacheMode::Rebuild => {
            for job in jobs {
                match write_cache(&job.path, &index, job.file, &fingerprint) {
                    Ok(()) => opened.caches_written += 1,
                    Err(error) => (options.on_warning)(&IndexWarning {
                        file: job.path.display().to_string(),
                        message: format!("cannot write the index cache: {error}"),
                    }),
                }
            }
        }
    }
    Ok(opened)
}

struct Builder<'a> {
    config: &'a ReaderConfig,
    options: &'a IndexingOptions,
    index: CorpusIndex,
    overflowing: Vec<u32>,
    scanner: Scanner,
    buffer: Vec<u8>,
    scanned_bytes: u64,
}

impl Builder<'_> {
    /// Indexes one file: from its cache if that is valid, else by scanning it.
    fn add_file(
        &mut self,
        number: u32,
        data: &DataFile,
        key_base: u64,
        cache: &std::path::Path,
        fingerprint: &IndexFingerprint,
    ) -> Result<(IndexedFile, IndexSource), IndexError> {
        let io_error = |error: io::Error| IndexError::Io {
            file: data.name.clone(),
            error,
        };
        let mut file = File::open(&data.path).map_err(io_error)?;
        let stamp = FileStamp::of_file(&file).map_err(io_error)?;
        let hash = content_hash(&file, stamp.size).map_err(io_error)?;
        let rollback = (
            self.index.chunks.len(),
            self.index.sequences.len(),
            self.overflowing.len(),
        );
        let mut chunker = self.chunker(number, stamp.size);
        let mut found = None;
        if self.options.cache == CacheMode::Use {
            let key = CacheKey {
                stamp,
                content_hash: hash,
                fingerprint,
                key_base,
            };
            let read = read_cache(cache, &key, &mut |seq| {
                self.push(&mut chunker, seq, &data.name)
            })?;
            match read {
                CacheRead::Loaded(c) => {
                    found = Some(FileSummary {
                        mode: c.mode,
                        lines: c.lines,
                        input_lines: c.input_lines,
                    })
                }
                CacheRead::Absent => {}
                CacheRead::Unusable(reason) => (self.options.on_warning)(&IndexWarning {
                    file: cache.display().to_string(),
                    message: format!("ignoring the index cache ({reason}); rebuilding it"),
                }),
            }
        }
        let source = if found.is_some() {
            IndexSource::Cache
        } else {
            IndexSource::Scanned
        };
        let summary = match found {
            Some(summary) => summary,
            None => {
                self.index.chunks.truncate(rollback.0);
                self.index.sequences.truncate(rollback.1);
                self.overflowing.truncate(rollback.2);
                chunker = self.chunker(number, stamp.size);
                self.scan(&mut file, &mut chunker, key_base, &data.name)?
            }
        };
        let now = FileStamp::of_file(&file).map_err(io_error)?;
        if let Some(change) = stamp.describe_change(&now) {
            return Err(IndexError::Data {
                file: data.name.clone(),
                line: 0,
                col: 0,
                message: format!("the file changed while it was being indexed: {change}"),
            });
        }
        let indexed = IndexedFile {
            name: data.name.clone(),
            path: data.path.clone(),
            stamp,
            content_hash: hash,
            mode: summary.mode,
            lines: summary.lines,
            key_base,
            chunks: chunker.finish(&self.index.chunks),
            input_lines: summary.input_lines,
        };
        Ok((indexed, source))
    }

    fn chunker(&self, number: u32, size: u64) -> FileChunker {
        FileChunker::new(
            number,
            self.config.chunk_size_in_bytes,
            size,
            self.index.chunks.len(),
            self.options.limits,
        )
    }

    /// Adds one sequence to the index.
    fn push(
        &mut self,
        chunker: &mut FileChunker,
        seq: &ScannedSequence,
        file: &str,
    ) -> Result<(), IndexError> {
        let ordinal = self.index.sequences.len() as u32;
        chunker
            .push(seq, &mut self.index.chunks, &mut self.index.sequences)
            .map_err(|e| IndexError::Data {
                file: file.to_string(),
                line: e.line,
                col: 1,
                message: e.message,
            })?;
        if !seq.is_id && seq.key == u64::MAX {
            // An id-mode id too long for 64 bits (line-mode keys are line numbers).
            self.overflowing.push(ordinal);
        }
        Ok(())
    }

    /// Scans a whole file from its start.
    fn scan(
        &mut self,
        file: &mut File,
        chunker: &mut FileChunker,
        key_base: u64,
        name: &str,
    ) -> Result<FileSummary, IndexError> {
        let fatal = |e: crate::parser::FatalDataError| IndexError::Data {
            file: name.to_string(),
            line: e.line,
            col: e.col,
            message: e.message,
        };
        self.scanner.start_file(key_base);
        let mut buffer = std::mem::take(&mut self.buffer);
        let result = loop {
            let n = match file.read(&mut buffer) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    break Err(IndexError::Io {
                        file: name.to_string(),
                        error,
                    })
                }
            };
            if let Err(e) = self.scanner.feed(&buffer[..n]) {
                break Err(fatal(e));
            }
            if let Err(e) = self.drain(chunker, name) {
                break Err(e);
            }
            self.scanned_bytes += n as u64;
            if let Some(progress) = &self.options.progress {
                progress(self.scanned_bytes);
            }
        };
        self.buffer = buffer;
        result?;
        let summary = self.scanner.finish().map_err(fatal)?;
        self.drain(chunker, name)?;
        Ok(summary)
    }

    fn drain(&mut self, chunker: &mut FileChunker, name: &str) -> Result<(), IndexError> {
        let mut ready = std::mem::take(self.scanner.ready());
        let result = ready
            .iter()
            .try_for_each(|seq| self.push(chunker, seq, name));
        ready.clear();
        *self.scanner.ready() = ready;
        result
    }
}
