//! The threaded engine, [`MinibatchSource`]: loader threads parse chunks into the shared
//! [`ChunkCache`]; a planner ("randomizer") thread walks the timeline, computing each sweep's
//! order, asks for the chunks of the sequences ahead of it and deals batches of planned
//! minibatches to the packer threads, each to the packer with the fewest queued, telling the
//! consumer which packer has it (its route); each packer packs its batches into a bounded
//! queue of deliveries, and the consumer takes the deliveries along the routes. Dealing by
//! load rather than by turns lets a packer that gets less of a core (it shares one with the
//! planner and the consumer) pack fewer batches instead of holding the other back.
//! [`PipelineOptions::pin_packers`] pins the packers one per CPU where they fill the
//! process's CPUs (module `affinity`), so that the system does not run two on one CPU.
//!
//! Planner and packers run exactly the reference engine's steps ([`crate::source`]): the
//! same timeline, the same packing. Invalid sequences are charged and warnings reported by
//! the consumer as it takes the minibatch that holds (or would hold) them, so in timeline
//! order whatever packer packed it, and never for minibatches prepared and then dropped.
//! Loaders only parse, in any order, so the output does not depend on the number of threads
//! or on timing. A restore, a new partition or a new minibatch size stops the planner and
//! the packers (their prepared minibatches are dropped) and starts new ones at the position
//! after the last minibatch handed out; the loaders and the cache stay.
//!
//! On a cold start the index build may parse the parts it reads (see
//! [`PipelineOptions::parse_while_indexing`]): a part that such a parse holds whole is taken
//! from it by its first load instead of read and parsed, and is the same part either way.
//!
//! Every channel is bounded: loads (the cache's capacity in parts), the routes (every batch
//! that can be queued, packed or delivered), and per packer its batches of planned
//! minibatches and its deliveries (`prefetch` each). Shutdown: dropping the engine drops the
//! routes and the delivery queues, which ends each packer at its next send and the planner
//! at its; the cache is closed, which wakes anyone waiting for a chunk, and the
//! loads channel, which ends the loaders; every thread is joined. An error reaches the
//! consumer in order, as an item of the queue; a loader that panics stores the panic as its
//! chunk's error, and a planner or packer that panics ends its queue, which the consumer
//! sees as an error.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::chunks::{ChunkLoader, LoadError, ParsedChunk};
use crate::config::{ReaderConfig, WindowSize};
use crate::index::build::{build_index, build_index_stashed, IndexingOptions, OpenedIndex};
use crate::index::stash::{StashPiece, StashRequest};
use crate::index::{CorpusIndex, JoinedIndex, NO_MATCH};
use crate::minibatch::{MinibatchPool, PooledMinibatch};
use crate::parser::{Element, ParsedSequences};
use crate::pipeline::affinity;
use crate::pipeline::cache::{ChunkCache, Request};
use crate::pipeline::part_finder::PartFinder;
use crate::reader::DiagnosticSink;
use crate::source::{
    check_checkpoint, check_limits, check_partition, limit_end, minibatch_end, Charging,
    LoadedChunk, ReadLimits, SourceCounters, SourceError,
};
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::channel::{bounded, Receiver, Sender};
use crate::sync::thread::{Builder, JoinHandle};
// The state the threads share and the parsed parts are counted by the shim's `Arc` (loom's
// under `cfg(loom)`, which then also checks that none is leaked); the index and the pool
// are immutable or self-locking and stay on `std`'s.
use crate::sync::{Arc as ChunkArc, Arc as SharedArc, Mutex};
use crate::timeline::checkpoint::{fingerprint, Checkpoint};
use crate::timeline::order::{first_window_chunks, OrderSettings};
use crate::timeline::schedule::MbSchedule;
use crate::timeline::{Timeline, TimelineError};

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
    /// packed are never evicted, so a budget smaller than they need is exceeded by them; a
    /// budget smaller than the window and look-ahead makes parts be read again.
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

type Loaded<T> = crate::pipeline::cache::Loaded<LoadedChunk<T>, LoadError>;
type Cache<T> = ChunkCache<LoadedChunk<T>, LoadError>;

/// A packed minibatch and what its sequences carry to the error budget, which the consumer
/// charges when it takes the minibatch (so in timeline order, whatever packer packed it).
struct Packed<T: Element> {
    batch: PooledMinibatch<T>,
    charges: Vec<Charge<T>>,
}

/// A sequence whose part has warnings or invalid sequences: what
/// [`Charging::charge_sequence`] needs (the part stays pinned until charged).
struct Charge<T> {
    part: ChunkArc<LoadedChunk<T>>,
    within: u32,
    ordinal: u32,
}

/// What a packer hands the consumer.
enum Output<T: Element> {
    /// Packed minibatches in timeline order; `ends_turn` on the last ones of the packer's
    /// planned batch (the next minibatch then comes from the packer of the next route).
    Packed {
        minibatches: Vec<Packed<T>>,
        ends_turn: bool,
    },
    /// The end of the read.
    End,
    /// The next minibatch cannot be packed: charge `charges` (those of its sequences before
    /// the failure), then report `error`.
    Failed {
        charges: Vec<Charge<T>>,
        error: SourceError,
    },
}

/// A packer sends its packed minibatches at the end of its planned batch, or once they hold
/// this many bytes.
pub const OUTPUT_BATCH_BYTES: usize = 1 << 20;

/// Bytes of text a batch of planned minibatches holds at most, by the corpus's average bytes
/// per sample: about half a delivery ([`OUTPUT_BATCH_BYTES`]). The consumer takes a packer's
/// minibatches a batch at a time, so a packer that is ahead holds its packed batches in its
/// queue of `prefetch` deliveries; with batches of a delivery or less it packs whole batches
/// ahead there instead of stopping part way through one.
const BATCH_TEXT_BYTES: u64 = OUTPUT_BATCH_BYTES as u64 / 2;

/// [`Plan::batch_span`]: the look-ahead shared among the batches the packers' queues hold,
/// and [`BATCH_TEXT_BYTES`] of text at `bytes_per_sample`; at least one sample.
fn batch_span(ahead_samples: u64, batches_queued: usize, bytes_per_sample: u64) -> u64 {
    let per_batch = ahead_samples / (batches_queued as u64).max(1);
    per_batch
        .min(BATCH_TEXT_BYTES / bytes_per_sample.max(1))
        .max(1)
}

/// The default of [`PipelineOptions::part_bytes`].
pub const PART_BYTES: u64 = 1 << 20;

/// The smallest part [`part_size`] cuts a small corpus into.
const SMALLEST_PART_BYTES: u64 = 64 << 10;

/// The part size for a corpus of `total` bytes on `loaders` loader threads: `asked`
/// ([`PipelineOptions::part_bytes`]), or on a corpus of fewer than four such parts per
/// loader, parts that give every loader four (of at least [`SMALLEST_PART_BYTES`]), so that
/// the loaders finish a small corpus together rather than one parsing the last part alone.
fn part_size(asked: u64, total: u64, loaders: usize) -> u64 {
    let four_each = total
        .div_ceil(4 * loaders.max(1) as u64)
        .max(SMALLEST_PART_BYTES);
    asked.min(four_each).max(1)
}

/// The parts chunks are loaded in: the cache's unit.
struct Parts {
    /// Per part: its chunk and its sequences (indices within the chunk).
    parts: Vec<(u32, std::ops::Range<u32>)>,
    /// Per chunk: its parts (ids).
    of_chunk: Vec<std::ops::Range<u32>>,
    /// The part of each index ordinal.
    finder: PartFinder,
}

/// Where a part's sequences are in the stash: the piece parsed while indexing that holds
/// them, and which of the piece's sequences they are; `None` for a part to read and parse.
type PiecePlace = Option<(u32, std::ops::Range<u32>)>;

/// The sequences of a chunk a stash piece holds, as a part: the chunk's sequences, and the
/// piece's.
struct Adopted {
    within_chunk: std::ops::Range<u32>,
    piece: u32,
    within_piece: std::ops::Range<u32>,
}

/// The index ordinal of the sequence of file `file` that starts at byte `offset`, if one
/// does.
fn ordinal_at(index: &CorpusIndex, file: u32, offset: u64) -> Option<u32> {
    let chunks = index.files[file as usize].chunks.clone();
    let in_file = &index.chunks[chunks.start as usize..chunks.end as usize];
    let k = chunks.start + in_file.partition_point(|c| c.end() <= offset) as u32;
    let within = sequence_at(index, k, offset)?;
    let c = index.chunks.get(k as usize)?;
    (within < c.sequences.len()).then_some(c.sequences.start + within as u32)
}

/// Which of `chunk`'s sequences starts at byte `offset` of its file (the chunk's sequence
/// count for its end), if one does.
fn sequence_at(index: &CorpusIndex, chunk: u32, offset: u64) -> Option<usize> {
    let c = index.chunks.get(chunk as usize)?;
    let within = u32::try_from(offset.checked_sub(c.start)?).ok()?;
    let entries = index.chunk_sequences(chunk);
    let i = entries.partition_point(|e| e.offset < within);
    match entries.get(i) {
        Some(e) if e.offset == within => Some(i),
        None if offset == c.end() => Some(entries.len()),
        _ => None,
    }
}

impl Parts {
    /// Cuts every chunk into parts of about `part_bytes`, and makes what each of `pieces`
    /// (the sequences parsed while indexing, in file order) holds of a chunk a part of its
    /// own where it can be one (see [`Parts::adoptable`]). Returns the parts and, per part,
    /// its place in the pieces.
    fn new(index: &CorpusIndex, part_bytes: u64, pieces: &[StashPiece]) -> (Self, Vec<PiecePlace>) {
        let mut parts = Vec::new();
        let mut piece_of = Vec::new();
        let mut of_chunk = Vec::with_capacity(index.chunks.len());
        let mut next_piece = 0;
        for chunk in 0..index.chunks.len() as u32 {
            let first_part = parts.len() as u32;
            let c = index.chunk(chunk);
            let entries = index.chunk_sequences(chunk);
            // Cut only after a sequence with samples that is not the chunk's last one, so
            // that sequences without samples stay with the sequence carrying their errors
            // (the next with samples, or the last; see `source::Notes`).
            let last_carrier = entries.iter().rposition(|e| e.samples > 0);
            let may_cut_after =
                |i: usize| entries[i].samples > 0 && last_carrier.is_some_and(|last| i < last);
            // What the pieces overlapping the chunk hold of it. A piece going on past the
            // chunk's end is left for the next chunk too.
            let mut adopted = Vec::new();
            while let Some(piece) = pieces.get(next_piece) {
                if (piece.file, piece.start) >= (c.file, c.end()) {
                    break;
                }
                if let Some(a) = Self::adoptable(index, chunk, piece, &may_cut_after) {
                    adopted.push(Adopted {
                        piece: next_piece as u32,
                        ..a
                    });
                }
                if (piece.file, piece.end) > (c.file, c.end()) {
                    break;
                }
                next_piece += 1;
            }
            let mut adopted = adopted.into_iter().peekable();
            let mut start = 0usize;
            let mut bytes = 0u64;
            let mut i = 0;
            while i < entries.len() {
                if let Some(a) = adopted.next_if(|a| a.within_chunk.start as usize == i) {
                    if start < i {
                        parts.push((chunk, start as u32..i as u32));
                        piece_of.push(None);
                    }
                    i = a.within_chunk.end as usize;
                    parts.push((chunk, a.within_chunk));
                    piece_of.push(Some((a.piece, a.within_piece)));
                    (start, bytes) = (i, 0);
                    continue;
                }
                bytes += u64::from(entries[i].len);
                if (bytes >= part_bytes && may_cut_after(i)) || i + 1 == entries.len() {
                    parts.push((chunk, start as u32..(i + 1) as u32));
                    piece_of.push(None);
                    (start, bytes) = (i + 1, 0);
                }
                i += 1;
            }
            of_chunk.push(first_part..parts.len() as u32);
        }
        let starts = parts
            .iter()
            .map(|(chunk, within)| index.chunk(*chunk).sequences.start + within.start)
            .collect();
        let parts = Parts {
            finder: PartFinder::new(starts, index.sequences.len() as u32),
            parts,
            of_chunk,
        };
        (parts, piece_of)
    }

    /// The sequences of `chunk` that `piece` holds, if a part can be exactly them: the text
    /// the piece and the chunk share begins and ends at sequences (or at the chunk's ends),
    /// parts may be cut before and after them, and none of them has a repeated id (the parse
    /// while indexing did not know the repeats). Their place among the piece's parsed
    /// sequences: every sequence with samples of a piece (which has no invalid sequence)
    /// was parsed, and none without.
    fn adoptable(
        index: &CorpusIndex,
        chunk: u32,
        piece: &StashPiece,
        may_cut_after: &dyn Fn(usize) -> bool,
    ) -> Option<Adopted> {
        let c = index.chunk(chunk);
        let entries = index.chunk_sequences(chunk);
        let (from, to) = (piece.start.max(c.start), piece.end.min(c.end()));
        if piece.file != c.file || from >= to {
            return None;
        }
        let (first, end) = (
            sequence_at(index, chunk, from)?,
            sequence_at(index, chunk, to)?,
        );
        let cuts = (first == 0 || may_cut_after(first - 1))
            && (end == entries.len() || may_cut_after(end - 1));
        let ordinals = c.sequences.start + first as u32..c.sequences.start + end as u32;
        let repeats = index.repeated.partition_point(|&o| o < ordinals.start)
            != index.repeated.partition_point(|&o| o < ordinals.end);
        if first >= end || !cuts || repeats {
            return None;
        }
        // The piece's sequences before the part: those with samples from its start.
        let counted = |range: std::ops::Range<u32>| -> u32 {
            index.sequences[range.start as usize..range.end as usize]
                .iter()
                .filter(|e| e.samples > 0)
                .count() as u32
        };
        let piece_first = if piece.start < c.start {
            ordinal_at(index, c.file, piece.start)?
        } else {
            ordinals.start
        };
        let before = counted(piece_first..ordinals.start);
        Some(Adopted {
            within_chunk: first as u32..end as u32,
            piece: 0,
            within_piece: before..before + counted(ordinals),
        })
    }

    /// The part holding the sequence of index ordinal `ordinal`.
    #[inline]
    fn part_of_ordinal(&self, ordinal: u32) -> u32 {
        self.finder.find(ordinal)
    }
}

/// State shared by the engine's threads.
struct Shared<T> {
    index: Arc<CorpusIndex>,
    parts: Parts,
    config: ReaderConfig,
    cache: Cache<T>,
    pool: Arc<MinibatchPool<T>>,
    charging: Mutex<Charging>,
    chunks_loaded: AtomicU64,
    bytes_read: AtomicU64,
    /// Bytes read by the packers for first minibatches ([`quick_load`]).
    quick_bytes_read: AtomicU64,
    /// Nanoseconds the loaders spent reading and parsing, summed.
    parse_nanos: AtomicU64,
    /// Nanoseconds the planner spent walking the timeline.
    plan_nanos: AtomicU64,
    /// Nanoseconds the packer spent copying sequences.
    pack_nanos: AtomicU64,
    budget: Option<Budget>,
    /// Heap bytes of the largest minibatch packed so far.
    largest_minibatch: AtomicU64,
    /// The most chunks the planner asks for before it has a sweep's order (see
    /// [`head_start`]): the window's, or 0 under a memory budget. An order that is not
    /// randomized has no first window to ask for.
    head_start_chunks: usize,
    /// Per part, the sequences parsed while indexing that are all of its own
    /// ([`stash_per_part`]), until its first load takes them.
    stash: Mutex<Vec<Option<ParsedSequences<T>>>>,
    /// Parts loaded from [`Shared::stash`].
    parts_from_stash: AtomicU64,
    /// Packers of the current run pinned to a CPU of their own.
    pinned_packers: AtomicU64,
}

/// Most bytes of parsed sequences the index build keeps for the loaders on a cold start
/// (module `index::stash`); the rest of a larger corpus is scanned only, and parsed when
/// its parts are loaded.
pub const STASH_BYTES: u64 = 256 << 20;

/// Whether the index build should parse while it scans, keeping the sequences for the
/// loaders: when every part will be loaded in the first sweep, soon, and within the memory
/// the engine holds anyway. So only for one deserializer read whole (not a worker of
/// several), without a memory budget, and either randomized with a window of chunks covering
/// the corpus, or in file order with a corpus of at most two chunks (the chunk being read
/// and the chunk of look-ahead the cache holds in that mode).
fn wants_stash(config: &ReaderConfig, options: &PipelineOptions) -> bool {
    if !options.parse_while_indexing
        || config.is_composite()
        || config.num_data_partitions > 1
        || options.memory_budget.is_some()
    {
        return false;
    }
    let held_chunks = match config.window() {
        _ if !config.shuffles() => FILE_ORDER_STASH_CHUNKS,
        WindowSize::Chunks(window) => window.max(1),
        WindowSize::Samples(_) => return false,
    };
    let Ok(files) = crate::index::expand_file_patterns(&config.files) else {
        return false;
    };
    let text: u64 = files
        .iter()
        .map(|f| std::fs::metadata(&f.path).map_or(u64::MAX, |m| m.len()))
        .fold(0, u64::saturating_add);
    held_chunks.saturating_mul(config.chunk_size_in_bytes) >= text
}

/// Chunks of text a corpus read in file order may have for its parts to be parsed while
/// indexing ([`wants_stash`]).
const FILE_ORDER_STASH_CHUNKS: u64 = 2;

/// [`PipelineOptions::memory_budget`], and what it must leave to other than the cache.
struct Budget {
    total: u64,
    /// The loaders' buffers.
    fixed: u64,
    /// Deliveries that can be alive at once: queued, being packed, received by the consumer.
    deliveries: u64,
}

impl Budget {
    /// What the cache may hold when the largest minibatch takes `largest` bytes.
    fn for_cache(&self, largest: u64) -> usize {
        // A delivery holds up to a planned batch of minibatches, and stops growing once past
        // OUTPUT_BATCH_BYTES; the consumer holds one or two more. Idle minibatches in the
        // pool were all alive at once before, so they fit in the same room.
        let delivery = (PLAN_BATCH as u64)
            .saturating_mul(largest)
            .min((OUTPUT_BATCH_BYTES as u64).saturating_add(largest));
        let room = self
            .fixed
            .saturating_add(self.deliveries.saturating_mul(delivery))
            .saturating_add(2u64.saturating_mul(largest));
        usize::try_from(self.total.saturating_sub(room)).unwrap_or(usize::MAX)
    }
}

/// What a packer is asked to produce.
#[derive(Clone, Debug)]
struct Plan {
    start: u64,
    size: u64,
    schedule: Option<MbSchedule>,
    end: u64,
    epoch_size: Option<u64>,
    sweep_samples: u64,
    rank: u32,
    workers: u32,
    /// Samples of own sequences the packer keeps requested ahead of what it packs.
    ahead_samples: u64,
    /// Samples a batch of planned minibatches spans at most (beyond its last minibatch).
    /// The packers' queues hold `packers x (prefetch + 1)` batches at most, so this keeps
    /// the slowest packer within the look-ahead of the planner, and the parts it asked for
    /// within the cache's capacity. It is also at most [`BATCH_TEXT_BYTES`] of text at the
    /// corpus's average bytes per sample (see there).
    batch_span: u64,
}

/// Running packers and planner, the plan they follow, and what the consumer received.
struct Packer<T: Element> {
    /// Per packer: its deliveries.
    outputs: Vec<Receiver<Output<T>>>,
    /// The packer of each planned batch, in plan order, from the planner.
    routes: Receiver<usize>,
    /// The packer whose deliveries come next, `None` until the next route is read.
    turn: Option<usize>,
    /// Minibatches received and not yet handed out, in order.
    ready: VecDeque<Packed<T>>,
    /// Whether `ready` ends the current packer's turn.
    ready_ends_turn: bool,
    /// The packers, then the planner.
    threads: Vec<JoinHandle<()>>,
    plan: Plan,
    finished: bool,
    /// The error that ended this packer's run: later calls repeat it instead of reporting
    /// the end of the data, whatever size they ask for (a restore or a new partition drops
    /// the packer, and the next run starts clean).
    failed: Option<String>,
}

impl<T: Element> Packer<T> {
    /// Ends this run with `error`, which later calls repeat.
    fn fail(&mut self, error: &SourceError) {
        self.finished = true;
        self.failed = Some(error.to_string());
    }
}

/// Reads minibatches of a corpus along the global timeline, with loader, planner and packer
/// threads; the same minibatches as [`crate::source::ReferenceSource`].
pub struct MinibatchSource<T: Element> {
    shared: SharedArc<Shared<T>>,
    _opened: OpenedIndex,
    fingerprint: u64,
    sweep_samples: u64,
    end: u64,
    limits: ReadLimits,
    schedule: Option<MbSchedule>,
    rank: u32,
    workers: u32,
    ahead_samples: u64,
    loads: Option<Sender<u32>>,
    loaders: Vec<JoinHandle<()>>,
    packer: Option<Packer<T>>,
    packer_threads: usize,
    prefetch: usize,
    /// Whether to pin the packers ([`PipelineOptions::pin_packers`]).
    pin_packers: bool,
    /// Global position after the last minibatch handed out.
    position: u64,
    minibatches: u64,
    /// The cache's capacity in parts for the window and the look-ahead (`None`: unbounded,
    /// `keepDataInMemory`), and the samples of the window: see
    /// [`fit_cache`](Self::fit_cache).
    window_capacity: Option<usize>,
    window_samples: u64,
    /// Whether the chunks without samples have been charged
    /// ([`Charging::charge_chunks_without_samples`]), so that later calls need not lock.
    sampleless_charged: bool,
    /// Time the consumer waited for minibatches.
    wait_time: Duration,
}

impl<T: Element> MinibatchSource<T> {
    /// Indexes the corpus of `config` (using and writing index caches as `cacheIndex` says)
    /// and starts the threads of [`PipelineOptions::default`]; reading starts at position 0.
    /// Diagnostics go to `sink`.
    pub fn new(
        config: &ReaderConfig,
        limits: ReadLimits,
        sink: DiagnosticSink,
    ) -> Result<Self, SourceError> {
        Self::with_options(config, limits, sink, PipelineOptions::default())
    }

    /// As [`new`](Self::new), with the given threads, prefetch depth, part size and memory
    /// budget.
    pub fn with_options(
        config: &ReaderConfig,
        limits: ReadLimits,
        sink: DiagnosticSink,
        options: PipelineOptions,
    ) -> Result<Self, SourceError> {
        options.check()?;
        check_limits(&limits)?;
        // The scan runs on as many threads as the loaders (the index does not depend on it).
        let indexing = IndexingOptions {
            scan_threads: options
                .loader_threads
                .clamp(1, crate::index::build::MAX_SCAN_THREADS),
            ..IndexingOptions::for_config(config)
        };
        let (opened, pieces) = if wants_stash(config, &options) {
            let request = StashRequest::new::<T>(config, STASH_BYTES);
            build_index_stashed(config, &indexing, request)
        } else {
            build_index(config, &indexing).map(|opened| (opened, Vec::new()))
        }
        .map_err(SourceError::Index)?;
        let index = Arc::clone(&opened.index);
        // What Timeline::new checks, without planning a sweep (the packer does that).
        let sweep_samples = index.total_samples();
        if sweep_samples == 0 {
            // Whatever the corpus holds is invalid or belongs to no sequence: its errors
            // come first (as in the reference).
            Charging::new(config, sink).charge_chunks_without_samples::<T>(&index, config)?;
            return Err(SourceError::Timeline(TimelineError::NoSamples));
        }
        let end = limit_end(&limits, sweep_samples)?;
        let chunks = index.chunks.len().max(1);
        let per_chunk = (sweep_samples / chunks as u64).max(1);
        // The chunks the order draws from at a time: the window, or one in file order.
        let window_chunks = match config.window() {
            _ if !config.shuffles() => 1,
            WindowSize::Chunks(n) => n.clamp(1, chunks as u64) as usize,
            WindowSize::Samples(n) => (n / per_chunk).clamp(1, chunks as u64) as usize,
        };
        let loader_threads = options.loader_threads.max(1);
        // Look ahead by enough chunks to give every loader two parts to parse: one chunk
        // when chunks hold many parts, up to two per loader when a chunk is one part.
        let chunk_bytes = (index.total_bytes() / chunks as u64).max(1);
        let part_size = part_size(options.part_bytes, index.total_bytes(), loader_threads);
        let part_bytes = part_size.min(chunk_bytes);
        let ahead_chunks = (2 * loader_threads as u64 * part_bytes)
            .div_ceil(chunk_bytes)
            .clamp(1, chunks as u64) as usize;
        let (parts, piece_of) = Parts::new(&index, part_size, &pieces);
        let stash = stash_per_part::<T>(&config.inputs, &piece_of, pieces);
        let parts_per_chunk = parts
            .of_chunk
            .iter()
            .map(|r| r.len())
            .max()
            .unwrap_or(1)
            .max(1);
        // The window, the windows the look-ahead reaches into, and one chunk of slack for
        // parts used recently that are no longer needed (LRU keeps them a while).
        let window_parts = (window_chunks + 2 * ahead_chunks + 1) * parts_per_chunk;
        let capacity = (!config.keep_data_in_memory).then_some(window_parts);
        let packer_threads = options.packer_threads.max(1);
        let prefetch = options.prefetch.max(1);
        // Per packer: its queue and the delivery it builds; and the consumer's.
        let deliveries = packer_threads * (prefetch + 1) + 1;
        let pool_size = deliveries * PLAN_BATCH + 2;
        // Room of the loaders' text and parse buffers (about three parts each).
        let loader_room = 3 * loader_threads as u64 * part_bytes;
        let budget = options.memory_budget.map(|budget| Budget {
            total: budget,
            fixed: loader_room,
            deliveries: deliveries as u64,
        });
        let shared = SharedArc::new(Shared {
            parts,
            cache: ChunkCache::new(capacity),
            pool: Arc::new(MinibatchPool::new(&config.inputs, pool_size)),
            budget,
            largest_minibatch: AtomicU64::new(0),
            // A memory budget may hold less than the window: no loads ahead of the order.
            head_start_chunks: match options.memory_budget {
                None => window_chunks,
                Some(_) => 0,
            },
            charging: Mutex::new(Charging::new(config, sink)),
            stash: Mutex::new(stash),
            parts_from_stash: AtomicU64::new(0),
            pinned_packers: AtomicU64::new(0),
            chunks_loaded: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            quick_bytes_read: AtomicU64::new(0),
            parse_nanos: AtomicU64::new(0),
            plan_nanos: AtomicU64::new(0),
            pack_nanos: AtomicU64::new(0),
            config: config.clone(),
            index: Arc::clone(&index),
        });
        if let Some(budget) = &shared.budget {
            shared.cache.set_byte_budget(Some(budget.for_cache(0)));
        }
        // Room for every part the planner may ask for ahead (the cache's capacity), so that
        // it rarely waits for the loaders and keeps handing minibatches to the packer.
        let (loads, queue) = bounded::<u32>(window_parts.max(loader_threads));
        let mut loaders = Vec::with_capacity(loader_threads);
        for i in 0..loader_threads {
            let shared = SharedArc::clone(&shared);
            let queue = queue.clone();
            let spawned = Builder::new()
                .name(format!("ctf-loader-{i}"))
                .spawn(move || run_loader(&shared, &queue));
            match spawned {
                Ok(handle) => loaders.push(handle),
                Err(e) if loaders.is_empty() => {
                    return Err(SourceError::Usage(format!(
                        "cannot start a loader thread: {e}"
                    )))
                }
                Err(_) => break,
            }
        }
        Ok(MinibatchSource {
            fingerprint: fingerprint(&index, config),
            shared,
            _opened: opened,
            sweep_samples,
            end,
            limits,
            schedule: None,
            rank: config.partition_index,
            workers: config.num_data_partitions,
            ahead_samples: per_chunk.saturating_mul(ahead_chunks as u64),
            loads: Some(loads),
            loaders,
            packer: None,
            packer_threads,
            prefetch,
            pin_packers: options.pin_packers,
            position: 0,
            minibatches: 0,
            window_capacity: capacity,
            window_samples: per_chunk.saturating_mul(window_chunks as u64),
            sampleless_charged: false,
            wait_time: Duration::ZERO,
        })
    }

    /// Uses a minibatch-size schedule: [`next_scheduled`](Self::next_scheduled) then takes
    /// the size of the current epoch from it.
    pub fn set_schedule(&mut self, schedule: MbSchedule) {
        self.schedule = Some(schedule);
        self.stop_packer();
    }

    /// The next minibatch of the size the schedule gives for the current epoch (a constant
    /// `size` without a schedule).
    pub fn next_scheduled(&mut self, size: u64) -> Result<Option<PooledMinibatch<T>>, SourceError> {
        let scheduled = self.schedule.is_some();
        self.next_planned(size, scheduled)
    }

    /// The next minibatch of about `size` samples (whole sequences; at least one sequence of
    /// the global timeline), or `None` at the end of the data. With several workers this is
    /// this worker's share, possibly empty; every worker gets `None` at the same call.
    /// Minibatches of the same size are packed ahead; a call with another size drops them
    /// and packs from the current position. After an error, later calls fail too (never
    /// `None`, which would read as a complete run) until a restore.
    pub fn next_minibatch(&mut self, size: u64) -> Result<Option<PooledMinibatch<T>>, SourceError> {
        self.next_planned(size, false)
    }

    fn next_planned(
        &mut self,
        size: u64,
        scheduled: bool,
    ) -> Result<Option<PooledMinibatch<T>>, SourceError> {
        if size == 0 && !scheduled {
            return Err(SourceError::Usage(
                "the minibatch size must be at least 1 sample".to_string(),
            ));
        }
        // A failed run stays failed until a restore or a new partition drops its packer: a
        // new size or schedule does not start a new run past the error (as in the reference).
        if let Some(message) = self.packer.as_ref().and_then(|p| p.failed.as_ref()) {
            return Err(SourceError::Usage(format!(
                "the source failed earlier (restore a checkpoint to retry): {message}"
            )));
        }
        let wanted = self.plan(size, scheduled);
        let restart = match &self.packer {
            Some(p) => {
                p.plan.schedule.is_some() != scheduled || (!scheduled && p.plan.size != size)
            }
            None => true,
        };
        if restart {
            self.stop_packer();
            self.start_packer(wanted)?;
        }
        let Some(packer) = &mut self.packer else {
            return Err(SourceError::Usage("no packer thread".to_string()));
        };
        if !self.sampleless_charged {
            let charged = match self.shared.charging.lock() {
                Ok(mut charging) => charging
                    .charge_chunks_without_samples::<T>(&self.shared.index, &self.shared.config),
                Err(_) => Err(SourceError::Usage(
                    "the error budget was poisoned by a panic".to_string(),
                )),
            };
            if let Err(e) = charged {
                packer.fail(&e);
                return Err(e);
            }
            self.sampleless_charged = true;
        }
        loop {
            if packer.finished {
                return Ok(None);
            }
            if let Some(packed) = packer.ready.pop_front() {
                // What the caller reads first of the next minibatches, two steps ahead.
                if let Some(next) = packer.ready.front() {
                    next.batch.prefetch_buffers();
                }
                if let Some(after) = packer.ready.get(1) {
                    after.batch.prefetch_descriptions();
                }
                if let Err(e) = charge(&self.shared, &packed.charges) {
                    packer.fail(&e);
                    return Err(e);
                }
                let batch = packed.batch;
                self.position = batch.position;
                self.minibatches += 1;
                return Ok(Some(batch));
            }
            if packer.ready_ends_turn {
                packer.turn = None;
                packer.ready_ends_turn = false;
            }
            let started = Instant::now();
            // The packer of the next batch, from its route once the last batch is taken (no
            // route: the planner ended without sending the end, so it panicked).
            packer.turn = packer.turn.or_else(|| packer.routes.recv().ok());
            let Some(output) = packer.turn.and_then(|turn| packer.outputs.get(turn)) else {
                let error = SourceError::Internal(
                    "the planner thread stopped unexpectedly (it panicked)".to_string(),
                );
                packer.fail(&error);
                return Err(error);
            };
            let received = output.recv();
            self.wait_time += started.elapsed();
            match received {
                Ok(Output::Packed {
                    minibatches,
                    ends_turn,
                }) => {
                    packer.ready.extend(minibatches);
                    packer.ready_ends_turn = ends_turn;
                }
                Ok(Output::End) => {
                    packer.finished = true;
                    return Ok(None);
                }
                Ok(Output::Failed { charges, error }) => {
                    let error = charge(&self.shared, &charges).err().unwrap_or(error);
                    packer.fail(&error);
                    return Err(error);
                }
                Err(_) => {
                    let error = SourceError::Internal(
                        "a packer thread stopped unexpectedly (it panicked)".to_string(),
                    );
                    packer.fail(&error);
                    return Err(error);
                }
            }
        }
    }

    /// Where the source stands: after the last minibatch handed out.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            position: self.position,
            fingerprint: self.fingerprint,
        }
    }

    /// Continues from `checkpoint`, dropping prefetched minibatches.
    pub fn restore(&mut self, checkpoint: &Checkpoint) -> Result<(), SourceError> {
        check_checkpoint(checkpoint, self.fingerprint)?;
        self.stop_packer();
        // Round up to a sequence start the way the timeline does.
        let mut timeline = Timeline::new(Arc::clone(&self.shared.index), &self.shared.config)
            .map_err(SourceError::Timeline)?;
        timeline.seek(checkpoint.position);
        self.position = timeline.position();
        Ok(())
    }

    /// Makes this source worker `rank` of `workers` from the current position on.
    pub fn set_partition(&mut self, rank: u32, workers: u32) -> Result<(), SourceError> {
        check_partition(rank, workers)?;
        self.stop_packer();
        self.rank = rank;
        self.workers = workers;
        Ok(())
    }

    /// Samples per sweep.
    pub fn sweep_samples(&self) -> u64 {
        self.sweep_samples
    }

    /// The global position after the last minibatch handed out.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The current epoch: by `epoch_size`, or the sweep without one.
    pub fn epoch(&self) -> u64 {
        let epoch = self.limits.epoch_size.unwrap_or(self.sweep_samples);
        self.position / epoch.max(1)
    }

    /// The corpus index.
    pub fn index(&self) -> &Arc<CorpusIndex> {
        &self.shared.index
    }

    /// The configuration read.
    pub fn config(&self) -> &ReaderConfig {
        &self.shared.config
    }

    /// What the source has done so far.
    pub fn counters(&self) -> SourceCounters {
        let cache = self.shared.cache.counters();
        SourceCounters {
            chunks_loaded: self.shared.chunks_loaded.load(Ordering::Relaxed),
            bytes_read: self.shared.bytes_read.load(Ordering::Relaxed),
            quick_bytes_read: self.shared.quick_bytes_read.load(Ordering::Relaxed),
            parts_parsed_while_indexing: self.shared.parts_from_stash.load(Ordering::Relaxed),
            pinned_packers: self.shared.pinned_packers.load(Ordering::Relaxed),
            cache_hits: cache.hits,
            cache_misses: cache.misses,
            cache_bytes: self.shared.cache.bytes() as u64,
            minibatches: self.minibatches,
            parse_time: Duration::from_nanos(self.shared.parse_nanos.load(Ordering::Relaxed)),
            plan_time: Duration::from_nanos(self.shared.plan_nanos.load(Ordering::Relaxed)),
            pack_time: Duration::from_nanos(self.shared.pack_nanos.load(Ordering::Relaxed)),
            wait_time: self.wait_time,
        }
    }

    fn plan(&self, size: u64, scheduled: bool) -> Plan {
        Plan {
            start: self.position,
            size,
            schedule: if scheduled {
                self.schedule.clone()
            } else {
                None
            },
            end: self.end,
            epoch_size: self.limits.epoch_size,
            sweep_samples: self.sweep_samples,
            rank: self.rank,
            workers: self.workers,
            ahead_samples: self.ahead_samples,
            batch_span: batch_span(
                self.ahead_samples,
                self.packer_threads * (self.prefetch + 1),
                self.shared.index.data_bytes() / self.sweep_samples.max(1),
            ),
        }
    }

    /// Sizes the chunk cache for `plan`. Its capacity covers the window and the look-ahead;
    /// but the batches of planned minibatches in flight (queued, being packed, asked for
    /// ahead) pin or hold the parts of all their sequences, and when they span more samples
    /// than the window (minibatches wider than the window, as with one sequence per chunk),
    /// a cache of one window's parts evicts parts the look-ahead loaded before the packers
    /// take them, and walks the pinned ones on every insert: 100,000 one-line sequences,
    /// one per chunk, read in minibatches of 1,000 took 7.2 s. It then holds as many
    /// windows' parts as the batches in flight span (at most every part). Where parts hold
    /// many samples the batches stay within the window and the capacity does not change.
    fn fit_cache(&self, plan: &Plan) {
        let Some(window_capacity) = self.window_capacity else {
            return;
        };
        let widest = plan
            .schedule
            .as_ref()
            .map_or(plan.size, MbSchedule::largest)
            .max(plan.batch_span);
        let batches = (self.packer_threads * (self.prefetch + 1)) as u64;
        let in_flight = batches
            .saturating_mul(widest)
            .saturating_add(plan.ahead_samples);
        let windows = in_flight.div_ceil(self.window_samples.max(1)).max(1);
        let capacity = window_capacity
            .saturating_mul(usize::try_from(windows).unwrap_or(usize::MAX))
            .min(self.shared.parts.parts.len().max(window_capacity));
        self.shared.cache.set_capacity(Some(capacity));
    }

    fn start_packer(&mut self, plan: Plan) -> Result<(), SourceError> {
        self.fit_cache(&plan);
        let Some(loads) = &self.loads else {
            return Err(SourceError::Usage(
                "the source is shutting down".to_string(),
            ));
        };
        // A new run (a restore, a new partition or size) reads again what failed before.
        self.shared.cache.forget_errors();
        let mut outputs = Vec::with_capacity(self.packer_threads);
        let mut plans = Vec::with_capacity(self.packer_threads);
        // Room for the route of every batch that can be queued, packed or delivered (a
        // delivery holds a batch or less), so that routing never holds the planner back.
        let (route_to, routes) =
            bounded::<usize>(self.packer_threads * (2 * self.prefetch + 1) + 1);
        let mut threads = Vec::with_capacity(self.packer_threads + 1);
        let cpus = if self.pin_packers {
            affinity::packer_cpus(self.packer_threads)
        } else {
            None
        };
        self.shared.pinned_packers.store(0, Ordering::Relaxed);
        for i in 0..self.packer_threads {
            let cpu = cpus.as_ref().and_then(|cpus| cpus.get(i).copied());
            let (output, delivered) = bounded::<Output<T>>(self.prefetch);
            let (planned_to, planned) = bounded::<Option<PlannedBatch>>(self.prefetch);
            let shared = SharedArc::clone(&self.shared);
            let loads = loads.clone();
            let spawned = Builder::new()
                .name(format!("ctf-packer-{i}"))
                .spawn(move || {
                    if cpu.is_some_and(affinity::pin_current_thread) {
                        shared.pinned_packers.fetch_add(1, Ordering::Relaxed);
                    }
                    run_packer(&shared, &loads, &planned, &output)
                });
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    // Without their plans the packers started end at once.
                    drop(plans);
                    for thread in threads {
                        let _ = thread.join();
                    }
                    return Err(SourceError::Usage(format!(
                        "cannot start a packer thread: {e}"
                    )));
                }
            }
            outputs.push(delivered);
            plans.push(planned_to);
        }
        let shared = SharedArc::clone(&self.shared);
        let planner_loads = loads.clone();
        let run = plan.clone();
        let planner = Builder::new()
            .name("ctf-planner".to_string())
            .spawn(move || run_planner(&shared, &planner_loads, &run, &plans, &route_to));
        match planner {
            Ok(planner) => threads.push(planner),
            Err(e) => {
                // The plans' senders went with the closure: the packers end at once.
                for thread in threads {
                    let _ = thread.join();
                }
                return Err(SourceError::Usage(format!(
                    "cannot start the planner thread: {e}"
                )));
            }
        }
        self.packer = Some(Packer {
            outputs,
            routes,
            turn: None,
            ready: VecDeque::new(),
            ready_ends_turn: false,
            threads,
            plan,
            finished: false,
            failed: None,
        });
        Ok(())
    }

    /// Stops the packers and the planner, dropping what they prepared.
    fn stop_packer(&mut self) {
        if let Some(packer) = self.packer.take() {
            let Packer {
                outputs,
                routes,
                ready,
                threads,
                ..
            } = packer;
            // Without a receiver a packer's next send fails, which ends it; the minibatches
            // prepared go back to the pool. The planner's next send then fails too (a route
            // at once).
            drop(outputs);
            drop(routes);
            drop(ready);
            for thread in threads {
                let _ = thread.join();
            }
        }
    }
}

impl<T: Element> Drop for MinibatchSource<T> {
    fn drop(&mut self) {
        self.stop_packer();
        self.shared.cache.close();
        // Closing the load queue ends the loaders once they finish their chunk.
        self.loads = None;
        for loader in self.loaders.drain(..) {
            let _ = loader.join();
        }
    }
}

/// Charges what the sequences of a minibatch carry, in order.
fn charge<T: Element>(shared: &Shared<T>, charges: &[Charge<T>]) -> Result<(), SourceError> {
    if charges.is_empty() {
        return Ok(());
    }
    let Ok(mut charging) = shared.charging.lock() else {
        return Err(SourceError::Usage(
            "the error budget was poisoned by a panic".to_string(),
        ));
    };
    for c in charges {
        charging.charge_sequence(&shared.index, &c.part, c.within, c.ordinal)?;
    }
    Ok(())
}

/// Adds the time since `started` to a nanosecond counter.
fn add_time(counter: &AtomicU64, started: Instant) {
    let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    counter.fetch_add(nanos, Ordering::Relaxed);
}

/// A loader thread: parses the chunks it is asked for into the cache.
fn run_loader<T: Element>(shared: &Shared<T>, queue: &Receiver<u32>) {
    let mut loader = ChunkLoader::<T>::new(Arc::clone(&shared.index), &shared.config);
    loop {
        let Ok(part) = queue.recv() else {
            return; // the source is shutting down
        };
        if shared.cache.is_closed() {
            // Shutting down: the requests still queued (up to the cache's capacity, the
            // whole corpus with the default window) are dropped, not parsed.
            return;
        }
        let (chunk, sequences) = shared.parts.parts[part as usize].clone();
        let before = loader.counters();
        let started = Instant::now();
        let stashed = take_stashed(shared, part);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut parsed = ParsedChunk::new(&shared.config.inputs);
            let adopted = stashed.is_some_and(|stashed| {
                loader.adopt_part(chunk, sequences.clone(), stashed, &mut parsed)
            });
            if adopted {
                shared.parts_from_stash.fetch_add(1, Ordering::Relaxed);
                return Ok(LoadedChunk::new(&shared.index, parsed));
            }
            loader
                .load_part(chunk, sequences, &mut parsed)
                .map(|()| LoadedChunk::new(&shared.index, parsed))
        }));
        add_time(&shared.parse_nanos, started);
        let after = loader.counters();
        shared.chunks_loaded.fetch_add(
            after.chunks_loaded - before.chunks_loaded,
            Ordering::Relaxed,
        );
        shared
            .bytes_read
            .fetch_add(after.bytes_read - before.bytes_read, Ordering::Relaxed);
        let loaded: Loaded<T> = match outcome {
            Ok(Ok(chunk)) => Ok(ChunkArc::new(chunk)),
            Ok(Err(e)) => Err(ChunkArc::new(e)),
            Err(_) => Err(ChunkArc::new(LoadError::Panicked {
                file: shared.index.files[shared.index.chunk(chunk).file as usize]
                    .name
                    .clone(),
            })),
        };
        let bytes = match &loaded {
            Ok(chunk) => chunk.heap_bytes(),
            Err(_) => 0,
        };
        shared.cache.insert(part, loaded, bytes);
    }
}

/// The sequences parsed while indexing that are all of `part`'s, if its first load has not
/// taken them yet (a part evicted and loaded again reads its text).
fn take_stashed<T>(shared: &Shared<T>, part: u32) -> Option<ParsedSequences<T>> {
    let mut stash = shared.stash.lock().unwrap_or_else(|e| e.into_inner());
    stash.get_mut(part as usize)?.take()
}

/// Per part, the sequences of `pieces` (parsed while indexing) that are all of its own, as
/// `piece_of` places the parts in them. A piece that several parts share (one straddling
/// chunks) keeps the sequences of its largest part in place and gives copies of the others'
/// to their parts, so that no load copies most of a piece: copying a 2 MB piece's
/// sequences took a loader 0.3–0.6 ms in the gap before the first minibatch, where taking a
/// piece whole takes 30–70 µs. A part whose sequences cannot be copied (or whose piece is
/// not of `T`) gets none and is read from its file. The pieces no part holds are dropped.
fn stash_per_part<T: Element>(
    inputs: &[crate::config::InputConfig],
    piece_of: &[PiecePlace],
    pieces: Vec<StashPiece>,
) -> Vec<Option<ParsedSequences<T>>> {
    let mut parts_of_piece = vec![Vec::new(); pieces.len()];
    for (part, placed) in piece_of.iter().enumerate() {
        if let Some((piece, within)) = placed {
            if let Some(parts) = parts_of_piece.get_mut(*piece as usize) {
                parts.push((part, within.start as usize..within.end as usize));
            }
        }
    }
    let mut stash: Vec<Option<ParsedSequences<T>>> = piece_of.iter().map(|_| None).collect();
    for (piece, parts) in pieces.into_iter().zip(parts_of_piece) {
        // The largest part keeps the piece's own sequences.
        let Some((kept, (kept_part, kept_within))) = parts
            .iter()
            .enumerate()
            .max_by_key(|(_, (_, within))| within.len())
        else {
            continue;
        };
        let Ok(parsed) = piece.parsed.downcast::<ParsedSequences<T>>() else {
            continue;
        };
        let mut parsed = *parsed;
        for (i, (part, within)) in parts.iter().enumerate() {
            if i != kept {
                stash[*part] = copy_range(inputs, &parsed, within.clone());
            }
        }
        parsed.truncate(kept_within.end);
        parsed.drain_front(kept_within.start);
        stash[*kept_part] = Some(parsed);
    }
    stash
}

/// A copy of the sequences `range` of `parsed`.
fn copy_range<T: Element>(
    inputs: &[crate::config::InputConfig],
    parsed: &ParsedSequences<T>,
    range: std::ops::Range<usize>,
) -> Option<ParsedSequences<T>> {
    let mut copy = ParsedSequences::new(inputs);
    copy.append_range(parsed, range).ok()?;
    Some(copy)
}

/// One minibatch as the planner chose it, for the packer.
struct Planned {
    /// The first minibatch after a start: the packer reads the sequences of it whose parts
    /// are not loaded yet itself (see [`quick_load`]).
    quick: bool,
    /// Where the ordinals of this worker's sequences, in timeline order, are among its
    /// batch's [`PlannedBatch::ordinals`].
    sequences: std::ops::Range<usize>,
    sweep_end: bool,
    epoch_end: bool,
    /// Global position after it.
    end: u64,
}

/// Planned minibatches handed to the packer at once: one handoff (and wake-up) per batch
/// rather than per minibatch, which matters when minibatches hold a sequence or two.
const PLAN_BATCH: usize = 32;

/// Minibatches the planner hands a packer at once, and their sequences in one list: the
/// packer frees one vector per batch that the planner's thread allocated, not one per
/// minibatch (a free from another thread than the allocating one is the slow path of the
/// allocator).
#[derive(Default)]
struct PlannedBatch {
    minibatches: Vec<Planned>,
    /// The ordinals of every minibatch's sequences, one minibatch after another.
    ordinals: Vec<u32>,
}

impl PlannedBatch {
    fn new() -> Self {
        PlannedBatch {
            minibatches: Vec::with_capacity(PLAN_BATCH),
            ordinals: Vec::new(),
        }
    }
}

/// The planner ("randomizer") thread: walks the timeline (computing each sweep's order),
/// asks for the chunks of the sequences up to `ahead_samples` past the minibatch it plans,
/// and deals the minibatches' sequences to the packers ([`Dealer`]), in batches of up to
/// [`PLAN_BATCH`] (and [`Plan::batch_span`]; the first batch is one minibatch, for the time
/// to the first one); `None` to every packer at the end.
fn run_planner<T>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    plan: &Plan,
    packers: &[Sender<Option<PlannedBatch>>],
    routes: &Sender<usize>,
) {
    let mut planned = Dealer {
        packers,
        routes,
        last: packers.len().saturating_sub(1),
    };
    let mut batch = PlannedBatch::new();
    plan_into(shared, loads, plan, &mut planned, &mut batch);
}

/// The packers' plan queues and the consumer's routes.
struct Dealer<'a> {
    packers: &'a [Sender<Option<PlannedBatch>>],
    routes: &'a Sender<usize>,
    /// The packer dealt to last.
    last: usize,
}

impl Dealer<'_> {
    /// Sends `batch` to the packer with the fewest batches queued (the first of them after
    /// the one dealt to last, so by turns while they keep pace), then its number to the
    /// consumer; false once the packers or the consumer stopped.
    fn send(&mut self, batch: PlannedBatch) -> bool {
        let count = self.packers.len();
        let Some(packer) = (1..=count)
            .map(|k| (self.last + k) % count)
            .min_by_key(|&p| self.packers[p].len())
        else {
            return false;
        };
        self.last = packer;
        self.packers[packer].send(Some(batch)).is_ok() && self.routes.send(packer).is_ok()
    }

    /// Tells every packer that the read ends, and the consumer where to find the end: every
    /// packer delivers it after its batches, all routed before, so the first packer's will do.
    fn end(&self) {
        for packer in self.packers {
            let _ = packer.send(None);
        }
        let _ = self.routes.send(0);
    }
}

/// The planner's loop; returns at the end (having sent it) or when shutting down.
fn plan_into<T>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    plan: &Plan,
    planned: &mut Dealer<'_>,
    batch: &mut PlannedBatch,
) {
    let finish = |planned: &mut Dealer<'_>, batch: &mut PlannedBatch| {
        if !batch.minibatches.is_empty() && !planned.send(std::mem::take(batch)) {
            return;
        }
        planned.end();
    };
    // Per part: 1 + the sweep it was last asked for in, 0 if never.
    let mut requested_in = vec![0u64; shared.parts.parts.len()];
    if !head_start(shared, loads, plan, &mut requested_in) {
        return;
    }
    // The first sweep's order, computed here, is planning time too.
    let ordering = Instant::now();
    let timeline = Timeline::new(Arc::clone(&shared.index), &shared.config);
    add_time(&shared.plan_nanos, ordering);
    let Ok(mut timeline) = timeline else {
        finish(planned, batch);
        return;
    };
    timeline.set_partition(plan.rank, plan.workers);
    timeline.seek(plan.start);
    let mut ahead = timeline.clone();
    // The sequences of each look-ahead step, asked for and cleared.
    let mut sequences_ahead = Vec::new();
    // Where the minibatches of `batch` start.
    let mut batch_start = 0;
    let mut first = true;
    // Timed per batch, not per minibatch: two clock reads per minibatch cost the packing
    // phase about 5% on minibatches of one or two sequences (see `SourceCounters::plan_time`).
    let mut planning = Instant::now();
    loop {
        let position = timeline.position();
        let size = match &plan.schedule {
            Some(schedule) => {
                let epoch = plan.epoch_size.unwrap_or(plan.sweep_samples).max(1);
                schedule.size_for_epoch(position / epoch)
            }
            None => plan.size,
        };
        let (end, epoch_end) = minibatch_end(position, plan.end, plan.epoch_size);
        let first_ordinal = batch.ordinals.len();
        let selection = timeline.next_minibatch_into(size, end, &mut batch.ordinals);
        let Some(selection) = selection else {
            add_time(&shared.plan_nanos, planning);
            finish(planned, batch);
            return;
        };
        // Ask for the parts of the sequences ahead, in the order they will be packed, each
        // once per sweep (a part evicted before its use is asked for again by the packer).
        let target = selection.end.saturating_add(plan.ahead_samples);
        while ahead.position() < target {
            let position = ahead.position();
            let sweep = position / plan.sweep_samples;
            let sweep_end = (sweep + 1).saturating_mul(plan.sweep_samples);
            let step = target.min(sweep_end) - position;
            sequences_ahead.clear();
            if ahead
                .next_minibatch_into(step, plan.end, &mut sequences_ahead)
                .is_none()
            {
                break;
            }
            for &ordinal in &sequences_ahead {
                let part = shared.parts.part_of_ordinal(ordinal);
                if !request_once(shared, loads, requested_in.as_mut_slice(), part, sweep) {
                    return;
                }
            }
        }
        timeline.share_sweep_ahead(&ahead);
        if batch.minibatches.is_empty() {
            batch_start = selection.start;
        }
        batch.minibatches.push(Planned {
            quick: first,
            sequences: first_ordinal..batch.ordinals.len(),
            sweep_end: selection.sweep_end,
            epoch_end: epoch_end.is_some_and(|e| selection.end >= e),
            end: selection.end,
        });
        // A batch also ends after `batch_span`, so that the packers never lag the requests
        // by more than the cache holds.
        let span = selection.end - batch_start;
        if first || batch.minibatches.len() == PLAN_BATCH || span >= plan.batch_span {
            first = false;
            let full = std::mem::replace(batch, PlannedBatch::new());
            add_time(&shared.plan_nanos, planning);
            if !planned.send(full) {
                return; // the packers stopped
            }
            planning = Instant::now();
        }
    }
}

/// A packer thread: packs the batches of planned minibatches it is given, in order, and
/// delivers them to the consumer, a planned batch at a time (or sooner once past
/// [`OUTPUT_BATCH_BYTES`]). The planner's first batch is one minibatch, so the first
/// minibatch is delivered as soon as it is packed; the packer that gets it reads
/// the sequences of it whose parts are not loaded yet itself, up to [`QUICK_BYTES`] of text
/// (see [`quick_load`]).
fn run_packer<T: Element>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    planned: &Receiver<Option<PlannedBatch>>,
    output: &Sender<Output<T>>,
) {
    let deliver = |out: Output<T>| output.send(out).is_ok();
    let mut packing = Packing::new(&shared.parts);
    loop {
        let batch = match planned.recv() {
            Ok(Some(batch)) => batch,
            Ok(None) => {
                let _ = deliver(Output::End);
                return;
            }
            Err(_) => {
                // The planner ended without a word: it panicked.
                let _ = deliver(Output::Failed {
                    charges: Vec::new(),
                    error: SourceError::Internal(
                        "the planner thread stopped unexpectedly (it panicked)".to_string(),
                    ),
                });
                return;
            }
        };
        let count = batch.minibatches.len();
        let mut delivery = Vec::new();
        let mut bytes = 0;
        // Timed per batch, less the deliveries, not per minibatch (see
        // `SourceCounters::pack_time`).
        let mut packing_since = Instant::now();
        for (k, next) in batch.minibatches.into_iter().enumerate() {
            let mut packed = Packed {
                batch: shared.pool.take_pooled(),
                charges: Vec::new(),
            };
            packing.quick_bytes_left = if next.quick { QUICK_BYTES } else { 0 };
            let sequences = &batch.ordinals[next.sequences.clone()];
            let outcome = pack_held(shared, loads, &mut packing, sequences, &mut packed);
            let ends_turn = k + 1 == count;
            if ends_turn {
                packing.release();
            }
            match outcome {
                Ok(true) => {}
                Ok(false) => return, // shutting down
                Err(error) => {
                    if !delivery.is_empty() {
                        let minibatches = std::mem::take(&mut delivery);
                        if !deliver(Output::Packed {
                            minibatches,
                            ends_turn: false,
                        }) {
                            return;
                        }
                    }
                    let _ = deliver(Output::Failed {
                        charges: packed.charges,
                        error,
                    });
                    return;
                }
            }
            let batch = &mut packed.batch;
            batch.sweep_end = next.sweep_end;
            batch.epoch_end = next.epoch_end;
            batch.position = next.end;
            let heap = batch.heap_bytes();
            if let Some(budget) = &shared.budget {
                let heap = heap as u64;
                if heap > shared.largest_minibatch.fetch_max(heap, Ordering::Relaxed) {
                    shared.cache.set_byte_budget(Some(budget.for_cache(heap)));
                }
            }
            bytes += heap;
            delivery.push(packed);
            if ends_turn || bytes >= OUTPUT_BATCH_BYTES {
                bytes = 0;
                let minibatches = std::mem::take(&mut delivery);
                add_time(&shared.pack_nanos, packing_since);
                if !deliver(Output::Packed {
                    minibatches,
                    ends_turn,
                }) {
                    return;
                }
                packing_since = Instant::now();
            }
        }
    }
}

/// At the start of a randomized sweep, asks for the parts of its first window (in the
/// sweep's chunk order), from which its first sequences are drawn, before the sweep's order
/// is computed, so that the loaders read them while the planner works (a serial step of a
/// few milliseconds per 100,000 sequences). Not for a worker of several, which loads only
/// some chunks, nor mid-sweep, nor under a memory budget (see `head_start_chunks`); false
/// once shutting down.
fn head_start<T>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    plan: &Plan,
    requested_in: &mut [u64],
) -> bool {
    let starts_sweep = plan.sweep_samples > 0 && plan.start.is_multiple_of(plan.sweep_samples);
    if shared.head_start_chunks == 0 || plan.workers > 1 || !starts_sweep || plan.start >= plan.end
    {
        return true;
    }
    let sweep = plan.start / plan.sweep_samples;
    let settings = OrderSettings::of(&shared.config);
    let planning = Instant::now();
    let chunks = first_window_chunks(&shared.index, &settings, sweep);
    add_time(&shared.plan_nanos, planning);
    for &chunk in chunks.iter().take(shared.head_start_chunks) {
        for part in shared.parts.of_chunk[chunk as usize].clone() {
            if !request_once(shared, loads, requested_in, part, sweep) {
                return false;
            }
        }
    }
    true
}

/// Asks for `part` unless already asked for in `sweep` (`requested_in`: per part, 1 + the
/// sweep it was last asked for in); false once shutting down.
fn request_once<T>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    requested_in: &mut [u64],
    part: u32,
    sweep: u64,
) -> bool {
    let asked = &mut requested_in[part as usize];
    if *asked == sweep + 1 {
        return true;
    }
    *asked = sweep + 1;
    request_part(shared, loads, part)
}

/// Asks for `part` to be loaded unless in memory or under way; false once shutting down.
fn request_part<T>(shared: &Shared<T>, loads: &Sender<u32>, part: u32) -> bool {
    match shared.cache.request(part) {
        Request::Present => true,
        Request::Load => loads.send(part).is_ok(),
        Request::Closed => false,
    }
}

/// The packer's memory across minibatches: the parts the current batch of planned minibatches
/// holds (taken by its minibatches as they need them, released at its end).
struct Packing<T> {
    /// Parts held, by part id; [`QUICK`] for the sequences loaded by the packer itself.
    held: Vec<(u32, ChunkArc<LoadedChunk<T>>)>,
    /// Per part: its slot in `held`, or `u32::MAX`.
    slot_of: Vec<u32>,
    /// The current minibatch's sequences as (slot in `held`, index within the part), then its
    /// valid ones as (slot, parsed position); kept for its allocation.
    found: Vec<(u32, u32)>,
    /// The packer's own loader, for the first minibatch after a start (created then).
    quick: Option<ChunkLoader<T>>,
    /// Bytes of text the packer may still read itself for the minibatch it packs.
    quick_bytes_left: u64,
}

/// Bytes of text a packer reads itself at most for the first minibatch after a start
/// ([`quick_load`]); past them (a first minibatch of very many sequences) it waits for the
/// parts, which parse faster than sequences one at a time.
const QUICK_BYTES: u64 = 4 << 20;

/// The "part id" of sequences a packer loaded itself.
const QUICK: u32 = u32::MAX;

impl<T> Packing<T> {
    fn new(parts: &Parts) -> Self {
        Packing {
            held: Vec::new(),
            slot_of: vec![u32::MAX; parts.parts.len()],
            found: Vec::new(),
            quick: None,
            quick_bytes_left: 0,
        }
    }

    /// Lets go of the parts held (unpinning them).
    fn release(&mut self) {
        for (part, _) in self.held.drain(..) {
            if part != QUICK {
                self.slot_of[part as usize] = u32::MAX;
            }
        }
    }
}

/// Packs `ordinals` into `packed`, noting what its sequences carry to the error budget;
/// `Ok(false)` once shutting down. On an error, `packed.charges` holds the charges of the
/// sequences before it. The parts it takes stay held in `packing` (pinned in the cache) for
/// the next minibatches of the batch, which mostly draw from the same parts: one take from
/// the cache per part and batch rather than per part and minibatch (the packer releases
/// them at the end of the batch).
fn pack_held<T: Element>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    packing: &mut Packing<T>,
    ordinals: &[u32],
    packed: &mut Packed<T>,
) -> Result<bool, SourceError> {
    // First every sequence's part (taking and charging as needed) and parsed position...
    packing.found.clear();
    for &ordinal in ordinals {
        let part = shared.parts.part_of_ordinal(ordinal);
        let chunk = shared.parts.parts[part as usize].0;
        let within = ordinal - shared.index.chunk(chunk).sequences.start;
        let slot = match packing.slot_of[part as usize] {
            u32::MAX => {
                let quick = (packing.quick_bytes_left > 0 && !shared.cache.holds(part))
                    .then(|| quick_load(shared, packing, chunk, within, part))
                    .flatten();
                match quick {
                    Some(loaded) => {
                        packing.held.push((QUICK, loaded));
                        packing.held.len() as u32 - 1
                    }
                    None => match take_held(shared, loads, packing, part)? {
                        Some(slot) => slot,
                        None => return Ok(false),
                    },
                }
            }
            slot => slot,
        };
        let loaded = &packing.held[slot as usize].1;
        let within = within - loaded.parsed.part.start;
        if !loaded.notes_empty() {
            packed.charges.push(Charge {
                part: ChunkArc::clone(loaded),
                within,
                ordinal,
            });
        }
        packing.found.push((slot, within));
    }
    // ...their parsed positions (invalid ones are charged and left out), in a pass of their
    // own so that the cache misses of random sequences overlap...
    let Packing { held, found, .. } = packing;
    found.retain_mut(
        |(slot, within)| match held[*slot as usize].1.position(*within) {
            None => false,
            Some(position) => {
                *within = position;
                true
            }
        },
    );
    // ...then all of them at once.
    let items: Vec<_> = packing
        .found
        .iter()
        .map(|&(slot, position)| {
            let loaded = &packing.held[slot as usize].1;
            (
                &loaded.parsed.sequences,
                loaded.lookup.as_ref(),
                position as usize,
            )
        })
        .collect();
    packed
        .batch
        .push_looked_up(&items)
        .map_err(SourceError::Pack)?;
    Ok(true)
}

/// Takes part `part` into `packing`; its slot, or `None` once shutting down.
fn take_held<T>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    packing: &mut Packing<T>,
    part: u32,
) -> Result<Option<u32>, SourceError> {
    let Some(loaded) = take(shared, loads, part)? else {
        return Ok(None);
    };
    packing.held.push((part, loaded));
    let slot = packing.held.len() as u32 - 1;
    packing.slot_of[part as usize] = slot;
    Ok(Some(slot))
}

/// The sequences (indices within `chunk`) to load for sequence `within` of part `part`
/// alone: it, the sequences without samples just before it in the part, and those after it
/// when it is the part's last sequence with samples; it so carries the same notes as in its
/// part (see `source::Notes`).
fn quick_range(
    index: &CorpusIndex,
    parts: &Parts,
    chunk: u32,
    within: u32,
    part: u32,
) -> std::ops::Range<u32> {
    let bounds = parts.parts[part as usize].1.clone();
    let entries = index.chunk_sequences(chunk);
    let mut start = within;
    while start > bounds.start && entries[start as usize - 1].samples == 0 {
        start -= 1;
    }
    let carries_the_rest = entries[within as usize + 1..bounds.end as usize]
        .iter()
        .all(|e| e.samples == 0);
    let end = if carries_the_rest {
        bounds.end
    } else {
        within + 1
    };
    start..end
}

/// Reads and parses sequence `within` of `chunk` (in part `part`) on the packer's own
/// loader, with the sequences without samples whose notes it carries: those just before it
/// in its part, and those after it when it is the part's last sequence with samples. The
/// first minibatch after a start so does not wait for the parts it needs, which with a
/// window spanning the corpus are nearly all of them; the parts are still loaded whole for
/// the minibatches after it. `None` past [`Packing::quick_bytes_left`], or on an error,
/// which the part's own load then reports.
fn quick_load<T: Element>(
    shared: &Shared<T>,
    packing: &mut Packing<T>,
    chunk: u32,
    within: u32,
    part: u32,
) -> Option<ChunkArc<LoadedChunk<T>>> {
    let range = quick_range(&shared.index, &shared.parts, chunk, within, part);
    let index = &shared.index;
    let entries = &index.chunk_sequences(chunk)[range.start as usize..range.end as usize];
    let first = index.chunk(chunk).sequences.start + range.start;
    // The text of the sequences, and of those a composite reader joins to them.
    let joined_text = |j: &JoinedIndex| -> u64 {
        j.matches[first as usize..first as usize + entries.len()]
            .iter()
            .filter(|&&m| m != NO_MATCH)
            .map(|&m| u64::from(j.index.sequences[m as usize].len))
            .sum()
    };
    let text: u64 = entries.iter().map(|e| u64::from(e.len)).sum::<u64>()
        + index.joined.iter().map(joined_text).sum::<u64>();
    if text > packing.quick_bytes_left {
        packing.quick_bytes_left = 0;
        return None;
    }
    packing.quick_bytes_left -= text;
    let loader = packing
        .quick
        .get_or_insert_with(|| ChunkLoader::new(Arc::clone(&shared.index), &shared.config));
    let before = loader.counters().bytes_read;
    let mut parsed = ParsedChunk::new(&shared.config.inputs);
    let loaded = loader.load_part(chunk, range, &mut parsed);
    shared
        .quick_bytes_read
        .fetch_add(loader.counters().bytes_read - before, Ordering::Relaxed);
    loaded.ok()?;
    Some(ChunkArc::new(LoadedChunk::new(&shared.index, parsed)))
}

/// Takes part `part` from the cache, having it loaded if needed; `None` once shutting down.
fn take<T>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    part: u32,
) -> Result<Option<ChunkArc<LoadedChunk<T>>>, SourceError> {
    loop {
        match shared.cache.take(part) {
            Ok(Some(Ok(loaded))) => return Ok(Some(loaded)),
            Ok(Some(Err(e))) => return Err(SourceError::Load(e.duplicate())),
            Ok(None) => {
                if !request_part(shared, loads, part) {
                    return Ok(None);
                }
            }
            Err(_) => return Ok(None),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::config::InputConfig;
    use crate::parser::{Sample, StreamOptions, StreamParser};
    use std::sync::Mutex as StdMutex;

    /// What charging a sequence reports: (line, message) of each diagnostic, and the outcome.
    fn charged<T: Element>(
        config: &ReaderConfig,
        index: &CorpusIndex,
        loaded: &LoadedChunk<T>,
        within: u32,
        ordinal: u32,
    ) -> (Vec<(u64, String)>, bool) {
        let log: Arc<StdMutex<Vec<(u64, String)>>> = Arc::default();
        let sink_log = Arc::clone(&log);
        let mut charging = Charging::new(
            config,
            Box::new(move |_, d| sink_log.lock().unwrap().push((d.line, d.message.clone()))),
        );
        let ok = charging
            .charge_sequence(index, loaded, within, ordinal)
            .is_ok();
        let reported = log.lock().unwrap().clone();
        (reported, ok)
    }

    /// The samples of every input of the valid sequence at `within` (index within the part),
    /// with its key; `None` for an invalid one.
    fn sequence_of(loaded: &LoadedChunk<f32>, within: u32) -> Option<(u64, Vec<String>)> {
        let position = loaded.position(within)?;
        let seqs = &loaded.parsed.sequences;
        let p = position as usize;
        let samples = (0..seqs.columns.len())
            .flat_map(|input| {
                seqs.samples(p, input)
                    .map(|s: Sample<'_, f32>| format!("{s:?}"))
            })
            .collect();
        Some((seqs.sequences[p].key, samples))
    }

    /// Pieces shared by two or three parts, with the largest part first, last or between
    /// (the one whose sequences stay in place), a piece of one part, one of none and one of
    /// another element type: each part gets exactly its sequences, or none.
    #[test]
    fn each_part_gets_its_own_sequences_of_the_stash() {
        let inputs = [InputConfig::dense("d", 2), InputConfig::sparse("s", 10)];
        let parse = |first: usize, count: usize| -> ParsedSequences<f32> {
            let mut text = String::new();
            for k in first..first + count {
                // Sequences of one to three lines, with sparse samples of one to three
                // entries, some of values other than one.
                for line in 0..=k % 3 {
                    let entries: Vec<String> = (0..=(k + line) % 3)
                        .map(|e| format!("{}:{}", (k + 2 * e) % 10, 1 + (k * e) % 4))
                        .collect();
                    text += &format!("{k} |d {k} {line} |s {}\n", entries.join(" "));
                }
            }
            let mut parser = StreamParser::<f32>::new(&inputs, StreamOptions::default());
            parser.feed(text.as_bytes()).unwrap();
            parser.finish_file().unwrap();
            assert!(
                parser.diagnostics().is_empty(),
                "{:?}",
                parser.diagnostics()
            );
            parser.sequences().clone()
        };
        let piece = |parsed: Box<dyn std::any::Any + Send + Sync>| StashPiece {
            file: 0,
            start: 0,
            end: 0,
            first_line: 1,
            heap_bytes: 0,
            parsed,
        };
        let sizes = [12, 12, 12, 5, 4, 3];
        let pieces: Vec<ParsedSequences<f32>> =
            (0..sizes.len()).map(|p| parse(100 * p, sizes[p])).collect();
        // Per part: its piece and sequences.
        let places: Vec<PiecePlace> = vec![
            Some((0, 0..9)),
            Some((0, 9..12)),
            None,
            Some((1, 0..2)),
            Some((1, 2..12)),
            Some((2, 0..3)),
            Some((2, 3..10)),
            Some((2, 10..12)),
            Some((3, 0..5)),
            Some((5, 0..3)),
        ];
        let mut stashed: Vec<StashPiece> =
            pieces.iter().map(|p| piece(Box::new(p.clone()))).collect();
        // Piece 4 is not among the places; piece 5 holds another element type.
        stashed[5] = piece(Box::new(parse(500, 3).columns.len()));
        let stash = stash_per_part::<f32>(&inputs, &places, stashed);
        assert_eq!(stash.len(), places.len());
        for (part, (place, got)) in places.iter().zip(&stash).enumerate() {
            let want = match place {
                Some((p, within)) if *p != 5 => {
                    let mut want = ParsedSequences::new(&inputs);
                    let range = within.start as usize..within.end as usize;
                    want.append_range(&pieces[*p as usize], range).unwrap();
                    Some(want)
                }
                _ => None,
            };
            assert_eq!(got.as_ref(), want.as_ref(), "part {part}");
        }
    }

    /// A planned batch of one minibatch whose only sequence is `ordinal`.
    fn batch_of(ordinal: u32) -> PlannedBatch {
        PlannedBatch {
            minibatches: vec![Planned {
                quick: false,
                sequences: 0..1,
                sweep_end: false,
                epoch_end: false,
                end: u64::from(ordinal) + 1,
            }],
            ordinals: vec![ordinal],
        }
    }

    /// The first sequence of each batch queued for a packer, and whether the end follows.
    fn queued(planned: &Receiver<Option<PlannedBatch>>) -> (Vec<u32>, bool) {
        let mut firsts = Vec::new();
        while let Ok(batch) = planned.try_recv() {
            match batch {
                Some(batch) => firsts.push(batch.ordinals[batch.minibatches[0].sequences.start]),
                None => return (firsts, true),
            }
        }
        (firsts, false)
    }

    #[test]
    fn batches_go_to_the_packer_with_the_fewest_queued_and_their_routes_to_the_consumer() {
        let channels: Vec<_> = (0..3).map(|_| bounded::<Option<PlannedBatch>>(8)).collect();
        let senders: Vec<_> = channels.iter().map(|(s, _)| s.clone()).collect();
        let (route_to, routes) = bounded::<usize>(16);
        // Packer 0 is two batches behind, packer 1 one.
        for ordinal in [100, 101] {
            senders[0].send(Some(batch_of(ordinal))).unwrap();
        }
        senders[1].send(Some(batch_of(102))).unwrap();
        let mut dealer = Dealer {
            packers: &senders,
            routes: &route_to,
            last: senders.len() - 1,
        };
        // The empty queue first; then, with every queue at one batch but packer 0's, by
        // turns after the last packer dealt to, skipping packer 0 until the others catch up.
        for ordinal in 0..5 {
            assert!(dealer.send(batch_of(ordinal)));
        }
        dealer.end();
        let routed: Vec<usize> = std::iter::from_fn(|| routes.try_recv().ok()).collect();
        assert_eq!(routed, [2, 1, 2, 0, 1, 0]);
        assert_eq!(queued(&channels[0].1), (vec![100, 101, 3], true));
        assert_eq!(queued(&channels[1].1), (vec![102, 1, 4], true));
        assert_eq!(queued(&channels[2].1), (vec![0, 2], true));
    }

    #[test]
    fn dealing_fails_once_the_consumer_or_the_packer_is_gone() {
        let (to_packer, packer) = bounded::<Option<PlannedBatch>>(4);
        let (route_to, routes) = bounded::<usize>(4);
        let senders = [to_packer];
        let mut dealer = Dealer {
            packers: &senders,
            routes: &route_to,
            last: 0,
        };
        assert!(dealer.send(batch_of(0)));
        drop(routes);
        assert!(!dealer.send(batch_of(1)));
        drop(packer);
        assert!(!dealer.send(batch_of(2)));
    }

    #[test]
    fn a_small_corpus_gives_every_loader_four_parts() {
        const MIB: u64 = 1 << 20;
        assert_eq!(part_size(MIB, 100 * MIB, 2), MIB);
        assert_eq!(part_size(MIB, 8 * MIB, 2), MIB);
        assert_eq!(part_size(MIB, 4 * MIB, 2), MIB / 2);
        assert_eq!(part_size(MIB, 4 * MIB, 4), MIB / 4);
        assert_eq!(part_size(MIB, 100 << 10, 2), SMALLEST_PART_BYTES);
        // Parts asked smaller (tests) are kept, and never 0.
        assert_eq!(part_size(20, 4 * MIB, 2), 20);
        assert_eq!(part_size(0, 0, 0), 1);
    }

    #[test]
    fn a_batch_spans_a_share_of_the_look_ahead_and_half_a_delivery_of_text() {
        // The look-ahead shared among six queued batches...
        assert_eq!(batch_span(60_000, 6, 1), 10_000);
        // ...unless that is more text than BATCH_TEXT_BYTES (400-byte samples: 1,310).
        assert_eq!(batch_span(60_000, 6, 400), BATCH_TEXT_BYTES / 400);
        assert_eq!(BATCH_TEXT_BYTES / 400, 1_310);
        // Never below one sample, whatever the sizes.
        assert_eq!(batch_span(0, 6, 400), 1);
        assert_eq!(batch_span(60_000, 6, u64::MAX), 1);
        assert_eq!(batch_span(60_000, 0, 0), 60_000.min(BATCH_TEXT_BYTES));
    }

    /// Dropping the source while the load queue is full parses none of the queued parts:
    /// with the default window the queue holds the whole corpus, which the loaders would
    /// otherwise parse before the drop returns.
    #[test]
    fn loaders_drop_the_queued_requests_once_the_cache_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.ctf");
        let text: String = (0..200).map(|i| format!("{i} |x {i} 1\n")).collect();
        std::fs::write(&path, text).unwrap();
        let config = ReaderConfig::builder()
            .file(path.to_string_lossy())
            .input(InputConfig::dense("x", 2))
            .trace_level(0)
            .build()
            .unwrap();
        let options = PipelineOptions {
            loader_threads: 2,
            packer_threads: 1,
            prefetch: 1,
            part_bytes: 1,
            memory_budget: None,
            parse_while_indexing: true,
            pin_packers: false,
        };
        let source = MinibatchSource::<f32>::with_options(
            &config,
            ReadLimits::default(),
            Box::new(|_, _| {}),
            options,
        )
        .unwrap();
        let shared = SharedArc::clone(&source.shared);
        shared.cache.close();
        let loads = source.loads.clone().unwrap();
        for part in 0..shared.parts.parts.len() as u32 {
            loads.send(part).unwrap();
        }
        drop(loads);
        drop(source);
        assert_eq!(shared.chunks_loaded.load(Ordering::Relaxed), 0);
        assert_eq!(shared.bytes_read.load(Ordering::Relaxed), 0);
    }

    /// A sequence loaded alone (what the first minibatch after a start does for the parts not
    /// loaded yet) is the same as in its part at every part size: the same values, and the
    /// same warnings and invalid sequences charged with it, also those of the sequences
    /// without samples it carries (before it, or after it as its part's last).
    #[test]
    fn a_sequence_loaded_alone_is_the_same_as_in_its_part() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.ctf");
        std::fs::write(
            &path,
            "0 |x 1 2 |y 0:1\n1 |x 1 |y 0:1\n2 |x 5 6\n3 |x oops 2 |y 0:1\n4 |x 3 4 |y 0:1\n\
             5 |x 7 8\n6 |x 9 9\n6 |y 1:1\n7 |x 1 |y 2:1\n8 |x 2 2\n9 |y 3:1\n10 |x 4 4\n",
        )
        .unwrap();
        let mut y = InputConfig::sparse("y", 7);
        y.defines_mb_size = true;
        let config = ReaderConfig::builder()
            .file(path.to_string_lossy())
            .input(InputConfig::dense("x", 2))
            .input(y)
            .chunk_size_in_bytes(60)
            .max_errors(100)
            .trace_level(1)
            .build()
            .unwrap();
        let mut indexing = IndexingOptions::for_config(&config);
        indexing.on_warning = Arc::new(|_| {});
        let index = build_index(&config, &indexing).unwrap().index;
        let (mut with_notes, mut before, mut after) = (0, 0, 0);
        for part_bytes in [1, 20, 45, 1 << 20] {
            let (parts, _) = Parts::new(&index, part_bytes, &[]);
            let mut loader = ChunkLoader::<f32>::new(Arc::clone(&index), &config);
            for (part, (chunk, bounds)) in parts.parts.iter().enumerate() {
                let mut parsed = ParsedChunk::new(&config.inputs);
                loader
                    .load_part(*chunk, bounds.clone(), &mut parsed)
                    .unwrap();
                let whole = LoadedChunk::new(&index, parsed);
                let first = index.chunk(*chunk).sequences.start;
                for within in bounds.clone() {
                    if index.chunk_sequences(*chunk)[within as usize].samples == 0 {
                        continue; // not on the timeline
                    }
                    let range = quick_range(&index, &parts, *chunk, within, part as u32);
                    before += usize::from(range.start < within);
                    after += usize::from(range.end > within + 1);
                    let mut parsed = ParsedChunk::new(&config.inputs);
                    loader
                        .load_part(*chunk, range.clone(), &mut parsed)
                        .unwrap();
                    let alone = LoadedChunk::new(&index, parsed);
                    let what =
                        format!("sequence {within} of chunk {chunk}, parts of {part_bytes} B");
                    assert_eq!(
                        sequence_of(&alone, within - range.start),
                        sequence_of(&whole, within - bounds.start),
                        "{what}"
                    );
                    let ordinal = first + within;
                    let charged_alone =
                        charged(&config, &index, &alone, within - range.start, ordinal);
                    let charged_whole =
                        charged(&config, &index, &whole, within - bounds.start, ordinal);
                    with_notes += usize::from(!charged_whole.0.is_empty());
                    assert_eq!(charged_alone, charged_whole, "{what}");
                }
            }
        }
        // The file exercises what it is meant to: notes, and carried sequences on both sides.
        assert!(
            with_notes > 0 && before > 0 && after > 0,
            "{with_notes} {before} {after}"
        );
    }
}
