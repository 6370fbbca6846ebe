//! Runs of lines of single values after the open sequence's id, read 64 bytes at a time
//! for [`LineParser`]'s runs of lines (`single_value_run`, `several_values_run`): lines of
//! one integer of a dense input of dim 1 (`17 |x 98251`: seed 004's rows, sequences of
//! scalars), and lines of one `index:digit` entry of each of two sparse inputs (`17 |word
//! 4567:1 |tag 12:1`: the seq shape). (Lines of one such entry, the ragged shape, gained
//! nothing from blocks: `ctf bench` 0.98 to 1.00 of the line-by-line loop's time.)
//!
//! A block's line feeds, digits and (for entries) colons are found as bit masks, a bit per
//! byte. Each line then ends at the next line feed bit, and its numbers' lengths and digits
//! are checked on the same masks: lines are not walked byte by byte, and a line costs its
//! word compares (the id, each sample's learnt start), a few mask tests and the conversion
//! of its digits. A line of any other form (a value with a sign or a point, spaces before
//! the line feed, another sequence's line, a line longer than a block) is left to the
//! caller, which reads it line by line, as it reads the bytes too near the text's end for a
//! block.
//!
//! [`LineParser`]: crate::parser::line::LineParser

use crate::parser::block::{digits, matches, BLOCK};
use crate::parser::columns::InputColumn;
use crate::parser::line::{LineLead, SampleStart};
use crate::parser::number::{ascii_digits_value, ascii_digits_value_pair, Element};
use crate::parser::word::word_at;

/// Bytes read from a block's start: the block, and the 8 bytes of a word read at its last
/// byte.
const WINDOW: usize = BLOCK + 8;

/// Lines left to the caller, one by one, after a call that took none: where every line has
/// a form the blocks refuse (each with a trailing space, say), a block's masks per line
/// would be work for nothing.
const PAUSE: u32 = 16;

/// A block's masks: bit `k` for byte `k`.
struct Masks {
    /// Line feeds.
    ends: u64,
    /// ASCII digits.
    digits: u64,
    /// Colons (0 for a form that has none).
    colons: u64,
}

/// What a run's lines hold, and where their values go.
trait LineForm {
    /// Whether the form's lines hold colons (their mask is found only then).
    const COLONS: bool;

    /// Takes the line from offset `line` of `window` to its line feed at `end` (below
    /// [`BLOCK`]) if it has the form, appending its values (or gathering them for
    /// [`end_block`](Self::end_block)); `false`, having appended nothing, if not.
    fn take_line(&mut self, window: &[u8; WINDOW], line: usize, end: usize, masks: &Masks) -> bool;

    /// Appends what the lines of a block gathered.
    fn end_block(&mut self) {}
}

/// Takes runs of lines in blocks, pausing after a call that took none (see [`PAUSE`]).
#[derive(Default)]
pub(crate) struct LineBlocks {
    /// Calls left to answer with no line taken.
    pause: u32,
}

impl LineBlocks {
    /// Takes the lines from `pos` on that begin with `lead` and then `start` and hold one
    /// integer of 1 to 7 digits, then the line feed (a carriage return may come before it),
    /// appending each as a sample of `column` (dense, dim 1), as long as each ends within a
    /// block that has [`WINDOW`] bytes of `buf`. Returns how many it took and where the first
    /// line not taken starts.
    ///
    /// The lines taken are exactly ones that
    /// [`single_value_run`](crate::parser::line::LineParser::single_value_run) takes line by
    /// line, appended as it appends them; the caller must have checked the column's room, as
    /// for it.
    #[inline(always)]
    pub(crate) fn scalars<T: Element>(
        &mut self,
        buf: &[u8],
        pos: usize,
        lead: &LineLead,
        start: &SampleStart,
        column: &mut InputColumn<T>,
    ) -> (u64, usize) {
        let mut form = Scalars {
            lead,
            start,
            column,
            values: [0; BLOCK],
            count: 0,
        };
        self.take(buf, pos, &mut form)
    }

    /// Takes the lines from `pos` on that begin with `lead` and then hold one `index:digit`
    /// entry of each of the inputs of `first` and `second`, in that order (the first's learnt
    /// start after the id, one space, the second's learnt start, each index of 1 to 7 digits
    /// below the input's dim), then the line feed (a carriage return may come before it),
    /// appending each entry as a sample of its column, as long as each line ends within a
    /// block that has [`WINDOW`] bytes of `buf`. Returns how many it took and where the
    /// first line not taken starts.
    ///
    /// The lines taken are exactly ones that `several_values_run` takes line by line, for
    /// such a pair of inputs, appended as it appends them; the caller must have checked the
    /// columns' room, as for it.
    #[inline(always)]
    pub(crate) fn entry_pairs<T: Element>(
        &mut self,
        buf: &[u8],
        pos: usize,
        lead: &LineLead,
        [(first, first_dim), (second, second_dim)]: [(&SampleStart, usize); 2],
        first_column: &mut InputColumn<T>,
        second_column: &mut InputColumn<T>,
    ) -> (u64, usize) {
        let mut form = EntryPairs {
            lead,
            first,
            second,
            first_dim,
            second_dim,
            first_column,
            second_column,
        };
        self.take(buf, pos, &mut form)
    }

    /// The pause around [`take_lines`].
    #[inline(always)]
    fn take(&mut self, buf: &[u8], pos: usize, form: &mut impl LineForm) -> (u64, usize) {
        if self.pause > 0 {
            self.pause -= 1;
            return (0, pos);
        }
        let (taken, next) = take_lines(buf, pos, form);
        if taken == 0 {
            self.pause = PAUSE;
        }
        (taken, next)
    }
}

/// The lines of `form` from `pos`, block by block: how many and where the first line not
/// taken starts.
#[inline(always)]
fn take_lines<F: LineForm>(buf: &[u8], mut pos: usize, form: &mut F) -> (u64, usize) {
    let mut taken = 0;
    while let Some(window) = buf.get(pos..).and_then(<[u8]>::first_chunk::<WINDOW>) {
        let Some(block) = window.first_chunk::<BLOCK>() else {
            break;
        };
        let mut masks = Masks {
            ends: matches(block, [b'\n']),
            digits: digits(block),
            colons: 0,
        };
        if F::COLONS {
            masks.colons = matches(block, [b':']);
        }
        // The offset of the block's next line: each line starts after the one before.
        let mut line = 0;
        let mut ends = masks.ends;
        while ends != 0 {
            let end = ends.trailing_zeros() as usize;
            if !form.take_line(window, line, end, &masks) {
                break;
            }
            taken += 1;
            line = end + 1;
            ends &= ends - 1;
        }
        form.end_block();
        pos += line;
        if ends != 0 || line == 0 {
            // A line refused, or none ends in the block.
            break;
        }
    }
    (taken, pos)
}

/// Where the values of the sample start, if the line at offset `line` of `window` begins
/// with `lead` and then the learnt bytes of `start`.
#[inline(always)]
fn sample_values(
    window: &[u8; WINDOW],
    line: usize,
    lead: &LineLead,
    start: &SampleStart,
) -> Option<usize> {
    if !lead.begins(word_at(window, line)?) {
        return None;
    }
    let (_, _, values) = start.matches(window, line + lead.id_len)?;
    Some(values)
}

/// Whether bits `from..to` of `mask` are all set (`from` below `to`, `to` at most 64, at
/// most 7 apart).
#[inline(always)]
fn all_set(mask: u64, from: usize, to: usize) -> bool {
    let run = ((1u64 << (to - from)) - 1) << from;
    mask & run == run
}

/// The digits of a number at offset `at` that ends at `end`, if `at` is below `end` and
/// they are 1 to 7 digits: their count.
#[inline(always)]
fn digit_count(masks: &Masks, at: usize, end: usize) -> Option<usize> {
    let count = end.checked_sub(at).filter(|n| (1..=7).contains(n))?;
    all_set(masks.digits, at, end).then_some(count)
}

/// Where a line's last value ends: before its line feed at `end`, or before a carriage
/// return there.
#[inline(always)]
fn value_end(window: &[u8; WINDOW], end: usize) -> usize {
    end - usize::from(end > 0 && window[end - 1] == b'\r')
}

/// Lines of one integer of a dense input of dim 1, gathered a block at a time: the
/// column's tier is then looked at once per block, not once per line, and the values do
/// not wait on one another's pushes.
struct Scalars<'a, T> {
    lead: &'a LineLead,
    start: &'a SampleStart,
    column: &'a mut InputColumn<T>,
    /// The block's values so far (at most one line per byte).
    values: [u32; BLOCK],
    /// How many.
    count: usize,
}

impl<T: Element> LineForm for Scalars<'_, T> {
    const COLONS: bool = false;

    #[inline(always)]
    fn take_line(&mut self, window: &[u8; WINDOW], line: usize, end: usize, masks: &Masks) -> bool {
        let Some(values) = sample_values(window, line, self.lead, self.start) else {
            return false;
        };
        let Some(count) = digit_count(masks, values, value_end(window, end)) else {
            return false;
        };
        let Some(word) = word_at(window, values) else {
            return false;
        };
        // Seven digits at most: below 10^7.
        let Ok(value) = u32::try_from(ascii_digits_value(word, count as u32)) else {
            return false;
        };
        let Some(slot) = self.values.get_mut(self.count) else {
            return false;
        };
        *slot = value;
        self.count += 1;
        true
    }

    #[inline(always)]
    fn end_block(&mut self) {
        self.column.push_integer_scalars(&self.values[..self.count]);
        self.count = 0;
    }
}

/// Lines of one `index:digit` entry of each of two sparse inputs.
struct EntryPairs<'a, T> {
    lead: &'a LineLead,
    first: &'a SampleStart,
    second: &'a SampleStart,
    first_dim: usize,
    second_dim: usize,
    first_column: &'a mut InputColumn<T>,
    second_column: &'a mut InputColumn<T>,
}

impl<T: Element> LineForm for EntryPairs<'_, T> {
    const COLONS: bool = true;

    #[inline(always)]
    fn take_line(&mut self, window: &[u8; WINDOW], line: usize, end: usize, masks: &Masks) -> bool {
        let Some((first_index, first_digit, second_index, second_digit)) =
            self.entries(window, line, end, masks)
        else {
            return false;
        };
        self.first_column
            .push_one_entry_sample(first_index, first_digit);
        self.second_column
            .push_one_entry_sample(second_index, second_digit);
        true
    }
}

impl<T> EntryPairs<'_, T> {
    /// The two entries of the line from `line` to `end`, if it has the form.
    #[inline(always)]
    fn entries(
        &self,
        window: &[u8; WINDOW],
        line: usize,
        end: usize,
        masks: &Masks,
    ) -> Option<(u32, u8, u32, u8)> {
        let first_values = sample_values(window, line, self.lead, self.first)?;
        let first_colon = entry_colon(masks, first_values, end)?;
        // The second sample's `|` after one space, as the first's values end.
        let pipe = first_colon + 3;
        if window.get(pipe - 1) != Some(&b' ') {
            return None;
        }
        let (_, _, second_values) = self.second.matches(window, pipe)?;
        let second_colon = entry_colon(masks, second_values, end)?;
        if second_colon + 2 != value_end(window, end) {
            return None;
        }
        let (first_index, second_index) = ascii_digits_value_pair(
            word_at(window, first_values)?,
            (first_colon - first_values) as u32,
            word_at(window, second_values)?,
            (second_colon - second_values) as u32,
        );
        let in_dims =
            (first_index as usize) < self.first_dim && (second_index as usize) < self.second_dim;
        in_dims.then(|| {
            (
                first_index,
                window[first_colon + 1] - b'0',
                second_index,
                window[second_colon + 1] - b'0',
            )
        })
    }
}

/// The offset of the colon of an `index:digit` entry whose index starts at `values` in a
/// line ending at `end`, if 1 to 7 digits lead to the colon and a digit follows it, all
/// before `end`.
#[inline(always)]
fn entry_colon(masks: &Masks, values: usize, end: usize) -> Option<usize> {
    if values >= end {
        return None;
    }
    let colon = values + (masks.colons >> values).trailing_zeros() as usize;
    // The digit after the colon is before the line feed.
    if colon + 1 >= end || masks.digits >> (colon + 1) & 1 == 0 {
        return None;
    }
    digit_count(masks, values, colon)?;
    Some(colon)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::InputConfig;
    use crate::parser::columns::ParsedSequences;
    use crate::parser::values::ValueTier;
    use crate::parser::word::load_word;
    use crate::test_rng::Xorshift;
    use std::fmt::Debug;

    /// The learnt start of `text` (its bytes up to the alias's end, then a space), as the
    /// parser learns it.
    fn learnt(text: &str) -> SampleStart {
        let bytes = format!("{text} 12345678");
        let pipe = text.find('|').expect("a sample start");
        SampleStart::learn(bytes.as_bytes(), 0, pipe, 0, text.len()).expect("a learnt start")
    }

    /// For texts of up to 40 lines of the sequence `id` drawn by `line` (each given `id`
    /// and a flag kept for the text: small values), checks that `run` takes exactly the
    /// lines before the first one `wanted` refuses, with the values `wanted` reads, unless
    /// it stops where no block of [`WINDOW`] bytes is left. `run` gets the text and the
    /// lead, and returns what it took, where it stopped and what the columns hold.
    fn check_form<W: PartialEq + Debug>(
        seed: u64,
        line: impl Fn(&mut Xorshift, &str, bool) -> String,
        wanted: impl Fn(&str, &str) -> Option<W>,
        run: impl Fn(&[u8], &LineLead) -> (u64, usize, Vec<W>),
    ) {
        let mut rng = Xorshift::new(seed);
        for round in 0..3000 {
            let id = rng.below(10_000).to_string();
            let small = rng.below(2) == 0;
            let count = rng.below(40);
            let lines: Vec<String> = (0..count).map(|_| line(&mut rng, &id, small)).collect();
            let text = lines.concat();
            let buf = text.as_bytes();
            let mask = u64::MAX >> (8 * (7 - id.len()));
            let lead = LineLead {
                bits: load_word(format!("{id} ").as_bytes(), 0) & mask,
                mask,
                id_len: id.len(),
            };
            let (taken, next, held) = run(buf, &lead);
            let want: Vec<W> = lines.iter().map_while(|l| wanted(l, &id)).collect();
            let taken = taken as usize;
            assert!(taken <= want.len(), "round {round}: {taken} of {text:?}");
            assert_eq!(
                next,
                lines[..taken].concat().len(),
                "round {round}: {text:?}"
            );
            assert_eq!(held[..], want[..taken], "round {round}: {text:?}");
            if taken < want.len() {
                assert!(
                    buf.len() - next < WINDOW,
                    "round {round}: stopped at {next}: {text:?}"
                );
            }
        }
    }

    /// Another sequence's id with as many digits as `id`, which the lead must tell apart.
    fn next_id(id: &str) -> String {
        let last = if id.ends_with('9') { '8' } else { '9' };
        format!("{}{last}", &id[..id.len() - 1])
    }

    /// The digits of `text` before an optional carriage return and the line feed, if 1 to
    /// 7 digits.
    fn short_digits(text: &str) -> Option<&str> {
        let digits = text.strip_suffix('\n')?;
        let digits = digits.strip_suffix('\r').unwrap_or(digits);
        let short = (1..=7).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit());
        short.then_some(digits)
    }

    /// `index:digit` at the start of `text` with an index of 1 to 7 digits below `dim`, and
    /// the rest of `text`.
    fn entry(text: &str, dim: u32) -> Option<((u32, f32), &str)> {
        let (index, rest) = text.split_once(':')?;
        let short = (1..=7).contains(&index.len()) && index.bytes().all(|b| b.is_ascii_digit());
        let index: u32 = index.parse().ok().filter(|&i| short && i < dim)?;
        let digit = rest.bytes().next().filter(u8::is_ascii_digit)?;
        Some(((index, f32::from(digit - b'0')), &rest[1..]))
    }

    /// A value the entry lines draw: mostly an entry, else a form the blocks leave.
    fn entry_text(rng: &mut Xorshift, dim: u64) -> String {
        let (index, digit) = (rng.below(dim), rng.below(10));
        match rng.below(30) {
            0 => format!("{dim}:{digit}"),
            1 => format!("{:08}:{digit}", rng.below(dim)),
            2 => format!("{index}:{digit}{}", rng.below(10)),
            3 => format!("{index}:"),
            4 => format!(":{digit}"),
            5 => format!("{index}:x"),
            6 => format!("{index}{digit}"),
            _ => format!("{index}:{digit}"),
        }
    }

    /// What may end a line the blocks read: mostly a line feed, else one they take too or
    /// one they leave.
    fn line_end(rng: &mut Xorshift) -> &'static str {
        match rng.below(30) {
            0 => "\r\n",
            1 => " \n",
            2 => "\r \n",
            3 => "\t\n",
            _ => "\n",
        }
    }

    #[test]
    fn blocks_take_the_lines_of_one_scalar_up_to_the_first_other_one() {
        let line = |rng: &mut Xorshift, id: &str, small: bool| {
            let value = if small {
                rng.below(256)
            } else {
                rng.below(100_000)
            };
            let body = match rng.below(30) {
                0 => format!("{id} |x {:07}", rng.below(1000)),
                1 => format!("{id} |x {:08}", rng.below(1000)),
                2 => format!("{id} |x {}", 10_000_000 + rng.below(90_000_000)),
                3 => format!("{id} |x "),
                4 => format!(
                    "{id} |x {}",
                    rng.pick(&["-1", "2.5", "1e3", "+1", "1-2", "x"])
                ),
                5 => format!("{id}1 |x {value}"),
                6 => format!("{id} |y {value}"),
                7 => format!("{id}\t|x {value}"),
                8 => format!("{id} |x {value} |x 1"),
                9 => format!("{id} |x {value}{}", " ".repeat(70)),
                10 => format!("{id} |x {}", rng.below(100_000)),
                11 => format!("{} |x {value}", next_id(id)),
                _ => format!("{id} |x {value}"),
            };
            body + line_end(rng)
        };
        let wanted = |line: &str, id: &str| {
            let digits = short_digits(line.strip_prefix(id)?.strip_prefix(" |x ")?)?;
            digits.parse::<u32>().ok().map(|v| v as f32)
        };
        let start = learnt(" |x");
        check_form(0x5ca1_ab1e, line, wanted, |buf, lead| {
            let mut parsed = ParsedSequences::<f32>::new(&[InputConfig::dense("x", 1)]);
            let column = &mut parsed.columns[0];
            let (taken, next) = LineBlocks::default().scalars(buf, 0, lead, &start, column);
            let values = column.values().to_vec();
            // A column of bytes while every value fits in one.
            let bytes = values.iter().all(|&v| v <= 255.0);
            assert_eq!(column.value_tier == ValueTier::Bytes, bytes);
            (taken, next, values)
        });
    }

    #[test]
    fn blocks_take_the_lines_of_two_entries_up_to_the_first_other_one() {
        let line = |rng: &mut Xorshift, id: &str, _: bool| {
            let (word, tag) = (entry_text(rng, 5000), entry_text(rng, 50));
            let body = match rng.below(20) {
                0 => format!("{id} |w {word}  |t {tag}"),
                1 => format!("{id} |w {word}\t|t {tag}"),
                2 => format!("{id} |t {tag} |w {word}"),
                3 => format!("{id} |w {word}"),
                4 => format!("{id} |w {word} |t {tag} |u 1:1"),
                5 => format!("{} |w {word} |t {tag}", next_id(id)),
                _ => format!("{id} |w {word} |t {tag}"),
            };
            body + line_end(rng)
        };
        let wanted = |line: &str, id: &str| {
            let (word, rest) = entry(line.strip_prefix(id)?.strip_prefix(" |w ")?, 5000)?;
            let (tag, rest) = entry(rest.strip_prefix(" |t ")?, 50)?;
            matches!(rest, "\n" | "\r\n").then_some((word, tag))
        };
        let (first, second) = (learnt(" |w"), learnt("|t"));
        check_form(0x7a1_5eed, line, wanted, |buf, lead| {
            let inputs = [InputConfig::sparse("w", 5000), InputConfig::sparse("t", 50)];
            let mut parsed = ParsedSequences::<f32>::new(&inputs);
            let [words, tags] = &mut parsed.columns[..] else {
                panic!("two columns");
            };
            let (taken, next) = LineBlocks::default().entry_pairs(
                buf,
                0,
                lead,
                [(&first, 5000), (&second, 50)],
                words,
                tags,
            );
            let pairs = |c: &InputColumn<f32>| -> Vec<(u32, f32)> {
                assert_eq!(c.sample_count(), taken as usize);
                c.indices().into_iter().zip(c.values().to_vec()).collect()
            };
            let held = pairs(words).into_iter().zip(pairs(tags)).collect();
            (taken, next, held)
        });
    }
}
