//! The threaded engine, [`MinibatchSource`]: loader threads parse chunks into the shared
//! [`ChunkCache`]; a planner ("randomizer") thread walks the timeline, computing each sweep's
//! order, asks for the chunks of the sequences ahead of it and deals batches of planned
//! minibatches to the packer threads, each to the packer with the fewest queued, telling the
//! consumer which packer has it (its route); each packer packs its batches into a bounded
//! queue of deliveries, and the consumer takes the deliveries along the routes.
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
//! Every channel is bounded: loads (the cache's capacity in parts), the routes (every batch
//! that can be queued, packed or delivered), and per packer its batches of planned
//! minibatches and its deliveries (`prefetch` each). Shutdown: dropping the engine drops the
//! routes and the delivery queues, which ends each packer at its next send and the planner
//! at its; the cache is closed, which wakes anyone waiting for a chunk, and the
//! loads channel, which ends the loaders; every thread is joined. An error reaches the
//! consumer in order, as an item of the queue; a loader that panics stores the panic as its
//! chunk's error, and a planner or packer that panics ends its queue, which the consumer
//! sees as an error.
//!
//! Each part of the engine is a module of its own: `options` (how it runs,
//! [`PipelineOptions`]), `parts` (the parts chunks are loaded in, and those the index build
//! parsed), `loader` (the loader threads), `planner` (the planner thread and the sizes of
//! its batches) and `packer` (the packer threads, and the consumer's end of their run). This
//! module holds the source, the state its threads share and what a packer hands the
//! consumer.

mod loader;
mod options;
mod packer;
mod parts;
mod planner;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::chunks::LoadError;
use crate::config::{ReaderConfig, WindowSize};
use crate::index::build::{build_index, build_index_stashed, IndexingOptions, OpenedIndex};
use crate::index::stash::StashRequest;
use crate::index::CorpusIndex;
use crate::minibatch::{MinibatchPool, PooledMinibatch};
use crate::parser::{Element, ParsedSequences};
use crate::pipeline::affinity;
use crate::pipeline::cache::ChunkCache;
use crate::reader::{share_with_indexing, DiagnosticSink};
use crate::source::{
    check_checkpoint, check_config, check_limits, check_partition, limit_end, Charging,
    LoadedChunk, ReadLimits, SourceCounters, SourceError,
};
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::channel::{bounded, Sender};
use crate::sync::thread::{Builder, JoinHandle};
// The state the threads share and the parsed parts are counted by the shim's `Arc` (loom's
// under `cfg(loom)`, which then also checks that none is leaked); the index and the pool
// are immutable or self-locking and stay on `std`'s.
use crate::sync::{Arc as ChunkArc, Arc as SharedArc, Mutex};
use crate::timeline::checkpoint::{fingerprint, Checkpoint};
use crate::timeline::schedule::MbSchedule;
use crate::timeline::{Timeline, TimelineError};
use loader::{run_loader, stash_per_part};
use packer::{run_packer, Packer};
use parts::{part_size, Parts};
use planner::{batch_span, run_planner, PlannedBatch, PLAN_BATCH};

pub use options::{PipelineOptions, MAX_PREFETCH, MAX_THREADS};
pub use parts::PART_BYTES;
pub use planner::OUTPUT_BATCH_BYTES;

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
    ///
    /// [`quick_load`]: packer
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
    ///
    /// [`head_start`]: planner::head_start
    head_start_chunks: usize,
    /// Under a memory budget whose cache cannot hold the window's parts: the packers read
    /// each sequence they pack themselves (as for the first minibatch after a start,
    /// without its cap) and the planner asks for no part ahead. Loading whole parts there
    /// pins, for every minibatch of random sequences, about a part per sequence beyond the
    /// budget, and reads each part again for nearly every minibatch. Set when the source
    /// is made, from an estimate ([`window_exceeds`]), or later by a load that shows
    /// the parts hold more parsed than that ([`Shared::note_parsed`]); never unset.
    reads_each_sequence: AtomicBool,
    /// Under a memory budget, with a window of more than one chunk: the text of the
    /// window's parts and the look-ahead's, which [`Shared::note_parsed`] scales.
    window_text: Option<u64>,
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

/// Whether the window's parts and the look-ahead's (`window_text` bytes of text), holding
/// `parsed` heap bytes per `text` bytes of text, exceed what `budget` leaves the cache when
/// the largest minibatch takes `largest` bytes: then the packers read each sequence
/// themselves ([`Shared::reads_each_sequence`]). A source starts from twice the text
/// (parsed, a value takes 4 or 8 bytes where its text takes 2 or more, and each sequence has
/// its records), and its loads correct that upward ([`Shared::note_parsed`]). Only for a
/// window of more than one chunk: in file order the parts are used one after another, and a
/// budget that holds one works.
fn window_exceeds(budget: &Budget, window_text: u64, parsed: u64, text: u64, largest: u64) -> bool {
    let window_parsed = u128::from(window_text) * u128::from(parsed) / u128::from(text.max(1));
    window_parsed > budget.for_cache(largest) as u128
}

impl<T> Shared<T> {
    /// Whether the packers read each sequence themselves (see the field).
    fn reads_each_sequence(&self) -> bool {
        self.reads_each_sequence.load(Ordering::Relaxed)
    }

    /// Notes that a part loaded from `text` bytes holds `parsed` heap bytes: at that ratio,
    /// once the window's parts exceed what the budget leaves the cache, the packers read
    /// each sequence themselves from then on (the minibatches are the same either way).
    fn note_parsed(&self, text: u64, parsed: usize) {
        let (Some(budget), Some(window_text)) = (&self.budget, self.window_text) else {
            return;
        };
        if text == 0 || self.reads_each_sequence() {
            return;
        }
        let largest = self.largest_minibatch.load(Ordering::Relaxed);
        if window_exceeds(budget, window_text, parsed as u64, text, largest) {
            self.reads_each_sequence.store(true, Ordering::Relaxed);
        }
    }
}

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
    ///
    /// [`BATCH_TEXT_BYTES`]: planner::BATCH_TEXT_BYTES
    batch_span: u64,
}

/// Reads minibatches of a corpus along the global timeline, with loader, planner and packer
/// threads; the same minibatches as [`crate::source::ReferenceSource`]. Values are decoded
/// into `T` whatever the configuration's `precision` says (`ctf` and the C ABI choose `T`
/// by it).
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
    /// `keepDataInMemory`): see [`fit_cache`](Self::fit_cache).
    window_capacity: Option<usize>,
    /// The chunks the order draws from at a time (1 in file order), and their average
    /// samples, for how many chunks a span of samples touches ([`fit_cache`](Self::fit_cache)).
    window_chunks: usize,
    samples_per_chunk: u64,
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
        check_config(config)?;
        let (sink, on_warning) = share_with_indexing(sink, config);
        // The scan runs on as many threads as the loaders (the index does not depend on it).
        let indexing = IndexingOptions {
            scan_threads: options
                .loader_threads
                .clamp(1, crate::index::build::MAX_SCAN_THREADS),
            on_warning,
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
        let parts_per_chunk = parts.parts_per_chunk();
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
        let window_text =
            (budget.is_some() && window_chunks > 1).then_some(window_parts as u64 * part_bytes);
        let reads_each_sequence = budget
            .as_ref()
            .zip(window_text)
            .is_some_and(|(budget, text)| window_exceeds(budget, text, 2, 1, 0));
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
            reads_each_sequence: AtomicBool::new(reads_each_sequence),
            window_text,
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
            window_chunks,
            samples_per_chunk: per_chunk,
            sampleless_charged: false,
            wait_time: Duration::ZERO,
        })
    }

    /// Uses a minibatch-size schedule: [`next_scheduled`](Self::next_scheduled) then takes
    /// the size of the current epoch from it.
    pub fn set_schedule(&mut self, schedule: MbSchedule) {
        self.schedule = Some(schedule);
        // A failed run stays failed until a restore or a new partition (see
        // `next_minibatch`): only a run that can go on starts again with the schedule.
        if self.packer.as_ref().is_some_and(|p| p.failed.is_none()) {
            self.stop_packer();
        }
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
        // (Only `MbSchedule::constant(0)` gives a scheduled size of 0.)
        let scheduled_size = self
            .schedule
            .as_ref()
            .filter(|_| scheduled)
            .map(|schedule| schedule.size_for_epoch(self.epoch()));
        if scheduled_size.unwrap_or(size) == 0 {
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

    /// Sizes the chunk cache for `plan`. The planner asks for the parts of the sequences
    /// up to the look-ahead past the minibatch it plans, but the packers lag it by the
    /// batches of planned minibatches queued and being packed, and they need the parts of
    /// the window around their own position. So the cache holds the parts of the window and
    /// of every chunk the look-ahead and the batches in flight can span, and one chunk of
    /// slack, or the window's capacity if more: a smaller cache evicts parts a packer still
    /// needs, which it then reads again (with windows of 4 to 12 chunks of 4 KB and
    /// minibatches of 256 samples, up to twice as many loads as chunks in a sweep; with one
    /// sequence per chunk and minibatches of 1,000, 100,000 sequences took 7.2 s, every
    /// insert also walking the pinned parts). Where chunks hold many samples the batches
    /// span a chunk or two, and the window's capacity (with twice the look-ahead) holds
    /// them.
    /// At a sweep's end the packers still need the last window while the planner asks for
    /// the next sweep's first: with a window smaller than the corpus, a few parts of the
    /// two can evict each other there and be read again (holding two windows would double
    /// the memory the window bounds).
    fn fit_cache(&self, plan: &Plan) {
        let Some(window_capacity) = self.window_capacity else {
            return;
        };
        let widest = plan
            .schedule
            .as_ref()
            .map_or(plan.size, MbSchedule::largest);
        // A batch ends at the minibatch that reaches its span; the planner builds one more.
        let batch = plan.batch_span.saturating_add(widest);
        let batches = (self.packer_threads * (self.prefetch + 1) + 1) as u64;
        let in_flight = batches
            .saturating_mul(batch)
            .saturating_add(plan.ahead_samples);
        // The chunks a span of `in_flight` samples touches (at the corpus's average samples
        // per chunk: in a random chunk order chunks of every size mix), with the one it
        // starts inside.
        let span = usize::try_from(in_flight.div_ceil(self.samples_per_chunk.max(1)))
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        let parts_per_chunk = self.shared.parts.parts_per_chunk();
        let capacity = self
            .window_chunks
            .saturating_add(span)
            .saturating_add(1)
            .saturating_mul(parts_per_chunk)
            .max(window_capacity)
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

#[cfg(all(test, not(loom)))]
mod tests;
