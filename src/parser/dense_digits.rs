//! A dense sample's plain integer values read from bit masks of 64-byte windows, for the
//! line parser's dense samples.
//!
//! Dense inputs are mostly small integers: pixels, counts, one-hot labels, many of them 0.
//! Read one at a time, each value picks its way by its first bytes (a zero, a run of four
//! zeros, a number), and on data whose zeros and other values are mixed at random those
//! choices are mispredicted branches, about half the time per value. Here a window's spaces
//! and digits are found at once ([`crate::parser::block`]), and every value of 1 to 7
//! digits followed by a space is converted the same way, zero or not, without a branch that
//! depends on its digits. The first value of another shape (a sign, a point, an exponent,
//! two spaces, the last value before `|` or the line end) ends the run, and the line
//! parser's general loop reads the rest of the sample, so the sample is the same either way.

use crate::parser::block::{digits, eight_digit_starts, ends_before, matches, BLOCK};
use crate::parser::number::ascii_digits_value;

/// Bytes read at once: the block whose spaces are found, and the 8 bytes a value starting
/// near its end is read from.
const WINDOW: usize = BLOCK + 8;

/// Reads the values of a dense sample from `buf[pos..]` (`pos` at a value) into
/// `sample[count..]` while each is 1 to 7 ASCII digits followed by one space, fits the
/// sample (at most `sample.len()` values in all) and converts (`convert`: `None` when the
/// sample's storage cannot hold it as it is). Returns where the first value not read
/// starts (`pos` if none was read) and the new count.
#[inline(never)]
pub(crate) fn digit_values<E>(
    buf: &[u8],
    pos: usize,
    sample: &mut [E],
    mut count: usize,
    convert: impl Fn(u64) -> Option<E>,
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
        let digits = digits(block);
        // The spaces that end the values to read: with no shape check when every value up
        // to the run's last space is 1 to 7 digits, else each value checked on the masks.
        let (ends, read) = match well_formed_run(spaces, digits) {
            Some(ends) => (
                ends,
                read_values::<E, false>(window, digits, ends, sample, &mut count, &convert),
            ),
            None => (
                spaces,
                read_values::<E, true>(window, digits, spaces, sample, &mut count, &convert),
            ),
        };
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

/// Reads into `sample[*count..]` the values of `window` ended by the spaces of `ends`, the
/// first at the window's start, each checked on the `digits` mask to be 1 to 7 digits when
/// `CHECKED` (else the caller found them so). `Ok` with where the value after the last space
/// starts, or `Err` with where the first value not read starts (of another shape, one
/// `convert` refuses, or past the sample). One loop, instantiated with and without the
/// checks: a check on a flag inside it cost the well-formed runs a sixth more instructions.
#[inline(always)]
fn read_values<E, const CHECKED: bool>(
    window: &[u8; WINDOW],
    digits: u64,
    ends: u64,
    sample: &mut [E],
    count: &mut usize,
    convert: &impl Fn(u64) -> Option<E>,
) -> Result<usize, usize> {
    let mut start = 0;
    let mut rest = ends;
    while rest != 0 {
        let space = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        let len = space - start;
        if CHECKED {
            let all = (1u64 << len) - 1;
            if !((1..=7).contains(&len) && (digits >> start) & all == all) {
                return Err(start);
            }
        }
        let value = value_at(window, start, len).and_then(convert);
        let (Some(value), Some(slot)) = (value, sample.get_mut(*count)) else {
            return Err(start);
        };
        *slot = value;
        *count += 1;
        start = space + 1;
    }
    Ok(start)
}

/// The value of the `len` digits (1 to 7) at `window[start..]`.
#[inline(always)]
fn value_at(window: &[u8; WINDOW], start: usize, len: usize) -> Option<u64> {
    let head = window.get(start..)?.first_chunk::<8>()?;
    Some(ascii_digits_value(u64::from_le_bytes(*head), len as u32))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` read into a sample of `dim` bytes.
    fn read(text: &str, dim: usize) -> (usize, Vec<u8>) {
        let mut sample = vec![0u8; dim];
        let (end, count) =
            digit_values(text.as_bytes(), 0, &mut sample, 0, |v| u8::try_from(v).ok());
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
            let (end, count) = digit_values(padded.as_bytes(), 0, &mut sample, 0, Some);
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

    #[test]
    fn without_a_full_window_nothing_is_read() {
        assert_eq!(read("1 2 3 \n", 10), (0, vec![]));
    }
}
