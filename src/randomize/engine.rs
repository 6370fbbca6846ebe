//! The block randomization shared by [`super::cntk`] and [`super::block`]: the chunk shuffle
//! driver and the whole-sweep sequence swap loop with its two home-chunk conditions, generic
//! over a [`Scheme`] that supplies the generator, the bounded draw and the chunk shuffle.
//!
//! Everything here is pure and single-threaded: a sweep is planned from the chunk layout alone.
//! CNTK randomizes incrementally, a window at a time; the whole-sweep loop gives exactly the
//! same result.

use super::{chunk_windows, SweepOrder, Window};
use crate::prefetch::prefetch_hint;

/// A source of uniformly distributed 64-bit words.
pub(crate) trait Generator {
    /// The next 64-bit output.
    fn next_u64(&mut self) -> u64;
}

impl Generator for super::mt19937::Mt19937_64 {
    #[inline]
    fn next_u64(&mut self) -> u64 {
        super::mt19937::Mt19937_64::next_u64(self)
    }
}

impl Generator for rand_xoshiro::Xoshiro256PlusPlus {
    #[inline]
    fn next_u64(&mut self) -> u64 {
        rand_xoshiro::rand_core::RngCore::next_u64(self)
    }
}

/// How a randomizer turns seeds into generators and generator output into shuffles.
pub(crate) trait Scheme {
    /// The generator of both shuffles.
    type Rng: Generator;
    /// The generator of the chunk shuffle of sweep `sweep`.
    fn chunk_rng(seed: u64, sweep: u64) -> Self::Rng;
    /// The generator of the sequence swaps of sweep `sweep`.
    fn sequence_rng(seed: u64, sweep: u64) -> Self::Rng;
    /// A draw in `[0, n)`; `n` is at least 1.
    fn draw(rng: &mut Self::Rng, n: u64) -> u64;
    /// Shuffles the chunk permutation in place.
    fn shuffle_chunks(rng: &mut Self::Rng, chunks: &mut [u32]);
    /// Whether position `t` draws its partner only among the positions not yet settled
    /// (`j >= t`, within the window): Fisher-Yates when the window covers the sweep. CNTK
    /// draws over the whole window (its "naive" shuffle).
    const FORWARD_ONLY: bool;
}

/// CNTK's draw: `rng() % n`. Biased towards the small values whenever `n` does not divide
/// 2^64 (negligibly for small `n`).
#[inline]
pub(super) fn modulo_draw<G: Generator>(rng: &mut G, n: u64) -> u64 {
    rng.next_u64() % n
}

/// An unbiased draw in `[0, n)`, `n >= 1`: Lemire's multiply-shift (the high word of
/// `x * n`) with rejection of the `2^64 mod n` low products that would make some results
/// more likely than others. Rejects with probability below `n / 2^64`, and only computes the
/// division when the low word is below `n`.
#[inline]
pub(super) fn lemire_draw<G: Generator>(rng: &mut G, n: u64) -> u64 {
    debug_assert!(n > 0, "lemire_draw: empty range");
    let mut m = u128::from(rng.next_u64()) * u128::from(n);
    if (m as u64) < n {
        // 2^64 mod n: the number of low words to reject so that every result has exactly
        // floor(2^64 / n) accepted inputs.
        let threshold = n.wrapping_neg() % n;
        while (m as u64) < threshold {
            m = u128::from(rng.next_u64()) * u128::from(n);
        }
    }
    (m >> 64) as u64
}

/// CNTK's "naive" shuffle: for each position `i` in order, swap it with a draw over the
/// *whole* slice. Not uniform over permutations; reproduced for compatibility.
pub(super) fn naive_shuffle<G: Generator>(
    rng: &mut G,
    items: &mut [u32],
    mut draw: impl FnMut(&mut G, u64) -> u64,
) {
    let n = items.len() as u64;
    for i in 0..items.len() {
        let j = draw(rng, n) as usize;
        items.swap(i, j);
    }
}

/// The Fisher-Yates (Durstenfeld) shuffle: for `i` from the last position down to 1, swap it
/// with a draw in `[0, i]`. Uniform over permutations when the draw is unbiased.
pub(super) fn fisher_yates<G: Generator>(
    rng: &mut G,
    items: &mut [u32],
    mut draw: impl FnMut(&mut G, u64) -> u64,
) {
    for i in (1..items.len()).rev() {
        let j = draw(rng, i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// The chunk shuffle of sweep `sweep`: the original chunk at each randomized position.
///
/// # Panics
///
/// If `chunk_count` exceeds `u32::MAX`.
pub(super) fn chunk_order<S: Scheme>(chunk_count: usize, seed: u64, sweep: u64) -> Vec<u32> {
    let n = u32::try_from(chunk_count).expect("chunk_order: more than u32::MAX chunks");
    let mut perm: Vec<u32> = (0..n).collect();
    let mut rng = S::chunk_rng(seed, sweep);
    S::shuffle_chunks(&mut rng, &mut perm);
    perm
}

/// What the swap loop moves: one slot per sequence of the sweep, which knows the randomized
/// chunk (its position in the sweep's chunk order) the sequence was laid out in, its home.
/// The slot carries whatever its user needs of the sequence, so that the shuffled slots are
/// the order, read in one pass, without a lookup per sequence.
pub(crate) trait Slot: Copy {
    /// The sequence's home chunk.
    fn home(&self) -> u32;
}

/// A chunk as the randomizers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkSize {
    /// Its sequences.
    pub(crate) sequences: u32,
    /// The sum of its sequences' sample counts.
    pub(crate) samples: u64,
}

/// The whole-sweep order (see [`super::cntk::sweep_order`] for the loop, which this
/// implements for any [`Scheme`]), of chunks of `sizes`: the chunk order, and the slots
/// `slot(home, chunk, within)` makes of each sequence (sequence `within` of original chunk
/// `chunk`, at randomized position `home`), in delivery order.
///
/// # Panics
///
/// If there are more than `u32::MAX` chunks or more than `u32::MAX` sequences in the sweep.
pub(crate) fn shuffle_sweep<S: Scheme, P: Slot>(
    sizes: &[ChunkSize],
    window: Window,
    seed: u64,
    sweep: u64,
    mut slot: impl FnMut(u32, u32, u32) -> P,
) -> (Vec<u32>, Vec<P>) {
    let chunks = chunk_order::<S>(sizes.len(), seed, sweep);
    let n = chunks.len();

    // Layout of the randomized chunks: sample counts and sequence starts.
    let chunk_samples: Vec<u64> = chunks.iter().map(|&c| sizes[c as usize].samples).collect();
    let windows = chunk_windows(&chunk_samples, window);
    // seq_starts[k] = first sequence position of randomized chunk k; seq_starts[n] = total.
    let mut seq_starts: Vec<u32> = Vec::with_capacity(n + 1);
    let mut total = 0u32;
    seq_starts.push(0);
    for &c in &chunks {
        total = total
            .checked_add(sizes[c as usize].sequences)
            .expect("sweep_order: more than u32::MAX sequences in a sweep");
        seq_starts.push(total);
    }

    // The sequences in randomized-chunk layout, each slot knowing its home chunk (so that
    // no lookup is needed per draw), moved as one: a swap touches one place per position.
    let mut slots: Vec<P> = Vec::with_capacity(total as usize);
    for (home, &c) in chunks.iter().enumerate() {
        slots.extend((0..sizes[c as usize].sequences).map(|within| slot(home as u32, c, within)));
    }
    let mut rng = S::sequence_rng(seed, sweep);
    // When every window spans every chunk (a window at least as large as the corpus: the
    // default on files of up to 4 GiB), both checks of a draw always pass: the draws
    // do not depend on the slots, so they are made ahead.
    if windows.iter().all(|w| w.start == 0 && w.end as usize == n) {
        swap_across_sweep::<S, P>(&mut rng, &mut slots);
    } else {
        swap_within_windows::<S, P>(&mut rng, &mut slots, &seq_starts, &windows);
    }
    (chunks, slots)
}

/// The swap loop of [`shuffle_sweep`] for any windows: position `t` of the sweep (in
/// randomized-chunk layout, `seq_starts` per chunk) swaps with a draw among the positions of
/// its chunk's window (from `t` on, if [`Scheme::FORWARD_ONLY`]), drawn again until the
/// sequence drawn has its home chunk in that window, and the sequence at `t` in the window of
/// the chunk drawn.
fn swap_within_windows<S: Scheme, P: Slot>(
    rng: &mut S::Rng,
    slots: &mut [P],
    seq_starts: &[u32],
    windows: &[std::ops::Range<u32>],
) {
    let n = windows.len();
    let total = slots.len() as u32;
    let mut c = 0usize;
    for t in 0..total {
        while c + 1 < n && seq_starts[c + 1] <= t {
            c += 1;
        }
        let win = &windows[c];
        let mut pos_begin = seq_starts[win.start as usize];
        let pos_end = seq_starts[win.end as usize];
        if S::FORWARD_ONLY {
            // t lies in its own chunk, which is in its window, so the range keeps t.
            pos_begin = pos_begin.max(t);
        }
        if pos_end <= pos_begin {
            // Nothing to draw from; cannot happen, since c owns t and lies in its own window.
            continue;
        }
        let range = u64::from(pos_end - pos_begin);
        loop {
            // The draw is below range, so the sum stays below pos_end.
            let j = pos_begin + S::draw(rng, range) as u32;
            if !win.contains(&slots[j as usize].home()) {
                continue;
            }
            // The layout chunk holding position j: one of the window's chunks.
            let first = win.start as usize;
            let layout_j =
                first + seq_starts[first..win.end as usize].partition_point(|&s| s <= j) - 1;
            if !windows[layout_j].contains(&slots[t as usize].home()) {
                continue;
            }
            slots.swap(t as usize, j as usize);
            break;
        }
    }
}

/// How many draws [`swap_across_sweep`] makes ahead of its swaps.
const DRAWS_AHEAD: usize = 16;

/// The swap loop of [`shuffle_sweep`] when every window spans the whole sweep: position `t`
/// swaps with a draw among all positions (from `t` on, if [`Scheme::FORWARD_ONLY`]). The
/// same draws in the same order as [`swap_within_windows`], whose checks all pass then; but
/// since a draw does not depend on the slots, each is made [`DRAWS_AHEAD`] positions early
/// and the slot it names prefetched, so that the swaps' cache misses (positions drawn at
/// random from megabytes of slots) overlap rather than wait on each other (the
/// `sweep_order/128-chunks` bench, 250,000 sequences: 1.31 ms with the loop of
/// [`swap_within_windows`], 0.63 ms with this one).
fn swap_across_sweep<S: Scheme, P: Slot>(rng: &mut S::Rng, slots: &mut [P]) {
    let total = slots.len();
    let mut draw = |t: usize| {
        let begin = if S::FORWARD_ONLY { t } else { 0 };
        begin + S::draw(rng, (total - begin) as u64) as usize
    };
    // The draw of position t, at t % DRAWS_AHEAD, from DRAWS_AHEAD positions before t.
    let mut drawn = [0usize; DRAWS_AHEAD];
    for (t, partner) in drawn.iter_mut().enumerate().take(total) {
        *partner = draw(t);
        prefetch_hint(&slots[*partner]);
    }
    for t in 0..total {
        let partner = drawn[t % DRAWS_AHEAD];
        if t + DRAWS_AHEAD < total {
            let next = draw(t + DRAWS_AHEAD);
            drawn[t % DRAWS_AHEAD] = next;
            prefetch_hint(&slots[next]);
        }
        slots.swap(t, partner);
    }
}

/// A sequence as [`sweep_order`] shuffles it: its index within its chunk, and its home.
#[derive(Clone, Copy)]
struct Within {
    within: u32,
    home: u32,
}

impl Slot for Within {
    #[inline]
    fn home(&self) -> u32 {
        self.home
    }
}

/// The delivery order of every sequence in sweep `sweep` (see [`super::cntk::sweep_order`]
/// for the loop, which this implements for any [`Scheme`]).
///
/// # Panics
///
/// If there are more than `u32::MAX` chunks or more than `u32::MAX` sequences in the sweep.
pub(super) fn sweep_order<S: Scheme>(
    sequence_samples: &[Vec<u64>],
    window: Window,
    seed: u64,
    sweep: u64,
) -> SweepOrder {
    let sizes: Vec<ChunkSize> = sequence_samples
        .iter()
        .map(|chunk| ChunkSize {
            sequences: u32::try_from(chunk.len())
                .expect("sweep_order: more than u32::MAX sequences in a sweep"),
            samples: chunk.iter().fold(0u64, |a, &s| a.saturating_add(s)),
        })
        .collect();
    let (chunks, slots) = shuffle_sweep::<S, _>(&sizes, window, seed, sweep, |home, _, within| {
        Within { within, home }
    });
    let sequences = slots
        .into_iter()
        .map(|s| (chunks[s.home as usize], s.within))
        .collect();
    SweepOrder { chunks, sequences }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_xoshiro::rand_core::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// A generator that replays a fixed list of outputs.
    struct Script(std::collections::VecDeque<u64>);

    impl Script {
        fn new(outputs: &[u64]) -> Self {
            Script(outputs.iter().copied().collect())
        }
    }

    impl Generator for Script {
        fn next_u64(&mut self) -> u64 {
            self.0.pop_front().expect("script exhausted")
        }
    }

    #[test]
    fn lemire_rejects_exactly_the_excess_inputs() {
        // n = 3: 2^64 mod 3 = 1, so only the input whose low product word is 0 (x = 0) is
        // rejected; the next output is used instead.
        let mut rng = Script::new(&[0, u64::MAX]);
        assert_eq!(lemire_draw(&mut rng, 3), 2);
        assert!(rng.0.is_empty());
        // x = 1 is not rejected: 1 * 3 = 3 >= 1.
        let mut rng = Script::new(&[1]);
        assert_eq!(lemire_draw(&mut rng, 3), 0);
        // n = 3 * 2^62: 2^64 mod n = 2^62, and x * n mod 2^64 = (3x mod 4) * 2^62, so exactly
        // the multiples of 4 are rejected; x = 4q + r (r = 1, 2, 3) gives 3q + r - 1.
        let n = 3u64 << 62;
        for q in [0u64, 1, 12345, (u64::MAX >> 2) - 1, u64::MAX >> 2] {
            for r in 1..4u64 {
                let mut rng = Script::new(&[4 * q + r]);
                assert_eq!(lemire_draw(&mut rng, n), 3 * q + r - 1, "q {q} r {r}");
            }
            let mut rng = Script::new(&[4 * q, 4 * q + 1]);
            assert_eq!(lemire_draw(&mut rng, n), 3 * q, "rejected {q}");
            assert!(rng.0.is_empty());
        }
        // n = 1 always gives 0, n = 2 takes the top bit, without rejection.
        let mut rng = Script::new(&[0, u64::MAX, 1 << 63, (1 << 63) - 1]);
        assert_eq!(lemire_draw(&mut rng, 1), 0);
        assert_eq!(lemire_draw(&mut rng, 1), 0);
        assert_eq!(lemire_draw(&mut rng, 2), 1);
        assert_eq!(lemire_draw(&mut rng, 2), 0);
        assert!(rng.0.is_empty());
    }

    #[test]
    fn lemire_draw_is_unbiased_on_small_n() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for n in [1u64, 2, 3, 5, 6, 7] {
            let draws = 60_000 * n;
            let mut counts = vec![0u64; n as usize];
            for _ in 0..draws {
                let d = lemire_draw(&mut rng, n);
                assert!(d < n);
                counts[d as usize] += 1;
            }
            // Each count is 60000 on average with a standard deviation below 245; allow 5%
            // (over 12 standard deviations).
            for (value, &count) in counts.iter().enumerate() {
                assert!(
                    count.abs_diff(60_000) < 3_000,
                    "n {n}: value {value} drawn {count} times"
                );
            }
        }
    }

    #[test]
    fn lemire_is_unbiased_where_modulo_is_not() {
        // n = 3 * 2^62: with `x % n` the values below 2^62 have two preimages and the others
        // one, so the bottom third of the range comes up half the time; Lemire's draw gives
        // one third.
        let n = 3u64 << 62;
        let third = 1u64 << 62;
        let draws = 30_000u32;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let low = (0..draws)
            .filter(|_| lemire_draw(&mut rng, n) < third)
            .count() as f64
            / f64::from(draws);
        assert!((low - 1.0 / 3.0).abs() < 0.02, "lemire: {low}");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let low = (0..draws)
            .filter(|_| modulo_draw(&mut rng, n) < third)
            .count() as f64
            / f64::from(draws);
        assert!((low - 0.5).abs() < 0.02, "modulo: {low}");
    }

    /// A slot numbered by its place before the swaps.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Numbered {
        number: u32,
        home: u32,
    }

    impl Slot for Numbered {
        fn home(&self) -> u32 {
            self.home
        }
    }

    /// Swaps the slots of chunks of `chunk_sequences` sequences, whose windows each span
    /// every chunk, with draws ahead and with the general loop (whose checks then always
    /// pass), and checks that both give the same order and leave the generator alike.
    fn check_draws_ahead<S: Scheme>(chunk_sequences: &[u32], seed: u64, sweep: u64) {
        let mut slots = Vec::new();
        let mut seq_starts = vec![0u32];
        for (home, &count) in chunk_sequences.iter().enumerate() {
            for _ in 0..count {
                let number = slots.len() as u32;
                let home = home as u32;
                slots.push(Numbered { number, home });
            }
            seq_starts.push(slots.len() as u32);
        }
        let windows = vec![0..chunk_sequences.len() as u32; chunk_sequences.len()];
        let mut ahead = slots.clone();
        let mut ahead_rng = S::sequence_rng(seed, sweep);
        swap_across_sweep::<S, _>(&mut ahead_rng, &mut ahead);
        let mut general = slots;
        let mut general_rng = S::sequence_rng(seed, sweep);
        swap_within_windows::<S, _>(&mut general_rng, &mut general, &seq_starts, &windows);
        assert_eq!(
            ahead, general,
            "{chunk_sequences:?} seed {seed} sweep {sweep}"
        );
        assert_eq!(ahead_rng.next_u64(), general_rng.next_u64());
    }

    proptest::proptest! {
        #[test]
        fn draws_made_ahead_give_the_general_loops_order(
            // Sweeps shorter and longer than the draws made ahead, empty chunks among them.
            chunk_sequences in proptest::collection::vec(0u32..40, 1..6),
            seed in 0u64..1_000,
            sweep in 0u64..4,
        ) {
            check_draws_ahead::<super::super::block::Block>(&chunk_sequences, seed, sweep);
            check_draws_ahead::<super::super::cntk::Cntk>(&chunk_sequences, seed, sweep);
        }
    }

    #[test]
    fn shuffles_are_permutations_and_draw_as_documented() {
        // Fisher-Yates on 4 items draws in [0, 4), [0, 3), [0, 2), in that order.
        let mut seen = Vec::new();
        let mut items = [0u32, 1, 2, 3];
        fisher_yates(&mut Script::new(&[0, 0, 0]), &mut items, |rng, n| {
            seen.push(n);
            rng.next_u64()
        });
        assert_eq!(seen, [4, 3, 2]);
        // Each draw of 0 brings the current first item to position i: 0,1,2,3 -> 3,1,2,0
        // -> 2,1,3,0 -> 1,2,3,0.
        assert_eq!(items, [1, 2, 3, 0]);
        // The naive shuffle draws over the whole slice at every position.
        let mut seen = Vec::new();
        let mut items = [0u32, 1, 2];
        naive_shuffle(&mut Script::new(&[2, 2, 0]), &mut items, |rng, n| {
            seen.push(n);
            rng.next_u64()
        });
        assert_eq!(seen, [3, 3, 3]);
        // swap(0, 2) -> 2,1,0; swap(1, 2) -> 2,0,1; swap(2, 0) -> 1,0,2.
        assert_eq!(items, [1, 0, 2]);
        // Empty and single-item slices draw nothing from Fisher-Yates.
        fisher_yates(&mut Script::new(&[]), &mut [], modulo_draw);
        fisher_yates(&mut Script::new(&[]), &mut [5], modulo_draw);
    }
}
