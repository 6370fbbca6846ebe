//! Where each sequence of a parsed part lies, one row per sequence, for the packers.
//!
//! A packer reads sequences drawn at random from large parsed parts, so each read is a cache
//! miss, and the columns of [`ParsedSequences`] put a sequence's key and each input's
//! sample offsets in arrays of their own: a sequence of a sparse pair of inputs costs three
//! lines before its values are found. When every sequence holds one sample of each input
//! (the usual non-sequence corpus) and some input stores its sample offsets (a sparse input
//! whose samples are not all of one entry), a [`SequenceLookup`] holds all of that in one
//! row per sequence: the start of each input's values, then the key; the next row's starts
//! are the ends. The loaders build it once per part ([`SequenceLookup::build`]), checking every
//! offset against the columns, so the packer reads a sequence's whereabouts from one or two
//! adjacent lines and checks nothing again.

use std::ops::Range;

use super::columns::{InputColumn, ParsedSequences};
use crate::config::StorageFormat;

/// One row per sequence of a [`ParsedSequences`] whose sequences each hold one sample of
/// every input: per input, where the sequence's values start in its column, then the key
/// (two words, low first); a last row holds where the values end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SequenceLookup {
    rows: Vec<u32>,
    inputs: usize,
}

impl SequenceLookup {
    /// The lookup of `parsed`, or `None` when a sequence holds other than one sample of
    /// some input, when no input stores its sample offsets (a sparse input of more than
    /// one entry in some sample: without one, a row saves no line), when it has no
    /// sequences or inputs, or when an offset would not fit a word (a dense column of more
    /// than `u32::MAX` values) or its column's values.
    pub fn build<T>(parsed: &ParsedSequences<T>) -> Option<Self> {
        let sequences = parsed.sequences.len();
        let inputs = parsed.columns.len();
        if sequences == 0 || inputs == 0 {
            return None;
        }
        let one_sample_each =
            |c: &InputColumn<T>| c.single_samples && c.sequence_count() == sequences;
        // Only offsets stored in a column of their own cost the packer a line: without them
        // (dense inputs, one-entry samples) the row would only take the key's place.
        let stored_offsets =
            |c: &InputColumn<T>| c.format == StorageFormat::Sparse && !c.single_entries;
        if !parsed.columns.iter().all(one_sample_each) || !parsed.columns.iter().any(stored_offsets)
        {
            return None;
        }
        let stride = inputs + 2;
        let mut rows = vec![0u32; (sequences + 1).checked_mul(stride)?];
        for (input, col) in parsed.columns.iter().enumerate() {
            fill_starts(col, sequences, rows[input..].iter_mut().step_by(stride))?;
        }
        for (row, info) in rows.chunks_exact_mut(stride).zip(&parsed.sequences) {
            row[inputs] = info.key as u32;
            row[inputs + 1] = (info.key >> 32) as u32;
        }
        Some(SequenceLookup { rows, inputs })
    }

    /// The number of sequences it holds rows for.
    pub fn len(&self) -> usize {
        self.rows.len() / (self.inputs + 2) - 1
    }

    /// Bytes its rows hold on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.rows.capacity() * std::mem::size_of::<u32>()
    }

    /// The words sequence `seq` is read from: its row, then the next row's starts (its
    /// ends). `None` past the last sequence.
    #[inline]
    fn words(&self, seq: usize) -> Option<&[u32]> {
        let stride = self.inputs + 2;
        let start = seq.checked_mul(stride)?;
        self.rows.get(start..start + stride + self.inputs)
    }

    /// The values of input `input` of sequence `seq` (in its column); `None` past the last
    /// sequence or input.
    #[inline]
    pub fn values(&self, seq: usize, input: usize) -> Option<Range<usize>> {
        let words = self.words(seq)?;
        let stride = self.inputs + 2;
        let (start, end) = (*words.get(input)?, *words.get(stride + input)?);
        Some(start as usize..end as usize)
    }

    /// The key of sequence `seq`, if it has a row.
    #[inline]
    pub fn key(&self, seq: usize) -> Option<u64> {
        let words = self.words(seq)?;
        Some(u64::from(words[self.inputs]) | u64::from(words[self.inputs + 1]) << 32)
    }

    /// The first and last word read for sequence `seq`, for a prefetch of their lines.
    #[inline]
    pub(crate) fn ends_of_row(&self, seq: usize) -> Option<(&u32, &u32)> {
        let words = self.words(seq)?;
        Some((words.first()?, words.last()?))
    }
}

/// Writes to `starts` where each of the `sequences` one-sample sequences of `col` starts in
/// its values, then where the last ends, as the packer finds them (a dense sample is `dim`
/// values, a sparse one starts at its [`entry_start`](InputColumn::entry_start), stored or
/// implicit); `None` when an offset is out of order, past the column's values (or a sparse
/// column's indices), or too large for a word.
fn fill_starts<'a, T>(
    col: &InputColumn<T>,
    sequences: usize,
    starts: impl Iterator<Item = &'a mut u32>,
) -> Option<()> {
    let sparse = col.format == StorageFormat::Sparse;
    if sparse && !col.single_entries && col.sample_offsets.len() <= sequences {
        return None;
    }
    // The end bounds every start once they are in order.
    let end = if sparse {
        col.entry_start(sequences)
    } else {
        sequences.checked_mul(col.dim)?
    };
    if end > col.stored_value_count()
        || (sparse && end > col.indices.len())
        || u32::try_from(end).is_err()
    {
        return None;
    }
    // The stored offsets read as a slice, the implicit ones counted: no choice per sequence.
    if sparse && !col.single_entries {
        let offsets = col.sample_offsets[..=sequences].iter().map(|&o| o as usize);
        write_in_order(starts, offsets)
    } else {
        let step = if sparse { 1 } else { col.dim };
        write_in_order(starts, (0..=sequences).map(|seq| seq * step))
    }
}

/// Writes `offsets` to `starts`, each at most the last (which the caller checked is within
/// `u32`); `None` at the first one below the one before.
fn write_in_order<'a>(
    starts: impl Iterator<Item = &'a mut u32>,
    offsets: impl Iterator<Item = usize>,
) -> Option<()> {
    let mut previous = 0;
    for (slot, offset) in starts.zip(offsets) {
        if offset < previous {
            return None;
        }
        *slot = offset as u32;
        previous = offset;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::InputConfig;
    use crate::parser::{LineParser, SequenceInfo};

    fn inputs() -> Vec<InputConfig> {
        vec![InputConfig::sparse("x", 100), InputConfig::dense("y", 2)]
    }

    /// One sequence per item of `sequences` (its lines separated by line feeds) of
    /// [`inputs`], parsed, sequence `n` keyed `n * 3`.
    fn parsed(sequences: &[&str]) -> ParsedSequences<f32> {
        parsed_with(&inputs(), sequences)
    }

    /// [`parsed`] with other inputs.
    fn parsed_with(inputs: &[InputConfig], sequences: &[&str]) -> ParsedSequences<f32> {
        let mut parser = LineParser::new(inputs);
        let mut out = ParsedSequences::new(inputs);
        for (n, sequence) in sequences.iter().enumerate() {
            for text in sequence.split('\n') {
                let mut diags = Vec::new();
                let line = format!("{text}\n");
                parser.parse_line(line.as_bytes(), 0, 0, 1, &mut out, &mut diags);
                assert!(diags.is_empty(), "{diags:?}");
            }
            out.commit_sequence(SequenceInfo {
                key: n as u64 * 3,
                line: 1,
                counted_lines: 1,
            });
        }
        out
    }

    #[test]
    fn rows_hold_each_sequence_values_and_key() {
        let parsed = parsed(&[
            "|x 1:2 5:3 |y 1 2",
            "|x 7:1 |y 3 4",
            "|x |y 5 6",
            "|x 3:1 4:1 9:1 |y 7 8",
        ]);
        let lookup = SequenceLookup::build(&parsed).expect("one sample of each input");
        assert_eq!(lookup.len(), 4);
        let expect = [(0..2, 0..2), (2..3, 2..4), (3..3, 4..6), (3..6, 6..8)];
        for (seq, (x, y)) in expect.into_iter().enumerate() {
            let key = seq as u64 * 3;
            assert_eq!(lookup.values(seq, 0), Some(x));
            assert_eq!(lookup.values(seq, 1), Some(y));
            assert_eq!(lookup.key(seq), Some(key));
        }
        assert_eq!(lookup.values(4, 0), None);
        assert_eq!(lookup.key(4), None);
        assert_eq!(lookup.values(0, 2), None);
    }

    #[test]
    fn one_entry_samples_read_their_implicit_offsets() {
        let mut inputs = inputs();
        inputs.push(InputConfig::sparse("z", 10));
        let lines = ["|x 1:2 |y 1 2 |z 1:1 2:1", "|x 7:1 |y 3 4 |z 3:1"];
        let parsed = parsed_with(&inputs, &lines);
        assert!(parsed.columns[0].single_entries);
        let lookup = SequenceLookup::build(&parsed).unwrap();
        assert_eq!(lookup.values(1, 0), Some(1..2));
        assert_eq!(lookup.key(1), Some(3));
        assert_eq!(lookup.values(1, 2), Some(2..3));
    }

    #[test]
    fn columns_without_stored_offsets_have_no_lookup() {
        // One-entry samples and dense values: a row would save the packer no line.
        let one_entry = parsed(&["|x 1:2 |y 1 2", "|x 7:1 |y 3 4"]);
        assert!(one_entry.columns[0].single_entries);
        assert_eq!(SequenceLookup::build(&one_entry), None);
        let dense = vec![InputConfig::dense("y", 2)];
        assert_eq!(
            SequenceLookup::build(&parsed_with(&dense, &["|y 1 2"])),
            None
        );
    }

    #[test]
    fn keys_keep_their_high_word() {
        let mut parsed = parsed(&["|x 1:1 2:1 |y 1 2"]);
        parsed.sequences[0].key = 0x1234_5678_9abc_def0;
        let lookup = SequenceLookup::build(&parsed).unwrap();
        assert_eq!(lookup.key(0), Some(0x1234_5678_9abc_def0));
    }

    #[test]
    fn sequences_of_several_samples_or_none_have_no_lookup() {
        assert_eq!(
            SequenceLookup::build(&parsed(&["|x 1:1 |y 1 2\n|x 2:1 |y 3 4"])),
            None
        );
        assert_eq!(
            SequenceLookup::build(&parsed(&["|x 1:1 |y 1 2", "|x 2:1"])),
            None
        );
        assert_eq!(SequenceLookup::build(&parsed(&[])), None);
    }

    #[test]
    fn offsets_out_of_order_or_past_the_values_have_no_lookup() {
        let good = parsed(&["|x 1:2 5:3 |y 1 2", "|x 7:1 |y 3 4"]);
        assert!(SequenceLookup::build(&good).is_some());
        assert_eq!(good.columns[0].sample_offsets, [0, 2, 3]);
        let mut disordered = good.clone();
        disordered.columns[0].sample_offsets = vec![0, 3, 2];
        assert_eq!(SequenceLookup::build(&disordered), None);
        let mut past = good.clone();
        past.columns[0].sample_offsets = vec![0, 2, 4];
        assert_eq!(SequenceLookup::build(&past), None);
    }
}
