//! Data parallelism: which worker of K keeps which sequence of a global minibatch.
//!
//! Every worker walks the same global timeline and forms the same global minibatches; each
//! keeps the sequences it owns. The rule is a pure function of the corpus, the order-shaping
//! configuration, the sweep and the rank:
//!
//! - **By chunk** when the order is randomized and both the corpus and the randomization
//!   window span at least [`CHUNKS_PER_WORKER`]·K chunks: a sequence belongs to worker
//!   `(position of its chunk in the sweep's chunk order) mod K`. Each worker loads only its
//!   own chunks, about 1/K of them, and because a minibatch mixes the sequences of a whole
//!   window of chunks, each worker's share of it is about 1/K of its samples.
//! - **By sequence** otherwise (file order, a small corpus or a small window): the sequence
//!   at position i of the sweep's order belongs to worker `i mod K`. Every worker gets data
//!   whenever a sweep has at least K sequences (CNTK gave everything to rank 0 when a file
//!   was one chunk), and each worker's share of a minibatch differs from 1/K by at most one
//!   sequence.
//!
//! Either way the shares of a sweep are disjoint and their union is the sweep, every worker
//! reaches the end of the data at the same call, and a checkpoint (a global position) is the
//! same on every worker, so a job may resume with another K.

use crate::config::WindowSize;
use crate::index::CorpusIndex;
use crate::timeline::order::OrderSettings;

/// How many chunks per worker the corpus and the window must span for chunk sharding.
pub const CHUNKS_PER_WORKER: u64 = 4;

/// The rule sharing sequences among workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sharding {
    /// This worker's 0-based rank.
    pub rank: u32,
    /// Number of workers.
    pub workers: u32,
    /// Whether sequences are owned by chunk (else by position in the sweep).
    pub by_chunk: bool,
}

impl Sharding {
    /// The rule for worker `rank` of `workers` reading `index` with `settings`.
    pub fn choose(index: &CorpusIndex, settings: &OrderSettings, rank: u32, workers: u32) -> Self {
        let workers = workers.max(1);
        let chunks = index.chunks.len() as u64;
        let window_chunks = match settings.window {
            WindowSize::Chunks(n) => n.max(1),
            WindowSize::Samples(n) => {
                // The window's span in chunks of average size.
                let per_chunk = (index.total_samples() / chunks.max(1)).max(1);
                n / per_chunk
            }
        };
        let needed = CHUNKS_PER_WORKER * u64::from(workers);
        Sharding {
            rank,
            workers,
            by_chunk: workers > 1
                && settings.randomize
                && chunks >= needed
                && window_chunks >= needed,
        }
    }

    /// Whether this worker owns sequence `ordinal`, found at position `position` of the
    /// sweep's order, whose chunk order puts chunk c at `chunk_position[c]`.
    pub fn owns(
        &self,
        index: &CorpusIndex,
        ordinal: u32,
        position: usize,
        chunk_position: &[u32],
    ) -> bool {
        if self.workers == 1 {
            return true;
        }
        let share = if self.by_chunk {
            let chunk = index.chunks.partition_point(|c| c.sequences.end <= ordinal);
            u64::from(chunk_position[chunk])
        } else {
            position as u64
        };
        share % u64::from(self.workers) == u64::from(self.rank)
    }
}
