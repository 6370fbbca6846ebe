//! Building the index of a corpus: expand the file list, then for each file reuse a valid
//! index cache or scan the file, and group its sequences into chunks; finally find repeated
//! ids across the corpus and start writing the caches that were missing or stale.
//!
//! The scan reads each file in parts with positional reads, on several threads for files
//! larger than one round of parts (see `segments`); no mmap: a file truncated while it is
//! scanned gives a short read, not SIGBUS, and scanned pages do not count against the
//! process's memory. Memory is one part per thread, the sequences found in the parts
//! scanned ahead of the join (a fixed number per thread), and 24 bytes per sequence
//! ([`build_index`]); the threaded engine's
//! cold start may also keep the sequences of the parts parsed while indexing, up to the
//! bound it asks for (`build_index_stashed`, module `stash`).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::sync::Arc;

use crate::config::ReaderConfig;
use crate::index::cache::{
    cache_path, read_cache, remove_abandoned_temps, write_cache, CacheJob, CacheKey, CacheRead,
    CacheSink, CacheWriter, IndexFingerprint, ABANDONED_AFTER,
};
use crate::index::chunking::{FileChunker, IndexLimits};
use crate::index::files::{content_hash, expand_file_patterns, DataFile, FileStamp};
use crate::index::join::{join_sample_counts, joined_index};
use crate::index::join_cache::{cached_match, Side};
use crate::index::repeats::find_repeats;
use crate::index::scan::{FileSummary, ScannedSequence};
use crate::index::segments::SplitScan;
use crate::index::stash::{StashPiece, StashRequest};
use crate::index::{
    stderr_warnings, CorpusIndex, IndexError, IndexWarning, IndexedFile, SequenceEntry, WarningSink,
};

/// Bytes each thread of the scan gets per read: large enough that starting the threads
/// costs little, small enough that the reads stay in cache.
pub const SCAN_BLOCK_SIZE: usize = 2 << 20;

/// The most threads a scan uses.
pub const MAX_SCAN_THREADS: usize = 8;

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
    /// Threads scanning a file (each read is cut at line feeds into one part per thread);
    /// the index does not depend on it. Between 1 and [`MAX_SCAN_THREADS`]: other numbers
    /// count as the nearer of the two.
    pub scan_threads: usize,
    /// Bytes per thread per read of the scan ([`SCAN_BLOCK_SIZE`]; lowered in tests).
    pub scan_block_bytes: usize,
}

/// The default number of scan threads: the cores available, at most [`MAX_SCAN_THREADS`].
pub fn default_scan_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_SCAN_THREADS)
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
            scan_threads: default_scan_threads(),
            scan_block_bytes: SCAN_BLOCK_SIZE,
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
    /// The background writers of the joined deserializers' missing caches (composite
    /// readers); dropping them waits for them.
    pub joined_cache_writers: Vec<CacheWriter>,
    /// Per joined deserializer (composite readers): whether its match with the first
    /// deserializer's keys was made ([`IndexSource::Scanned`]) or read from its join cache.
    pub join_sources: Vec<IndexSource>,
}

/// Builds the index of the corpus `config` describes. For a composite reader, each
/// deserializer is indexed on its own (with its own caches, as its `cacheIndex` says, or all
/// rebuilt with [`CacheMode::Rebuild`]) and the others are matched to the first by key
/// ([`join`](crate::index::join)); `sources` then lists the files of every deserializer in
/// order, and the unmatched and repeated keys of each joined one are reported as warnings.
pub fn build_index(
    config: &ReaderConfig,
    options: &IndexingOptions,
) -> Result<OpenedIndex, IndexError> {
    if !config.is_composite() {
        return build_one(config, options, None).map(|(opened, _)| opened);
    }
    let (mut opened, _) = build_one(&config.deserializer_config(0), options, None)?;
    let mut primary = CorpusIndex::clone(&opened.index);
    // Progress counts the bytes of every deserializer's files, one after the other.
    let mut scanned_before = primary.total_bytes();
    for d in 1..config.deserializer_count() {
        let own = config.deserializer_config(d);
        let own_options = IndexingOptions {
            cache: match options.cache {
                CacheMode::Rebuild => CacheMode::Rebuild,
                _ if own.cache_index => CacheMode::Use,
                _ => CacheMode::Off,
            },
            progress: options.progress.as_ref().map(|report| {
                let report = Arc::clone(report);
                let before = scanned_before;
                Arc::new(move |bytes| report(before + bytes)) as ProgressSink
            }),
            ..options.clone()
        };
        let (other, _) = build_one(&own, &own_options, None)?;
        scanned_before += other.index.total_bytes();
        opened.sources.extend(other.sources);
        opened.caches_written += other.caches_written;
        opened.joined_cache_writers.extend(other.cache_writer);
        let found = cached_match(
            &Side {
                index: &primary,
                fingerprint: &IndexFingerprint::of(&config.deserializer_config(0)),
            },
            &Side {
                index: &other.index,
                fingerprint: &IndexFingerprint::of(&own),
            },
            own_options.cache,
            &options.on_warning,
        );
        opened.join_sources.push(found.source);
        opened.caches_written += found.written;
        opened.joined_cache_writers.extend(found.writer);
        let matches = found.matches;
        let joined = joined_index(
            other.index,
            matches,
            own.files.join(", "),
            &*options.on_warning,
        );
        primary.joined.push(joined);
    }
    let defining = config.mb_size_input().map(|input| {
        (0..config.deserializer_count())
            .position(|d| config.deserializer_inputs(d).contains(&input))
            .unwrap_or(0)
    });
    let joined = std::mem::take(&mut primary.joined);
    join_sample_counts(&mut primary, &joined, defining);
    primary.joined = joined;
    opened.index = Arc::new(primary);
    Ok(opened)
}

/// Builds the index of the corpus `config` describes (not a composite reader), parsing
/// parts of the files it scans as `stash` asks (module `stash`): returns the index, as
/// [`build_index`] builds it, and the sequences kept parsed.
pub(crate) fn build_index_stashed(
    config: &ReaderConfig,
    options: &IndexingOptions,
    stash: StashRequest,
) -> Result<(OpenedIndex, Vec<StashPiece>), IndexError> {
    debug_assert!(!config.is_composite());
    build_one(config, options, Some(stash))
}

/// Builds the index of one deserializer's files, and the sequences kept parsed if `stash`.
fn build_one(
    config: &ReaderConfig,
    options: &IndexingOptions,
    stash: Option<StashRequest>,
) -> Result<(OpenedIndex, Vec<StashPiece>), IndexError> {
    let files = expand_file_patterns(&config.files)
        .map_err(|(file, error)| IndexError::Io { file, error })?;
    let fingerprint = IndexFingerprint::of(config);
    let mut builder = Builder {
        config,
        options,
        index: CorpusIndex::default(),
        overflowing: Vec::new(),
        scan: SplitScan::new(
            &config.inputs,
            config.skip_sequence_ids,
            options.scan_threads.clamp(1, MAX_SCAN_THREADS),
            options.scan_block_bytes,
            stash,
        ),
        scanned_bytes: 0,
    };
    let mut pieces = Vec::new();
    let mut sources = Vec::new();
    let mut jobs = Vec::new();
    let mut key_base = 0;
    for (number, data) in files.iter().enumerate() {
        let cache = cache_path(&data.path, &fingerprint);
        let (indexed, source, cacheable) =
            builder.add_file(number as u32, data, key_base, &cache, &fingerprint)?;
        if source == IndexSource::Scanned && cacheable && options.cache != CacheMode::Off {
            jobs.push(CacheJob {
                file: number as u32,
                path: cache,
            });
        }
        key_base += indexed.lines;
        pieces.extend(builder.scan.take_pieces().into_iter().map(|mut piece| {
            piece.file = number as u32;
            piece
        }));
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
        joined_cache_writers: Vec::new(),
        join_sources: Vec::new(),
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
            remove_abandoned_temps(&jobs, ABANDONED_AFTER);
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
    Ok((opened, pieces))
}

struct Builder<'a> {
    config: &'a ReaderConfig,
    options: &'a IndexingOptions,
    index: CorpusIndex,
    overflowing: Vec<u32>,
    scan: SplitScan,
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
    ) -> Result<(IndexedFile, IndexSource, bool), IndexError> {
        let io_error = |error: io::Error| IndexError::Io {
            file: data.name.clone(),
            error,
        };
        // Before opening it: opening a FIFO without a writer blocks.
        let kind = std::fs::metadata(&data.path).map_err(io_error)?.file_type();
        if kind.is_fifo() || kind.is_socket() {
            return Err(io_error(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a pipe or a socket cannot be indexed: reading through the index needs a file \
                 that can be read at any offset (`ctf dump` and `ctf validate` stream it)",
            )));
        }
        let file = File::open(&data.path).map_err(io_error)?;
        let stamp = FileStamp::of_file(&file).map_err(io_error)?;
        let hash = content_hash(&file, stamp.size).map_err(io_error)?;
        let rollback = (
            self.index.chunks.len(),
            self.index.sequences.len(),
            self.overflowing.len(),
        );
        let mut chunker = self.chunker(number, stamp.size);
        let mut found = None;
        let mut cacheable = true;
        if self.options.cache == CacheMode::Use {
            let key = CacheKey {
                stamp,
                content_hash: hash,
                fingerprint,
                key_base,
            };
            let mut sink = IndexSink {
                index: &mut self.index,
                overflowing: &mut self.overflowing,
                chunker: &mut chunker,
                name: &data.name,
            };
            let read = read_cache(cache, &key, &mut sink)?;
            match read {
                CacheRead::Loaded(c) => {
                    found = Some(FileSummary {
                        mode: c.mode,
                        lines: c.lines,
                        input_lines: c.input_lines,
                    })
                }
                CacheRead::Absent => {}
                CacheRead::NotAFile => {
                    cacheable = false;
                    (self.options.on_warning)(&IndexWarning {
                        file: cache.display().to_string(),
                        message: "not a regular file, so it is left alone and the index is not \
                                  cached"
                            .to_string(),
                    });
                }
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
                self.scan(&file, stamp.size, &mut chunker, key_base, &data.name)?
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
        Ok((indexed, source, cacheable))
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

    /// Scans a whole file from its start.
    fn scan(
        &mut self,
        file: &File,
        size: u64,
        chunker: &mut FileChunker,
        key_base: u64,
        name: &str,
    ) -> Result<FileSummary, IndexError> {
        let index = &mut self.index;
        let overflowing = &mut self.overflowing;
        let scanned_bytes = &mut self.scanned_bytes;
        let progress = &self.options.progress;
        // The file's bytes and sequences so far, for `reserve_for_file`.
        let (mut file_bytes, mut file_sequences) = (0u64, 0u64);
        self.scan
            .scan_file(file, size, key_base, name, &mut |ready, read| {
                file_bytes += read;
                file_sequences += ready.len() as u64;
                let so_far = (file_sequences, file_bytes);
                reserve_for_file(&mut index.sequences, ready.len(), so_far, size);
                let result = ready
                    .iter()
                    .try_for_each(|seq| add_sequence(index, overflowing, chunker, seq, name));
                ready.clear();
                *scanned_bytes += read;
                if let Some(progress) = progress {
                    progress(*scanned_bytes);
                }
                result
            })
    }
}

/// Makes room in the index's `sequences` for `ready` more, when they would not fit, for as
/// many as the whole file of `size` bytes holds at the density of the sequences and bytes
/// it has read so far, plus an eighth: the list then grows in a few steps sized by the file
/// rather than by doubling, each doubling a copy of the whole list into freshly touched
/// pages (on a file of short lines, about 0.8 of the list's own size in copies and page
/// faults on the thread that joins the scan).
fn reserve_for_file(
    sequences: &mut Vec<SequenceEntry>,
    ready: usize,
    (sequences_so_far, bytes): (u64, u64),
    size: u64,
) {
    if sequences.capacity() - sequences.len() >= ready {
        return;
    }
    let density = sequences_so_far as f64 / bytes.max(1) as f64;
    let rest = (size.saturating_sub(bytes) as f64 * density * 1.125) as usize;
    // No more than an index may hold (the chunker reports a corpus beyond that), and only
    // what the allocator grants: the list then grows as it would have.
    let most = (u32::MAX as usize).saturating_sub(sequences.len());
    let _ = sequences.try_reserve(ready.saturating_add(rest).min(most).max(ready));
}

/// Adds the sequences of a file's index cache to the index.
struct IndexSink<'a> {
    index: &'a mut CorpusIndex,
    overflowing: &'a mut Vec<u32>,
    chunker: &'a mut FileChunker,
    name: &'a str,
}

impl CacheSink for IndexSink<'_> {
    fn reserve(&mut self, sequences: u64) {
        self.index
            .sequences
            .reserve(usize::try_from(sequences).unwrap_or(0));
    }

    fn push(&mut self, seq: &ScannedSequence) -> Result<(), IndexError> {
        add_sequence(self.index, self.overflowing, self.chunker, seq, self.name)
    }
}

/// Adds one sequence to the index.
fn add_sequence(
    index: &mut CorpusIndex,
    overflowing: &mut Vec<u32>,
    chunker: &mut FileChunker,
    seq: &ScannedSequence,
    file: &str,
) -> Result<(), IndexError> {
    let ordinal = index.sequences.len() as u32;
    chunker
        .push(seq, &mut index.chunks, &mut index.sequences)
        .map_err(|e| IndexError::Data {
            file: file.to_string(),
            line: e.line,
            col: 1,
            message: e.message,
        })?;
    if !seq.is_id && seq.key == u64::MAX {
        // An id-mode id too long for 64 bits (line-mode keys are line numbers).
        overflowing.push(ordinal);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: u64) -> SequenceEntry {
        SequenceEntry {
            key,
            offset: 0,
            len: 10,
            samples: 1,
            line: 0,
        }
    }

    #[test]
    fn the_sequence_list_is_sized_once_from_the_first_rounds_density() {
        // A 1,000,000-byte file of 10-byte sequences, joined 4,096 bytes at a time: the
        // first round sizes the list for the whole file and an eighth, and it never grows
        // again (a doubling list would reallocate about 17 times).
        let (size, round) = (1_000_000u64, 4_096u64);
        let mut sequences = Vec::new();
        let (mut bytes, mut reallocations, mut capacity) = (0, 0, 0);
        while bytes < size {
            let read = round.min(size - bytes);
            bytes += read;
            let ready = (read / 10) as usize;
            let so_far = (sequences.len() + ready) as u64;
            reserve_for_file(&mut sequences, ready, (so_far, bytes), size);
            sequences.extend((0..ready).map(|k| entry(k as u64)));
            if sequences.capacity() != capacity {
                reallocations += 1;
                capacity = sequences.capacity();
            }
        }
        assert_eq!(reallocations, 1);
        assert!((100_000..=112_600).contains(&capacity), "{capacity}");
        // A later file denser than its start grows the list in a step, not entry by entry.
        reserve_for_file(&mut sequences, 10, (10, 1_000), 1_000_000);
        assert!(sequences.capacity() - sequences.len() >= 10);
    }

    #[test]
    fn a_reservation_the_allocator_refuses_changes_nothing() {
        // Far more than the machine has: `try_reserve` fails (or, with overcommit, grants
        // address space only); either way nothing is lost and nothing panics.
        let mut sequences = vec![entry(1), entry(2)];
        reserve_for_file(&mut sequences, 1, (1, 1), u64::MAX);
        assert_eq!(sequences, [entry(1), entry(2)]);
        sequences.push(entry(3));
        assert_eq!(sequences.len(), 3);
    }
}
