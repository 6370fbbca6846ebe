//! The order of one sweep: the index's sequences as the configured randomizer lays them out
//! (SPEC §4): file order with `randomize = false`, else block randomization ([`block`]) or
//! CNTK's exact orders ([`cntk`]), seeded with `randomizationSeed + sweep`.
//!
//! The order holds the ordinals of the sequences that have samples (4 bytes each: the whole
//! sweep is laid out at once, beside the 24 bytes per sequence of the index). Sequences
//! without samples take no place on the timeline and are left out.
//!
//! [`block`]: crate::randomize::block
//! [`cntk`]: crate::randomize::cntk

use crate::config::{RandomizerKind, ReaderConfig, WindowSize};
use crate::index::CorpusIndex;
use crate::randomize::{block, cntk, Window};

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
            randomize: config.randomize,
            randomizer: config.randomizer,
            window: config.window(),
            seed: config.randomization_seed,
        }
    }
}

/// One sweep's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepPlan {
    /// Ordinals of the sequences with samples, in delivery order.
    pub sequences: Vec<u32>,
    /// Per chunk of the index, its position in the sweep's chunk order.
    pub chunk_position: Vec<u32>,
}

/// The order of sweep `sweep` of `index`.
pub fn sweep_order(index: &CorpusIndex, settings: &OrderSettings, sweep: u64) -> SweepPlan {
    let has_samples = |o: &u32| index.sequences[*o as usize].samples > 0;
    if !settings.randomize {
        return SweepPlan {
            sequences: (0..index.sequences.len() as u32)
                .filter(has_samples)
                .collect(),
            chunk_position: (0..index.chunks.len() as u32).collect(),
        };
    }
    let samples: Vec<Vec<u64>> = (0..index.chunks.len() as u32)
        .map(|c| {
            index
                .chunk_sequences(c)
                .iter()
                .map(|e| u64::from(e.samples))
                .collect()
        })
        .collect();
    let window = match settings.window {
        WindowSize::Chunks(n) => Window::Chunks(n),
        WindowSize::Samples(n) => Window::Samples(n),
    };
    let order = match settings.randomizer {
        RandomizerKind::Block => block::sweep_order(&samples, window, settings.seed, sweep),
        RandomizerKind::Cntk => cntk::sweep_order(&samples, window, settings.seed, sweep),
    };
    drop(samples);
    let mut chunk_position = vec![0; index.chunks.len()];
    for (position, &chunk) in order.chunks.iter().enumerate() {
        chunk_position[chunk as usize] = position as u32;
    }
    let sequences = order
        .sequences
        .iter()
        .map(|&(chunk, i)| index.chunk(chunk).sequences.start + i)
        .filter(has_samples)
        .collect();
    SweepPlan {
        sequences,
        chunk_position,
    }
}
