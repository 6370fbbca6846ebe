//! Runs the real parser over a byte string fed in pieces and snapshots everything it reports.

use std::str::FromStr;

use ctf_reader::parser::{
    FatalDataError, InvalidSequence, ParseCounts, StreamOptions, StreamParser,
};
use ctf_reader::{Diagnostic, Element, InputConfig, Sample};

/// The element types under test, with what the tests need to compare them bitwise.
pub trait Flt: Element + FromStr {
    /// The IEEE bits, widened.
    fn bits(self) -> u64;
    /// Whether the value is finite.
    fn finite(self) -> bool;
}

impl Flt for f32 {
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn finite(self) -> bool {
        self.is_finite()
    }
}

impl Flt for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
    fn finite(self) -> bool {
        self.is_finite()
    }
}

/// Bits of `token.parse::<T>()` when that is a finite value (the SPEC's definition of a
/// correctly rounded, non-overflowing value).
pub fn parse_bits<T: Flt>(token: &str) -> Option<u64> {
    token
        .parse::<T>()
        .ok()
        .filter(|v| v.finite())
        .map(Flt::bits)
}

/// One sample with its values as bits (so `-0` and `0` differ).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SampleSnap {
    /// Dense values.
    Dense(Vec<u64>),
    /// Sparse `(index, value)` entries in file order.
    Sparse(Vec<(u32, u64)>),
}

/// One delivered sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqSnap {
    /// Its key.
    pub key: u64,
    /// 1-based first line.
    pub line: u64,
    /// Lines with a configured sample.
    pub counted_lines: u32,
    /// Per configured input, its samples in line order.
    pub inputs: Vec<Vec<SampleSnap>>,
}

/// Everything the parser reports after a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The fatal error, if `feed` or `finish_file` failed.
    pub fatal: Option<FatalDataError>,
    /// Delivered sequences.
    pub seqs: Vec<SeqSnap>,
    /// Diagnostics in order.
    pub diags: Vec<Diagnostic>,
    /// Invalid sequences.
    pub invalid: Vec<InvalidSequence>,
    /// Counts.
    pub counts: ParseCounts,
    /// `lines_in_file()` at the end.
    pub lines_in_file: u64,
}

/// Snapshot of the parser's current state.
pub fn snapshot<T: Flt>(p: &StreamParser<T>, fatal: Option<FatalDataError>) -> Snapshot {
    let parsed = p.sequences();
    let n_inputs = parsed.columns.len();
    let seqs = (0..parsed.len())
        .map(|i| {
            let info = parsed.sequences[i];
            let inputs = (0..n_inputs)
                .map(|input| {
                    let samples: Vec<SampleSnap> = parsed
                        .samples(i, input)
                        .map(|s| match s {
                            Sample::Dense(v) => {
                                SampleSnap::Dense(v.iter().map(|x| x.bits()).collect())
                            }
                            Sample::Sparse { indices, values } => SampleSnap::Sparse(
                                indices
                                    .iter()
                                    .zip(values)
                                    .map(|(i, v)| (i, v.bits()))
                                    .collect(),
                            ),
                        })
                        .collect();
                    assert_eq!(samples.len(), parsed.sample_count(i, input));
                    samples
                })
                .collect();
            SeqSnap {
                key: info.key,
                line: info.line,
                counted_lines: info.counted_lines,
                inputs,
            }
        })
        .collect();
    Snapshot {
        fatal,
        seqs,
        diags: p.diagnostics().to_vec(),
        invalid: p.invalid_sequences().to_vec(),
        counts: p.counts(),
        lines_in_file: p.lines_in_file(),
    }
}

/// Parses one file given as consecutive pieces; stops at the first fatal error.
pub fn parse_pieces<'a, T: Flt>(
    inputs: &[InputConfig],
    options: StreamOptions,
    key_base: u64,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Snapshot {
    let mut p = StreamParser::<T>::new(inputs, options);
    p.start_file(key_base);
    let mut fatal = None;
    for piece in pieces {
        if let Err(e) = p.feed(piece) {
            fatal = Some(e);
            break;
        }
    }
    if fatal.is_none() {
        fatal = p.finish_file().err();
    }
    snapshot(&p, fatal)
}

/// Parses `text` fed in one piece.
pub fn parse_whole<T: Flt>(
    inputs: &[InputConfig],
    options: StreamOptions,
    key_base: u64,
    text: &[u8],
) -> Snapshot {
    parse_pieces::<T>(inputs, options, key_base, [text])
}

/// Parses `text` cut at the given increasing positions.
pub fn parse_cut<T: Flt>(
    inputs: &[InputConfig],
    options: StreamOptions,
    key_base: u64,
    text: &[u8],
    cuts: &[usize],
) -> Snapshot {
    parse_pieces::<T>(inputs, options, key_base, pieces(text, cuts))
}

/// The pieces of `text` between the increasing positions `cuts`.
fn pieces<'t>(text: &'t [u8], cuts: &[usize]) -> impl Iterator<Item = &'t [u8]> {
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cuts.iter().copied())
        .chain(std::iter::once(text.len()))
        .collect();
    (1..bounds.len()).map(move |k| &text[bounds[k - 1]..bounds[k]])
}

/// Escapes a text for failure messages.
pub fn show(text: &[u8]) -> String {
    format!("b\"{}\"", text.escape_ascii())
}

/// Parses `text` cut at `cuts`, taking the results and calling `clear()` after every piece
/// (as a reader handing out batches does), and concatenates what was taken. Indexes of
/// invalid sequences (`valid_before`) are made absolute, so the result must equal a whole
/// parse.
pub fn parse_cut_clearing<T: Flt>(
    inputs: &[InputConfig],
    options: StreamOptions,
    key_base: u64,
    text: &[u8],
    cuts: &[usize],
) -> Snapshot {
    let mut p = StreamParser::<T>::new(inputs, options);
    p.start_file(key_base);
    let mut total = snapshot(&p, None);
    let mut take = |p: &mut StreamParser<T>, fatal: Option<FatalDataError>| {
        let part = snapshot(p, fatal);
        let base = total.seqs.len();
        total.seqs.extend(part.seqs);
        total.diags.extend(part.diags);
        total.invalid.extend(part.invalid.into_iter().map(|mut i| {
            i.valid_before += base;
            i
        }));
        total.counts = part.counts;
        total.lines_in_file = part.lines_in_file;
        total.fatal = part.fatal;
        p.clear();
    };
    for piece in pieces(text, cuts) {
        if let Err(e) = p.feed(piece) {
            take(&mut p, Some(e));
            return total;
        }
        take(&mut p, None);
    }
    let fatal = p.finish_file().err();
    take(&mut p, fatal);
    total
}
