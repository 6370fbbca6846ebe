//! The keys the streaming parser has seen, kept small: `validate` and `dump` check every
//! sequence's key against those of the sequences before it (SPEC §7.1), so they remember
//! every key, and this module decides what that costs.
//!
//! Files almost always number their sequences in increasing order (0, 1, 2, …), and a file
//! without ids numbers them by line. Keys that come in increasing order are kept as runs of
//! consecutive keys ([`KeyRuns`]), so a file numbered 0, 1, 2, … takes one run however many
//! sequences it has; only a key smaller than one seen before goes into a hash set
//! ([`SeenKeys`]). A hash set of every id, as before, took about 22 bytes a sequence:
//! `validate` of 5,000,000 sequences numbered 0 to 4,999,999 peaked at 131 MB, and now at
//! 20 MB.

use std::collections::HashSet;

/// Keys given in strictly increasing order, kept as runs of consecutive keys.
#[derive(Clone, Debug, Default)]
struct KeyRuns {
    /// `(first, last)` of each run, both included, in increasing order; a run's `first` is
    /// more than one past the `last` of the run before it.
    runs: Vec<(u64, u64)>,
}

impl KeyRuns {
    /// The largest key pushed, if any.
    fn last(&self) -> Option<u64> {
        self.runs.last().map(|&(_, last)| last)
    }

    /// Adds `key`, which must be larger than every key pushed before (see [`KeyRuns::last`]).
    fn push(&mut self, key: u64) {
        debug_assert!(self.last().is_none_or(|last| key > last));
        match self.runs.last_mut() {
            Some((_, last)) if last.checked_add(1) == Some(key) => *last = key,
            _ => self.runs.push((key, key)),
        }
    }

    /// Whether `key` was pushed.
    fn contains(&self, key: u64) -> bool {
        let after = self.runs.partition_point(|&(first, _)| first <= key);
        after > 0 && self.runs[after - 1].1 >= key
    }

    /// Whether no key was pushed.
    fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// Keys in any order: those larger than every key before them as [`KeyRuns`], the others
/// in a hash set.
#[derive(Clone, Debug, Default)]
pub(crate) struct SeenKeys {
    increasing: KeyRuns,
    /// Keys that came after a larger one and were not seen before.
    out_of_order: HashSet<u64>,
}

impl SeenKeys {
    /// Adds `key`; whether it is new (`false`: it was seen before).
    pub(crate) fn insert(&mut self, key: u64) -> bool {
        match self.increasing.last() {
            Some(last) if key <= last => {
                !self.increasing.contains(key) && self.out_of_order.insert(key)
            }
            // Larger than every key so far, so in neither set.
            _ => {
                self.increasing.push(key);
                true
            }
        }
    }

    /// Whether `key` was added.
    pub(crate) fn contains(&self, key: u64) -> bool {
        self.increasing.contains(key) || self.out_of_order.contains(&key)
    }

    /// Whether no key was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.increasing.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn consecutive_keys_take_one_run() {
        let mut ids = SeenKeys::default();
        for id in 0..100_000 {
            assert!(ids.insert(id));
        }
        assert_eq!(ids.increasing.runs, vec![(0, 99_999)]);
        assert!(ids.out_of_order.is_empty());
        assert!(!ids.insert(0));
        assert!(!ids.insert(99_999));
        assert!(ids.insert(100_001));
        assert_eq!(ids.increasing.runs, vec![(0, 99_999), (100_001, 100_001)]);
        assert!(ids.insert(100_000));
        assert!(ids.contains(100_000) && ids.contains(100_001) && !ids.contains(100_002));
    }

    #[test]
    fn the_largest_id_and_zero() {
        let mut ids = SeenKeys::default();
        assert!(ids.is_empty() && !ids.contains(0) && !ids.contains(u64::MAX));
        assert!(ids.insert(u64::MAX - 1));
        assert!(ids.insert(u64::MAX));
        assert_eq!(ids.increasing.runs, vec![(u64::MAX - 1, u64::MAX)]);
        assert!(!ids.insert(u64::MAX));
        assert!(ids.insert(0));
        assert!(!ids.insert(0));
        assert!(ids.contains(0) && !ids.contains(1) && !ids.is_empty());
    }

    #[test]
    fn key_runs_find_keys_between_and_inside_runs() {
        let mut runs = KeyRuns::default();
        for key in [3, 4, 5, 9, 20, 21] {
            runs.push(key);
        }
        assert_eq!(runs.runs, vec![(3, 5), (9, 9), (20, 21)]);
        let found: Vec<u64> = (0..25).filter(|&k| runs.contains(k)).collect();
        assert_eq!(found, vec![3, 4, 5, 9, 20, 21]);
        assert_eq!(runs.last(), Some(21));
    }

    proptest! {
        /// Against a plain hash set of every id: the same answers, in any order of ids
        /// drawn from a small range (so that repeats, runs and gaps are all common).
        #[test]
        fn agrees_with_a_set_of_every_id(
            ids in proptest::collection::vec(
                prop_oneof![0u64..64, (u64::MAX - 64)..=u64::MAX], 0..300),
            probes in proptest::collection::vec(
                prop_oneof![0u64..70, (u64::MAX - 70)..=u64::MAX], 0..50),
        ) {
            let mut seen = SeenKeys::default();
            let mut reference = HashSet::new();
            for &id in &ids {
                prop_assert_eq!(seen.insert(id), reference.insert(id));
                prop_assert_eq!(seen.is_empty(), reference.is_empty());
            }
            for &probe in probes.iter().chain(&ids) {
                prop_assert_eq!(seen.contains(probe), reference.contains(&probe));
            }
        }
    }
}
