//! Finding the `|` and line feeds of short lines, for the index scan's fast path
//! ([`crate::index::scan`]).
//!
//! On lines of a few dozen bytes a memchr call per hit spends more on its setup than on
//! searching, so the scan walks the positions of both bytes in blocks instead:
//! [`SpecialSearch`] is [`BlockSearch`] (64 bytes at a time, with SSE2 compares, through the
//! `safe_arch` crate) on x86-64 and [`WordSearch`] (8 bytes at a time, with word arithmetic)
//! elsewhere. Both give the same positions, which the tests check against a byte loop.

use crate::index::scan::{load_word, HIGH, LOW7, ONES};

/// The search the scan uses on short lines: see the module documentation.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub(super) type SpecialSearch<'a> = BlockSearch<'a>;
/// The search the scan uses on short lines: see the module documentation.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
pub(super) type SpecialSearch<'a> = WordSearch<'a>;

/// Positions of `|` and line feeds in a buffer from a start, in order, found 64 bytes at a
/// time: four 16-byte SSE2 compares per byte sought give a bit per byte.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub(super) struct BlockSearch<'a> {
    buf: &'a [u8],
    block_start: usize,
    /// The specials of the block at `block_start` not yet returned, a bit per byte.
    mask: u64,
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
impl<'a> BlockSearch<'a> {
    /// The positions in `buf` from `from` on.
    pub(super) fn new(buf: &'a [u8], from: usize) -> Self {
        BlockSearch {
            buf,
            block_start: from,
            mask: specials_in_block(buf, from),
        }
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

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
impl Iterator for BlockSearch<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.block_start += 64;
            if self.block_start >= self.buf.len() {
                return None;
            }
            self.mask = specials_in_block(self.buf, self.block_start);
        }
        let at = self.block_start + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(at)
    }
}

/// Positions of `|` and line feeds in a buffer from a start, in order, found eight bytes at
/// a time with word arithmetic (where SSE2 is not available).
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2"),
    allow(dead_code) // only the tests use it there
)]
pub(super) struct WordSearch<'a> {
    buf: &'a [u8],
    word_start: usize,
    /// The specials of the word at `word_start` not yet returned, a high bit per byte.
    mask: u64,
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
impl<'a> WordSearch<'a> {
    /// The positions in `buf` from `from` on.
    pub(super) fn new(buf: &'a [u8], from: usize) -> Self {
        WordSearch {
            buf,
            word_start: from,
            mask: specials_in(load_word(buf, from)),
        }
    }
}

/// The high bit of each byte of `word` that equals `b` (exact: no borrow between bytes).
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
#[inline]
fn bytes_equal(word: u64, b: u8) -> u64 {
    let x = word ^ (ONES * u64::from(b));
    !(((x & LOW7) + LOW7) | x) & HIGH
}

/// The high bit of each byte of `word` that is `|` or a line feed.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
#[inline(always)]
fn specials_in(word: u64) -> u64 {
    bytes_equal(word, b'|') | bytes_equal(word, b'\n')
}

impl Iterator for WordSearch<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.word_start += 8;
            if self.word_start >= self.buf.len() {
                return None;
            }
            self.mask = specials_in(load_word(self.buf, self.word_start));
        }
        let at = self.word_start + (self.mask.trailing_zeros() / 8) as usize;
        self.mask &= self.mask - 1;
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every start in random buffers of 0 to 199 bytes (so blocks, words and tails of every
    /// length), against a byte loop.
    fn check(search: impl Fn(&[u8], usize) -> Vec<usize>) {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let alphabet = b"|\n0a #:\x80\xff";
        for len in 0..200 {
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            for from in 0..=len {
                let want: Vec<usize> = (from..len)
                    .filter(|&i| buf[i] == b'|' || buf[i] == b'\n')
                    .collect();
                assert_eq!(search(&buf, from), want, "{len} bytes from {from}");
            }
        }
    }

    #[test]
    fn word_search_finds_every_pipe_and_line_feed_in_order() {
        check(|buf, from| WordSearch::new(buf, from).collect());
    }

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[test]
    fn block_search_finds_every_pipe_and_line_feed_in_order() {
        check(|buf, from| BlockSearch::new(buf, from).collect());
    }

    #[test]
    fn the_scan_search_finds_every_pipe_and_line_feed_in_order() {
        check(|buf, from| SpecialSearch::new(buf, from).collect());
    }
}
