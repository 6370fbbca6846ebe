//! Bit masks of chosen bytes, or of the digits, in 64-byte blocks of text, a bit per byte,
//! shared by the parser's sparse entry loop (the spaces between entries, the digits and
//! colons of each), its dense value loop (spaces and digits) and the index scan (`|` and
//! line feeds); and the two steps both value loops take on their masks: the separators
//! before a block's first other byte, and where eight digits in a row start.
//!
//! Walking the set bits of a mask (`trailing_zeros`, then clearing the lowest) finds each
//! next position without reading the bytes before it, so a loop that takes its next
//! position from the mask does not wait for the work on the current one. On x86-64 a block
//! is matched with SSE2 compares through the `safe_arch` crate; elsewhere with word
//! arithmetic, eight bytes at a time. The tests check both against a byte loop.

use crate::parser::word::{HIGH, LOW7, ONES};

/// Bytes per block, and bits per mask.
pub(crate) const BLOCK: usize = 64;

/// The bits of `ends` below the lowest bit of `others`: in a block's masks, the spaces (or
/// other separators) that come before its first byte of another kind.
#[inline(always)]
pub(crate) fn ends_before(ends: u64, others: u64) -> u64 {
    match others.trailing_zeros() {
        64 => ends,
        first => ends & ((1u64 << first) - 1),
    }
}

/// A bit `k` for each byte `k` of a block that starts eight digits in a row, given the
/// block's `digits` mask: a number of eight digits or more, which the quick readers of
/// digit words (at most seven digits) leave to the general parse.
#[inline(always)]
pub(crate) fn eight_digit_starts(digits: u64) -> u64 {
    let pairs = digits & (digits >> 1);
    let quads = pairs & (pairs >> 2);
    quads & (quads >> 4)
}

/// A bit for each byte of `block` equal to one of `targets`: bit `k` for byte `k`.
#[inline(always)]
pub(crate) fn matches<const N: usize>(block: &[u8; BLOCK], targets: [u8; N]) -> u64 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        matches_sse2(block, targets)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        matches_by_words(block, targets)
    }
}

/// [`matches()`] with SSE2: a compare per target and a byte mask per 16 bytes.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn matches_sse2<const N: usize>(block: &[u8; BLOCK], targets: [u8; N]) -> u64 {
    use safe_arch::{bitor_m128i, cmp_eq_mask_i8_m128i, set_splat_i8_m128i, zeroed_m128i};
    let splats = targets.map(|t| set_splat_i8_m128i(t as i8));
    mask_by_lanes(block, |bytes| {
        splats.iter().fold(zeroed_m128i(), |hits, &target| {
            bitor_m128i(hits, cmp_eq_mask_i8_m128i(bytes, target))
        })
    })
}

/// The mask of `block` whose bit `k` is the high bit of byte `k % 16` of what `hits` gives
/// for the 16 bytes from `16 * (k / 16)`.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn mask_by_lanes(block: &[u8; BLOCK], hits: impl Fn(safe_arch::m128i) -> safe_arch::m128i) -> u64 {
    use safe_arch::{load_unaligned_m128i, move_mask_i8_m128i};
    let mut mask = 0u64;
    for (k, lane) in block.chunks_exact(16).enumerate() {
        // Always 16 bytes: the conversion cannot fail.
        let Ok(lane) = <&[u8; 16]>::try_from(lane) else {
            continue;
        };
        let lane_hits = hits(load_unaligned_m128i(lane));
        mask |= u64::from(move_mask_i8_m128i(lane_hits) as u16) << (16 * k);
    }
    mask
}

/// [`matches()`] with word arithmetic: the high bit of each matching byte of a word, exact
/// (no borrow between bytes).
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2"),
    allow(dead_code) // only the tests use it there
)]
#[inline(always)]
fn matches_by_words<const N: usize>(block: &[u8; BLOCK], targets: [u8; N]) -> u64 {
    mask_by_words(block, |word| {
        targets.iter().fold(0, |high, &target| {
            let x = word ^ (ONES * u64::from(target));
            high | (!(((x & LOW7) + LOW7) | x) & HIGH)
        })
    })
}

/// The mask of `block` whose bit `k` is the high bit of byte `k % 8` of what `high` gives
/// for the little-endian word of the 8 bytes from `8 * (k / 8)` (its other bits ignored),
/// gathered into eight bits of the mask by one multiplication per word.
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2"),
    allow(dead_code) // only the tests use it there
)]
#[inline(always)]
fn mask_by_words(block: &[u8; BLOCK], high: impl Fn(u64) -> u64) -> u64 {
    let mut mask = 0u64;
    for (k, lane) in block.chunks_exact(8).enumerate() {
        // Always 8 bytes: the conversion cannot fail.
        let Ok(lane) = <[u8; 8]>::try_from(lane) else {
            continue;
        };
        let bits = high(u64::from_le_bytes(lane)) & HIGH;
        // Bit 7 of byte j moves to bit 56 + j: each byte's bit meets one term of the
        // multiplier there, and no two terms meet anywhere, so nothing carries.
        let bits = ((bits >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8;
        mask |= u64::from(bits) << (8 * k);
    }
    mask
}

/// A bit for each byte of `block` that is an ASCII digit: bit `k` for byte `k`.
#[inline(always)]
pub(crate) fn digits(block: &[u8; BLOCK]) -> u64 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        digits_sse2(block)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        digits_by_words(block)
    }
}

/// [`digits`] with SSE2: above `'0' - 1` and below `'9' + 1`, as signed bytes (a byte of
/// 0x80 or more is negative, so below `'0'`).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn digits_sse2(block: &[u8; BLOCK]) -> u64 {
    use safe_arch::{bitand_m128i, cmp_gt_mask_i8_m128i, cmp_lt_mask_i8_m128i, set_splat_i8_m128i};
    let below_zero = set_splat_i8_m128i(b'/' as i8);
    let above_nine = set_splat_i8_m128i(b':' as i8);
    mask_by_lanes(block, |bytes| {
        bitand_m128i(
            cmp_gt_mask_i8_m128i(bytes, below_zero),
            cmp_lt_mask_i8_m128i(bytes, above_nine),
        )
    })
}

/// [`digits`] with word arithmetic, as [`mask_by_words`] gathers its bits.
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2"),
    allow(dead_code) // only the tests use it there
)]
#[inline(always)]
fn digits_by_words(block: &[u8; BLOCK]) -> u64 {
    mask_by_words(block, |word| {
        let x = word ^ (ONES * u64::from(b'0'));
        // A byte is a digit when it is below 10 once '0' is xored away.
        !(((x & LOW7) + ONES * (0x80 - 10)) | x)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Xorshift;

    /// Random 64-byte blocks dense in the bytes the tests look for, their neighbours (`/` and
    /// `:` around the digits), and bytes with the high bit set (which a careless word compare
    /// confuses with a match, and which are negative to a signed compare).
    fn blocks() -> impl Iterator<Item = [u8; BLOCK]> {
        let mut rng = Xorshift::new(0x9e37_79b9_7f4a_7c15);
        let alphabet = b"|\n \t09/:a#5\x80\xff\xa0\xb0\xb9\x7f";
        (0..2000).map(move |_| std::array::from_fn(|_| rng.pick(alphabet)))
    }

    fn byte_loop(block: &[u8; BLOCK], targets: &[u8]) -> u64 {
        (0..BLOCK)
            .filter(|&k| targets.contains(&block[k]))
            .fold(0, |mask, k| mask | 1 << k)
    }

    #[test]
    fn the_word_matcher_marks_exactly_the_targets() {
        for block in blocks() {
            assert_eq!(matches_by_words(&block, [b' ']), byte_loop(&block, b" "));
            assert_eq!(
                matches_by_words(&block, [b'|', b'\n']),
                byte_loop(&block, b"|\n")
            );
        }
    }

    #[test]
    fn the_digit_matchers_mark_exactly_the_digits() {
        for block in blocks() {
            let want = (0..BLOCK)
                .filter(|&k| block[k].is_ascii_digit())
                .fold(0, |mask, k| mask | 1 << k);
            assert_eq!(digits_by_words(&block), want);
            assert_eq!(digits(&block), want);
        }
    }

    #[test]
    fn the_matcher_marks_exactly_the_targets() {
        for block in blocks() {
            assert_eq!(matches(&block, [b' ']), byte_loop(&block, b" "));
            assert_eq!(matches(&block, [b'|', b'\n']), byte_loop(&block, b"|\n"));
            assert_eq!(matches(&block, [b'\xa0']), byte_loop(&block, b"\xa0"));
        }
    }
}
