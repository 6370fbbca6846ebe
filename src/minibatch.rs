//! Packed minibatches: the packer's output, in the flat layout of SPEC §5.
//!
//! A [`Minibatch`] holds one [`StreamData`] per configured input: a dense input's samples as
//! one contiguous `samples x dim` array, a sparse input's samples as compressed columns (one
//! column per sample), and for every input the offset where each sequence starts. The packer
//! builds it by appending whole parsed sequences in minibatch order
//! ([`Minibatch::push_sequence`]), copying each input's slice of the parser's columnar buffers
//! ([`ParsedSequences`]) in bulk. Buffers only grow: a cleared minibatch keeps its capacity,
//! and a [`MinibatchPool`] recycles minibatches so that, once warm, packing allocates nothing.
//! Every buffer is a plain `Vec`, readable in place by a C consumer. For trainers that want a
//! rectangular tensor, [`Minibatch::padded`] writes a padded copy of a dense input with a mask.

use std::fmt;
use std::mem;
use std::ops::{Deref, DerefMut, Range};
// `Arc` stays `std`'s: `take_pooled` takes `self: &Arc<Self>`, a receiver only `std`'s smart
// pointers can be, and `MinibatchSource` shares its pool with callers through it.
use crate::sync::{Mutex, MutexGuard};
use std::sync::Arc;

use crate::config::{InputConfig, StorageFormat};
use crate::parser::{Element, InputColumn, ParsedSequences, SequenceLookup};
use crate::prefetch::prefetch_hint;

/// Most stored values a sparse stream of one minibatch may hold: its column starts are `u32`.
const MAX_SPARSE_VALUES: usize = u32::MAX as usize;

/// Why a sequence could not be packed, or a view could not be built.
///
/// Every error leaves the minibatch as it was before the call.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PackError {
    /// The parsed sequences have a different number of inputs than the minibatch.
    InputCount {
        /// Inputs of the minibatch.
        expected: usize,
        /// Inputs of the parsed sequences.
        found: usize,
    },
    /// An input of the parsed sequences differs from the minibatch's in format or dimension.
    InputMismatch {
        /// The input (configuration order).
        input: usize,
        /// Format and dimension of the minibatch's stream.
        expected: (StorageFormat, usize),
        /// Format and dimension of the parsed column.
        found: (StorageFormat, usize),
    },
    /// The sequence index is not that of a complete parsed sequence.
    NoSuchSequence {
        /// The index asked for.
        seq: usize,
        /// Complete sequences available.
        sequences: usize,
    },
    /// The input index is not that of a stream of the minibatch.
    NoSuchInput {
        /// The index asked for.
        input: usize,
        /// Streams of the minibatch.
        inputs: usize,
    },
    /// Offsets of an input's buffers are out of range or decreasing (buffers built by hand
    /// and left inconsistent; the parser and the packer never produce them).
    Inconsistent {
        /// The input (configuration order).
        input: usize,
        /// Which offsets are wrong.
        what: &'static str,
    },
    /// A sparse stream would hold more stored values than its `u32` column starts can
    /// address (`u32::MAX`).
    TooManySparseValues {
        /// The input (configuration order).
        input: usize,
        /// Stored values the stream would hold with the sequence appended.
        values: u64,
    },
    /// [`Minibatch::padded`] was asked for a sparse input.
    NotDense {
        /// The input (configuration order).
        input: usize,
    },
    /// The padded view would not fit in memory (`batch x max_len x dim` overflows).
    PaddedTooLarge {
        /// The input (configuration order).
        input: usize,
        /// Sequences.
        batch: usize,
        /// Longest sequence, in samples.
        max_len: usize,
        /// Values per sample.
        dim: usize,
    },
}

fn format_name(format: StorageFormat) -> &'static str {
    match format {
        StorageFormat::Dense => "dense",
        StorageFormat::Sparse => "sparse",
    }
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PackError::InputCount { expected, found } => write!(
                f,
                "cannot pack: the minibatch has {expected} inputs, the parsed sequences have \
                 {found}"
            ),
            PackError::InputMismatch {
                input,
                expected,
                found,
            } => write!(
                f,
                "cannot pack: input {input} is {} with dim {} in the minibatch but {} with dim \
                 {} in the parsed sequences",
                format_name(expected.0),
                expected.1,
                format_name(found.0),
                found.1
            ),
            PackError::NoSuchSequence { seq, sequences } => write!(
                f,
                "cannot pack sequence {seq}: the parsed sequences hold {sequences} complete \
                 sequences"
            ),
            PackError::NoSuchInput { input, inputs } => {
                write!(f, "no input {input}: the minibatch has {inputs} inputs")
            }
            PackError::Inconsistent { input, what } => write!(
                f,
                "cannot pack: the {what} of input {input} are out of range or decreasing"
            ),
            PackError::TooManySparseValues { input, values } => write!(
                f,
                "minibatch too large: sparse input {input} would hold {values} stored values, \
                 more than the {} a minibatch can hold (u32 column starts); ask for smaller \
                 minibatches",
                u32::MAX
            ),
            PackError::NotDense { input } => write!(
                f,
                "the padded view is for dense inputs; input {input} is sparse"
            ),
            PackError::PaddedTooLarge {
                input,
                batch,
                max_len,
                dim,
            } => write!(
                f,
                "the padded view of input {input} ({batch} sequences x {max_len} samples x \
                 {dim} values) does not fit in memory"
            ),
        }
    }
}

impl std::error::Error for PackError {}

/// The samples of one input in a minibatch, in flat buffers.
///
/// Sequence `i` holds samples `sequence_starts[i]..sequence_starts[i + 1]` of this stream
/// (its sample count is the difference, possibly 0). Dense: sample `j` is
/// `values[j * dim..(j + 1) * dim]`. Sparse (compressed sparse columns, one column per
/// sample): sample `j` holds the stored values `values[k]` at rows `row_indices[k]` for `k` in
/// `column_starts[j]..column_starts[j + 1]`, in file order (duplicates and explicit zeros are
/// kept, as parsed; every row index is `< dim`).
#[derive(Clone, Debug, PartialEq)]
pub struct StreamData<T> {
    /// Dense or sparse.
    pub format: StorageFormat,
    /// Dense: values per sample. Sparse: number of rows (exclusive bound of row indices).
    pub dim: usize,
    /// Samples held, all sequences together.
    pub samples: usize,
    /// Dense: `samples x dim` values, sample after sample, no gaps. Sparse: the stored values
    /// of all samples, column after column.
    pub values: Vec<T>,
    /// Sparse: the row of each stored value (same length as `values`). Dense: empty.
    pub row_indices: Vec<u32>,
    /// Sparse: where each sample's column starts in `values`; `samples + 1` entries, the
    /// first 0, the last `values.len()`. Dense: empty.
    pub column_starts: Vec<u32>,
    /// First sample of each sequence, in minibatch order; `sequences + 1` entries, the first
    /// 0, the last `samples`.
    pub sequence_starts: Vec<usize>,
}

/// Where one parsed sequence lies in an input's column.
#[derive(Clone)]
struct Span {
    samples: Range<usize>,
    values: Range<usize>,
    /// Read from a [`SequenceLookup`] (one sample, its values found and checked there), so
    /// that [`values_of`] need not find them.
    looked_up: bool,
}

/// A sequence to pack: its parsed part, the part's [`SequenceLookup`] if it has one (built
/// from that part), and its index among the part's sequences.
pub(crate) type PackItem<'a, T> = (&'a ParsedSequences<T>, Option<&'a SequenceLookup>, usize);

impl<T: Element> StreamData<T> {
    fn new(input: &InputConfig) -> Self {
        StreamData {
            format: input.format,
            dim: input.dim,
            samples: 0,
            values: Vec::new(),
            row_indices: Vec::new(),
            column_starts: match input.format {
                StorageFormat::Dense => Vec::new(),
                StorageFormat::Sparse => vec![0],
            },
            sequence_starts: vec![0],
        }
    }

    fn clear(&mut self) {
        self.samples = 0;
        self.values.clear();
        self.row_indices.clear();
        self.column_starts.clear();
        if self.format == StorageFormat::Sparse {
            self.column_starts.push(0);
        }
        self.sequence_starts.clear();
        self.sequence_starts.push(0);
    }

    /// Checks that sequence `seq` of `col` can be appended; changes nothing.
    fn check(
        &self,
        input: usize,
        col: &InputColumn<T>,
        seq: usize,
        max_sparse_values: usize,
    ) -> Result<(), PackError> {
        self.check_shape(input, col)?;
        let span = locate(input, col, seq)?;
        if self.format == StorageFormat::Sparse {
            let held = self.values.len() as u64;
            self.check_sparse(input, col, &span, held, max_sparse_values)?;
        }
        Ok(())
    }

    /// Checks that `col` has this stream's format and dimension.
    fn check_shape(&self, input: usize, col: &InputColumn<T>) -> Result<(), PackError> {
        if col.format != self.format || col.dim != self.dim {
            return Err(PackError::InputMismatch {
                input,
                expected: (self.format, self.dim),
                found: (col.format, col.dim),
            });
        }
        Ok(())
    }

    /// Checks a sparse span (found by [`locate`] or a lookup, which checked that its values
    /// end no earlier than they start): its samples' offsets in order, and `held` values
    /// plus its own within `max_sparse_values`.
    fn check_sparse(
        &self,
        input: usize,
        col: &InputColumn<T>,
        span: &Span,
        held: u64,
        max_sparse_values: usize,
    ) -> Result<(), PackError> {
        // One sample's offsets are its values' start and end, already checked.
        if !col.single_entries && span.samples.end > span.samples.start + 1 {
            let offsets = &col.sample_offsets[span.samples.start..=span.samples.end];
            if offsets.windows(2).any(|w| w[0] > w[1]) {
                return Err(PackError::Inconsistent {
                    input,
                    what: "sample offsets",
                });
            }
        }
        let total = held + span.values.len() as u64;
        if total > max_sparse_values as u64 {
            return Err(PackError::TooManySparseValues {
                input,
                values: total,
            });
        }
        Ok(())
    }

    /// Reserves room to append `sequences` sequences whose spans are `spans` (found by
    /// [`locate`] and checked), so that appending them grows no buffer.
    fn reserve_spans<'a>(&mut self, sequences: usize, spans: impl Iterator<Item = &'a Span>) {
        let (values, samples) = spans.fold((0, 0), |(v, s), span| {
            (v + span.values.len(), s + span.samples.len())
        });
        make_room(&mut self.values, values);
        if self.format == StorageFormat::Sparse {
            make_room(&mut self.row_indices, values);
            make_room(&mut self.column_starts, samples);
        }
        make_room(&mut self.sequence_starts, sequences);
    }

    /// Appends sequence `seq` of `col`, which [`StreamData::check`] accepted.
    fn append(&mut self, input: usize, col: &InputColumn<T>, seq: usize) -> Result<(), PackError> {
        let span = locate(input, col, seq)?;
        self.append_span(col, &span);
        Ok(())
    }

    /// Appends the samples of `span` (found by [`locate`] or a lookup, and checked) from
    /// `col`.
    fn append_span(&mut self, col: &InputColumn<T>, span: &Span) {
        let Span {
            samples, values, ..
        } = span.clone();
        match self.format {
            StorageFormat::Dense => col.values_in(values).append_to(&mut self.values),
            StorageFormat::Sparse if samples.end == samples.start + 1 => {
                // One sample, its entries `values` (its offsets need not be read again): its
                // indices are those entries' alone, and its column ends where its values do
                // (the check kept that in `u32`).
                let end = self.values.len() + values.len();
                col.indices
                    .sample(values.clone())
                    .append_to(&mut self.row_indices);
                col.values_in(values).append_to(&mut self.values);
                self.column_starts.push(end as u32);
            }
            StorageFormat::Sparse => {
                let base = self.values.len();
                let first = values.start;
                col.values_in(values.clone()).append_to(&mut self.values);
                col.append_indices(samples.clone(), &mut self.row_indices);
                // The check saw the offsets non-decreasing and `base + their span` within
                // `u32::MAX`, so neither the subtraction nor the conversion loses anything.
                self.column_starts.extend(
                    (samples.start + 1..=samples.end)
                        .map(|k| (col.entry_start(k) - first + base) as u32),
                );
            }
        }
        self.samples += samples.len();
        self.sequence_starts.push(self.samples);
    }
}

/// Makes room in `buffer` for `more` elements. An emptied buffer of a recycled minibatch too
/// small for the next one is replaced by one an eighth larger than it needs, rather than
/// grown to twice its size with its stale contents copied: the next minibatches, a little
/// larger or smaller, then fit, and fewer fresh pages are touched. Others grow as `reserve`
/// grows them (a fresh one to exactly `more`).
fn make_room<E>(buffer: &mut Vec<E>, more: usize) {
    if buffer.capacity() - buffer.len() >= more {
        return;
    }
    if buffer.is_empty() && buffer.capacity() > 0 {
        *buffer = Vec::with_capacity(more.saturating_add(more / 8));
    } else {
        buffer.reserve(more);
    }
}

/// How many sequences ahead of the one it reads [`Minibatch::push_sequences`] prefetches
/// the first offsets (and key) of, while it finds the sequences' spans.
const AHEAD: usize = 16;

/// How many sequences ahead of the one it copies [`Minibatch::push_sequences`] prefetches
/// the span of. Measured: 4 to 32 gave the same times on the 100 MB sparse and dense files;
/// prefetching every span before the first copy made the sparse sweep's packing 1.4x
/// slower.
const COPY_AHEAD: usize = 8;

/// The items a pass over `len` items prefetches before its first: the first `ahead`.
#[inline(always)]
fn prefetched_first(len: usize, ahead: usize) -> Range<usize> {
    0..len.min(ahead)
}

/// The item a pass over `len` items prefetches at item `k`: item `k + ahead`, if there is
/// one (those before it came first, see [`prefetched_first`]).
#[inline(always)]
fn prefetched_at(k: usize, len: usize, ahead: usize) -> Option<usize> {
    let item = k + ahead;
    (item < len).then_some(item)
}

/// `lookup`, unless it has rows for other than `from`'s sequences (it is built from `from`,
/// which nothing changes afterwards: one comparison guards against a mismatched pair).
#[inline]
fn usable_lookup<'a, T>(
    from: &ParsedSequences<T>,
    lookup: Option<&'a SequenceLookup>,
) -> Option<&'a SequenceLookup> {
    lookup.filter(|l| l.len() == from.sequences.len())
}

/// Prefetches what finding a sequence to pack reads first: its lookup row if its part has
/// one, else as [`prefetch_sequence_start`].
#[inline]
fn prefetch_item_start<T>((from, lookup, seq): PackItem<'_, T>) {
    match lookup.and_then(|l| l.ends_of_row(seq)) {
        Some((first, last)) => {
            prefetch_line(first);
            prefetch_line(last);
        }
        None => prefetch_sequence_start(from, seq),
    }
}

/// Prefetches what finding sequence `seq` of `from` reads first: its key, and per input its
/// sequence offsets, or while every sequence holds one sample (sequence `seq` is sample
/// `seq`) its sample offsets.
#[inline]
fn prefetch_sequence_start<T>(from: &ParsedSequences<T>, seq: usize) {
    if let Some(info) = from.sequences.get(seq) {
        prefetch_line(info);
    }
    for col in &from.columns {
        if col.single_samples {
            prefetch_sample_offset(col, seq);
        } else if let Some(offset) = col.sequence_offsets.get(seq) {
            prefetch_line(offset);
        }
    }
}

/// Prefetches the offset of sample `sample` of a sparse column, which [`values_of`] reads
/// (nothing while every sample holds one entry, or for dense data).
#[inline]
fn prefetch_sample_offset<T>(col: &InputColumn<T>, sample: usize) {
    if col.format == StorageFormat::Sparse && !col.single_entries {
        if let Some(offset) = col.sample_offsets.get(sample) {
            prefetch_line(offset);
        }
    }
}

/// Prefetches the values and row indices of `span` (found by [`locate`]) in `col`, however
/// they are stored, up to [`TOUCHED_LINES`] lines of each.
#[inline]
fn touch_span<T: Copy>(col: &InputColumn<T>, span: &Span) {
    touch_lines(&col.values, &span.values);
    touch_lines(&col.byte_values, &span.values);
    let (steps, indices) = col.indices.storage();
    touch_lines(steps, &span.values);
    touch_lines(indices, &span.values);
}

/// How many cache lines of each span [`touch_lines`] prefetches ahead of the copy.
const TOUCHED_LINES: usize = 16;

/// Prefetches each 64-byte cache line of `buffer[range]` (its first [`TOUCHED_LINES`]
/// lines; a range out of bounds is left alone), so that the lines are on their way to the
/// cache before they are copied. Elements a line apart from the first,
/// and the last one: a range that does not start on a line boundary ends in one more line
/// than a line-apart walk meets.
#[inline]
fn touch_lines<E: Copy>(buffer: &[E], range: &Range<usize>) {
    let Some(span) = buffer.get(range.clone()) else {
        return;
    };
    let step = (64 / std::mem::size_of::<E>().max(1)).max(1);
    each_touched(span, step, prefetch_line);
}

/// Starts bringing the cache line of `element` in: a prefetch on x86-64, which the core
/// does not wait for, so that many are in flight at once; a plain read elsewhere (unlike
/// [`prefetch_hint`], which does nothing there).
#[inline(always)]
fn prefetch_line<E: Copy>(element: &E) {
    prefetch_hint(element);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse")))]
    std::hint::black_box(*element);
}

/// Visits the elements [`touch_lines`] reads in `span`, `step` elements to a line.
#[inline(always)]
fn each_touched<E>(span: &[E], step: usize, mut visit: impl FnMut(&E)) {
    for element in span.iter().step_by(step).take(TOUCHED_LINES) {
        visit(element);
    }
    if span.len() <= step * TOUCHED_LINES {
        if let Some(last) = span.last() {
            visit(last);
        }
    }
}

/// Finds sequence `seq` in `col`, checking every offset it reads against the buffers.
fn locate<T>(input: usize, col: &InputColumn<T>, seq: usize) -> Result<Span, PackError> {
    let samples = samples_of(input, col, seq)?;
    let values = values_of(input, col, &samples)?;
    Ok(Span {
        samples,
        values,
        looked_up: false,
    })
}

/// The samples of sequence `seq` in `col`: the first step of [`locate`].
#[inline]
fn samples_of<T>(
    input: usize,
    col: &InputColumn<T>,
    seq: usize,
) -> Result<std::ops::Range<usize>, PackError> {
    if col.single_samples {
        return if seq < col.sequence_count() {
            Ok(seq..seq + 1)
        } else {
            Err(PackError::Inconsistent {
                input,
                what: "sequence offsets",
            })
        };
    }
    match (
        col.sequence_offsets.get(seq),
        col.sequence_offsets.get(seq.wrapping_add(1)),
    ) {
        (Some(&a), Some(&b)) if a <= b => Ok(a as usize..b as usize),
        _ => Err(PackError::Inconsistent {
            input,
            what: "sequence offsets",
        }),
    }
}

/// The values of `samples` in `col`: the second step of [`locate`].
#[inline]
fn values_of<T>(
    input: usize,
    col: &InputColumn<T>,
    samples: &std::ops::Range<usize>,
) -> Result<std::ops::Range<usize>, PackError> {
    let bad = |what| PackError::Inconsistent { input, what };
    let values = match col.format {
        StorageFormat::Dense => {
            let start = samples.start.checked_mul(col.dim);
            let end = samples.end.checked_mul(col.dim);
            match (start, end) {
                (Some(a), Some(b)) if b <= col.stored_value_count() => a..b,
                _ => return Err(bad("sequence offsets")),
            }
        }
        StorageFormat::Sparse if col.single_entries => {
            if samples.end > col.indices.len() || samples.end > col.stored_value_count() {
                return Err(bad("sample offsets"));
            }
            samples.clone()
        }
        StorageFormat::Sparse => {
            match (
                col.sample_offsets.get(samples.start),
                col.sample_offsets.get(samples.end),
            ) {
                (Some(&a), Some(&b))
                    if a <= b
                        && b as usize <= col.stored_value_count()
                        && b as usize <= col.indices.len() =>
                {
                    a as usize..b as usize
                }
                _ => return Err(bad("sample offsets")),
            }
        }
    };
    Ok(values)
}

/// One sequence of a minibatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct MinibatchSequence {
    /// The sequence key: its id, or in line mode its 0-based line number across the corpus.
    pub key: u64,
}

/// A packed minibatch: whole sequences, each input's samples in flat buffers (SPEC §5).
///
/// Sequence `i` (minibatch order) is `sequences[i]`; its samples of input `k` are samples
/// `streams[k].sequence_starts[i]..streams[k].sequence_starts[i + 1]` of `streams[k]`.
/// Inputs of one sequence may have different sample counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Minibatch<T> {
    /// One stream per configured input, in configuration order.
    pub streams: Vec<StreamData<T>>,
    /// The sequences, in minibatch order.
    pub sequences: Vec<MinibatchSequence>,
    /// Whether this minibatch reaches or crosses the end of a sweep (set by the caller).
    pub sweep_end: bool,
    /// Whether this minibatch ends an epoch of an explicit epoch size (set by the caller).
    pub epoch_end: bool,
    /// The position on the timeline after this minibatch, in samples (set by the caller).
    pub position: u64,
    /// The input whose sample count is the minibatch's (`definesMBSize`), if any.
    defines_mb_size: Option<usize>,
}

impl<T> Minibatch<T> {
    /// A minibatch with no streams, allocating nothing (a stand-in while one is moved out).
    fn placeholder() -> Self {
        Minibatch {
            streams: Vec::new(),
            sequences: Vec::new(),
            sweep_end: false,
            epoch_end: false,
            position: 0,
            defines_mb_size: None,
        }
    }

    /// Starts bringing in the streams' descriptions (`samples`, the buffers' addresses and
    /// lengths), which a consumer reads first: a packer thread wrote them, so they are in
    /// its core's cache, not the consumer's. See [`prefetch_buffers`](Self::prefetch_buffers).
    pub(crate) fn prefetch_descriptions(&self) {
        for stream in &self.streams {
            // The fields, wherever the layout puts them, cover every line of the description.
            prefetch_hint(&stream.format);
            prefetch_hint(&stream.samples);
            prefetch_hint(&stream.values);
            prefetch_hint(&stream.row_indices);
            prefetch_hint(&stream.column_starts);
            prefetch_hint(&stream.sequence_starts);
        }
    }

    /// Starts bringing in the first cache line of every stream buffer. Finding them reads the
    /// descriptions, so this is for a minibatch whose descriptions were asked for a step
    /// earlier ([`prefetch_descriptions`](Self::prefetch_descriptions)); the hardware then
    /// follows each buffer on its own.
    pub(crate) fn prefetch_buffers(&self) {
        for stream in &self.streams {
            stream.values.first().map(prefetch_hint);
            stream.row_indices.first().map(prefetch_hint);
            stream.column_starts.first().map(prefetch_hint);
            stream.sequence_starts.first().map(prefetch_hint);
        }
    }
}

impl<T: Element> Minibatch<T> {
    /// An empty minibatch for the given inputs (configuration order). The first input with
    /// `defines_mb_size` set, if any, is the one [`Minibatch::samples`] counts.
    pub fn new(inputs: &[InputConfig]) -> Self {
        Minibatch {
            streams: inputs.iter().map(StreamData::new).collect(),
            sequences: Vec::new(),
            sweep_end: false,
            epoch_end: false,
            position: 0,
            defines_mb_size: inputs.iter().position(|i| i.defines_mb_size),
        }
    }

    /// Empties the minibatch (no sequences, flags false, `position` 0), keeping the
    /// capacity of every buffer.
    pub fn clear(&mut self) {
        for s in &mut self.streams {
            s.clear();
        }
        self.sequences.clear();
        self.sweep_end = false;
        self.epoch_end = false;
        self.position = 0;
    }

    /// Number of sequences.
    pub fn len(&self) -> usize {
        self.sequences.len()
    }

    /// Whether the minibatch holds no sequence.
    pub fn is_empty(&self) -> bool {
        self.sequences.is_empty()
    }

    /// The input that defines the minibatch size (`definesMBSize`), if one does.
    pub fn defines_mb_size(&self) -> Option<usize> {
        self.defines_mb_size
    }

    /// Bytes its buffers hold on the heap (their capacity): what a queued minibatch costs.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let streams: usize = self
            .streams
            .iter()
            .map(|s| {
                s.values.capacity() * size_of::<T>()
                    + (s.row_indices.capacity() + s.column_starts.capacity()) * size_of::<u32>()
                    + s.sequence_starts.capacity() * size_of::<usize>()
            })
            .sum();
        streams + self.sequences.capacity() * size_of::<MinibatchSequence>()
    }

    /// The minibatch's size in samples as SPEC §3 counts it: the sample count of the
    /// `definesMBSize` input when there is one, else the largest sample count of any input
    /// (0 for an empty minibatch).
    pub fn samples(&self) -> usize {
        match self.defines_mb_size.and_then(|i| self.streams.get(i)) {
            Some(s) => s.samples,
            None => self.streams.iter().map(|s| s.samples).max().unwrap_or(0),
        }
    }

    /// Appends complete sequence `seq` of `from` (every input) as the minibatch's next
    /// sequence, copying each input's slice of `from` in bulk.
    ///
    /// `from` must have the minibatch's inputs (same count, formats and dims). On error the
    /// minibatch is unchanged.
    pub fn push_sequence(
        &mut self,
        from: &ParsedSequences<T>,
        seq: usize,
    ) -> Result<(), PackError> {
        self.push_sequence_limited(from, seq, MAX_SPARSE_VALUES)
    }

    /// Appends several sequences, as [`Minibatch::push_sequence`] on each in order would,
    /// in passes over all of them (find every sequence's data, check it, then copy input by
    /// input), so that the memory reads of different sequences overlap instead of waiting
    /// on each other: sequences drawn at random from large parsed chunks are mostly cache
    /// misses. On an error, the minibatch holds some of the sequences before the failing
    /// one and should be dropped.
    pub fn push_sequences(
        &mut self,
        items: &[(&ParsedSequences<T>, usize)],
    ) -> Result<(), PackError> {
        self.push_sequences_limited(items, MAX_SPARSE_VALUES)
    }

    /// [`Minibatch::push_sequences`] of sequences whose parts may have a
    /// [`SequenceLookup`]: a sequence of such a part is found from its row, one or two
    /// lines, instead of its key's and each input's offsets' lines.
    pub(crate) fn push_looked_up(&mut self, items: &[PackItem<'_, T>]) -> Result<(), PackError> {
        self.push_items_limited(items, MAX_SPARSE_VALUES)
    }

    fn push_sequences_limited(
        &mut self,
        items: &[(&ParsedSequences<T>, usize)],
        max_sparse_values: usize,
    ) -> Result<(), PackError> {
        let items: Vec<PackItem<'_, T>> =
            items.iter().map(|&(from, seq)| (from, None, seq)).collect();
        self.push_items_limited(&items, max_sparse_values)
    }

    fn push_items_limited(
        &mut self,
        items: &[PackItem<'_, T>],
        max_sparse_values: usize,
    ) -> Result<(), PackError> {
        let inputs = self.streams.len();
        // Pass 1: where each sequence's samples and values are, per input, in two steps (the
        // samples of all, then their values), so that the cache misses of each step are
        // independent and overlap rather than wait one after the other. The first step
        // prefetches what either reads first of the sequence `AHEAD` places on, and once it
        // has a sequence's samples where their values start, for the second.
        let mut spans = Vec::with_capacity(items.len() * inputs);
        for &item in &items[prefetched_first(items.len(), AHEAD)] {
            prefetch_item_start(item);
        }
        for (k, &(from, lookup, seq)) in items.iter().enumerate() {
            if let Some(ahead) = prefetched_at(k, items.len(), AHEAD) {
                prefetch_item_start(items[ahead]);
            }
            if seq >= from.sequences.len() {
                return Err(PackError::NoSuchSequence {
                    seq,
                    sequences: from.sequences.len(),
                });
            }
            if from.columns.len() != inputs {
                return Err(PackError::InputCount {
                    expected: inputs,
                    found: from.columns.len(),
                });
            }
            let lookup = usable_lookup(from, lookup);
            for (input, (stream, col)) in self.streams.iter().zip(&from.columns).enumerate() {
                stream.check_shape(input, col)?;
                if let Some(values) = lookup.and_then(|l| l.values(seq, input)) {
                    spans.push(Span {
                        samples: seq..seq + 1,
                        values,
                        looked_up: true,
                    });
                    continue;
                }
                let samples = samples_of(input, col, seq)?;
                if !col.single_samples {
                    prefetch_sample_offset(col, samples.start);
                }
                spans.push(Span {
                    samples,
                    values: 0..0,
                    looked_up: false,
                });
            }
        }
        for (k, &(from, _, _)) in items.iter().enumerate() {
            for (input, col) in from.columns.iter().enumerate() {
                let span = &mut spans[k * inputs + input];
                if !span.looked_up {
                    span.values = values_of(input, col, &span.samples)?;
                }
            }
        }
        // Pass 2: sparse offsets in order, and the stored values within bounds, counted as
        // push_sequence counts them (the running total at each sequence).
        for (input, stream) in self.streams.iter().enumerate() {
            if stream.format != StorageFormat::Sparse {
                continue;
            }
            let mut total = stream.values.len() as u64;
            for (k, &(from, _, _)) in items.iter().enumerate() {
                let span = &spans[k * inputs + input];
                stream.check_sparse(input, &from.columns[input], span, total, max_sparse_values)?;
                total += span.values.len() as u64;
            }
        }
        // Pass 3: copy, input by input, into room made for all the sequences at once: a
        // minibatch fresh from the pool would otherwise grow its buffers by doubling, each
        // step a copy and pages touched anew. Each copy first prefetches the span
        // `COPY_AHEAD` places on (up to TOUCHED_LINES lines of its values and row indices;
        // the hardware prefetcher follows longer spans), so that the copies do not wait on
        // the misses: prefetching every span before the first copy instead left most of
        // them still in flight, or evicted, when their copies came.
        for (input, stream) in self.streams.iter_mut().enumerate() {
            stream.reserve_spans(items.len(), spans.iter().skip(input).step_by(inputs));
            let touch =
                |k: usize| touch_span(&items[k].0.columns[input], &spans[k * inputs + input]);
            prefetched_first(items.len(), COPY_AHEAD).for_each(touch);
            for (k, &(from, _, _)) in items.iter().enumerate() {
                if let Some(ahead) = prefetched_at(k, items.len(), COPY_AHEAD) {
                    touch(ahead);
                }
                stream.append_span(&from.columns[input], &spans[k * inputs + input]);
            }
        }
        self.sequences
            .extend(items.iter().map(|&(from, lookup, seq)| {
                MinibatchSequence {
                    key: usable_lookup(from, lookup)
                        .and_then(|l| l.key(seq))
                        .unwrap_or_else(|| from.sequences[seq].key),
                }
            }));
        Ok(())
    }

    /// [`Minibatch::push_sequence`] with a lower bound on sparse stored values (for tests).
    fn push_sequence_limited(
        &mut self,
        from: &ParsedSequences<T>,
        seq: usize,
        max_sparse_values: usize,
    ) -> Result<(), PackError> {
        let Some(info) = from.sequences.get(seq) else {
            return Err(PackError::NoSuchSequence {
                seq,
                sequences: from.sequences.len(),
            });
        };
        if from.columns.len() != self.streams.len() {
            return Err(PackError::InputCount {
                expected: self.streams.len(),
                found: from.columns.len(),
            });
        }
        // Check every input before changing any, so that an error leaves nothing half done.
        for (input, (stream, col)) in self.streams.iter().zip(&from.columns).enumerate() {
            stream.check(input, col, seq, max_sparse_values)?;
        }
        for (input, (stream, col)) in self.streams.iter_mut().zip(&from.columns).enumerate() {
            stream.append(input, col, seq)?;
        }
        self.sequences.push(MinibatchSequence { key: info.key });
        Ok(())
    }

    /// Writes a padded, rectangular copy of dense input `input` into `out`, reusing its
    /// buffers. See [`Padded`] for the layout. A sparse input is an error
    /// ([`PackError::NotDense`]).
    pub fn padded(&self, input: usize, out: &mut Padded<T>) -> Result<(), PackError> {
        let stream = self.streams.get(input).ok_or(PackError::NoSuchInput {
            input,
            inputs: self.streams.len(),
        })?;
        if stream.format != StorageFormat::Dense {
            return Err(PackError::NotDense { input });
        }
        let dim = stream.dim;
        let starts = &stream.sequence_starts;
        let bad = PackError::Inconsistent {
            input,
            what: "sequence starts",
        };
        if starts.len() != self.sequences.len() + 1 {
            return Err(bad);
        }
        let mut max_len = 0;
        for w in starts.windows(2) {
            max_len = max_len.max(w[1].checked_sub(w[0]).ok_or_else(|| bad.clone())?);
        }
        let end = starts.last().copied().unwrap_or(0);
        if end.checked_mul(dim).is_none_or(|e| e > stream.values.len()) {
            return Err(bad);
        }
        let batch = self.sequences.len();
        let too_large = PackError::PaddedTooLarge {
            input,
            batch,
            max_len,
            dim,
        };
        let cells = batch
            .checked_mul(max_len)
            .ok_or_else(|| too_large.clone())?;
        let total = cells.checked_mul(dim).ok_or_else(|| too_large.clone())?;
        out.values.clear();
        out.mask.clear();
        out.values
            .try_reserve(total)
            .map_err(|_| too_large.clone())?;
        out.mask.try_reserve(cells).map_err(|_| too_large)?;
        for w in starts.windows(2) {
            let len = w[1] - w[0];
            out.values
                .extend_from_slice(&stream.values[w[0] * dim..w[1] * dim]);
            out.values
                .resize(out.values.len() + (max_len - len) * dim, T::default());
            if len > 0 {
                out.mask.push(MASK_BEGIN);
                out.mask.resize(out.mask.len() + len - 1, MASK_VALID);
            }
            out.mask.resize(out.mask.len() + (max_len - len), MASK_PAD);
        }
        out.batch = batch;
        out.max_len = max_len;
        out.dim = dim;
        Ok(())
    }
}

/// [`Padded::mask`] value of a sequence's first sample.
pub const MASK_BEGIN: u8 = 2;
/// [`Padded::mask`] value of a sample after the first.
pub const MASK_VALID: u8 = 1;
/// [`Padded::mask`] value of padding.
pub const MASK_PAD: u8 = 0;

/// A padded, rectangular copy of one dense input of a minibatch ([`Minibatch::padded`]).
///
/// Sequence-major: sequence `b` (minibatch order), time step `t` is the `dim` values at
/// `values[(b * max_len + t) * dim..][..dim]` and the mask byte `mask[b * max_len + t]`.
/// `max_len` is the longest sequence of this input; shorter sequences are padded at the end
/// with zeros. The mask says [`MASK_BEGIN`] (2) for a sequence's first sample,
/// [`MASK_VALID`] (1) for its other samples and [`MASK_PAD`] (0) for padding, as CNTK's V2
/// sequence masks do; a sequence with no samples of this input has a row of 0s.
#[derive(Clone, Debug, PartialEq)]
pub struct Padded<T> {
    /// Sequences (rows).
    pub batch: usize,
    /// Time steps per row: the longest sequence, in samples.
    pub max_len: usize,
    /// Values per sample.
    pub dim: usize,
    /// `batch x max_len x dim` values, zeros in padding.
    pub values: Vec<T>,
    /// `batch x max_len` mask bytes.
    pub mask: Vec<u8>,
}

impl<T> Padded<T> {
    /// An empty view, to be filled by [`Minibatch::padded`].
    pub fn new() -> Self {
        Padded {
            batch: 0,
            max_len: 0,
            dim: 0,
            values: Vec::new(),
            mask: Vec::new(),
        }
    }
}

impl<T> Default for Padded<T> {
    fn default() -> Self {
        Padded::new()
    }
}

/// A bounded free list of minibatches for one input configuration, shared by the packer and
/// its consumers (`Arc<MinibatchPool<T>>`).
///
/// [`MinibatchPool::take`] hands out a recycled, cleared minibatch (or a new one when none
/// is idle); [`MinibatchPool::give`] takes one back, keeping at most `capacity` idle ones and
/// dropping the rest. Recycled minibatches keep their buffers' capacity, so a warm pipeline
/// packs without allocating.
#[derive(Debug)]
pub struct MinibatchPool<T> {
    inputs: Vec<InputConfig>,
    capacity: usize,
    free: Mutex<Vec<Minibatch<T>>>,
}

impl<T: Element> MinibatchPool<T> {
    /// A pool of minibatches for `inputs`, keeping at most `capacity` idle.
    pub fn new(inputs: &[InputConfig], capacity: usize) -> Self {
        MinibatchPool {
            inputs: inputs.to_vec(),
            capacity,
            free: Mutex::new(Vec::with_capacity(capacity)),
        }
    }

    /// Most idle minibatches kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Idle minibatches held now.
    pub fn idle(&self) -> usize {
        self.lock().len()
    }

    /// An empty minibatch: a recycled one if any is idle, else a new one.
    pub fn take(&self) -> Minibatch<T> {
        let recycled = self.lock().pop();
        recycled.unwrap_or_else(|| Minibatch::new(&self.inputs))
    }

    /// Like [`MinibatchPool::take`], in a guard that gives the minibatch back when dropped.
    pub fn take_pooled(self: &Arc<Self>) -> PooledMinibatch<T> {
        PooledMinibatch {
            batch: self.take(),
            pool: Some(Arc::clone(self)),
        }
    }

    /// Takes back a minibatch for reuse: it is cleared and kept if fewer than `capacity` are
    /// idle, else dropped. A minibatch of other inputs (formats, dims, `definesMBSize`) is
    /// dropped.
    pub fn give(&self, mut batch: Minibatch<T>) {
        if !self.fits(&batch) {
            return;
        }
        batch.clear();
        let mut free = self.lock();
        if free.len() < self.capacity {
            free.push(batch);
        }
    }

    fn fits(&self, batch: &Minibatch<T>) -> bool {
        batch.streams.len() == self.inputs.len()
            && batch.defines_mb_size == self.inputs.iter().position(|i| i.defines_mb_size)
            && batch
                .streams
                .iter()
                .zip(&self.inputs)
                .all(|(s, i)| s.format == i.format && s.dim == i.dim)
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Minibatch<T>>> {
        // A panic elsewhere cannot leave the free list half changed: keep using it.
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A minibatch on loan from a [`MinibatchPool`]: dereferences to the [`Minibatch`] and gives
/// it back to the pool when dropped.
pub struct PooledMinibatch<T: Element> {
    batch: Minibatch<T>,
    /// `None` once the minibatch has been detached ([`PooledMinibatch::into_inner`]).
    pool: Option<Arc<MinibatchPool<T>>>,
}

impl<T: Element> PooledMinibatch<T> {
    /// Wraps `batch` so that it returns to `pool` when dropped.
    pub fn new(batch: Minibatch<T>, pool: Arc<MinibatchPool<T>>) -> Self {
        PooledMinibatch {
            batch,
            pool: Some(pool),
        }
    }

    /// Detaches the minibatch from its pool: it will not be given back.
    pub fn into_inner(mut self) -> Minibatch<T> {
        self.pool = None;
        mem::replace(&mut self.batch, Minibatch::placeholder())
    }
}

impl<T: Element> Deref for PooledMinibatch<T> {
    type Target = Minibatch<T>;

    fn deref(&self) -> &Minibatch<T> {
        &self.batch
    }
}

impl<T: Element> DerefMut for PooledMinibatch<T> {
    fn deref_mut(&mut self) -> &mut Minibatch<T> {
        &mut self.batch
    }
}

impl<T: Element> Drop for PooledMinibatch<T> {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.give(mem::replace(&mut self.batch, Minibatch::placeholder()));
        }
    }
}

impl<T: Element> fmt::Debug for PooledMinibatch<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledMinibatch")
            .field("batch", &self.batch)
            .field("pooled", &self.pool.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::values::ValueTier;
    use crate::parser::{Sample, SequenceInfo, StreamOptions, StreamParser};
    use proptest::prelude::*;

    /// Runs the real parser over one file's text; every sequence must be valid.
    fn parse<T: Element>(inputs: &[InputConfig], text: &str) -> ParsedSequences<T> {
        let mut p = StreamParser::<T>::new(inputs, StreamOptions::default());
        p.start_file(0);
        p.feed(text.as_bytes()).expect("not fatal");
        p.finish_file().expect("not fatal");
        assert!(p.invalid_sequences().is_empty(), "{:?}", p.diagnostics());
        p.sequences().clone()
    }

    #[test]
    fn touching_reaches_every_line_of_a_span_wherever_it_starts() {
        for step in [1, 4, 16, 64] {
            for offset in 0..step {
                for len in 0..=step * TOUCHED_LINES {
                    // Lines, counted from a line boundary `offset` elements before the span.
                    let lines: Vec<usize> = (0..len).map(|i| (offset + i) / step).collect();
                    let span: Vec<usize> = (0..len).collect();
                    let mut reached = Vec::new();
                    each_touched(&span, step, |&i| reached.push((offset + i) / step));
                    reached.dedup();
                    let mut want = lines.clone();
                    want.dedup();
                    assert_eq!(reached, want, "step {step}, offset {offset}, len {len}");
                }
            }
        }
        // Past the lines touched, only the first ones are read.
        let mut count = 0;
        each_touched(&[0u8; 1000], 4, |_| count += 1);
        assert_eq!(count, TOUCHED_LINES);
    }

    #[test]
    fn a_pass_prefetches_each_item_once_before_its_read_and_at_most_ahead_of_it() {
        for ahead in [0, 1, AHEAD, COPY_AHEAD] {
            for len in 0..3 * AHEAD {
                // The step before which each item is prefetched (0 for those before the first).
                let mut prefetched_before = vec![None; len];
                let mut prefetch = |item: usize, step: usize| {
                    assert_eq!(prefetched_before[item], None, "item {item} twice");
                    prefetched_before[item] = Some(step);
                };
                for item in prefetched_first(len, ahead) {
                    prefetch(item, 0);
                }
                for k in 0..len {
                    if let Some(item) = prefetched_at(k, len, ahead) {
                        prefetch(item, k);
                    }
                }
                for (item, step) in prefetched_before.into_iter().enumerate() {
                    let step = step.unwrap_or_else(|| panic!("item {item} of {len} never"));
                    assert!(
                        step <= item && item - step <= ahead,
                        "item {item} at step {step}"
                    );
                }
            }
        }
    }

    /// What a stream must hold, built sample by sample and value by value.
    #[derive(Debug, PartialEq)]
    struct RefStream<T> {
        samples: usize,
        values: Vec<T>,
        row_indices: Vec<u32>,
        column_starts: Vec<u32>,
        sequence_starts: Vec<usize>,
    }

    /// The naive reference packer: keys and streams of `order` packed from `from`.
    fn reference<T: Element>(
        from: &ParsedSequences<T>,
        order: &[usize],
    ) -> (Vec<u64>, Vec<RefStream<T>>) {
        let keys = order.iter().map(|&s| from.sequences[s].key).collect();
        let mut streams = Vec::new();
        for (input, col) in from.columns.iter().enumerate() {
            let mut r = RefStream {
                samples: 0,
                values: Vec::new(),
                row_indices: Vec::new(),
                column_starts: Vec::new(),
                sequence_starts: vec![0],
            };
            if col.format == StorageFormat::Sparse {
                r.column_starts.push(0);
            }
            for &seq in order {
                for sample in from.samples(seq, input) {
                    match sample {
                        Sample::Dense(values) => {
                            assert_eq!(values.len(), col.dim);
                            for v in values {
                                r.values.push(v);
                            }
                        }
                        Sample::Sparse { indices, values } => {
                            for (i, v) in indices.iter().zip(values.iter()) {
                                r.row_indices.push(i);
                                r.values.push(v);
                            }
                            r.column_starts.push(r.values.len() as u32);
                        }
                    }
                    r.samples += 1;
                }
                r.sequence_starts.push(r.samples);
            }
            streams.push(r);
        }
        (keys, streams)
    }

    fn snapshot<T: Element>(s: &StreamData<T>) -> RefStream<T> {
        RefStream {
            samples: s.samples,
            values: s.values.clone(),
            row_indices: s.row_indices.clone(),
            column_starts: s.column_starts.clone(),
            sequence_starts: s.sequence_starts.clone(),
        }
    }

    fn pack<T: Element>(mb: &mut Minibatch<T>, from: &ParsedSequences<T>, order: &[usize]) {
        for &seq in order {
            mb.push_sequence(from, seq).expect("packs");
        }
    }

    fn assert_matches_reference<T: Element>(
        mb: &Minibatch<T>,
        from: &ParsedSequences<T>,
        order: &[usize],
    ) {
        let (keys, streams) = reference(from, order);
        let got: Vec<u64> = mb.sequences.iter().map(|s| s.key).collect();
        assert_eq!(got, keys);
        assert_eq!(mb.streams.len(), streams.len());
        for (input, (s, r)) in mb.streams.iter().zip(&streams).enumerate() {
            assert_eq!(s.format, from.columns[input].format);
            assert_eq!(s.dim, from.columns[input].dim);
            assert_eq!(&snapshot(s), r, "input {input}");
        }
    }

    /// The naive padded view of dense input `input`.
    fn reference_padded<T: Element>(
        from: &ParsedSequences<T>,
        order: &[usize],
        input: usize,
    ) -> Padded<T> {
        let dim = from.columns[input].dim;
        let max_len = order
            .iter()
            .map(|&s| from.sample_count(s, input))
            .max()
            .unwrap_or(0);
        let mut out = Padded::new();
        out.batch = order.len();
        out.max_len = max_len;
        out.dim = dim;
        for &seq in order {
            let samples: Vec<Sample<'_, T>> = from.samples(seq, input).collect();
            for t in 0..max_len {
                match samples.get(t) {
                    Some(Sample::Dense(values)) => {
                        out.values.extend(values.iter());
                        out.mask.push(if t == 0 { 2 } else { 1 });
                    }
                    Some(Sample::Sparse { .. }) => unreachable!("dense input"),
                    None => {
                        out.values.extend(std::iter::repeat_n(T::default(), dim));
                        out.mask.push(0);
                    }
                }
            }
        }
        out
    }

    fn mixed_inputs() -> Vec<InputConfig> {
        vec![
            InputConfig::dense("a", 3),
            InputConfig::sparse("b", 10),
            InputConfig::dense("c", 1),
        ]
    }

    /// Dense `a` and sparse `b` on every line, label `c` once per sequence; lengths 3, 1, 4, 1.
    const MIXED: &str = "\
0 |a 1 2 3 |b 1:1 4:0.5 |c 7
0 |a 4 5 6 |b
0 |a 7 8 9 |b 9:2 9:3
5 |a -1 -2 -3 |b 0:1 |c 1
9 |a 0.5 0.25 0.125 |b 3:3
9 |a 1 1 1 |b 2:2 |c 2
9 |a 2 2 2 |b
9 |a 3 3 3 |b 5:5 6:6 7:7
12 |b 8:8 |a 6 6 6 |c 3
";

    #[test]
    fn packs_shuffled_sequences_of_mixed_inputs() {
        let inputs = mixed_inputs();
        let parsed = parse::<f32>(&inputs, MIXED);
        assert_eq!(parsed.len(), 4);
        let order = [2, 0, 3, 1];
        let mut mb = Minibatch::new(&inputs);
        pack(&mut mb, &parsed, &order);
        assert_matches_reference(&mb, &parsed, &order);

        // The same, written out by hand.
        let keys: Vec<u64> = mb.sequences.iter().map(|s| s.key).collect();
        assert_eq!(keys, [9, 0, 12, 5]);
        assert_eq!(mb.len(), 4);
        let a = &mb.streams[0];
        assert_eq!(a.samples, 9);
        assert_eq!(a.sequence_starts, [0, 4, 7, 8, 9]);
        assert_eq!(&a.values[..6], [0.5, 0.25, 0.125, 1.0, 1.0, 1.0]);
        assert_eq!(&a.values[24..], [-1.0, -2.0, -3.0]);
        assert!(a.row_indices.is_empty() && a.column_starts.is_empty());
        let b = &mb.streams[1];
        assert_eq!(b.samples, 9);
        assert_eq!(
            b.values,
            [3.0, 2.0, 5.0, 6.0, 7.0, 1.0, 0.5, 2.0, 3.0, 8.0, 1.0]
        );
        assert_eq!(b.row_indices, [3, 2, 5, 6, 7, 1, 4, 9, 9, 8, 0]);
        assert_eq!(b.column_starts, [0, 1, 2, 2, 5, 7, 7, 9, 10, 11]);
        assert_eq!(b.sequence_starts, [0, 4, 7, 8, 9]);
        let c = &mb.streams[2];
        assert_eq!(c.values, [2.0, 7.0, 3.0, 1.0]);
        assert_eq!(c.sequence_starts, [0, 1, 2, 3, 4]);
        assert_eq!(mb.samples(), 9);
        assert_eq!(mb.defines_mb_size(), None);
    }

    /// Lines of one sample of each input (no ids: a sequence a line), in each way a column
    /// stores them: `w`'s indices widened past two-byte steps, `o` one entry a sample, `b`
    /// byte values, `f` values of full width, `d` dense. Every part has a sample of more
    /// than one entry or none, so that it stores its offsets and gets a lookup.
    const ONE_SAMPLE_EACH: [&str; 4] = [
        "|w 1:1 99999:1 |o 3:1 |b 1:2 5:3 |f 1:0.5 |d 1 2\n\
         |w 7:1 |o 0:1 |b |f 2:1 3:-1 |d 3 4\n\
         |w |o 9:1 |b 9:255 |f |d 5 6\n",
        // The same tiers, narrower: two-byte steps, ones, one entry each.
        "|w 1:1 9:1 |o 3:1 |b 1:1 |f 1:1 |d 0 0\n\
         |w 7:1 |o 4:1 |b 2:1 |f 2:1 |d 1 1\n",
        // One sequence.
        "|w 5:1 6:1 |o 5:1 |b 5:7 |f 5:2.5 |d 9 9\n",
        // Lines of empty samples.
        "|w |o |b |f |d 0 1\n|w |o |b |f |d 1 0\n",
    ];

    #[test]
    fn sequences_found_by_their_lookup_pack_as_found_by_their_offsets() {
        let inputs = vec![
            InputConfig::sparse("w", 100_000),
            InputConfig::sparse("o", 10),
            InputConfig::sparse("b", 10),
            InputConfig::sparse("f", 10),
            InputConfig::dense("d", 2),
        ];
        let parts: Vec<ParsedSequences<f32>> =
            ONE_SAMPLE_EACH.iter().map(|t| parse(&inputs, t)).collect();
        assert!(parts[0].columns[0].indices.is_widened());
        assert!(parts[1].columns[1].single_entries);
        let lookups: Vec<SequenceLookup> = parts
            .iter()
            .map(|p| SequenceLookup::build(p).expect("one sample of each input"))
            .collect();
        // Every sequence of every part, shuffled, some twice, in one minibatch.
        let picks = [
            (1, 1),
            (0, 2),
            (3, 0),
            (0, 0),
            (2, 0),
            (1, 0),
            (0, 2),
            (3, 1),
            (0, 1),
        ];
        let items: Vec<PackItem<'_, f32>> = picks
            .iter()
            .map(|&(part, seq)| (&parts[part], Some(&lookups[part]), seq))
            .collect();
        let mut looked_up = Minibatch::new(&inputs);
        looked_up.push_looked_up(&items).unwrap();
        let mut one_by_one = Minibatch::new(&inputs);
        for &(part, seq) in &picks {
            one_by_one.push_sequence(&parts[part], seq).unwrap();
        }
        assert_eq!(looked_up, one_by_one);
        // Each part's own sequences against the naive reference, too.
        for (part, lookup) in parts.iter().zip(&lookups) {
            let order: Vec<usize> = (0..part.len()).rev().collect();
            let items: Vec<PackItem<'_, f32>> =
                order.iter().map(|&seq| (part, Some(lookup), seq)).collect();
            let mut mb = Minibatch::new(&inputs);
            mb.push_looked_up(&items).unwrap();
            assert_matches_reference(&mb, part, &order);
        }
    }

    #[test]
    fn a_lookup_of_another_length_is_not_read() {
        let inputs = mixed_inputs();
        let ours = parse::<f32>(&inputs, BYTE_VALUED);
        let other = parse::<f32>(&inputs, "1 |a 1 1 1 |b 2:1 3:1 |c 4\n");
        let theirs = SequenceLookup::build(&other).unwrap();
        let mut mb = Minibatch::new(&inputs);
        mb.push_looked_up(&[(&ours, Some(&theirs), 0)]).unwrap();
        assert_matches_reference(&mb, &ours, &[0]);
    }

    #[test]
    fn packs_f64_and_repeated_sequences() {
        let inputs = mixed_inputs();
        let parsed = parse::<f64>(&inputs, MIXED);
        let order = [3, 3, 1, 0, 2, 0];
        let mut mb = Minibatch::new(&inputs);
        pack(&mut mb, &parsed, &order);
        assert_matches_reference(&mb, &parsed, &order);
    }

    #[test]
    fn defines_mb_size_input_counts_the_samples() {
        let mut inputs = mixed_inputs();
        inputs[2] = inputs[2].clone().defining_mb_size();
        let parsed = parse::<f32>(&inputs, MIXED);
        let mut mb = Minibatch::new(&inputs);
        assert_eq!(mb.defines_mb_size(), Some(2));
        assert_eq!(mb.samples(), 0);
        pack(&mut mb, &parsed, &[2, 0]);
        assert_eq!(mb.samples(), 2, "one label per sequence");
        assert_eq!(mb.streams[0].samples, 7);

        // Without definesMBSize the largest input counts, whichever it is.
        let mut mb = Minibatch::new(&mixed_inputs());
        pack(&mut mb, &parsed, &[2, 0]);
        assert_eq!(mb.samples(), 7);
    }

    #[test]
    fn clear_keeps_capacity_and_resets_everything() {
        let inputs = mixed_inputs();
        let parsed = parse::<f32>(&inputs, MIXED);
        let mut mb = Minibatch::new(&inputs);
        pack(&mut mb, &parsed, &[0, 1, 2, 3]);
        mb.sweep_end = true;
        mb.position = 42;
        let caps: Vec<usize> = mb.streams.iter().map(|s| s.values.capacity()).collect();
        mb.clear();
        assert_eq!(mb, Minibatch::new(&inputs));
        let after: Vec<usize> = mb.streams.iter().map(|s| s.values.capacity()).collect();
        assert_eq!(after, caps);
        pack(&mut mb, &parsed, &[1, 3]);
        assert_matches_reference(&mb, &parsed, &[1, 3]);
    }

    /// Parsed sequences built by hand: the parser never yields an input without samples, nor
    /// a dense input of dim 0, but the packer must take them.
    /// Sequences: key 10 (x: 2 samples, y: 1, z: 0), key 11 (x: 0, y: 2), key 12 (x: 1, y: 0).
    fn hand_built() -> (Vec<InputConfig>, ParsedSequences<f32>) {
        let inputs = vec![
            InputConfig::dense("x", 2),
            InputConfig::sparse("y", 4),
            InputConfig::dense("z", 0),
        ];
        let mut p = ParsedSequences::new(&inputs);
        let info = |key| SequenceInfo {
            key,
            line: 1,
            counted_lines: 1,
        };
        let sparse_sample = |p: &mut ParsedSequences<f32>, entries: &[(u32, f32)]| {
            let y = &mut p.columns[1];
            let start = y.entry_count();
            let mut after = 0;
            for &(i, v) in entries {
                y.push_entry(i, after, start, crate::parser::values::EntryValue::of(v));
                after = i;
            }
            y.end_sparse_sample(start);
        };
        // `x` is built by hand at full width.
        p.columns[0].value_tier = ValueTier::Stored;
        p.columns[0].values.extend([1.0, 2.0, 3.0, 4.0]);
        sparse_sample(&mut p, &[(1, 5.0)]);
        p.commit_sequence(info(10));
        sparse_sample(&mut p, &[]);
        sparse_sample(&mut p, &[(0, 1.0), (3, 2.0)]);
        p.commit_sequence(info(11));
        p.columns[0].values.extend([5.0, 6.0]);
        p.commit_sequence(info(12));
        (inputs, p)
    }

    /// One-hot `b`: its values and sample offsets are left implicit by the parser.
    const ONE_HOT: &str = "\
3 |a 1 1 1 |b 2:1 |c 4
3 |a 2 2 2 |b 7:1
8 |a 0 0 0 |b 0:1 |c 5
";

    /// Sparse values that are all bytes, some of them not one.
    const BYTE_VALUED: &str = "\
4 |a 1 1 1 |b 2:1 3:0 |c 4
4 |a 2 2 2 |b 7:255
6 |a 0 0 0 |b 0:2 |c 5
";

    #[test]
    fn implicit_and_stored_columns_pack_into_one_minibatch() {
        let inputs = mixed_inputs();
        let one_hot = parse::<f32>(&inputs, ONE_HOT);
        assert_eq!(one_hot.columns[1].value_tier, ValueTier::Ones);
        let bytes = parse::<f32>(&inputs, BYTE_VALUED);
        assert_eq!(bytes.columns[1].value_tier, ValueTier::Bytes);
        let mixed = parse::<f32>(&inputs, MIXED);
        assert_eq!(mixed.columns[1].value_tier, ValueTier::Stored);
        assert!(mixed.columns[1].values().as_stored().is_some());
        // All sources as one, and the same sequences in that numbering.
        let sources = [&one_hot, &bytes, &mixed];
        let mut combined = one_hot.clone();
        combined.append(&bytes).unwrap();
        combined.append(&mixed).unwrap();
        // Each sequence several times over, so that the passes' prefetches run ahead of
        // their reads and past the end.
        let once = [
            (&one_hot, 0),
            (&mixed, 2),
            (&bytes, 1),
            (&one_hot, 1),
            (&mixed, 0),
            (&bytes, 0),
            (&mixed, 1),
            (&one_hot, 0),
        ];
        let items: Vec<_> = once.iter().cycle().take(4 * once.len()).copied().collect();
        assert!(items.len() > AHEAD + 1 && items.len() > COPY_AHEAD + 1);
        let order: Vec<usize> = items
            .iter()
            .map(|&(from, seq)| {
                let k = sources.iter().position(|&s| std::ptr::eq(s, from)).unwrap();
                sources[..k].iter().map(|s| s.len()).sum::<usize>() + seq
            })
            .collect();
        let mut batched = Minibatch::new(&inputs);
        batched.push_sequences(&items).unwrap();
        assert_matches_reference(&batched, &combined, &order);
        // The buffers of a fresh minibatch were sized once for all the sequences, not grown
        // sequence by sequence.
        for stream in &batched.streams {
            let sizes = [
                (stream.values.capacity(), stream.values.len()),
                (stream.row_indices.capacity(), stream.row_indices.len()),
                (stream.column_starts.capacity(), stream.column_starts.len()),
                (
                    stream.sequence_starts.capacity(),
                    stream.sequence_starts.len(),
                ),
            ];
            for (capacity, len) in sizes {
                assert_eq!(capacity, len, "{:?}", stream.format);
            }
        }
        let mut one_by_one = Minibatch::new(&inputs);
        for &(from, seq) in &items {
            one_by_one.push_sequence(from, seq).unwrap();
        }
        assert_eq!(one_by_one, batched);
    }

    #[test]
    fn zero_sample_sequences_and_dim_zero() {
        let (inputs, parsed) = hand_built();
        assert_eq!(parsed.sample_count(1, 0), 0);
        assert_eq!(parsed.sample_count(2, 1), 0);
        let order = [1, 0, 2, 1];
        let mut mb = Minibatch::new(&inputs);
        pack(&mut mb, &parsed, &order);
        assert_matches_reference(&mb, &parsed, &order);
        assert_eq!(mb.streams[0].sequence_starts, [0, 0, 2, 3, 3]);
        assert_eq!(mb.streams[1].sequence_starts, [0, 2, 3, 3, 5]);
        assert_eq!(mb.streams[1].column_starts, [0, 0, 2, 3, 3, 5]);
        assert_eq!(mb.streams[2].sequence_starts, [0, 0, 0, 0, 0]);
        assert_eq!(mb.samples(), 5);

        let mut out = Padded::new();
        mb.padded(0, &mut out).unwrap();
        assert_eq!((out.batch, out.max_len, out.dim), (4, 2, 2));
        #[rustfmt::skip]
        assert_eq!(out.values, [
            0.0, 0.0, 0.0, 0.0, // key 11: no samples
            1.0, 2.0, 3.0, 4.0, // key 10
            5.0, 6.0, 0.0, 0.0, // key 12
            0.0, 0.0, 0.0, 0.0, // key 11
        ]);
        assert_eq!(out.mask, [0, 0, 2, 1, 2, 0, 0, 0]);
        assert_eq!(out, reference_padded(&parsed, &order, 0));

        mb.padded(2, &mut out).unwrap();
        assert_eq!((out.batch, out.max_len, out.dim), (4, 0, 0));
        assert!(out.values.is_empty() && out.mask.is_empty());
    }

    #[test]
    fn padded_view_of_parsed_data() {
        let inputs = mixed_inputs();
        let parsed = parse::<f32>(&inputs, MIXED);
        let order = [1, 2, 0];
        let mut mb = Minibatch::new(&inputs);
        pack(&mut mb, &parsed, &order);
        let mut out = Padded::new();
        mb.padded(0, &mut out).unwrap();
        assert_eq!((out.batch, out.max_len, out.dim), (3, 4, 3));
        assert_eq!(out.mask, [2, 0, 0, 0, 2, 1, 1, 1, 2, 1, 1, 0]);
        // Sequence 0 (key 5), time 0, then padding; sequence 2 (key 0), time 2, then padding.
        assert_eq!(&out.values[..6], [-1.0, -2.0, -3.0, 0.0, 0.0, 0.0]);
        assert_eq!(
            &out.values[(2 * 4 + 2) * 3..],
            [7.0, 8.0, 9.0, 0.0, 0.0, 0.0]
        );
        assert_eq!(out, reference_padded(&parsed, &order, 0));

        // The buffers are reused: a smaller view keeps the allocation.
        let ptr = out.values.as_ptr();
        mb.padded(2, &mut out).unwrap();
        assert_eq!((out.batch, out.max_len, out.dim), (3, 1, 1));
        assert_eq!(out.values, [1.0, 2.0, 7.0]);
        assert_eq!(out.mask, [2, 2, 2]);
        assert_eq!(out.values.as_ptr(), ptr);

        let err = mb.padded(1, &mut out).unwrap_err();
        assert_eq!(err, PackError::NotDense { input: 1 });
        assert!(err
            .to_string()
            .contains("the padded view is for dense inputs"));
        assert_eq!(
            mb.padded(3, &mut out).unwrap_err(),
            PackError::NoSuchInput {
                input: 3,
                inputs: 3
            }
        );
    }

    #[test]
    fn empty_minibatches() {
        let inputs = mixed_inputs();
        let mb = Minibatch::<f32>::new(&inputs);
        assert!(mb.is_empty());
        assert_eq!(mb.samples(), 0);
        let mut out = Padded::new();
        out.values.push(9.0);
        out.mask.push(9);
        mb.padded(0, &mut out).unwrap();
        assert_eq!((out.batch, out.max_len, out.dim), (0, 0, 3));
        assert!(out.values.is_empty() && out.mask.is_empty());

        let none = Minibatch::<f32>::new(&[]);
        assert_eq!(none.samples(), 0);
        assert_eq!(none.defines_mb_size(), None);
        let mut none = none;
        let nothing = ParsedSequences::<f32>::new(&[]);
        assert_eq!(
            none.push_sequence(&nothing, 0),
            Err(PackError::NoSuchSequence {
                seq: 0,
                sequences: 0
            })
        );
    }

    #[test]
    fn mismatched_inputs_are_errors() {
        let inputs = mixed_inputs();
        let parsed = parse::<f32>(&inputs, MIXED);

        let mut fewer = Minibatch::<f32>::new(&inputs[..2]);
        let err = fewer.push_sequence(&parsed, 0).unwrap_err();
        assert_eq!(
            err,
            PackError::InputCount {
                expected: 2,
                found: 3
            }
        );
        assert!(err.to_string().contains("has 2 inputs"));

        let mut other = inputs.clone();
        other[1] = InputConfig::dense("b", 10);
        let mut mb = Minibatch::<f32>::new(&other);
        let err = mb.push_sequence(&parsed, 0).unwrap_err();
        assert_eq!(
            err,
            PackError::InputMismatch {
                input: 1,
                expected: (StorageFormat::Dense, 10),
                found: (StorageFormat::Sparse, 10)
            }
        );
        assert!(err
            .to_string()
            .contains("dense with dim 10 in the minibatch"));
        assert!(
            mb.is_empty() && mb.streams[0].values.is_empty(),
            "nothing half done"
        );

        let mut other = inputs.clone();
        other[2] = InputConfig::dense("c", 2);
        let mut mb = Minibatch::<f32>::new(&other);
        assert!(matches!(
            mb.push_sequence(&parsed, 1),
            Err(PackError::InputMismatch { input: 2, .. })
        ));
        assert_eq!(mb, Minibatch::new(&other));
    }

    #[test]
    fn bad_sequence_indices_and_offsets_are_errors() {
        let inputs = mixed_inputs();
        let parsed = parse::<f32>(&inputs, MIXED);
        let mut mb = Minibatch::<f32>::new(&inputs);
        mb.push_sequence(&parsed, 1).unwrap();
        let before = mb.clone();
        for seq in [4, usize::MAX] {
            let err = mb.push_sequence(&parsed, seq).unwrap_err();
            assert_eq!(err, PackError::NoSuchSequence { seq, sequences: 4 });
            assert!(err.to_string().contains("hold 4 complete sequences"));
        }

        // Offsets past the buffers, or decreasing.
        let mut broken = parsed.clone();
        broken.columns[0].sequence_offsets[2] = 1000;
        assert_eq!(
            mb.push_sequence(&broken, 1),
            Err(PackError::Inconsistent {
                input: 0,
                what: "sequence offsets"
            })
        );
        let mut broken = parsed.clone();
        broken.columns[1].sample_offsets[2] = 0;
        let err = mb.push_sequence(&broken, 0).unwrap_err();
        assert_eq!(
            err,
            PackError::Inconsistent {
                input: 1,
                what: "sample offsets"
            }
        );
        assert!(err.to_string().contains("out of range or decreasing"));
        let mut broken = parsed.clone();
        let held = broken.columns[1].indices.len();
        broken.columns[1].indices.truncate(held - 1);
        assert!(matches!(
            mb.push_sequence(&broken, 3),
            Err(PackError::Inconsistent { input: 1, .. })
        ));
        // `c` has one sample per sequence: its sequence offsets are implicit.
        let mut broken = parsed.clone();
        assert!(broken.columns[2].single_samples);
        broken.columns[2].truncate_values(2);
        assert!(matches!(
            mb.push_sequence(&broken, 2),
            Err(PackError::Inconsistent { input: 2, .. })
        ));
        // Byte-valued sparse values, fewer than the indices (one-hot and not).
        for text in [
            BYTE_VALUED,
            "1 |a 1 1 1 |b 2:0 |c 1\n2 |a 2 2 2 |b 3:7 |c 2\n",
        ] {
            let mut broken = parse::<f32>(&inputs, text);
            assert_eq!(broken.columns[1].value_tier, ValueTier::Bytes);
            let last = broken.len() - 1;
            broken.columns[1].byte_values.pop();
            assert!(matches!(
                mb.push_sequence(&broken, last),
                Err(PackError::Inconsistent { input: 1, .. })
            ));
            assert!(matches!(
                mb.push_sequences(&[(&broken, last)]),
                Err(PackError::Inconsistent { input: 1, .. })
            ));
        }
        assert_eq!(mb, before, "errors change nothing");

        // A padded view of a minibatch whose layout was broken by hand.
        let mut out = Padded::new();
        let mut broken = mb.clone();
        broken.streams[0].sequence_starts[1] = 99;
        assert!(matches!(
            broken.padded(0, &mut out),
            Err(PackError::Inconsistent { input: 0, .. })
        ));
        let mut broken = mb.clone();
        broken.sequences.push(MinibatchSequence { key: 1 });
        assert!(broken.padded(0, &mut out).is_err());
    }

    #[test]
    fn sparse_value_limit_is_an_error_not_a_truncation() {
        let inputs = mixed_inputs();
        let parsed = parse::<f32>(&inputs, MIXED);
        // Sequence 2 (key 9) stores 5 sparse values, sequence 0 (key 0) 4, sequence 3 one.
        let mut mb = Minibatch::<f32>::new(&inputs);
        mb.push_sequence_limited(&parsed, 2, 5).unwrap();
        let before = mb.clone();
        let err = mb.push_sequence_limited(&parsed, 0, 8).unwrap_err();
        assert_eq!(
            err,
            PackError::TooManySparseValues {
                input: 1,
                values: 9
            }
        );
        assert!(err.to_string().contains("ask for smaller minibatches"));
        assert_eq!(mb, before);
        mb.push_sequence_limited(&parsed, 0, 9).unwrap();
        mb.push_sequence_limited(&parsed, 3, 10).unwrap();
        assert_matches_reference(&mb, &parsed, &[2, 0, 3]);
        // All at once: the same limit, counted at the same sequence.
        let mut at_once = Minibatch::<f32>::new(&inputs);
        let items = [(&parsed, 2), (&parsed, 0), (&parsed, 3)];
        assert_eq!(
            at_once.push_sequences_limited(&items, 9),
            Err(PackError::TooManySparseValues {
                input: 1,
                values: 10
            })
        );
        let mut at_once = Minibatch::<f32>::new(&inputs);
        at_once.push_sequences_limited(&items, 10).unwrap();
        assert_eq!(at_once, mb);
        assert_eq!(MAX_SPARSE_VALUES as u64, u64::from(u32::MAX));
    }

    #[test]
    fn padded_too_large_is_an_error() {
        // A dense input of dim 0 needs no values, so huge sample counts cost no memory.
        let inputs = vec![InputConfig::dense("w", 0)];
        let mut mb = Minibatch::<f32>::new(&inputs);
        mb.sequences.push(MinibatchSequence { key: 0 });
        mb.streams[0].sequence_starts.push(usize::MAX);
        mb.streams[0].samples = usize::MAX;
        let mut out = Padded::new();
        // `usize::MAX` mask bytes: the reservation fails, cleanly.
        let err = mb.padded(0, &mut out).unwrap_err();
        assert_eq!(
            err,
            PackError::PaddedTooLarge {
                input: 0,
                batch: 1,
                max_len: usize::MAX,
                dim: 0
            }
        );
        assert!(err.to_string().contains("does not fit in memory"));
        // Two sequences: `batch x max_len` overflows.
        mb.sequences.push(MinibatchSequence { key: 1 });
        mb.streams[0].sequence_starts = vec![0, 0, usize::MAX];
        assert!(matches!(
            mb.padded(0, &mut out),
            Err(PackError::PaddedTooLarge { batch: 2, .. })
        ));
        // A dense input whose starts claim more values than it holds.
        let inputs = vec![InputConfig::dense("v", usize::MAX / 2)];
        let mut mb = Minibatch::<f32>::new(&inputs);
        mb.sequences.push(MinibatchSequence { key: 0 });
        mb.streams[0].sequence_starts.push(3);
        assert!(matches!(
            mb.padded(0, &mut out),
            Err(PackError::Inconsistent { input: 0, .. })
        ));
    }

    #[test]
    fn a_recycled_minibatch_grows_by_an_eighth_of_what_it_needs() {
        let inputs = mixed_inputs();
        let parsed = parse::<f32>(&inputs, MIXED);
        let mut mb = Minibatch::new(&inputs);
        mb.push_sequences(&[(&parsed, 0)]).unwrap();
        let small = mb.streams[1].values.capacity();
        assert_eq!(small, mb.streams[1].values.len(), "a fresh buffer is exact");
        mb.clear();
        // More values than it held: room for them and an eighth, not twice the old size.
        let items: Vec<_> = (0..4).map(|seq| (&parsed, seq)).collect();
        mb.push_sequences(&items).unwrap();
        let needed = mb.streams[1].values.len();
        assert!(needed > small, "{needed} {small}");
        assert_eq!(mb.streams[1].values.capacity(), needed + needed / 8);
        assert_matches_reference(&mb, &parsed, &[0, 1, 2, 3]);
        // A slightly smaller or equal minibatch then fits as it is.
        let capacity = mb.streams[1].values.capacity();
        mb.clear();
        mb.push_sequences(&items[1..]).unwrap();
        assert_eq!(mb.streams[1].values.capacity(), capacity);
        assert_matches_reference(&mb, &parsed, &[1, 2, 3]);
    }

    #[test]
    fn pool_reuses_buffers() {
        let inputs = mixed_inputs();
        let parsed = parse::<f32>(&inputs, MIXED);
        let pool = Arc::new(MinibatchPool::<f32>::new(&inputs, 2));
        assert_eq!((pool.capacity(), pool.idle()), (2, 0));

        let mut mb = pool.take();
        pack(&mut mb, &parsed, &[0, 1, 2, 3]);
        mb.sweep_end = true;
        mb.position = 17;
        let ptr = mb.streams[1].values.as_ptr();
        let cap = mb.streams[1].values.capacity();
        pool.give(mb);
        assert_eq!(pool.idle(), 1);
        let mb = pool.take();
        assert_eq!(pool.idle(), 0);
        assert_eq!(mb, Minibatch::new(&inputs), "cleared");
        assert_eq!(mb.streams[1].values.as_ptr(), ptr);
        assert_eq!(mb.streams[1].values.capacity(), cap);
        pool.give(mb);

        // The guard gives it back on drop; the buffers survive the round trip.
        {
            let mut guard = pool.take_pooled();
            assert_eq!(pool.idle(), 0);
            assert_eq!(guard.streams[1].values.as_ptr(), ptr);
            pack(&mut guard, &parsed, &[3, 2]);
            assert_matches_reference(&guard, &parsed, &[3, 2]);
        }
        assert_eq!(pool.idle(), 1);
        let guard = pool.take_pooled();
        assert!(guard.is_empty());
        assert_eq!(guard.streams[1].values.as_ptr(), ptr);

        // A detached minibatch does not come back.
        let detached = guard.into_inner();
        assert_eq!(detached.streams[1].values.as_ptr(), ptr);
        assert_eq!(pool.idle(), 0);
        drop(detached);
        assert_eq!(pool.idle(), 0);

        // At most `capacity` idle; minibatches of other inputs are dropped.
        for _ in 0..3 {
            pool.give(Minibatch::new(&inputs));
        }
        assert_eq!(pool.idle(), 2);
        let _ = pool.take();
        pool.give(Minibatch::new(&inputs[..2]));
        let mut labelled = inputs.clone();
        labelled[2] = labelled[2].clone().defining_mb_size();
        pool.give(Minibatch::new(&labelled));
        assert_eq!(pool.idle(), 1);
        let wrapped = PooledMinibatch::new(Minibatch::new(&inputs), Arc::clone(&pool));
        drop(wrapped);
        assert_eq!(pool.idle(), 2);

        let empty = MinibatchPool::<f32>::new(&inputs, 0);
        empty.give(empty.take());
        assert_eq!(empty.idle(), 0);
    }

    #[test]
    fn pool_is_shared_across_threads() {
        fn shareable<S: Send + Sync>() {}
        fn sendable<S: Send>() {}
        shareable::<MinibatchPool<f32>>();
        shareable::<Minibatch<f64>>();
        sendable::<PooledMinibatch<f32>>();

        let inputs = mixed_inputs();
        let parsed = Arc::new(parse::<f32>(&inputs, MIXED));
        let pool = Arc::new(MinibatchPool::<f32>::new(&inputs, 4));
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let pool = Arc::clone(&pool);
                let parsed = Arc::clone(&parsed);
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let mut mb = pool.take_pooled();
                        pack(&mut mb, &parsed, &[t, 3 - t]);
                        assert_eq!(mb.len(), 2);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!((1..=2).contains(&pool.idle()));
    }

    /// One generated sample: `(index, value)` pairs (a dense sample lists every index).
    type GenSample = Vec<(u32, i32)>;

    fn gen_sample(sparse: bool, dim: usize) -> BoxedStrategy<GenSample> {
        if sparse {
            prop::collection::vec((0..dim as u32, -20i32..20), 0..4).boxed()
        } else {
            prop::collection::vec(-20i32..20, dim)
                .prop_map(|v| (0u32..).zip(v).collect())
                .boxed()
        }
    }

    /// Random inputs, sequences (per input 1 to 3 samples: the parser requires every input in
    /// every sequence) and a packing order with repeats.
    fn gen_case() -> impl Strategy<Value = (Vec<InputConfig>, Vec<Vec<Vec<GenSample>>>, Vec<usize>)>
    {
        prop::collection::vec((any::<bool>(), 1usize..5), 1..4)
            .prop_flat_map(|shape| {
                let inputs: Vec<InputConfig> = shape
                    .iter()
                    .enumerate()
                    .map(|(i, &(sparse, dim))| {
                        let name = format!("i{i}");
                        if sparse {
                            InputConfig::sparse(&name, dim)
                        } else {
                            InputConfig::dense(&name, dim)
                        }
                    })
                    .collect();
                let sequence: Vec<_> = shape
                    .iter()
                    .map(|&(sparse, dim)| prop::collection::vec(gen_sample(sparse, dim), 1..4))
                    .collect();
                (Just(inputs), prop::collection::vec(sequence, 1..7))
            })
            .prop_flat_map(|(inputs, sequences)| {
                let n = sequences.len();
                (
                    Just(inputs),
                    Just(sequences),
                    prop::collection::vec(0..n, 0..2 * n + 1),
                )
            })
    }

    fn render(inputs: &[InputConfig], sequences: &[Vec<Vec<GenSample>>]) -> String {
        use std::fmt::Write;
        let mut text = String::new();
        for (s, seq) in sequences.iter().enumerate() {
            let lines = seq.iter().map(Vec::len).max().unwrap_or(0);
            for line in 0..lines {
                write!(text, "{}", 3 * s + 1).unwrap();
                for (input, samples) in inputs.iter().zip(seq) {
                    let Some(sample) = samples.get(line) else {
                        continue;
                    };
                    write!(text, " |{}", input.name).unwrap();
                    for &(i, v) in sample {
                        let v = v as f32 / 4.0;
                        match input.format {
                            StorageFormat::Dense => write!(text, " {v}").unwrap(),
                            StorageFormat::Sparse => write!(text, " {i}:{v}").unwrap(),
                        }
                    }
                }
                text.push('\n');
            }
        }
        text
    }

    fn check_case<T: Element>(inputs: &[InputConfig], text: &str, order: &[usize]) {
        let parsed = parse::<T>(inputs, text);
        let mut mb = Minibatch::new(inputs);
        pack(&mut mb, &parsed, order);
        assert_matches_reference(&mb, &parsed, order);
        let mut out = Padded::new();
        let check_padded = |mb: &Minibatch<T>, out: &mut Padded<T>, order: &[usize]| {
            for (input, config) in inputs.iter().enumerate() {
                match config.format {
                    StorageFormat::Dense => {
                        mb.padded(input, out).unwrap();
                        assert_eq!(*out, reference_padded(&parsed, order, input));
                    }
                    StorageFormat::Sparse => {
                        assert_eq!(mb.padded(input, out), Err(PackError::NotDense { input }));
                    }
                }
            }
        };
        check_padded(&mb, &mut out, order);
        // Reused buffers give the same results.
        let reversed: Vec<usize> = order.iter().rev().copied().collect();
        mb.clear();
        pack(&mut mb, &parsed, &reversed);
        assert_matches_reference(&mb, &parsed, &reversed);
        check_padded(&mb, &mut out, &reversed);
        // Pushing them all at once (in two calls, over a partly filled minibatch) gives the
        // same minibatch as one at a time.
        let items: Vec<_> = reversed.iter().map(|&seq| (&parsed, seq)).collect();
        let mut at_once = Minibatch::new(inputs);
        let (first, rest) = items.split_at(items.len() / 2);
        at_once.push_sequences(first).unwrap();
        at_once.push_sequences(rest).unwrap();
        assert_eq!(at_once, mb);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn packing_matches_the_naive_reference((inputs, sequences, order) in gen_case()) {
            let text = render(&inputs, &sequences);
            check_case::<f32>(&inputs, &text, &order);
            check_case::<f64>(&inputs, &text, &order);
        }
    }
}
