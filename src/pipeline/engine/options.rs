//! How the threaded engine runs: [`PipelineOptions`], which
//! [`MinibatchSource::with_options`](super::MinibatchSource::with_options) takes, and the
//! bounds [`PipelineOptions::check`] holds them to ([`MAX_THREADS`], [`MAX_PREFETCH`]).

use super::PART_BYTES;
use crate::source::SourceError;

/// Most loader threads, and most packer threads, an engine runs
/// ([`PipelineOptions::check`]): far more than any machine's cores, and few enough that the
/// threads' queues, sized from them, fit in memory.
pub const MAX_THREADS: usize = 1024;

/// Most deliveries a packer queues ahead of the consumer ([`PipelineOptions::prefetch`]):
/// the queues are allocated whole from it, so it is bounded (a depth beyond a few changes
/// nothing but the memory held).
pub const MAX_PREFETCH: usize = 256;

/// How the threaded engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineOptions {
    /// Loader threads parsing chunks (at least 1).
    pub loader_threads: usize,
    /// Packer threads (at least 1). They pack the minibatches a batch of planned minibatches
    /// at a time, and the consumer takes the batches in plan order whichever packer has one:
    /// the output does not depend on their number.
    pub packer_threads: usize,
    /// Deliveries each packer queues ahead of the consumer (at least 1). A delivery is one
    /// minibatch, or several small ones (about [`OUTPUT_BATCH_BYTES`] at most, and at most a
    /// planned batch), so that small minibatches cost one handoff per delivery.
    ///
    /// [`OUTPUT_BATCH_BYTES`]: super::OUTPUT_BATCH_BYTES
    pub prefetch: usize,
    /// Bytes a loader parses at once: chunks are split into parts of about this size at
    /// sequence boundaries, so that one chunk is parsed on every loader (default 1 MiB). A
    /// corpus of fewer than four such parts per loader is cut into smaller ones, four per
    /// loader (of at least 64 KiB).
    pub part_bytes: u64,
    /// Most bytes of parsed data the engine keeps (default: no limit beyond the window).
    /// The chunk cache keeps its parts within the budget less the room of the minibatches
    /// that can be queued or held (from the largest packed so far and the deliveries that
    /// can be alive at once) and of the loaders' buffers; it evicts the least recently used
    /// parts to stay there, also with `keepDataInMemory`. The parts of the minibatches being
    /// packed are never evicted, and random minibatches need a part per sequence: so under a
    /// budget smaller than what a window of several chunks and the look-ahead hold parsed,
    /// the packers read and parse each sequence they pack on their own instead (once a
    /// sweep, in `SourceCounters::quick_bytes_read`; slower, the same minibatches). In file
    /// order a budget smaller than the parts of a minibatch is exceeded by them.
    pub memory_budget: Option<u64>,
    /// On a cold start (no valid index cache), parse the parts the index scan reads and keep
    /// their sequences for the loaders, which then need not read and parse them again
    /// (default true; see `index::stash`). Only when every part will be loaded in the first
    /// sweep within the memory the engine holds anyway (one deserializer read whole, no
    /// memory budget, and randomized with a window of chunks covering the corpus, or in file
    /// order with a corpus of at most two chunks), up to [`STASH_BYTES`] of parsed
    /// sequences. The output is the same either way; with it, a cold start reads
    /// faster but its first minibatch comes after the whole corpus is parsed, not just
    /// scanned.
    ///
    /// [`STASH_BYTES`]: super::STASH_BYTES
    pub parse_while_indexing: bool,
    /// Pin each packer thread to a CPU of its own (default false): only on Linux, and only
    /// when the packers are exactly as many as the CPUs the process may use, so that no CPU
    /// is taken from the process (see module `affinity`; [`SourceCounters::pinned_packers`]
    /// tells whether they were). The minibatches are the same either way. On the project's
    /// 2-core VM, with the default two packers, `ctf bench` (which turns it on) read the 100
    /// MB gen_ctf.py files in 0.83 (seq), 0.90 (ragged), 0.89 (sparse) and 0.96 (dense) of
    /// the time (medians of 15 alternating runs), the phase after the index no longer
    /// bimodal: without it the kernel often ran both packers on one CPU.
    ///
    /// [`SourceCounters::pinned_packers`]: crate::source::SourceCounters::pinned_packers
    pub pin_packers: bool,
}

impl PipelineOptions {
    /// Refuses options no engine can run: more than [`MAX_THREADS`] loader or packer threads,
    /// or a prefetch depth over [`MAX_PREFETCH`] (0 threads or a depth of 0 count as 1).
    pub fn check(&self) -> Result<(), SourceError> {
        for (what, threads) in [
            ("loader", self.loader_threads),
            ("packer", self.packer_threads),
        ] {
            if threads > MAX_THREADS {
                return Err(SourceError::Usage(format!(
                    "{threads} {what} threads: at most {MAX_THREADS} are allowed"
                )));
            }
        }
        if self.prefetch > MAX_PREFETCH {
            return Err(SourceError::Usage(format!(
                "a prefetch depth of {}: at most {MAX_PREFETCH} is allowed",
                self.prefetch
            )));
        }
        Ok(())
    }
}

impl Default for PipelineOptions {
    /// The available cores (at most [`MAX_THREADS`]) as loaders and as packers, 2 deliveries
    /// ahead.
    fn default() -> Self {
        let cores = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_THREADS);
        PipelineOptions {
            loader_threads: cores,
            packer_threads: cores,
            prefetch: 2,
            part_bytes: PART_BYTES,
            memory_budget: None,
            parse_while_indexing: true,
            pin_packers: false,
        }
    }
}
