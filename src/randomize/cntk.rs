//! CNTK's `BlockRandomizer` order, reproduced exactly (the `randomizer = "cntk"` compatibility
//! mode).
//!
//! For each sweep CNTK shuffles the chunks ([`chunk_order`]), lays the shuffled chunks end to
//! end, gives each one a randomization window of neighbouring chunks ([`chunk_windows`]), and
//! then shuffles the sequences so that every sequence ends up inside the window of the chunk
//! it is delivered in ([`sweep_order`]). Both shuffles draw from their own
//! [`Mt19937_64`] seeded with `seed + sweep`, and reduce each draw with `%`, so a given layout,
//! window, seed and sweep always gives the same order, the one CNTK gives.
//!
//! The window rules and the swap loop are shared with the default randomizer
//! ([`super::block`]); only the generator, the `%` draws and the naive chunk shuffle are
//! CNTK's own.
//!
//! Everything here is pure and single-threaded: the functions plan a whole sweep from the chunk
//! layout alone and never touch data. CNTK randomizes incrementally, a window at a time; the
//! whole-sweep loop implemented here gives exactly the same result.
//!
//! **Seeds.** CNTK casts the chunk-shuffle seed to `unsigned long`, which keeps all 64 bits on
//! Linux (LP64) but only the low 32 bits on Windows (LLP64). We follow the Linux behaviour and
//! never truncate, so a `seed + sweep` of 2^32 or more gives the order of CNTK on Linux, not the
//! one of CNTK on Windows. Below 2^32 the two agree.

use super::engine::{self, modulo_draw, naive_shuffle, Scheme};
use super::mt19937::Mt19937_64;
use super::Window;

pub use super::{chunk_windows, SweepOrder};

/// The window type under its historical name in this module: the same type as
/// [`Window`], shared by both randomizers.
pub type CntkWindow = Window;

/// CNTK's choices: `std::mt19937_64` seeded with `seed + sweep` for both shuffles, `%` draws,
/// the naive chunk shuffle.
pub(crate) struct Cntk;

impl Scheme for Cntk {
    const FORWARD_ONLY: bool = false;

    type Rng = Mt19937_64;

    fn chunk_rng(seed: u64, sweep: u64) -> Mt19937_64 {
        Mt19937_64::new(seed.wrapping_add(sweep))
    }

    fn sequence_rng(seed: u64, sweep: u64) -> Mt19937_64 {
        Mt19937_64::new(seed.wrapping_add(sweep))
    }

    #[inline]
    fn draw(rng: &mut Mt19937_64, n: u64) -> u64 {
        modulo_draw(rng, n)
    }

    fn shuffle_chunks(rng: &mut Mt19937_64, chunks: &mut [u32]) {
        naive_shuffle(rng, chunks, modulo_draw);
    }
}

/// The chunk shuffle of sweep `sweep`: the original chunk at each randomized position.
///
/// Starting from the identity permutation of `chunk_count` chunks, for each position `i` in
/// order a draw `j = rng() % chunk_count` over the *whole* range is swapped with `i`. This is
/// the biased "naive" shuffle CNTK uses, reproduced as is. The generator is an
/// [`Mt19937_64`] seeded with `seed + sweep` (wrapping), with no truncation of the seed to 32
/// bits (the Linux behaviour; see the module documentation).
///
/// # Panics
///
/// If `chunk_count` exceeds `u32::MAX` (CNTK's chunk ids are 32-bit too).
pub fn chunk_order(chunk_count: usize, seed: u64, sweep: u64) -> Vec<u32> {
    engine::chunk_order::<Cntk>(chunk_count, seed, sweep)
}

/// The delivery order of every sequence in sweep `sweep`, CNTK's `BlockRandomizer` order.
///
/// `sequence_samples[c]` lists, for original chunk `c`, the sample count of each of its
/// sequences in file order (a sequence's index length E). Chunks may be empty.
///
/// The chunks are shuffled by [`chunk_order`] and given windows by [`chunk_windows`]. The
/// sequences of the sweep are laid out in randomized-chunk order, each remembering its home
/// chunk (the randomized chunk it came from). Then, with a second, independent
/// [`Mt19937_64`] also seeded with `seed + sweep`, for each position `t` in order: let `c` be
/// the randomized chunk containing position `t` and `[posBegin, posEnd)` the sequence positions
/// of the chunks in `c`'s window; draw `j = posBegin + rng() % (posEnd - posBegin)` until the
/// sequence now at `j` has its home chunk in `c`'s window and the sequence now at `t` has its
/// home chunk in the window of the chunk containing `j`; then swap the two. Every draw,
/// accepted or not, consumes one output of the generator.
///
/// Every position always holds a sequence whose home chunk lies in that position's window (it
/// holds at the start and every swap keeps it), so `j = t` is always acceptable and the
/// rejection loop ends. A chunk without sequences owns no positions and is never the chunk
/// containing a position, so no empty range is ever drawn from.
///
/// Memory is O(sequences) of `u32`s: two per sequence while shuffling (each sequence's
/// index within its chunk and its home chunk, side by side, so that a swap moves one
/// 8-byte slot) plus the two per sequence of the result, and O(chunks) for the layout and
/// windows.
///
/// # Panics
///
/// If there are more than `u32::MAX` chunks or more than `u32::MAX` sequences in the sweep.
pub fn sweep_order(
    sequence_samples: &[Vec<u64>],
    window: CntkWindow,
    seed: u64,
    sweep: u64,
) -> SweepOrder {
    engine::sweep_order::<Cntk>(sequence_samples, window, seed, sweep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The mock of CNTK's `ReaderLibTests.cpp`: `chunks` chunks of `per_chunk` one-sample
    /// sequences; sequence `i` of chunk `c` holds the value `c * per_chunk + i`.
    fn mock(chunks: usize, per_chunk: usize) -> Vec<Vec<u64>> {
        vec![vec![1; per_chunk]; chunks]
    }

    /// The mock values of a sweep, in delivery order.
    fn values(order: &SweepOrder, per_chunk: u32) -> Vec<u32> {
        order
            .sequences
            .iter()
            .map(|&(c, i)| c * per_chunk + i)
            .collect()
    }

    fn mock_values(
        chunks: usize,
        per_chunk: usize,
        window: CntkWindow,
        seed: u64,
        sweep: u64,
    ) -> Vec<u32> {
        values(
            &sweep_order(&mock(chunks, per_chunk), window, seed, sweep),
            per_chunk as u32,
        )
    }

    // Test vectors of CNTK's ReaderLibTests.cpp (CNTK-BEHAVIOUR.md §5.3, first table).

    #[test]
    fn cntk_5x2_whole_window_sweep_0() {
        assert_eq!(
            mock_values(5, 2, CntkWindow::Samples(u64::MAX), 0, 0),
            [6, 3, 1, 5, 9, 0, 4, 2, 7, 8]
        );
    }

    #[test]
    fn cntk_5x2_whole_window_sweep_1() {
        assert_eq!(
            mock_values(5, 2, CntkWindow::Samples(u64::MAX), 0, 1),
            [3, 0, 8, 4, 7, 5, 2, 9, 1, 6]
        );
    }

    #[test]
    fn cntk_5x2_window_4_samples() {
        assert_eq!(
            mock_values(5, 2, CntkWindow::Samples(4), 0, 0),
            [8, 9, 1, 0, 6, 7, 2, 3, 4, 5]
        );
    }

    #[test]
    fn cntk_10x2_window_18_samples() {
        assert_eq!(
            mock_values(10, 2, CntkWindow::Samples(18), 0, 0),
            [18, 19, 7, 14, 6, 9, 8, 15, 5, 2, 10, 13, 16, 17, 1, 4, 3, 12, 11, 0]
        );
    }

    // Derived vectors (CNTK-BEHAVIOUR.md §5.3, second table).

    #[test]
    fn derived_5x2_window_128_chunks() {
        let order = sweep_order(&mock(5, 2), CntkWindow::Chunks(128), 0, 0);
        assert_eq!(order.chunks, [4, 0, 3, 1, 2]);
        assert_eq!(values(&order, 2), [6, 3, 1, 5, 9, 0, 4, 2, 7, 8]);
    }

    #[test]
    fn derived_5x2_window_1_chunk() {
        let order = sweep_order(&mock(5, 2), CntkWindow::Chunks(1), 0, 0);
        assert_eq!(order.chunks, [4, 0, 3, 1, 2]);
        assert_eq!(values(&order, 2), [8, 9, 0, 1, 7, 6, 2, 3, 4, 5]);
    }

    #[test]
    fn derived_5x2_window_2_chunks() {
        let order = sweep_order(&mock(5, 2), CntkWindow::Chunks(2), 0, 0);
        assert_eq!(order.chunks, [4, 0, 3, 1, 2]);
        assert_eq!(values(&order, 2), [0, 8, 9, 1, 6, 7, 2, 3, 5, 4]);
    }

    #[test]
    fn derived_10x2_window_3_chunks() {
        let order = sweep_order(&mock(10, 2), CntkWindow::Chunks(3), 0, 0);
        assert_eq!(order.chunks, [4, 7, 3, 9, 1, 2, 8, 6, 5, 0]);
        assert_eq!(
            values(&order, 2),
            [14, 9, 8, 7, 15, 6, 19, 3, 5, 18, 2, 16, 12, 4, 13, 17, 10, 0, 11, 1]
        );
    }

    #[test]
    fn derived_one_chunk_of_5() {
        for (seed, expected) in [
            (0, [4, 0, 3, 1, 2]),
            (1, [1, 0, 3, 2, 4]),
            (2, [1, 4, 2, 0, 3]),
        ] {
            for window in [
                CntkWindow::Chunks(128),
                CntkWindow::Chunks(0),
                CntkWindow::Samples(u64::MAX),
            ] {
                let order = sweep_order(&mock(1, 5), window, seed, 0);
                assert_eq!(order.chunks, [0]);
                assert_eq!(values(&order, 5), expected, "seed {seed}, {window:?}");
            }
        }
    }

    #[test]
    fn chunk_order_matches_derived_vectors() {
        assert_eq!(chunk_order(5, 0, 0), [4, 0, 3, 1, 2]);
        assert_eq!(chunk_order(10, 0, 0), [4, 7, 3, 9, 1, 2, 8, 6, 5, 0]);
    }

    #[test]
    fn seed_and_sweep_add() {
        assert_eq!(chunk_order(7, 3, 4), chunk_order(7, 0, 7));
        assert_eq!(chunk_order(7, u64::MAX, 1), chunk_order(7, 0, 0));
        assert_eq!(
            sweep_order(&mock(5, 2), CntkWindow::Samples(4), 2, 3),
            sweep_order(&mock(5, 2), CntkWindow::Samples(4), 5, 0)
        );
    }

    #[test]
    fn chunk_windows_chunk_based_rule() {
        // w = 3, n = 5: w/2 = 1, so chunk 1 starts at 0 (1 > 1 is false); the tail is clamped.
        let w = chunk_windows(&[1; 5], CntkWindow::Chunks(3));
        assert_eq!(w, [0..3, 0..3, 1..4, 2..5, 2..5]);
        // w = 0 is treated as 1.
        assert_eq!(
            chunk_windows(&[1; 3], CntkWindow::Chunks(0)),
            [0..1, 1..2, 2..3]
        );
        // A window larger than the corpus covers everything.
        assert_eq!(
            chunk_windows(&[1; 3], CntkWindow::Chunks(u64::MAX)),
            [0..3, 0..3, 0..3]
        );
    }

    #[test]
    fn chunk_windows_sample_based_rule() {
        // Five chunks of 2 samples, W = 4 (h = 2): starts 0, 2, 4, 6, 8. The begin moves once
        // the chunk starts more than 2 samples after it; the end never grows, since the next
        // chunk always ends at least 4 samples after the chunk's start.
        let w = chunk_windows(&[2; 5], CntkWindow::Samples(4));
        assert_eq!(w, [0..1, 0..2, 1..3, 2..4, 3..5]);
        // The whole sweep.
        assert_eq!(
            chunk_windows(&[2; 3], CntkWindow::Samples(u64::MAX)),
            [0..3, 0..3, 0..3]
        );
    }

    #[test]
    fn degenerate_layouts() {
        for window in [
            CntkWindow::Chunks(0),
            CntkWindow::Chunks(2),
            CntkWindow::Samples(0),
            CntkWindow::Samples(3),
        ] {
            // No chunks.
            assert_eq!(sweep_order(&[], window, 0, 0), SweepOrder::default());
            assert!(chunk_windows(&[], window).is_empty());
            // Only empty chunks.
            let order = sweep_order(&[vec![], vec![], vec![]], window, 1, 2);
            assert_eq!(order.chunks.len(), 3);
            assert!(order.sequences.is_empty());
            // Empty chunks between full ones, and zero-sample sequences.
            let layout = vec![vec![], vec![0, 2], vec![], vec![1], vec![], vec![3, 0, 1]];
            let order = sweep_order(&layout, window, 9, 0);
            let mut seen = order.sequences.clone();
            seen.sort_unstable();
            assert_eq!(seen, [(1, 0), (1, 1), (3, 0), (5, 0), (5, 1), (5, 2)]);
            // One chunk of one sequence.
            assert_eq!(sweep_order(&[vec![4]], window, 0, 0).sequences, [(0, 0)]);
        }
    }

    fn window_strategy() -> impl Strategy<Value = CntkWindow> {
        prop_oneof![
            (0u64..25).prop_map(CntkWindow::Chunks),
            (0u64..40).prop_map(CntkWindow::Samples),
            Just(CntkWindow::Chunks(u64::MAX)),
            Just(CntkWindow::Samples(u64::MAX)),
        ]
    }

    proptest! {
        #[test]
        fn sweep_order_is_a_windowed_permutation(
            layout in prop::collection::vec(prop::collection::vec(0u64..5, 0..6), 0..20),
            window in window_strategy(),
            seed in any::<u64>(),
            sweep in any::<u64>(),
        ) {
            let order = sweep_order(&layout, window, seed, sweep);

            let mut chunks = order.chunks.clone();
            chunks.sort_unstable();
            prop_assert_eq!(chunks, (0..layout.len() as u32).collect::<Vec<_>>());

            let mut seen = order.sequences.clone();
            seen.sort_unstable();
            let all: Vec<(u32, u32)> = layout
                .iter()
                .enumerate()
                .flat_map(|(c, seqs)| (0..seqs.len() as u32).map(move |i| (c as u32, i)))
                .collect();
            prop_assert_eq!(seen, all);

            // Every sequence is delivered inside the window of the chunk it is delivered in.
            let mut position_of = vec![0u32; layout.len()];
            for (k, &c) in order.chunks.iter().enumerate() {
                position_of[c as usize] = k as u32;
            }
            let samples: Vec<u64> = order.chunks.iter().map(|&c| layout[c as usize].iter().sum()).collect();
            let windows = chunk_windows(&samples, window);
            let mut t = 0usize;
            for (k, &c) in order.chunks.iter().enumerate() {
                for _ in 0..layout[c as usize].len() {
                    let home = position_of[order.sequences[t].0 as usize];
                    prop_assert!(windows[k].contains(&home));
                    t += 1;
                }
            }
        }

        #[test]
        fn chunk_windows_contain_their_chunk(
            samples in prop::collection::vec(0u64..8, 0..30),
            window in window_strategy(),
        ) {
            let windows = chunk_windows(&samples, window);
            prop_assert_eq!(windows.len(), samples.len());
            for (i, w) in windows.iter().enumerate() {
                prop_assert!(w.contains(&(i as u32)), "chunk {} window {:?}", i, w);
                prop_assert!(w.end as usize <= samples.len());
            }
        }
    }
}
