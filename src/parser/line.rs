//! The byte-level core: parses the samples of one line into the columnar buffers.
//!
//! A line is `[id] (sample | comment)*`; the caller skips the id and guarantees that the line
//! ends with a line feed, the sentinel of every scanning loop. Samples
//! of configured inputs are decoded straight into their column; samples of other inputs are
//! skipped; comments (`|#` up to the next `|` not followed by `#`) are skipped. Every problem
//! becomes a [`Diagnostic`] and marks the line as erroneous; the caller invalidates the
//! sequence. Parsing then resumes at the next `|`, so one line can report several errors.
//!
//! Lines repeat a few shapes, so the parser remembers, after each input and at a line's
//! start, the bytes that led to the next sample's values the last time (`SampleStart`), and
//! takes a sample whose leading bytes are those with one comparison. A line that holds just
//! one value there (`id |x 12345`, `id |x 678:1`, whole corpora of ragged sequences) is taken
//! in one step, without the general loop (`single_value_line`), and the lines that continue
//! a sequence in one such shape are taken in one loop for the run of them
//! (`single_value_run`, `several_values_run`; lines of one entry of each of two sparse
//! inputs, the seq shape, in `sparse_pair_run`), 64 bytes at a time where the lines allow
//! (`line_blocks`: lines of one integer, lines of two such entries).

use std::num::NonZeroU64;

use memchr::memchr2;

use crate::config::{InputConfig, StorageFormat};
use crate::diag::{Diagnostic, Severity};
use crate::parser::block::{digits, eight_digit_starts, ends_before, matches, BLOCK};
use crate::parser::columns::{InputColumn, ParsedSequences, MAX_COLUMN_ENTRIES};
use crate::parser::dense_digits::{short_values, Decimals, Integers};
#[cfg(target_arch = "x86_64")]
use crate::parser::entry_vectors;
use crate::parser::entry_vectors::EntryGroup;
use crate::parser::line_blocks::LineBlocks;
use crate::parser::number::{
    ascii_digits_value, ascii_digits_value_pair, lanes_value, leading_digits_value,
    scan_entry_value, scan_entry_value_outlined, Element, NumberError,
};
use crate::parser::values::{EntryValue, ValueTier};
use crate::parser::word::{digit_lanes, load_word, word_at, ONES};
use crate::quote::{quote, QUOTED_BYTES};

/// What parsing one line found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineOutcome {
    /// Samples of configured inputs on the line (valid or not).
    pub samples: u32,
    /// Errors reported for the line.
    pub errors: u32,
}

/// An alias of at most 8 bytes as a little-endian word, for a one-compare match (the
/// parser's and the indexer's).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackedAlias {
    bits: u64,
    mask: u64,
    /// The alias's length in bytes.
    pub(crate) len: usize,
}

impl PackedAlias {
    /// The packed form of `alias`, or `None` when it is empty or longer than 8 bytes.
    pub(crate) fn new(alias: &[u8]) -> Option<Self> {
        if alias.is_empty() || alias.len() > 8 {
            return None;
        }
        let mut word = [0u8; 8];
        word[..alias.len()].copy_from_slice(alias);
        let mask = if alias.len() == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * alias.len())) - 1
        };
        Some(PackedAlias {
            bits: u64::from_le_bytes(word),
            mask,
            len: alias.len(),
        })
    }

    /// Whether the low `len` bytes of `word` (little-endian) are the alias.
    #[inline(always)]
    pub(crate) fn starts(&self, word: u64) -> bool {
        word & self.mask == self.bits
    }
}

/// Which configured input to try first for the next name of a line: the one that followed
/// the same predecessor (the input named before it on the line, or the line's start) last
/// time.
///
/// A corpus repeats a few line shapes: `|a … |b …` on every line, or `|labels … |features …`
/// on a sequence's first line and `|features …` on the others. A guess per predecessor
/// follows both, where one guess for "the input after the last one" would miss on every
/// line of the second.
#[derive(Clone, Debug)]
pub(crate) struct NameGuess {
    /// Per input, then (the last slot) for a line's start: the input that came next last time.
    follows: Box<[usize]>,
}

impl NameGuess {
    /// Guesses for `inputs` inputs, before any line: configuration order.
    pub(crate) fn new(inputs: usize) -> Self {
        NameGuess {
            follows: (0..=inputs)
                .map(|i| if i + 1 < inputs { i + 1 } else { 0 })
                .collect(),
        }
    }

    /// The predecessor of a line's first name.
    #[inline(always)]
    pub(crate) fn line_start(&self) -> usize {
        self.follows.len() - 1
    }

    /// The input to try first after `before` (an input, or [`line_start`](Self::line_start)).
    #[inline(always)]
    pub(crate) fn after(&self, before: usize) -> usize {
        self.follows[before]
    }

    /// Records that `input` followed `before`.
    #[inline(always)]
    pub(crate) fn learn(&mut self, before: usize, input: usize) {
        self.follows[before] = input;
    }
}

/// Parses lines against a fixed set of configured inputs.
#[derive(Clone, Debug)]
pub struct LineParser {
    aliases: Vec<Box<[u8]>>,
    /// Every alias packed, when all are at most 8 bytes long (the usual case).
    packed: Option<Vec<PackedAlias>>,
    /// The input whose alias is tried first at each sample.
    guess: NameGuess,
    names: Vec<String>,
    formats: Vec<StorageFormat>,
    dims: Vec<usize>,
    /// Line stamp of the last line each input was seen on, to detect repeats on a line.
    seen_on: Vec<u64>,
    stamp: u64,
    /// Most samples, and stored values of a sparse input, a column may hold
    /// ([`MAX_COLUMN_ENTRIES`]; lowered in tests).
    max_entries: usize,
    /// Per input, then (the last slot) for a line's start: how the next sample began the
    /// last time it was found the long way after that input ([`SampleStart`]).
    next_sample: Box<[SampleStart]>,
    /// The samples of the last line parsed the general way when it held at most
    /// [`QUICK_SAMPLES`] and no error, else 0: the next line is worth trying as a line of
    /// that many single values ([`quick_line`](Self::quick_line)).
    quick_samples: u32,
    /// Lines left before [`single_values_line`](Self::single_values_line) tries one again.
    quick_pause: u8,
}

/// Most samples of a line [`LineParser::single_values_line`] takes.
const QUICK_SAMPLES: usize = 4;

/// Lines not tried as lines of several single values after one that failed past its first
/// sample start: a failure there costs a value read twice, so on other data (lines of two
/// bags of words, say) one line in 17 is tried.
const QUICK_PAUSE: u8 = 16;

/// A value [`LineParser::single_values_line`] found: a dense input's value, or a sparse
/// entry's index and one-digit value.
#[derive(Clone, Copy)]
enum QuickValue<T> {
    Dense(EntryValue<T>),
    Entry(u32, u8),
}

/// What [`LineParser::several_values_run`] reads at a learnt sample start: the value of a
/// dense input of dim 1, or one entry of a sparse input of the given dim
/// ([`LineParser::chain_kind`]). The same rule as [`LineParser::quick_value`]'s and
/// [`LineParser::single_value_run`]'s, written out in each:
/// one function for it (the kind found, then read) cost the seq shape's parse 4–6% more
/// instructions (callgrind, 20 MB: 251–255 M against 241 M), the loops' registers spilling.
#[derive(Clone, Copy)]
enum QuickKind {
    DenseScalar,
    Sparse(usize),
}

/// Appends the sample of `input` holding just `value`, as `dense_sample` or `sparse_sample`
/// would.
#[inline(always)]
fn push_quick<T: Element>(out: &mut ParsedSequences<T>, input: usize, value: QuickValue<T>) {
    let column = &mut out.columns[input];
    match value {
        QuickValue::Dense(value) => column.push_scalar_sample(value),
        QuickValue::Entry(index, digit) => column.push_one_entry_sample(index, digit),
    }
}

/// Entries [`digit_entries`] appends per block of room it makes in the column.
const ENTRY_BLOCK: usize = 32;

/// Bytes [`digit_entries`] reads at once: the block whose spaces it finds, and room past it
/// for the bytes an entry starting at its end reads (at most 10, 8 at once).
const WINDOW: usize = BLOCK + 16;

/// Appends the leading entries of the sparse sample at `buf[pos..]` that `sparse_sample`'s
/// fast path would take ([`quick_entry`]: an index of 1 to 7 digits, `:`, one digit, then
/// whitespace, `|` or the line end), each separated from the one before by one space, while
/// each fits the column as it is: its index within `dim` and at most `u16::MAX` above the
/// one before, and its value 1 unless `BYTES`. The column's indices must be steps and its
/// values bytes (`BYTES`) or ones. Returns where the first entry not taken starts (before
/// its whitespace), and the index of the last entry taken (0 if none), for `sparse_sample`
/// to go on from: it takes whatever this leaves, entry by entry.
///
/// The column's state is checked once per sample rather than at every entry, and the
/// entries are written into room made for a block of them (see
/// [`InputColumn::append_step_entries`]). Each entry's start comes from a mask of the spaces
/// of a 64-byte window rather than from the end of the entry before it, and its shape from
/// a mask of the digits ([`masked_entry`]): the core need not finish one entry before it
/// starts reading the next. On the sparse shape this parses 1.3 times as fast as an entry
/// read from the end of the one before (in memory, one core), for about as many
/// instructions. The shape of a window's run of well-formed entries is checked at once on
/// its masks of spaces, digits and colons ([`well_formed_entries`]), and those entries are
/// then read without a check each ([`shaped_entry`]): 7% fewer instructions here on the
/// sparse shape (callgrind). Those entries are taken two at a time ([`shaped_pair`]): both
/// indices converted by one vector sequence, and the pair checked and stored at once, which
/// took this function from 182.0 M to 160.3 M instructions on a 20 MB sparse file
/// (callgrind of `ctf bench --threads 1`). Kept out of line: inlined into the line loop, its
/// loop's registers were spilled around every entry.
///
/// On CPUs with AVX-512 VBMI2 the run's entries are taken up to eight at a time while it
/// holds three or more ([`entry_vectors`]; the loop compiled a second time, with those
/// features): sparse's `elapsed_s` 0.93 and `index_s` 0.91 of the pairs' alone (`ctf
/// bench`, two builds in alternating rounds); one or two at a time otherwise.
#[inline(never)]
fn digit_entries<T: Element, const BYTES: bool>(
    buf: &[u8],
    pos: usize,
    dim: usize,
    column: &mut InputColumn<T>,
) -> (usize, u32) {
    #[cfg(target_arch = "x86_64")]
    if let Some(avx512) = entry_vectors::avx512() {
        use fearless_simd::Simd;
        return avx512.vectorize(
            #[inline(always)]
            || {
                digit_entries_with::<T, BYTES>(buf, pos, dim, column, |block, ends, start, last| {
                    entry_vectors::entry_group(avx512, block, ends, start, last, dim, !BYTES)
                })
            },
        );
    }
    digit_entries_with::<T, BYTES>(buf, pos, dim, column, no_group)
}

/// What [`digit_entries_with`] takes groups of entries with where the CPU has no vector
/// step: none.
#[inline(always)]
fn no_group(_: &[u8; BLOCK], _: u64, _: usize, _: u32) -> Option<EntryGroup> {
    None
}

/// [`digit_entries`], taking up to eight entries at once with `group` (given the block, the
/// run's spaces left, where the next entry starts and the index before it: an
/// [`EntryGroup`] when they all fit the column, else `None`) while the run holds three or
/// more.
#[inline(always)]
fn digit_entries_with<T: Element, const BYTES: bool>(
    buf: &[u8],
    pos: usize,
    dim: usize,
    column: &mut InputColumn<T>,
    group: impl Fn(&[u8; BLOCK], u64, usize, u32) -> Option<EntryGroup>,
) -> (usize, u32) {
    // Where the next entry starts, and the index of the last one taken.
    let mut next = skip_space(buf, pos);
    let mut after = 0u32;
    let mut taken = 0;
    loop {
        // Whether the block stopped past an entry that ended the run (then `next` is its
        // end) rather than before an entry it could not take.
        let mut ended = false;
        let mut room = 0;
        let filled = column.append_step_entries::<BYTES, ENTRY_BLOCK>(|steps, bytes| {
            room = steps.len();
            let bytes = &mut bytes[..if BYTES { room } else { 0 }];
            let (mut at, mut last) = (next, after);
            let mut slot = 0;
            'blocks: while slot < room {
                // The spaces and digits of the 64 bytes from `at`. An entry taken ends at
                // the first space after it, and the next starts past that space: the next
                // start comes from the mask, not from the entry's length, so that the next
                // entry's reads need not wait for this one's digits to be counted. An entry
                // starts at most 64 bytes in and is at most 10 long ([`quick_entry`] reads
                // 8 bytes from its start), hence the 80.
                let Some(window) = buf.get(at..).and_then(<[u8]>::first_chunk::<WINDOW>) else {
                    break;
                };
                let Some(block) = window.first_chunk::<BLOCK>() else {
                    break;
                };
                let mut spaces = matches(block, [b' ']);
                if spaces == 0 {
                    break;
                }
                let digits = digits(block);
                let window_start = at;
                // Where the entry being read starts in the window; `at` is set from it when
                // the block's loop ends.
                let mut start = 0;
                // The entries of the block's well-formed run, whose shape the masks checked
                // all at once, are read without a check of their own; the rest one by one.
                let shaped = well_formed_entries(spaces, digits, matches(block, [b':']));
                // Up to eight entries of the run at a time while it holds three or more, and
                // all fit.
                while (shaped & spaces).count_ones() >= 3 {
                    let Some(step_slots) = steps.get_mut(slot..slot + 8) else {
                        break;
                    };
                    let Some(taken) = group(block, shaped & spaces, start, last) else {
                        break;
                    };
                    // All eight slots written, `taken.count` kept: those past it are written
                    // again or cut off by `append_step_entries`.
                    step_slots.copy_from_slice(&taken.steps);
                    if BYTES {
                        // As many byte slots as step slots.
                        bytes[slot..slot + 8].copy_from_slice(&taken.values);
                    }
                    slot += taken.count;
                    last = taken.last;
                    start = taken.last_space + 1;
                    spaces &= !(u64::MAX >> (63 - taken.last_space));
                }
                // Two entries of the well-formed run at a time while it holds two more, and
                // both fit: their indices are converted together ([`shaped_pair`]) and checked
                // together. A pair that does not fit is left to the loop below, entry by
                // entry.
                loop {
                    let rest = spaces & spaces.wrapping_sub(1);
                    // The run's spaces are the first of the block's: the second one's being
                    // in it says the first's is too.
                    let Some(second) = NonZeroU64::new(shaped & rest & rest.wrapping_neg()) else {
                        break;
                    };
                    let first = spaces.trailing_zeros() as usize;
                    let second = second.trailing_zeros() as usize;
                    let Some(((one, one_digit), (two, two_digit))) =
                        shaped_pair(window, start, first, second)
                    else {
                        break;
                    };
                    let (step_one, step_two) = (one.wrapping_sub(last), two.wrapping_sub(one));
                    // Both steps within u16 (a decrease wraps past it) put `one` at most at
                    // `two`, so `two` within `dim` puts both there.
                    let fits = (step_one | step_two) <= u32::from(u16::MAX)
                        && (two as usize) < dim
                        && (BYTES || (one_digit, two_digit) == (1, 1));
                    let Some(step_pair) = steps.get_mut(slot..slot + 2) else {
                        break;
                    };
                    if !fits {
                        break;
                    }
                    step_pair.copy_from_slice(&[step_one as u16, step_two as u16]);
                    if BYTES {
                        // As many byte slots as step slots.
                        bytes[slot..slot + 2].copy_from_slice(&[one_digit, two_digit]);
                    }
                    slot += 2;
                    last = two;
                    start = second + 1;
                    spaces = rest & rest.wrapping_sub(1);
                }
                while spaces != 0 && slot < room {
                    let space = spaces.trailing_zeros() as usize;
                    spaces &= spaces - 1;
                    let entry = if shaped >> space & 1 != 0 {
                        shaped_entry(window, start, space)
                    } else {
                        masked_entry(window, digits, start, space)
                    };
                    let Some((index, digit)) = entry else {
                        // Not an entry ended by a space: the last of the sample (ended by
                        // `|`, the line feed or other whitespace) as the quick paths read
                        // one, which ends the run, or one the run does not take.
                        at = window_start + start;
                        if let Some((index, digit, end)) = quick_entry(window, start, dim) {
                            let ends = window[end] != b' ' && ends_name(window[end]);
                            if ends
                                && take_step_entry::<BYTES>(
                                    (steps, bytes),
                                    (&mut slot, &mut last),
                                    (index, digit),
                                    dim,
                                )
                            {
                                at = window_start + end;
                                ended = true;
                            }
                        }
                        break 'blocks;
                    };
                    if !take_step_entry::<BYTES>(
                        (steps, bytes),
                        (&mut slot, &mut last),
                        (index, digit),
                        dim,
                    ) {
                        at = window_start + start;
                        break 'blocks;
                    }
                    start = space + 1;
                }
                at = window_start + start;
            }
            (next, after) = (at, last);
            slot
        });
        taken += filled;
        if ended {
            return (next, after);
        }
        if filled < room {
            // Stopped before the entry at `next`: the last one taken ended at the space
            // before it.
            return (if taken == 0 { pos } else { next - 1 }, after);
        }
    }
}

/// Writes the entry of index `index` and one-digit value `digit` into `steps[*slot]` (and
/// `bytes[*slot]` when `BYTES`), after the entry of index `*last`, and moves both on, when
/// it fits a column whose indices are steps (within `dim`, at most `u16::MAX` above the one
/// before: a decrease wraps past it too) and whose values are bytes (`BYTES`) or ones;
/// whether it did.
#[inline(always)]
fn take_step_entry<const BYTES: bool>(
    (steps, bytes): (&mut [u16], &mut [u8]),
    (slot, last): (&mut usize, &mut u32),
    (index, digit): (u32, u8),
    dim: usize,
) -> bool {
    let step = index.wrapping_sub(*last);
    let fits = (index as usize) < dim && step <= u32::from(u16::MAX) && (BYTES || digit == 1);
    if fits {
        steps[*slot] = step as u16;
        if BYTES {
            bytes[*slot] = digit;
        }
        *last = index;
        *slot += 1;
    }
    fits
}

/// The spaces of a block starting with an entry that end the entries of its well-formed run,
/// given the block's masks of spaces, digits and colons: up to the last space before any
/// other byte, when every entry before it is 1 to 7 digits, `:`, one digit and one space
/// (as [`masked_entry`] takes them one by one); 0 when some is not, or none ends there.
#[inline(always)]
fn well_formed_entries(spaces: u64, digits: u64, colons: u64) -> u64 {
    let ends = ends_before(spaces, !(spaces | digits | colons));
    if ends == 0 {
        return 0;
    }
    // The bytes up to the run's last space; within them, only spaces, digits and colons.
    let run = u64::MAX >> ends.leading_zeros();
    let starts = ((ends << 1) | 1) & run;
    let eights = eight_digit_starts(digits);
    // Each entry's one colon two bytes before its space, a digit between them, a digit
    // (not the colon) at its start, no index of 8 digits, and no entry of under 3 bytes
    // at the block's start (the colon check cannot see before bit 0).
    let shaped = colons & run == ends >> 2
        && (ends >> 1) & !digits == 0
        && colons & starts == 0
        && eights & run == 0
        && ends & 3 == 0;
    if shaped {
        ends
    } else {
        0
    }
}

/// The `index:digit` entry from `window[start]` to the space at `window[space]`, whose shape
/// [`well_formed_entries`] checked: its index and value.
#[inline(always)]
fn shaped_entry(window: &[u8; WINDOW], start: usize, space: usize) -> Option<(u32, u8)> {
    // At most 7 digits: below 10^7, within u32.
    let index = ascii_digits_value(word_at(window, start)?, (space - start - 2) as u32) as u32;
    Some((index, shaped_digit(window, space)))
}

/// The one-digit value of the entry [`well_formed_entries`] found ended by the space at
/// `window[space]`: the byte before the space.
#[inline(always)]
fn shaped_digit(window: &[u8; WINDOW], space: usize) -> u8 {
    // Within the block: `space` is a bit of its 64-bit mask (the `& 63` tells the compiler,
    // which then checks no bound).
    window[(space - 1) & (BLOCK - 1)].wrapping_sub(b'0')
}

/// The two `index:digit` entries from `window[start]` to the space at `window[first]` and
/// from there to the space at `window[second]`, whose shape [`well_formed_entries`] checked:
/// [`shaped_entry`] of each, their indices converted together.
#[inline(always)]
fn shaped_pair(
    window: &[u8; WINDOW],
    start: usize,
    first: usize,
    second: usize,
) -> Option<((u32, u8), (u32, u8))> {
    // At most 7 digits each: below 10^7, within u32.
    let (one, two) = ascii_digits_value_pair(
        word_at(window, start)?,
        (first - start - 2) as u32,
        word_at(window, first + 1)?,
        (second - first - 3) as u32,
    );
    Some((
        (one, shaped_digit(window, first)),
        (two, shaped_digit(window, second)),
    ))
}

/// The `index:digit` entry from `window[start]` to the space at `window[space]` (both within
/// the block whose `digits` mask is given), when it is 1 to 7 digits, `:` and one digit:
/// found from the mask, whose bits must be set for every byte of it but the `:`. Its index
/// and value.
#[inline(always)]
fn masked_entry(
    window: &[u8; WINDOW],
    digits: u64,
    start: usize,
    space: usize,
) -> Option<(u32, u8)> {
    let len = space.wrapping_sub(start);
    if !(3..=9).contains(&len) {
        return None;
    }
    // Within the block: `space` is a bit of its 64-bit mask (the masks say so; the `& 63`
    // tells the compiler, which then checks no bound).
    let colon = (space - 2) & (BLOCK - 1);
    let entry_bits = (1u64 << len) - 1;
    if digits.wrapping_shr(start as u32) & entry_bits != entry_bits ^ (1 << (len - 2))
        || window[colon] != b':'
    {
        return None;
    }
    // At most 7 digits: below 10^7, within u32.
    let index = ascii_digits_value(word_at(window, start)?, (len - 2) as u32) as u32;
    Some((index, window[colon + 1].wrapping_sub(b'0')))
}

/// The `index:digit` entry of a sparse input of dim `dim` at `buf[pos..]`, as `sparse_sample`
/// takes it at once (1 to 7 index digits, a one-digit value), and the position past it.
#[inline(always)]
fn quick_entry(buf: &[u8], pos: usize, dim: usize) -> Option<(u32, u8, usize)> {
    // `buf` ends with a line feed, so a byte follows the `:` and the digit: each read is
    // within `buf` once the one before it matched.
    entry_in_word(word_at(buf, pos)?, pos, dim, |at| buf[at])
}

/// The `index:digit` entry at `pos` whose index digits begin `word` (the 8 bytes at `pos`),
/// as [`quick_entry`] takes it (1 to 7 index digits, `:`, a one-digit value), with `byte`
/// reading the text past them (the `:` first, then the digit only if it matched), and the
/// position past it.
#[inline(always)]
fn entry_in_word(
    word: u64,
    pos: usize,
    dim: usize,
    byte: impl Fn(usize) -> u8,
) -> Option<(u32, u8, usize)> {
    let (lanes, digits) = digit_lanes(word);
    if digits == 0 || digits == 8 {
        return None;
    }
    let colon = pos + digits as usize;
    if byte(colon) != b':' {
        return None;
    }
    let digit = byte(colon + 1).wrapping_sub(b'0');
    if digit > 9 {
        return None;
    }
    // At most 7 digits: below 10^7, within u32.
    let index = lanes_value(lanes, digits);
    (index < dim as u64).then_some((index as u32, digit, colon + 2))
}

/// The one-digit value of a sparse entry whose index ends at `colon`: `buf[colon]` is `:`
/// and a digit follows (what comes after the digit is for the caller to check). `buf` ends
/// with a line feed, so the digit's read is within `buf` once the `:` matched.
#[inline(always)]
fn colon_digit(buf: &[u8], colon: usize) -> Option<u8> {
    if buf[colon] != b':' {
        return None;
    }
    let digit = buf[colon + 1].wrapping_sub(b'0');
    (digit <= 9).then_some(digit)
}

/// The bytes from where a sample's search starts (a line's content, or the end of the
/// sample before) up to the next sample's values: whitespace, `|`, a configured input's alias
/// and the byte that ended it, at most 8 bytes in all; and what the parser found in them.
/// The same bytes in the same place give the same sample, so the parser takes it with one
/// comparison instead of looking at them one by one. A corpus repeats a few line shapes, so
/// they match on most lines: ` |x ` after the id on every line of a sequence, `|tag ` after
/// `|word`'s values.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SampleStart {
    /// The bytes, little-endian in a word.
    bits: u64,
    /// Which bytes of a word they are (0 while nothing was learnt, with `bits` 1: nothing
    /// matches).
    mask: u64,
    /// Offset of the `|` from the search's start.
    pipe: usize,
    /// Offset of the values: the alias's end, or the byte after it when that is whitespace.
    values: usize,
    /// The input the alias names.
    input: usize,
}

impl SampleStart {
    /// Matches nothing.
    const NONE: SampleStart = SampleStart {
        bits: 1,
        mask: 0,
        pipe: 0,
        values: 0,
        input: 0,
    };

    /// The sample whose search starts at `pos`, as `(pipe, input, values)`, if the bytes
    /// there are the ones learnt.
    #[inline(always)]
    pub(crate) fn matches(&self, buf: &[u8], pos: usize) -> Option<(usize, usize, usize)> {
        let word = word_at(buf, pos)?;
        (word & self.mask == self.bits).then_some((pos + self.pipe, self.input, pos + self.values))
    }

    /// What to learn from a search that started at `pos` and found the sample of `input`
    /// with its `|` at `pipe` and values from `values` (the byte there ended the alias):
    /// `None` unless only whitespace came before the `|` and it all fits in a word.
    pub(crate) fn learn(
        buf: &[u8],
        pos: usize,
        pipe: usize,
        input: usize,
        values: usize,
    ) -> Option<Self> {
        let len = values + 1 - pos;
        if len > 8 || skip_space(buf, pos) != pipe {
            return None;
        }
        let mask = if len == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * len)) - 1
        };
        // Whitespace that ended the alias (a space, tab or carriage return) is skipped too:
        // the sample's values are read from past the whitespace before them either way.
        let skip = usize::from(is_space(buf[values]));
        Some(SampleStart {
            bits: word_at(buf, pos)? & mask,
            mask,
            pipe: pipe - pos,
            values: values + skip - pos,
            input,
        })
    }
}

/// The bytes that begin every line of a sequence in id mode: its id and the byte after it
/// (a little-endian word, `mask` covering them), for [`LineParser::single_value_run`].
pub(crate) struct LineLead {
    /// The bytes.
    pub(crate) bits: u64,
    /// Which bytes of a word they are.
    pub(crate) mask: u64,
    /// The id's length: where the line's content starts.
    pub(crate) id_len: usize,
}

impl LineLead {
    /// Whether a line whose first 8 bytes are `word` begins with the lead.
    #[inline(always)]
    pub(crate) fn begins(&self, word: u64) -> bool {
        word & self.mask == self.bits
    }
}

/// Bytes of a line that [`sparse_pair_run`] reads: a line it takes ends within them.
const PAIR_LINE: usize = 64;

/// [`LineParser::several_values_run`] for a chain of two sparse inputs (`id |word 4567:1
/// |tag 12:1`, the seq shape): lines of exactly one entry of each, in the chain's order.
/// Both columns are found once for the run and each line's two entries are appended once
/// both are read, with no value stored in between, where the general loop keeps a line's
/// values in an array until the line is whole. A line of another shape ends the run, for
/// the caller to parse the usual way (even one the general loop takes, of the first sample
/// only, say), and so does a line longer than [`PAIR_LINE`] bytes or one of the last
/// [`PAIR_LINE`] + 8 bytes of `buf`.
///
/// Each line is read from a window of `PAIR_LINE + 8` bytes at its start, whose reads need
/// no bounds checks: a read past `PAIR_LINE` is made at `PAIR_LINE` instead (see
/// [`PairLine`]), and a line is taken only when it ends before `PAIR_LINE`, so only when
/// no read was moved. With the reads from `buf` and their checks, the seq shape's parse took
/// 204.7 M instructions against 183.5 M (callgrind, 20 MB).
///
/// Before each line, [`LineBlocks::entry_pairs`] takes what it can of the lines from there
/// a block at a time (the seq shape's lines, each with one space before the second sample
/// and a line feed after its digit); this loop takes the lines it leaves.
fn sparse_pair_run<T: Element>(
    buf: &[u8],
    mut pos: usize,
    lead: &LineLead,
    [(first, first_dim), (second, second_dim)]: [(SampleStart, usize); 2],
    out: &mut ParsedSequences<T>,
) -> RunEnd {
    let mut taken = 0;
    if let Some((first_column, second_column)) =
        two_columns(&mut out.columns, first.input, second.input)
    {
        let mut blocks = LineBlocks::default();
        loop {
            let (bulk_taken, next) = blocks.entry_pairs(
                buf,
                pos,
                lead,
                [(&first, first_dim), (&second, second_dim)],
                first_column,
                second_column,
            );
            taken += bulk_taken;
            pos = next;
            let Some(window) = buf.get(pos..).and_then(<[u8]>::first_chunk) else {
                break;
            };
            let line = PairLine(window);
            if !lead.begins(line.word(0)) {
                break;
            }
            let Some(values) = line.start_values(&first, lead.id_len) else {
                break;
            };
            let Some((first_index, first_digit, end)) = line.entry(values, first_dim) else {
                break;
            };
            // The `|` after up to 7 spaces (other whitespace ends the run: the general way
            // takes such lines), found in a word rather than byte by byte: the loop of
            // `skip_space` made the compiler keep a dozen positions in step with it.
            let others = line.word(end) ^ (ONES * u64::from(b' '));
            let pipe = end + (others.trailing_zeros() / 8) as usize;
            if line.byte(pipe) != b'|' {
                break;
            }
            let Some(values) = line.start_values(&second, pipe) else {
                break;
            };
            let Some((second_index, second_digit, end)) = line.entry(values, second_dim) else {
                break;
            };
            let Some(line_end) = line.line_end(end) else {
                break;
            };
            first_column.push_one_entry_sample(first_index, first_digit);
            second_column.push_one_entry_sample(second_index, second_digit);
            taken += 1;
            pos += line_end + 1;
        }
    }
    RunEnd {
        taken,
        next: pos,
        refused: false,
    }
}

/// The first `PAIR_LINE + 8` bytes from a line's start, read as [`sparse_pair_run`] reads
/// them: at an offset up to `PAIR_LINE` (a byte, or the word of 8 bytes there), or at
/// `PAIR_LINE` for an offset past it. Every read is then within the window, so none is
/// checked, and the reads of a line that ends before `PAIR_LINE` (the only lines taken)
/// are all where they were asked for.
struct PairLine<'a>(&'a [u8; PAIR_LINE + 8]);

impl PairLine<'_> {
    /// The byte at `at`.
    #[inline(always)]
    fn byte(&self, at: usize) -> u8 {
        self.0[at.min(PAIR_LINE)]
    }

    /// The little-endian word of the 8 bytes at `at`.
    #[inline(always)]
    fn word(&self, at: usize) -> u64 {
        let at = at.min(PAIR_LINE);
        self.0[at..at + 8].try_into().map_or(0, u64::from_le_bytes)
    }

    /// Where the values of the sample whose learnt start `start` is at `at` begin, if the
    /// bytes there are the learnt ones.
    #[inline(always)]
    fn start_values(&self, start: &SampleStart, at: usize) -> Option<usize> {
        (self.word(at) & start.mask == start.bits).then_some(at + start.values)
    }

    /// The `index:digit` entry at `at` of a sparse input of dim `dim`, as [`quick_entry`]
    /// reads it (1 to 7 index digits, a one-digit value), and the offset past it.
    #[inline(always)]
    fn entry(&self, at: usize, dim: usize) -> Option<(u32, u8, usize)> {
        entry_in_word(self.word(at), at, dim, |at| self.byte(at))
    }

    /// The offset of the line feed that ends the line's last value at `end`, when only
    /// whitespace comes between them (a carriage return, say), as [`value_line_end`] finds
    /// it, and when it is within the first `PAIR_LINE` bytes.
    #[inline(always)]
    fn line_end(&self, end: usize) -> Option<usize> {
        let mut line_end = end;
        while is_space(self.byte(line_end)) && line_end < PAIR_LINE {
            line_end += 1;
        }
        (self.byte(line_end) == b'\n' && line_end < PAIR_LINE).then_some(line_end)
    }
}

/// Columns `a` and `b` of `columns`, if they are two different ones.
fn two_columns<T>(
    columns: &mut [InputColumn<T>],
    a: usize,
    b: usize,
) -> Option<(&mut InputColumn<T>, &mut InputColumn<T>)> {
    let (low, high) = (a.min(b), a.max(b));
    if low == high || high >= columns.len() {
        return None;
    }
    let (below, from_high) = columns.split_at_mut(high);
    let (low_column, high_column) = (below.get_mut(low)?, from_high.first_mut()?);
    Some(if a < b {
        (low_column, high_column)
    } else {
        (high_column, low_column)
    })
}

/// Where a run of lines [`LineParser::single_value_run`] or
/// [`LineParser::several_values_run`] took ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RunEnd {
    /// Lines taken.
    pub(crate) taken: u64,
    /// Where the first line not taken starts.
    pub(crate) next: usize,
    /// Whether that line begins with the run's lead (it continues the sequence, but not in
    /// the run's shape), rather than with other bytes or past the text.
    pub(crate) refused: bool,
}

/// The loop of [`LineParser::single_value_run`]: from `pos`, while a line begins with
/// `lead` and then `start`, `take` the values there into `column` (returning the position
/// of the line feed that ends them, having appended them, or `None`, having appended
/// nothing). Before each line, `bulk` may take lines from there in bulk, as `take` would
/// take them one by one (returning how many it took and where the next line starts).
#[inline(always)]
fn run_lines<C>(
    buf: &[u8],
    mut pos: usize,
    lead: &LineLead,
    start: &SampleStart,
    column: &mut C,
    mut bulk: impl FnMut(&mut C, usize) -> (u64, usize),
    mut take: impl FnMut(&mut C, usize) -> Option<usize>,
) -> RunEnd {
    let mut taken = 0;
    loop {
        let (bulk_taken, next) = bulk(column, pos);
        taken += bulk_taken;
        pos = next;
        if pos >= buf.len() || !lead.begins(load_word(buf, pos)) {
            break;
        }
        let line_end = start
            .matches(buf, pos + lead.id_len)
            .and_then(|(_, _, values)| take(column, values));
        let Some(line_end) = line_end else {
            return RunEnd {
                taken,
                next: pos,
                refused: true,
            };
        };
        taken += 1;
        pos = line_end + 1;
    }
    RunEnd {
        taken,
        next: pos,
        refused: false,
    }
}

/// [`LineParser::single_value_run`] for a dense input of dim 1: blocks of lines where they
/// can be taken so ([`LineBlocks::scalars`]), each other line by itself. Out of line: inlined
/// beside the loop for a sparse input, it made that loop 9% slower (criterion, the ragged
/// shape).
#[inline(never)]
fn scalar_run<T: Element>(
    buf: &[u8],
    pos: usize,
    lead: &LineLead,
    start: &SampleStart,
    column: &mut InputColumn<T>,
) -> RunEnd {
    let mut blocks = LineBlocks::default();
    run_lines(
        buf,
        pos,
        lead,
        start,
        column,
        |column, pos| blocks.scalars(buf, pos, lead, start, column),
        |column, values| {
            // `dense_sample` reads the value with the same function.
            let (value, end) = scan_entry_value::<T>(buf, values).ok()?;
            let line_end = value_line_end(buf, end)?;
            column.push_scalar_sample(value);
            Some(line_end)
        },
    )
}

/// The line feed that ends a line's last value at `end`, when only whitespace comes
/// between them (a carriage return, say), as [`LineParser::single_values_line`] takes it.
#[inline(always)]
fn value_line_end(buf: &[u8], end: usize) -> Option<usize> {
    if buf[end] == b'\n' {
        return Some(end);
    }
    let line_end = skip_space(buf, end);
    (buf[line_end] == b'\n').then_some(line_end)
}

/// Byte classes, looked up in one table load instead of several comparisons.
const SPACE: u8 = 1;
/// `|` or line feed: the end of a name or a value list.
const END: u8 = 2;
const CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    table[b' ' as usize] = SPACE;
    table[b'\t' as usize] = SPACE;
    table[b'\r' as usize] = SPACE;
    table[b'|' as usize] = END;
    table[b'\n' as usize] = END;
    table
};

/// Space, TAB and CR separate values and samples.
#[inline(always)]
fn is_space(b: u8) -> bool {
    CLASS[b as usize] == SPACE
}

/// Whether `b` ends a name: whitespace, `|` or the line feed.
#[inline(always)]
fn ends_name(b: u8) -> bool {
    CLASS[b as usize] != 0
}

/// Position of the first byte at or after `pos` that is not whitespace (the line feed
/// sentinel guarantees one exists).
#[inline(always)]
pub(super) fn skip_space(buf: &[u8], mut pos: usize) -> usize {
    while is_space(buf[pos]) {
        pos += 1;
    }
    pos
}

/// The value of the sparse index `digits`, of more than 19 digits (which a loop reading
/// with wrapping arithmetic may have wrapped), or `u64::MAX`, out of range of any dim, when
/// it does not fit in 64 bits. Leading zeros count for nothing: `00000000000000000001` is 1.
#[cold]
#[inline(never)]
fn long_index(digits: &[u8]) -> u64 {
    digits
        .iter()
        .try_fold(0u64, |acc, &d| {
            acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
        .unwrap_or(u64::MAX)
}

/// How the message of an out-of-range sparse index shows it: its value, or for one read as
/// `u64::MAX` (which may not fit in 64 bits) the digits as written at the start of `text`,
/// with their count when there are more than [`QUOTED_BYTES`].
#[cold]
#[inline(never)]
fn index_in_message(index: u64, text: &[u8]) -> String {
    if index != u64::MAX {
        return index.to_string();
    }
    let digits = &text[..text.iter().take_while(|b| b.is_ascii_digit()).count()];
    if digits.len() <= QUOTED_BYTES {
        quote(digits, QUOTED_BYTES)
    } else {
        format!(
            "of {} digits ('{}...')",
            digits.len(),
            quote(digits, QUOTED_BYTES)
        )
    }
}

/// A zero value ended by a space.
const ZERO: &[u8; 2] = b"0 ";

/// The smallest dim whose samples are read by [`short_values`] first.
const FEWEST_DENSE_DIGIT_VALUES: usize = 8;

/// Four zero values, each ended by a space: what [`four_zeros_at`] looks for.
const FOUR_ZEROS: &[u8; 8] = b"0 0 0 0 ";

/// Whether `buf` holds [`FOUR_ZEROS`] at `pos` (one 8-byte comparison).
#[inline(always)]
fn four_zeros_at(buf: &[u8], pos: usize) -> bool {
    buf.get(pos..pos + FOUR_ZEROS.len()) == Some(FOUR_ZEROS.as_slice())
}

/// Position of the first byte at or after `pos` that ends a name.
#[inline(always)]
fn name_end(buf: &[u8], mut pos: usize) -> usize {
    while !ends_name(buf[pos]) {
        pos += 1;
    }
    pos
}

/// Bytes allowed in names and values outside comments: printable ASCII.
#[inline]
fn is_printable(b: u8) -> bool {
    (0x21..0x7f).contains(&b)
}

fn describe_byte(b: u8) -> String {
    match b {
        b' ' => "a space".to_string(),
        b'\t' => "a tab".to_string(),
        b'\r' => "a carriage return".to_string(),
        b if is_printable(b) => format!("'{}'", b as char),
        b => format!("byte 0x{b:02X}"),
    }
}

/// Sink for one line's diagnostics, with the line number they belong to.
struct Report<'a> {
    line: u64,
    line_start: usize,
    diags: &'a mut Vec<Diagnostic>,
    errors: u32,
}

impl Report<'_> {
    fn error(&mut self, pos: usize, message: String) {
        self.errors += 1;
        self.diags.push(Diagnostic::new(
            Severity::Error,
            self.line,
            (pos - self.line_start) as u64 + 1,
            message,
        ));
    }

    fn warning(&mut self, pos: usize, message: String) {
        self.diags.push(Diagnostic::new(
            Severity::Warning,
            self.line,
            (pos - self.line_start) as u64 + 1,
            message,
        ));
    }
}

impl LineParser {
    /// A parser for the given inputs (aliases must be distinct).
    pub fn new(inputs: &[InputConfig]) -> Self {
        LineParser {
            aliases: inputs
                .iter()
                .map(|i| i.alias.as_bytes().to_vec().into_boxed_slice())
                .collect(),
            packed: inputs
                .iter()
                .map(|i| PackedAlias::new(i.alias.as_bytes()))
                .collect(),
            guess: NameGuess::new(inputs.len()),
            names: inputs.iter().map(|i| i.name.clone()).collect(),
            formats: inputs.iter().map(|i| i.format).collect(),
            dims: inputs.iter().map(|i| i.dim).collect(),
            seen_on: vec![0; inputs.len()],
            stamp: 0,
            max_entries: MAX_COLUMN_ENTRIES,
            next_sample: vec![SampleStart::NONE; inputs.len() + 1].into_boxed_slice(),
            quick_samples: 0,
            quick_pause: 0,
        }
    }

    /// Lowers the column limit, so that tests can reach it.
    #[cfg(test)]
    pub(crate) fn set_max_entries(&mut self, max_entries: usize) {
        self.max_entries = max_entries;
    }

    /// Configured input names, in configuration order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Matches a configured alias followed by a name terminator at `pos`, comparing whole
    /// words instead of scanning the name first. Returns the input and the name's end.
    ///
    /// The input that followed `before` (the input named before on the line, or the line's
    /// start) last time is tried first ([`NameGuess`]).
    #[inline(always)]
    fn match_packed(&mut self, buf: &[u8], pos: usize, before: usize) -> Option<(usize, usize)> {
        let packed = self.packed.as_ref()?;
        let word = word_at(buf, pos)?;
        // A match covers `len` bytes that are not the line feed, so `end` is in `buf`.
        let matches =
            |a: &PackedAlias| a.starts(word) && buf.get(pos + a.len).is_some_and(|&b| ends_name(b));
        let guess = self.guess.after(before);
        let input = match packed.get(guess) {
            Some(a) if matches(a) => guess,
            _ => {
                let input = packed.iter().position(matches)?;
                self.guess.learn(before, input);
                input
            }
        };
        Some((input, pos + packed[input].len))
    }

    #[inline]
    fn lookup(&self, name: &[u8]) -> Option<usize> {
        // Aliases are short: an inline byte loop beats a call to memcmp.
        self.aliases
            .iter()
            .position(|a| a.len() == name.len() && a.iter().zip(name).all(|(x, y)| x == y))
    }

    fn input_label(&self, i: usize) -> String {
        let alias = std::str::from_utf8(&self.aliases[i]).unwrap_or("?");
        if alias == self.names[i] {
            format!("input '{}'", self.names[i])
        } else {
            format!("input '{}' ('{}')", self.names[i], alias)
        }
    }

    /// Parses one line of `buf`: the line starts at `line_start`, its content (after the id)
    /// at `content_start`, and it ends at the next line feed, which `buf` must contain.
    /// Appends samples to `out` and diagnostics (line `line_no`, 1-based) to `diags`.
    /// Returns what the line held and the position of its line feed.
    pub fn parse_line<T: Element>(
        &mut self,
        buf: &[u8],
        line_start: usize,
        content_start: usize,
        line_no: u64,
        out: &mut ParsedSequences<T>,
        diags: &mut Vec<Diagnostic>,
    ) -> (LineOutcome, usize) {
        let (outcome, line_end) = if out.has_room_for_text(buf.len() - line_start, self.max_entries)
        {
            self.parse_line_checking::<T, false>(
                buf,
                line_start,
                content_start,
                line_no,
                out,
                diags,
            )
        } else {
            self.parse_line_checking::<T, true>(buf, line_start, content_start, line_no, out, diags)
        };
        out.count_text(line_end + 1 - line_start);
        (outcome, line_end)
    }

    /// The column limit [`ParsedSequences::has_room_for_text`] is asked about.
    #[inline]
    pub(crate) fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Takes the line whose content starts at `content_start` in one step when it is a line
    /// of single values found where the parser learnt their samples start:
    /// [`single_value_line`](Self::single_value_line) or
    /// [`single_values_line`](Self::single_values_line). Returns the samples appended and the
    /// position of the line feed; `None`, appending nothing, when the line is to be parsed
    /// the general way.
    ///
    /// A line is tried only after a line of as many samples (at most [`QUICK_SAMPLES`])
    /// parsed the general way without error, or taken here, so that other lines (bags of
    /// words, dense rows) do not pay for the attempt.
    ///
    /// The caller must have checked the columns' room for the text, as for
    /// [`parse_line_checking`](Self::parse_line_checking) without `CHECK_ROOM`.
    #[inline(always)]
    pub(crate) fn quick_line<T: Element>(
        &mut self,
        buf: &[u8],
        content_start: usize,
        out: &mut ParsedSequences<T>,
    ) -> Option<(u32, usize)> {
        match self.quick_samples {
            0 => None,
            1 => self
                .single_value_line(buf, content_start, out)
                .map(|line_end| (1, line_end)),
            _ => self.single_values_line(buf, content_start, out),
        }
    }

    /// Whether the next line is worth trying as a line of a single value
    /// ([`single_value_line`](Self::single_value_line)), as [`quick_line`](Self::quick_line)
    /// would try it: so while lines are taken that way, since they leave it as it is.
    pub(crate) fn takes_single_values(&self) -> bool {
        self.quick_samples == 1
    }

    /// Whether the next line would be tried as a line of several single values
    /// ([`single_values_line`](Self::single_values_line)) and no pause is on: so while
    /// lines are taken that way, since they leave both as they are.
    pub(crate) fn takes_several_values(&self) -> bool {
        self.quick_samples > 1 && self.quick_pause == 0
    }

    /// [`single_value_run`](Self::single_value_run) for lines that
    /// [`single_values_line`](Self::single_values_line) would take (while
    /// [`takes_several_values`](Self::takes_several_values)): lines of two to
    /// [`QUICK_SAMPLES`] single values (`id |word 4567:1 |tag 12:1`, the seq shape). The
    /// samples' learnt starts, each after the one before, and their inputs' formats and
    /// dims are looked up once for the run. A line it does not take is left as it is, with
    /// nothing appended and nothing learnt, for the caller to parse the usual way (which
    /// tries `single_values_line` on it, as if no run had been).
    pub(crate) fn several_values_run<T: Element>(
        &self,
        buf: &[u8],
        mut pos: usize,
        lead: &LineLead,
        out: &mut ParsedSequences<T>,
    ) -> RunEnd {
        // The chain of learnt starts `single_values_line` follows: each sample's after the
        // input before it, while they name different inputs that it can take. A chain of
        // two sparse inputs is looked up link by link first: building the whole chain
        // below cost that shape a twentieth of its instructions (callgrind, seq).
        let first = self.next_sample[self.guess.line_start()];
        let second = self.next_sample[first.input];
        if let (Some(QuickKind::Sparse(first_dim)), Some(QuickKind::Sparse(second_dim))) = (
            self.chain_kind(&first, &[]),
            self.chain_kind(&second, &[first.input]),
        ) {
            let third = self.next_sample[second.input];
            if self
                .chain_kind(&third, &[first.input, second.input])
                .is_none()
            {
                return sparse_pair_run(
                    buf,
                    pos,
                    lead,
                    [(first, first_dim), (second, second_dim)],
                    out,
                );
            }
        }
        let mut chain = [(SampleStart::NONE, QuickKind::DenseScalar); QUICK_SAMPLES];
        let mut inputs = [0; QUICK_SAMPLES];
        let mut len = 0;
        let mut before = self.guess.line_start();
        while len < QUICK_SAMPLES {
            let start = self.next_sample[before];
            let Some(kind) = self.chain_kind(&start, &inputs[..len]) else {
                break;
            };
            chain[len] = (start, kind);
            inputs[len] = start.input;
            len += 1;
            before = start.input;
        }
        let chain = &chain[..len];
        let mut taken = 0;
        let mut found = [QuickValue::<T>::Entry(0, 0); QUICK_SAMPLES];
        'lines: while pos < buf.len() {
            if !lead.begins(load_word(buf, pos)) {
                break;
            }
            let mut at = pos + lead.id_len;
            let mut count = 0;
            loop {
                let Some(&(start, kind)) = chain.get(count) else {
                    break 'lines;
                };
                let Some((_, _, values)) = start.matches(buf, at) else {
                    break 'lines;
                };
                let value = match kind {
                    QuickKind::DenseScalar => scan_entry_value::<T>(buf, values)
                        .ok()
                        .map(|(value, end)| (QuickValue::Dense(value), end)),
                    QuickKind::Sparse(dim) => quick_entry(buf, values, dim)
                        .map(|(index, digit, end)| (QuickValue::Entry(index, digit), end)),
                };
                let Some((value, end)) = value else {
                    break 'lines;
                };
                found[count] = value;
                count += 1;
                at = skip_space(buf, end);
                match buf[at] {
                    b'\n' => break,
                    b'|' => {}
                    _ => break 'lines,
                }
            }
            for (&(start, _), &value) in chain.iter().zip(&found[..count]) {
                push_quick(out, start.input, value);
            }
            taken += 1;
            pos = at + 1;
        }
        RunEnd {
            taken,
            next: pos,
            refused: false,
        }
    }

    /// What [`several_values_run`](Self::several_values_run) reads at the learnt sample
    /// start `start` when it continues a chain of starts of the inputs `taken`: `None`,
    /// ending the chain, when nothing was learnt there, when its input is among `taken`, or
    /// when the input is neither dense of dim 1 nor sparse.
    #[inline(always)]
    fn chain_kind(&self, start: &SampleStart, taken: &[usize]) -> Option<QuickKind> {
        let input = start.input;
        if start.mask == 0 || taken.contains(&input) {
            return None;
        }
        match (self.formats.get(input), self.dims.get(input)) {
            (Some(StorageFormat::Dense), Some(1)) => Some(QuickKind::DenseScalar),
            (Some(StorageFormat::Sparse), Some(&dim)) => Some(QuickKind::Sparse(dim)),
            _ => None,
        }
    }

    /// Takes the lines from `pos` on that begin with `lead` (the open sequence's id and the
    /// byte after it) and that [`single_value_line`](Self::single_value_line) would take
    /// whole, appending their samples as it would: the lines of a sequence of scalars or of
    /// one-hot ids (seed 004's rows, the ragged shape). Whitespace may come between the
    /// value and the line feed (a carriage return), as in
    /// [`single_values_line`](Self::single_values_line). What `single_value_line` looks up
    /// per line (the learnt start of a line's sample, its input's format, dim and column)
    /// is looked up once for the run, and the loop is made for the input's format.
    ///
    /// Only while [`takes_single_values`](Self::takes_single_values), and the caller must
    /// have checked the columns' room, as for `single_value_line`.
    pub(crate) fn single_value_run<T: Element>(
        &self,
        buf: &[u8],
        pos: usize,
        lead: &LineLead,
        out: &mut ParsedSequences<T>,
    ) -> RunEnd {
        let start = self.next_sample[self.guess.line_start()];
        let input = start.input;
        let not_taken = RunEnd {
            taken: 0,
            next: pos,
            refused: true,
        };
        let (Some(column), Some(&format), Some(&dim)) = (
            out.columns.get_mut(input),
            self.formats.get(input),
            self.dims.get(input),
        ) else {
            return not_taken;
        };
        match format {
            StorageFormat::Dense if dim == 1 => scalar_run(buf, pos, lead, &start, column),
            StorageFormat::Dense => not_taken,
            StorageFormat::Sparse => run_lines(
                buf,
                pos,
                lead,
                &start,
                column,
                // Lines of one entry gained nothing from blocks (`line_blocks`).
                |_, pos| (0, pos),
                |column, values| {
                    let (index, digit, end) = quick_entry(buf, values, dim)?;
                    let line_end = value_line_end(buf, end)?;
                    column.push_one_entry_sample(index, digit);
                    Some(line_end)
                },
            ),
        }
    }

    /// Takes the line whose content starts at `content_start` when it is a single value: the
    /// sample start learnt for a line's first sample, then one value of a dense input of
    /// dim 1 or one `index:digit` entry of a sparse input, then the line feed. Appends the
    /// sample as [`parse_line_checking`](Self::parse_line_checking) would and returns the
    /// position of the line feed; `None`, appending nothing, for any other line (the caller
    /// then parses it the general way).
    ///
    /// Lines of one value (`id |x 12345`, `id |x 678:1`) are whole corpora: ragged sequences
    /// of scalars or of one-hot ids. They skip the general loop's per-line and per-sample
    /// steps (the line's diagnostics sink, the repeated-input check, the format dispatch,
    /// the search for another sample after the value): a third of the instructions of the
    /// whole parse of such corpora (seed 004's rows and ragged, `callgrind`).
    ///
    /// The caller must have checked the columns' room for the text, as for
    /// [`parse_line_checking`](Self::parse_line_checking) without `CHECK_ROOM`.
    #[inline(always)]
    fn single_value_line<T: Element>(
        &self,
        buf: &[u8],
        content_start: usize,
        out: &mut ParsedSequences<T>,
    ) -> Option<usize> {
        let (_, input, values) =
            self.next_sample[self.guess.line_start()].matches(buf, content_start)?;
        // The line feed right after the value ends both the sample and the line. The value
        // is appended here, not through `push_quick`: matching on the format once, not
        // again on a `QuickValue`, takes a tenth fewer instructions on such corpora.
        let column = &mut out.columns[input];
        match self.formats[input] {
            StorageFormat::Dense => {
                if self.dims[input] != 1 {
                    return None;
                }
                // `dense_sample` reads the value with the same function.
                let (value, end) = scan_entry_value::<T>(buf, values).ok()?;
                if buf[end] != b'\n' {
                    return None;
                }
                column.push_scalar_sample(value);
                Some(end)
            }
            StorageFormat::Sparse => {
                let (index, digit, end) = quick_entry(buf, values, self.dims[input])?;
                if buf[end] != b'\n' {
                    return None;
                }
                column.push_one_entry_sample(index, digit);
                Some(end)
            }
        }
    }

    /// [`single_value_line`](Self::single_value_line) for lines of two to [`QUICK_SAMPLES`]
    /// samples (`id |word 4567:1 |tag 12:1`): each a single value found where the parser
    /// learnt it after the sample before, then only whitespace up to the next `|` or the
    /// line feed, each of a different input. Appends the samples as
    /// [`parse_line_checking`](Self::parse_line_checking) would, and returns how many and
    /// the position of the line feed; `None`, appending nothing, for any other line.
    ///
    /// After a line that failed past its first sample start (samples of several values, as in
    /// lines of two bags of words), the next [`QUICK_PAUSE`] lines are not tried.
    #[inline(always)]
    fn single_values_line<T: Element>(
        &mut self,
        buf: &[u8],
        content_start: usize,
        out: &mut ParsedSequences<T>,
    ) -> Option<(u32, usize)> {
        if self.quick_pause > 0 {
            self.quick_pause -= 1;
            return None;
        }
        let mut found = [(0usize, QuickValue::<T>::Entry(0, 0)); QUICK_SAMPLES];
        let mut count = 0;
        let mut before = self.guess.line_start();
        let mut pos = content_start;
        loop {
            // The first sample's start not where it was learnt: not a line of the learnt
            // shape (a sequence's first line, say), and the next may be, so no pause.
            let (_, input, values) = match self.next_sample[before].matches(buf, pos) {
                Some(found) => found,
                None if count == 0 => return None,
                None => {
                    self.quick_pause = QUICK_PAUSE;
                    return None;
                }
            };
            let value = self
                .quick_value::<T>(buf, input, values)
                .filter(|_| count < QUICK_SAMPLES)
                .filter(|_| found[..count].iter().all(|&(seen, _)| seen != input));
            let Some((value, end)) = value else {
                self.quick_pause = QUICK_PAUSE;
                return None;
            };
            found[count] = (input, value);
            count += 1;
            pos = skip_space(buf, end);
            match buf[pos] {
                b'\n' => break,
                b'|' => before = input,
                _ => {
                    self.quick_pause = QUICK_PAUSE;
                    return None;
                }
            }
        }
        for &(input, value) in &found[..count] {
            push_quick(out, input, value);
        }
        Some((count as u32, pos))
    }

    /// The single value of the sample of `input` whose values start at `values`, and the
    /// position just past it, if the sample begins with one
    /// [`single_values_line`](Self::single_values_line) takes (whether it is the sample's
    /// only value is for the caller to check).
    #[inline(always)]
    fn quick_value<T: Element>(
        &self,
        buf: &[u8],
        input: usize,
        values: usize,
    ) -> Option<(QuickValue<T>, usize)> {
        match self.formats[input] {
            StorageFormat::Dense => {
                if self.dims[input] != 1 {
                    return None;
                }
                // `dense_sample` reads the value with the same function.
                let (value, end) = scan_entry_value::<T>(buf, values).ok()?;
                Some((QuickValue::Dense(value), end))
            }
            StorageFormat::Sparse => quick_entry(buf, values, self.dims[input])
                .map(|(index, digit, end)| (QuickValue::Entry(index, digit), end)),
        }
    }

    /// [`parse_line`](Self::parse_line), checking the column limit at every sample when
    /// `CHECK_ROOM`, and counting nothing. Without the checks (whose messages, in the loop,
    /// cost about a seventh of the parse), the caller must have found that `out` has room
    /// for text holding the line ([`ParsedSequences::has_room_for_text`] with
    /// [`max_entries`](Self::max_entries)) and count that text afterwards
    /// ([`ParsedSequences::count_text`]).
    #[inline(always)]
    pub(crate) fn parse_line_checking<T: Element, const CHECK_ROOM: bool>(
        &mut self,
        buf: &[u8],
        line_start: usize,
        content_start: usize,
        line_no: u64,
        out: &mut ParsedSequences<T>,
        diags: &mut Vec<Diagnostic>,
    ) -> (LineOutcome, usize) {
        self.stamp += 1;
        let mut report = Report {
            line: line_no,
            line_start,
            diags,
            errors: 0,
        };
        let mut outcome = LineOutcome::default();
        let mut pos = content_start;
        // The input named last on the line, for the guess at the next name.
        let mut before = self.guess.line_start();
        loop {
            let (pipe, input, values) = match self.next_sample[before].matches(buf, pos) {
                Some(found) => found,
                None => {
                    let from = pos;
                    pos = skip_space(buf, pos);
                    let b = buf[pos];
                    if b == b'\n' {
                        break;
                    }
                    if b != b'|' {
                        report.error(
                            pos,
                            format!(
                                "unexpected {} where a sample ('|name') should start",
                                describe_byte(b)
                            ),
                        );
                        pos = next_pipe(buf, pos + 1);
                        continue;
                    }
                    let pipe = pos;
                    pos += 1;
                    if buf[pos] == b'#' {
                        pos = comment_end(buf, pos + 1);
                        continue;
                    }
                    let name_start = pos;
                    let (input, values) = match self.match_packed(buf, pos, before) {
                        Some(found) => found,
                        None => {
                            pos = name_end(buf, pos);
                            match self.known_name(buf, name_start, pos, pipe, &mut report) {
                                Ok(input) => (input, pos),
                                Err(resume) => {
                                    pos = resume;
                                    continue;
                                }
                            }
                        }
                    };
                    self.learn_sample_start(buf, before, from, pipe, input, values);
                    (pipe, input, values)
                }
            };
            pos = values;
            before = input;
            outcome.samples += 1;
            if self.seen_on[input] == self.stamp {
                report.error(
                    pipe,
                    format!("{} appears twice on one line", self.input_label(input)),
                );
                pos = next_pipe(buf, pos);
                continue;
            }
            self.seen_on[input] = self.stamp;
            if CHECK_ROOM && out.columns[input].is_full(self.max_entries) {
                report.error(
                    pipe,
                    format!(
                        "{}: the sequence is too large: more than {} samples of one input",
                        self.input_label(input),
                        self.max_entries
                    ),
                );
                pos = next_pipe(buf, pos);
                continue;
            }
            pos = match self.formats[input] {
                StorageFormat::Dense => self.dense_sample(buf, pos, pipe, input, out, &mut report),
                StorageFormat::Sparse => {
                    self.sparse_sample::<T, CHECK_ROOM>(buf, pos, input, out, &mut report)
                }
            };
        }
        outcome.errors = report.errors;
        self.quick_samples = if outcome.samples as usize <= QUICK_SAMPLES && outcome.errors == 0 {
            outcome.samples
        } else {
            0
        };
        (outcome, pos)
    }

    /// Learns, for the sample after `before`, the bytes of a search that started at `from`
    /// and found the sample of `input` the long way ([`SampleStart`]).
    #[cold]
    fn learn_sample_start(
        &mut self,
        buf: &[u8],
        before: usize,
        from: usize,
        pipe: usize,
        input: usize,
        values: usize,
    ) {
        if let Some(learnt) = SampleStart::learn(buf, from, pipe, input, values) {
            self.next_sample[before] = learnt;
        }
    }

    /// Handles the name spanning `name_start..name_end` (after the `|` at `pipe`) the slow
    /// way: the configured input it names, or the position to resume at after reporting an
    /// empty name or skipping an unconfigured input.
    fn known_name(
        &self,
        buf: &[u8],
        name_start: usize,
        name_end: usize,
        pipe: usize,
        report: &mut Report<'_>,
    ) -> Result<usize, usize> {
        let name = &buf[name_start..name_end];
        if name.is_empty() {
            let what = match buf[name_end] {
                b'\n' => "the end of the line".to_string(),
                b => describe_byte(b),
            };
            report.error(
                pipe,
                format!("'|' must be followed by an input name, found {what}"),
            );
            return Err(next_pipe(buf, name_end));
        }
        match self.lookup(name) {
            Some(input) => Ok(input),
            None => Err(self.skip_unconfigured(buf, name_start, name_end, report)),
        }
    }

    /// Skips a sample of an input outside the configuration (its name spans
    /// `name_start..values`); its bytes must still be printable text. Returns the position of
    /// the next `|` or line feed.
    fn skip_unconfigured(
        &self,
        buf: &[u8],
        name_start: usize,
        values: usize,
        report: &mut Report<'_>,
    ) -> usize {
        if let Some(bad) = buf[name_start..values]
            .iter()
            .position(|&b| !is_printable(b))
        {
            let at = name_start + bad;
            report.error(
                at,
                format!("invalid {} in an input name", describe_byte(buf[at])),
            );
            return next_pipe(buf, values);
        }
        let mut pos = values;
        loop {
            let b = buf[pos];
            if b == b'|' || b == b'\n' {
                return pos;
            }
            if !is_printable(b) && !is_space(b) {
                report.error(pos, format!("invalid {} in the data", describe_byte(b)));
                return next_pipe(buf, pos);
            }
            pos += 1;
        }
    }

    /// Reads the values of a dense sample starting at `pos`; returns where parsing resumes.
    #[inline]
    fn dense_sample<T: Element>(
        &self,
        buf: &[u8],
        pos: usize,
        pipe: usize,
        input: usize,
        out: &mut ParsedSequences<T>,
        report: &mut Report<'_>,
    ) -> usize {
        let dim = self.dims[input];
        let column = &mut out.columns[input];
        // Zero-filled first: a short sample is then already padded.
        let sample_start = column.push_zero_sample();
        // Its short values from bit masks while they last (plain integers for a column of
        // bytes, short decimals for one of `T`); the loop below reads the rest. Not for a few
        // values: the masks of a window cost about what eight values do.
        let (mut pos, mut count) = match column.value_tier {
            _ if dim < FEWEST_DENSE_DIGIT_VALUES => (pos, 0),
            ValueTier::Bytes => short_values(
                buf,
                skip_space(buf, pos),
                &mut column.byte_values[sample_start..sample_start + dim],
                0,
                Integers(|v| u8::try_from(v).ok()),
            ),
            ValueTier::Stored => short_values(
                buf,
                skip_space(buf, pos),
                &mut column.values[sample_start..sample_start + dim],
                0,
                Decimals,
            ),
            ValueTier::Ones => (pos, 0),
        };
        loop {
            pos = skip_space(buf, pos);
            // Zeros are most values of many dense inputs (pixels, one-hot labels), in runs.
            // The sample is zero-filled already, so they are only counted: four at a time
            // while they come in fours, then one.
            if count < dim && buf.get(pos..pos + 2) == Some(ZERO.as_slice()) {
                while count + 4 <= dim && four_zeros_at(buf, pos) {
                    count += 4;
                    pos += FOUR_ZEROS.len();
                }
                if count < dim && buf.get(pos..pos + 2) == Some(ZERO.as_slice()) {
                    count += 1;
                    pos += ZERO.len();
                }
                continue;
            }
            let b = buf[pos];
            if b == b'|' || b == b'\n' {
                break;
            }
            match scan_entry_value::<T>(buf, pos) {
                Ok((v, end)) => {
                    if count == dim {
                        column.truncate_values(sample_start);
                        report.error(
                            pos,
                            format!(
                                "{} has more than {dim} value{} (its dim)",
                                self.input_label(input),
                                if dim == 1 { "" } else { "s" }
                            ),
                        );
                        return next_pipe(buf, pos);
                    }
                    column.set_dense_value(sample_start + count, v);
                    count += 1;
                    if !matches!(
                        buf[end],
                        b' ' | b'\t' | b'\r' | b'|' | b'\n' | b'+' | b'-' | b'0'..=b'9'
                    ) {
                        column.truncate_values(sample_start);
                        self.number_error::<T>(buf, pos, input, None, report);
                        return next_pipe(buf, pos);
                    }
                    pos = end;
                }
                Err(e) => {
                    column.truncate_values(sample_start);
                    self.number_error::<T>(buf, pos, input, Some(e), report);
                    return next_pipe(buf, pos);
                }
            }
        }
        if count < dim {
            report.warning(
                pipe,
                format!(
                    "{} has {count} of {dim} values; padded with zeros",
                    self.input_label(input)
                ),
            );
        }
        pos
    }

    fn number_error<T: Element>(
        &self,
        buf: &[u8],
        pos: usize,
        input: usize,
        reason: Option<NumberError>,
        report: &mut Report<'_>,
    ) {
        let reason = match reason {
            Some(NumberError::Overflow) => format!("the value overflows {}", T::NAME),
            Some(r) => r.describe().to_string(),
            None => "unexpected character after the number".to_string(),
        };
        report.error(
            pos,
            format!(
                "{}: malformed number '{}': {reason}",
                self.input_label(input),
                token_at(buf, pos)
            ),
        );
    }

    /// Reads the entries of a sparse sample starting at `pos`; returns where parsing resumes.
    #[inline]
    fn sparse_sample<T: Element, const CHECK_ROOM: bool>(
        &self,
        buf: &[u8],
        pos: usize,
        input: usize,
        out: &mut ParsedSequences<T>,
        report: &mut Report<'_>,
    ) -> usize {
        let dim = self.dims[input] as u64;
        let column = &mut out.columns[input];
        let sample_start = column.entry_count();
        let first = pos;
        // The leading entries the fast path below takes, appended with the column's checks
        // made once; then the rest, if any, entry by entry. `after` is the index of the entry
        // before, for the column's steps (0 before the first).
        let (mut pos, mut after) = if column.indices.is_widened() {
            (pos, 0)
        } else {
            match column.value_tier {
                ValueTier::Bytes => digit_entries::<T, true>(buf, pos, dim as usize, column),
                ValueTier::Ones => digit_entries::<T, false>(buf, pos, dim as usize, column),
                ValueTier::Stored => (pos, 0),
            }
        };
        loop {
            pos = skip_space(buf, pos);
            let b = buf[pos];
            if b == b'|' || b == b'\n' {
                break;
            }
            let entry = pos;
            let mut index: u64 = 0;
            if let Some((value, digits)) = leading_digits_value(buf, pos) {
                index = value;
                pos += digits;
                // The commonest value by far: one digit (`:1`) ended by whitespace, `|` or
                // the line end (a line feed follows a digit, so its read is within `buf`).
                // The same value and position as the general path below (which takes the
                // entries of longer indices).
                let digit = colon_digit(buf, pos).filter(|_| index < dim);
                if let Some(digit) = digit.filter(|_| ends_name(buf[pos + 2])) {
                    column.push_entry(index as u32, after, sample_start, EntryValue::Byte(digit));
                    after = index as u32;
                    pos += 2;
                    continue;
                }
            } else {
                for &d in &buf[pos..] {
                    let digit = d.wrapping_sub(b'0');
                    if digit > 9 {
                        break;
                    }
                    index = index.wrapping_mul(10).wrapping_add(u64::from(digit));
                    pos += 1;
                }
                if pos - entry > 19 {
                    // More than 19 digits may have wrapped: read again (leading zeros do
                    // not make an index large).
                    index = long_index(&buf[entry..pos]);
                }
            }
            let problem = if pos == entry {
                Some("expected 'index:value'".to_string())
            } else if buf[pos] != b':' {
                Some("the index must be followed by ':'".to_string())
            } else {
                match scan_entry_value_outlined::<T>(buf, pos + 1) {
                    Ok((value, end)) => {
                        pos = end;
                        if !ends_name(buf[pos]) {
                            Some("unexpected character after the value".to_string())
                        } else if index >= dim {
                            column.truncate_entries(sample_start);
                            report.error(
                                entry,
                                format!(
                                    "{}: sparse index {} is out of range (dim {dim})",
                                    self.input_label(input),
                                    index_in_message(index, &buf[entry..])
                                ),
                            );
                            return next_pipe(buf, entry);
                        } else {
                            column.push_entry(index as u32, after, sample_start, value);
                            after = index as u32;
                            None
                        }
                    }
                    Err(NumberError::Overflow) => Some(format!("the value overflows {}", T::NAME)),
                    Err(e) => Some(e.describe().to_string()),
                }
            };
            if let Some(why) = problem {
                column.truncate_entries(sample_start);
                report.error(
                    entry,
                    format!(
                        "{}: malformed sparse entry '{}': {why}",
                        self.input_label(input),
                        token_at(buf, entry)
                    ),
                );
                return next_pipe(buf, entry);
            }
        }
        if CHECK_ROOM && column.entry_count() > self.max_entries {
            column.truncate_entries(sample_start);
            report.error(
                skip_space(buf, first),
                format!(
                    "{}: the sequence is too large: more than {} stored values of one input",
                    self.input_label(input),
                    self.max_entries
                ),
            );
            return pos;
        }
        // Within `max_entries`, at most `u32::MAX`: the offset is exact.
        column.end_sparse_sample(sample_start);
        pos
    }
}

/// The token at `pos` up to whitespace, `|` or the line end, for messages: at most
/// [`QUOTED_BYTES`] bytes, control characters and invalid UTF-8 escaped ([`quote`]).
fn token_at(buf: &[u8], pos: usize) -> String {
    // 3 bytes past the limit, so that a character at the limit is read whole.
    let window = &buf[pos..buf.len().min(pos + QUOTED_BYTES + 3)];
    let len = window
        .iter()
        .position(|&b| is_space(b) || b == b'|' || b == b'\n')
        .unwrap_or(window.len());
    quote(&window[..len], QUOTED_BYTES)
}

/// Position of the next `|` or line feed at or after `from`.
#[inline]
fn next_pipe(buf: &[u8], from: usize) -> usize {
    memchr2(b'|', b'\n', &buf[from..]).map_or(buf.len() - 1, |n| from + n)
}

/// End of a comment whose body starts at `from`: the next `|` not followed by `#`, or the
/// line feed.
fn comment_end(buf: &[u8], mut from: usize) -> usize {
    loop {
        let at = next_pipe(buf, from);
        if buf[at] == b'|' && buf[at + 1] == b'#' {
            from = at + 2;
        } else {
            return at;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::columns::Sample;
    use crate::test_rng::Xorshift;

    /// Parses `line` (a line feed is appended) and returns the column data and diagnostics.
    fn parse(line: &str, inputs: &[InputConfig]) -> (ParsedSequences<f64>, Vec<Diagnostic>) {
        let mut parser = LineParser::new(inputs);
        let mut out = ParsedSequences::new(inputs);
        let mut diags = Vec::new();
        let buf = format!("{line}\n");
        let (_, end) = parser.parse_line(buf.as_bytes(), 0, 0, 7, &mut out, &mut diags);
        assert_eq!(end, line.len());
        (out, diags)
    }

    fn inputs() -> Vec<InputConfig> {
        vec![
            InputConfig::dense("dense", 3).with_alias("d"),
            InputConfig::sparse("sparse", 10).with_alias("s"),
        ]
    }

    fn errors(diags: &[Diagnostic]) -> Vec<(u64, String)> {
        diags
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| (d.col, d.message.clone()))
            .collect()
    }

    #[test]
    fn name_guesses_follow_each_predecessor() {
        let mut guess = NameGuess::new(3);
        let start = guess.line_start();
        assert_eq!(start, 3);
        // Before any line: configuration order.
        assert_eq!(
            (0..=3).map(|b| guess.after(b)).collect::<Vec<_>>(),
            [1, 2, 0, 0]
        );
        // A sequence's first line `|c |a`, then `|a` lines: each predecessor keeps its own.
        guess.learn(start, 2);
        guess.learn(2, 0);
        assert_eq!((guess.after(start), guess.after(2)), (2, 0));
        guess.learn(start, 0);
        assert_eq!(
            (guess.after(start), guess.after(2), guess.after(0)),
            (0, 0, 1)
        );
        // No inputs: a guess that matches nothing.
        let none = NameGuess::new(0);
        assert_eq!(none.after(none.line_start()), 0);
    }

    #[test]
    fn lines_of_changing_shapes_parse_alike_whatever_was_guessed() {
        let inputs = inputs();
        let lines = [
            "|s 1:1 |d 1 2 3",
            "|d 4 5 6",
            "|d 7 8 9",
            "|s 2:2",
            "|d 1 1 1 |s 3:3",
        ];
        let mut parser = LineParser::new(&inputs);
        let mut out = ParsedSequences::<f64>::new(&inputs);
        let mut diags = Vec::new();
        for (k, line) in lines.iter().enumerate() {
            let buf = format!("{line}\n");
            let (outcome, end) =
                parser.parse_line(buf.as_bytes(), 0, 0, k as u64 + 1, &mut out, &mut diags);
            assert_eq!(
                (outcome.samples as usize, end),
                (line.matches('|').count(), line.len())
            );
        }
        assert!(diags.is_empty(), "{diags:?}");
        let dense: Vec<f64> = out.columns[0].values().to_vec();
        assert_eq!(
            dense,
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 1.0, 1.0, 1.0]
        );
        assert_eq!(out.columns[1].indices(), [1, 2, 3]);
    }

    /// Pieces of lines: samples of both inputs, an unconfigured input, comments, whitespace,
    /// and bytes that are errors where they land.
    const PIECES: [&str; 16] = [
        "|s 1:1",
        "|s 2:3 4:1",
        "|d 1 2 3",
        "|d 4 5",
        "|x 7",
        "|# c ",
        "|#",
        " ",
        "\t",
        "|",
        "|s",
        "|d",
        "1:1 ",
        "9",
        "|s 1:1 |s 2:2",
        "|dd 1",
    ];

    proptest::proptest! {
        /// One parser reading line after line (learning how samples start) gives what a new
        /// parser for each line gives: the same samples, values and diagnostics.
        #[test]
        fn learnt_sample_starts_change_nothing(
            lines in proptest::collection::vec(
                proptest::collection::vec(0..PIECES.len(), 0..6),
                1..16,
            )
        ) {
            let lines = lines.iter().map(|pieces| pieces.iter().map(|&p| PIECES[p]).collect());
            agrees_with_new_parsers(&inputs(), lines, |parser, buf, start, line, out, diags| {
                parser.parse_line(buf, start, start, line, out, diags)
            })?;
        }
    }

    /// Parses `lines` (each then a line feed, in one buffer, so that the 8 bytes read at a
    /// sample's start may run into the next line) with one parser through `parse`, and each
    /// line with a new parser the general way: both must give the same outcomes and line
    /// ends, samples, values and diagnostics.
    fn agrees_with_new_parsers(
        inputs: &[InputConfig],
        lines: impl Iterator<Item = String>,
        parse: impl Fn(
            &mut LineParser,
            &[u8],
            usize,
            u64,
            &mut ParsedSequences<f64>,
            &mut Vec<Diagnostic>,
        ) -> (LineOutcome, usize),
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let mut text = String::new();
        let mut starts = Vec::new();
        for line in lines {
            starts.push(text.len());
            text.push_str(&line);
            text.push('\n');
        }
        let buf = text.as_bytes();
        let mut parser = LineParser::new(inputs);
        let (mut out, mut diags) = (ParsedSequences::<f64>::new(inputs), Vec::new());
        let (mut fresh_out, mut fresh_diags) = (ParsedSequences::<f64>::new(inputs), Vec::new());
        for (k, &start) in starts.iter().enumerate() {
            let line = k as u64 + 1;
            let parsed = parse(&mut parser, buf, start, line, &mut out, &mut diags);
            let fresh = LineParser::new(inputs).parse_line(
                buf,
                start,
                start,
                line,
                &mut fresh_out,
                &mut fresh_diags,
            );
            proptest::prop_assert_eq!(parsed, fresh, "line {}: {:?}", line, text);
        }
        proptest::prop_assert_eq!(format!("{diags:?}"), format!("{fresh_diags:?}"));
        proptest::prop_assert_eq!(format!("{out:?}"), format!("{fresh_out:?}"));
        Ok(())
    }

    /// Lines around the quick paths of lines of single values, for inputs `e` (dense, dim 1),
    /// `s` (sparse, dim 10) and `d` (dense, dim 3): those they take, and those they must
    /// leave to the general parse (another value or entry after the first, a comment, values
    /// not read at once, entries out of range or malformed, a repeated input, errors).
    const SINGLE_LINES: [&str; 42] = [
        "|e 5",
        " |e 5",
        "|e 0",
        "|e 255",
        "|e 256",
        "|e 99999",
        "|e 12345678",
        "|e -3",
        "|e 1.5",
        "|e 1e3",
        "|e 7 ",
        "|e  7",
        "|e\t7",
        "|e 7|# c",
        "|e",
        "|e x",
        "|e 1 2",
        "|e 5x",
        "|e 5-1",
        "|s 3:1",
        " |s 9:9",
        "|s 0:0",
        "|s 10:1",
        "|s 3:12",
        "|s 3:x",
        "|s 3:1 ",
        "|s 3:1 4:1",
        "|s 3",
        "|s 1234567:1",
        "|s 3:1 |e 4",
        "|s 3:1 |e 4 ",
        "|s 3:1\t|e 4",
        "|e 4 |s 3:1",
        "|e 4 |s 3:1 |d 1 2 3",
        "|s 3:1 |e 4 |s 5:1",
        "|e 1 |e 2",
        "|s 3:1 |x 4",
        "|s 3:1 |# c |e 4",
        "|d 1 2 3",
        "|x 1",
        "",
        "|# c",
    ];

    proptest::proptest! {
        /// A parser that tries each line as a line of single values first, as the stream
        /// parser does, gives what a new parser for each line gives the general way: the
        /// same samples, values, diagnostics and line ends.
        #[test]
        fn single_value_lines_parse_as_the_general_way(
            lines in proptest::collection::vec(0..SINGLE_LINES.len(), 1..40)
        ) {
            let inputs = vec![
                InputConfig::dense("dense", 1).with_alias("e"),
                InputConfig::sparse("sparse", 10).with_alias("s"),
                InputConfig::dense("three", 3).with_alias("d"),
            ];
            let lines = lines.iter().map(|&line| SINGLE_LINES[line].to_string());
            agrees_with_new_parsers(&inputs, lines, |parser, buf, start, line, out, diags| {
                match parser.quick_line(buf, start, out) {
                    Some((samples, end)) => {
                        // The stream parser counts its whole text at once.
                        out.count_text(end + 1 - start);
                        (LineOutcome { samples, errors: 0 }, end)
                    }
                    None => parser.parse_line(buf, start, start, line, out, diags),
                }
            })?;
        }
    }

    /// Parses `text` line by line for inputs `e` (dense, dim 1) and `s` (sparse, dim 10),
    /// each line with `quick` first and the general way when it declines. Returns the lines
    /// `quick` took (1-based, with their samples), the output and the diagnostics.
    fn parse_quickly(
        text: &str,
        quick: impl Fn(&mut LineParser, &[u8], usize, &mut ParsedSequences<f32>) -> Option<(u32, usize)>,
    ) -> (Vec<(u64, u32)>, ParsedSequences<f32>, Vec<Diagnostic>) {
        let inputs = vec![
            InputConfig::dense("dense", 1).with_alias("e"),
            InputConfig::sparse("sparse", 10).with_alias("s"),
        ];
        let buf = text.as_bytes();
        let mut parser = LineParser::new(&inputs);
        let mut out = ParsedSequences::<f32>::new(&inputs);
        let mut diags = Vec::new();
        let (mut taken, mut line, mut start) = (Vec::new(), 0, 0);
        while start < buf.len() {
            line += 1;
            let end = match quick(&mut parser, buf, start, &mut out) {
                Some((samples, end)) => {
                    taken.push((line, samples));
                    end
                }
                None => {
                    parser
                        .parse_line(buf, start, start, line, &mut out, &mut diags)
                        .1
                }
            };
            start = end + 1;
        }
        (taken, out, diags)
    }

    #[test]
    fn single_value_lines_are_taken_after_a_line_of_one_sample() {
        let text = "|e 5\n|e 300\n|e 2.5\n|s 3:2\n|s 4:1\n|s 4:1 |e 1\n|s 7:1\n|s 8:1\n|s 9:1\n";
        // As `quick_line` tries it: after a line of one sample.
        let (taken, out, diags) = parse_quickly(text, |parser, buf, start, out| {
            (parser.quick_samples == 1)
                .then(|| parser.single_value_line(buf, start, out))
                .flatten()
                .map(|end| (1, end))
        });
        // Line 1 has no line before it; `|s` is not the start learnt on line 3 (4); line 6
        // holds a second sample after its entry, and line 7 follows a line of two samples;
        // the sample start is compared as 8 bytes, and line 9 leaves fewer in the buffer.
        assert_eq!(taken, [(2, 1), (3, 1), (5, 1), (8, 1)]);
        assert!(diags.is_empty());
        let dense: Vec<f32> = out.columns[0].values().iter().collect();
        assert_eq!(dense, [5.0, 300.0, 2.5, 1.0]);
        assert_eq!(out.columns[1].indices(), [3, 4, 4, 7, 8, 9]);
    }

    #[test]
    fn lines_of_several_single_values_are_taken_after_one_parsed_the_general_way() {
        let mut text = String::from("|s 1:1 |e 1\n|s 2:1 |e 2\n|s 3:1 4:1 |e 3\n");
        for _ in 0..QUICK_PAUSE {
            text.push_str("|s 4:1 |e 5\n");
        }
        text.push_str("|s 5:1 |e 6\n|s 6:1 |e 7\n|e 8 |s 7:1\n|e 9 |s 8:1\n|s 9:1 |e 1\n");
        let (taken, out, diags) = parse_quickly(&text, |parser, buf, start, out| {
            parser.single_values_line(buf, start, out)
        });
        // Line 1 is the first line of two samples; line 3's first sample has two entries, so
        // the next QUICK_PAUSE lines are not tried. The two after them are taken; the next
        // begins with another input than the learnt start (no pause) and the one after it is
        // taken with the starts it learnt; the last begins with the start learnt before.
        let paused = 3 + QUICK_PAUSE as u64;
        assert_eq!(
            taken,
            [(2, 2), (paused + 1, 2), (paused + 2, 2), (paused + 4, 2)]
        );
        assert!(diags.is_empty(), "{diags:?}");
        let mut expected = vec![1, 2, 3, 4];
        expected.extend([4; QUICK_PAUSE as usize]);
        expected.extend([5, 6, 7, 8, 9]);
        assert_eq!(out.columns[1].indices(), expected);
        let mut expected = vec![1.0, 2.0, 3.0];
        expected.extend([5.0; QUICK_PAUSE as usize]);
        expected.extend([6.0, 7.0, 8.0, 9.0, 1.0]);
        assert_eq!(out.columns[0].values().to_vec(), expected);
    }

    #[test]
    fn a_learnt_sample_start_is_taken_only_where_its_bytes_are() {
        let inputs = inputs();
        let mut parser = LineParser::new(&inputs);
        let mut out = ParsedSequences::<f64>::new(&inputs);
        let mut diags = Vec::new();
        // ` |s ` is learnt on the first line; the others begin with the same bytes but name
        // another input, or go on differently, or begin alike but with a tab, or name the
        // input twice. (Each line is followed by another: a sample's start is compared as 8
        // bytes, so the last bytes of the text are read the long way.)
        let text =
            " |s 1:1 |d 1 2 3\n |sd 1\n |s 2:1 |d 4 5 6\n |s\t3:1\n |s 4:1 |s 5:1\n |s 6:1\n";
        let mut start = 0;
        let mut outcomes = Vec::new();
        for (k, line) in text.lines().enumerate() {
            let (outcome, end) = parser.parse_line(
                text.as_bytes(),
                start,
                start,
                k as u64 + 1,
                &mut out,
                &mut diags,
            );
            outcomes.push(outcome);
            assert_eq!(end, start + line.len());
            start = end + 1;
        }
        assert_eq!(out.columns[1].indices(), [1, 2, 3, 4, 6]);
        assert_eq!(
            out.columns[0].values().to_vec(),
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        let errors: Vec<(u64, u64)> = diags.iter().map(|d| (d.line, d.col)).collect();
        assert_eq!(errors, [(5, 9)], "{diags:?}");
        assert_eq!(
            outcomes[4],
            LineOutcome {
                samples: 2,
                errors: 1
            }
        );
        // `sd` is not configured: skipped, not taken for `s`.
        assert_eq!(
            outcomes[1],
            LineOutcome {
                samples: 0,
                errors: 0
            }
        );
    }

    #[test]
    fn samples_in_any_order_with_tabs_and_cr() {
        let (out, diags) = parse("|s 3:1.5\t1:-2 |d 1 2 3\r", &inputs());
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(out.columns[0].values().to_vec(), [1.0, 2.0, 3.0]);
        assert_eq!(out.columns[1].values().to_vec(), [1.5, -2.0]);
        assert_eq!(out.columns[1].indices(), [3, 1]);
        assert_eq!(out.columns[1].sample_offsets, [0, 2]);
    }

    #[test]
    fn adjacent_signed_values_are_separate() {
        let (out, diags) = parse("|d 1-2+3", &inputs());
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(out.columns[0].values().to_vec(), [1.0, -2.0, 3.0]);
    }

    #[test]
    fn comments_run_to_the_next_unescaped_pipe() {
        let (out, diags) = parse("|# a |# b é \x01 |d 1 2 3 |#|#x|s 1:1", &inputs());
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(out.columns[0].values().to_vec(), [1.0, 2.0, 3.0]);
        assert_eq!(out.columns[1].indices(), [1]);
    }

    #[test]
    fn short_dense_samples_are_padded_with_a_warning() {
        let (out, diags) = parse("|d 5 |s", &inputs());
        assert_eq!(out.columns[0].values().to_vec(), [5.0, 0.0, 0.0]);
        assert_eq!(out.columns[1].sample_offsets, [0, 0]);
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].severity, Severity::Warning);
        assert!(diags[0].message.contains("1 of 3 values"));
    }

    #[test]
    fn runs_of_zeros_count_as_values_up_to_the_dim() {
        let dims = |dim| vec![InputConfig::dense("z", dim), InputConfig::dense("w", 2)];
        // Runs of four, two and one, ended by the line, a `|`, a TAB and a non-zero value.
        let (out, diags) = parse("|z 0 0 0 0 0 0 0 0 0 7 0 0 0 0|w 0 0", &dims(14));
        assert!(diags.is_empty(), "{diags:?}");
        let mut expected = vec![0.0; 14];
        expected[9] = 7.0;
        assert_eq!(out.columns[0].values().to_vec(), expected);
        assert_eq!(out.columns[1].values().to_vec(), [0.0, 0.0]);
        let (out, diags) = parse("|z 0 0\t0 0 0 0 0  0 5", &dims(9));
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(
            out.columns[0].values().to_vec(),
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0]
        );
        // One zero past the dim, inside a run of four: the error is at that zero.
        for dim in 1..=5 {
            let line = "|z 0 0 0 0 0 0 ";
            let (out, diags) = parse(line, &dims(dim));
            let errs = errors(&diags);
            assert_eq!(errs.len(), 1, "dim {dim}: {errs:?}");
            assert_eq!(errs[0].0, 4 + 2 * dim as u64, "dim {dim}: {errs:?}");
            assert!(
                errs[0].1.contains(&format!("more than {dim} value")),
                "{errs:?}"
            );
            assert_eq!(out.columns[0].sample_count(), 0, "dim {dim}");
        }
        // A wide column keeps its zeros (the sample is filled before its values are read).
        let (out, diags) = parse("|z 0.5 0 0 0 0 0 0", &dims(7));
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(
            out.columns[0].values().to_vec(),
            [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        );
    }

    #[test]
    fn a_column_past_its_limit_is_an_error_on_the_sample() {
        let mut parser = LineParser::new(&inputs());
        parser.set_max_entries(4);
        let mut out = ParsedSequences::<f64>::new(&inputs());
        let mut line = |text: &str, out: &mut ParsedSequences<f64>| {
            let buf = format!("{text}\n");
            let mut diags = Vec::new();
            parser.parse_line(buf.as_bytes(), 0, 0, 3, out, &mut diags);
            errors(&diags)
        };
        // Sparse: 3 stored values fit, 2 more do not; that sample is dropped whole.
        assert!(line("|s 1:1 2:2 3:3", &mut out).is_empty());
        let errs = line("|s 4:4 5:5 |d 1 2 3", &mut out);
        assert_eq!(out.columns[1].values().to_vec(), [1.0, 2.0, 3.0]);
        assert_eq!(out.columns[1].sample_offsets, [0, 3]);
        assert_eq!(
            out.columns[0].values().to_vec(),
            [1.0, 2.0, 3.0],
            "the other input is parsed"
        );
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].0, 4, "at the sample's first value");
        assert!(errs[0].1.contains("too large: more than 4 stored values"));
        // Samples: a fifth dense sample is refused, at its `|`.
        for _ in 0..3 {
            assert!(line("|d 1 2 3", &mut out).is_empty());
        }
        let errs = line(" |d 4 5 6", &mut out);
        assert_eq!(out.columns[0].sample_count(), 4);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].0, 2);
        assert!(errs[0].1.contains("too large: more than 4 samples"));
    }

    #[test]
    fn unconfigured_inputs_are_skipped() {
        let (out, diags) = parse("|zzz 1 2 x:y |d 1 2 3 |very_long_name_here 9", &inputs());
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(out.columns[0].values().to_vec(), [1.0, 2.0, 3.0]);
    }

    #[test]
    fn errors_are_positioned_and_parsing_resumes() {
        let (_, diags) = parse("x |d 1 2 3 4 | s |s 10:1 |d 1", &inputs());
        let errs = errors(&diags);
        assert_eq!(errs.len(), 5, "{errs:?}");
        assert_eq!(errs[0].0, 1);
        assert!(errs[0].1.contains("unexpected 'x'"));
        assert_eq!(errs[1].0, 12);
        assert!(errs[1].1.contains("more than 3 values"));
        assert_eq!(errs[2].0, 14);
        assert!(errs[2].1.contains("found a space"));
        assert_eq!(errs[3].0, 21);
        assert!(errs[3]
            .1
            .contains("sparse index 10 is out of range (dim 10)"));
        assert_eq!(errs[4].0, 26);
        assert!(errs[4].1.contains("appears twice on one line"));
    }

    #[test]
    fn one_digit_sparse_values_end_at_any_separator() {
        let (out, diags) = parse(
            "|s 1:1 2:0\t3:9\r4:1|s2 5:12 6:1.5 7:1e1 8:3|s3 9:1",
            &[
                InputConfig::sparse("s", 10),
                InputConfig::sparse("s2", 10),
                InputConfig::sparse("s3", 10),
            ],
        );
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(out.columns[0].indices(), [1, 2, 3, 4]);
        assert_eq!(out.columns[0].values().to_vec(), [1.0, 0.0, 9.0, 1.0]);
        assert_eq!(out.columns[1].indices(), [5, 6, 7, 8]);
        assert_eq!(out.columns[1].values().to_vec(), [12.0, 1.5, 10.0, 3.0]);
        assert_eq!(out.columns[2].indices(), [9]);
        assert_eq!(out.columns[2].values().to_vec(), [1.0]);
    }

    /// The `(index, value)` entries of each sample of sparse column `input`.
    fn sparse_entries(out: &ParsedSequences<f64>, input: usize) -> Vec<Vec<(u32, f64)>> {
        let column = &out.columns[input];
        (0..column.sample_count())
            .map(|i| match column.sample(i) {
                Sample::Sparse { indices, values } => {
                    indices.to_vec().into_iter().zip(values.to_vec()).collect()
                }
                Sample::Dense(_) => panic!("the input is sparse"),
            })
            .collect()
    }

    #[test]
    fn long_runs_of_entries_read_as_written() {
        // Lines of up to 90 entries each of `s` (dim 9,999,999) and `t` (dim 300,000),
        // parsed in one buffer (so that the block loop over entries sees 64-byte windows
        // across entries, samples and lines), 25 lines per output. Group by group: values
        // all ones, then one-digit values (the columns' narrow tiers, where the loop runs),
        // then either with an index at the dim now and then (an error that drops the
        // sample), then with more disruptions: the error, a step past u16::MAX, a decrease,
        // a longer value. Throughout: indices climbing to 6 and 7 digits by steps within
        // u16::MAX, repeated indices, double spaces and tabs, and samples ended by the line
        // feed, a space or the next input. The expected entries are the generator's.
        let dims = [9_999_999u64, 300_000];
        let inputs = [
            InputConfig::sparse("s", dims[0] as usize),
            InputConfig::sparse("t", dims[1] as usize),
        ];
        let mut rng = Xorshift::new(0x2545_f491_4f6c_dd1d);
        let mut below = move |n: u64| rng.below(n);
        for group in 0..48 {
            let one_digit_values = group % 2 == 1;
            // In 1,000: how often an entry brings a disruption, and which kinds it may be
            // (an error leaves the column's tiers as they were, the others widen them).
            let (disruptions, kinds) =
                [(0, 1), (0, 1), (30, 1), (30, 1), (60, 5), (60, 5)][group % 6];
            let mut text = String::new();
            let mut want = [Vec::new(), Vec::new()];
            let mut dropped = 0;
            for _ in 0..25 {
                for (input, &dim) in dims.iter().enumerate() {
                    text += ["|s ", " |t "][input];
                    let mut index = below(50);
                    let mut entries = Vec::new();
                    let mut out_of_range = false;
                    for k in 0..below(91) {
                        if k > 0 {
                            text += match below(150) {
                                0 => "  ",
                                1 => "\t",
                                _ => " ",
                            };
                            index = match below(20) {
                                0..=3 => index + 60_000 + below(5_536),
                                4 => index,
                                _ => index + 1 + below(3_000),
                            };
                        }
                        let (mut token, mut value) = if one_digit_values {
                            let d = below(10);
                            (d.to_string(), d as f64)
                        } else {
                            ("1".to_string(), 1.0)
                        };
                        if index >= dim {
                            // The sample ends rather than step down, which would widen.
                            break;
                        }
                        if below(1_000) < disruptions {
                            match below(kinds) {
                                // Within a step of the index before, for the fast path.
                                0 => {
                                    if dim - index <= 65_535 {
                                        index = dim;
                                        out_of_range = true;
                                    }
                                }
                                1 => index = (index + 65_536).min(dim - 1),
                                2 => index = index.saturating_sub(1 + below(10)),
                                3 => (token, value) = ("12".to_string(), 12.0),
                                _ => (token, value) = ("2.5".to_string(), 2.5),
                            }
                        }
                        text += &format!("{index}:{token}");
                        entries.push((index as u32, value));
                    }
                    if out_of_range {
                        dropped += 1;
                    } else {
                        want[input].push(entries);
                    }
                }
                text += ["\n", " \n"][below(2) as usize];
            }
            let buf = text.as_bytes();
            let mut parser = LineParser::new(&inputs);
            let mut out = ParsedSequences::<f64>::new(&inputs);
            let mut diags = Vec::new();
            let (mut start, mut line_no) = (0, 1);
            while start < buf.len() {
                let (_, end) = parser.parse_line(buf, start, start, line_no, &mut out, &mut diags);
                start = end + 1;
                line_no += 1;
            }
            assert_eq!(errors(&diags).len(), dropped, "group {group}: {diags:?}");
            assert!(
                diags.iter().all(|d| d.message.contains("out of range")),
                "group {group}: {diags:?}"
            );
            assert_eq!(sparse_entries(&out, 0), want[0], "group {group}");
            assert_eq!(sparse_entries(&out, 1), want[1], "group {group}");
        }
    }

    /// The spaces ending the well-formed entries of `block` read one by one from its start:
    /// all spaces before the first byte that is not a space, digit or colon when every
    /// entry they end is 1 to 7 digits, `:` and one digit, else none.
    fn entries_read_one_by_one(block: &[u8; BLOCK]) -> u64 {
        let run = block
            .iter()
            .position(|b| !(b.is_ascii_digit() || *b == b' ' || *b == b':'))
            .unwrap_or(BLOCK);
        let (mut ends, mut start) = (0u64, 0);
        for space in (0..run).filter(|&k| block[k] == b' ') {
            let entry = &block[start..space];
            let Some(colon) = entry.iter().position(|&b| b == b':') else {
                return 0;
            };
            let (index, value) = (&entry[..colon], &entry[colon + 1..]);
            let digits = |part: &[u8]| part.iter().all(u8::is_ascii_digit);
            if !((1..=7).contains(&index.len())
                && value.len() == 1
                && digits(index)
                && digits(value))
            {
                return 0;
            }
            ends |= 1 << space;
            start = space + 1;
        }
        ends
    }

    #[test]
    fn the_masks_find_the_entries_read_one_by_one() {
        // Blocks of entries with indices of 0 to 9 digits, a value of 0 to 2, no colon or
        // two, empty entries, two spaces, and the bytes that end a run, in a deterministic
        // sequence of shapes; about a third of the blocks are well formed throughout.
        let mut rng = Xorshift::new(0x2545_f491_4f6c_dd1d);
        let mut next = |n: u64| rng.below(n) as usize;
        let (mut shaped, mut blocks) = (0, 0);
        for _ in 0..20_000 {
            let mut text = Vec::new();
            let clean = next(3) == 0;
            while text.len() < BLOCK {
                let index = if clean { 1 + next(7) } else { next(10) };
                text.extend((0..index).map(|_| b'0' + next(10) as u8));
                if clean || next(12) != 0 {
                    text.push(b':');
                }
                if !clean && next(15) == 0 {
                    text.push(b':');
                }
                let value = if clean || next(10) != 0 { 1 } else { next(3) };
                text.extend((0..value).map(|_| b'0' + next(10) as u8));
                let end = if clean { 0 } else { next(40) };
                text.extend_from_slice(match end {
                    0 => b" ",
                    1 => b"  ",
                    2 => b"|",
                    3 => b"\n",
                    4 => b"\t",
                    5 => b".5 ",
                    _ => b" ",
                });
            }
            let block: &[u8; BLOCK] = text.first_chunk().unwrap();
            let want = entries_read_one_by_one(block);
            let got = well_formed_entries(
                matches(block, [b' ']),
                digits(block),
                matches(block, [b':']),
            );
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(block));
            shaped += usize::from(got != 0);
            blocks += 1;
        }
        assert!(
            shaped * 4 > blocks && shaped * 4 < blocks * 3,
            "{shaped} of {blocks}"
        );
    }

    #[test]
    fn leading_one_digit_entries_are_taken_while_the_column_holds_them() {
        // One parser and one output for all the lines, so that the column's state carries
        // over: values all ones, then bytes (from a 0 within line 2, after entries taken as
        // ones), then indices widened (line 4's step of u16::MAX + 1, after steps of exactly
        // u16::MAX on lines 1 and 3); then a decrease, indices of 7 digits, and an index at
        // the dim (an error: the sample is dropped).
        let inputs = [InputConfig::sparse("s", 9_999_999)];
        let lines: [(&str, &[(u32, f64)]); 6] = [
            (
                "|s 3:1 65538:1 65539:1",
                &[(3, 1.0), (65538, 1.0), (65539, 1.0)],
            ),
            (
                "|s 1:1 2:1 3:0 4:7",
                &[(1, 1.0), (2, 1.0), (3, 0.0), (4, 7.0)],
            ),
            (
                "|s 9:2 65544:3 65545:1",
                &[(9, 2.0), (65544, 3.0), (65545, 1.0)],
            ),
            ("|s 5:4 65541:1 7:2", &[(5, 4.0), (65541, 1.0), (7, 2.0)]),
            (
                "|s 9999998:3 0:1 12:9",
                &[(9_999_998, 3.0), (0, 1.0), (12, 9.0)],
            ),
            ("|s 6:1 9999999:1", &[]),
        ];
        let mut parser = LineParser::new(&inputs);
        let mut out = ParsedSequences::<f64>::new(&inputs);
        let mut diags = Vec::new();
        let mut want = Vec::new();
        for (n, (line, entries)) in lines.iter().enumerate() {
            let buf = format!("{line}\n");
            parser.parse_line(buf.as_bytes(), 0, 0, n as u64 + 1, &mut out, &mut diags);
            if !entries.is_empty() {
                want.push(entries.to_vec());
            }
        }
        assert_eq!(errors(&diags).len(), 1, "{diags:?}");
        assert!(diags[0].message.contains("out of range"), "{diags:?}");
        assert_eq!(diags[0].line, 6);
        assert!(out.columns[0].indices.is_widened());
        assert_eq!(sparse_entries(&out, 0), want);
    }

    /// How [`digit_entries_with`] takes groups of entries.
    #[cfg(target_arch = "x86_64")]
    type GroupWith<'a> = dyn Fn(&[u8; BLOCK], u64, usize, u32) -> Option<EntryGroup> + 'a;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn entries_taken_in_groups_are_those_taken_two_at_a_time() {
        // Samples of up to 80 entries, mostly well formed and one-digit, with now and then
        // an entry the runs do not take (a step past u16::MAX, a decrease, an index at the
        // dim, a value of two digits or other than 1 in a column of ones, two spaces, an
        // index of 8 digits), ended by a line feed, a space, a tab or the next input; each
        // read into a column of ones and one of bytes, by the entry loop with the CPU's
        // vector step (groups of up to eight) and without it: the same entries, and the same
        // place to go on from.
        let Some(avx512) = entry_vectors::avx512() else {
            eprintln!("this CPU has no AVX-512 VBMI2: the vector step is not tested here");
            return;
        };
        let dim = 2_000_000;
        let inputs = [InputConfig::sparse("s", dim)];
        let mut rng = Xorshift::new(0x2545_f491_4f6c_dd1d);
        let mut below = move |n: u64| rng.below(n);
        let (mut grouped, mut entries) = (0, 0);
        for _ in 0..4_000 {
            let mut text = String::from(" ");
            let mut index = below(100);
            for k in 0..1 + below(80) {
                if k > 0 {
                    text += if below(500) == 0 { "  " } else { " " };
                    index = match below(1_000) {
                        0 => index + 65_536 + below(3),
                        1 => index.saturating_sub(1 + below(9)),
                        2 => dim as u64,
                        3 => 10_000_000 + below(1_000),
                        _ => {
                            let most = [3, 30, 300][below(3) as usize];
                            index + below(most)
                        }
                    };
                }
                let value = match below(500) {
                    0 => "12",
                    1..=15 => ["0", "2", "7"][below(3) as usize],
                    _ => "1",
                };
                text += &format!("{index}:{value}");
            }
            text += ["\n", " \n", "\t|t 1:1\n", " |t 1:1\n"][below(4) as usize];
            let mut buf = text.clone().into_bytes();
            buf.extend([b'\n'; WINDOW]);
            for primer in ["|s 0:1\n", "|s 0:2\n"] {
                let mut out = ParsedSequences::<f32>::new(&inputs);
                let mut diags = Vec::new();
                LineParser::new(&inputs).parse_line(
                    primer.as_bytes(),
                    0,
                    0,
                    1,
                    &mut out,
                    &mut diags,
                );
                let column = &out.columns[0];
                let taken_by = |group: &GroupWith| {
                    let mut column = column.clone();
                    let next = match column.value_tier {
                        ValueTier::Bytes => {
                            digit_entries_with::<f32, true>(&buf, 0, dim, &mut column, group)
                        }
                        _ => digit_entries_with::<f32, false>(&buf, 0, dim, &mut column, group),
                    };
                    (next, column.entry_count(), format!("{column:?}"))
                };
                let ones = column.value_tier == ValueTier::Ones;
                let taken = std::cell::Cell::new(0);
                let by_groups = taken_by(&|block, ends, start, last| {
                    let group =
                        entry_vectors::entry_group(avx512, block, ends, start, last, dim, ones);
                    taken.set(taken.get() + group.map_or(0, |group| group.count));
                    group
                });
                assert_eq!(by_groups, taken_by(&no_group), "{text:?} after {primer:?}");
                grouped += taken.get();
                entries += by_groups.1 - column.entry_count();
            }
        }
        // Most of the entries the loop takes taken in groups.
        assert!(
            grouped * 4 > entries * 3,
            "{grouped} of {entries} entries taken in groups"
        );
    }

    #[test]
    fn leading_zeros_do_not_make_a_sparse_index_out_of_range() {
        // Any number of leading zeros, where every path reads an index: the quick entries
        // (up to 7 digits), the general loop (8 to 19) and the long index (20 or more), each
        // alone, among other entries, and as the sample's last entry.
        for zeros in [1, 6, 7, 12, 18, 19, 20, 40, 1000] {
            let z = "0".repeat(zeros);
            for (line, want) in [
                (format!("|s {z}1:1.5 3:2"), vec![1, 3]),
                (format!("|s {z}1:1"), vec![1]),
                (format!("|s 2:1 {z}9:1 |d 1 2 3"), vec![2, 9]),
                (
                    format!("|s 1:1 2:1 3:1 4:1 {z}5:1 6:1"),
                    vec![1, 2, 3, 4, 5, 6],
                ),
                (format!("|s {z}:2"), vec![0]),
            ] {
                let (out, diags) = parse(&line, &inputs());
                assert!(
                    diags.iter().all(|d| d.severity != Severity::Error),
                    "{line}: {diags:?}"
                );
                assert_eq!(out.columns[1].indices(), want, "{line}");
            }
        }
        // A real overflow, and one that wraps to a small index, are out of range, shown as
        // written (with their count beyond 40 digits).
        for (line, shown) in [
            (
                "|s 99999999999999999999:1".to_string(),
                "99999999999999999999",
            ),
            (
                "|s 0018446744073709551617:1".to_string(),
                "0018446744073709551617",
            ),
            (
                "|s 18446744073709551615:1".to_string(),
                "18446744073709551615",
            ),
            (
                format!("|s 1{}:1", "0".repeat(59)),
                "of 60 digits ('1000000000",
            ),
        ] {
            let (_, diags) = parse(&line, &inputs());
            let errs = errors(&diags);
            assert_eq!(errs.len(), 1, "{line}: {errs:?}");
            assert!(
                errs[0].1.contains(&format!("sparse index {shown}")),
                "{line}: {errs:?}"
            );
            assert!(errs[0].1.contains("out of range (dim 10)"), "{errs:?}");
            assert_eq!(errs[0].0, 4);
        }
        // Just within 64 bits, with leading zeros: the value, not out of range for its size.
        let dim = InputConfig::sparse("big", u32::MAX as usize);
        let (_, diags) = parse("|big 000000000000000000004294967294:1", &[dim]);
        assert!(diags.is_empty(), "{diags:?}");
    }

    #[test]
    fn malformed_values() {
        for (line, what) in [
            ("|d 1,5", "malformed number '1,5'"),
            ("|d .5", "malformed number '.5'"),
            ("|d nan", "malformed number 'nan'"),
            ("|d 2.0f", "malformed number '2.0f'"),
            ("|d 1e", "the exponent has no digits"),
            ("|d 1e999", "overflows"),
            ("|s 2 :3", "must be followed by ':'"),
            ("|s 2: 3", "malformed sparse entry '2:'"),
            ("|s -2:2", "expected 'index:value'"),
            ("|s 2:3x", "unexpected character after the value"),
            // 2^64 + 1: read with wrapping arithmetic it would be index 1 (dim 10).
            ("|s 18446744073709551617:1", "out of range"),
            ("|d 1 \u{e9}", "malformed number"),
            ("|zz \u{e9}", "invalid byte 0xC3 in the data"),
            ("|d\u{0} 1", "invalid byte 0x00 in an input name"),
            // Control bytes and invalid UTF-8 in a quoted token are escaped.
            ("|d 1\u{0}\u{1b}[31m2", "malformed number '1\\0\\x1B[31m2'"),
            ("|d 1\u{7f}\u{85}", "malformed number '1\\x7F\\u{85}'"),
            (
                "|s 2:\u{1b}]0;x\u{7}",
                "malformed sparse entry '2:\\x1B]0;x\\x07'",
            ),
        ] {
            let (_, diags) = parse(line, &inputs());
            let errs = errors(&diags);
            assert_eq!(errs.len(), 1, "{line:?}: {errs:?}");
            assert!(errs[0].1.contains(what), "{line:?}: {}", errs[0].1);
        }
    }

    #[test]
    fn a_quoted_token_shows_invalid_bytes_and_never_half_a_character() {
        let message = |line: &[u8]| {
            let mut parser = LineParser::new(&inputs());
            let mut out = ParsedSequences::<f64>::new(&inputs());
            let mut diags = Vec::new();
            let buf = [line, b"\n"].concat();
            parser.parse_line(&buf, 0, 0, 7, &mut out, &mut diags);
            let errs = errors(&diags);
            assert_eq!(errs.len(), 1, "{line:?}: {errs:?}");
            errs[0].1.clone()
        };
        assert!(message(b"|d 1\xff\xfe2").contains("malformed number '1\\xFF\\xFE2'"));
        // The token is cut at 40 bytes: a `\u{e9}` on bytes 40 and 41 is left out whole.
        let ones = "1".repeat(39);
        let cut = message(format!("|d {ones}\u{e9}").as_bytes());
        assert!(
            cut.contains(&format!("malformed number '{ones}':")),
            "{cut}"
        );
        let kept = message(format!("|d {}\u{e9}", &ones[1..]).as_bytes());
        assert!(kept.contains(&format!("'{}\u{e9}':", &ones[1..])), "{kept}");
    }

    #[test]
    fn samples_are_readable_through_the_column_api() {
        let (out, _) = parse("|s 4:2 |d 1 2 3", &inputs());
        assert_eq!(
            out.columns[0].sample(0),
            Sample::Dense((&[1.0, 2.0, 3.0][..]).into())
        );
        assert_eq!(
            out.columns[1].sample(0),
            Sample::Sparse {
                indices: (&[4][..]).into(),
                values: (&[2.0][..]).into()
            }
        );
    }

    /// A line window over `text`, padded with line feeds to the window's size.
    fn window(text: &str) -> [u8; PAIR_LINE + 8] {
        let mut bytes = [b'\n'; PAIR_LINE + 8];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        bytes
    }

    #[test]
    fn the_pair_loops_window_reads_an_entry_as_the_quick_path_does() {
        for (text, dim, want) in [
            ("123:4 ", 1000, Some((123, 4, 5))),
            ("0:1\n", 1, Some((0, 1, 3))),
            ("1234567:9|", 10_000_000, Some((1_234_567, 9, 9))),
            ("123:4 ", 123, None),          // the index is not below the dim
            (":4 ", usize::MAX, None),      // no index
            ("12345678:1 ", 1 << 30, None), // 8 digits: the general way reads them
            ("123;4 ", 1000, None),
            ("123:x ", 1000, None),
            ("123 ", 1000, None),
        ] {
            let line = window(text);
            assert_eq!(PairLine(&line).entry(0, dim), want, "{text:?}");
            // The quick path reads 8 bytes from the entry's start.
            let buf = format!("{text}{}", "\n".repeat(16));
            assert_eq!(
                quick_entry(buf.as_bytes(), 0, dim),
                want,
                "{text:?} (quick path)"
            );
        }
    }

    #[test]
    fn the_pair_loops_window_finds_a_line_end_only_within_its_bytes() {
        let line = window("5:1 \r\n");
        assert_eq!(PairLine(&line).line_end(3), Some(5));
        let line = window("5:1x\n");
        assert_eq!(PairLine(&line).line_end(3), None);
        // Spaces up to the window's bound, then the line feed past it (at offset 64): its
        // reads would have been moved, so the line is not taken.
        let mut line = window(&" ".repeat(PAIR_LINE));
        line[PAIR_LINE] = b'\n';
        assert_eq!(PairLine(&line).line_end(3), None);
        // Reads past the bound are made at it.
        let mut line = window("");
        line[PAIR_LINE] = b'|';
        assert_eq!(PairLine(&line).byte(PAIR_LINE + 5), b'|');
        assert_eq!(PairLine(&line).word(1000) & 0xff, u64::from(b'|'));
    }
}
