//! Columnar buffers of parsed sequences: one buffer set per configured input, appended to
//! sequence by sequence, with no allocation per value.
//!
//! Dense inputs store `samples x dim` values contiguously. Sparse inputs store the values and
//! row indices of all samples back to back, with per-sample start offsets. Every input also
//! records where each sequence's samples start, so a sequence's data is a slice of each column.

use std::ops::Range;

use crate::config::{InputConfig, StorageFormat};
use crate::parser::number::Element;

/// Most samples, and most stored values of a sparse input, that one column holds. Its offsets
/// are 32-bit: half the memory of `usize` ones, and half the cache lines the packer reads for
/// them. A chunk of the index spans at most 4 GiB of text, so its parts always fit; the
/// parser refuses a sample past the limit (an error on its line), and the joins and
/// [`ParsedSequences::append`] check for room.
pub const MAX_COLUMN_ENTRIES: usize = u32::MAX as usize;

/// The parsed samples of one input for a run of sequences.
#[derive(Clone, Debug, PartialEq)]
pub struct InputColumn<T> {
    /// Dense or sparse.
    pub format: StorageFormat,
    /// Values per dense sample, or the exclusive index bound of a sparse input.
    pub dim: usize,
    /// Dense: `samples x dim` values. Sparse: the stored values of all samples.
    pub values: Vec<T>,
    /// Sparse only: the index of each stored value (same length as `values`).
    pub indices: Vec<u32>,
    /// Sparse only: start of each sample in `values`; one more entry than samples (at most
    /// [`MAX_COLUMN_ENTRIES`]).
    pub sample_offsets: Vec<u32>,
    /// Start of each sequence, in samples of this input; one more entry than sequences.
    pub sequence_offsets: Vec<u32>,
}

impl<T: Element> InputColumn<T> {
    fn new(input: &InputConfig) -> Self {
        InputColumn {
            format: input.format,
            dim: input.dim,
            values: Vec::new(),
            indices: Vec::new(),
            sample_offsets: vec![0],
            sequence_offsets: vec![0],
        }
    }

    /// Number of samples held (all sequences, including one being parsed).
    #[inline]
    pub fn sample_count(&self) -> usize {
        match self.format {
            StorageFormat::Dense => self.values.len() / self.dim.max(1),
            StorageFormat::Sparse => self.sample_offsets.len() - 1,
        }
    }

    /// Sample `i` of this column.
    pub fn sample(&self, i: usize) -> Sample<'_, T> {
        match self.format {
            StorageFormat::Dense => Sample::Dense(&self.values[i * self.dim..(i + 1) * self.dim]),
            StorageFormat::Sparse => {
                let range = self.sample_offsets[i] as usize..self.sample_offsets[i + 1] as usize;
                Sample::Sparse {
                    indices: &self.indices[range.clone()],
                    values: &self.values[range],
                }
            }
        }
    }

    /// Bytes its buffers hold on the heap (their capacity).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.values.capacity() * size_of::<T>()
            + self.indices.capacity() * size_of::<u32>()
            + (self.sample_offsets.capacity() + self.sequence_offsets.capacity()) * size_of::<u32>()
    }

    /// Reserves exactly the room to append every sequence of `other` (same input).
    pub(crate) fn reserve_for(&mut self, other: &InputColumn<T>) {
        self.values.reserve_exact(other.values.len());
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
            StorageFormat::Dense => self.values.len() >= limit.saturating_mul(self.dim.max(1)),
            StorageFormat::Sparse => self.sample_offsets.len() > limit,
        }
    }

    /// The samples of sequence `seq`, and their range in `values` (and `indices`).
    fn span(&self, seq: usize) -> (Range<usize>, Range<usize>) {
        let samples = self.sequence_offsets[seq] as usize..self.sequence_offsets[seq + 1] as usize;
        let values = match self.format {
            StorageFormat::Dense => samples.start * self.dim..samples.end * self.dim,
            StorageFormat::Sparse => {
                self.sample_offsets[samples.start] as usize
                    ..self.sample_offsets[samples.end] as usize
            }
        };
        (samples, values)
    }

    /// Whether `samples` more samples holding `values` more stored values (sparse) fit
    /// within `limit`.
    fn room_for(&self, samples: usize, values: usize, limit: usize) -> bool {
        let samples_fit = self.sample_count().saturating_add(samples) <= limit;
        let values_fit = self.format == StorageFormat::Dense
            || self.values.len().saturating_add(values) <= limit;
        samples_fit && values_fit
    }

    /// Appends the samples of sequence `seq` of `other` (same input) as one more sequence;
    /// the caller has checked [`has_room_within`](Self::has_room_within).
    pub(crate) fn push_sequence_of(&mut self, other: &InputColumn<T>, seq: usize) {
        let (samples, entries) = other.span(seq);
        let (from, to) = (entries.start, self.values.len());
        self.values
            .extend_from_slice(&other.values[entries.clone()]);
        if self.format == StorageFormat::Sparse {
            self.indices.extend_from_slice(&other.indices[entries]);
            self.sample_offsets.extend(
                other.sample_offsets[samples.start + 1..=samples.end]
                    .iter()
                    .map(|&o| offset(o as usize - from + to)),
            );
        }
        let n = self.sample_count();
        self.sequence_offsets.push(offset(n));
    }

    /// Drops everything after sample `samples` (used to roll back an invalid sequence).
    fn truncate_samples(&mut self, samples: usize) {
        match self.format {
            StorageFormat::Dense => self.values.truncate(samples * self.dim),
            StorageFormat::Sparse => {
                self.sample_offsets.truncate(samples + 1);
                let nnz = self.sample_offsets[samples] as usize;
                self.values.truncate(nnz);
                self.indices.truncate(nnz);
            }
        }
    }

    /// Removes the first `sequences` sequences, keeping later data (a partial sequence).
    fn drain_sequences(&mut self, sequences: usize) {
        let samples = self.sequence_offsets[sequences] as usize;
        match self.format {
            StorageFormat::Dense => {
                self.values.drain(..samples * self.dim);
            }
            StorageFormat::Sparse => {
                let nnz = self.sample_offsets[samples];
                self.values.drain(..nnz as usize);
                self.indices.drain(..nnz as usize);
                self.sample_offsets.drain(..samples);
                for o in &mut self.sample_offsets {
                    *o -= nnz;
                }
            }
        }
        self.sequence_offsets.drain(..sequences);
        for o in &mut self.sequence_offsets {
            *o -= samples as u32;
        }
    }
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
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sample<'a, T> {
    /// `dim` values.
    Dense(&'a [T]),
    /// Stored entries in file order.
    Sparse {
        /// Row index of each value.
        indices: &'a [u32],
        /// The stored values.
        values: &'a [T],
    },
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

/// The lengths of the buffers of a [`ParsedSequences`] (per column: values, indices, sample
/// offsets, sequence offsets; and the sequences).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BufferLengths {
    pub(crate) columns: Vec<[usize; 4]>,
    pub(crate) sequences: usize,
}

/// Parsed sequences in columnar form: the output of the parser.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedSequences<T> {
    /// One column per configured input, in configuration order.
    pub columns: Vec<InputColumn<T>>,
    /// One entry per complete sequence.
    pub sequences: Vec<SequenceInfo>,
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
            c.indices.reserve(scaled(l[1]));
            c.sample_offsets.reserve(scaled(l[2]));
            c.sequence_offsets.reserve(scaled(l[3]));
        }
        self.sequences.reserve(scaled(lengths.sequences));
    }

    /// Empty buffers for the given inputs.
    pub fn new(inputs: &[InputConfig]) -> Self {
        ParsedSequences {
            columns: inputs.iter().map(InputColumn::new).collect(),
            sequences: Vec::new(),
        }
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
        let o = &self.columns[input].sequence_offsets;
        (o[seq + 1] - o[seq]) as usize
    }

    /// The samples of input `input` in sequence `seq`.
    pub fn samples(&self, seq: usize, input: usize) -> impl Iterator<Item = Sample<'_, T>> + '_ {
        let col = &self.columns[input];
        (col.sequence_offsets[seq] as usize..col.sequence_offsets[seq + 1] as usize)
            .map(move |i| col.sample(i))
    }

    /// Sample counts per input of the sequence being built (after the last complete one).
    pub(crate) fn open_sequence_counts(&self, out: &mut Vec<usize>) {
        out.clear();
        out.extend(
            self.columns.iter().map(|c| {
                c.sample_count() - c.sequence_offsets[c.sequence_offsets.len() - 1] as usize
            }),
        );
    }

    /// Seals the samples appended since the last complete sequence as one sequence.
    pub(crate) fn commit_sequence(&mut self, info: SequenceInfo) {
        for c in &mut self.columns {
            let n = c.sample_count();
            c.sequence_offsets.push(offset(n));
        }
        self.sequences.push(info);
    }

    /// Discards the samples appended since the last complete sequence.
    pub(crate) fn rollback_sequence(&mut self) {
        for c in &mut self.columns {
            let start = c.sequence_offsets[c.sequence_offsets.len() - 1] as usize;
            c.truncate_samples(start);
        }
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
        for (input, (mine, theirs)) in self.columns.iter().zip(&other.columns).enumerate() {
            let end = theirs.sequence_offsets[other.sequences.len()] as usize;
            let values = match theirs.format {
                StorageFormat::Dense => 0,
                StorageFormat::Sparse => theirs.sample_offsets[end] as usize,
            };
            if !mine.room_for(end, values, limit) {
                return Err(ColumnOverflow { input });
            }
        }
        for (mine, theirs) in self.columns.iter_mut().zip(&other.columns) {
            let sample_base = mine.sample_count();
            let value_base = mine.values.len();
            let end = theirs.sequence_offsets[other.sequences.len()] as usize;
            match theirs.format {
                StorageFormat::Dense => {
                    mine.values
                        .extend_from_slice(&theirs.values[..end * theirs.dim]);
                }
                StorageFormat::Sparse => {
                    let nnz = theirs.sample_offsets[end] as usize;
                    mine.values.extend_from_slice(&theirs.values[..nnz]);
                    mine.indices.extend_from_slice(&theirs.indices[..nnz]);
                    mine.sample_offsets.extend(
                        theirs.sample_offsets[1..=end]
                            .iter()
                            .map(|&o| offset(o as usize + value_base)),
                    );
                }
            }
            mine.sequence_offsets.extend(
                theirs.sequence_offsets[1..=other.sequences.len()]
                    .iter()
                    .map(|&o| offset(o as usize + sample_base)),
            );
        }
        self.sequences.extend_from_slice(&other.sequences);
        Ok(())
    }

    /// Keeps the first `n` complete sequences and nothing after them.
    pub fn truncate(&mut self, n: usize) {
        if n >= self.sequences.len() {
            self.rollback_sequence();
            return;
        }
        for c in &mut self.columns {
            let samples = c.sequence_offsets[n] as usize;
            c.truncate_samples(samples);
            c.sequence_offsets.truncate(n + 1);
        }
        self.sequences.truncate(n);
    }

    /// Removes every complete sequence, keeping a sequence that is still being built.
    pub fn clear_complete(&mut self) {
        let n = self.sequences.len();
        if n == 0 {
            return;
        }
        for c in &mut self.columns {
            c.drain_sequences(n);
        }
        self.sequences.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::LineParser;

    fn inputs() -> Vec<InputConfig> {
        vec![InputConfig::dense("d", 2), InputConfig::sparse("s", 10)]
    }

    /// One sequence per line of `lines`, parsed.
    fn parsed(lines: &[&str]) -> ParsedSequences<f32> {
        let mut parser = LineParser::new(&inputs());
        let mut out = ParsedSequences::new(&inputs());
        for (n, line) in lines.iter().enumerate() {
            let buf = format!("{line}\n");
            let mut diags = Vec::new();
            parser.parse_line(buf.as_bytes(), 0, 0, n as u64 + 1, &mut out, &mut diags);
            assert!(diags.is_empty(), "{diags:?}");
            out.commit_sequence(SequenceInfo {
                key: n as u64,
                line: n as u64 + 1,
                counted_lines: 1,
            });
        }
        out
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
        assert_eq!(mine.columns[1].values, [1.0, 2.0, 4.0, 5.0, 6.0]);
        assert_eq!(mine.columns[0].sequence_offsets, [0, 1, 2, 3]);
    }
}
