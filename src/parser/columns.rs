//! Columnar buffers of parsed sequences: one buffer set per configured input, appended to
//! sequence by sequence, with no allocation per value.
//!
//! Dense inputs store `samples x dim` values contiguously. Sparse inputs store the values and
//! row indices of all samples back to back, with per-sample start offsets, but leave out the
//! values while all are one and the offsets while every sample holds one value (one-hot data,
//! see [`InputColumn`]). Values of either kind take a byte each while all are integers from 0
//! to 255 (module `values`), and row indices two bytes each while each is at most 65,535 above
//! the one before it in its sample (module `indices`). Every input also records where each
//! sequence's samples start, so a sequence's data is a range of each column.

use std::ops::Range;

use crate::config::{InputConfig, StorageFormat};
use crate::parser::indices::{IndexColumn, SampleIndices};
use crate::parser::number::Element;
use crate::parser::values::{EntryValue, SampleValues, ValueTier};

/// Most samples, and most stored values of a sparse input, that one column holds. Its offsets
/// are 32-bit: half the memory of `usize` ones, and half the cache lines the packer reads for
/// them. A chunk of the index spans at most 4 GiB of text, so its parts always fit; the
/// parser refuses a sample past the limit (an error on its line), and the joins and
/// [`ParsedSequences::append`] check for room.
pub const MAX_COLUMN_ENTRIES: usize = u32::MAX as usize;

/// The parsed samples of one input for a run of sequences.
///
/// A column stores less for the most common data, without changing what it holds: while
/// every value is an integer from 0 to 255 (pixels, counts, labels), each takes a byte; a
/// sparse column also stores no values while every one is one, and no sample offsets while
/// every sample holds exactly one stored value. The first value or sample that does not fit
/// writes out what was implicit or narrow so far, once. The row indices likewise take two
/// bytes each while they step up by at most 65,535 within each sample (module `indices`). A
/// one-hot sample then costs 2 or 4 bytes (its index) instead of 12, an entry with a small
/// count 3 or 5 instead of 8, and a dense value from 0 to 255 one byte instead of 4: less
/// memory to fault in, to cache and to read again when packing.
#[derive(Clone, Debug)]
pub struct InputColumn<T> {
    /// Dense or sparse.
    pub format: StorageFormat,
    /// Values per dense sample, or the exclusive index bound of a sparse input.
    pub dim: usize,
    /// While `value_tier` is [`ValueTier::Stored`] (else nothing): dense, `samples x dim`
    /// values; sparse, the stored values of all samples.
    pub(crate) values: Vec<T>,
    /// The same values, a byte each, while `value_tier` is [`ValueTier::Bytes`].
    pub(crate) byte_values: Vec<u8>,
    /// Sparse only: the index of each stored value (two bytes each while they allow, see
    /// [`IndexColumn`]).
    pub(crate) indices: IndexColumn,
    /// Sparse only, and nothing while `single_entries`: start of each sample in `indices`,
    /// one more entry than samples (at most [`MAX_COLUMN_ENTRIES`]).
    pub(crate) sample_offsets: Vec<u32>,
    /// Start of each sequence, in samples of this input, one more entry than complete
    /// sequences (the last is the start of a sequence being parsed); nothing while
    /// `single_samples`.
    pub(crate) sequence_offsets: Vec<u32>,
    /// Every complete sequence holds exactly one sample (sequence `i` is sample `i`), and
    /// `sequence_offsets` is empty.
    pub(crate) single_samples: bool,
    /// The number of complete sequences while `single_samples`.
    implicit_sequences: usize,
    /// How the values are stored (dense columns start at [`ValueTier::Bytes`], sparse ones
    /// at [`ValueTier::Ones`]).
    pub(crate) value_tier: ValueTier,
    /// Sparse: every sample holds exactly one stored value (sample `i` is stored value `i`),
    /// and `sample_offsets` is empty.
    pub(crate) single_entries: bool,
}

impl<T: Element> PartialEq for InputColumn<T> {
    /// Columns are equal when they hold the same samples in the same sequences, whatever
    /// they left implicit.
    fn eq(&self, other: &Self) -> bool {
        self.format == other.format
            && self.dim == other.dim
            && self.sequence_count() == other.sequence_count()
            && (0..=self.sequence_count())
                .all(|s| self.sequence_start(s) == other.sequence_start(s))
            && self.sample_count() == other.sample_count()
            && (0..self.sample_count()).all(|i| self.sample(i) == other.sample(i))
    }
}

impl<T> InputColumn<T> {
    /// Number of samples held (all sequences, including one being parsed).
    #[inline]
    pub fn sample_count(&self) -> usize {
        match self.format {
            StorageFormat::Dense => self.stored_value_count() / self.dim.max(1),
            StorageFormat::Sparse if self.single_entries => self.indices.len(),
            StorageFormat::Sparse => self.sample_offsets.len() - 1,
        }
    }

    /// Number of complete sequences.
    #[inline]
    pub fn sequence_count(&self) -> usize {
        if self.single_samples {
            self.implicit_sequences
        } else {
            self.sequence_offsets.len() - 1
        }
    }

    /// Start of sequence `seq` in samples (at most [`sequence_count`](Self::sequence_count):
    /// that one is the start of a sequence being parsed, or the end of the samples).
    #[inline]
    fn sequence_start(&self, seq: usize) -> usize {
        offset_at(&self.sequence_offsets, self.single_samples, seq)
    }

    /// Start of sample `sample` among the stored values of a sparse column (at most
    /// [`sample_count`](Self::sample_count)).
    #[inline]
    pub(crate) fn entry_start(&self, sample: usize) -> usize {
        offset_at(&self.sample_offsets, self.single_entries, sample)
    }

    /// How many values are stored in the column's tier (a sparse column's stored values,
    /// whether or not they take memory; a dense column's `samples x dim`).
    #[inline]
    pub(crate) fn stored_value_count(&self) -> usize {
        match self.value_tier {
            ValueTier::Ones => self.indices.len(),
            ValueTier::Bytes => self.byte_values.len(),
            ValueTier::Stored => self.values.len(),
        }
    }
}

impl<T: Element> InputColumn<T> {
    fn new(input: &InputConfig) -> Self {
        let sparse = input.format == StorageFormat::Sparse;
        InputColumn {
            format: input.format,
            dim: input.dim,
            values: Vec::new(),
            byte_values: Vec::new(),
            indices: IndexColumn::default(),
            sample_offsets: Vec::new(),
            sequence_offsets: Vec::new(),
            single_samples: true,
            implicit_sequences: 0,
            value_tier: if sparse {
                ValueTier::Ones
            } else {
                ValueTier::Bytes
            },
            single_entries: sparse,
        }
    }

    /// Sample `i` of this column.
    pub fn sample(&self, i: usize) -> Sample<'_, T> {
        match self.format {
            StorageFormat::Dense => Sample::Dense(self.values_in(i * self.dim..(i + 1) * self.dim)),
            StorageFormat::Sparse => {
                let range = self.entry_start(i)..self.entry_start(i + 1);
                Sample::Sparse {
                    indices: self.indices.sample(range.clone()),
                    values: self.values_in(range),
                }
            }
        }
    }

    /// The values `range` of the [`entry_count`](Self::entry_count) values; `range` must
    /// be within them.
    #[inline]
    pub(crate) fn values_in(&self, range: Range<usize>) -> SampleValues<'_, T> {
        match self.value_tier {
            ValueTier::Ones => SampleValues::ones(range.len()),
            ValueTier::Bytes => SampleValues::bytes(&self.byte_values[range]),
            ValueTier::Stored => SampleValues::from(&self.values[range]),
        }
    }

    /// Number of values held: `samples x dim` of a dense input, the stored values of a
    /// sparse one.
    #[inline]
    pub fn entry_count(&self) -> usize {
        match self.format {
            StorageFormat::Dense => self.stored_value_count(),
            StorageFormat::Sparse => self.indices.len(),
        }
    }

    /// Where the values of `samples` are among the [`entry_count`](Self::entry_count)
    /// values, or `None` when `samples` is not a range of the samples held.
    pub fn entries_of(&self, samples: Range<usize>) -> Option<Range<usize>> {
        (samples.start <= samples.end && samples.end <= self.sample_count())
            .then(|| self.entries_within(samples))
    }

    /// [`entries_of`](Self::entries_of) for a range of the samples held.
    #[inline]
    fn entries_within(&self, samples: Range<usize>) -> Range<usize> {
        match self.format {
            StorageFormat::Dense => samples.start * self.dim..samples.end * self.dim,
            StorageFormat::Sparse => self.entry_start(samples.start)..self.entry_start(samples.end),
        }
    }

    /// The samples held by the sequences before sequence `seq`, or `None` when there are
    /// fewer than `seq` complete sequences.
    pub fn samples_before(&self, seq: usize) -> Option<usize> {
        (seq <= self.sequence_count()).then(|| self.sequence_start(seq))
    }

    /// A sparse input's index of each stored value (empty for a dense input), decoded into
    /// a new vector.
    pub fn indices(&self) -> Vec<u32> {
        self.decoded_indices(self.indices.len())
    }

    /// Every index held, decoded sample by sample (a sample being read starts at entry
    /// `open_start`), into room for as many as the storage holds.
    fn decoded_indices(&self, open_start: usize) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.indices.capacity().max(self.indices.len()));
        for range in self.entries_by_sample(open_start) {
            self.indices.sample(range).append_to(&mut out);
        }
        out
    }

    /// Appends the indices of the sparse samples `samples` (within those held) to `out`.
    #[inline]
    pub(crate) fn append_indices(&self, samples: Range<usize>, out: &mut Vec<u32>) {
        if self.indices.is_widened() {
            let entries = self.entries_within(samples);
            self.indices.sample(entries).append_to(out);
        } else if self.single_entries {
            // One entry per sample: each index is its sample's first, so a step is it.
            self.indices.append_steps_as_indices(samples, out);
        } else {
            for range in self.sample_entries(samples) {
                self.indices.sample(range).append_to(out);
            }
        }
    }

    /// The entry range of each sample of `samples` (within those held).
    fn sample_entries(&self, samples: Range<usize>) -> impl Iterator<Item = Range<usize>> + '_ {
        samples.map(|k| self.entry_start(k)..self.entry_start(k + 1))
    }

    /// The entry range of every sample of a sparse column, complete or not: those before
    /// entry `open_start`, then the one being read from there (empty when none is).
    fn entries_by_sample(&self, open_start: usize) -> impl Iterator<Item = Range<usize>> + '_ {
        let (complete, open_start) = match self.sample_offsets.last() {
            // Stored offsets: the last is where the sample being read (if any) starts.
            Some(&last) if !self.single_entries => (self.sample_offsets.len() - 1, last as usize),
            _ => (open_start, open_start),
        };
        self.sample_entries(0..complete)
            .chain(std::iter::once(open_start..self.indices.len()))
    }

    /// The values, one per [`entry_count`](Self::entry_count).
    pub fn values(&self) -> SampleValues<'_, T> {
        self.values_in(0..self.entry_count())
    }

    /// Bytes its buffers hold on the heap (their capacity).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.values.capacity() * size_of::<T>()
            + self.byte_values.capacity()
            + self.indices.heap_bytes()
            + (self.sample_offsets.capacity() + self.sequence_offsets.capacity()) * size_of::<u32>()
    }

    /// Reserves exactly the room to append every sequence of `other` (same input).
    pub(crate) fn reserve_for(&mut self, other: &InputColumn<T>) {
        self.values.reserve_exact(other.values.len());
        self.byte_values.reserve_exact(other.byte_values.len());
        self.indices.reserve_exact(other.indices.len());
        self.sample_offsets
            .reserve_exact(other.sample_offsets.len());
        self.sequence_offsets
            .reserve_exact(other.sequence_offsets.len());
    }

    /// Whether sequence `seq` of `other` (same input) can be appended within `limit` samples
    /// and stored values ([`MAX_COLUMN_ENTRIES`], or lower in tests).
    pub(crate) fn has_room_within(&self, other: &InputColumn<T>, seq: usize, limit: usize) -> bool {
        let (samples, values) = other.span(seq);
        let values = match self.format {
            StorageFormat::Dense => 0,
            StorageFormat::Sparse => values.len(),
        };
        self.room_for(samples.len(), values, limit)
    }

    /// Whether the column holds `limit` samples already: no sample more fits (without the
    /// division of [`sample_count`](Self::sample_count), as the parser asks per sample).
    #[inline]
    pub(crate) fn is_full(&self, limit: usize) -> bool {
        match self.format {
            StorageFormat::Dense => {
                self.stored_value_count() >= limit.saturating_mul(self.dim.max(1))
            }
            StorageFormat::Sparse => self.sample_count() >= limit,
        }
    }

    /// The samples of sequence `seq`, and their range among the values (and `indices`).
    fn span(&self, seq: usize) -> (Range<usize>, Range<usize>) {
        let samples = self.sequence_start(seq)..self.sequence_start(seq + 1);
        let values = self.entries_within(samples.clone());
        (samples, values)
    }

    /// Whether `samples` more samples holding `values` more stored values (sparse) fit
    /// within `limit`.
    fn room_for(&self, samples: usize, values: usize, limit: usize) -> bool {
        let samples_fit = self.sample_count().saturating_add(samples) <= limit;
        let values_fit = self.format == StorageFormat::Dense
            || self.indices.len().saturating_add(values) <= limit;
        samples_fit && values_fit
    }

    /// Appends a stored value of the sparse sample being read, which started at entry
    /// `sample_start`; `after` is the index before it in the sample (0 for its first).
    #[inline(always)]
    pub(crate) fn push_entry(
        &mut self,
        index: u32,
        after: u32,
        sample_start: usize,
        value: EntryValue<T>,
    ) {
        self.push_value(value);
        if !self.indices.push(index, after) {
            self.push_index_widening(index, sample_start);
        }
    }

    /// Appends a sparse sample of one entry, `index:digit`, as [`entry_count`],
    /// [`push_entry`](Self::push_entry) and [`end_sparse_sample`](Self::end_sparse_sample)
    /// would (lines of one-hot samples, `|word 4567:1`): one value unless the tier leaves
    /// it implicit, one index, and an offset unless every sample holds one stored value.
    /// The column's state is read once, where the general path reads it again after each
    /// store (a store into a vector could alias the column's fields): a tenth fewer
    /// instructions in the parse of such lines.
    ///
    /// [`entry_count`]: Self::entry_count
    #[inline(always)]
    pub(crate) fn push_one_entry_sample(&mut self, index: u32, digit: u8) {
        let single_entries = self.single_entries;
        // The value first, as `push_entry` stores it.
        match (self.value_tier, digit) {
            (ValueTier::Ones, 1) => {}
            (ValueTier::Bytes, _) => self.byte_values.push(digit),
            (ValueTier::Stored, _) => self.values.push(T::from_byte(digit)),
            (ValueTier::Ones, _) => return self.push_one_entry_sample_widening(index, digit),
        }
        // A sample's only index follows 0.
        if !self.indices.push(index, 0) {
            let sample_start = self.indices.len();
            self.push_index_widening(index, sample_start);
        }
        if !single_entries {
            self.sample_offsets.push(offset(self.indices.len()));
        }
    }

    /// [`push_one_entry_sample`](Self::push_one_entry_sample) the general way, for a value
    /// that the column's tier cannot hold (it widens the tier).
    #[cold]
    #[inline(never)]
    fn push_one_entry_sample_widening(&mut self, index: u32, digit: u8) {
        let sample_start = self.entry_count();
        self.push_entry(index, 0, sample_start, EntryValue::Byte(digit));
        self.end_sparse_sample(sample_start);
    }

    /// Appends up to `MOST` entries of a sparse sample, as [`push_entry`](Self::push_entry)
    /// would but without its checks, from `write`: it gets slots of steps (each index less
    /// the one before it in its sample, 0 for the first) and of byte values (kept when
    /// `BYTES`), fills the first ones and returns how many it filled. Only those are kept;
    /// the count is returned. The caller found the indices stored as steps and the values
    /// as bytes (`BYTES`) or all ones (not `BYTES`: `write` then appends only entries of
    /// value 1).
    ///
    /// There are `MOST` slots when the buffers have that much room to spare, else as many
    /// as they have (so that a column reserved for what it will hold does not grow), and
    /// `MOST` again once they are full (so that they grow as a push would). Writing into
    /// slots rather than pushing lets the loop keep its place in a register: a push stores
    /// the length back to the vector after every byte (the byte store could alias it), and
    /// checks the capacity at every entry.
    #[inline(always)]
    pub(crate) fn append_step_entries<const BYTES: bool, const MOST: usize>(
        &mut self,
        write: impl FnOnce(&mut [u16], &mut [u8]) -> usize,
    ) -> usize {
        debug_assert_eq!(
            self.value_tier,
            if BYTES {
                ValueTier::Bytes
            } else {
                ValueTier::Ones
            }
        );
        let steps = self.indices.steps_mut();
        let steps_base = steps.len();
        let bytes_base = self.byte_values.len();
        let mut spare = steps.capacity() - steps_base;
        if BYTES {
            spare = spare.min(self.byte_values.capacity() - bytes_base);
        }
        let room = match spare {
            0 => MOST,
            spare => spare.min(MOST),
        };
        // Zeros from a constant block when there is room for all `MOST`: a few vector
        // stores, where a `resize` calls `memset`.
        if room == MOST {
            steps.extend_from_slice(&[0; MOST]);
        } else {
            steps.resize(steps_base + room, 0);
        }
        let bytes: &mut [u8] = if BYTES {
            if room == MOST {
                self.byte_values.extend_from_slice(&[0; MOST]);
            } else {
                self.byte_values.resize(bytes_base + room, 0);
            }
            &mut self.byte_values[bytes_base..]
        } else {
            &mut []
        };
        let filled = write(&mut steps[steps_base..], bytes).min(room);
        steps.truncate(steps_base + filled);
        if BYTES {
            self.byte_values.truncate(bytes_base + filled);
        }
        filled
    }

    /// Appends `index`, which the steps cannot hold, after writing them out as indices.
    #[cold]
    fn push_index_widening(&mut self, index: u32, sample_start: usize) {
        self.widen_indices(sample_start);
        self.indices.push(index, 0);
    }

    /// Stores the indices as they are from now on (see [`IndexColumn`]); a sample being read
    /// starts at entry `open_start`.
    #[cold]
    fn widen_indices(&mut self, open_start: usize) {
        if self.indices.is_widened() {
            return;
        }
        let wide = self.decoded_indices(open_start);
        self.indices.set_wide(wide);
    }

    /// Appends a stored value, widening the tier first when it cannot hold the value.
    #[inline(always)]
    fn push_value(&mut self, value: EntryValue<T>) {
        match (self.value_tier, value) {
            (ValueTier::Stored, value) => self.values.push(value.value()),
            (ValueTier::Bytes, EntryValue::Byte(byte)) => self.byte_values.push(byte),
            (ValueTier::Ones, EntryValue::Byte(1)) => {}
            _ => self.push_widening(value),
        }
    }

    /// Appends `value`, which the column's tier cannot hold, after widening the tier.
    #[cold]
    fn push_widening(&mut self, value: EntryValue<T>) {
        self.widen_values(value.tier());
        self.push_value(value);
    }

    /// Drops the stored values after the first `entries` (of a sparse sample that failed).
    #[inline]
    pub(crate) fn truncate_entries(&mut self, entries: usize) {
        self.indices.truncate(entries);
        self.truncate_values(entries);
    }

    /// Keeps the first `n` values (of a sparse column's stored values, or a dense column's).
    #[inline]
    pub(crate) fn truncate_values(&mut self, n: usize) {
        match self.value_tier {
            ValueTier::Ones => {}
            ValueTier::Bytes => self.byte_values.truncate(n),
            ValueTier::Stored => self.values.truncate(n),
        }
    }

    /// Removes the first `n` values.
    fn drain_values(&mut self, n: usize) {
        match self.value_tier {
            ValueTier::Ones => {}
            ValueTier::Bytes => {
                self.byte_values.drain(..n);
            }
            ValueTier::Stored => {
                self.values.drain(..n);
            }
        }
    }

    /// Appends a zero-filled dense sample of `dim` values, to be set by
    /// [`set_dense_value`](Self::set_dense_value); returns where it starts.
    #[inline(always)]
    pub(crate) fn push_zero_sample(&mut self) -> usize {
        let start = self.stored_value_count();
        match self.value_tier {
            ValueTier::Bytes => self.byte_values.resize(start + self.dim, 0),
            _ => self.values.resize(start + self.dim, T::default()),
        }
        start
    }

    /// Appends a sample of a dense column of dim 1 holding `value`: what
    /// [`push_zero_sample`](Self::push_zero_sample) then
    /// [`set_dense_value`](Self::set_dense_value) append, in one push where the tier holds
    /// the value.
    #[inline(always)]
    pub(crate) fn push_scalar_sample(&mut self, value: EntryValue<T>) {
        debug_assert_eq!(self.dim, 1, "a scalar sample of a wider dense column");
        match (self.value_tier, value) {
            (ValueTier::Stored, value) => self.values.push(value.value()),
            (ValueTier::Bytes, EntryValue::Byte(byte)) => self.byte_values.push(byte),
            _ => {
                let at = self.push_zero_sample();
                self.set_dense_value(at, value);
            }
        }
    }

    /// Appends samples of a dense column of dim 1, one per integer of `values`: what
    /// [`push_scalar_sample`](Self::push_scalar_sample) appends for each, with the tier
    /// looked at once.
    #[inline(always)]
    pub(crate) fn push_integer_scalars(&mut self, values: &[u32]) {
        debug_assert_eq!(self.dim, 1, "scalar samples of a wider dense column");
        match self.value_tier {
            ValueTier::Stored => self
                .values
                .extend(values.iter().map(|&value| T::from_u64(u64::from(value)))),
            ValueTier::Bytes if values.iter().all(|&value| value <= 255) => {
                // Every value is below 256: the casts are exact.
                self.byte_values
                    .extend(values.iter().map(|&value| value as u8))
            }
            _ => {
                for &value in values {
                    self.push_scalar_sample(EntryValue::of_integer(u64::from(value)));
                }
            }
        }
    }

    /// Sets value `at` of a dense column (within the values held), widening the tier first
    /// when it cannot hold the value.
    #[inline(always)]
    pub(crate) fn set_dense_value(&mut self, at: usize, value: EntryValue<T>) {
        match (self.value_tier, value) {
            (ValueTier::Stored, value) => self.values[at] = value.value(),
            (ValueTier::Bytes, EntryValue::Byte(byte)) => self.byte_values[at] = byte,
            _ => self.set_widening(at, value),
        }
    }

    /// [`set_dense_value`](Self::set_dense_value) of a value the tier cannot hold.
    #[cold]
    fn set_widening(&mut self, at: usize, value: EntryValue<T>) {
        self.widen_values(value.tier().max(ValueTier::Bytes));
        self.set_dense_value(at, value);
    }

    /// Ends the sparse sample being read, whose stored values start at `start`.
    #[inline(always)]
    pub(crate) fn end_sparse_sample(&mut self, start: usize) {
        let end = self.indices.len();
        if !self.single_entries {
            self.sample_offsets.push(offset(end));
        } else if end - start != 1 {
            // Every sample before this one held one stored value: `start` of them.
            self.store_sample_offsets(start);
            self.sample_offsets.push(offset(end));
        }
    }

    /// Moves the values to tier `tier` when it is wider than the column's, writing out the
    /// values stored so far in the wider form, from now on.
    #[cold]
    fn widen_values(&mut self, tier: ValueTier) {
        if tier <= self.value_tier {
            return;
        }
        let held = self.stored_value_count();
        // Room for as many values as indices or narrower values had (keeping any room
        // reserved for them).
        let room = self
            .indices
            .capacity()
            .max(self.byte_values.capacity())
            .max(held);
        match tier {
            ValueTier::Ones => {}
            ValueTier::Bytes => {
                // From ones.
                self.byte_values.clear();
                self.byte_values.reserve(room);
                self.byte_values.resize(held, 1);
            }
            ValueTier::Stored => {
                let mut widened = std::mem::take(&mut self.values);
                widened.clear();
                widened.reserve(room);
                let narrow = match self.value_tier {
                    ValueTier::Bytes => SampleValues::bytes(&self.byte_values),
                    _ => SampleValues::ones(held),
                };
                narrow.append_to(&mut widened);
                self.values = widened;
                self.byte_values = Vec::new();
            }
        }
        self.value_tier = tier;
    }

    /// Stores the sample offsets `single_entries` left implicit, for the first `samples`
    /// samples (the column's samples, or fewer while a sample is being read), from now on.
    #[cold]
    fn store_sample_offsets(&mut self, samples: usize) {
        self.sample_offsets.clear();
        // The room reserved when it holds these samples (the loaders reserve a part's
        // buffers like the last part's), else room for about as many samples as stored
        // values, in a new buffer: growing the old one would copy its stale contents into
        // freshly touched pages.
        if self.sample_offsets.capacity() <= samples {
            self.sample_offsets = Vec::with_capacity(self.indices.capacity().max(samples + 1));
        }
        self.sample_offsets.extend((0..=samples).map(offset));
        self.single_entries = false;
    }

    /// Appends the values `entries` of `other` (same input), in the wider of the two tiers.
    fn extend_values(&mut self, other: &InputColumn<T>, entries: Range<usize>) {
        self.widen_values(other.value_tier);
        let theirs = other.values_in(entries);
        match self.value_tier {
            ValueTier::Ones => {}
            ValueTier::Bytes => {
                // Their tier is at most bytes (widened to above), so their values fit; were
                // they not to, the column widens rather than drop them.
                if !theirs.append_bytes_to(&mut self.byte_values) {
                    self.widen_values(ValueTier::Stored);
                    theirs.append_to(&mut self.values);
                }
            }
            ValueTier::Stored => theirs.append_to(&mut self.values),
        }
    }

    /// Appends the samples `samples` of `other` (same sparse input): their stored values
    /// and their offsets, but no sequence offset.
    fn extend_sparse(&mut self, other: &InputColumn<T>, samples: Range<usize>) {
        let entries = other.entries_within(samples.clone());
        let samples_before = self.sample_count();
        let entries_before = self.indices.len();
        self.extend_values(other, entries.clone());
        if other.indices.is_widened() {
            self.widen_indices(entries_before);
        }
        if self.indices.is_widened() {
            other.append_indices(samples.clone(), self.indices.wide_mut());
        } else {
            // Both stepped: steps restart at every sample, so whole samples copy as they are.
            self.indices.extend_steps(&other.indices, entries.clone());
        }
        if self.single_entries && !other.single_entries {
            self.store_sample_offsets(samples_before);
        }
        if !self.single_entries {
            extend_offsets(
                &mut self.sample_offsets,
                (&other.sample_offsets, other.single_entries),
                samples,
                entries_before,
            );
        }
    }

    /// Appends the samples of sequence `seq` of `other` (same input) as one more sequence;
    /// the caller has checked [`has_room_within`](Self::has_room_within).
    pub(crate) fn push_sequence_of(&mut self, other: &InputColumn<T>, seq: usize) {
        let (samples, entries) = other.span(seq);
        match self.format {
            StorageFormat::Dense => self.extend_values(other, entries),
            StorageFormat::Sparse => self.extend_sparse(other, samples),
        }
        self.end_sequence();
    }

    /// Seals the samples appended since the last complete sequence as one sequence.
    #[inline]
    fn end_sequence(&mut self) {
        let n = self.sample_count();
        if self.single_samples {
            if n == self.implicit_sequences + 1 {
                self.implicit_sequences = n;
                return;
            }
            self.store_sequence_offsets();
        }
        self.sequence_offsets.push(offset(n));
    }

    /// Stores the sequence offsets `single_samples` left implicit, from now on.
    #[cold]
    fn store_sequence_offsets(&mut self) {
        let sequences = self.implicit_sequences;
        self.sequence_offsets.clear();
        self.sequence_offsets.reserve(sequences + 2);
        self.sequence_offsets.extend((0..=sequences).map(offset));
        self.single_samples = false;
        self.implicit_sequences = 0;
    }

    /// Keeps the first `sequences` complete sequences (fewer than held) and nothing after.
    fn truncate_sequences(&mut self, sequences: usize) {
        self.truncate_samples(self.sequence_start(sequences));
        if self.single_samples {
            self.implicit_sequences = sequences;
        } else {
            self.sequence_offsets.truncate(sequences + 1);
        }
    }

    /// Drops everything after sample `samples` (used to roll back an invalid sequence).
    fn truncate_samples(&mut self, samples: usize) {
        match self.format {
            StorageFormat::Dense => self.truncate_values(samples * self.dim),
            StorageFormat::Sparse => {
                let entries = self.entry_start(samples);
                if !self.single_entries {
                    self.sample_offsets.truncate(samples + 1);
                }
                self.truncate_entries(entries);
            }
        }
    }

    /// Removes the first `sequences` sequences, keeping later data (a partial sequence).
    fn drain_sequences(&mut self, sequences: usize) {
        let samples = self.sequence_start(sequences);
        match self.format {
            StorageFormat::Dense => self.drain_values(samples * self.dim),
            StorageFormat::Sparse => {
                let nnz = self.entry_start(samples);
                self.drain_values(nnz);
                self.indices.drain_front(nnz);
                if !self.single_entries {
                    self.sample_offsets.drain(..samples);
                    for o in &mut self.sample_offsets {
                        *o -= nnz as u32;
                    }
                }
            }
        }
        if self.single_samples {
            self.implicit_sequences -= sequences;
        } else {
            self.sequence_offsets.drain(..sequences);
            for o in &mut self.sequence_offsets {
                *o -= samples as u32;
            }
        }
    }
}

/// Offset `i` of `offsets`, or `i` itself while `implicit` (the offsets are then the
/// identity: one sample per sequence, or one stored value per sample, and not stored).
#[inline]
fn offset_at(offsets: &[u32], implicit: bool, i: usize) -> usize {
    if implicit {
        i
    } else {
        offsets[i] as usize
    }
}

/// Appends to `offsets` the ends of items `items` of other offsets (`theirs`: stored ones,
/// and whether they are implicit), shifted so that the first of the items starts at `base`.
fn extend_offsets(
    offsets: &mut Vec<u32>,
    theirs: (&[u32], bool),
    items: Range<usize>,
    base: usize,
) {
    let (stored, implicit) = theirs;
    let first = offset_at(stored, implicit, items.start);
    offsets.extend(
        (items.start + 1..=items.end)
            .map(|k| offset(offset_at(stored, implicit, k) - first + base)),
    );
}

/// `n` as a stored offset. Every path that grows a column keeps `n` within
/// [`MAX_COLUMN_ENTRIES`]; were one not to, the offset saturates, and the packer's checks of a
/// sequence's offsets report the column as inconsistent instead of reading wrong data.
#[inline]
fn offset(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Appending would take input `input` past [`MAX_COLUMN_ENTRIES`] samples or stored values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnOverflow {
    /// The input (configuration order).
    pub input: usize,
}

impl std::fmt::Display for ColumnOverflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "input {} would hold more than {MAX_COLUMN_ENTRIES} samples or stored values",
            self.input
        )
    }
}

/// One sample of one input, borrowed from a column.
#[derive(Clone, Copy)]
pub enum Sample<'a, T> {
    /// `dim` values (read them as `T` whatever their storage).
    Dense(SampleValues<'a, T>),
    /// Stored entries in file order.
    Sparse {
        /// Row index of each value (read them with `iter` whatever their storage).
        indices: SampleIndices<'a>,
        /// The stored values (read them as `T` whatever their storage).
        values: SampleValues<'a, T>,
    },
}

impl<T: Element> PartialEq for Sample<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Sample::Dense(a), Sample::Dense(b)) => a == b,
            (
                Sample::Sparse { indices, values },
                Sample::Sparse {
                    indices: other_indices,
                    values: other_values,
                },
            ) => indices == other_indices && values == other_values,
            _ => false,
        }
    }
}

impl<T: Element> std::fmt::Debug for Sample<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sample::Dense(values) => f.debug_tuple("Dense").field(values).finish(),
            Sample::Sparse { indices, values } => f
                .debug_struct("Sparse")
                .field("indices", indices)
                .field("values", values)
                .finish(),
        }
    }
}

/// Where a sequence came from and what it holds, besides its samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequenceInfo {
    /// The sequence id, or in line mode the 0-based line number across the corpus.
    pub key: u64,
    /// 1-based line of the sequence's first line within its file.
    pub line: u64,
    /// Lines that hold a sample of a configured input.
    pub counted_lines: u32,
}

/// The lengths of the buffers of a [`ParsedSequences`] (per column: values, byte values,
/// indices, sample offsets, sequence offsets; and the sequences).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BufferLengths {
    pub(crate) columns: Vec<[usize; 5]>,
    pub(crate) sequences: usize,
}

/// Parsed sequences in columnar form: the output of the parser.
#[derive(Clone, Debug)]
pub struct ParsedSequences<T> {
    /// One column per configured input, in configuration order.
    pub columns: Vec<InputColumn<T>>,
    /// One entry per complete sequence.
    pub sequences: Vec<SequenceInfo>,
    /// At least the samples, and the stored values, of every column: while it stays far
    /// enough below [`MAX_COLUMN_ENTRIES`] the parser skips its per-sample checks of the
    /// limit (a line of `n` bytes adds fewer than `n` of either to a column, so a line
    /// counts its length).
    entries_bound: usize,
}

impl<T: Element> PartialEq for ParsedSequences<T> {
    /// Equal when they hold the same sequences, whatever their columns left implicit.
    fn eq(&self, other: &Self) -> bool {
        self.columns == other.columns && self.sequences == other.sequences
    }
}

impl<T: Element> ParsedSequences<T> {
    /// Bytes its buffers hold on the heap (their capacity).
    pub fn heap_bytes(&self) -> usize {
        self.columns
            .iter()
            .map(InputColumn::heap_bytes)
            .sum::<usize>()
            + self.sequences.capacity() * std::mem::size_of::<SequenceInfo>()
    }

    /// The lengths of its buffers, to size others like them ([`ParsedSequences::reserve_like`]).
    pub fn buffer_lengths(&self) -> BufferLengths {
        BufferLengths {
            columns: self
                .columns
                .iter()
                .map(|c| {
                    [
                        c.values.len(),
                        c.byte_values.len(),
                        c.indices.len(),
                        c.sample_offsets.len(),
                        c.sequence_offsets.len(),
                    ]
                })
                .collect(),
            sequences: self.sequences.len(),
        }
    }

    /// Reserves room for `num / den` times `lengths` (plus a sixteenth and a little), so that
    /// parsing text of about that size grows no buffer: a buffer that grows is copied, and
    /// pages freshly touched twice. A loader sizes each part from the last one it parsed,
    /// scaled by their text sizes.
    pub fn reserve_like(&mut self, lengths: &BufferLengths, num: u64, den: u64) {
        let scaled = |n: usize| {
            let n = (n as u128 * u128::from(num) / u128::from(den.max(1))) as usize;
            n.saturating_add(n / 16).saturating_add(16)
        };
        for (c, l) in self.columns.iter_mut().zip(&lengths.columns) {
            c.values.reserve(scaled(l[0]));
            c.byte_values.reserve(scaled(l[1]));
            c.indices.reserve(scaled(l[2]));
            c.sample_offsets.reserve(scaled(l[3]));
            c.sequence_offsets.reserve(scaled(l[4]));
        }
        self.sequences.reserve(scaled(lengths.sequences));
    }

    /// Empty buffers for the given inputs.
    pub fn new(inputs: &[InputConfig]) -> Self {
        ParsedSequences {
            columns: inputs.iter().map(InputColumn::new).collect(),
            sequences: Vec::new(),
            entries_bound: 0,
        }
    }

    /// Whether every column stays below [`MAX_COLUMN_ENTRIES`] samples and stored values
    /// (or `limit`, lowered in tests) whatever lines of `text_len` bytes in all add: the
    /// parser then need not check them sample by sample.
    #[inline]
    pub(crate) fn has_room_for_text(&self, text_len: usize, limit: usize) -> bool {
        self.entries_bound.saturating_add(text_len) < limit
    }

    /// Counts `len` bytes of parsed lines (line feeds included) in the bound of
    /// [`has_room_for_text`](Self::has_room_for_text).
    #[inline]
    pub(crate) fn count_text(&mut self, len: usize) {
        self.entries_bound = self.entries_bound.saturating_add(len);
    }

    /// Sets the bound of [`has_room_for_text`](Self::has_room_for_text) to what the columns
    /// hold, after some were removed.
    fn recount_entries(&mut self) {
        self.entries_bound = self
            .columns
            .iter()
            .map(|c| c.sample_count().max(c.entry_count()))
            .max()
            .unwrap_or(0);
    }

    /// Number of complete sequences.
    pub fn len(&self) -> usize {
        self.sequences.len()
    }

    /// Whether no sequence is complete.
    pub fn is_empty(&self) -> bool {
        self.sequences.is_empty()
    }

    /// Number of samples input `input` has in sequence `seq`.
    pub fn sample_count(&self, seq: usize, input: usize) -> usize {
        let col = &self.columns[input];
        col.sequence_start(seq + 1) - col.sequence_start(seq)
    }

    /// The samples of input `input` in sequence `seq`.
    pub fn samples(&self, seq: usize, input: usize) -> impl Iterator<Item = Sample<'_, T>> + '_ {
        let col = &self.columns[input];
        (col.sequence_start(seq)..col.sequence_start(seq + 1)).map(move |i| col.sample(i))
    }

    /// Sample counts per input of the sequence being built (after the last complete one).
    pub(crate) fn open_sequence_counts(&self, out: &mut Vec<usize>) {
        out.clear();
        out.extend(
            self.columns
                .iter()
                .map(|c| c.sample_count() - c.sequence_start(c.sequence_count())),
        );
    }

    /// Seals the samples appended since the last complete sequence as one sequence.
    pub(crate) fn commit_sequence(&mut self, info: SequenceInfo) {
        for c in &mut self.columns {
            c.end_sequence();
        }
        self.sequences.push(info);
    }

    /// Discards the samples appended since the last complete sequence.
    pub(crate) fn rollback_sequence(&mut self) {
        for c in &mut self.columns {
            let start = c.sequence_start(c.sequence_count());
            c.truncate_samples(start);
        }
        self.recount_entries();
    }

    /// Appends copies of all complete sequences of `other` (same inputs), or nothing when an
    /// input would then hold more than [`MAX_COLUMN_ENTRIES`] samples or stored values.
    pub fn append(&mut self, other: &ParsedSequences<T>) -> Result<(), ColumnOverflow> {
        self.append_within(other, MAX_COLUMN_ENTRIES)
    }

    /// [`append`](Self::append) with a limit of `limit` (lowered in tests).
    fn append_within(
        &mut self,
        other: &ParsedSequences<T>,
        limit: usize,
    ) -> Result<(), ColumnOverflow> {
        self.append_range_within(other, 0..other.sequences.len(), limit)
    }

    /// Appends copies of the complete sequences `range` of `other` (same inputs), or nothing
    /// when an input would then hold more than [`MAX_COLUMN_ENTRIES`] samples or stored
    /// values.
    pub fn append_range(
        &mut self,
        other: &ParsedSequences<T>,
        range: Range<usize>,
    ) -> Result<(), ColumnOverflow> {
        self.append_range_within(other, range, MAX_COLUMN_ENTRIES)
    }

    /// [`append_range`](Self::append_range) with a limit of `limit`.
    fn append_range_within(
        &mut self,
        other: &ParsedSequences<T>,
        range: Range<usize>,
        limit: usize,
    ) -> Result<(), ColumnOverflow> {
        let range = range.start.min(other.sequences.len())..range.end.min(other.sequences.len());
        let range = range.start..range.end.max(range.start);
        for (input, (mine, theirs)) in self.columns.iter().zip(&other.columns).enumerate() {
            let start = theirs.sequence_start(range.start);
            let end = theirs.sequence_start(range.end);
            let values = match theirs.format {
                StorageFormat::Dense => 0,
                StorageFormat::Sparse => theirs.entry_start(end) - theirs.entry_start(start),
            };
            if !mine.room_for(end - start, values, limit) {
                return Err(ColumnOverflow { input });
            }
        }
        for (mine, theirs) in self.columns.iter_mut().zip(&other.columns) {
            let sample_base = mine.sample_count();
            let start = theirs.sequence_start(range.start);
            let end = theirs.sequence_start(range.end);
            match theirs.format {
                StorageFormat::Dense => {
                    mine.extend_values(theirs, start * theirs.dim..end * theirs.dim)
                }
                StorageFormat::Sparse => mine.extend_sparse(theirs, start..end),
            }
            let sequences = range.len();
            if mine.single_samples && theirs.single_samples {
                mine.implicit_sequences += sequences;
                continue;
            }
            if mine.single_samples {
                mine.store_sequence_offsets();
            }
            extend_offsets(
                &mut mine.sequence_offsets,
                (&theirs.sequence_offsets, theirs.single_samples),
                range.clone(),
                sample_base,
            );
        }
        self.sequences.extend_from_slice(&other.sequences[range]);
        self.recount_entries();
        Ok(())
    }

    /// Keeps the first `n` complete sequences and nothing after them.
    pub fn truncate(&mut self, n: usize) {
        if n >= self.sequences.len() {
            self.rollback_sequence();
            return;
        }
        for c in &mut self.columns {
            c.truncate_sequences(n);
        }
        self.sequences.truncate(n);
        self.recount_entries();
    }

    /// Removes every complete sequence, keeping a sequence that is still being built.
    pub fn clear_complete(&mut self) {
        self.drain_front(self.sequences.len());
    }

    /// Removes the first `n` complete sequences (every one, if fewer), keeping the others
    /// and a sequence that is still being built.
    pub fn drain_front(&mut self, n: usize) {
        let n = n.min(self.sequences.len());
        if n == 0 {
            return;
        }
        for c in &mut self.columns {
            c.drain_sequences(n);
        }
        self.sequences.drain(..n);
        self.recount_entries();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::LineParser;

    fn inputs() -> Vec<InputConfig> {
        vec![InputConfig::dense("d", 2), InputConfig::sparse("s", 10)]
    }

    #[test]
    fn sample_offsets_stored_late_keep_the_room_reserved_for_them() {
        // Samples of one entry leave the offsets implicit; the first of two entries stores
        // them, into the room reserved (as a loader reserves a part's buffers), and a column
        // without such room gets as much as its stored values have.
        let mut reserved = InputColumn::<f32>::new(&InputConfig::sparse("s", 10));
        reserved.indices.reserve(100);
        reserved.sample_offsets.reserve(40);
        let room = (
            reserved.sample_offsets.as_ptr(),
            reserved.sample_offsets.capacity(),
        );
        let mut bare = InputColumn::<f32>::new(&InputConfig::sparse("s", 10));
        bare.indices.reserve(100);
        for column in [&mut reserved, &mut bare] {
            for index in [3, 5, 7] {
                column.push_one_entry_sample(index, 1);
            }
            assert!(column.single_entries);
            let start = column.entry_count();
            column.push_entry(1, 0, start, EntryValue::Byte(2));
            column.push_entry(4, 1, start, EntryValue::Byte(1));
            column.end_sparse_sample(start);
            assert!(!column.single_entries);
            assert_eq!(column.sample_offsets, [0, 1, 2, 3, 5]);
        }
        assert_eq!(
            (
                reserved.sample_offsets.as_ptr(),
                reserved.sample_offsets.capacity()
            ),
            room
        );
        assert!(bare.sample_offsets.capacity() >= bare.indices.capacity());
    }

    /// One sequence per item of `sequences` (its lines separated by line feeds), parsed.
    fn parsed(sequences: &[&str]) -> ParsedSequences<f32> {
        let mut parser = LineParser::new(&inputs());
        let mut out = ParsedSequences::new(&inputs());
        let mut line = 0;
        for (n, sequence) in sequences.iter().enumerate() {
            let first = line + 1;
            for text in sequence.split('\n') {
                line += 1;
                let buf = format!("{text}\n");
                let mut diags = Vec::new();
                parser.parse_line(buf.as_bytes(), 0, 0, line, &mut out, &mut diags);
                assert!(diags.is_empty(), "{diags:?}");
            }
            out.commit_sequence(SequenceInfo {
                key: n as u64,
                line: first,
                counted_lines: (line + 1 - first) as u32,
            });
        }
        out
    }

    /// Whether the bound the parser trusts holds every column's samples and stored values.
    fn bound_holds(p: &ParsedSequences<f32>) -> bool {
        p.columns
            .iter()
            .all(|c| c.sample_count() <= p.entries_bound && c.entry_count() <= p.entries_bound)
    }

    #[test]
    fn the_entries_bound_holds_through_every_change() {
        let mut p = parsed(&["|d 1 2 |s 1:1 2:2 3:3\n|s 4:1", "|d 3 4 |s 5:5"]);
        assert!(bound_holds(&p) && p.entries_bound > 0);
        let other = parsed(&["|s 1:1 2:1 3:1 4:1 5:1 6:1 7:1 8:1 9:1"]);
        p.append(&other).unwrap();
        assert!(bound_holds(&p), "after append");
        p.truncate(1);
        assert!(bound_holds(&p), "after truncate");
        p.clear_complete();
        assert!(bound_holds(&p), "after clear");
        assert_eq!(p.entries_bound, 0, "recounted once empty");
        p.append_range(&other, 0..1).unwrap();
        assert_eq!(p.entries_bound, 9, "recounted after an append");
    }

    #[test]
    fn room_counts_samples_and_stored_values_against_the_limit() {
        // 2 samples of d; 2 samples of s holding 3 stored values.
        let mine = parsed(&["|d 1 2 |s 1:1 2:2", "|d 3 4 |s 3:3"]);
        let theirs = parsed(&["|d 5 6 |s 4:4 5:5"]);
        let (d, s) = (&mine.columns[0], &mine.columns[1]);
        // d: 2 + 1 samples; s: 2 + 1 samples, 3 + 2 values.
        assert!(d.has_room_within(&theirs.columns[0], 0, 3));
        assert!(!d.has_room_within(&theirs.columns[0], 0, 2));
        assert!(s.has_room_within(&theirs.columns[1], 0, 5));
        assert!(
            !s.has_room_within(&theirs.columns[1], 0, 4),
            "values past the limit"
        );
        assert!(d.has_room_within(&theirs.columns[0], 0, MAX_COLUMN_ENTRIES));
        assert!(s.has_room_within(&theirs.columns[1], 0, MAX_COLUMN_ENTRIES));
    }

    #[test]
    fn append_past_the_limit_changes_nothing() {
        let theirs = parsed(&["|d 5 6 |s 4:4 5:5", "|d 7 8 |s 6:6"]);
        let mut mine = parsed(&["|d 1 2 |s 1:1 2:2"]);
        let before = mine.clone();
        // s would hold 2 + 3 = 5 stored values.
        assert_eq!(
            mine.append_within(&theirs, 4),
            Err(ColumnOverflow { input: 1 })
        );
        assert_eq!(mine, before);
        mine.append_within(&theirs, 5).unwrap();
        assert_eq!(mine.len(), 3);
        assert_eq!(mine.columns[1].sample_offsets, [0, 2, 4, 5]);
        assert_eq!(mine.columns[1].values().to_vec(), [1.0, 2.0, 4.0, 5.0, 6.0]);
        let starts: Vec<Option<usize>> =
            (0..5).map(|s| mine.columns[0].samples_before(s)).collect();
        assert_eq!(starts, [Some(0), Some(1), Some(2), Some(3), None]);
    }

    /// Every sample of input `input`, as (indices, values).
    fn sparse_samples(p: &ParsedSequences<f32>, input: usize) -> Vec<(Vec<u32>, Vec<f32>)> {
        let col = &p.columns[input];
        (0..col.sample_count())
            .map(|i| match col.sample(i) {
                Sample::Sparse { indices, values } => (indices.to_vec(), values.to_vec()),
                Sample::Dense(_) => panic!("input {input} is dense"),
            })
            .collect()
    }

    /// Where each sequence of input `input` starts, and the end of the last.
    fn sequence_starts(p: &ParsedSequences<f32>, input: usize) -> Vec<usize> {
        let col = &p.columns[input];
        (0..=p.len()).map_while(|s| col.samples_before(s)).collect()
    }

    #[test]
    fn one_hot_samples_store_only_their_indices() {
        let p = parsed(&["|s 3:1", "|d 1 2 |s 7:1.0", "|s 0:1e0"]);
        let s = &p.columns[1];
        assert!(s.value_tier == ValueTier::Ones && s.single_entries);
        assert_eq!(s.values().as_stored(), None);
        assert!(s.values.is_empty() && s.byte_values.is_empty() && s.sample_offsets.is_empty());
        assert_eq!(s.indices(), [3, 7, 0]);
        assert_eq!(s.entry_count(), 3);
        assert_eq!(s.entries_of(1..3), Some(1..3));
        assert_eq!(s.entries_of(1..4), None);
        assert_eq!(
            sparse_samples(&p, 1),
            [
                (vec![3], vec![1.0]),
                (vec![7], vec![1.0]),
                (vec![0], vec![1.0])
            ]
        );
        assert_eq!(p.columns[0].values().to_vec(), [1.0, 2.0]);
        assert_eq!(p.columns[0].value_tier, ValueTier::Bytes);
    }

    #[test]
    fn the_first_other_value_or_size_stores_what_was_implicit() {
        let lines = [
            "|s 1:1",
            "|s 2:1",
            "|s 3:0",
            "|s 4:1 5:255",
            "|s 7:2",
            "|s 8:2.5",
            "|s",
            "|s 6:1",
        ];
        let expected: Vec<(Vec<u32>, Vec<f32>)> = vec![
            (vec![1], vec![1.0]),
            (vec![2], vec![1.0]),
            (vec![3], vec![0.0]),
            (vec![4, 5], vec![1.0, 255.0]),
            (vec![7], vec![2.0]),
            (vec![8], vec![2.5]),
            (vec![], vec![]),
            (vec![6], vec![1.0]),
        ];
        for n in 1..=lines.len() {
            let p = parsed(&lines[..n]);
            assert_eq!(sparse_samples(&p, 1), expected[..n], "after {n} lines");
            let s = &p.columns[1];
            let tier = match n {
                1..=2 => ValueTier::Ones,
                3..=5 => ValueTier::Bytes,
                _ => ValueTier::Stored,
            };
            assert_eq!(s.value_tier, tier, "after {n} lines");
            assert_eq!(s.values.is_empty(), tier != ValueTier::Stored);
            assert_eq!(s.byte_values.is_empty(), tier != ValueTier::Bytes);
            assert_eq!(s.stored_value_count(), s.entry_count());
            assert_eq!(s.single_entries, n < 4, "after {n} lines");
        }
        // A value that is not a byte straight after ones skips the byte tier.
        for wide in ["-0", "256", "0.5", "-1"] {
            let p = parsed(&["|s 1:1", &format!("|s 2:{wide}")]);
            assert_eq!(p.columns[1].value_tier, ValueTier::Stored, "{wide}");
            let want: f32 = wide.parse().unwrap();
            let got = p.columns[1].values().to_vec();
            assert_eq!(got[0], 1.0);
            assert_eq!(got[1].to_bits(), want.to_bits(), "{wide}");
        }
        // A sample of several stored values first: offsets stored, values still implicit.
        let p = parsed(&["|s 1:1 2:1", "|s 3:1"]);
        let s = &p.columns[1];
        assert!(s.value_tier == ValueTier::Ones && !s.single_entries);
        assert_eq!(s.sample_offsets, [0, 2, 3]);
        assert_eq!(
            sparse_samples(&p, 1),
            [(vec![1, 2], vec![1.0, 1.0]), (vec![3], vec![1.0])]
        );
    }

    /// What the column stores, raw: its buffers and the states that shape them.
    fn raw_state(c: &InputColumn<f32>) -> impl PartialEq + std::fmt::Debug {
        let (steps, wide) = c.indices.storage();
        (
            (steps.to_vec(), wide.to_vec(), c.indices.is_widened()),
            (
                c.values.clone(),
                c.byte_values.clone(),
                c.sample_offsets.clone(),
            ),
            (c.value_tier, c.single_entries, c.sample_count()),
        )
    }

    #[test]
    fn one_entry_samples_are_stored_as_the_general_path_stores_them() {
        // Each case: samples pushed before (one entry each unless listed), then one-entry
        // samples taken both ways; every state the fast path must tell apart: one-hot
        // ones, a zero or another byte (the byte tier), an index past the steps (widened
        // indices), a value stored as it is, a sample of several entries before.
        enum Before {
            Entry(u32, u8),
            Wide(u32, f32),
            Several(&'static [u32]),
        }
        use Before::*;
        let cases: &[&[Before]] = &[
            &[],
            &[Entry(3, 1)],
            &[Entry(3, 0)],
            &[Entry(3, 7)],
            &[Entry(70_000, 1)],
            &[Entry(3, 1), Entry(70_000, 9)],
            &[Wide(4, 2.5)],
            &[Wide(80_000, 300.0)],
            &[Several(&[1, 2])],
            &[Several(&[1, 70_000]), Entry(5, 2)],
        ];
        let after = [
            (9, 1),
            (65_535, 1),
            (0, 0),
            (65_536, 1),
            (12, 9),
            (99_999, 0),
            (7, 1),
            (100, 3),
        ];
        for (k, before) in cases.iter().enumerate() {
            let config = InputConfig::sparse("s", 100_000);
            let mut general = InputColumn::<f32>::new(&config);
            for step in before.iter() {
                let start = general.entry_count();
                match *step {
                    Entry(index, digit) => {
                        general.push_entry(index, 0, start, EntryValue::Byte(digit))
                    }
                    Wide(index, value) => {
                        general.push_entry(index, 0, start, EntryValue::Wide(value))
                    }
                    Several(indices) => {
                        let mut last = 0;
                        for &index in indices {
                            general.push_entry(index, last, start, EntryValue::Byte(1));
                            last = index;
                        }
                    }
                }
                general.end_sparse_sample(start);
            }
            let mut quick = general.clone();
            for (n, &(index, digit)) in after.iter().enumerate() {
                let start = general.entry_count();
                general.push_entry(index, 0, start, EntryValue::Byte(digit));
                general.end_sparse_sample(start);
                quick.push_one_entry_sample(index, digit);
                assert_eq!(
                    raw_state(&quick),
                    raw_state(&general),
                    "case {k}, sample {n}"
                );
                assert!(quick == general, "case {k}, sample {n}");
            }
        }
    }

    #[test]
    fn dense_values_take_a_byte_until_one_does_not_fit() {
        let lines = ["|d 1 255", "|d 0 0", "|d 3 -0", "|d 7 0", "|d 2.5 1e3"];
        let expected: [f32; 10] = [1.0, 255.0, 0.0, 0.0, 3.0, -0.0, 7.0, 0.0, 2.5, 1000.0];
        for n in 1..=lines.len() {
            let p = parsed(&lines[..n]);
            let d = &p.columns[0];
            let tier = if n < 3 {
                ValueTier::Bytes
            } else {
                ValueTier::Stored
            };
            assert_eq!(d.value_tier, tier, "after {n} lines");
            let got: Vec<u32> = d.values().iter().map(f32::to_bits).collect();
            let want: Vec<u32> = expected[..2 * n].iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "after {n} lines");
            assert_eq!(d.sample_count(), n);
            assert_eq!(d.values.is_empty(), tier == ValueTier::Bytes);
            assert_eq!(d.byte_values.is_empty(), tier == ValueTier::Stored);
        }
        // `d` has dim 2: a short sample is padded with zeros in either tier, and a sample
        // that widens the column and then fails leaves the samples before it.
        let mut p = parsed(&[]);
        let mut parser = LineParser::new(&inputs());
        for (line, tier, want) in [
            ("|d 4", ValueTier::Bytes, &[4.0, 0.0][..]),
            ("|d 0.5 2 3", ValueTier::Stored, &[4.0, 0.0]),
            ("|d 9", ValueTier::Stored, &[4.0, 0.0, 9.0, 0.0]),
        ] {
            let mut diags = Vec::new();
            parser.parse_line(format!("{line}\n").as_bytes(), 0, 0, 1, &mut p, &mut diags);
            assert_eq!(diags.len(), 1, "{line}: {diags:?}");
            assert_eq!(p.columns[0].value_tier, tier, "{line}");
            assert_eq!(p.columns[0].values().to_vec(), want, "{line}");
        }
    }

    #[test]
    fn a_scalar_sample_appends_what_a_zero_sample_set_to_it_appends() {
        // Bytes, then a value that widens the tier, then both kinds again in the wider tier.
        let values = [
            EntryValue::Byte(3),
            EntryValue::Byte(0),
            EntryValue::Wide(2.5f32),
            EntryValue::Byte(255),
            EntryValue::Wide(-1e9),
        ];
        let input = InputConfig::dense("x", 1);
        let mut pushed = ParsedSequences::<f32>::new(std::slice::from_ref(&input));
        let mut set = pushed.clone();
        for (n, &value) in values.iter().enumerate() {
            pushed.columns[0].push_scalar_sample(value);
            let at = set.columns[0].push_zero_sample();
            set.columns[0].set_dense_value(at, value);
            let (a, b) = (&pushed.columns[0], &set.columns[0]);
            assert_eq!(a.value_tier, b.value_tier, "after {} values", n + 1);
            assert_eq!(
                a.values().to_vec(),
                b.values().to_vec(),
                "after {} values",
                n + 1
            );
        }
        let want: Vec<f32> = values.iter().map(|v| v.value()).collect();
        assert_eq!(pushed.columns[0].values().to_vec(), want);
        assert_eq!(pushed.columns[0].value_tier, ValueTier::Stored);
    }

    #[test]
    fn a_range_of_sequences_appends_as_if_parsed_alone() {
        // Sequences that change the columns' tiers (values, wide indices, several samples)
        // on either side of the range.
        let all: [&str; 9] = [
            "|d 1 2 |s 1:1",
            "|d 3 4 |s 2:1\n|d 5 6 |s 3:1",
            "|d 1 2 |s 2:0 3:1",
            "|d 7 8 |s 4:255",
            "|d 1 2 |s 2:-3 9:1",
            "|d 9 9 |s 4:1.5 5:1\n|d 0 0 |s 6:1\n|d 1 1 |s 7:1",
            "|d 1 2 |s 6:1",
            "|d 3 4 |s 1:1",
            "|d 300 4 |s 2:2",
        ];
        let whole = parsed(&all);
        for start in 0..all.len() {
            for end in start..=all.len() {
                for prefix in [0, 1, 6] {
                    let mut got = parsed(&all[..prefix]);
                    got.append_range(&whole, start..end).unwrap();
                    let lines: Vec<&str> = all[..prefix]
                        .iter()
                        .chain(&all[start..end])
                        .copied()
                        .collect();
                    let want = parsed(&lines);
                    let context = format!("{prefix} then {start}..{end}");
                    assert_eq!(got.columns, want.columns, "{context}");
                    assert_eq!(
                        sparse_samples(&got, 1),
                        sparse_samples(&want, 1),
                        "{context}"
                    );
                    assert_eq!(
                        &got.sequences[prefix..],
                        &whole.sequences[start..end],
                        "{context}"
                    );
                }
            }
        }
    }

    #[test]
    fn appends_mix_implicit_and_stored_columns() {
        let variants: [&[&str]; 10] = [
            &["|s 1:1", "|s 2:1"],
            &["|s 2:3", "|s 4:1"],
            &["|s 2:0 3:1", "|s 4:255"],
            &["|s 2:-3", "|s 4:1"],
            &["|s 3:0", "|s 4:1.5 5:1"],
            &["|s 4:1 5:1", "|s 6:1"],
            &["|s", "|s 7:1"],
            &["|d 1 2"],
            &["|d 1 2 |s 1:1\n|d 3 4 |s 2:1", "|d 5 6 |s 3:1"],
            &["|d 1 2 |s 1:1", "|d 3 4 |s 2:2\n|d 5 6"],
        ];
        for a in variants {
            for b in variants {
                let both: Vec<&str> = a.iter().chain(b).copied().collect();
                let whole = parsed(&both);
                let theirs = parsed(b);
                let mut appended = parsed(a);
                appended.append(&theirs).unwrap();
                let mut pushed = parsed(a);
                for seq in 0..theirs.len() {
                    for (mine, other) in pushed.columns.iter_mut().zip(&theirs.columns) {
                        assert!(mine.has_room_within(other, seq, MAX_COLUMN_ENTRIES));
                        mine.push_sequence_of(other, seq);
                    }
                    pushed.sequences.push(theirs.sequences[seq]);
                }
                for got in [&appended, &pushed] {
                    assert_eq!(
                        sparse_samples(got, 1),
                        sparse_samples(&whole, 1),
                        "{both:?}"
                    );
                    assert_eq!(sequence_starts(got, 0), sequence_starts(&whole, 0));
                    assert_eq!(sequence_starts(got, 1), sequence_starts(&whole, 1));
                    assert_eq!(got.columns[0], whole.columns[0], "{both:?}");
                }
            }
        }
    }

    #[test]
    fn sequences_of_one_sample_leave_out_their_offsets() {
        // Per input, the samples of each sequence: `d` 1, 1, 2, 1; `s` 1, 1, 1, 0.
        let sequences = [
            "|d 1 2 |s 1:1",
            "|d 3 4 |s 2:1",
            "|d 5 6 |s 3:1\n|d 7 8",
            "|d 9 9",
        ];
        let starts = [[0, 1, 2, 4, 5], [0, 1, 2, 3, 3]];
        for n in 0..=sequences.len() {
            let p = parsed(&sequences[..n]);
            for (input, starts) in starts.iter().enumerate() {
                assert_eq!(sequence_starts(&p, input), starts[..=n], "{n} sequences");
            }
            let (d, s) = (&p.columns[0], &p.columns[1]);
            assert_eq!(d.single_samples, n < 3, "{n} sequences");
            assert_eq!(s.single_samples, n < 4, "{n} sequences");
            if d.single_samples {
                assert!(d.sequence_offsets.is_empty());
            }
            assert_eq!(d.samples_before(n + 1), None);
        }
        // Rolling back an open sequence of two samples leaves the implicit offsets right.
        let mut p = parsed(&sequences[..2]);
        let mut parser = LineParser::new(&inputs());
        for line in ["|d 5 6\n", "|d 7 8\n"] {
            parser.parse_line(line.as_bytes(), 0, 0, 3, &mut p, &mut Vec::new());
        }
        p.rollback_sequence();
        assert_eq!(sequence_starts(&p, 0), [0, 1, 2]);
        assert_eq!(p.columns[0].sample_count(), 2);
    }

    #[test]
    fn truncate_and_clear_keep_implicit_columns_whole() {
        for lines in [
            ["|s 1:1", "|s 2:1", "|s 3:4 5:1", "|s 6:1"],
            ["|s 1:1", "|s 2:1", "|s 3:4 5:1", "|s 6:0.5"],
        ] {
            truncate_and_clear_keep_the_other_samples(&lines);
        }
    }

    fn truncate_and_clear_keep_the_other_samples(lines: &[&str]) {
        let full = parsed(lines);
        for n in 0..=lines.len() {
            let mut cut = full.clone();
            cut.truncate(n);
            assert_eq!(
                sparse_samples(&cut, 1),
                sparse_samples(&parsed(&lines[..n]), 1)
            );
            let mut rest = full.clone();
            rest.sequences.truncate(n);
            rest.clear_complete();
            assert_eq!(rest.columns[1].sample_count(), lines.len() - n);
            assert_eq!(
                sparse_samples(&rest, 1),
                sparse_samples(&full, 1)[n..],
                "after clearing {n}"
            );
        }
    }

    #[test]
    fn drain_front_keeps_the_later_sequences_as_they_were() {
        let sequences = [
            "|d 1 2 |s 1:1 2:2\n|s 4:1",
            "|d 3 4",
            "|s 5:1",
            "|s 5:5 9:1.5\n|d 0 1\n|s 1:1",
            "|s 3:1",
            "|d 5 6 |s 7:1 8:1",
        ];
        let full = parsed(&sequences);
        for n in 0..=sequences.len() + 1 {
            let mut drained = full.clone();
            drained.drain_front(n);
            let mut want = ParsedSequences::new(&inputs());
            want.append_range(&full, n.min(sequences.len())..sequences.len())
                .unwrap();
            assert_eq!(drained, want, "after draining {n}");
            assert!(bound_holds(&drained), "after draining {n}");
        }
    }

    #[test]
    fn equality_ignores_what_is_left_implicit() {
        let implicit = parsed(&["|s 1:1"]);
        for other in ["|s 2:2 3:3", "|s 2:2.5 3:3"] {
            let mut stored = parsed(&["|s 1:1", other]);
            stored.truncate(1);
            assert!(stored.columns[1].value_tier > ValueTier::Ones);
            assert!(!stored.columns[1].single_entries);
            assert_eq!(stored, implicit, "{other}");
        }
        assert_ne!(parsed(&["|s 1:2"]), implicit);
        assert_ne!(parsed(&["|s 1:2.5"]), parsed(&["|s 1:2"]));
        assert_ne!(parsed(&["|s 1:1 2:1"]), implicit);
    }
}
