//! Word-at-a-time helpers: eight bytes of text read as one little-endian `u64` and tested
//! lane by lane (SWAR), shared by the parser and the index scan.

/// A byte per lane of a word.
pub(crate) const ONES: u64 = 0x0101_0101_0101_0101;
/// The low 7 bits of every lane.
pub(crate) const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
/// The high bit of every lane.
pub(crate) const HIGH: u64 = 0x8080_8080_8080_8080;

/// The 8 bytes of `buf` at `at` as a little-endian word, zero-padded past the end.
#[inline]
pub(crate) fn load_word(buf: &[u8], at: usize) -> u64 {
    match buf.get(at..at.saturating_add(8)) {
        Some(b) => <[u8; 8]>::try_from(b).map_or(0, u64::from_le_bytes),
        None => {
            let mut bytes = [0u8; 8];
            let tail = buf.get(at..).unwrap_or(&[]);
            bytes[..tail.len()].copy_from_slice(tail);
            u64::from_le_bytes(bytes)
        }
    }
}

/// The 8 bytes at `buf[pos..]` as a little-endian word, if there are 8 (unlike
/// [`load_word`], which pads).
#[inline(always)]
pub(crate) fn word_at(buf: &[u8], pos: usize) -> Option<u64> {
    let chunk = buf.get(pos..pos.checked_add(8)?)?;
    Some(u64::from_le_bytes(<[u8; 8]>::try_from(chunk).ok()?))
}

/// The number of leading ASCII digits of `word` (8 when all are digits).
#[inline(always)]
pub(crate) fn leading_digits(word: u64) -> u32 {
    digit_lanes(word).1
}

/// `word` with `'0'` xored out of every lane (a digit lane then holds its value), and the
/// number of its leading ASCII digits.
#[inline(always)]
pub(crate) fn digit_lanes(word: u64) -> (u64, u32) {
    let (x, non_digits) = digit_mask(word);
    (x, non_digits.trailing_zeros() / 8)
}

/// `word` with `'0'` xored out of every lane, as [`digit_lanes`] gives it, and the high bit
/// of each lane that is not an ASCII digit.
#[inline(always)]
pub(crate) fn digit_mask(word: u64) -> (u64, u64) {
    let x = word ^ (ONES * u64::from(b'0'));
    // A byte is a digit when it is below 10 once '0' is xored away.
    (x, (((x & LOW7) + ONES * (0x80 - 10)) | x) & HIGH)
}

/// The low `bytes` bytes of `word` (`bytes` below 8).
#[inline(always)]
pub(crate) fn low_bytes(word: u64, bytes: u32) -> u64 {
    word & ((1u64 << (8 * bytes)) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_read_little_endian_and_zero_padded() {
        assert_eq!(load_word(b"12345678x", 0), u64::from_le_bytes(*b"12345678"));
        assert_eq!(load_word(b"123", 1), u64::from_le_bytes(*b"23\0\0\0\0\0\0"));
        assert_eq!(load_word(b"123", 3), 0);
        assert_eq!(load_word(b"123", 9), 0);
    }

    #[test]
    fn leading_digits_stop_at_the_first_other_byte() {
        for (text, digits) in [
            (&b"1 |a 1\n\0"[..], 1),
            (b"0123456 ", 7),
            (b"98765432", 8),
            (b"|a 12345", 0),
            (b"12/45678", 2),
            (b"12:45678", 2),
            (b"7\0\0\0\0\0\0\0", 1),
        ] {
            assert_eq!(leading_digits(load_word(text, 0)), digits, "{text:?}");
        }
        assert_eq!(
            low_bytes(load_word(b"1234 |a", 0), 4),
            u64::from_le_bytes(*b"1234\0\0\0\0")
        );
    }
}
