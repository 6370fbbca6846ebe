//! The join cache: a composite reader's match of a joined deserializer's sequences to the
//! primary's ([`JoinedIndex::matches`](super::JoinedIndex::matches)), saved next to the
//! joined deserializer's first data file when its `cacheIndex` is true, so that a reader
//! whose index caches are valid does not sort and look up every key again.
//!
//! The file is `<joined data path>.<8 hex digits>.ctfjoin`; the digits are the low 32 bits of
//! XXH3-64 of the primary's file names and both deserializers' indexing options, so readers
//! joining different files keep separate caches. Its content is used only when its identity
//! (a hash of both deserializers' indexing options, of every file's name, size,
//! modification time, content hash, line count and mode, of the sequence counts, and of
//! every key, with the sequences no match takes) is that of the indexes just built;
//! anything else, or a damaged file, is ignored and the match is made again. (Until
//! 2026-12-07 the keys were not hashed.) Writes are atomic (a temporary file renamed over
//! the cache).
//!
//! # Format, version 2 (little-endian)
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 0 | 8 | magic `b"CTFJOIN\0"` |
//! | 8 | 4 | format version, u32 = 2 |
//! | 12 | 4 | reserved, u32 = 0 |
//! | 16 | 8 | identity, u64 |
//! | 24 | 8 | primary sequence count N, u64 |
//! | 32 | 8 | joined sequence count M, u64 |
//! | 40 | 4·N | matches: per primary sequence, the joined ordinal (< M) or `u32::MAX` |
//! | 40 + 4·N | 8 | trailer: XXH3-64 of every preceding byte, u64 |
//!
//! Version 2 changed what the matches mean: a joined sequence repeating a key across files of
//! different modes (an id equal to an earlier file's line-mode key, or the other way round)
//! matches nothing, nor does a primary id too long for 64 bits. A version 1 cache is made
//! again.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::index::build::{CacheMode, IndexSource};
use crate::index::cache::{temp_path, CacheWriter, IndexFingerprint};
use crate::index::join::match_keys;
use crate::index::{CorpusIndex, IndexWarning, WarningSink, NO_MATCH};

const MAGIC: &[u8; 8] = b"CTFJOIN\0";
const VERSION: u32 = 2;
const HEADER: usize = 40;

/// A joined deserializer's match with the primary (see [`cached_match`]).
pub(crate) struct CachedMatch {
    /// Per primary sequence, the joined ordinal or [`NO_MATCH`].
    pub matches: Vec<u32>,
    /// Whether it was made ([`IndexSource::Scanned`]) or read from the join cache.
    pub source: IndexSource,
    /// Join caches written before returning (0 or 1).
    pub written: usize,
    /// The background writer of the join cache.
    pub writer: Option<CacheWriter>,
}

/// The match of `joined`'s keys with `primary`'s: with [`CacheMode::Use`], read from a valid
/// join cache, or made and then written in the background; with [`CacheMode::Rebuild`], made
/// and written before returning; with [`CacheMode::Off`], made. A cache that cannot be
/// written is a warning.
pub(crate) fn cached_match(
    primary: &Side<'_>,
    joined: &Side<'_>,
    mode: CacheMode,
    on_warning: &WarningSink,
) -> CachedMatch {
    let path = match mode {
        CacheMode::Off => None,
        _ => join_cache_path(primary, joined),
    };
    let made = |matches| CachedMatch {
        matches,
        source: IndexSource::Scanned,
        written: 0,
        writer: None,
    };
    let Some(path) = path else {
        return made(match_keys(primary.index, joined.index));
    };
    let identity = identity(primary, joined);
    let (primary_count, joined_count) =
        (primary.index.sequences.len(), joined.index.sequences.len());
    if mode == CacheMode::Use {
        if let Some(matches) = read_join_cache(&path, identity, primary_count, joined_count) {
            return CachedMatch {
                matches,
                source: IndexSource::Cache,
                written: 0,
                writer: None,
            };
        }
    }
    let mut found = made(match_keys(primary.index, joined.index));
    let to_write = found.matches.clone();
    let on_warning = std::sync::Arc::clone(on_warning);
    let write = move || match write_join_cache(&path, identity, joined_count, &to_write) {
        Ok(()) => 1,
        Err(error) => {
            on_warning(&IndexWarning {
                file: path.display().to_string(),
                message: format!("cannot write the join cache: {error}"),
            });
            0
        }
    };
    if mode == CacheMode::Rebuild {
        found.written = write();
    } else {
        found.writer = Some(CacheWriter::run(move || {
            write();
        }));
    }
    found
}

/// One deserializer as the join cache identifies it: its index and indexing options.
pub(crate) struct Side<'a> {
    /// Its index (without joined deserializers).
    pub index: &'a CorpusIndex,
    /// Its indexing options.
    pub fingerprint: &'a IndexFingerprint,
}

/// The join cache of `joined` for `primary`: next to the joined deserializer's first file.
pub(crate) fn join_cache_path(primary: &Side<'_>, joined: &Side<'_>) -> Option<PathBuf> {
    let data = &joined.index.files.first()?.path;
    let mut tag = Xxh3::new();
    for file in &primary.index.files {
        tag.update(&(file.name.len() as u64).to_le_bytes());
        tag.update(file.name.as_bytes());
    }
    tag.update(&primary.fingerprint.encode());
    tag.update(&joined.fingerprint.encode());
    let mut name = data.as_os_str().to_owned();
    name.push(format!(".{:08x}.ctfjoin", tag.digest() as u32));
    Some(PathBuf::from(name))
}

/// The identity of a join: equal exactly when both indexes describe the same files read with
/// the same options and list the same keys. The keys are what the match is made of: a
/// rewrite that keeps a file's size, modification time and hashed ends passes the index
/// cache's checks, and the index rebuilt after the read that finds it (which removes the
/// stale index cache) has other keys, so the stale match must not pass.
pub(crate) fn identity(primary: &Side<'_>, joined: &Side<'_>) -> u64 {
    let mut h = Xxh3::new();
    for side in [primary, joined] {
        hash_keys(&mut h, side.index);
        let options = side.fingerprint.encode();
        h.update(&(options.len() as u64).to_le_bytes());
        h.update(&options);
        h.update(&(side.index.files.len() as u64).to_le_bytes());
        for file in &side.index.files {
            h.update(&(file.name.len() as u64).to_le_bytes());
            h.update(file.name.as_bytes());
            h.update(&file.stamp.size.to_le_bytes());
            h.update(&file.stamp.mtime_ns.to_le_bytes());
            h.update(&file.content_hash.to_le_bytes());
            h.update(&file.lines.to_le_bytes());
            h.update(&[file.mode as u8]);
        }
        h.update(&(side.index.sequences.len() as u64).to_le_bytes());
    }
    h.digest()
}

/// Feeds `index`'s keys to `h`, with the ordinals of its sequences that no match takes
/// (overflowing ids, repeated keys), in blocks rather than 8 bytes at a time.
fn hash_keys(h: &mut Xxh3, index: &CorpusIndex) {
    const BLOCK: usize = 8192;
    let mut block = Vec::with_capacity(BLOCK * 8);
    for keys in index.sequences.chunks(BLOCK) {
        block.clear();
        block.extend(keys.iter().flat_map(|entry| entry.key.to_le_bytes()));
        h.update(&block);
    }
    for ordinals in [&index.overflowing_ids, &index.repeated] {
        h.update(&(ordinals.len() as u64).to_le_bytes());
        block.clear();
        block.extend(ordinals.iter().flat_map(|o| o.to_le_bytes()));
        h.update(&block);
    }
}

/// The matches saved in `path`, if it is a valid join cache of `identity` for `primary`
/// sequences and `joined` sequences; `None` for a missing, stale or damaged one.
pub(crate) fn read_join_cache(
    path: &Path,
    identity: u64,
    primary: usize,
    joined: usize,
) -> Option<Vec<u32>> {
    let expected = HEADER
        .checked_add(primary.checked_mul(4)?)?
        .checked_add(8)?;
    let mut file = File::open(path).ok()?;
    if file.metadata().ok()?.len() != expected as u64 {
        return None;
    }
    let mut bytes = Vec::with_capacity(expected);
    file.read_to_end(&mut bytes).ok()?;
    if bytes.len() != expected {
        return None;
    }
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    let body = expected - 8;
    let valid = &bytes[..8] == MAGIC
        && bytes[8..12] == VERSION.to_le_bytes()
        && bytes[12..16] == [0; 4]
        && u64_at(16) == identity
        && u64_at(24) == primary as u64
        && u64_at(32) == joined as u64
        && u64_at(body) == xxh3_64(&bytes[..body]);
    if !valid {
        return None;
    }
    let matches: Vec<u32> = bytes[HEADER..body]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    matches
        .iter()
        .all(|&m| m == NO_MATCH || (m as usize) < joined)
        .then_some(matches)
}

/// Writes `matches` (of a join of `identity` with `joined` sequences) to `path` atomically.
pub(crate) fn write_join_cache(
    path: &Path,
    identity: u64,
    joined: usize,
    matches: &[u32],
) -> io::Result<()> {
    let tmp = temp_path(path);
    let result = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|out| write_to(out, identity, joined, matches))
        .and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_to(out: File, identity: u64, joined: usize, matches: &[u32]) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let mut hash = Xxh3::new();
    let mut put = |bytes: &[u8]| -> io::Result<()> {
        hash.update(bytes);
        out.write_all(bytes)
    };
    put(MAGIC)?;
    put(&VERSION.to_le_bytes())?;
    put(&[0; 4])?;
    put(&identity.to_le_bytes())?;
    put(&(matches.len() as u64).to_le_bytes())?;
    put(&(joined as u64).to_le_bytes())?;
    let mut block = Vec::with_capacity(4 << 12);
    for run in matches.chunks(1 << 12) {
        block.clear();
        for m in run {
            block.extend_from_slice(&m.to_le_bytes());
        }
        put(&block)?;
    }
    let digest = hash.digest();
    out.write_all(&digest.to_le_bytes())?;
    out.into_inner().map_err(|e| e.into_error())?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_anything_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.ctf.00000000.ctfjoin");
        let matches = vec![3, NO_MATCH, 0, 2];
        write_join_cache(&path, 77, 5, &matches).unwrap();
        assert_eq!(read_join_cache(&path, 77, 4, 5), Some(matches.clone()));
        assert_eq!(read_join_cache(&path, 78, 4, 5), None, "another identity");
        assert_eq!(
            read_join_cache(&path, 77, 3, 5),
            None,
            "another primary count"
        );
        assert_eq!(
            read_join_cache(&path, 77, 4, 4),
            None,
            "another joined count"
        );
        let crafted = dir.path().join("crafted.ctfjoin");
        write_join_cache(&crafted, 77, 3, &matches).unwrap();
        assert_eq!(
            read_join_cache(&crafted, 77, 4, 3),
            None,
            "a match out of range"
        );
        let mut bytes = fs::read(&path).unwrap();
        for at in [0, 8, 12, 16, 24, 40, bytes.len() - 1] {
            bytes[at] ^= 1;
            fs::write(&path, &bytes).unwrap();
            assert_eq!(read_join_cache(&path, 77, 4, 5), None, "byte {at} flipped");
            bytes[at] ^= 1;
        }
        fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert_eq!(read_join_cache(&path, 77, 4, 5), None, "truncated");
        assert_eq!(read_join_cache(&dir.path().join("none"), 77, 4, 5), None);
    }

    #[test]
    fn a_cache_of_version_1_is_made_again() {
        // Version 1 matched keys that repeat across files of different modes, and primary ids
        // too long for 64 bits.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.ctf.00000000.ctfjoin");
        let matches = vec![1, 0];
        write_join_cache(&path, 77, 3, &matches).unwrap();
        let mut bytes = fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        let body = bytes.len() - 8;
        let digest = xxh3_64(&bytes[..body]).to_le_bytes();
        bytes[body..].copy_from_slice(&digest);
        fs::write(&path, &bytes).unwrap();
        assert_eq!(read_join_cache(&path, 77, 2, 3), None);
    }
}
