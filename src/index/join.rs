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

use std::sync::Arc;

use crate::index::{CorpusIndex, IndexWarning};

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
    /// Its sequences repeating a key used earlier in its files: never read.
    pub repeated: u64,
}

/// For each sequence of `primary` (ordinal order), the ordinal of the sequence of `joined`
/// with the same key, or [`NO_MATCH`] (also for primary sequences without samples). Repeated
/// and overflowing keys of `joined` match nothing.
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
    for entry in &primary.sequences {
        if entry.samples == 0 {
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
    let unmatched_keys: Vec<u64> = (0..joined.sequences.len())
        .filter(|&o| {
            !matched[o]
                && joined.sequences[o].samples > 0
                && joined.repeated.binary_search(&(o as u32)).is_err()
        })
        .map(|o| joined.sequences[o].key)
        .collect();
    let repeated_keys: Vec<u64> = joined
        .repeated
        .iter()
        .map(|&o| joined.sequences[o as usize].key)
        .collect();
    if !unmatched_keys.is_empty() {
        warn(&IndexWarning {
            file: name.clone(),
            message: format!(
                "{} sequences have keys that the first deserializer does not have; they are \
                 not read (keys {})",
                unmatched_keys.len(),
                listed(&unmatched_keys)
            ),
        });
    }
    if !repeated_keys.is_empty() {
        warn(&IndexWarning {
            file: name.clone(),
            message: format!(
                "{} sequences repeat a key used earlier in the file; they are not read (keys {})",
                repeated_keys.len(),
                listed(&repeated_keys)
            ),
        });
    }
    JoinedIndex {
        index: joined,
        matches,
        name,
        unmatched: unmatched_keys.len() as u64,
        repeated: repeated_keys.len() as u64,
    }
}

/// The first few keys, comma-separated, with ", ..." when there are more.
fn listed(keys: &[u64]) -> String {
    let mut text = keys
        .iter()
        .take(LISTED_KEYS)
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if keys.len() > LISTED_KEYS {
        text.push_str(", ...");
    }
    text
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
                "l.ctf: warning: 1 sequences repeat a key used earlier in the file; they are \
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
        assert_eq!(listed(&[1, 2]), "1, 2");
        assert_eq!(listed(&[1, 2, 3, 4, 5]), "1, 2, 3, 4, 5");
        assert_eq!(listed(&[1, 2, 3, 4, 5, 6]), "1, 2, 3, 4, 5, ...");
    }
}
