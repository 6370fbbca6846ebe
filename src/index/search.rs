//! Finding the `|` and line feeds of short lines, for the index scan's fast path
//! ([`crate::index::scan`]).
//!
//! On lines of a few dozen bytes a memchr call per hit spends more on its setup than on
//! searching, so the scan walks the positions of both bytes block by block ([`SpecialSearch`]):
//! a bit per byte of each 64-byte block ([`specials`], through
//! [`crate::parser::block::matches`]). The tests check the search against a byte loop.

use crate::parser::block::{matches, BLOCK};

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
        let at = self.block_start + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(at)
    }
}

/// A bit for each byte of `buf[at..at + 64]` that is `|` or a line feed: bit `k` for byte
/// `at + k`, none for bytes past the end of `buf`.
#[inline(always)]
fn specials(buf: &[u8], at: usize) -> u64 {
    match buf.get(at..).and_then(<[u8]>::first_chunk::<BLOCK>) {
        Some(block) => matches(block, [b'|', b'\n']),
        // The last bytes of the buffer, fewer than a block.
        None => buf
            .get(at..)
            .unwrap_or(&[])
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'|' || b == b'\n')
            .fold(0, |mask, (k, _)| mask | 1 << k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Xorshift;

    /// Random buffers of 0 to 199 bytes, dense in specials (so blocks and tails of every
    /// length).
    fn buffers() -> impl Iterator<Item = Vec<u8>> {
        let mut rng = Xorshift::new(0x9e37_79b9_7f4a_7c15);
        let alphabet = b"|\n0a #:\x80\xff";
        (0..200).map(move |len| (0..len).map(|_| rng.pick(alphabet)).collect())
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
    fn the_block_matcher_marks_exactly_the_specials() {
        for buf in buffers() {
            for at in 0..=buf.len() {
                let mask = specials(&buf, at);
                for k in 0..64 {
                    let special = buf.get(at + k).is_some_and(|&b| is_special(b));
                    assert_eq!(mask >> k & 1 == 1, special, "byte {}", at + k);
                }
            }
        }
    }
}
