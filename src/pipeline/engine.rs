//! The threaded engine, [`MinibatchSource`]: loader threads parse chunks into the shared
//! [`ChunkCache`]; a planner ("randomizer") thread walks the timeline, computing each sweep's
//! order, asks for the chunks of the sequences ahead of it and hands each minibatch's
//! sequences to a packer thread, which packs them into a bounded queue ahead of the consumer.
//!
//! Planner and packer run exactly the reference engine's steps ([`crate::source`]): the same
//! timeline, the same packing, invalid sequences charged and warnings reported in the minibatch
//! that would hold them.
//! Loaders only parse, in any order, so the output does not depend on the number of threads
//! or on timing. A restore, a new partition or a new minibatch size stops the planner and
//! the packer (their prepared minibatches are dropped) and starts new ones at the position
//! after the last minibatch handed out; the loaders and the cache stay.
//!
//! Every channel is bounded: loads (the cache's capacity in parts), batches of planned
//! minibatches and packed minibatches (`prefetch` each). Shutdown: dropping the engine drops
//! the packed queue, which ends the packer at its next send and then the planner at its; the
//! cache is closed, which wakes anyone waiting for a chunk, and the loads channel, which ends
//! the loaders; every thread is joined. An error reaches the consumer in order, as an item of the queue; a loader
//! that panics stores the panic as its chunk's error, and a planner or packer that panics ends
//! the queue, which the consumer sees as an error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::chunks::{ChunkLoader, LoadError, ParsedChunk};
use crate::config::{ReaderConfig, WindowSize};
use crate::index::build::{build_index, IndexingOptions, OpenedIndex};
use crate::index::CorpusIndex;
use crate::minibatch::{MinibatchPool, PooledMinibatch};
use crate::parser::Element;
use crate::pipeline::cache::{ChunkCache, Request};
use crate::reader::DiagnosticSink;
use crate::source::{
    check_checkpoint, check_partition, chunk_of, limit_end, minibatch_end, Charging, LoadedChunk,
    ReadLimits, SourceCounters, SourceError,
};
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::channel::{bounded, Receiver, Sender};
use crate::sync::thread::{Builder, JoinHandle};
// The state the threads share and the parsed parts are counted by the shim's `Arc` (loom's
// under `cfg(loom)`, which then also checks that none is leaked); the index and the pool
// are immutable or self-locking and stay on `std`'s.
use crate::sync::{Arc as ChunkArc, Arc as SharedArc, Mutex};
use crate::timeline::checkpoint::{fingerprint, Checkpoint};
use crate::timeline::schedule::MbSchedule;
use crate::timeline::{Timeline, TimelineError};

/// How the threaded engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineOptions {
    /// Loader threads parsing chunks (at least 1).
    pub loader_threads: usize,
    /// Minibatches packed ahead of the consumer (at least 1).
    pub prefetch: usize,
    /// Bytes a loader parses at once: chunks are split into parts of about this size at
    /// sequence boundaries, so that one chunk is parsed on every loader (default 1 MiB).
    pub part_bytes: u64,
    /// Most bytes of parsed data the engine keeps (default: no limit beyond the window).
    /// The chunk cache keeps its parts within the budget less the room of the minibatches
    /// that can be queued or held (the largest packed so far, times the pool's size) and of
    /// the loaders' buffers; it evicts the least recently used parts to stay there, also
    /// with `keepDataInMemory`. The parts of the minibatch being packed are never evicted, so
    /// a budget smaller than they need is exceeded by them; a budget smaller than the window
    /// and look-ahead makes parts be read again.
    pub memory_budget: Option<u64>,
}

impl Default for PipelineOptions {
    /// The available cores as loaders, 2 minibatches ahead.
    fn default() -> Self {
        PipelineOptions {
            loader_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            prefetch: 2,
            part_bytes: PART_BYTES,
            memory_budget: None,
        }
    }
}

type Loaded<T> = crate::pipeline::cache::Loaded<LoadedChunk<T>, LoadError>;
type Cache<T> = ChunkCache<LoadedChunk<T>, LoadError>;
type Item<T> = Result<Option<PooledMinibatch<T>>, SourceError>;

/// The default of [`PipelineOptions::part_bytes`].
pub const PART_BYTES: u64 = 1 << 20;

/// The parts chunks are loaded in: the cache's unit.
struct Parts {
    /// Per part: its chunk and its sequences (indices within the chunk).
    parts: Vec<(u32, std::ops::Range<u32>)>,
    /// Per chunk: its parts (ids).
    of_chunk: Vec<std::ops::Range<u32>>,
}

impl Parts {
    fn new(index: &CorpusIndex, part_bytes: u64) -> Self {
        let mut parts = Vec::new();
        let mut of_chunk = Vec::with_capacity(index.chunks.len());
        for chunk in 0..index.chunks.len() as u32 {
            let first_part = parts.len() as u32;
            let entries = index.chunk_sequences(chunk);
            // Cut only after a sequence with samples that is not the chunk's last one, so
            // that sequences without samples stay with the sequence carrying their errors
            // (the next with samples, or the last; see `source::Notes`).
            let last_carrier = entries.iter().rposition(|e| e.samples > 0);
            let mut start = 0usize;
            let mut bytes = 0u64;
            for (i, entry) in entries.iter().enumerate() {
                bytes += u64::from(entry.len);
                let may_cut = entry.samples > 0 && last_carrier.is_some_and(|last| i < last);
                if (bytes >= part_bytes && may_cut) || i + 1 == entries.len() {
                    parts.push((chunk, start as u32..(i + 1) as u32));
                    start = i + 1;
                    bytes = 0;
                }
            }
            of_chunk.push(first_part..parts.len() as u32);
        }
        Parts { parts, of_chunk }
    }

    /// The part holding the sequence of index ordinal `ordinal`.
    fn part_of_ordinal(&self, index: &CorpusIndex, ordinal: u32) -> u32 {
        let chunk = chunk_of(index, ordinal);
        self.part_of(chunk, ordinal - index.chunk(chunk).sequences.start)
    }

    /// The part holding sequence `within` (index within `chunk`).
    fn part_of(&self, chunk: u32, within: u32) -> u32 {
        let ids = self.of_chunk[chunk as usize].clone();
        let parts = &self.parts[ids.start as usize..ids.end as usize];
        ids.start + parts.partition_point(|(_, r)| r.end <= within) as u32
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
    /// Nanoseconds the loaders spent reading and parsing, summed.
    parse_nanos: AtomicU64,
    /// Nanoseconds the planner spent walking the timeline.
    plan_nanos: AtomicU64,
    /// Nanoseconds the packer spent copying sequences.
    pack_nanos: AtomicU64,
    budget: Option<Budget>,
    /// Heap bytes of the largest minibatch packed so far.
    largest_minibatch: AtomicU64,
}

/// [`PipelineOptions::memory_budget`], and what it must leave to other than the cache.
struct Budget {
    total: u64,
    /// The loaders' buffers.
    fixed: u64,
    /// Minibatches that can be alive at once (queued, being packed, held by the consumer
    /// within the pool's size).
    minibatches: u64,
}

impl Budget {
    /// What the cache may hold when the largest minibatch takes `largest` bytes.
    fn for_cache(&self, largest: u64) -> usize {
        let room = self
            .fixed
            .saturating_add(self.minibatches.saturating_mul(largest));
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
}

/// A running packer and planner, and the plan they follow.
struct Packer<T: Element> {
    output: Receiver<Item<T>>,
    /// The packer, then the planner.
    threads: Vec<JoinHandle<()>>,
    plan: Plan,
    finished: bool,
    /// The error that ended this packer's run: later calls repeat it instead of reporting
    /// the end of the data (a new packer, after a restore, starts clean).
    failed: Option<String>,
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
    prefetch: usize,
    /// Global position after the last minibatch handed out.
    position: u64,
    minibatches: u64,
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
        let opened = build_index(config, &IndexingOptions::for_config(config))
            .map_err(SourceError::Index)?;
        let index = Arc::clone(&opened.index);
        // What Timeline::new checks, without planning a sweep (the packer does that).
        let sweep_samples = index.total_samples();
        if sweep_samples == 0 {
            return Err(SourceError::Timeline(TimelineError::NoSamples));
        }
        let end = limit_end(&limits, sweep_samples)?;
        let chunks = index.chunks.len().max(1);
        let per_chunk = (sweep_samples / chunks as u64).max(1);
        // The chunks the order draws from at a time: the window, or one in file order.
        let window_chunks = match config.window() {
            _ if !config.randomize => 1,
            WindowSize::Chunks(n) => n.clamp(1, chunks as u64) as usize,
            WindowSize::Samples(n) => (n / per_chunk).clamp(1, chunks as u64) as usize,
        };
        let loader_threads = options.loader_threads.max(1);
        // Look ahead by enough chunks to give every loader two parts to parse: one chunk
        // when chunks hold many parts, up to two per loader when a chunk is one part.
        let chunk_bytes = (index.total_bytes() / chunks as u64).max(1);
        let part_bytes = options.part_bytes.clamp(1, chunk_bytes);
        let ahead_chunks = (2 * loader_threads as u64 * part_bytes)
            .div_ceil(chunk_bytes)
            .clamp(1, chunks as u64) as usize;
        let parts = Parts::new(&index, options.part_bytes.max(1));
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
        let pool_size = options.prefetch.max(1) + 2;
        // Room of the loaders' text and parse buffers (about three parts each).
        let loader_room = 3 * loader_threads as u64 * part_bytes;
        let budget = options.memory_budget.map(|budget| Budget {
            total: budget,
            fixed: loader_room,
            minibatches: pool_size as u64,
        });
        let shared = SharedArc::new(Shared {
            parts,
            cache: ChunkCache::new(capacity),
            pool: Arc::new(MinibatchPool::new(&config.inputs, pool_size)),
            budget,
            largest_minibatch: AtomicU64::new(0),
            charging: Mutex::new(Charging::new(config, sink)),
            chunks_loaded: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
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
            prefetch: options.prefetch.max(1),
            position: 0,
            minibatches: 0,
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
        if let Some(message) = &packer.failed {
            return Err(SourceError::Usage(format!(
                "the source failed earlier (restore a checkpoint to retry): {message}"
            )));
        }
        if packer.finished {
            return Ok(None);
        }
        let started = Instant::now();
        let received = packer.output.recv();
        self.wait_time += started.elapsed();
        match received {
            Ok(Ok(Some(batch))) => {
                self.position = batch.position;
                self.minibatches += 1;
                Ok(Some(batch))
            }
            Ok(Ok(None)) => {
                packer.finished = true;
                Ok(None)
            }
            Ok(Err(e)) => {
                packer.finished = true;
                packer.failed = Some(e.to_string());
                Err(e)
            }
            Err(_) => {
                let message = "the packer thread stopped unexpectedly (it panicked)";
                packer.finished = true;
                packer.failed = Some(message.to_string());
                Err(SourceError::Usage(message.to_string()))
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
        }
    }

    fn start_packer(&mut self, plan: Plan) -> Result<(), SourceError> {
        let Some(loads) = &self.loads else {
            return Err(SourceError::Usage(
                "the source is shutting down".to_string(),
            ));
        };
        // A new run (a restore, a new partition or size) reads again what failed before.
        self.shared.cache.forget_errors();
        let (output, items) = bounded::<Item<T>>(self.prefetch);
        let (plans, planned) = bounded::<Option<Vec<Planned>>>(self.prefetch);
        let shared = SharedArc::clone(&self.shared);
        let planner_loads = loads.clone();
        let run = plan.clone();
        let planner = Builder::new()
            .name("ctf-planner".to_string())
            .spawn(move || run_planner(&shared, &planner_loads, &run, &plans))
            .map_err(|e| SourceError::Usage(format!("cannot start the planner thread: {e}")))?;
        let shared = SharedArc::clone(&self.shared);
        let loads = loads.clone();
        let packer = Builder::new()
            .name("ctf-packer".to_string())
            .spawn(move || run_packer(&shared, &loads, &planned, &output));
        let packer = match packer {
            Ok(packer) => packer,
            Err(e) => {
                // The planner's next send fails without a receiver, which ends it.
                let _ = planner.join();
                return Err(SourceError::Usage(format!(
                    "cannot start the packer thread: {e}"
                )));
            }
        };
        self.packer = Some(Packer {
            output: items,
            threads: vec![packer, planner],
            plan,
            finished: false,
            failed: None,
        });
        Ok(())
    }

    /// Stops the packer and the planner, dropping what they prepared.
    fn stop_packer(&mut self) {
        if let Some(packer) = self.packer.take() {
            let Packer {
                output, threads, ..
            } = packer;
            // Without a receiver the packer's next send fails, which ends it; the minibatches
            // it prefetched go back to the pool. The planner's next send then fails too.
            drop(output);
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
        let (chunk, sequences) = shared.parts.parts[part as usize].clone();
        let before = loader.counters();
        let started = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut parsed = ParsedChunk::new(&shared.config.inputs);
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
            Err(_) => Err(ChunkArc::new(LoadError::Io {
                file: shared.index.files[shared.index.chunk(chunk).file as usize]
                    .name
                    .clone(),
                error: std::io::Error::other("a loader thread panicked while parsing it"),
            })),
        };
        let bytes = match &loaded {
            Ok(chunk) => chunk.heap_bytes(),
            Err(_) => 0,
        };
        shared.cache.insert(part, loaded, bytes);
    }
}

/// One minibatch as the planner chose it, for the packer.
struct Planned {
    /// Ordinals of this worker's sequences, in timeline order.
    sequences: Vec<u32>,
    sweep_end: bool,
    epoch_end: bool,
    /// Global position after it.
    end: u64,
}

/// Planned minibatches handed to the packer at once: one handoff (and wake-up) per batch
/// rather than per minibatch, which matters when minibatches hold a sequence or two.
const PLAN_BATCH: usize = 32;

/// The planner ("randomizer") thread: walks the timeline (computing each sweep's order),
/// asks for the chunks of the sequences up to `ahead_samples` past the minibatch it plans,
/// and hands the minibatches' sequences to the packer in batches of up to [`PLAN_BATCH`]
/// (and half the look-ahead); `None` at the end.
fn run_planner<T>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    plan: &Plan,
    planned: &Sender<Option<Vec<Planned>>>,
) {
    let mut batch = Vec::with_capacity(PLAN_BATCH);
    plan_into(shared, loads, plan, planned, &mut batch);
}

/// The planner's loop; returns at the end (having sent it) or when shutting down.
fn plan_into<T>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    plan: &Plan,
    planned: &Sender<Option<Vec<Planned>>>,
    batch: &mut Vec<Planned>,
) {
    let finish = |batch: &mut Vec<Planned>| {
        if !batch.is_empty() && planned.send(Some(std::mem::take(batch))).is_err() {
            return;
        }
        let _ = planned.send(None);
    };
    let timeline = Timeline::new(Arc::clone(&shared.index), &shared.config);
    let Ok(mut timeline) = timeline else {
        finish(batch);
        return;
    };
    timeline.set_partition(plan.rank, plan.workers);
    timeline.seek(plan.start);
    let mut ahead = timeline.clone();
    // Per part: 1 + the sweep it was last asked for in, 0 if never.
    let mut requested_in = vec![0u64; shared.parts.parts.len()];
    // Where the minibatches of `batch` start.
    let mut batch_start = 0;
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
        let planning = Instant::now();
        let selection = timeline.next_minibatch(size, end);
        add_time(&shared.plan_nanos, planning);
        let Some(selection) = selection else {
            finish(batch);
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
            let planning = Instant::now();
            let next = ahead.next_minibatch(step, plan.end);
            add_time(&shared.plan_nanos, planning);
            let Some(next) = next else {
                break;
            };
            for &ordinal in &next.sequences {
                let part = shared.parts.part_of_ordinal(&shared.index, ordinal);
                let asked = &mut requested_in[part as usize];
                if *asked != sweep + 1 {
                    *asked = sweep + 1;
                    if !request_part(shared, loads, part) {
                        return;
                    }
                }
            }
        }
        timeline.share_sweep_ahead(&ahead);
        if batch.is_empty() {
            batch_start = selection.start;
        }
        batch.push(Planned {
            sequences: selection.sequences,
            sweep_end: selection.sweep_end,
            epoch_end: epoch_end.is_some_and(|e| selection.end >= e),
            end: selection.end,
        });
        // A batch also ends after half the look-ahead, so that the packer never lags the
        // requests by more than the cache holds.
        let span = selection.end - batch_start;
        if batch.len() == PLAN_BATCH || span >= (plan.ahead_samples / 2).max(1) {
            let full = std::mem::replace(batch, Vec::with_capacity(PLAN_BATCH));
            if planned.send(Some(full)).is_err() {
                return; // the packer stopped
            }
        }
    }
}

/// The packer thread: packs the planned minibatches in order, charging invalid sequences as
/// the reference engine does, into the queue the consumer reads.
fn run_packer<T: Element>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    planned: &Receiver<Option<Vec<Planned>>>,
    output: &Sender<Item<T>>,
) {
    let item = |result: Item<T>| output.send(result).is_ok();
    let mut packing = Packing::new(&shared.parts);
    let mut batch: std::vec::IntoIter<Planned> = Vec::new().into_iter();
    loop {
        let next = match batch.next() {
            Some(next) => next,
            None => match planned.recv() {
                Ok(Some(next)) => {
                    batch = next.into_iter();
                    continue;
                }
                Ok(None) => {
                    let _ = item(Ok(None));
                    return;
                }
                Err(_) => {
                    // The planner ended without a word: it panicked.
                    let _ = item(Err(SourceError::Usage(
                        "the planner thread stopped unexpectedly (it panicked)".to_string(),
                    )));
                    return;
                }
            },
        };
        let mut batch = shared.pool.take_pooled();
        match pack(shared, loads, &mut packing, &next.sequences, &mut batch) {
            Ok(true) => {}
            Ok(false) => return, // shutting down
            Err(e) => {
                let _ = item(Err(e));
                return;
            }
        }
        batch.sweep_end = next.sweep_end;
        batch.epoch_end = next.epoch_end;
        batch.position = next.end;
        if let Some(budget) = &shared.budget {
            let bytes = batch.heap_bytes() as u64;
            if bytes > shared.largest_minibatch.fetch_max(bytes, Ordering::Relaxed) {
                shared.cache.set_byte_budget(Some(budget.for_cache(bytes)));
            }
        }
        if !item(Ok(Some(batch))) {
            return;
        }
    }
}

/// Asks for `part` to be loaded unless in memory or under way; false once shutting down.
fn request_part<T>(shared: &Shared<T>, loads: &Sender<u32>, part: u32) -> bool {
    match shared.cache.request(part) {
        Request::Present => true,
        Request::Load => loads.send(part).is_ok(),
        Request::Closed => false,
    }
}

/// The packer's memory across minibatches: the parts the current minibatch holds.
struct Packing<T> {
    held: Vec<(u32, ChunkArc<LoadedChunk<T>>)>,
    /// Per part: its slot in `held`, or `u32::MAX`.
    slot_of: Vec<u32>,
    /// The current minibatch's valid sequences as (slot in `held`, parsed position); kept
    /// for its allocation.
    found: Vec<(u32, u32)>,
}

impl<T> Packing<T> {
    fn new(parts: &Parts) -> Self {
        Packing {
            held: Vec::new(),
            slot_of: vec![u32::MAX; parts.parts.len()],
            found: Vec::new(),
        }
    }

    /// Lets go of the parts held (unpinning them).
    fn release(&mut self) {
        for (part, _) in self.held.drain(..) {
            self.slot_of[part as usize] = u32::MAX;
        }
    }
}

/// Packs `ordinals`; `Ok(false)` once shutting down.
fn pack<T: Element>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    packing: &mut Packing<T>,
    ordinals: &[u32],
    batch: &mut PooledMinibatch<T>,
) -> Result<bool, SourceError> {
    let packed = pack_held(shared, loads, packing, ordinals, batch);
    packing.release();
    packed
}

fn pack_held<T: Element>(
    shared: &Shared<T>,
    loads: &Sender<u32>,
    packing: &mut Packing<T>,
    ordinals: &[u32],
    batch: &mut PooledMinibatch<T>,
) -> Result<bool, SourceError> {
    // First every sequence's part (taking and charging as needed) and parsed position...
    packing.found.clear();
    for &ordinal in ordinals {
        let chunk = chunk_of(&shared.index, ordinal);
        let within = ordinal - shared.index.chunk(chunk).sequences.start;
        let part = shared.parts.part_of(chunk, within);
        let slot = match packing.slot_of[part as usize] {
            u32::MAX => {
                let Some(loaded) = take(shared, loads, part)? else {
                    return Ok(false);
                };
                packing.held.push((part, loaded));
                let slot = packing.held.len() as u32 - 1;
                packing.slot_of[part as usize] = slot;
                slot
            }
            slot => slot,
        };
        let loaded = &packing.held[slot as usize].1;
        let within = within - loaded.parsed.part.start;
        if !loaded.notes_empty() {
            let Ok(mut charging) = shared.charging.lock() else {
                return Ok(false);
            };
            charging.charge_sequence(&shared.index, loaded, within, ordinal)?;
        }
        match loaded.positions[within as usize] {
            u32::MAX => {} // invalid: charged, left out
            position => packing.found.push((slot, position)),
        }
    }
    // ...then all of them at once.
    let items: Vec<_> = packing
        .found
        .iter()
        .map(|&(slot, position)| {
            let loaded = &packing.held[slot as usize].1;
            (&loaded.parsed.sequences, position as usize)
        })
        .collect();
    let packing = Instant::now();
    let pushed = batch.push_sequences(&items).map_err(SourceError::Pack);
    add_time(&shared.pack_nanos, packing);
    pushed?;
    Ok(true)
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
