//! The row indices of a sparse column's stored values, in two bytes each while they allow.
//!
//! Sparse samples mostly list their indices in increasing order, a few hundred or thousand
//! apart (bags of words, libsvm-style features). While every index is at most `u16::MAX`
//! above the one before it in its sample (the first one: above 0), `IndexColumn` stores
//! each as that step, two bytes instead of four: half the memory the loaders fault in and
//! the packers read back at random. The first index that is not writes the steps out as
//! indices once, and the column stores indices from then on (the way value tiers widen,
//! module `values`). Steps restart at every sample, so the samples of a stepped column are
//! decoded one at a time, from their boundaries, which the column's owner knows
//! ([`super::InputColumn`]).

use std::ops::Range;

/// Row indices of stored values: steps within their samples, or indices.
#[derive(Clone, Debug, Default)]
pub(crate) struct IndexColumn {
    /// Until `widened`: each index less the one before it in its sample (the first: less 0).
    steps: Vec<u16>,
    /// Once `widened`: the indices.
    wide: Vec<u32>,
    /// Whether the indices are stored as they are (`wide`) rather than as `steps`.
    widened: bool,
}

impl IndexColumn {
    /// Number of indices held.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        if self.widened {
            self.wide.len()
        } else {
            self.steps.len()
        }
    }

    /// Indices the current storage holds without growing.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        if self.widened {
            self.wide.capacity()
        } else {
            self.steps.capacity()
        }
    }

    /// Bytes held on the heap (capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.steps.capacity() * size_of::<u16>() + self.wide.capacity() * size_of::<u32>()
    }

    /// Reserves room for `n` more indices in the current storage.
    pub(crate) fn reserve(&mut self, n: usize) {
        if self.widened {
            self.wide.reserve(n);
        } else {
            self.steps.reserve(n);
        }
    }

    /// Reserves room for exactly `n` more indices in the current storage.
    pub(crate) fn reserve_exact(&mut self, n: usize) {
        if self.widened {
            self.wide.reserve_exact(n);
        } else {
            self.steps.reserve_exact(n);
        }
    }

    /// Appends `index`, which follows `after` in its sample (0 for a sample's first index);
    /// false, appending nothing, when it cannot be stored as a step: the owner then widens
    /// the column ([`set_wide`](Self::set_wide)) and pushes it again.
    #[inline(always)]
    pub(crate) fn push(&mut self, index: u32, after: u32) -> bool {
        if self.widened {
            self.wide.push(index);
            return true;
        }
        // A decrease wraps past u16::MAX too: one comparison refuses both.
        let step = index.wrapping_sub(after);
        if step > u32::from(u16::MAX) {
            return false;
        }
        self.steps.push(step as u16);
        true
    }

    /// Stores `wide`, every index held decoded (by the owner, who knows the samples' bounds),
    /// as the indices from now on.
    #[cold]
    pub(crate) fn set_wide(&mut self, wide: Vec<u32>) {
        self.wide = wide;
        self.steps = Vec::new();
        self.widened = true;
    }

    /// Whether the indices are stored as indices (not steps).
    #[inline]
    pub(crate) fn is_widened(&self) -> bool {
        self.widened
    }

    /// Keeps the first `n` indices (`n` at a sample boundary).
    #[inline]
    pub(crate) fn truncate(&mut self, n: usize) {
        self.steps.truncate(n);
        self.wide.truncate(n);
    }

    /// Removes the first `n` indices (`n` at a sample boundary).
    pub(crate) fn drain_front(&mut self, n: usize) {
        if self.widened {
            self.wide.drain(..n);
        } else {
            self.steps.drain(..n);
        }
    }

    /// The indices `entries`, one sample's (or within one), as stored.
    #[inline]
    pub(crate) fn sample(&self, entries: Range<usize>) -> SampleIndices<'_> {
        if self.widened {
            SampleIndices::Indices(self.wide.get(entries).unwrap_or(&[]))
        } else {
            SampleIndices::Steps(self.steps.get(entries).unwrap_or(&[]))
        }
    }

    /// Appends the steps `entries`, each the only one of its sample (so its index), to `out`
    /// (nothing once widened: read those through [`sample`](Self::sample)).
    #[inline]
    pub(crate) fn append_steps_as_indices(&self, entries: Range<usize>, out: &mut Vec<u32>) {
        let steps = self.steps.get(entries).unwrap_or(&[]);
        out.extend(steps.iter().map(|&step| u32::from(step)));
    }

    /// The steps, while the indices are stored as steps, to append to (not
    /// [`widened`](Self::is_widened)).
    #[inline(always)]
    pub(crate) fn steps_mut(&mut self) -> &mut Vec<u16> {
        debug_assert!(!self.widened, "steps appended to widened indices");
        &mut self.steps
    }

    /// The indices, once widened, to append to (empty before).
    pub(crate) fn wide_mut(&mut self) -> &mut Vec<u32> {
        &mut self.wide
    }

    /// Appends the steps `entries` of `other` (whole samples; both columns stepped).
    pub(crate) fn extend_steps(&mut self, other: &IndexColumn, entries: Range<usize>) {
        self.steps
            .extend_from_slice(other.steps.get(entries).unwrap_or(&[]));
    }

    /// The raw storage for a cache-line walk: the steps and the indices (one is empty).
    #[inline]
    pub(crate) fn storage(&self) -> (&[u16], &[u32]) {
        (&self.steps, &self.wide)
    }
}

/// Appends the indices of one sample's `steps` to `out`.
#[inline]
fn append_steps(steps: &[u16], out: &mut Vec<u32>) {
    let mut index = 0u32;
    out.extend(steps.iter().map(|&step| {
        index = index.wrapping_add(u32::from(step));
        index
    }));
}

/// The row indices of one sparse sample (or of consecutive one-entry samples), as stored:
/// read them with [`iter`](Self::iter) whatever the storage.
#[derive(Clone, Copy, Debug)]
pub enum SampleIndices<'a> {
    /// The indices.
    Indices(&'a [u32]),
    /// Each index less the one before it (the first: less 0).
    Steps(&'a [u16]),
}

impl<'a> SampleIndices<'a> {
    /// Number of indices.
    pub fn len(&self) -> usize {
        match self {
            SampleIndices::Indices(indices) => indices.len(),
            SampleIndices::Steps(steps) => steps.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The indices, in order.
    pub fn iter(&self) -> IndexIter<'a> {
        match *self {
            SampleIndices::Indices(indices) => IndexIter::Indices(indices.iter()),
            SampleIndices::Steps(steps) => IndexIter::Steps(steps.iter(), 0),
        }
    }

    /// The indices in a vector.
    pub fn to_vec(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.len());
        self.append_to(&mut out);
        out
    }

    /// Appends the indices to `out`.
    #[inline]
    pub fn append_to(&self, out: &mut Vec<u32>) {
        match self {
            SampleIndices::Indices(indices) => out.extend_from_slice(indices),
            SampleIndices::Steps(steps) => append_steps(steps, out),
        }
    }
}

impl<'a> From<&'a [u32]> for SampleIndices<'a> {
    fn from(indices: &'a [u32]) -> Self {
        SampleIndices::Indices(indices)
    }
}

impl PartialEq for SampleIndices<'_> {
    /// Equal when they hold the same indices, however stored.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<[u32]> for SampleIndices<'_> {
    fn eq(&self, other: &[u32]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter().copied())
    }
}

impl<const N: usize> PartialEq<[u32; N]> for SampleIndices<'_> {
    fn eq(&self, other: &[u32; N]) -> bool {
        *self == other[..]
    }
}

impl<'a> IntoIterator for SampleIndices<'a> {
    type Item = u32;
    type IntoIter = IndexIter<'a>;

    fn into_iter(self) -> IndexIter<'a> {
        self.iter()
    }
}

/// The indices of a [`SampleIndices`], in order.
#[derive(Clone, Debug)]
pub enum IndexIter<'a> {
    /// Over stored indices.
    Indices(std::slice::Iter<'a, u32>),
    /// Over steps, with the index reached so far.
    Steps(std::slice::Iter<'a, u16>, u32),
}

impl Iterator for IndexIter<'_> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        match self {
            IndexIter::Indices(indices) => indices.next().copied(),
            IndexIter::Steps(steps, index) => {
                let step = steps.next()?;
                *index = index.wrapping_add(u32::from(*step));
                Some(*index)
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            IndexIter::Indices(indices) => indices.size_hint(),
            IndexIter::Steps(steps, _) => steps.size_hint(),
        }
    }
}

impl ExactSizeIterator for IndexIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A column fed `samples` the way a parser feeds one, widening (by its own sample
    /// boundaries) when a push is refused.
    fn fed(samples: &[&[u32]]) -> (IndexColumn, Vec<Range<usize>>) {
        let mut column = IndexColumn::default();
        let mut ranges: Vec<Range<usize>> = Vec::new();
        for sample in samples {
            let start = column.len();
            let mut after = 0;
            for &index in *sample {
                if !column.push(index, after) {
                    // Widen as the owner does: decode every sample held, then store it.
                    let mut wide = Vec::new();
                    for range in ranges
                        .iter()
                        .cloned()
                        .chain(std::iter::once(start..column.len()))
                    {
                        column.sample(range).append_to(&mut wide);
                    }
                    column.set_wide(wide);
                    assert!(column.push(index, after));
                }
                after = index;
            }
            ranges.push(start..column.len());
        }
        (column, ranges)
    }

    fn decoded(column: &IndexColumn, ranges: &[Range<usize>]) -> Vec<Vec<u32>> {
        ranges
            .iter()
            .map(|r| column.sample(r.clone()).to_vec())
            .collect()
    }

    #[test]
    fn increasing_indices_up_to_a_u16_apart_are_steps_and_read_back() {
        let samples: [&[u32]; 4] = [&[5, 7, 65_542], &[], &[65_535], &[0, 0, 3]];
        let (column, ranges) = fed(&samples);
        assert!(!column.is_widened());
        assert_eq!(column.storage().0, [5, 2, 65_535, 65_535, 0, 0, 3]);
        assert_eq!(decoded(&column, &ranges), samples.map(<[u32]>::to_vec));
        assert_eq!(column.heap_bytes(), 2 * column.capacity());
    }

    #[test]
    fn a_decrease_or_a_step_past_u16_widens_what_was_held_mid_sample() {
        for late in [
            &[10, 4][..],       // a decrease
            &[10, 10 + 65_536], // one step too many
            &[65_536],          // a first index too large
        ] {
            let samples: [&[u32]; 3] = [&[1, 300, 60_000], late, &[2, 9]];
            let (column, ranges) = fed(&samples);
            assert!(column.is_widened(), "{late:?}");
            assert_eq!(decoded(&column, &ranges), samples.map(<[u32]>::to_vec));
        }
    }

    #[test]
    fn whole_stepped_samples_copy_as_they_are() {
        let (mut into, mut own) = fed(&[&[3, 4]]);
        let (stepped, _) = fed(&[&[8], &[9], &[100, 200]]);
        into.extend_steps(&stepped, 1..4);
        own.extend([2..3, 3..5]);
        assert_eq!(decoded(&into, &own), [vec![3, 4], vec![9], vec![100, 200]]);
    }

    #[test]
    fn truncating_and_draining_at_sample_boundaries_keep_the_other_samples() {
        for samples in [
            &[&[1u32, 2][..], &[70_000], &[5, 6]][..],
            &[&[1, 2], &[3], &[5, 6]],
        ] {
            let (mut column, ranges) = fed(samples);
            column.truncate(3);
            assert_eq!(
                decoded(&column, &ranges[..2]),
                [vec![1, 2], samples[1].to_vec()]
            );
            column.drain_front(2);
            assert_eq!(column.sample(0..1).to_vec(), samples[1]);
            assert_eq!(column.len(), 1);
        }
    }

    #[test]
    fn sample_indices_compare_by_value_whatever_the_storage() {
        let steps = [4u16, 1, 10];
        let indices = [4u32, 5, 15];
        assert_eq!(
            SampleIndices::Steps(&steps),
            SampleIndices::Indices(&indices)
        );
        assert_eq!(SampleIndices::Steps(&steps), indices);
        assert_ne!(SampleIndices::Steps(&steps[..2]), indices);
        assert_eq!(SampleIndices::Steps(&steps).iter().len(), 3);
        assert_eq!(SampleIndices::from(&indices[..]).to_vec(), indices);
    }
}
