//! The index cache (`cacheIndex = true`): the index of each data file, saved next to it and
//! reused while the file and the indexing options are unchanged.
//!
//! Each data file gets its own cache file, `<data path>.<8 hex digits>.ctfidx`
//! ([`cache_path`]); the hex digits are the low 32 bits of XXH3-64 (seed 0) of the options
//! block below, so configurations reading different inputs of one file keep separate caches.
//! [`read_cache`] streams a cache (bounded memory), validates every field and record against
//! the data file's stamp and the options in force, and hands the sequences over as
//! [`ScannedSequence`]s; anything wrong makes the cache [`CacheRead::Unusable`] with a short
//! reason, never a panic. [`write_cache`] writes one atomically (a uniquely named temporary
//! file in the same directory, renamed over the final name), and [`CacheWriter`] does that in
//! a background thread, reporting failures as warnings.
//!
//! A cache is used only when the data file's size, modification time (nanoseconds) and
//! content hash ([`content_hash`](crate::index::files::content_hash)) are those recorded;
//! device and inode are not stored, so a copied directory keeps valid caches.
//!
//! # Format, version 2
//!
//! All integers are little-endian. Offsets are from the start of the cache file.
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 0 | 8 | magic `b"CTFINDEX"` |
//! | 8 | 4 | format version, u32 = 2 |
//! | 12 | 4 | flags, u32: bit 0 the data file is in line mode; bit 1 `skipSequenceIds`; other bits 0 |
//! | 16 | 8 | data file size in bytes, u64 |
//! | 24 | 8 | data file modification time: seconds since the Unix epoch, i64 (negative before it) |
//! | 32 | 4 | data file modification time: nanoseconds, u32 < 10^9 (time in ns = seconds × 10^9 + nanoseconds) |
//! | 36 | 4 | reserved, u32 = 0 |
//! | 40 | 8 | data file content hash, u64: XXH3-64 (seed 0) of its first 64 KiB followed by its last 64 KiB (the whole file, once, when it is at most 128 KiB) |
//! | 48 | 8 | physical line count of the data file, u64 (a last line without a line feed counts) |
//! | 56 | 8 | sequence count N, u64 |
//! | 64 | 8 | overflow count M, u64 (0 in line mode) |
//! | 72 | 4 | options block length L, u32 |
//! | 76 | 4 | alias count A, u32 |
//! | 80 | L | options block: defining input u32 (position of the `definesMBSize` input among the aliases; `u32::MAX` = none) · `skipSequenceIds` u8 (0 or 1) · A × (alias byte length u32 · alias UTF-8 bytes), aliases in configuration order |
//! | 80 + L | 8·A | input line counts: A × u64, lines of the data file holding each configured input, in configuration order |
//! | 80 + L + 8·A | 32·N | records, in file order, each: key u64 (id mode: the id, `u64::MAX` for an id beyond 64 bits; line mode: the file-local 0-based line, i.e. line − 1) · start offset u64 (byte offset of the sequence's first line in the data file) · line u64 (1-based line of its first line) · length u32 (bytes, line feeds included; start + length ≤ data size) · samples u32 |
//! | 80 + L + 8·A + 32·N | 4·M | overflow ordinals: M × u32, strictly increasing, each < N: the 0-based positions among the records of the id-mode sequences whose id does not fit in 64 bits |
//! | 80 + L + 8·A + 32·N + 4·M | 8 | trailer: XXH3-64 (seed 0) of every preceding byte of the cache file, u64 |
//!
//! The file is exactly 88 + L + 8·A + 32·N + 4·M bytes long. Records do not overlap and are
//! in increasing order of start offset and of line; a record is never empty and never has
//! more samples than bytes. The options block is also the fingerprint hashed into the cache
//! file's name.
//!
//! Version 2 has version 1's layout; the scan that fills it changed: whitespace before a
//! file's first id no longer makes the file line mode, and with `skipSequenceIds` digits
//! after that whitespace are skipped. A version 1 cache of such a file lists other
//! sequences, so every version 1 cache is ignored with a warning and made again.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
// The writer's thread comes from the `crate::sync` shim. Three `std` uses stay, on purpose:
// `temp_path`'s counter is a `static`, which loom's atomics (no `const fn new`) cannot be, and
// it only makes names unique; the `Arc<CorpusIndex>` is the one the rest of the crate and its
// callers share the index through, not a synchronization point of the pipeline; and the
// `Mutex` that hands a writer's work to its thread (or back, when no thread starts) is taken
// once by whichever runs it.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::config::ReaderConfig;
use crate::index::scan::ScannedSequence;
use crate::index::{
    CorpusIndex, FileStamp, IndexError, IndexWarning, IndexedFile, KeyMode, WarningSink,
};
use crate::sync::thread;

/// Version of the cache format this build reads and writes.
pub const CACHE_FORMAT_VERSION: u32 = 2;

/// The first 8 bytes of every index cache file.
pub const CACHE_MAGIC: [u8; 8] = *b"CTFINDEX";

/// Bytes of the fixed header of a cache file.
const HEADER_LEN: usize = 80;
/// Bytes of one sequence record.
const RECORD_LEN: usize = 32;
/// Bytes of the trailing checksum.
const TRAILER_LEN: usize = 8;
/// Flag: the data file is in line mode.
const FLAG_LINE_MODE: u32 = 1;
/// Flag: `skipSequenceIds`.
const FLAG_SKIP_IDS: u32 = 2;
/// Size of the reads of [`read_cache`].
const READ_BUFFER: usize = 1 << 20;
/// Size of the reads of the overflow list that runs alongside the records.
const OVERFLOW_BUFFER: usize = 64 * 1024;
/// Nanoseconds per second.
const NANOS: i128 = 1_000_000_000;

/// The indexing options an index depends on (SPEC §7.1: the configured aliases decide which
/// lines count).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IndexFingerprint {
    /// `skipSequenceIds`.
    pub skip_sequence_ids: bool,
    /// The configured aliases, in configuration order.
    pub aliases: Vec<String>,
    /// Position of the `definesMBSize` input among them.
    pub defining_input: Option<u32>,
}

impl IndexFingerprint {
    /// The fingerprint of a configuration.
    pub fn of(config: &ReaderConfig) -> Self {
        IndexFingerprint {
            skip_sequence_ids: config.skip_sequence_ids,
            aliases: config.inputs.iter().map(|i| i.alias.clone()).collect(),
            defining_input: config
                .inputs
                .iter()
                .position(|i| i.defines_mb_size)
                .map(|p| p as u32),
        }
    }

    /// The canonical encoding: the options block of the cache format (defining input u32,
    /// `u32::MAX` for none; `skipSequenceIds` u8; then each alias as its byte length u32 and
    /// its bytes; little-endian).
    pub fn encode(&self) -> Vec<u8> {
        let len = 5 + self.aliases.iter().map(|a| 4 + a.len()).sum::<usize>();
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&self.defining_input.unwrap_or(u32::MAX).to_le_bytes());
        out.push(u8::from(self.skip_sequence_ids));
        for alias in &self.aliases {
            // An alias of 4 GiB cannot be configured; saturating keeps this total.
            let alias_len = u32::try_from(alias.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&alias_len.to_le_bytes());
            out.extend_from_slice(alias.as_bytes());
        }
        out
    }
}

/// The cache file of data file `data` for `fingerprint`: `<data>.<hex>.ctfidx`, where `<hex>`
/// is the low 32 bits of XXH3-64 (seed 0) of [`IndexFingerprint::encode`], as 8 lowercase hex
/// digits.
pub fn cache_path(data: &Path, fingerprint: &IndexFingerprint) -> PathBuf {
    let tag = xxh3_64(&fingerprint.encode()) as u32;
    let mut name = data.as_os_str().to_owned();
    name.push(format!(".{tag:08x}.ctfidx"));
    PathBuf::from(name)
}

/// What a cache must describe to be used.
#[derive(Clone, Debug)]
pub struct CacheKey<'a> {
    /// The data file's stamp now.
    pub stamp: FileStamp,
    /// Its content hash now.
    pub content_hash: u64,
    /// The indexing options now.
    pub fingerprint: &'a IndexFingerprint,
    /// Line-mode key of the file's first line.
    pub key_base: u64,
}

/// File-level facts read from a valid cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedFile {
    /// Id or line mode.
    pub mode: KeyMode,
    /// Physical lines.
    pub lines: u64,
    /// Lines holding each configured input.
    pub input_lines: Vec<u64>,
}

/// The outcome of looking for a cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheRead {
    /// The cache was valid; its sequences were pushed.
    Loaded(CachedFile),
    /// There is no cache file.
    Absent,
    /// Something other than a regular file (a directory, a FIFO, ...) is at the cache path:
    /// it is left alone, and no cache is written there.
    NotAFile,
    /// The cache cannot be used (the reason, for a warning); whatever was pushed must be
    /// discarded.
    Unusable(String),
}

/// Why a read stopped.
enum Fail {
    /// The cache cannot be used, for this reason.
    Unusable(String),
    /// `push` failed.
    Push(IndexError),
}

fn unusable(reason: impl Into<String>) -> Fail {
    Fail::Unusable(reason.into())
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut le = [0u8; 4];
    le.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(le)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut le = [0u8; 8];
    le.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(le)
}

/// The fixed header of a cache file.
struct Header {
    magic: [u8; 8],
    version: u32,
    flags: u32,
    size: u64,
    mtime_secs: i64,
    mtime_nanos: u32,
    reserved: u32,
    content_hash: u64,
    lines: u64,
    sequences: u64,
    overflows: u64,
    options_len: u32,
    aliases: u32,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(&self.magic);
        out[8..12].copy_from_slice(&self.version.to_le_bytes());
        out[12..16].copy_from_slice(&self.flags.to_le_bytes());
        out[16..24].copy_from_slice(&self.size.to_le_bytes());
        out[24..32].copy_from_slice(&self.mtime_secs.to_le_bytes());
        out[32..36].copy_from_slice(&self.mtime_nanos.to_le_bytes());
        out[36..40].copy_from_slice(&self.reserved.to_le_bytes());
        out[40..48].copy_from_slice(&self.content_hash.to_le_bytes());
        out[48..56].copy_from_slice(&self.lines.to_le_bytes());
        out[56..64].copy_from_slice(&self.sequences.to_le_bytes());
        out[64..72].copy_from_slice(&self.overflows.to_le_bytes());
        out[72..76].copy_from_slice(&self.options_len.to_le_bytes());
        out[76..80].copy_from_slice(&self.aliases.to_le_bytes());
        out
    }

    /// Decodes the first [`HEADER_LEN`] bytes of `b`.
    fn decode(b: &[u8]) -> Header {
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&b[0..8]);
        Header {
            magic,
            version: u32_at(b, 8),
            flags: u32_at(b, 12),
            size: u64_at(b, 16),
            mtime_secs: u64_at(b, 24) as i64,
            mtime_nanos: u32_at(b, 32),
            reserved: u32_at(b, 36),
            content_hash: u64_at(b, 40),
            lines: u64_at(b, 48),
            sequences: u64_at(b, 56),
            overflows: u64_at(b, 64),
            options_len: u32_at(b, 72),
            aliases: u32_at(b, 76),
        }
    }

    /// The length a cache file with this header must have.
    fn file_len(&self) -> u128 {
        (HEADER_LEN + TRAILER_LEN) as u128
            + u128::from(self.options_len)
            + 8 * u128::from(self.aliases)
            + RECORD_LEN as u128 * u128::from(self.sequences)
            + 4 * u128::from(self.overflows)
    }
}

/// Sequential, hashing reads of a cache file through a fixed buffer.
struct Stream<'f> {
    file: &'f File,
    buf: Vec<u8>,
    /// Next unconsumed byte of `buf`.
    pos: usize,
    /// End of the valid bytes of `buf`.
    end: usize,
    /// Bytes of `buf` before this one are already hashed.
    hashed: usize,
    hasher: Xxh3,
}

impl<'f> Stream<'f> {
    fn new(file: &'f File) -> Self {
        Stream {
            file,
            buf: vec![0; READ_BUFFER],
            pos: 0,
            end: 0,
            hashed: 0,
            hasher: Xxh3::new(),
        }
    }

    /// The next `n` bytes (`n` at most the buffer size), hashed once consumed.
    fn take(&mut self, n: usize) -> Result<&[u8], Fail> {
        if self.end - self.pos < n {
            self.refill(n)?;
        }
        let at = self.pos;
        self.pos += n;
        Ok(&self.buf[at..at + n])
    }

    /// Moves the unconsumed bytes to the front and reads until `n` are there.
    fn refill(&mut self, n: usize) -> Result<(), Fail> {
        self.hasher.update(&self.buf[self.hashed..self.pos]);
        self.buf.copy_within(self.pos..self.end, 0);
        self.end -= self.pos;
        self.pos = 0;
        self.hashed = 0;
        while self.end < n {
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(unusable("it is truncated")),
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(unusable(format!("cannot read it: {e}"))),
            }
        }
        Ok(())
    }

    /// The hash of every byte consumed so far.
    fn digest(&mut self) -> u64 {
        self.hasher.update(&self.buf[self.hashed..self.pos]);
        self.hashed = self.pos;
        self.hasher.digest()
    }
}

/// The overflow list, read (positioned, unhashed) alongside the records so that each record
/// knows whether its id overflowed without holding the list in memory. The bytes it reads are
/// hashed so that the checked copy read later in file order can be compared with them.
struct OverflowCursor<'f> {
    file: &'f File,
    /// File offset of the next entry not yet in `buf`.
    offset: u64,
    /// Entries not yet in `buf`.
    unread: u64,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// Entries taken so far.
    taken: u64,
    hasher: Xxh3,
}

impl<'f> OverflowCursor<'f> {
    fn new(file: &'f File, offset: u64, count: u64) -> Self {
        let size = (count.saturating_mul(4)).min(OVERFLOW_BUFFER as u64) as usize;
        OverflowCursor {
            file,
            offset,
            unread: count,
            buf: vec![0; size],
            pos: 0,
            end: 0,
            taken: 0,
            hasher: Xxh3::new(),
        }
    }

    /// The next entry, if any.
    fn peek(&mut self) -> Result<Option<u32>, Fail> {
        if self.pos == self.end {
            if self.unread == 0 {
                return Ok(None);
            }
            let n = (self.unread.saturating_mul(4)).min(self.buf.len() as u64) as usize;
            match self.file.read_exact_at(&mut self.buf[..n], self.offset) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(unusable("it is truncated"))
                }
                Err(e) => return Err(unusable(format!("cannot read it: {e}"))),
            }
            self.hasher.update(&self.buf[..n]);
            self.offset += n as u64;
            self.unread -= n as u64 / 4;
            self.pos = 0;
            self.end = n;
        }
        Ok(Some(u32_at(&self.buf, self.pos)))
    }

    /// Consumes the entry [`peek`](Self::peek) returned.
    fn advance(&mut self) {
        self.pos += 4;
        self.taken += 1;
    }
}

/// Where a cache's sequences go as they are read (a closure taking each sequence is one).
pub trait CacheSink {
    /// `sequences` will follow (the header is checked, so the count agrees with the cache's
    /// size).
    fn reserve(&mut self, sequences: u64) {
        let _ = sequences;
    }

    /// The next sequence, in file order.
    fn push(&mut self, sequence: &ScannedSequence) -> Result<(), IndexError>;
}

impl<F: FnMut(&ScannedSequence) -> Result<(), IndexError>> CacheSink for F {
    fn push(&mut self, sequence: &ScannedSequence) -> Result<(), IndexError> {
        self(sequence)
    }
}

/// Reads and validates the cache at `path`, pushing its sequences in file order into `sink`.
pub fn read_cache(
    path: &Path,
    key: &CacheKey<'_>,
    sink: &mut dyn CacheSink,
) -> Result<CacheRead, IndexError> {
    // Only a regular file is opened: opening a FIFO would block until someone writes to it.
    match std::fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(CacheRead::Absent),
        Ok(meta) if !meta.is_file() => return Ok(CacheRead::NotAFile),
        _ => {}
    }
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(CacheRead::Absent),
        Err(e) => return Ok(CacheRead::Unusable(format!("cannot open it: {e}"))),
    };
    match read_open_cache(&file, key, sink) {
        Ok(cached) => Ok(CacheRead::Loaded(cached)),
        Err(Fail::Unusable(reason)) => Ok(CacheRead::Unusable(reason)),
        Err(Fail::Push(error)) => Err(error),
    }
}

fn read_open_cache(
    file: &File,
    key: &CacheKey<'_>,
    sink: &mut dyn CacheSink,
) -> Result<CachedFile, Fail> {
    let file_len = match file.metadata() {
        Ok(meta) => meta.len(),
        Err(e) => return Err(unusable(format!("cannot read it: {e}"))),
    };
    let mut stream = Stream::new(file);
    let header = Header::decode(stream.take(HEADER_LEN)?);

    // The header alone, before anything is read or allocated by its counts.
    if header.magic != CACHE_MAGIC {
        return Err(unusable("not an index cache (bad magic)"));
    }
    if header.version != CACHE_FORMAT_VERSION {
        return Err(unusable(format!(
            "unsupported format version {}",
            header.version
        )));
    }
    if header.flags & !(FLAG_LINE_MODE | FLAG_SKIP_IDS) != 0 {
        return Err(unusable(format!("unknown flags {:#x}", header.flags)));
    }
    if header.reserved != 0 || i128::from(header.mtime_nanos) >= NANOS {
        return Err(unusable("its header is malformed"));
    }
    let expected_len = header.file_len();
    if u128::from(file_len) < expected_len {
        return Err(unusable("it is truncated"));
    }
    if u128::from(file_len) > expected_len {
        return Err(unusable("it is longer than its header says"));
    }
    let stale = |what: &str| {
        unusable(format!(
            "it describes a different version of the data file ({what})"
        ))
    };
    if header.size != key.stamp.size {
        return Err(stale("size"));
    }
    let mtime_ns = i128::from(header.mtime_secs) * NANOS + i128::from(header.mtime_nanos);
    if mtime_ns != key.stamp.mtime_ns {
        return Err(stale("modification time"));
    }
    if header.content_hash != key.content_hash {
        return Err(stale("content"));
    }
    let options = key.fingerprint.encode();
    let other_options = || unusable("it was written with different indexing options");
    if (header.flags & FLAG_SKIP_IDS != 0) != key.fingerprint.skip_sequence_ids
        || header.options_len as usize != options.len()
        || header.aliases as usize != key.fingerprint.aliases.len()
    {
        return Err(other_options());
    }
    let mode = if header.flags & FLAG_LINE_MODE != 0 {
        KeyMode::Lines
    } else {
        KeyMode::Ids
    };
    if mode == KeyMode::Lines && header.overflows != 0 {
        return Err(unusable("it lists overflowing ids for a line-mode file"));
    }

    // Options block, compared piecewise (it is as long as the options now, checked above).
    for piece in options.chunks(OVERFLOW_BUFFER) {
        if stream.take(piece.len())? != piece {
            return Err(other_options());
        }
    }

    // Input line counts: as many as the configured aliases (checked above).
    let mut input_lines = Vec::with_capacity(key.fingerprint.aliases.len());
    for _ in 0..header.aliases {
        input_lines.push(u64_at(stream.take(8)?, 0));
    }

    // Records, with the overflow list read alongside them.
    let records_at =
        HEADER_LEN as u64 + u64::from(header.options_len) + 8 * u64::from(header.aliases);
    let overflow_at = records_at + RECORD_LEN as u64 * header.sequences;
    let mut cursor = OverflowCursor::new(file, overflow_at, header.overflows);
    sink.reserve(header.sequences);
    let mut prev_end = 0u64;
    let mut prev_line = 0u64;
    for ordinal in 0..header.sequences {
        let record = stream.take(RECORD_LEN)?;
        let stored_key = u64_at(record, 0);
        let start = u64_at(record, 8);
        let line = u64_at(record, 16);
        let len = u32_at(record, 24);
        let samples = u32_at(record, 28);
        let end = match start.checked_add(u64::from(len)) {
            Some(end) if len > 0 && end <= header.size => end,
            _ => {
                return Err(unusable(format!(
                    "sequence {ordinal} lies outside the data file"
                )))
            }
        };
        if start < prev_end {
            return Err(unusable(format!(
                "sequence {ordinal} overlaps the previous one"
            )));
        }
        if line <= prev_line || line > header.lines {
            return Err(unusable(format!(
                "sequence {ordinal} has an impossible line number"
            )));
        }
        if samples > len {
            return Err(unusable(format!(
                "sequence {ordinal} has more samples than bytes"
            )));
        }
        let (key_now, is_id) = match mode {
            KeyMode::Lines => {
                if stored_key != line - 1 {
                    return Err(unusable(format!(
                        "sequence {ordinal} has a key that is not its line"
                    )));
                }
                match key.key_base.checked_add(stored_key) {
                    Some(k) => (k, false),
                    None => return Err(unusable("its line keys overflow")),
                }
            }
            KeyMode::Ids => {
                let overflowed = match u32::try_from(ordinal) {
                    Ok(o) => cursor.peek()? == Some(o),
                    Err(_) => false,
                };
                if overflowed {
                    cursor.advance();
                }
                (stored_key, !overflowed)
            }
        };
        prev_end = end;
        prev_line = line;
        sink.push(&ScannedSequence {
            key: key_now,
            is_id,
            start,
            end,
            line,
            samples: u64::from(samples),
        })
        .map_err(Fail::Push)?;
    }

    // The overflow list in file order: strictly increasing and below N; every entry must
    // have been matched by a record above, and the bytes read then must be these.
    let mut listed = Xxh3::new();
    let mut prev: Option<u32> = None;
    for _ in 0..header.overflows {
        let bytes = stream.take(4)?;
        listed.update(bytes);
        let entry = u32_at(bytes, 0);
        if prev.is_some_and(|p| entry <= p) || u64::from(entry) >= header.sequences {
            return Err(unusable("its overflow list is not sorted or out of range"));
        }
        prev = Some(entry);
    }
    if cursor.taken != header.overflows || listed.digest() != cursor.hasher.digest() {
        return Err(unusable("its overflow list changed while it was read"));
    }

    let digest = stream.digest();
    let trailer = u64_at(stream.take(TRAILER_LEN)?, 0);
    if trailer != digest {
        return Err(unusable("checksum mismatch"));
    }
    Ok(CachedFile {
        mode,
        lines: header.lines,
        input_lines,
    })
}

/// A writer hashing everything written through it.
struct HashingWriter<W: Write> {
    inner: W,
    hasher: Xxh3,
}

impl<W: Write> HashingWriter<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hasher.update(bytes);
        self.inner.write_all(bytes)
    }
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("inconsistent index: {message}"),
    )
}

/// A name for a temporary file next to `path`, unique across processes and threads.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".tmp.{}.{nanos}.{count}", std::process::id()));
    PathBuf::from(name)
}

/// How old a temporary cache file of a process that no longer runs must be before it is
/// removed as abandoned (old enough that no writer on another machine sharing the
/// directory can still be at work on it).
pub const ABANDONED_AFTER: Duration = Duration::from_secs(3600);

/// Removes, from the directories the caches of `jobs` go to, the temporary files that
/// writers killed mid-write left behind: names of the form `<cache>.tmp.<pid>.<ns>.<n>`
/// whose process no longer runs on this machine (checked in `/proc`; where there is no
/// `/proc`, nothing is removed) and that were last modified more than `older_than` ago.
/// Failures are ignored: this is tidying, not correctness.
pub fn remove_abandoned_temps(jobs: &[CacheJob], older_than: Duration) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let mut dirs: Vec<&Path> = jobs.iter().filter_map(|job| job.path.parent()).collect();
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        let listed = if dir.as_os_str().is_empty() {
            fs::read_dir(".")
        } else {
            fs::read_dir(dir)
        };
        let Ok(entries) = listed else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(temp_writer_pid) else {
                continue;
            };
            if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
                continue;
            }
            let abandoned = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > older_than));
            if abandoned {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

/// The writer's process id, if `name` is a temporary cache file's name.
fn temp_writer_pid(name: &str) -> Option<u32> {
    let (cache, rest) = name.split_once(".ctfidx.tmp.")?;
    let mut parts = rest.split('.');
    let pid = parts.next()?.parse().ok()?;
    let numbers_follow = parts.clone().count() == 2 && parts.all(|p| p.parse::<u128>().is_ok());
    (!cache.is_empty() && numbers_follow).then_some(pid)
}

/// Writes the cache of file `file` of `index` to `path` atomically.
///
/// The cache goes to a uniquely named temporary file in the same directory, which is then
/// renamed over `path`; on failure the temporary file is removed and the error returned.
pub fn write_cache(
    path: &Path,
    index: &CorpusIndex,
    file: u32,
    fingerprint: &IndexFingerprint,
) -> io::Result<()> {
    let tmp = temp_path(path);
    let out = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    let result = write_to(out, index, file, fingerprint).and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes the whole cache of file `file` to `out`.
fn write_to(
    out: File,
    index: &CorpusIndex,
    file: u32,
    fingerprint: &IndexFingerprint,
) -> io::Result<()> {
    let f: &IndexedFile = index
        .files
        .get(file as usize)
        .ok_or_else(|| invalid("no such file"))?;
    let chunks = index
        .chunks
        .get(f.chunks.start as usize..f.chunks.end as usize)
        .ok_or_else(|| invalid("chunk range"))?;
    let first = chunks.first().map_or(0, |c| c.sequences.start);
    let last = chunks.last().map_or(first, |c| c.sequences.end);
    let count = last
        .checked_sub(first)
        .ok_or_else(|| invalid("sequence range"))?;
    let overflows: &[u32] = match f.mode {
        KeyMode::Ids => {
            let lo = index.overflowing_ids.partition_point(|&o| o < first);
            let hi = index.overflowing_ids.partition_point(|&o| o < last);
            index.overflowing_ids.get(lo..hi).unwrap_or(&[])
        }
        KeyMode::Lines => &[],
    };
    if f.input_lines.len() != fingerprint.aliases.len() {
        return Err(invalid("input line counts do not match the aliases"));
    }
    let options = fingerprint.encode();
    let mut flags = 0;
    if f.mode == KeyMode::Lines {
        flags |= FLAG_LINE_MODE;
    }
    if fingerprint.skip_sequence_ids {
        flags |= FLAG_SKIP_IDS;
    }
    let header = Header {
        magic: CACHE_MAGIC,
        version: CACHE_FORMAT_VERSION,
        flags,
        size: f.stamp.size,
        mtime_secs: i64::try_from(f.stamp.mtime_ns.div_euclid(NANOS))
            .map_err(|_| invalid("modification time out of range"))?,
        mtime_nanos: f.stamp.mtime_ns.rem_euclid(NANOS) as u32,
        reserved: 0,
        content_hash: f.content_hash,
        lines: f.lines,
        sequences: u64::from(count),
        overflows: overflows.len() as u64,
        options_len: u32::try_from(options.len()).map_err(|_| invalid("options too long"))?,
        aliases: u32::try_from(fingerprint.aliases.len())
            .map_err(|_| invalid("too many aliases"))?,
    };

    let mut w = HashingWriter {
        inner: BufWriter::with_capacity(READ_BUFFER, out),
        hasher: Xxh3::new(),
    };
    w.put(&header.encode())?;
    w.put(&options)?;
    for lines in &f.input_lines {
        w.put(&lines.to_le_bytes())?;
    }
    let mut next = first;
    for chunk in chunks {
        if chunk.sequences.start != next {
            return Err(invalid("chunks are not contiguous"));
        }
        let entries = index
            .sequences
            .get(chunk.sequences.start as usize..chunk.sequences.end as usize)
            .ok_or_else(|| invalid("sequence range"))?;
        for e in entries {
            let start = chunk
                .start
                .checked_add(u64::from(e.offset))
                .ok_or_else(|| invalid("offset overflow"))?;
            let line = chunk
                .first_line
                .checked_add(u64::from(e.line))
                .ok_or_else(|| invalid("line overflow"))?;
            let key = match f.mode {
                KeyMode::Ids => e.key,
                KeyMode::Lines => e.key.wrapping_sub(f.key_base),
            };
            let mut record = [0u8; RECORD_LEN];
            record[0..8].copy_from_slice(&key.to_le_bytes());
            record[8..16].copy_from_slice(&start.to_le_bytes());
            record[16..24].copy_from_slice(&line.to_le_bytes());
            record[24..28].copy_from_slice(&e.len.to_le_bytes());
            record[28..32].copy_from_slice(&e.samples.to_le_bytes());
            w.put(&record)?;
        }
        next = chunk.sequences.end;
    }
    for &o in overflows {
        w.put(&(o - first).to_le_bytes())?;
    }
    let digest = w.hasher.digest();
    let mut inner = w.inner;
    inner.write_all(&digest.to_le_bytes())?;
    inner.into_inner().map_err(|e| e.into_error())?;
    Ok(())
}

/// One cache to write.
#[derive(Clone, Debug)]
pub struct CacheJob {
    /// The file in the index.
    pub file: u32,
    /// Where its cache goes.
    pub path: PathBuf,
}

/// A background thread writing index caches.
///
/// Dropping it waits for the thread, like [`wait`](Self::wait), so every cache it was given is
/// complete (or has failed with a warning) and no temporary file is left behind.
pub struct CacheWriter {
    handle: Option<thread::JoinHandle<()>>,
}

/// Writes each job's cache in order, reporting failures to `on_warning`.
fn write_jobs(
    index: &CorpusIndex,
    jobs: &[CacheJob],
    fingerprint: &IndexFingerprint,
    on_warning: &WarningSink,
) {
    remove_abandoned_temps(jobs, ABANDONED_AFTER);
    for job in jobs {
        if let Err(error) = write_cache(&job.path, index, job.file, fingerprint) {
            on_warning(&IndexWarning {
                file: job.path.display().to_string(),
                message: format!("cannot write the index cache: {error}"),
            });
        }
    }
}

impl CacheWriter {
    /// Starts writing the caches of `jobs`, in order, in a thread named `ctf-index-cache`.
    /// Each failure is reported to `on_warning` and the next job goes on. If no thread can be
    /// started, the caches are written before this returns.
    pub fn spawn(
        index: Arc<CorpusIndex>,
        jobs: Vec<CacheJob>,
        fingerprint: IndexFingerprint,
        on_warning: WarningSink,
    ) -> CacheWriter {
        Self::run(move || write_jobs(&index, &jobs, &fingerprint, &on_warning))
    }

    /// Runs `write` in a thread named `ctf-index-cache`, or before returning if no thread
    /// can be started.
    pub(crate) fn run(write: impl FnOnce() + Send + 'static) -> CacheWriter {
        // The work is shared so that it can still run here if the thread does not start.
        let work = Arc::new(std::sync::Mutex::new(Some(write)));
        let shared = Arc::clone(&work);
        let take =
            |w: &std::sync::Mutex<Option<_>>| w.lock().unwrap_or_else(|e| e.into_inner()).take();
        let spawned = thread::Builder::new()
            .name("ctf-index-cache".to_string())
            .spawn(move || {
                if let Some(write) = take(&shared) {
                    write();
                }
            });
        match spawned {
            Ok(handle) => CacheWriter {
                handle: Some(handle),
            },
            Err(_) => {
                if let Some(write) = take(&work) {
                    write();
                }
                CacheWriter { handle: None }
            }
        }
    }

    /// Waits until every cache is written (or has failed with a warning).
    pub fn wait(mut self) {
        self.join();
    }

    fn join(&mut self) {
        if let Some(handle) = self.handle.take() {
            // A panic in the thread (a panicking warning sink) is not the caller's to rethrow.
            let _ = handle.join();
        }
    }
}

impl Drop for CacheWriter {
    fn drop(&mut self) {
        self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Chunk, SequenceEntry};
    use std::sync::Mutex;

    /// (key, offset in chunk, len, samples, line in chunk)
    type E = (u64, u32, u32, u32, u32);

    struct FileSpec {
        mode: KeyMode,
        lines: u64,
        size: u64,
        mtime_ns: i128,
        hash: u64,
        input_lines: Vec<u64>,
        /// (start, first line, entries)
        chunks: Vec<(u64, u64, Vec<E>)>,
    }

    fn build(specs: Vec<FileSpec>, overflowing_ids: Vec<u32>) -> CorpusIndex {
        let mut index = CorpusIndex::default();
        let mut key_base = 0;
        for (i, spec) in specs.into_iter().enumerate() {
            let first_chunk = index.chunks.len() as u32;
            for (start, first_line, entries) in spec.chunks {
                let first = index.sequences.len() as u32;
                let end = entries
                    .iter()
                    .map(|e| start + u64::from(e.1 + e.2))
                    .max()
                    .unwrap_or(start);
                let samples = entries.iter().map(|e| u64::from(e.3)).sum();
                for (key, offset, len, samples, line) in entries {
                    index.sequences.push(SequenceEntry {
                        key,
                        offset,
                        len,
                        samples,
                        line,
                    });
                }
                index.chunks.push(Chunk {
                    file: i as u32,
                    start,
                    len: (end - start) as u32,
                    first_line,
                    sequences: first..index.sequences.len() as u32,
                    samples,
                });
            }
            index.files.push(IndexedFile {
                name: format!("f{i}.ctf"),
                path: PathBuf::from(format!("f{i}.ctf")),
                stamp: FileStamp {
                    size: spec.size,
                    mtime_ns: spec.mtime_ns,
                    dev: 1,
                    ino: 100 + i as u64,
                },
                content_hash: spec.hash,
                mode: spec.mode,
                lines: spec.lines,
                key_base,
                chunks: first_chunk..index.chunks.len() as u32,
                input_lines: spec.input_lines,
            });
            key_base += spec.lines;
        }
        index.overflowing_ids = overflowing_ids;
        index
    }

    fn fingerprint() -> IndexFingerprint {
        IndexFingerprint {
            skip_sequence_ids: false,
            aliases: vec!["a".to_string(), "feat".to_string()],
            defining_input: Some(1),
        }
    }

    /// File 0: id mode, two chunks, an overflowing id (global 1). File 1: line mode,
    /// key_base 10, negative mtime. File 2: id mode, overflowing id at global 7 (local 1).
    fn corpus() -> CorpusIndex {
        build(
            vec![
                FileSpec {
                    mode: KeyMode::Ids,
                    lines: 10,
                    size: 500,
                    mtime_ns: 1_700_000_000_123_456_789,
                    hash: 0x1111,
                    input_lines: vec![6, 2],
                    chunks: vec![
                        (0, 1, vec![(5, 0, 40, 2, 0), (u64::MAX, 40, 60, 3, 3)]),
                        (150, 7, vec![(8, 0, 100, 1, 0)]),
                    ],
                },
                FileSpec {
                    mode: KeyMode::Lines,
                    lines: 3,
                    size: 30,
                    mtime_ns: -1_500_000_001,
                    hash: 0x2222,
                    input_lines: vec![3, 0],
                    chunks: vec![(
                        0,
                        1,
                        vec![(10, 0, 10, 1, 0), (11, 10, 10, 1, 1), (12, 20, 10, 0, 2)],
                    )],
                },
                FileSpec {
                    mode: KeyMode::Ids,
                    lines: 6,
                    size: 90,
                    mtime_ns: 0,
                    hash: 0x3333,
                    input_lines: vec![4, 1],
                    chunks: vec![
                        (0, 1, vec![(1, 0, 30, 2, 0), (u64::MAX, 30, 30, 2, 2)]),
                        (70, 5, vec![(3, 0, 20, 1, 0)]),
                    ],
                },
            ],
            vec![1, 7],
        )
    }

    fn seq(
        key: u64,
        is_id: bool,
        start: u64,
        end: u64,
        line: u64,
        samples: u64,
    ) -> ScannedSequence {
        ScannedSequence {
            key,
            is_id,
            start,
            end,
            line,
            samples,
        }
    }

    fn key_of<'a>(index: &CorpusIndex, file: usize, fp: &'a IndexFingerprint) -> CacheKey<'a> {
        let f = &index.files[file];
        CacheKey {
            stamp: f.stamp,
            content_hash: f.content_hash,
            fingerprint: fp,
            key_base: f.key_base,
        }
    }

    fn read(path: &Path, key: &CacheKey<'_>) -> (CacheRead, Vec<ScannedSequence>) {
        let mut got = Vec::new();
        let outcome = read_cache(path, key, &mut |s: &ScannedSequence| {
            got.push(*s);
            Ok(())
        })
        .unwrap();
        (outcome, got)
    }

    fn reason(outcome: CacheRead) -> String {
        match outcome {
            CacheRead::Unusable(reason) => reason,
            other => panic!("expected Unusable, got {other:?}"),
        }
    }

    /// Writes file `file`'s cache into `dir` and returns its path.
    fn written(dir: &Path, index: &CorpusIndex, file: u32) -> PathBuf {
        let fp = fingerprint();
        let path = cache_path(&dir.join(format!("f{file}.ctf")), &fp);
        write_cache(&path, index, file, &fp).unwrap();
        path
    }

    /// Replaces the trailer by the checksum of the rest.
    fn fix_checksum(bytes: &mut [u8]) {
        let n = bytes.len() - 8;
        let digest = xxh3_64(&bytes[..n]);
        bytes[n..].copy_from_slice(&digest.to_le_bytes());
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn round_trip_id_and_line_mode() {
        let dir = tempfile::tempdir().unwrap();
        let index = corpus();
        let fp = fingerprint();
        let expected = [
            vec![
                seq(5, true, 0, 40, 1, 2),
                seq(u64::MAX, false, 40, 100, 4, 3),
                seq(8, true, 150, 250, 7, 1),
            ],
            vec![
                seq(10, false, 0, 10, 1, 1),
                seq(11, false, 10, 20, 2, 1),
                seq(12, false, 20, 30, 3, 0),
            ],
            vec![
                seq(1, true, 0, 30, 1, 2),
                seq(u64::MAX, false, 30, 60, 3, 2),
                seq(3, true, 70, 90, 5, 1),
            ],
        ];
        for file in 0..3 {
            let path = written(dir.path(), &index, file);
            let (outcome, got) = read(&path, &key_of(&index, file as usize, &fp));
            let f = &index.files[file as usize];
            assert_eq!(
                outcome,
                CacheRead::Loaded(CachedFile {
                    mode: f.mode,
                    lines: f.lines,
                    input_lines: f.input_lines.clone(),
                })
            );
            assert_eq!(got, expected[file as usize], "file {file}");
            let len = fs::metadata(&path).unwrap().len();
            assert_eq!(
                len,
                88 + fp.encode().len() as u64 + 16 + 32 * 3 + {
                    if file == 1 {
                        0
                    } else {
                        4
                    }
                }
            );
        }
        // Line-mode keys follow the key base given now (the files before may have changed).
        let path = cache_path(&dir.path().join("f1.ctf"), &fp);
        let mut key = key_of(&index, 1, &fp);
        key.key_base = 100;
        let (outcome, got) = read(&path, &key);
        assert!(matches!(outcome, CacheRead::Loaded(_)));
        let keys: Vec<u64> = got.iter().map(|s| s.key).collect();
        assert_eq!(keys, [100, 101, 102]);
        // Only the caches are in the directory: no temporary file is left.
        assert_eq!(entries(dir.path()).len(), 3);
    }

    #[test]
    fn empty_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = corpus();
        // A file with no chunks after the others.
        let mut empty = index.files[2].clone();
        empty.chunks = 5..5;
        empty.mode = KeyMode::Lines;
        empty.lines = 0;
        index.files.push(empty);
        let fp = fingerprint();
        let path = written(dir.path(), &index, 3);
        let (outcome, got) = read(&path, &key_of(&index, 3, &fp));
        assert!(matches!(outcome, CacheRead::Loaded(ref c) if c.lines == 0));
        assert!(got.is_empty());
    }

    #[test]
    fn cache_path_depends_on_fingerprint() {
        let fp = fingerprint();
        let data = Path::new("/data/train.ctf");
        let path = cache_path(data, &fp);
        let tag = xxh3_64(&fp.encode()) as u32;
        assert_eq!(
            path,
            PathBuf::from(format!("/data/train.ctf.{tag:08x}.ctfidx"))
        );
        let mut other = fp.clone();
        other.aliases.pop();
        assert_ne!(cache_path(data, &other), path);
        let mut other = fp.clone();
        other.defining_input = None;
        assert_ne!(cache_path(data, &other), path);
        let mut other = fp.clone();
        other.skip_sequence_ids = true;
        assert_ne!(cache_path(data, &other), path);
        // The canonical encoding.
        assert_eq!(
            fp.encode(),
            [
                &1u32.to_le_bytes()[..],
                &[0],
                &1u32.to_le_bytes(),
                b"a",
                &4u32.to_le_bytes(),
                b"feat"
            ]
            .concat()
        );
    }

    #[test]
    fn stale_data_or_options_make_it_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let index = corpus();
        let fp = fingerprint();
        let path = written(dir.path(), &index, 0);

        let mut key = key_of(&index, 0, &fp);
        key.stamp.size += 1;
        let r = reason(read(&path, &key).0);
        assert_eq!(
            r,
            "it describes a different version of the data file (size)"
        );

        let mut key = key_of(&index, 0, &fp);
        key.stamp.mtime_ns += 1;
        assert!(reason(read(&path, &key).0).contains("modification time"));

        let mut key = key_of(&index, 0, &fp);
        key.content_hash ^= 1;
        assert!(reason(read(&path, &key).0).contains("content"));

        // Device and inode do not matter.
        let mut key = key_of(&index, 0, &fp);
        key.stamp.ino += 7;
        key.stamp.dev += 7;
        assert!(matches!(read(&path, &key).0, CacheRead::Loaded(_)));

        for change in 0..4 {
            let mut other = fp.clone();
            match change {
                0 => other.aliases[1] = "feaT".to_string(),
                1 => other.defining_input = Some(0),
                2 => other.skip_sequence_ids = true,
                _ => other.aliases.push("c".to_string()),
            }
            assert_ne!(
                cache_path(Path::new("x"), &other),
                cache_path(Path::new("x"), &fp)
            );
            let key = CacheKey {
                fingerprint: &other,
                ..key_of(&index, 0, &fp)
            };
            let r = reason(read(&path, &key).0);
            assert_eq!(
                r, "it was written with different indexing options",
                "{change}"
            );
        }
    }

    #[test]
    fn every_truncation_is_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let index = corpus();
        let fp = fingerprint();
        for file in [0, 1] {
            let path = written(dir.path(), &index, file);
            let bytes = fs::read(&path).unwrap();
            let key = key_of(&index, file as usize, &fp);
            let cut = dir.path().join("cut");
            for len in 0..bytes.len() {
                fs::write(&cut, &bytes[..len]).unwrap();
                let r = reason(read(&cut, &key).0);
                assert!(r.contains("truncated"), "{len}: {r}");
            }
            // A longer file is not used either.
            let mut longer = bytes.clone();
            longer.push(0);
            fs::write(&cut, &longer).unwrap();
            reason(read(&cut, &key).0);
        }
    }

    #[test]
    fn every_flipped_byte_is_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let index = corpus();
        let fp = fingerprint();
        for file in [0, 1, 2] {
            let path = written(dir.path(), &index, file);
            let bytes = fs::read(&path).unwrap();
            let key = key_of(&index, file as usize, &fp);
            let bad = dir.path().join("bad");
            for at in 0..bytes.len() {
                for flip in [0x01, 0x80, 0xff] {
                    let mut b = bytes.clone();
                    b[at] ^= flip;
                    fs::write(&bad, &b).unwrap();
                    let r = reason(read(&bad, &key).0);
                    if at >= bytes.len() - 8 {
                        assert_eq!(r, "checksum mismatch");
                    }
                }
            }
        }
    }

    #[test]
    fn wrong_version_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let index = corpus();
        let fp = fingerprint();
        let path = written(dir.path(), &index, 0);
        let mut bytes = fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
        fix_checksum(&mut bytes);
        fs::write(&path, &bytes).unwrap();
        let r = reason(read(&path, &key_of(&index, 0, &fp)).0);
        assert_eq!(r, "unsupported format version 7");
        bytes[0] = b'X';
        fs::write(&path, &bytes).unwrap();
        let r = reason(read(&path, &key_of(&index, 0, &fp)).0);
        assert_eq!(r, "not an index cache (bad magic)");
    }

    #[test]
    fn checksummed_but_inconsistent_records_are_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let index = corpus();
        let fp = fingerprint();
        let records = HEADER_LEN + fp.encode().len() + 16;
        let rec = |i: usize, field: usize| records + RECORD_LEN * i + field;
        let overflow = records + RECORD_LEN * 3;
        // (file, byte offset, new value as u64 little-endian truncated to `width` bytes, width,
        // expected words in the reason)
        let cases: Vec<(u32, usize, u64, usize, &str)> = vec![
            (0, rec(1, 8), 30, 8, "overlaps"), // start inside sequence 0
            (0, rec(2, 8), 450, 8, "sequence 2 lies outside"), // end beyond the data file
            (0, rec(0, 24), 0, 4, "sequence 0 lies outside"), // empty
            (0, rec(1, 16), 1, 8, "line"),     // line not increasing
            (0, rec(2, 16), 11, 8, "line"),    // line beyond the file
            (0, rec(0, 28), 41, 4, "samples"), // more samples than bytes
            (1, rec(1, 0), 5, 8, "key"),       // line-mode key not line − 1
            (0, overflow, 3, 4, "overflow"),   // ordinal ≥ N
            (0, 12, 1, 4, "overflowing ids"),  // line mode with an overflow list
            (0, 12, 4, 4, "flags"),            // unknown flag
            (0, 36, 1, 4, "malformed"),        // reserved ≠ 0
            (0, 32, 1_000_000_000, 4, "malformed"), // nanoseconds out of range
            (0, 64, 0, 8, "longer"),           // M = 0 with a list
        ];
        for (file, at, value, width, words) in cases {
            let path = written(dir.path(), &index, file);
            let mut bytes = fs::read(&path).unwrap();
            bytes[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
            fix_checksum(&mut bytes);
            fs::write(&path, &bytes).unwrap();
            let key = key_of(&index, file as usize, &fp);
            let r = reason(read(&path, &key).0);
            assert!(r.contains(words), "{at}: {r}");
        }
    }

    #[test]
    fn unsorted_overflow_list_is_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = corpus();
        index.overflowing_ids = vec![0, 1, 7];
        let fp = fingerprint();
        let path = written(dir.path(), &index, 0);
        let mut bytes = fs::read(&path).unwrap();
        let n = bytes.len();
        // Swap the two entries: 1, 0.
        bytes[n - 16..n - 12].copy_from_slice(&1u32.to_le_bytes());
        bytes[n - 12..n - 8].copy_from_slice(&0u32.to_le_bytes());
        fix_checksum(&mut bytes);
        fs::write(&path, &bytes).unwrap();
        let r = reason(read(&path, &key_of(&index, 0, &fp)).0);
        assert!(r.contains("overflow"), "{r}");
        // Written correctly, both are not ids.
        let path = written(dir.path(), &index, 0);
        let (outcome, got) = read(&path, &key_of(&index, 0, &fp));
        assert!(matches!(outcome, CacheRead::Loaded(_)));
        let ids: Vec<bool> = got.iter().map(|s| s.is_id).collect();
        assert_eq!(ids, [false, false, true]);
    }

    #[test]
    fn absent_cache() {
        let dir = tempfile::tempdir().unwrap();
        let index = corpus();
        let fp = fingerprint();
        let (outcome, got) = read(&dir.path().join("none.ctfidx"), &key_of(&index, 0, &fp));
        assert_eq!(outcome, CacheRead::Absent);
        assert!(got.is_empty());
    }

    #[test]
    fn huge_count_with_short_file() {
        let dir = tempfile::tempdir().unwrap();
        let index = corpus();
        let fp = fingerprint();
        let path = written(dir.path(), &index, 0);
        let key = key_of(&index, 0, &fp);
        for (at, width) in [(56, 8), (64, 8), (72, 4), (76, 4)] {
            let mut bytes = fs::read(&path).unwrap();
            bytes[at..at + width].copy_from_slice(&u64::MAX.to_le_bytes()[..width]);
            fix_checksum(&mut bytes);
            let bad = dir.path().join("huge");
            fs::write(&bad, &bytes).unwrap();
            let (outcome, got) = read(&bad, &key);
            assert!(reason(outcome).contains("truncated"));
            assert!(got.is_empty());
        }
    }

    #[test]
    fn push_error_is_propagated() {
        let dir = tempfile::tempdir().unwrap();
        let index = corpus();
        let fp = fingerprint();
        let path = written(dir.path(), &index, 0);
        let mut calls = 0;
        let result = read_cache(
            &path,
            &key_of(&index, 0, &fp),
            &mut |_: &ScannedSequence| {
                calls += 1;
                Err(IndexError::Data {
                    file: "f0.ctf".to_string(),
                    line: 0,
                    col: 0,
                    message: "too many sequences".to_string(),
                })
            },
        );
        assert!(matches!(result, Err(IndexError::Data { .. })));
        assert_eq!(calls, 1);
    }

    #[test]
    fn write_over_a_directory_fails_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let index = corpus();
        let fp = fingerprint();
        let path = cache_path(&dir.path().join("f0.ctf"), &fp);
        fs::create_dir(&path).unwrap();
        fs::write(path.join("inside"), "x").unwrap();
        assert!(write_cache(&path, &index, 0, &fp).is_err());
        assert_eq!(
            entries(dir.path()),
            [path.file_name().unwrap().to_string_lossy()]
        );
        // An index that does not hold the file is an error too, not a panic.
        assert!(write_cache(&dir.path().join("x"), &index, 9, &fp).is_err());
        assert_eq!(entries(dir.path()).len(), 1);
    }

    #[test]
    fn cache_writer_reports_failures_and_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let index = Arc::new(corpus());
        let fp = fingerprint();
        let blocked = cache_path(&dir.path().join("f0.ctf"), &fp);
        fs::create_dir(&blocked).unwrap();
        fs::write(blocked.join("inside"), "x").unwrap();
        let good = cache_path(&dir.path().join("f1.ctf"), &fp);
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&warnings);
        let writer = CacheWriter::spawn(
            Arc::clone(&index),
            vec![
                CacheJob {
                    file: 0,
                    path: blocked.clone(),
                },
                CacheJob {
                    file: 1,
                    path: good.clone(),
                },
            ],
            fp.clone(),
            Arc::new(move |w: &IndexWarning| sink.lock().unwrap().push(w.clone())),
        );
        writer.wait();
        let warnings = warnings.lock().unwrap();
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].file, blocked.display().to_string());
        assert!(warnings[0]
            .message
            .starts_with("cannot write the index cache: "));
        let (outcome, _) = read(&good, &key_of(&index, 1, &fp));
        assert!(matches!(outcome, CacheRead::Loaded(_)));
    }

    #[test]
    fn dropping_the_writer_finishes_the_caches() {
        let dir = tempfile::tempdir().unwrap();
        let index = Arc::new(corpus());
        let fp = fingerprint();
        let jobs: Vec<CacheJob> = (0..3)
            .map(|file| CacheJob {
                file,
                path: cache_path(&dir.path().join(format!("f{file}.ctf")), &fp),
            })
            .collect();
        drop(CacheWriter::spawn(
            Arc::clone(&index),
            jobs.clone(),
            fp.clone(),
            Arc::new(|w: &IndexWarning| panic!("{w}")),
        ));
        assert_eq!(entries(dir.path()).len(), 3);
        for job in &jobs {
            let (outcome, _) = read(&job.path, &key_of(&index, job.file as usize, &fp));
            assert!(matches!(outcome, CacheRead::Loaded(_)));
        }
    }

    #[test]
    fn concurrent_writers_leave_a_valid_cache() {
        let dir = tempfile::tempdir().unwrap();
        let index = Arc::new(corpus());
        let fp = fingerprint();
        let path = cache_path(&dir.path().join("f2.ctf"), &fp);
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (index, fp, path) = (Arc::clone(&index), fp.clone(), path.clone());
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        write_cache(&path, &index, 2, &fp).unwrap();
                    }
                })
            })
            .collect();
        for _ in 0..20 {
            // A reader meanwhile sees either no cache yet or a complete one.
            let (outcome, _) = read(&path, &key_of(&index, 2, &fp));
            assert!(matches!(outcome, CacheRead::Absent | CacheRead::Loaded(_)));
        }
        for w in writers {
            w.join().unwrap();
        }
        let (outcome, got) = read(&path, &key_of(&index, 2, &fp));
        assert!(matches!(outcome, CacheRead::Loaded(_)));
        assert_eq!(got.len(), 3);
        assert_eq!(entries(dir.path()).len(), 1);
    }
}
