//! Joining deserializers by sequence key (composite readers): the map from each sequence of
//! the first (primary) deserializer to the sequence with the same key in each other one.
//!
//! Each deserializer is indexed on its own ([`super::build`], with its own index cache). The
//! match is then made once, from the indexes alone: a joined deserializer's keys are sorted
//! (skipped when they already increase, as ids and line numbers usually do) and each primary
//! key is looked up, with a fast path for primary keys that follow the joined file's order.
//! The result is 4 bytes per primary sequence per joined deserializer; the sorted keys are
//! freed before returning. With `cacheIndex`, the result is saved (module `join_cache`). The primary index's sample counts become those of the joined
//! sequences, which is what the timeline plans minibatches with.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use crate::index::scan::is_space;
use crate::index::{CorpusIndex, IndexWarning};
use crate::quote::QUOTED_BYTES;

/// [`JoinedIndex::matches`] value of a primary sequence with no sequence of the same key.
pub const NO_MATCH: u32 = u32::MAX;

/// Keys listed in the warning about unmatched or repeated keys.
const LISTED_KEYS: usize = 5;

/// A joined deserializer's index, matched with the primary's sequences.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinedIndex {
    /// The index of its own files.
    pub index: Arc<CorpusIndex>,
    /// Per primary sequence (ordinal order): the ordinal in [`index`](Self::index) of its
    /// sequence with the same key, or [`NO_MATCH`] (also for primary sequences without
    /// samples, which join nothing).
    pub matches: Vec<u32>,
    /// Its files as configured, joined with ", " (diagnostics name it so).
    pub name: String,
    /// Its sequences holding samples whose key no primary sequence has: never read.
    pub unmatched: u64,
    /// Its sequences repeating the key of an earlier sequence of its files (an id, or a
    /// line-mode key): never read.
    pub repeated: u64,
}

/// For each sequence of `primary` (ordinal order), the ordinal of the sequence of `joined`
/// with the same key, or [`NO_MATCH`] (also for primary sequences without samples). Repeated
/// keys, and ids too long for 64 bits on either side, match nothing.
pub(crate) fn match_keys(primary: &CorpusIndex, joined: &CorpusIndex) -> Vec<u32> {
    let mut by_key: Vec<(u64, u32)> = (0..joined.sequences.len() as u32)
        .filter(|&o| {
            joined.repeated.binary_search(&o).is_err()
                && joined.overflowing_ids.binary_search(&o).is_err()
        })
        .map(|o| (joined.sequences[o as usize].key, o))
        .collect();
    if !by_key.windows(2).all(|w| w[0].0 < w[1].0) {
        // Keys are unique once repeats are left out, so the order is total.
        by_key.sort_unstable();
    }
    let mut matches = Vec::with_capacity(primary.sequences.len());
    let mut hint = 0usize;
    let mut overflowing = primary.overflowing_ids.iter().peekable();
    for (ordinal, entry) in primary.sequences.iter().enumerate() {
        // An id too long for 64 bits has the key u64::MAX only as a placeholder: it is no
        // joined sequence's key, not even a genuine id u64::MAX.
        let overflows = overflowing.next_if_eq(&&(ordinal as u32)).is_some();
        if entry.samples == 0 || overflows {
            matches.push(NO_MATCH);
            continue;
        }
        let found = match by_key.get(hint) {
            Some(&(key, _)) if key == entry.key => Some(hint),
            _ => by_key.binary_search_by_key(&entry.key, |&(k, _)| k).ok(),
        };
        match found {
            Some(at) => {
                matches.push(by_key[at].1);
                hint = at + 1;
            }
            None => matches.push(NO_MATCH),
        }
    }
    matches
}

/// The joined deserializer `joined` (named `name`) with its `matches` to the primary's
/// sequences; its unmatched and repeated keys are counted and reported to `warn`.
pub(crate) fn joined_index(
    joined: Arc<CorpusIndex>,
    matches: Vec<u32>,
    name: String,
    warn: &dyn Fn(&IndexWarning),
) -> JoinedIndex {
    let mut matched = vec![false; joined.sequences.len()];
    for &m in &matches {
        if m != NO_MATCH {
            matched[m as usize] = true;
        }
    }
    let unmatched: Vec<u32> = (0..joined.sequences.len() as u32)
        .filter(|&o| {
            !matched[o as usize]
                && joined.sequences[o as usize].samples > 0
                && joined.repeated.binary_search(&o).is_err()
        })
        .collect();
    if !unmatched.is_empty() {
        warn(&IndexWarning {
            file: name.clone(),
            message: format!(
                "{} sequences have keys that the first deserializer does not have; they are \
                 not read (keys {})",
                unmatched.len(),
                listed(&joined, &unmatched)
            ),
        });
    }
    if !joined.repeated.is_empty() {
        warn(&IndexWarning {
            file: name.clone(),
            message: format!(
                "{} sequences repeat the key of an earlier sequence; they are not read (keys {})",
                joined.repeated.len(),
                listed(&joined, &joined.repeated)
            ),
        });
    }
    let (unmatched, repeated) = (unmatched.len() as u64, joined.repeated.len() as u64);
    JoinedIndex {
        index: joined,
        matches,
        name,
        unmatched,
        repeated,
    }
}

/// The keys of the first few of sequences `ordinals` of `index`, comma-separated, with ", ..."
/// when there are more.
fn listed(index: &CorpusIndex, ordinals: &[u32]) -> String {
    let mut text = ordinals
        .iter()
        .take(LISTED_KEYS)
        .map(|&o| listed_key(index, o))
        .collect::<Vec<_>>()
        .join(", ");
    if ordinals.len() > LISTED_KEYS {
        text.push_str(", ...");
    }
    text
}

/// The key of sequence `ordinal` of `index` as a warning lists it: an id too long for 64 bits
/// (whose key is only a placeholder) as written in its file, or where it is if that cannot be
/// read.
fn listed_key(index: &CorpusIndex, ordinal: u32) -> String {
    let entry = &index.sequences[ordinal as usize];
    if index.overflowing_ids.binary_search(&ordinal).is_err() {
        return entry.key.to_string();
    }
    let chunk = &index.chunks[index.chunks.partition_point(|c| c.sequences.end <= ordinal)];
    let file = &index.files[chunk.file as usize];
    written_id(&file.path, chunk.start + u64::from(entry.offset)).unwrap_or_else(|| {
        let line = chunk.first_line + u64::from(entry.line);
        format!("the id too long for 64 bits at {}:{line}", file.name)
    })
}

/// The id that starts the line at byte `offset` of the file at `path` (after the byte order
/// mark and whitespace that may precede a file's first id): its digits, or its first
/// [`QUOTED_BYTES`] digits and "..." when it is longer. `None` if the file cannot be read
/// or no id is there (the file changed).
fn written_id(path: &Path, offset: u64) -> Option<String> {
    let mut file = File::open(path).ok()?;
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut bytes = BufReader::new(file).bytes().map_while(Result::ok);
    let mut next = bytes.next();
    if offset == 0 && next == Some(0xEF) {
        if (bytes.next(), bytes.next()) != (Some(0xBB), Some(0xBF)) {
            return None;
        }
        next = bytes.next();
    }
    while next.is_some_and(is_space) {
        next = bytes.next();
    }
    let mut id = String::new();
    while let Some(digit @ b'0'..=b'9') = next {
        if id.len() == QUOTED_BYTES {
            id.push_str("...");
            break;
        }
        id.push(char::from(digit));
        next = bytes.next();
    }
    (!id.is_empty()).then_some(id)
}

/// Replaces the sample counts of `primary`'s sequences (and chunks) with those of the joined
/// sequences: the count of the input that defines minibatch sizes, in the deserializer
/// `defining` (0 is the primary) that has it, or else the largest count of all
/// deserializers. A sequence missing from a joined deserializer keeps its own count: it is
/// invalid, and takes its place on the timeline as any invalid sequence does.
pub(crate) fn join_sample_counts(
    primary: &mut CorpusIndex,
    joined: &[JoinedIndex],
    defining: Option<usize>,
) {
    for (ordinal, entry) in primary.sequences.iter_mut().enumerate() {
        if entry.samples == 0 {
            continue;
        }
        let mut counts = Vec::with_capacity(joined.len());
        for j in joined {
            match j.matches[ordinal] {
                NO_MATCH => break,
                m => counts.push(j.index.sequences[m as usize].samples),
            }
        }
        if counts.len() < joined.len() {
            continue;
        }
        entry.samples = match defining {
            Some(0) => entry.samples,
            Some(d) => counts[d - 1],
            None => counts.into_iter().fold(entry.samples, u32::max),
        };
    }
    for chunk in &mut primary.chunks {
        chunk.samples = primary.sequences
            [chunk.sequences.start as usize..chunk.sequences.end as usize]
            .iter()
            .map(|e| u64::from(e.samples))
            .sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Chunk, SequenceEntry};

    fn index(keys_samples: &[(u64, u32)], repeated: Vec<u32>) -> CorpusIndex {
        let sequences: Vec<SequenceEntry> = keys_samples
            .iter()
            .map(|&(key, samples)| SequenceEntry {
                key,
                offset: 0,
                len: 1,
                samples,
                line: 0,
            })
            .collect();
        CorpusIndex {
            chunks: vec![Chunk {
                file: 0,
                start: 0,
                len: 1,
                first_line: 1,
                sequences: 0..sequences.len() as u32,
                samples: 0,
            }],
            sequences,
            repeated,
            ..CorpusIndex::default()
        }
    }

    #[test]
    fn matches_by_key_in_any_order_and_reports_the_rest() {
        let primary = index(&[(5, 1), (3, 2), (9, 1), (4, 0), (7, 3)], vec![]);
        // Keys shuffled; 8 and 11 are not in the primary; the second 3 repeats a key.
        let joined = index(
            &[(9, 4), (8, 1), (3, 1), (5, 2), (3, 7), (11, 1), (4, 1)],
            vec![4],
        );
        let warnings = std::sync::Mutex::new(Vec::new());
        let matches = match_keys(&primary, &joined);
        let j = joined_index(Arc::new(joined), matches, "l.ctf".into(), &|w| {
            warnings.lock().unwrap().push(w.to_string())
        });
        assert_eq!(j.matches, [3, 2, 0, NO_MATCH, NO_MATCH]);
        assert_eq!(
            (j.unmatched, j.repeated),
            (3, 1),
            "8, 11 and 4 (no primary samples)"
        );
        assert_eq!(
            *warnings.lock().unwrap(),
            [
                "l.ctf: warning: 3 sequences have keys that the first deserializer does not \
                 have; they are not read (keys 8, 11, 4)",
                "l.ctf: warning: 1 sequences repeat the key of an earlier sequence; they are \
                 not read (keys 3)"
            ]
        );
        let mut joined_primary = primary.clone();
        join_sample_counts(&mut joined_primary, std::slice::from_ref(&j), None);
        let samples: Vec<u32> = joined_primary.sequences.iter().map(|e| e.samples).collect();
        assert_eq!(samples, [2, 2, 4, 0, 3], "max of both; unmatched 7 keeps 3");
        assert_eq!(joined_primary.chunks[0].samples, 11);
        let mut by_joined = primary.clone();
        join_sample_counts(&mut by_joined, std::slice::from_ref(&j), Some(1));
        let samples: Vec<u32> = by_joined.sequences.iter().map(|e| e.samples).collect();
        assert_eq!(samples, [2, 1, 4, 0, 3]);
        let mut by_primary = primary.clone();
        join_sample_counts(&mut by_primary, std::slice::from_ref(&j), Some(0));
        assert_eq!(by_primary.sequences, primary.sequences);
    }

    #[test]
    fn lists_at_most_five_keys() {
        let keys = index(&[(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 1)], vec![]);
        assert_eq!(listed(&keys, &[0, 1]), "1, 2");
        assert_eq!(listed(&keys, &[0, 1, 2, 3, 4]), "1, 2, 3, 4, 5");
        assert_eq!(listed(&keys, &[0, 1, 2, 3, 4, 5]), "1, 2, 3, 4, 5, ...");
    }

    /// A joined index of `text`, written to `l.ctf` in `dir`, with one chunk holding a sequence
    /// per line (all of them overflowing ids but the last).
    fn overflowing_index(dir: &Path, text: &[u8]) -> CorpusIndex {
        let path = dir.join("l.ctf");
        std::fs::write(&path, text).unwrap();
        let starts: Vec<usize> = std::iter::once(0)
            .chain(
                text.iter()
                    .enumerate()
                    .filter(|(_, &b)| b == b'\n')
                    .map(|(i, _)| i + 1),
            )
            .filter(|&at| at < text.len())
            .collect();
        let mut joined = index(
            &starts.iter().map(|_| (u64::MAX, 1)).collect::<Vec<_>>(),
            vec![],
        );
        for (line, (entry, &at)) in joined.sequences.iter_mut().zip(&starts).enumerate() {
            entry.offset = at as u32;
            entry.line = line as u32;
        }
        joined.overflowing_ids = (0..starts.len() as u32 - 1).collect();
        joined.files = vec![crate::index::IndexedFile {
            name: "l.ctf".into(),
            path,
            stamp: Default::default(),
            content_hash: 0,
            mode: crate::index::KeyMode::Ids,
            lines: starts.len() as u64,
            key_base: 0,
            chunks: 0..1,
            input_lines: vec![],
        }];
        joined
    }

    #[test]
    fn ids_too_long_for_64_bits_are_listed_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let long = "1".repeat(QUOTED_BYTES + 1);
        let text = format!(
            "\u{feff} \t88888888888888888888888 |y 1\n{long} |y 2\n18446744073709551615 |y 3\n"
        );
        let joined = overflowing_index(dir.path(), text.as_bytes());
        let primary = index(&[(u64::MAX, 1)], vec![]);
        let warnings = std::sync::Mutex::new(Vec::new());
        let matches = match_keys(&primary, &joined);
        let j = joined_index(Arc::new(joined), matches, "l.ctf".into(), &|w| {
            warnings.lock().unwrap().push(w.to_string())
        });
        // The genuine id u64::MAX is matched (the primary's key is an id here).
        assert_eq!(j.matches, [2]);
        assert_eq!(
            *warnings.lock().unwrap(),
            [format!(
                "l.ctf: warning: 2 sequences have keys that the first deserializer does not \
                 have; they are not read (keys 88888888888888888888888, {}...)",
                &long[..QUOTED_BYTES]
            )]
        );
        // Where the id is not there any more (the file changed), its place is listed.
        std::fs::write(dir.path().join("l.ctf"), "|y 1\n").unwrap();
        assert_eq!(
            listed(&j.index, &[0, 1]),
            "the id too long for 64 bits at l.ctf:1, the id too long for 64 bits at l.ctf:2"
        );
    }

    #[test]
    fn a_primary_id_too_long_for_64_bits_matches_nothing() {
        // Its key u64::MAX is a placeholder, not the genuine id u64::MAX of the joined file.
        let mut primary = index(&[(u64::MAX, 1), (4, 1)], vec![]);
        primary.overflowing_ids = vec![0];
        let joined = index(&[(4, 1), (u64::MAX, 1)], vec![]);
        assert_eq!(match_keys(&primary, &joined), [NO_MATCH, 0]);
    }
}
