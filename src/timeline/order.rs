//! The order of one sweep: the index's sequences as the configured randomizer lays them out
//! (SPEC §4): file order with `randomize = false`, else block randomization ([`block`]) or
//! CNTK's exact orders ([`cntk`]), seeded with `randomizationSeed + sweep`.
//!
//! The order holds the ordinals of the sequences that have samples and their sample counts
//! (8 bytes each: the whole sweep is laid out at once, beside the 24 bytes per sequence of
//! the index). It is collected in the memory of the randomizer's slots, which carry the
//! same and their home chunk (12 bytes each), so planning a sweep allocates one array of
//! the sweep's size. Sequences without samples take no place on the timeline and are left
//! out.
//!
//! [`block`]: crate::randomize::block
//! [`cntk`]: crate::randomize::cntk

use crate::config::{RandomizerKind, ReaderConfig, WindowSize};
use crate::index::CorpusIndex;
use crate::randomize::{block, chunk_windows, cntk, shuffle_sweep, ChunkSize, Slot, Window};

/// What shapes a sweep's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OrderSettings {
    /// Whether sequences are shuffled at all.
    pub randomize: bool,
    /// Which randomizer.
    pub randomizer: RandomizerKind,
    /// The randomization window.
    pub window: WindowSize,
    /// `randomizationSeed`.
    pub seed: u64,
}

impl OrderSettings {
    /// The settings `config` asks for.
    pub fn of(config: &ReaderConfig) -> Self {
        OrderSettings {
            randomize: config.shuffles(),
            randomizer: config.randomizer,
            window: config.window(),
            seed: config.randomization_seed,
        }
    }
}

/// One sweep's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepPlan {
    /// The sequences with samples, in delivery order.
    pub sequences: Vec<OrderedSequence>,
    /// Per chunk of the index, its position in the sweep's chunk order.
    pub chunk_position: Vec<u32>,
}

/// A sequence of a sweep's order: what walking the timeline reads of it, beside it, so that
/// the walk reads the order in order instead of the index at random.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderedSequence {
    /// Its ordinal in the index.
    pub ordinal: u32,
    /// Its sample count, as the index has it.
    pub samples: u32,
}

/// The chunks (index ids) of the first randomization window of sweep `sweep`, in the
/// sweep's chunk order: its first sequences are drawn from them alone. Cheap (the chunks are
/// shuffled, no sequence is), so that loading can begin while [`sweep_order`] works.
/// Empty when the order is not randomized.
pub fn first_window_chunks(index: &CorpusIndex, settings: &OrderSettings, sweep: u64) -> Vec<u32> {
    if !settings.randomize {
        return Vec::new();
    }
    let n = index.chunks.len();
    let chunks = match settings.randomizer {
        RandomizerKind::Block => block::chunk_order(n, settings.seed, sweep),
        RandomizerKind::Cntk => cntk::chunk_order(n, settings.seed, sweep),
    };
    let samples: Vec<u64> = chunks
        .iter()
        .map(|&c| index.chunks[c as usize].samples)
        .collect();
    match chunk_windows(&samples, window_of(settings)).first() {
        Some(first) => chunks[first.start as usize..first.end as usize].to_vec(),
        None => Vec::new(),
    }
}

/// The randomizer's window for `settings`.
fn window_of(settings: &OrderSettings) -> Window {
    match settings.window {
        WindowSize::Chunks(n) => Window::Chunks(n),
        WindowSize::Samples(n) => Window::Samples(n),
    }
}

/// The order of sweep `sweep` of `index`.
pub fn sweep_order(index: &CorpusIndex, settings: &OrderSettings, sweep: u64) -> SweepPlan {
    if !settings.randomize {
        let sequences = index
            .sequences
            .iter()
            .enumerate()
            .filter(|(_, e)| e.samples > 0)
            .map(|(o, e)| OrderedSequence {
                ordinal: o as u32,
                samples: e.samples,
            })
            .collect();
        return SweepPlan {
            sequences,
            chunk_position: (0..index.chunks.len() as u32).collect(),
        };
    }
    let sizes: Vec<ChunkSize> = index
        .chunks
        .iter()
        .map(|c| ChunkSize {
            sequences: c.sequences.len() as u32,
            samples: c.samples,
        })
        .collect();
    let window = window_of(settings);
    // Each slot carries what the order keeps of its sequence, read in file order here, so
    // that the shuffled slots are the order, without a lookup in a random order per
    // sequence.
    let slot = |home: u32, chunk: u32, within: u32| {
        let ordinal = index.chunk(chunk).sequences.start + within;
        OrderSlot {
            sequence: OrderedSequence {
                ordinal,
                samples: index.sequences[ordinal as usize].samples,
            },
            home,
        }
    };
    let (chunks, slots) = match settings.randomizer {
        RandomizerKind::Block => {
            shuffle_sweep::<block::Block, _>(&sizes, window, settings.seed, sweep, slot)
        }
        RandomizerKind::Cntk => {
            shuffle_sweep::<cntk::Cntk, _>(&sizes, window, settings.seed, sweep, slot)
        }
    };
    let mut chunk_position = vec![0; index.chunks.len()];
    for (position, &chunk) in chunks.iter().enumerate() {
        chunk_position[chunk as usize] = position as u32;
    }
    // The swaps moved the sequences without samples too (the order depends on them): they
    // leave now. The order is collected in the slots' memory (a filter and a map keep the
    // vector's allocation), then shrunk in place: no second array of the sweep's size.
    let mut sequences: Vec<OrderedSequence> = slots
        .into_iter()
        .filter(|s| s.sequence.samples > 0)
        .map(|s| s.sequence)
        .collect();
    sequences.shrink_to_fit();
    SweepPlan {
        sequences,
        chunk_position,
    }
}

/// A sequence as [`sweep_order`] shuffles it: what the order keeps of it, and its home (the
/// position in the sweep's chunk order of the chunk it was laid out in before the swaps),
/// for the randomizer's window checks.
#[derive(Clone, Copy)]
struct OrderSlot {
    sequence: OrderedSequence,
    home: u32,
}

impl Slot for OrderSlot {
    #[inline]
    fn home(&self) -> u32 {
        self.home
    }
}
