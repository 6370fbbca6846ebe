//! The sparse parse's vector step: up to eight entries of a block's well-formed run at once,
//! with AVX-512 (VBMI2, VBMI, BW and F), for the line parser's run of one-digit entries
//! (`digit_entries` in [`line`](super::line)), which takes its entries here while the run
//! holds three or more, and one or two at a time otherwise.
//!
//! Chosen at run time: [`avx512`] asks the CPU once (through `fearless_simd`'s level
//! detection), and the whole entry loop is then compiled a second time with the features on
//! (its `vectorize`). `fearless_simd`'s `kernel!` makes the intrinsics safe to call given the
//! token that proves the features, so this needs no `unsafe` of the project's (which keeps it
//! to the C ABI and mmap). On other CPUs and architectures the loop takes two entries at a
//! time, as it does after a group that does not fit.
//!
//! The step: the positions of the run's next spaces (eight at most), compressed into the
//! vector's first bytes (`vpcompressb`); each space's position spread over a 64-bit lane, and
//! the eight bytes before the entry's colon gathered into its lane (`vpermb`), those up to
//! the space before the entry cleared by one compare; the indices converted at once
//! (`vpmaddubsw`, `vpmaddwd`, a 32 × 32-bit multiply); each step taken against the lane
//! before (`valignq`) and checked with one compare for the whole group.

#[cfg(target_arch = "x86_64")]
pub(crate) use vector::{avx512, entry_group};

/// Up to eight entries read at once by [`entry_group`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct EntryGroup {
    /// Each entry's index less the one before it (the first's less the `last` given); past
    /// `count`, anything.
    pub(crate) steps: [u16; 8],
    /// Each entry's one-digit value; past `count`, anything.
    pub(crate) values: [u8; 8],
    /// How many entries the group holds: 1 to 8.
    pub(crate) count: usize,
    /// The last entry's index.
    pub(crate) last: u32,
    /// Where in the block the space after the last entry is.
    pub(crate) last_space: usize,
}

/// The vector step, on x86-64.
#[cfg(target_arch = "x86_64")]
mod vector {
    use core::arch::x86_64::{
        __m512i, _mm512_add_epi64, _mm512_add_epi8, _mm512_alignr_epi64, _mm512_castsi512_si128,
        _mm512_cmpeq_epi8_mask, _mm512_cmpgt_epi8_mask, _mm512_cmple_epu64_mask,
        _mm512_cmplt_epu64_mask, _mm512_cvtepi64_epi16, _mm512_madd_epi16, _mm512_maddubs_epi16,
        _mm512_mask_blend_epi8, _mm512_maskz_compress_epi8, _mm512_maskz_sub_epi8,
        _mm512_mul_epu32, _mm512_permutexvar_epi8, _mm512_set1_epi16, _mm512_set1_epi32,
        _mm512_set1_epi64, _mm512_set1_epi8, _mm512_srli_epi64, _mm512_sub_epi64, _mm512_sub_epi8,
    };

    use fearless_simd::{kernel, u16x8, u64x2, u64x8, u8x16, u8x64, Avx512, Level, SimdFrom};

    use super::EntryGroup;

    /// The token of the CPU's AVX-512 features (Ice Lake's set, VBMI2 among them), if it has
    /// them: detected once by `fearless_simd`, which keeps its answer.
    #[inline(always)]
    pub(crate) fn avx512() -> Option<Avx512> {
        Level::new().as_avx512()
    }

    /// A vector of 64 bytes.
    #[inline(always)]
    fn bytes(avx512: Avx512, table: [u8; 64]) -> __m512i {
        u8x64::simd_from(avx512, table).into()
    }

    /// The byte tables of the step, each a byte `k` from `k`.
    #[derive(Clone, Copy)]
    enum Table {
        /// Byte `k` is `k`: what `vpcompressb` compresses into the positions of a mask's bits.
        Positions,
        /// Byte `k` is `k / 8`: spreads a vector's byte `l` over the 64-bit lane `l`.
        LaneOfByte,
        /// Byte `k` is `k / 8 - 1` (lane 0's bytes wrap to 255): spreads a vector's byte
        /// `l - 1` over the 64-bit lane `l`.
        LaneBefore,
        /// Byte `8l + j` is `j - 10` (as a signed byte): from the space ending an entry, the
        /// eight bytes before its colon (an index has at most seven digits).
        BeforeColon,
    }

    /// The 64 bytes of `kind`.
    const fn table(kind: Table) -> [u8; 64] {
        let mut table = [0; 64];
        let mut k = 0;
        while k < 64 {
            table[k] = match kind {
                Table::Positions => k as u8,
                Table::LaneOfByte => (k / 8) as u8,
                Table::LaneBefore => ((k / 8) as u8).wrapping_sub(1),
                Table::BeforeColon => ((k % 8) as i8 - 10) as u8,
            };
            k += 1;
        }
        table
    }

    /// [`Table::Positions`].
    const POSITIONS: [u8; 64] = table(Table::Positions);
    /// [`Table::LaneOfByte`].
    const LANE_OF_BYTE: [u8; 64] = table(Table::LaneOfByte);
    /// [`Table::LaneBefore`].
    const LANE_BEFORE: [u8; 64] = table(Table::LaneBefore);
    /// [`Table::BeforeColon`].
    const BEFORE_COLON: [u8; 64] = table(Table::BeforeColon);

    kernel!(
        /// The entries of the run that `ends` marks in `block`, from `block[start]`, eight
        /// at most, when all fit a column whose indices are steps after the index `last`
        /// (each within `dim`, and at most `u16::MAX` above the one before: a decrease wraps
        /// past it too) and whose values are bytes, or ones when `ones`; `None` when one does
        /// not (the caller then takes them one or two at a time, and stops at the first that
        /// does not fit).
        ///
        /// `ends` holds the spaces of the block's well-formed run from `start` on, at least
        /// one: every byte from `start` up to each is 1 to 7 digits, `:`, one digit and the
        /// space.
        #[inline(always)]
        pub(crate) fn entry_group(
            avx512: Avx512,
            block: &[u8; 64],
            ends: u64,
            start: usize,
            last: u32,
            dim: usize,
            ones: bool,
        ) -> Option<EntryGroup> {
            debug_assert!(ends != 0 && ends.trailing_zeros() as usize > start);
            let count = ends.count_ones().min(8) as usize;
            let lanes = ((1u16 << count) - 1) as u8;
            let text: __m512i = u8x64::simd_from(avx512, *block).into();
            // Bytes 0..count: the spaces' positions (the bytes after them 0). Their lanes: each
            // space, and the space before its entry (`start - 1` before the first, -1 when it
            // is 0), over a whole lane. Only the first `count` lanes are checked and kept.
            let spaces = _mm512_maskz_compress_epi8(ends, bytes(avx512, POSITIONS));
            let lane_spaces = _mm512_permutexvar_epi8(bytes(avx512, LANE_OF_BYTE), spaces);
            let lane_before = _mm512_mask_blend_epi8(
                0xff,
                _mm512_permutexvar_epi8(bytes(avx512, LANE_BEFORE), spaces),
                _mm512_set1_epi8(start as i8 - 1),
            );
            // Each lane's eight bytes before its colon, the most significant first; those at or
            // before the space before the entry (positions below 0 wrap within the block) zero.
            let wanted = _mm512_add_epi8(lane_spaces, bytes(avx512, BEFORE_COLON));
            let index_bytes = _mm512_cmpgt_epi8_mask(wanted, lane_before);
            let digits = _mm512_maskz_sub_epi8(
                index_bytes,
                _mm512_permutexvar_epi8(wanted, text),
                _mm512_set1_epi8(b'0' as i8),
            );
            // Two digits to a 16-bit lane, four to a 32-bit one, eight to the 64-bit lane.
            let pairs = _mm512_maddubs_epi16(digits, _mm512_set1_epi16(0x010a));
            let quads = _mm512_madd_epi16(pairs, _mm512_set1_epi32(0x0001_0064));
            let indices = _mm512_add_epi64(
                _mm512_mul_epu32(quads, _mm512_set1_epi64(10_000)),
                _mm512_srli_epi64::<32>(quads),
            );
            // Each index less the lane before's (`last` before the first): a decrease wraps to a
            // step far above `u16::MAX`.
            let steps = _mm512_sub_epi64(
                indices,
                _mm512_alignr_epi64::<7>(indices, _mm512_set1_epi64(i64::from(last))),
            );
            // The values: the byte before each space.
            let values = _mm512_sub_epi8(
                _mm512_permutexvar_epi8(_mm512_sub_epi8(spaces, _mm512_set1_epi8(1)), text),
                _mm512_set1_epi8(b'0' as i8),
            );
            let fitting = _mm512_cmple_epu64_mask(steps, _mm512_set1_epi64(i64::from(u16::MAX)))
                & _mm512_cmplt_epu64_mask(indices, _mm512_set1_epi64(dim.min(1 << 32) as i64))
                & if ones {
                    _mm512_cmpeq_epi8_mask(values, _mm512_set1_epi8(1)) as u8
                } else {
                    u8::MAX
                };
            let fits = fitting & lanes == lanes;
            if !fits {
                return None;
            }
            let spaces = <[u8; 16]>::from(u8x16::simd_from(avx512, _mm512_castsi512_si128(spaces)));
            let values = <[u64; 2]>::from(u64x2::simd_from(avx512, _mm512_castsi512_si128(values)));
            let indices = <[u64; 8]>::from(u64x8::simd_from(avx512, indices));
            let steps = u16x8::simd_from(avx512, _mm512_cvtepi64_epi16(steps));
            Some(EntryGroup {
                steps: steps.into(),
                values: values[0].to_le_bytes(),
                count,
                last: indices[(count - 1) & 7] as u32,
                last_space: usize::from(spaces[(count - 1) & 7]),
            })
        }
    );
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::test_rng::Xorshift;

    /// The entries from `block[start]` ended by the first eight spaces of `ends` (or all of
    /// them, if fewer), read byte by byte and checked as [`entry_group`] says.
    fn read_one_by_one(
        block: &[u8; 64],
        ends: u64,
        start: usize,
        last: u32,
        dim: usize,
        ones: bool,
    ) -> Option<EntryGroup> {
        let (mut from, mut before, mut spaces) = (start, u64::from(last), ends);
        let count = ends.count_ones().min(8) as usize;
        let mut group = EntryGroup {
            steps: [0; 8],
            values: [0; 8],
            count,
            last: 0,
            last_space: 0,
        };
        for k in 0..count {
            let space = spaces.trailing_zeros() as usize;
            spaces &= spaces - 1;
            let entry = std::str::from_utf8(&block[from..space]).unwrap();
            let (index, value) = entry.split_once(':').unwrap();
            let (index, value): (u64, u8) = (index.parse().unwrap(), value.parse().unwrap());
            let fits = index >= before
                && index - before <= u64::from(u16::MAX)
                && index < dim as u64
                && (!ones || value == 1);
            if !fits {
                return None;
            }
            group.steps[k] = (index - before) as u16;
            group.values[k] = value;
            (group.last, group.last_space) = (index as u32, space);
            (before, from) = (index, space + 1);
        }
        Some(group)
    }

    /// What a group holds: its `count` steps and values, its last index and space.
    fn kept(group: EntryGroup) -> (Vec<u16>, Vec<u8>, u32, usize) {
        let count = group.count;
        (
            group.steps[..count].to_vec(),
            group.values[..count].to_vec(),
            group.last,
            group.last_space,
        )
    }

    #[test]
    fn entry_groups_are_the_entries_read_one_by_one() {
        let Some(avx512) = avx512() else {
            eprintln!("this CPU has no AVX-512 VBMI2: the vector step is not tested here");
            return;
        };
        // Blocks of a few bytes of anything (digits among them, which the step must not
        // read into the first index), then entries of 1 to 7 digits, `:`, a digit and a
        // space; the steps mostly small, some at or just past u16::MAX, some decreasing,
        // some indices at or past `dim`; values mostly 1.
        let mut rng = Xorshift::new(0x9e37_79b9_7f4a_7c15);
        let mut next = |n: u64| rng.below(n);
        let (mut taken, mut refused) = (0, 0);
        for _ in 0..100_000 {
            let start = next(6) as usize;
            let mut text: Vec<u8> = (0..start).map(|_| b"|s 93:"[next(6) as usize]).collect();
            let last = match next(4) {
                0 => 0,
                1 => next(100),
                2 => next(20_000),
                _ => next(3_000_000),
            } as u32;
            let mut index = u64::from(last);
            let mut ends = 0u64;
            while text.len() < 64 {
                let step = match next(40) {
                    0 => 65_535 + next(3),
                    1 => 0,
                    2 => u64::MAX - next(5), // a decrease
                    3..=20 => next(10),
                    _ => next(2_000),
                };
                index = index.wrapping_add(step) % 10_000_000;
                text.extend_from_slice(index.to_string().as_bytes());
                text.push(b':');
                text.push(if next(12) == 0 {
                    b'0' + next(10) as u8
                } else {
                    b'1'
                });
                if text.len() < 64 {
                    ends |= 1 << text.len();
                }
                text.push(b' ');
            }
            // Runs of 1 to 7 entries too (ended by a byte that is not part of one).
            if next(3) == 0 {
                for _ in 0..ends.count_ones().saturating_sub(1 + next(7) as u32) {
                    ends &= !(1 << (63 - ends.leading_zeros()));
                }
            }
            if ends == 0 {
                continue;
            }
            let block: &[u8; 64] = text.first_chunk().unwrap();
            let dim = [10_000_000, 3_000_100, 100][next(3) as usize];
            let ones = next(2) == 0;
            let want = read_one_by_one(block, ends, start, last, dim, ones);
            let got = entry_group(avx512, block, ends, start, last, dim, ones);
            assert_eq!(
                got.map(kept),
                want.map(kept),
                "{:?} from {start} after {last}, dim {dim}, ones {ones}",
                String::from_utf8_lossy(block)
            );
            if got.is_some() {
                taken += 1;
            } else {
                refused += 1;
            }
        }
        // Both answers, often.
        assert!(
            taken > 10_000 && refused > 10_000,
            "{taken} taken, {refused} refused"
        );
    }
}
