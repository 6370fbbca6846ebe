//! Finding the `|` and line feeds of short lines, for the index scan's fast path
//! ([`crate::index::scan`]).
//!
//! On lines of a few dozen bytes a memchr call per hit spends more on its setup than on
//! searching, so the scan walks the positions of both bytes block by block ([`SpecialSearch`]):
//! on x86-64 a block is 64 bytes, matched with SSE2 compares through the `safe_arch` crate
//! ([`specials_in_block`], a bit per byte); elsewhere it is 8 bytes, matched with word
//! arithmetic ([`specials_in_word`], the high bit of each byte). The tests check both
//! matchers, and the search, against a byte loop.

use crate::parser::word::{HIGH, LOW7, ONES};

/// Bytes per block of the search.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
const BLOCK: usize = 64;
/// Bits of a block's mask per byte.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
const BITS_PER_BYTE: u32 = 1;
/// The block's mask of specials (see the module documentation).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn specials(buf: &[u8], at: usize) -> u64 {
    specials_in_block(buf, at)
}

/// Bytes per block of the search.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
const BLOCK: usize = 8;
/// Bits of a block's mask per byte.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
const BITS_PER_BYTE: u32 = 8;
/// The block's mask of specials (see the module documentation).
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline(always)]
fn specials(buf: &[u8], at: usize) -> u64 {
    specials_in_word(crate::parser::word::load_word(buf, at))
}

/// Positions of `|` and line feeds in a buffer from a start, in order, a block at a time.
pub(super) struct SpecialSearch<'a> {
    buf: &'a [u8],
    block_start: usize,
    /// The specials of the block at `block_start` not yet returned.
    mask: u64,
}

impl<'a> SpecialSearch<'a> {
    /// The positions in `buf` from `from` on.
    pub(super) fn new(buf: &'a [u8], from: usize) -> Self {
        SpecialSearch {
            buf,
            block_start: from,
            mask: specials(buf, from),
        }
    }
}

impl Iterator for SpecialSearch<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.block_start += BLOCK;
            if self.block_start >= self.buf.len() {
                return None;
            }
            self.mask = specials(self.buf, self.block_start);
        }
        let at = self.block_start + (self.mask.trailing_zeros() / BITS_PER_BYTE) as usize;
        self.mask &= self.mask - 1;
        Some(at)
    }
}

/// A bit for each byte of `buf[at..at + 64]` that is `|` or a line feed: bit `k` for byte
/// `at + k`, none for bytes past the end of `buf`.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn specials_in_block(buf: &[u8], at: usize) -> u64 {
    use safe_arch::{
        bitor_m128i, cmp_eq_mask_i8_m128i, load_unaligned_m128i, move_mask_i8_m128i,
        set_splat_i8_m128i,
    };
    let Some(block) = buf.get(at..at + 64) else {
        // The last bytes of the buffer, fewer than a block.
        return buf
            .get(at..)
            .unwrap_or(&[])
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'|' || b == b'\n')
            .fold(0, |mask, (k, _)| mask | 1 << k);
    };
    let pipe = set_splat_i8_m128i(b'|' as i8);
    let feed = set_splat_i8_m128i(b'\n' as i8);
    let mut mask = 0u64;
    for (k, lane) in block.chunks_exact(16).enumerate() {
        // Always 16 bytes: the conversion cannot fail.
        let Ok(lane) = <&[u8; 16]>::try_from(lane) else {
            continue;
        };
        let bytes = load_unaligned_m128i(lane);
        let hits = bitor_m128i(
            cmp_eq_mask_i8_m128i(bytes, pipe),
            cmp_eq_mask_i8_m128i(bytes, feed),
        );
        mask |= u64::from(move_mask_i8_m128i(hits) as u16) << (16 * k);
    }
    mask
}

/// The high bit of each byte of `word` that is `|` or a line feed (exact: no borrow
/// between bytes).
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2"),
    allow(dead_code) // only the tests use it there
)]
#[inline(always)]
fn specials_in_word(word: u64) -> u64 {
    let equal = |b: u8| {
        let x = word ^ (ONES * u64::from(b));
        !(((x & LOW7) + LOW7) | x) & HIGH
    };
    equal(b'|') | equal(b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::word::load_word;

    /// Random buffers of 0 to 199 bytes, dense in specials (so blocks, words and tails of
    /// every length).
    fn buffers() -> impl Iterator<Item = Vec<u8>> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let alphabet = b"|\n0a #:\x80\xff";
        (0..200).map(move |len| {
            (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect()
        })
    }

    fn is_special(b: u8) -> bool {
        b == b'|' || b == b'\n'
    }

    #[test]
    fn the_search_finds_every_pipe_and_line_feed_in_order_from_any_start() {
        for buf in buffers() {
            for from in 0..=buf.len() {
                let want: Vec<usize> = (from..buf.len()).filter(|&i| is_special(buf[i])).collect();
                let got: Vec<usize> = SpecialSearch::new(&buf, from).collect();
                assert_eq!(got, want, "{} bytes from {from}", buf.len());
            }
        }
    }

    #[test]
    fn the_word_matcher_marks_exactly_the_specials() {
        for buf in buffers() {
            for at in 0..buf.len() {
                let mask = specials_in_word(load_word(&buf, at));
                for k in 0..8 {
                    let special = buf.get(at + k).is_some_and(|&b| is_special(b));
                    assert_eq!(mask >> (8 * k + 7) & 1 == 1, special, "byte {}", at + k);
                }
                assert_eq!(mask & !HIGH, 0);
            }
        }
    }

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[test]
    fn the_block_matcher_marks_exactly_the_specials() {
        for buf in buffers() {
            for at in 0..=buf.len() {
                let mask = specials_in_block(&buf, at);
                for k in 0..64 {
                    let special = buf.get(at + k).is_some_and(|&b| is_special(b));
                    assert_eq!(mask >> k & 1 == 1, special, "byte {}", at + k);
                }
            }
        }
    }
}
