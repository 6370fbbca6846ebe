//! Finding the part that holds a sequence: the planner asks it for every sequence it looks
//! ahead to, and a packer for every sequence it packs, in the sweep's random order.
//!
//! The engine's parts cover the corpus's index ordinals in order, each a range of them, so
//! the part of an ordinal is the last part starting at or before it. Two binary searches (a
//! chunk, then a part of it) found it before; in random order their branches mispredict,
//! and they cost about 35 ns a sequence. [`PartFinder`] instead cuts the ordinals into
//! buckets of a power of two, about four per part, and keeps the part holding each bucket's
//! first ordinal: a lookup is a shift, a load, and a search among the few parts that start
//! within the bucket (usually none). Its memory is a few words per part, not per sequence.

/// Buckets per part the finder aims at: enough that a bucket seldom holds a part's start.
const BUCKETS_PER_PART: u64 = 4;

/// The part holding each index ordinal, from the ordinal each part starts at.
#[derive(Clone, Debug)]
pub(crate) struct PartFinder {
    /// Per part, the ordinal of its first sequence.
    starts: Vec<u32>,
    /// Per bucket (ordinals `b << shift` to `((b + 1) << shift) - 1`): the part holding its
    /// first ordinal.
    bucket_parts: Vec<u32>,
    /// Log2 of the ordinals per bucket.
    shift: u32,
}

impl PartFinder {
    /// A finder for parts starting at `starts` (the first at 0, increasing) within
    /// `sequences` ordinals.
    pub(crate) fn new(starts: Vec<u32>, sequences: u32) -> Self {
        debug_assert!(starts.windows(2).all(|w| w[0] < w[1]));
        debug_assert!(starts.first().is_none_or(|&s| s == 0));
        let wanted = (starts.len() as u64).max(1) * BUCKETS_PER_PART;
        let width = (u64::from(sequences) / wanted).max(1);
        let shift = u64::BITS - 1 - width.leading_zeros();
        let buckets = (u64::from(sequences) >> shift) + 1;
        let mut bucket_parts = Vec::with_capacity(buckets as usize);
        let mut part = 0usize;
        for bucket in 0..buckets {
            let first = bucket << shift;
            while part + 1 < starts.len() && u64::from(starts[part + 1]) <= first {
                part += 1;
            }
            bucket_parts.push(part as u32);
        }
        PartFinder {
            starts,
            bucket_parts,
            shift,
        }
    }

    /// The part holding `ordinal`: the last starting at or before it (the last part for an
    /// ordinal past the corpus's sequences; 0 when there are no parts).
    #[inline]
    pub(crate) fn find(&self, ordinal: u32) -> u32 {
        let bucket = (ordinal >> self.shift) as usize;
        let last = self.bucket_parts.len() - 1;
        let first = self.bucket_parts[bucket.min(last)] as usize;
        // The parts that may start within the bucket: up to the one holding the next
        // bucket's first ordinal.
        let bound = match self.bucket_parts.get(bucket + 1) {
            Some(&next) => next as usize,
            None => self.starts.len().saturating_sub(1),
        };
        let later = self
            .starts
            .get(first + 1..=bound)
            .map_or(0, |s| s.partition_point(|&start| start <= ordinal));
        (first + later) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The part holding `ordinal` by a search over every part.
    fn naive(starts: &[u32], ordinal: u32) -> u32 {
        (starts.partition_point(|&s| s <= ordinal).max(1) - 1) as u32
    }

    #[test]
    fn every_ordinal_of_uneven_parts_is_found() {
        // Parts of one sequence next to large ones, as the stash's pieces leave them.
        let starts = vec![0, 1, 2, 3, 40, 41, 100, 1000, 1001, 1002];
        let finder = PartFinder::new(starts.clone(), 1500);
        for ordinal in 0..1600 {
            assert_eq!(finder.find(ordinal), naive(&starts, ordinal), "{ordinal}");
        }
    }

    #[test]
    fn one_part_and_no_sequences() {
        let finder = PartFinder::new(vec![0], 0);
        assert_eq!(finder.find(0), 0);
        let finder = PartFinder::new(vec![0], 1);
        assert_eq!((finder.find(0), finder.find(7)), (0, 0));
        let finder = PartFinder::new(Vec::new(), 0);
        assert_eq!(finder.find(0), 0);
    }

    proptest! {
        #[test]
        fn finds_what_a_search_over_every_part_finds(
            lengths in proptest::collection::vec(1u32..300, 1..60),
            extra in 0u32..50,
            probes in proptest::collection::vec(any::<u32>(), 1..200),
        ) {
            let mut starts = Vec::with_capacity(lengths.len());
            let mut total = 0u32;
            for len in &lengths {
                starts.push(total);
                total += len;
            }
            let finder = PartFinder::new(starts.clone(), total);
            for ordinal in (0..total + extra).chain(probes) {
                prop_assert_eq!(finder.find(ordinal), naive(&starts, ordinal));
            }
        }
    }
}
