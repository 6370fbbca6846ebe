//! Chunk loading: reads a chunk's byte range with a positional read into a reused buffer and
//! parses it into a [`ParsedChunk`], the columnar buffers of all its sequences.
//!
//! The index describes the files as they were when indexed. Before and after each read the
//! loader compares the file (through its open handle, and by path) with the stamp the index
//! recorded, and it checks that the parsed sequences are exactly the ones the index expects:
//! a file that was truncated, extended, replaced or rewritten gives
//! [`LoadError::Changed`], never garbage values, and its index cache is removed: a rewrite
//! that keeps the size, the modification time and both ends passes the cache's checks, and
//! the cache would fail every later read the same way. No mmap is involved, so a file
//! truncated under the reader cannot raise SIGBUS. A part whose sequences were parsed while
//! indexing (the threaded engine's cold start) is taken from that parse instead of read
//! ([`ChunkLoader::adopt_part`]), after the same check against the index.
//!
//! For a composite reader, each part of the primary deserializer is joined with the
//! sequences of the same keys in the other deserializers as it is loaded (module `join`), so the
//! rest of the pipeline sees one corpus with every input.

mod join;

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::{InputConfig, ReaderConfig};
use crate::diag::Diagnostic;
use crate::index::cache::{cache_path, IndexFingerprint};
use crate::index::scan::is_space;
use crate::index::{CorpusIndex, FileStamp, IndexedFile, KeyMode};
use crate::parser::stream::byte_order_mark_len;
use crate::parser::{
    BufferLengths, Element, InvalidSequence, ParsedSequences, StreamOptions, StreamParser,
};
use crate::quote::file_name;

/// The parsed content of one chunk.
#[derive(Clone, Debug)]
pub struct ParsedChunk<T> {
    /// The chunk's id in the index.
    pub chunk: u32,
    /// The sequences of the chunk loaded (indices within the chunk, index order): all of
    /// them for [`ChunkLoader::load`], a part for [`ChunkLoader::load_part`].
    pub part: std::ops::Range<u32>,
    /// Its valid sequences, in file order.
    pub sequences: ParsedSequences<T>,
    /// Its invalid sequences, in file order, each with its first error.
    pub invalid: Vec<InvalidSequence>,
    /// Every error and warning found, in file order (lines are the file's).
    pub diagnostics: Vec<Diagnostic>,
}

impl<T: Element> PartialEq for ParsedChunk<T> {
    fn eq(&self, other: &Self) -> bool {
        self.chunk == other.chunk
            && self.part == other.part
            && self.sequences == other.sequences
            && self.invalid == other.invalid
            && self.diagnostics == other.diagnostics
    }
}

impl<T: Element> ParsedChunk<T> {
    /// Empty buffers for the given inputs, to be filled by [`ChunkLoader::load`].
    pub fn new(inputs: &[InputConfig]) -> Self {
        ParsedChunk {
            chunk: 0,
            part: 0..0,
            sequences: ParsedSequences::new(inputs),
            invalid: Vec::new(),
            diagnostics: Vec::new(),
        }
    }
}

/// Why a chunk could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// The file could not be opened or read.
    Io {
        /// The file, as named in the index.
        file: String,
        /// The underlying error.
        error: io::Error,
    },
    /// The file is no longer the one that was indexed.
    Changed {
        /// The file, as named in the index.
        file: String,
        /// How it differs.
        detail: String,
    },
    /// The loader thread panicked while loading: a bug in ctf-reader.
    Panicked {
        /// The file, as named in the index.
        file: String,
    },
}

impl LoadError {
    /// The same error, for a second receiver (an I/O error keeps its kind and message).
    pub fn duplicate(&self) -> LoadError {
        match self {
            LoadError::Io { file, error } => LoadError::Io {
                file: file.clone(),
                error: io::Error::new(error.kind(), error.to_string()),
            },
            LoadError::Changed { file, detail } => LoadError::Changed {
                file: file.clone(),
                detail: detail.clone(),
            },
            LoadError::Panicked { file } => LoadError::Panicked { file: file.clone() },
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Io { file, error } => {
                write!(f, "{}: error: cannot read: {error}", file_name(file))
            }
            LoadError::Changed { file, detail } => write!(
                f,
                "{}: error: data file changed since it was indexed ({detail})",
                file_name(file)
            ),
            LoadError::Panicked { file } => write!(
                f,
                "{}: error: internal error (a bug in ctf-reader): a loader thread \
                 panicked while parsing it",
                file_name(file)
            ),
        }
    }
}

impl std::error::Error for LoadError {}

/// What a loader has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadCounters {
    /// Chunks loaded (a chunk loaded in parts counts when its last part is loaded).
    pub chunks_loaded: u64,
    /// Bytes read from data files.
    pub bytes_read: u64,
}

/// Most data files a [`ChunkLoader`] keeps open: a corpus of thousands of files would
/// otherwise hold a descriptor per file and loader (each loader thread, and each packer for
/// the sequences it reads itself), past the process's limit (often 1,024). Reopening a
/// file costs an `open` and an `fstat` per part, next to a part's read and parse.
pub const MAX_OPEN_FILES: usize = 32;

/// Loads chunks of an indexed corpus. Each loader thread owns one.
pub struct ChunkLoader<T> {
    index: Arc<CorpusIndex>,
    parser: StreamParser<T>,
    defining: Option<usize>,
    buffer: Vec<u8>,
    /// The data files open for reading, at most [`MAX_OPEN_FILES`], the least recently
    /// read closed first.
    files: lru::LruCache<u32, File>,
    counters: LoadCounters,
    /// The text size and output buffer lengths of the last part parsed, to size the next.
    last_part: Option<(u64, BufferLengths)>,
    /// For a composite reader: joins each primary part with the other deserializers.
    joiner: Option<Box<join::Joiner<T>>>,
    /// While checks are deferred: the files read since (see `defer_checks`).
    deferred_checks: Option<Vec<u32>>,
    /// What names the index caches of the files (those of the first deserializer).
    cache_fingerprint: IndexFingerprint,
}

/// Checks, through its open handle and by its path, that `file` is still the file `indexed`
/// describes.
fn check_file(file: &File, indexed: &IndexedFile) -> Result<(), LoadError> {
    let io_error = |error: io::Error| LoadError::Io {
        file: indexed.name.clone(),
        error,
    };
    let changed = |detail: String| LoadError::Changed {
        file: indexed.name.clone(),
        detail,
    };
    let by_handle = FileStamp::of_file(file).map_err(io_error)?;
    let by_path = match FileStamp::of_path(&indexed.path) {
        Ok(stamp) => stamp,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(changed("it was removed or renamed".to_string()))
        }
        Err(e) => return Err(io_error(e)),
    };
    for now in [by_handle, by_path] {
        if let Some(change) = indexed.stamp.describe_change(&now) {
            return Err(changed(change));
        }
    }
    Ok(())
}

/// Whether `text` begins with whitespace and then a digit: the one first line of a
/// line-mode range whose parse depends on whether it is its file's first line with content
/// (see [`StreamParser::range_starts_at_first_content`]).
fn starts_with_digits_after_space(text: &[u8]) -> bool {
    let digit_at = text.iter().position(|&b| !is_space(b)).unwrap_or(0);
    digit_at > 0 && text[digit_at].is_ascii_digit()
}

/// Whether the first `end` bytes of `file` are only a UTF-8 byte order mark, whitespace and
/// line feeds: then the line at `end` is the file's first line with content. Reads up to
/// the first byte that is not (a line-mode file has content before its first sequence only
/// when it begins with lines that hold none, a comment say, and then that comes early);
/// also returns how many bytes it read.
fn only_space_before(file: &File, end: u64) -> io::Result<(bool, u64)> {
    let mut block = vec![0u8; (end.min(64 << 10)) as usize];
    let mut offset = 0u64;
    while offset < end {
        let len = (end - offset).min(block.len() as u64) as usize;
        file.read_exact_at(&mut block[..len], offset)?;
        let mut text = &block[..len];
        if offset == 0 {
            // (A UTF-16 mark is refused when the file is indexed.)
            let bom = byte_order_mark_len(text).unwrap_or(0);
            text = &text[bom..];
        }
        offset += len as u64;
        if !text.iter().all(|&b| is_space(b) || b == b'\n') {
            return Ok((false, offset));
        }
    }
    Ok((true, offset))
}

/// The bytes of the sequences `part` of `chunk`, within the chunk: from its first sequence
/// (the chunk's start for the first part) to the next part's first sequence (the chunk's end
/// for the last part).
fn part_text(index: &CorpusIndex, chunk: u32, part: &std::ops::Range<u32>) -> std::ops::Range<u64> {
    let entries = index.chunk_sequences(chunk);
    let from = match part.start {
        0 => 0,
        i => u64::from(entries[i as usize].offset),
    };
    let to = match entries.get(part.end as usize) {
        Some(next) => u64::from(next.offset),
        None => u64::from(index.chunk(chunk).len),
    };
    from..to
}

impl<T: Element> ChunkLoader<T> {
    /// A loader for the corpus `index` maps, parsed as `config` says. For a composite
    /// reader (an index with joined deserializers), `config` is the whole composite
    /// configuration and parts hold every input.
    pub fn new(index: Arc<CorpusIndex>, config: &ReaderConfig) -> Self {
        let options = StreamOptions {
            skip_sequence_ids: config.skip_sequence_ids,
            frame_mode: config.frame_mode,
        };
        let joiner =
            (!index.joined.is_empty()).then(|| Box::new(join::Joiner::new(&index, config)));
        ChunkLoader {
            files: lru::LruCache::unbounded(),
            parser: StreamParser::new(&config.inputs[config.deserializer_inputs(0)], options),
            index,
            defining: config.inputs.iter().position(|i| i.defines_mb_size),
            buffer: Vec::new(),
            counters: LoadCounters::default(),
            last_part: None,
            joiner,
            deferred_checks: None,
            cache_fingerprint: IndexFingerprint::of(&config.deserializer_config(0)),
        }
    }

    /// The index this loader reads by.
    pub fn index(&self) -> &Arc<CorpusIndex> {
        &self.index
    }

    /// Chunks loaded and bytes read so far (those of joined deserializers included).
    pub fn counters(&self) -> LoadCounters {
        LoadCounters {
            bytes_read: self.counters.bytes_read
                + self.joiner.as_ref().map_or(0, |j| j.bytes_read()),
            ..self.counters
        }
    }

    /// Reads and parses chunk `chunk` into `into` (whose buffers are reused).
    pub fn load(&mut self, chunk: u32, into: &mut ParsedChunk<T>) -> Result<(), LoadError> {
        let count = self.index.chunk(chunk).sequences.len() as u32;
        self.load_part(chunk, 0..count, into)
    }

    /// Reads and parses the sequences `part` (indices within the chunk, a non-empty range)
    /// of chunk `chunk`, with the bytes between them, into `into`: several threads can so
    /// parse one chunk. Parts read exactly what the whole chunk would give, split at
    /// sequence boundaries. A file that changed since it was indexed loses its index cache
    /// (see the module's documentation), and the error says so.
    pub fn load_part(
        &mut self,
        chunk: u32,
        part: std::ops::Range<u32>,
        into: &mut ParsedChunk<T>,
    ) -> Result<(), LoadError> {
        let mut loaded = self.read_part(chunk, part, into);
        if let Err(LoadError::Changed { file, detail }) = &mut loaded {
            for cache in self.forget_index_caches(file) {
                detail.push_str(&format!(
                    "; its index cache {} was removed, so the next read indexes it again",
                    file_name(&cache.display().to_string())
                ));
            }
        }
        loaded
    }

    /// Removes the index caches of the files named `name` (this loader's, and the joined
    /// deserializers' for a composite reader), as [`load_part`](Self::load_part) says;
    /// returns those it removed.
    fn forget_index_caches(&self, name: &str) -> Vec<PathBuf> {
        let mut removed: Vec<PathBuf> = self
            .index
            .files
            .iter()
            .filter(|f| f.name == name)
            .map(|f| cache_path(&f.path, &self.cache_fingerprint))
            .filter(|cache| std::fs::remove_file(cache).is_ok())
            .collect();
        if let Some(joiner) = &self.joiner {
            removed.extend(joiner.forget_index_caches(name));
        }
        removed
    }

    /// [`load_part`](Self::load_part), but for the index caches.
    fn read_part(
        &mut self,
        chunk: u32,
        part: std::ops::Range<u32>,
        into: &mut ParsedChunk<T>,
    ) -> Result<(), LoadError> {
        let index = Arc::clone(&self.index);
        let c = index.chunk(chunk);
        let entries = index.chunk_sequences(chunk);
        let count = entries.len() as u32;
        let part = part.start.min(count)..part.end.min(count);
        let std::ops::Range {
            start: from,
            end: to,
        } = part_text(&index, chunk, &part);
        let first_line = match part.start {
            0 => c.first_line,
            i => c.first_line + u64::from(entries[i as usize].line),
        };
        let indexed = &index.files[c.file as usize];
        let changed = |detail: String| LoadError::Changed {
            file: indexed.name.clone(),
            detail,
        };
        let io_error = |error: io::Error| LoadError::Io {
            file: indexed.name.clone(),
            error,
        };
        if !self.files.contains(&c.file) && self.files.len() >= MAX_OPEN_FILES {
            if let Some((closed, file)) = self.files.pop_lru() {
                // A file whose check is deferred is checked before it is closed.
                if self
                    .deferred_checks
                    .as_ref()
                    .is_some_and(|touched| touched.contains(&closed))
                {
                    check_file(&file, &index.files[closed as usize])?;
                }
            }
        }
        let file = self
            .files
            .try_get_or_insert_mut(c.file, || File::open(&indexed.path).map_err(io_error))?;
        if self.deferred_checks.is_none() {
            check_file(file, indexed)?;
        }
        self.buffer.resize((to - from) as usize, 0);
        let read = fault::injected(&indexed.path, c.start + from, self.buffer.len())
            .and_then(|()| file.read_exact_at(&mut self.buffer, c.start + from));
        match read {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(changed("it is now shorter than indexed".to_string()))
            }
            Err(e) => return Err(io_error(e)),
        }
        // A file's first sequence may be on its first line with content, where digits after
        // whitespace are skipped in line mode; elsewhere they are junk. (What comes before
        // it is read before the file is checked again, as the chunk is.)
        let at_first_content = if part.start == 0
            && chunk == indexed.chunks.start
            && indexed.mode == KeyMode::Lines
            && starts_with_digits_after_space(&self.buffer)
        {
            let (only_space, read) = only_space_before(file, c.start).map_err(io_error)?;
            // Text read too, though no sequence's.
            self.counters.bytes_read += read;
            only_space
        } else {
            false
        };
        match &mut self.deferred_checks {
            None => check_file(file, indexed)?,
            Some(touched) if !touched.contains(&c.file) => touched.push(c.file),
            Some(_) => {}
        }
        self.count_read(&index, chunk, &part);
        if c.start + to < indexed.stamp.size && self.buffer.last() != Some(&b'\n') {
            return Err(changed(format!(
                "line {first_line} no longer ends where it did"
            )));
        }

        let seqs =
            (c.sequences.start + part.start) as usize..(c.sequences.start + part.end) as usize;
        let repeated = index.repeated_keys(chunk, seqs.start as u32..seqs.end as u32);
        self.parser
            .start_range(indexed.mode, first_line, indexed.key_base, repeated);
        if at_first_content {
            self.parser.range_starts_at_first_content();
        }
        if let Some((bytes, lengths)) = &self.last_part {
            self.parser.reserve_output(lengths, to - from, *bytes);
        }
        let parsed = self
            .parser
            .feed(&self.buffer)
            .and_then(|()| self.parser.finish_file());
        if let Err(e) = parsed {
            // A range starts inside a file, where nothing is fatal; only a changed file gets
            // here.
            return Err(changed(e.message));
        }
        match &mut self.joiner {
            None => {
                self.parser.take_output(
                    &mut into.sequences,
                    &mut into.diagnostics,
                    &mut into.invalid,
                );
                into.chunk = chunk;
                into.part = part;
                self.last_part = Some((to - from, into.sequences.buffer_lengths()));
            }
            Some(joiner) => {
                let primary = &mut joiner.primary;
                self.parser.take_output(
                    &mut primary.sequences,
                    &mut primary.diagnostics,
                    &mut primary.invalid,
                );
                self.last_part = Some((to - from, primary.sequences.buffer_lengths()));
                joiner.join(&index, chunk, part, into)?;
            }
        }
        self.verify(chunk, into).map_err(changed)
    }

    /// Takes `sequences`, parsed while indexing from the text of the sequences `part` of
    /// chunk `chunk` (module `index::stash`), as that part's load into `into`, instead of
    /// reading and parsing the part. The parse numbered lines from the start of the scan's
    /// part: its lines (and line-mode keys) are shifted to the file's, by the first sequence
    /// with samples (the first parsed), and checked against the index as a load's are.
    /// False, with `into` to be loaded again, if they do not match.
    pub fn adopt_part(
        &mut self,
        chunk: u32,
        part: std::ops::Range<u32>,
        sequences: ParsedSequences<T>,
        into: &mut ParsedChunk<T>,
    ) -> bool {
        let index = Arc::clone(&self.index);
        let c = index.chunk(chunk);
        let entries = index.chunk_sequences(chunk);
        if self.joiner.is_some() || part.start >= part.end || part.end as usize > entries.len() {
            return false;
        }
        let Some(carrier) = entries[part.start as usize..part.end as usize]
            .iter()
            .find(|e| e.samples > 0)
        else {
            return false;
        };
        let Some(parsed_line) = sequences.sequences.first().map(|s| s.line) else {
            return false;
        };
        let shift = (c.first_line + u64::from(carrier.line)).wrapping_sub(parsed_line);
        let line_mode = index.files[c.file as usize].mode == crate::parser::KeyMode::Lines;
        into.sequences = sequences;
        for seq in &mut into.sequences.sequences {
            seq.line = seq.line.wrapping_add(shift);
            if line_mode {
                seq.key = seq.key.wrapping_add(shift);
            }
        }
        into.invalid.clear();
        into.diagnostics.clear();
        into.chunk = chunk;
        into.part = part.clone();
        if self.verify(chunk, into).is_err() {
            return false;
        }
        self.count_read(&index, chunk, &part);
        true
    }

    /// Counts the part's text as read, and the chunk as loaded when the part is its last.
    fn count_read(&mut self, index: &CorpusIndex, chunk: u32, part: &std::ops::Range<u32>) {
        let text = part_text(index, chunk, part);
        self.counters.bytes_read += text.end - text.start;
        if part.end as usize == index.chunk_sequences(chunk).len() {
            self.counters.chunks_loaded += 1;
        }
    }

    /// Defers the checks that a file is still the one indexed, made before and after every
    /// read, to [`check_deferred`](Self::check_deferred): for a run of many small reads
    /// (a joined deserializer's sequences), whose data is used only once that check passes.
    fn defer_checks(&mut self) {
        self.deferred_checks.get_or_insert_with(Vec::new).clear();
    }

    /// Checks every file read since [`defer_checks`](Self::defer_checks), and checks each
    /// read again from now on.
    fn check_deferred(&mut self) -> Result<(), LoadError> {
        let touched = self.deferred_checks.take().unwrap_or_default();
        for f in touched {
            if let Some(file) = self.files.peek(&f) {
                check_file(file, &self.index.files[f as usize])?;
            }
        }
        Ok(())
    }

    /// Checks that the parsed sequences are the ones the index lists for the part.
    fn verify(&self, chunk: u32, parsed: &ParsedChunk<T>) -> Result<(), String> {
        let c = self.index.chunk(chunk);
        let valid = &parsed.sequences.sequences;
        let (mut v, mut i) = (0, 0);
        let part = parsed.part.start as usize..parsed.part.end as usize;
        for entry in &self.index.chunk_sequences(chunk)[part] {
            let line = c.first_line + u64::from(entry.line);
            let mismatch = || format!("the sequence at line {line} is not the one indexed");
            if valid.get(v).is_some_and(|s| s.line == line) {
                let samples = match self.defining {
                    Some(input) => parsed.sequences.sample_count(v, input) as u64,
                    None => u64::from(valid[v].counted_lines),
                };
                if valid[v].key != entry.key || samples != u64::from(entry.samples) {
                    return Err(mismatch());
                }
                v += 1;
            } else if parsed.invalid.get(i).is_some_and(|s| s.line == line) {
                if parsed.invalid[i].key != entry.key {
                    return Err(mismatch());
                }
                i += 1;
            } else if entry.samples != 0 {
                return Err(mismatch());
            }
        }
        let extra = valid
            .get(v)
            .map(|s| s.line)
            .or_else(|| parsed.invalid.get(i).map(|s| s.line));
        match extra {
            Some(line) => Err(format!("line {line} holds a sequence that was not indexed")),
            None => Ok(()),
        }
    }
}

/// A test hook that injects read errors into chunk loading, for the fault-injection tests
/// (`tests/faults.rs`): not part of the supported API.
///
/// A hook is registered for one data file path, exactly as the index records it (the
/// configured path), so tests running in parallel on their own files do not see each
/// other's faults. When no hook has ever been registered, a read costs one relaxed atomic
/// load more. The registry is a leaf lock held only to look a hook up (not one of the
/// pipeline's synchronization points, so it comes from `std`, not from [`crate::sync`]).
#[doc(hidden)]
pub mod fault {
    use std::io;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    /// Called before each positional read of a chunk (or part) of a file with the file
    /// offset and the byte count; an error is returned by the loader as if the read had
    /// failed with it.
    pub type ReadFault = Arc<dyn Fn(u64, usize) -> io::Result<()> + Send + Sync>;

    static ACTIVE: AtomicBool = AtomicBool::new(false);
    static HOOKS: Mutex<Vec<(PathBuf, ReadFault)>> = Mutex::new(Vec::new());

    /// Registers `hook` for reads of `path` (replacing any earlier one), or removes the
    /// hook of `path` with `None`.
    pub fn set_read_fault(path: &Path, hook: Option<ReadFault>) {
        let mut hooks = HOOKS.lock().unwrap_or_else(|e| e.into_inner());
        hooks.retain(|(p, _)| p != path);
        if let Some(hook) = hook {
            hooks.push((path.to_path_buf(), hook));
            ACTIVE.store(true, Ordering::Relaxed);
        }
    }

    /// The injected result of reading `len` bytes at `offset` of `path`: `Ok` without a hook.
    pub(crate) fn injected(path: &Path, offset: u64, len: usize) -> io::Result<()> {
        if !ACTIVE.load(Ordering::Relaxed) {
            return Ok(());
        }
        let hook = {
            let hooks = HOOKS.lock().unwrap_or_else(|e| e.into_inner());
            hooks
                .iter()
                .find(|(p, _)| p == path)
                .map(|(_, h)| Arc::clone(h))
        };
        match hook {
            Some(hook) => hook(offset, len),
            None => Ok(()),
        }
    }
}
