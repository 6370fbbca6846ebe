//! A dense sample's short values read from bit masks of 64-byte windows, for the line
//! parser's dense samples.
//!
//! Dense inputs are mostly small integers (pixels, counts, one-hot labels) or short
//! fractions (scaled features: `0.180392`, `-0.5`), many of them 0. Read one at a time,
//! each value picks its way by its first bytes (a zero, a run of four zeros, a number, a
//! fraction), and on data whose zeros and other values are mixed at random those choices
//! are mispredicted branches, about half the time per value. Here a window's spaces and
//! digits (and for fractions its points and minus signs) are found at once
//! ([`crate::parser::block`]), and every value of the form followed by a space is converted
//! the same way, without a branch that depends on its bytes; where a block has lone zeros
//! (`0` and a space), they are only counted, the sample being zeroed already. Two forms:
//! - [`Integers`]: 1 to 7 digits, for a column that stores bytes (or any integer store);
//! - [`Decimals`]: an optional `-`, then 1 to 8 bytes of digits with at most one point
//!   between two of them, at most 7 digits: for a column that stores `f32` or `f64`.
//!
//! The first value of another shape (an exponent, a `+`, two spaces, a longer number, the
//! last value before `|` or the line end) ends the run, and the line parser's general loop
//! reads the rest of the sample, so the sample is the same either way.

use crate::parser::block::{digits, eight_digit_starts, ends_before, matches, BLOCK};
use crate::parser::number::{ascii_digits_value, Element};
use crate::parser::word::word_at;

/// Bytes read at once: the block whose spaces are found, and the 8 bytes a value starting
/// near its end is read from.
const WINDOW: usize = BLOCK + 8;

/// One form of the values [`short_values`] reads: how a window's run of them is read.
pub(crate) trait ValueForm<E> {
    /// Reads into `sample[*count..]` (zero from there on) the values of `window` (its first
    /// byte starts one) ended by spaces, given its first [`BLOCK`] bytes, `block`, and their
    /// mask of `spaces`. Returns the spaces that end the values it may read (`spaces`
    /// itself, or those before the first byte no value of the form holds), and `Ok` with
    /// where the value after the last of them starts, or `Err` with where the first value
    /// not read starts (of another shape, or past the sample).
    fn read_run(
        &self,
        window: &[u8; WINDOW],
        block: &[u8; BLOCK],
        spaces: u64,
        sample: &mut [E],
        count: &mut usize,
    ) -> (u64, Result<usize, usize>);
}

/// Reads the values of a dense sample from `buf[pos..]` (`pos` at a value) into
/// `sample[count..]`, which must be zero, while each has the `form` and is followed by one
/// space, and fits the sample (at most `sample.len()` values in all). Returns where the
/// first value not read starts (`pos` if none was read) and the new count.
#[inline(never)]
pub(crate) fn short_values<E>(
    buf: &[u8],
    pos: usize,
    sample: &mut [E],
    mut count: usize,
    form: impl ValueForm<E>,
) -> (usize, usize) {
    let mut at = pos;
    loop {
        let Some(window) = buf.get(at..).and_then(<[u8]>::first_chunk::<WINDOW>) else {
            return (at, count);
        };
        let Some(block) = window.first_chunk::<BLOCK>() else {
            return (at, count);
        };
        let spaces = matches(block, [b' ']);
        let (ends, read) = form.read_run(window, block, spaces, sample, &mut count);
        let start = match read {
            Ok(start) => start,
            Err(stop) => return (at + stop, count),
        };
        if ends != spaces {
            // A byte neither a digit nor a space follows the run: the next value holds it.
            return (at + start, count);
        }
        if start == 0 {
            // No space in the block: a value longer than it, or the sample's end.
            return (at, count);
        }
        at += start;
    }
}

/// Plain integers of 1 to 7 digits, each converted by the function (`None` when the
/// sample's storage cannot hold it as it is; a lone zero is not converted, only counted).
pub(crate) struct Integers<F>(pub(crate) F);

impl<E, F: Fn(u64) -> Option<E>> ValueForm<E> for Integers<F> {
    #[inline(always)]
    fn read_run(
        &self,
        window: &[u8; WINDOW],
        block: &[u8; BLOCK],
        spaces: u64,
        sample: &mut [E],
        count: &mut usize,
    ) -> (u64, Result<usize, usize>) {
        let digits = digits(block);
        let convert = &self.0;
        // The spaces that end the values to read: with no shape check when every value up
        // to the run's last space is 1 to 7 digits, else each value checked on the masks.
        match well_formed_run(spaces, digits) {
            Some(ends) => (
                ends,
                read_placed(block, ends, sample, count, |start, end| {
                    value_at(window, start, end - start).and_then(convert)
                }),
            ),
            None => (
                spaces,
                read_placed(block, spaces, sample, count, |start, end| {
                    let len = end - start;
                    let all = (1u64 << len) - 1;
                    if !((1..=7).contains(&len) && (digits >> start) & all == all) {
                        return None;
                    }
                    value_at(window, start, len).and_then(convert)
                }),
            ),
        }
    }
}

/// The value of the `len` digits (1 to 7) at `window[start..]`.
#[inline(always)]
fn value_at(window: &[u8; WINDOW], start: usize, len: usize) -> Option<u64> {
    Some(ascii_digits_value(word_at(window, start)?, len as u32))
}

/// The spaces ending the values of a block that starts with a value, up to the last space
/// before any byte that is neither a digit nor a space, when every value before it is 1 to
/// 7 digits followed by one space (`spaces` and `digits` are the block's masks); `None`
/// when some is not, or no value ends before such a byte.
#[inline(always)]
fn well_formed_run(spaces: u64, digits: u64) -> Option<u64> {
    let ends = ends_before(spaces, !(spaces | digits));
    if ends == 0 {
        return None;
    }
    let run = u64::MAX >> ends.leading_zeros();
    let eights = eight_digit_starts(digits);
    // A value first, never two spaces in a row (an empty value), no value of 8 digits.
    (digits & 1 != 0 && ends & (ends >> 1) == 0 && eights & run == 0).then_some(ends)
}

/// Short decimals for a column of `f32` or `f64` values: an optional `-`, then 1 to 8 bytes,
/// digits with at most one `.` between two of them, and at most 7 digits (`0`, `255`,
/// `0.180392`, `-12.5`, `-0.0001`), converted by [`Element::from_short_decimal`], which
/// gives the value the line parser's general loop gives them. The sample must be zero from
/// the count on: a lone `0` is not written, only counted.
pub(crate) struct Decimals;

impl<T: Element> ValueForm<T> for Decimals {
    #[inline(always)]
    fn read_run(
        &self,
        window: &[u8; WINDOW],
        block: &[u8; BLOCK],
        spaces: u64,
        sample: &mut [T],
        count: &mut usize,
    ) -> (u64, Result<usize, usize>) {
        let digits = digits(block);
        let points = matches(block, [b'.']);
        let minus = matches(block, [b'-']);
        let ends = ends_before(spaces, !(spaces | digits | points | minus));
        let masks = (digits, points, minus);
        let read = read_placed(block, ends, sample, count, |start, end| {
            decimal_at(window, masks, start, end)
        });
        (ends, read)
    }
}

/// Reads into `sample[*count..]` the values of a window ended by the spaces of `ends` (the
/// first at the window's start; `value_at` gives the value from its start to its end, or
/// `None` when it is not of the form or cannot be stored). `Ok` with where the value after
/// the last of those spaces starts, or `Err` with where the first value not read starts (of
/// another shape, or past the sample), `*count` then its place. The sample must be zero
/// from `*count` on: a lone `0` (a value's first byte, a space after it) is counted and not
/// written, and where `block` has some, only the other values are read.
#[inline(always)]
fn read_placed<E>(
    block: &[u8; BLOCK],
    ends: u64,
    sample: &mut [E],
    count: &mut usize,
    value_at: impl Fn(usize, usize) -> Option<E>,
) -> Result<usize, usize> {
    // The values that fit the sample: a run past its end stops before the first that does
    // not (the next window then reads none), which the general loop reports.
    let room = sample.len() - *count;
    let (kept, taken) = match ends.count_ones() as usize {
        n if n <= room => (ends, n),
        _ => (lowest_bits(ends, room), room),
    };
    let zero_starts = (kept << 1 | 1) & matches(block, [b'0']);
    let lone_zero_ends = zero_starts << 1 & kept;
    if lone_zero_ends == 0 {
        read_each::<E, false>(kept, kept, sample, count, value_at)?;
    } else {
        read_each::<E, true>(kept, kept & !lone_zero_ends, sample, count, value_at)?;
    }
    *count += taken;
    Ok(after_last(kept))
}

/// Reads into the sample the values that the spaces of `read` end, of those that the
/// spaces of `ends` end (`read` a subset of them, the first value at the window's start),
/// each into its place: `*count` plus the ends before it. When `SKIPS_VALUES`, `read` may
/// leave some out, and each value's place and start are found from the ends before it;
/// without, it must be all of `ends`, and each value follows the last (11% less time on a
/// file of 100 `%.4f` values a line, none of them zero: `ctf bench --threads 1`). `Err` with
/// where the first value not read starts (`value_at` gives none, or past the sample),
/// `*count` then its place; else `*count` is unchanged.
#[inline(always)]
fn read_each<E, const SKIPS_VALUES: bool>(
    ends: u64,
    read: u64,
    sample: &mut [E],
    count: &mut usize,
    value_at: impl Fn(usize, usize) -> Option<E>,
) -> Result<(), usize> {
    let (mut start, mut index) = (0, *count);
    let mut rest = read;
    while rest != 0 {
        let space = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        if SKIPS_VALUES {
            let before = ends & ((1 << space) - 1);
            start = after_last(before);
            index = *count + before.count_ones() as usize;
        }
        let value = value_at(start, space);
        let (Some(value), Some(slot)) = (value, sample.get_mut(index)) else {
            *count = index;
            return Err(start);
        };
        *slot = value;
        start = space + 1;
        index += 1;
    }
    Ok(())
}

/// The position after the highest bit of `ends` (0 when it has none): where the value after
/// the last of those ends starts.
#[inline(always)]
fn after_last(ends: u64) -> usize {
    64 - ends.leading_zeros() as usize
}

/// The lowest `n` set bits of `mask` (all of them when it has fewer).
#[cold]
fn lowest_bits(mut mask: u64, n: usize) -> u64 {
    let mut kept = 0;
    for _ in 0..n {
        let lowest = mask & mask.wrapping_neg();
        kept |= lowest;
        mask ^= lowest;
    }
    kept
}

/// The value of [`Decimals`]' form at `window[start..end]`, given the block's masks of
/// digits, points and minus signs; `None` when the bytes there do not have the form.
#[inline(always)]
fn decimal_at<T: Element>(
    window: &[u8; WINDOW],
    (digits, points, minus): (u64, u64, u64),
    start: usize,
    end: usize,
) -> Option<T> {
    let negative = (minus >> start) & 1;
    let body = start + negative as usize;
    let len = end.checked_sub(body)?;
    if !(1..=8).contains(&len) {
        return None;
    }
    let all = (1u64 << len) - 1;
    let point = (points >> body) & all;
    let digit = (digits >> body) & all;
    let has_point = u32::from(point != 0);
    let len = len as u32;
    // Digits but for one point, which has a digit on either side; at most 7 digits.
    if digit | point != all
        || point & point.wrapping_sub(1) != 0
        || digit & 1 == 0
        || digit >> (len - 1) == 0
        || len - has_point > 7
    {
        return None;
    }
    // The point's place (`len` without one, then at most 7), the digits' bytes without it.
    let place = (point | 1 << len).trailing_zeros();
    let word = word_at(window, body)?;
    let below = (1u64 << (8 * place)) - 1;
    let digits_word = (word & below) | (word >> 8 & !below);
    let mantissa = ascii_digits_value(digits_word, len - has_point) as u32;
    let fraction_digits = len - place - has_point;
    Some(T::from_short_decimal(
        negative != 0,
        mantissa,
        fraction_digits,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Xorshift;

    /// `text` read into a sample of `dim` bytes.
    fn read(text: &str, dim: usize) -> (usize, Vec<u8>) {
        let mut sample = vec![0u8; dim];
        let (end, count) = short_values(
            text.as_bytes(),
            0,
            &mut sample,
            0,
            Integers(|v| u8::try_from(v).ok()),
        );
        sample.truncate(count);
        (end, sample)
    }

    #[test]
    fn values_followed_by_a_space_are_read_to_the_first_other_one() {
        let line = format!("{}7|x 1\n{}", "0 12 255 007 ".repeat(20), " ".repeat(80));
        let (end, values) = read(&line, 100);
        assert_eq!(values, [0, 12, 255, 7].repeat(20));
        assert_eq!(&line[end..end + 3], "7|x");
        for (text, stop) in [
            ("1 2 -3 4 ", 4),     // a sign
            ("1 2 3.5 4 ", 4),    // a point
            ("1 2  3 4 ", 4),     // two spaces
            ("1 2 3e1 4 ", 4),    // an exponent
            ("1 2 256 4 ", 4),    // past the storage
            ("1 2 12345678 ", 4), // eight digits
            ("1 2\t3 4 ", 2),     // a tab
        ] {
            let padded = format!("{text}\n{}", " ".repeat(80));
            let (end, values) = read(&padded, 10);
            assert_eq!(end, stop, "{text:?}");
            assert_eq!(
                values.len(),
                text[..stop].split(' ').count() - 1,
                "{text:?}"
            );
        }
    }

    #[test]
    fn values_past_seven_digits_or_empty_end_the_run_whatever_the_storage() {
        for (text, values) in [
            ("1 9999999 12345678 5 ", vec![1, 9_999_999]),
            ("1 0000007 123456789012 5 ", vec![1, 7]),
            ("1 2  3 4 ", vec![1, 2]),
            (
                "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 ",
                (1..=25).collect(),
            ),
        ] {
            let padded = format!("{text}\n{}", " ".repeat(80));
            let mut sample = vec![0u64; 40];
            let (end, count) = short_values(padded.as_bytes(), 0, &mut sample, 0, Integers(Some));
            assert_eq!(sample[..count], values, "{text:?}");
            let stop: usize = values.iter().map(|v| v.to_string().len() + 1).sum();
            let stop = stop + if text.starts_with("1 0000007") { 6 } else { 0 };
            assert_eq!(end, stop, "{text:?}");
        }
    }

    #[test]
    fn the_sample_bounds_the_values_read() {
        let line = format!("{}\n{}", "5 ".repeat(40), " ".repeat(80));
        let (end, values) = read(&line, 33);
        assert_eq!(values, [5; 33]);
        assert_eq!(end, 66);
    }

    /// A token for the decimals test: a lone zero, one of [`Decimals`]' form, or one of
    /// another shape (which may still be a number).
    fn drawn_token(rng: &mut Xorshift) -> String {
        let digits = |rng: &mut Xorshift, n: u64| -> String {
            (0..n)
                .map(|_| char::from(b'0' + rng.below(10) as u8))
                .collect()
        };
        match rng.below(10) {
            0..=2 => "0".to_string(),
            3..=7 => {
                let sign = if rng.below(3) == 0 { "-" } else { "" };
                let all = 1 + rng.below(7);
                let integer = 1 + rng.below(all);
                let mut text = format!("{sign}{}", digits(rng, integer));
                if integer < all {
                    text += &format!(".{}", digits(rng, all - integer));
                }
                text
            }
            8 => rng
                .pick(&["00", "0.0", "-0", "1234567", "-0.000001", "9999999", "1.0"])
                .to_string(),
            _ => rng
                .pick(&[
                    "1.2.3",
                    "5.",
                    ".5",
                    "-",
                    "--1",
                    "1-2",
                    "+1",
                    "1e5",
                    "12345678",
                    "0.1234567",
                    "-.5",
                    "1..2",
                    "123456789",
                    "-12345678",
                    "1.5e-05",
                    "x",
                ])
                .to_string(),
        }
    }

    /// Whether `token` has [`Decimals`]' form, told from its text.
    fn in_decimal_form(token: &str) -> bool {
        let body = token.strip_prefix('-').unwrap_or(token);
        let bytes = body.as_bytes();
        (1..=8).contains(&bytes.len())
            && bytes.iter().all(|b| b.is_ascii_digit() || *b == b'.')
            && bytes.iter().filter(|b| **b == b'.').count() <= 1
            && bytes[0].is_ascii_digit()
            && bytes[bytes.len() - 1].is_ascii_digit()
            && bytes.iter().filter(|b| b.is_ascii_digit()).count() <= 7
    }

    /// Random runs of tokens, each followed by one space, then a line end and enough bytes
    /// for every window, read by `form` into zeroed samples of random sizes: the run must
    /// take every token up to the first that `takes` refuses or the sample's end, each with
    /// the value `str::parse` gives it (as bits), and stop at that token.
    fn check_run<E: Copy + Default + std::str::FromStr>(
        rng: &mut Xorshift,
        form: impl ValueForm<E>,
        takes: impl Fn(&str) -> bool,
        bits: impl Fn(E) -> u64,
    ) {
        let tokens: Vec<String> = (0..1 + rng.below(60)).map(|_| drawn_token(rng)).collect();
        let mut text = String::new();
        let mut starts = Vec::new();
        for token in &tokens {
            starts.push(text.len());
            text += token;
            text.push(' ');
        }
        starts.push(text.len());
        text += "\n";
        text += &" ".repeat(WINDOW);
        let dim = 1 + rng.below(tokens.len() as u64 + 5) as usize;
        let mut sample = vec![E::default(); dim];
        let (stop, count) = short_values(text.as_bytes(), 0, &mut sample, 0, form);
        let taken = tokens.iter().take_while(|t| takes(t)).count();
        assert_eq!(count, taken.min(dim), "{text:?} into {dim}");
        assert_eq!(stop, starts[count], "{text:?} into {dim}");
        for (k, token) in tokens[..count].iter().enumerate() {
            let want = token.parse::<E>().ok().map(&bits);
            assert_eq!(Some(bits(sample[k])), want, "{token:?} in {text:?}");
        }
        assert!(sample[count..].iter().all(|v| bits(*v) == 0), "{text:?}");
    }

    #[test]
    fn decimals_are_read_as_std_reads_them_up_to_the_first_other_token() {
        let mut rng = Xorshift::new(0x2545_f491_4f6c_dd1d);
        for _ in 0..20_000 {
            check_run(&mut rng, Decimals, in_decimal_form, |v: f32| {
                u64::from(v.to_bits())
            });
            check_run(&mut rng, Decimals, in_decimal_form, f64::to_bits);
        }
    }

    #[test]
    fn integers_are_read_as_std_reads_them_up_to_the_first_other_token() {
        // 1 to 7 digits; into bytes, at most 255.
        let plain = |t: &str| (1..=7).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_digit());
        let byte = |t: &str| plain(t) && t.parse::<u64>().is_ok_and(|v| v <= 255);
        let mut rng = Xorshift::new(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            check_run(&mut rng, Integers(Some), plain, |v: u64| v);
            let to_byte = Integers(|v| u8::try_from(v).ok());
            check_run(&mut rng, to_byte, byte, u64::from);
        }
    }

    #[test]
    fn decimals_take_lone_zeros_by_their_count_alone() {
        // A lone zero is counted, not written: a sample that is not zero keeps its value
        // there (the line parser hands over zeroed samples).
        let text = format!("0 1.5 0 0 -2 0 \n{}", " ".repeat(WINDOW));
        let mut sample = vec![7.0f32; 6];
        let (stop, count) = short_values(text.as_bytes(), 0, &mut sample, 0, Decimals);
        assert_eq!((stop, count), (15, 6));
        assert_eq!(sample, [7.0, 1.5, 7.0, 7.0, -2.0, 7.0]);
    }

    #[test]
    fn without_a_full_window_nothing_is_read() {
        assert_eq!(read("1 2 3 \n", 10), (0, vec![]));
    }
}
