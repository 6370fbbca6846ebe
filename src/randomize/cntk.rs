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
//! Everything here is pure and single-threaded: the functions plan a whole sweep from the chunk
//! layout alone and never touch data. CNTK randomizes incrementally, a window at a time; the
//! whole-sweep loop implemented here gives exactly the same result.
//!
//! **Seeds.** CNTK casts the chunk-shuffle seed to `unsigned long`, which keeps all 64 bits on
//! Linux (LP64) but only the low 32 bits on Windows (LLP64). We follow the Linux behaviour and
//! never truncate, so a `seed + sweep` of 2^32 or more gives the order of CNTK on Linux, not the
//! one of CNTK on Windows. Below 2^32 the two agree.

use std::ops::Range;

use super::mt19937::Mt19937_64;

/// The size of the randomization window, CNTK's `randomizationWindow` together with
/// `sampleBasedRandomizationWindow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CntkWindow {
    /// A window of this many chunks (`sampleBasedRandomizationWindow = false`); 0 is treated as
    /// 1.
    Chunks(u64),
    /// A window of this many samples (`sampleBasedRandomizationWindow = true`); `u64::MAX`
    /// (CNTK's `SIZE_MAX`) means the whole sweep.
    Samples(u64),
}

/// The order of one sweep.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepOrder {
    /// The original chunk at each randomized chunk position.
    pub chunks: Vec<u32>,
    /// Every sequence of the sweep, as (original chunk, index of the sequence within that chunk
    /// in file order), in delivery order.
    pub sequences: Vec<(u32, u32)>,
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
    let n = u32::try_from(chunk_count).expect("chunk_order: more than u32::MAX chunks");
    let mut perm: Vec<u32> = (0..n).collect();
    let mut rng = Mt19937_64::new(seed.wrapping_add(sweep));
    for i in 0..perm.len() {
        let j = (rng.next_u64() % u64::from(n)) as usize;
        perm.swap(i, j);
    }
    perm
}

/// The randomization window of each randomized chunk: `result[i]` is the range `[begin, end)`
/// of randomized chunk positions that chunk `i` may exchange sequences with. It always
/// contains `i`.
///
/// `chunk_samples_in_randomized_order[i]` is the sample count of the chunk at randomized
/// position `i` (only its length matters for [`CntkWindow::Chunks`]).
///
/// - [`CntkWindow::Chunks`]`(w)`: with `w = 0` taken as 1, the window of chunk `i` is
///   `[b, b + w)` where `b = i - w/2` if `i > w/2` and 0 otherwise (integer division, so the
///   window is asymmetric); if it runs past the last chunk it becomes `[max(0, n - w), n)`.
/// - [`CntkWindow::Samples`]`(W)`, with `h = W/2`: chunk 0 starts from `[0, 1)` and every
///   other chunk from the window of its predecessor; the begin advances while the chunk's
///   sample start minus the begin chunk's sample start exceeds `h`; the window is then
///   stretched to contain the chunk itself; finally the end advances while it is below `n` and
///   the sample end of the chunk at `end` minus the chunk's sample start is less than `h`.
///
/// # Panics
///
/// If there are more than `u32::MAX` chunks.
pub fn chunk_windows(
    chunk_samples_in_randomized_order: &[u64],
    window: CntkWindow,
) -> Vec<Range<u32>> {
    let n = u32::try_from(chunk_samples_in_randomized_order.len())
        .expect("chunk_windows: more than u32::MAX chunks");
    match window {
        CntkWindow::Chunks(w) => {
            let half = w / 2;
            let size = w.max(1);
            let n64 = u64::from(n);
            (0..n64)
                .map(|i| {
                    // `i - w/2` if `i > w/2`, else 0.
                    let mut begin = i.saturating_sub(half);
                    let mut end = begin.saturating_add(size);
                    if end > n64 {
                        end = n64;
                        begin = n64.saturating_sub(size);
                    }
                    // Both are at most n, which fits in u32.
                    begin as u32..end as u32
                })
                .collect()
        }
        CntkWindow::Samples(w) => {
            let half = w / 2;
            let samples = chunk_samples_in_randomized_order;
            // starts[k] = sample position of randomized chunk k; starts[n] = sweep size.
            let mut starts = Vec::with_capacity(samples.len() + 1);
            let mut position = 0u64;
            starts.push(0u64);
            for &s in samples {
                position = position.saturating_add(s);
                starts.push(position);
            }
            let mut windows = Vec::with_capacity(samples.len());
            let (mut begin, mut end) = (0u32, 1u32);
            for i in 0..n {
                let iu = i as usize;
                while starts[iu] - starts[begin as usize] > half {
                    begin += 1;
                }
                begin = begin.min(i);
                end = end.max(i + 1);
                while end < n && starts[end as usize + 1] - starts[iu] < half {
                    end += 1;
                }
                windows.push(begin..end);
            }
            windows
        }
    }
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
/// Memory is O(sequences) of `u32`s: one `u32` per sequence for the working permutation plus
/// the two `u32`s per sequence of the result, and O(chunks) for the layout and windows.
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
    let chunks = chunk_order(sequence_samples.len(), seed, sweep);
    let n = chunks.len();

    // Layout of the randomized chunks: sample counts and sequence starts.
    let chunk_samples: Vec<u64> = chunks
        .iter()
        .map(|&c| {
            sequence_samples[c as usize]
                .iter()
                .fold(0u64, |a, &s| a.saturating_add(s))
        })
        .collect();
    let windows = chunk_windows(&chunk_samples, window);
    // seq_starts[k] = first sequence position of randomized chunk k; seq_starts[n] = total.
    let mut seq_starts: Vec<u32> = Vec::with_capacity(n + 1);
    let mut total = 0u32;
    seq_starts.push(0);
    for &c in &chunks {
        let count = u32::try_from(sequence_samples[c as usize].len()).ok();
        total = count
            .and_then(|count| total.checked_add(count))
            .expect("sweep_order: more than u32::MAX sequences in a sweep");
        seq_starts.push(total);
    }

    // The randomized chunk containing sequence position p (< total): the last chunk starting
    // at or before p, which is never an empty chunk.
    let chunk_of = |p: u32| -> usize { seq_starts[..n].partition_point(|&s| s <= p) - 1 };

    // perm[t] = the initial position (in randomized-chunk layout) of the sequence now at t.
    let mut perm: Vec<u32> = (0..total).collect();
    let mut rng = Mt19937_64::new(seed.wrapping_add(sweep));
    let mut c = 0usize;
    for t in 0..total {
        while c + 1 < n && seq_starts[c + 1] <= t {
            c += 1;
        }
        let win = &windows[c];
        let pos_begin = seq_starts[win.start as usize];
        let pos_end = seq_starts[win.end as usize];
        if pos_end <= pos_begin {
            // Nothing to draw from; cannot happen, since c owns t and lies in its own window.
            continue;
        }
        let range = u64::from(pos_end - pos_begin);
        loop {
            // The remainder is below range, so the sum stays below pos_end.
            let j = pos_begin + (rng.next_u64() % range) as u32;
            let home_j = chunk_of(perm[j as usize]) as u32;
            if !win.contains(&home_j) {
                continue;
            }
            let home_t = chunk_of(perm[t as usize]) as u32;
            if !windows[chunk_of(j)].contains(&home_t) {
                continue;
            }
            perm.swap(t as usize, j as usize);
            break;
        }
    }

    let sequences = perm
        .into_iter()
        .map(|p| {
            let k = chunk_of(p);
            (chunks[k], p - seq_starts[k])
        })
        .collect();
    SweepOrder { chunks, sequences }
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
