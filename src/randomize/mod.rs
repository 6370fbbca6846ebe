//! The randomizers: they decide the order in which the sequences of the corpus are delivered
//! in each sweep.
//!
//! Both randomizers follow CNTK's block randomization: each sweep shuffles the chunks, lays the
//! shuffled chunks end to end, gives each one a randomization window of neighbouring chunks
//! ([`chunk_windows`], sized by a [`Window`]), and then shuffles the sequences so that every
//! sequence ends up inside the window of the chunk it is delivered in. The result is a
//! [`SweepOrder`]. They differ only in the generator and in how random numbers are turned into
//! shuffles:
//!
//! - [`block`] is the default randomizer: `xoshiro256++`, unbiased bounded draws and a
//!   Fisher-Yates chunk shuffle;
//! - [`cntk`] reproduces CNTK's `BlockRandomizer` exactly (`randomizer = "cntk"`), on top of
//!   the 64-bit Mersenne Twister of [`mt19937`], with CNTK's `%` reductions and its biased
//!   chunk shuffle.
//!
//! The window rules and the sequence swap loop are one implementation shared by both, so the
//! two randomizers keep exactly the same window semantics (and the same memory bounds).

use std::ops::Range;

pub mod block;
pub mod cntk;
mod engine;
pub mod mt19937;

pub(crate) use engine::{shuffle_sweep, ChunkSize, Slot};

/// The size of the randomization window, CNTK's `randomizationWindow` together with
/// `sampleBasedRandomizationWindow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Window {
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

/// The randomization window of each randomized chunk: `result[i]` is the range `[begin, end)`
/// of randomized chunk positions that chunk `i` may exchange sequences with. It always
/// contains `i`. These are CNTK's rules, used by both randomizers.
///
/// `chunk_samples_in_randomized_order[i]` is the sample count of the chunk at randomized
/// position `i` (only its length matters for [`Window::Chunks`]).
///
/// - [`Window::Chunks`]`(w)`: with `w = 0` taken as 1, the window of chunk `i` is
///   `[b, b + w)` where `b = i - w/2` if `i > w/2` and 0 otherwise (integer division, so the
///   window is asymmetric); if it runs past the last chunk it becomes `[max(0, n - w), n)`.
/// - [`Window::Samples`]`(W)`, with `h = W/2`: chunk 0 starts from `[0, 1)` and every
///   other chunk from the window of its predecessor; the begin advances while the chunk's
///   sample start minus the begin chunk's sample start exceeds `h`; the window is then
///   stretched to contain the chunk itself; finally the end advances while it is below `n` and
///   the sample end of the chunk at `end` minus the chunk's sample start is less than `h`.
///
/// # Panics
///
/// If there are more than `u32::MAX` chunks.
pub fn chunk_windows(chunk_samples_in_randomized_order: &[u64], window: Window) -> Vec<Range<u32>> {
    let n = u32::try_from(chunk_samples_in_randomized_order.len())
        .expect("chunk_windows: more than u32::MAX chunks");
    match window {
        Window::Chunks(w) => {
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
        Window::Samples(w) => {
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
