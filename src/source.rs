//! Reading minibatches. [`MinibatchSource`], the reader's public face, is the threaded engine
//! of [`crate::pipeline`]; this module holds what it shares with [`ReferenceSource`], the
//! single-threaded reference engine. The reference indexes the corpus, walks the timeline
//! ([`crate::timeline`]), loads and parses the chunks the timeline's minibatches need
//! ([`crate::chunks`]) and packs their sequences into pooled minibatches
//! ([`crate::minibatch`]), all inside [`ReferenceSource::next_minibatch`], in the caller's
//! thread. Its output is the contract the threaded engine reproduces byte for byte.
//!
//! Invalid sequences (parse errors, repeated ids) take their place on the timeline but are
//! left out of the minibatches; each is charged against `maxErrors` once for the life of the
//! source, when its chunk is first loaded, and reported at `traceLevel >= 1`.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::pipeline::engine::{MinibatchSource, PipelineOptions};

use crate::chunks::{ChunkLoader, LoadError, ParsedChunk};
use crate::config::{ReaderConfig, WindowSize};
use crate::index::build::{build_index, IndexingOptions, OpenedIndex};
use crate::index::{CorpusIndex, IndexError};
use crate::minibatch::{Minibatch, MinibatchPool, PackError, PooledMinibatch};
use crate::parser::{Element, InvalidSequence};
use crate::reader::{DiagnosticSink, ErrorBudget, ReadError};
use crate::timeline::checkpoint::{fingerprint, Checkpoint, CheckpointError};
use crate::timeline::schedule::MbSchedule;
use crate::timeline::{Selection, Timeline, TimelineError};
use crate::Diagnostic;

/// `max_samples` value meaning one sweep (CNTK's `FULL_DATA_SWEEP`).
pub const FULL_DATA_SWEEP: u64 = u64::MAX - 1;
/// `max_samples` value meaning no end (CNTK's `INFINITELY_REPEAT`).
pub const INFINITELY_REPEAT: u64 = u64::MAX;

/// Minibatches kept for reuse by a source's pool.
const POOL_CAPACITY: usize = 4;

/// How far and in which steps a source reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadLimits {
    /// Stop at this global position (samples), or [`FULL_DATA_SWEEP`] /
    /// [`INFINITELY_REPEAT`]. Exclusive with `max_sweeps`.
    pub max_samples: Option<u64>,
    /// Stop after this many sweeps. Exclusive with `max_samples`.
    pub max_sweeps: Option<u64>,
    /// Epochs of this many samples: a minibatch never crosses an epoch end (a sequence that
    /// starts before it is delivered whole) and the schedule advances per epoch. Without it,
    /// minibatches run across sweep ends and the schedule's epochs are sweeps.
    pub epoch_size: Option<u64>,
}

impl Default for ReadLimits {
    /// One sweep, no epochs.
    fn default() -> Self {
        ReadLimits {
            max_samples: None,
            max_sweeps: Some(1),
            epoch_size: None,
        }
    }
}

/// Why a source failed.
#[derive(Debug)]
pub enum SourceError {
    /// The corpus could not be indexed.
    Index(IndexError),
    /// A chunk could not be read, or its file changed.
    Load(LoadError),
    /// More invalid sequences than `maxErrors` allows.
    Data(ReadError),
    /// The corpus has nothing to read.
    Timeline(TimelineError),
    /// A minibatch could not be packed.
    Pack(PackError),
    /// A checkpoint could not be used.
    Checkpoint(CheckpointError),
    /// The request or the limits are not valid.
    Usage(String),
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Index(e) => write!(f, "{e}"),
            SourceError::Load(e) => write!(f, "{e}"),
            SourceError::Data(e) => write!(f, "{e}"),
            SourceError::Timeline(e) => write!(f, "{e}"),
            SourceError::Pack(e) => write!(f, "{e}"),
            SourceError::Checkpoint(e) => write!(f, "{e}"),
            SourceError::Usage(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for SourceError {}

/// What a source has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceCounters {
    /// Chunks read and parsed (a chunk read again after eviction counts again).
    pub chunks_loaded: u64,
    /// Bytes read from data files.
    pub bytes_read: u64,
    /// Chunk requests served from memory.
    pub cache_hits: u64,
    /// Chunk requests that had to load the chunk.
    pub cache_misses: u64,
    /// Heap bytes of the parsed data the chunk cache holds now.
    pub cache_bytes: u64,
    /// Minibatches handed out.
    pub minibatches: u64,
    /// Time spent reading and parsing chunks, summed over the threads that did it.
    pub parse_time: Duration,
    /// Time spent planning: walking the timeline and computing sweep orders (the look-ahead
    /// included in the threaded engine).
    pub plan_time: Duration,
    /// Time spent copying sequences into minibatches.
    pub pack_time: Duration,
    /// Time the consumer spent waiting inside `next_minibatch` (for the reference engine,
    /// all the work happens there).
    pub wait_time: Duration,
}

/// A parsed chunk, and where each of its index sequences is among the parsed ones.
pub(crate) struct LoadedChunk<T> {
    pub(crate) parsed: ParsedChunk<T>,
    /// Per sequence of the chunk (index order): its position among the valid parsed
    /// sequences, or `u32::MAX` if it is invalid.
    pub(crate) positions: Vec<u32>,
}

impl<T> LoadedChunk<T> {
    /// A parsed chunk with the map of its sequences.
    pub(crate) fn new(index: &CorpusIndex, parsed: ParsedChunk<T>) -> Self {
        let positions = positions_of(index, parsed.chunk, &parsed);
        LoadedChunk { parsed, positions }
    }

    /// Bytes it holds on the heap: the parsed sequences and the map.
    pub(crate) fn heap_bytes(&self) -> usize
    where
        T: Element,
    {
        self.parsed.sequences.heap_bytes() + self.positions.capacity() * std::mem::size_of::<u32>()
    }
}

/// Invalid sequences charged against `maxErrors`, once per chunk for the life of a source,
/// in the order chunks are first used.
pub(crate) struct Charging {
    budget: ErrorBudget,
    sink: DiagnosticSink,
    charged: Vec<bool>,
}

impl Charging {
    pub(crate) fn new(config: &ReaderConfig, chunks: usize, sink: DiagnosticSink) -> Self {
        Charging {
            budget: ErrorBudget::for_config(config),
            sink,
            charged: vec![false; chunks],
        }
    }

    /// Charges the invalid sequences and reports the warnings of a whole parsed chunk,
    /// unless done before.
    pub(crate) fn charge<T>(
        &mut self,
        index: &CorpusIndex,
        parsed: &ParsedChunk<T>,
    ) -> Result<(), SourceError> {
        self.charge_chunk(index, parsed.chunk, &parsed.diagnostics, &parsed.invalid)
    }

    /// Whether `chunk` was charged already.
    pub(crate) fn is_charged(&self, chunk: u32) -> bool {
        self.charged[chunk as usize]
    }

    /// Charges the invalid sequences and reports the warnings of `chunk`, given as lists in
    /// file order, unless done before.
    pub(crate) fn charge_chunk(
        &mut self,
        index: &CorpusIndex,
        chunk: u32,
        diagnostics: &[Diagnostic],
        invalid: &[InvalidSequence],
    ) -> Result<(), SourceError> {
        if self.charged[chunk as usize] {
            return Ok(());
        }
        self.charged[chunk as usize] = true;
        let file = &index.files[index.chunk(chunk).file as usize].name;
        self.budget
            .charge(file, diagnostics, invalid, &mut *self.sink)
            .map_err(|exceeded| SourceError::Data(exceeded.error))
    }
}

/// Where the next minibatch from `position` must stop: the read's `end`, or the end of the
/// current epoch (then also returned as the epoch end).
pub(crate) fn minibatch_end(
    position: u64,
    end: u64,
    epoch_size: Option<u64>,
) -> (u64, Option<u64>) {
    if let Some(epoch) = epoch_size {
        let next = (position / epoch + 1).saturating_mul(epoch);
        if next <= end {
            return (next, Some(next));
        }
    }
    (end, None)
}

/// Refuses a checkpoint of another corpus or order.
pub(crate) fn check_checkpoint(
    checkpoint: &Checkpoint,
    fingerprint: u64,
) -> Result<(), SourceError> {
    if checkpoint.fingerprint == fingerprint {
        return Ok(());
    }
    Err(SourceError::Checkpoint(CheckpointError {
        message: "it was taken on a different corpus or with a different order-shaping \
                  configuration (files, inputs, chunk size, randomization settings)"
            .to_string(),
    }))
}

/// Refuses a rank that is not below the number of workers.
pub(crate) fn check_partition(rank: u32, workers: u32) -> Result<(), SourceError> {
    if workers == 0 || rank >= workers {
        return Err(SourceError::Usage(format!(
            "rank {rank} is not below the number of workers {workers}"
        )));
    }
    Ok(())
}

/// The chunk holding sequence `ordinal`.
pub(crate) fn chunk_of(index: &CorpusIndex, ordinal: u32) -> u32 {
    index.chunks.partition_point(|c| c.sequences.end <= ordinal) as u32
}

/// Appends sequence `ordinal` of `loaded` to `batch`, unless it is invalid.
pub(crate) fn push_ordinal<T: Element>(
    index: &CorpusIndex,
    loaded: &LoadedChunk<T>,
    ordinal: u32,
    batch: &mut Minibatch<T>,
) -> Result<(), SourceError> {
    let within =
        ordinal - index.chunk(loaded.parsed.chunk).sequences.start - loaded.parsed.part.start;
    match loaded.positions[within as usize] {
        u32::MAX => Ok(()),
        position => batch
            .push_sequence(&loaded.parsed.sequences, position as usize)
            .map_err(SourceError::Pack),
    }
}

/// Reads minibatches of a corpus along the global timeline, in the caller's thread: the
/// reference engine.
pub struct ReferenceSource<T> {
    config: ReaderConfig,
    index: Arc<CorpusIndex>,
    /// Keeps the background index-cache writer alive (dropping it waits for it).
    _opened: OpenedIndex,
    timeline: Timeline,
    loader: ChunkLoader<T>,
    pool: Arc<MinibatchPool<T>>,
    chunks: HashMap<u32, LoadedChunk<T>>,
    /// Loaded chunks, least recently used first.
    recency: VecDeque<u32>,
    cache_capacity: usize,
    charging: Charging,
    fingerprint: u64,
    limits: ReadLimits,
    end: u64,
    schedule: Option<MbSchedule>,
    counters: SourceCounters,
}

impl<T: Element> ReferenceSource<T> {
    /// Indexes the corpus of `config` (using and writing index caches as `cacheIndex` says)
    /// and stands at position 0. Diagnostics go to `sink`.
    pub fn new(
        config: &ReaderConfig,
        limits: ReadLimits,
        sink: DiagnosticSink,
    ) -> Result<Self, SourceError> {
        let opened = build_index(config, &IndexingOptions::for_config(config))
            .map_err(SourceError::Index)?;
        let index = Arc::clone(&opened.index);
        let timeline = Timeline::new(Arc::clone(&index), config).map_err(SourceError::Timeline)?;
        let end = limit_end(&limits, timeline.sweep_samples())?;
        let cache_capacity = if config.keep_data_in_memory {
            usize::MAX
        } else {
            match config.window() {
                WindowSize::Chunks(n) => n.clamp(2, 1 << 16) as usize,
                WindowSize::Samples(n) => {
                    let per_chunk =
                        (timeline.sweep_samples() / index.chunks.len().max(1) as u64).max(1);
                    (n / per_chunk).clamp(2, 1 << 16) as usize
                }
            }
        };
        Ok(ReferenceSource {
            loader: ChunkLoader::new(Arc::clone(&index), config),
            pool: Arc::new(MinibatchPool::new(&config.inputs, POOL_CAPACITY)),
            chunks: HashMap::new(),
            recency: VecDeque::new(),
            cache_capacity,
            charging: Charging::new(config, index.chunks.len(), sink),
            fingerprint: fingerprint(&index, config),
            config: config.clone(),
            index,
            _opened: opened,
            timeline,
            limits,
            end,
            schedule: None,
            counters: SourceCounters::default(),
        })
    }

    /// Uses a minibatch-size schedule: [`next_scheduled`](Self::next_scheduled) then takes
    /// the size of the current epoch from it.
    pub fn set_schedule(&mut self, schedule: MbSchedule) {
        self.schedule = Some(schedule);
    }

    /// The next minibatch of the size the schedule gives for the current epoch (a constant
    /// `size` without a schedule).
    pub fn next_scheduled(&mut self, size: u64) -> Result<Option<PooledMinibatch<T>>, SourceError> {
        let size = match &self.schedule {
            Some(schedule) => schedule.size_for_epoch(self.epoch()),
            None => size,
        };
        self.next_minibatch(size)
    }

    /// The current epoch: by `epoch_size`, or the sweep without one.
    pub fn epoch(&self) -> u64 {
        let epoch = self
            .limits
            .epoch_size
            .unwrap_or(self.timeline.sweep_samples());
        self.timeline.position() / epoch.max(1)
    }

    /// The next minibatch of about `size` samples (whole sequences; at least one sequence of
    /// the global timeline), or `None` at the end of the data. With several workers this is
    /// this worker's share, possibly empty; every worker gets `None` at the same call.
    pub fn next_minibatch(&mut self, size: u64) -> Result<Option<PooledMinibatch<T>>, SourceError> {
        if size == 0 {
            return Err(SourceError::Usage(
                "the minibatch size must be at least 1 sample".to_string(),
            ));
        }
        let started = Instant::now();
        let next = self.next_selected(size);
        self.counters.wait_time += started.elapsed();
        next
    }

    fn next_selected(&mut self, size: u64) -> Result<Option<PooledMinibatch<T>>, SourceError> {
        let (end, epoch_end) =
            minibatch_end(self.timeline.position(), self.end, self.limits.epoch_size);
        let planning = Instant::now();
        let selection = self.timeline.next_minibatch(size, end);
        self.counters.plan_time += planning.elapsed();
        let Some(selection) = selection else {
            return Ok(None);
        };
        let mut batch = self.pool.take_pooled();
        self.pack(&selection, &mut batch)?;
        batch.sweep_end = selection.sweep_end;
        batch.epoch_end = epoch_end.is_some_and(|e| selection.end >= e);
        batch.position = selection.end;
        self.counters.minibatches += 1;
        Ok(Some(batch))
    }

    /// Where the source stands: after the last minibatch handed out.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            position: self.timeline.position(),
            fingerprint: self.fingerprint,
        }
    }

    /// Continues from `checkpoint`, exactly where the run that took it would have; nothing
    /// is read to get there. A checkpoint of another corpus or order is an error.
    pub fn restore(&mut self, checkpoint: &Checkpoint) -> Result<(), SourceError> {
        check_checkpoint(checkpoint, self.fingerprint)?;
        self.timeline.seek(checkpoint.position);
        Ok(())
    }

    /// Makes this source worker `rank` of `workers` from the current position on.
    pub fn set_partition(&mut self, rank: u32, workers: u32) -> Result<(), SourceError> {
        check_partition(rank, workers)?;
        self.timeline.set_partition(rank, workers);
        Ok(())
    }

    /// Samples per sweep.
    pub fn sweep_samples(&self) -> u64 {
        self.timeline.sweep_samples()
    }

    /// The global position after the last minibatch handed out.
    pub fn position(&self) -> u64 {
        self.timeline.position()
    }

    /// The corpus index.
    pub fn index(&self) -> &Arc<CorpusIndex> {
        &self.index
    }

    /// The configuration read.
    pub fn config(&self) -> &ReaderConfig {
        &self.config
    }

    /// What the source has done so far.
    pub fn counters(&self) -> SourceCounters {
        let loads = self.loader.counters();
        SourceCounters {
            chunks_loaded: loads.chunks_loaded,
            bytes_read: loads.bytes_read,
            cache_bytes: self.chunks.values().map(|c| c.heap_bytes() as u64).sum(),
            ..self.counters
        }
    }

    /// Packs this worker's valid sequences of `selection`.
    fn pack(
        &mut self,
        selection: &Selection,
        batch: &mut PooledMinibatch<T>,
    ) -> Result<(), SourceError> {
        let mut needed: Vec<u32> = Vec::new();
        for &ordinal in &selection.sequences {
            let chunk = chunk_of(&self.index, ordinal);
            if !needed.contains(&chunk) {
                needed.push(chunk);
            }
        }
        for &chunk in &needed {
            self.ensure_loaded(chunk)?;
        }
        let packing = Instant::now();
        for &ordinal in &selection.sequences {
            if let Some(loaded) = self.chunks.get(&chunk_of(&self.index, ordinal)) {
                push_ordinal(&self.index, loaded, ordinal, batch)?;
            }
        }
        self.counters.pack_time += packing.elapsed();
        self.evict(&needed);
        Ok(())
    }

    /// Loads `chunk` unless it is in memory, charging its invalid sequences on first load.
    fn ensure_loaded(&mut self, chunk: u32) -> Result<(), SourceError> {
        if self.chunks.contains_key(&chunk) {
            self.counters.cache_hits += 1;
            self.touch(chunk);
            return Ok(());
        }
        self.counters.cache_misses += 1;
        let mut parsed = ParsedChunk::new(&self.config.inputs);
        let started = Instant::now();
        let loaded = self.loader.load(chunk, &mut parsed);
        self.counters.parse_time += started.elapsed();
        loaded.map_err(SourceError::Load)?;
        self.charging.charge(&self.index, &parsed)?;
        self.chunks
            .insert(chunk, LoadedChunk::new(&self.index, parsed));
        self.recency.push_back(chunk);
        Ok(())
    }

    fn touch(&mut self, chunk: u32) {
        if let Some(i) = self.recency.iter().position(|&c| c == chunk) {
            self.recency.remove(i);
        }
        self.recency.push_back(chunk);
    }

    /// Drops the least recently used chunks beyond the capacity, never those in `keep`.
    fn evict(&mut self, keep: &[u32]) {
        let mut skipped = 0;
        while self.chunks.len() > self.cache_capacity && skipped < self.recency.len() {
            let Some(oldest) = self.recency.pop_front() else {
                break;
            };
            if keep.contains(&oldest) {
                self.recency.push_back(oldest);
                skipped += 1;
                continue;
            }
            self.chunks.remove(&oldest);
        }
    }
}

/// Per sequence of the loaded part of `chunk` (index order), its position among the parsed
/// valid sequences, or `u32::MAX` when it is invalid or holds no sample.
fn positions_of<T>(index: &CorpusIndex, chunk: u32, parsed: &ParsedChunk<T>) -> Vec<u32> {
    let c = index.chunk(chunk);
    let valid = &parsed.sequences.sequences;
    let part = parsed.part.start as usize..parsed.part.end as usize;
    let mut next = 0;
    index.chunk_sequences(chunk)[part]
        .iter()
        .map(|entry| {
            let line = c.first_line + u64::from(entry.line);
            if valid.get(next).is_some_and(|s| s.line == line) {
                next += 1;
                (next - 1) as u32
            } else {
                u32::MAX
            }
        })
        .collect()
}

/// The global position where reading stops.
pub(crate) fn limit_end(limits: &ReadLimits, sweep_samples: u64) -> Result<u64, SourceError> {
    match (limits.max_samples, limits.max_sweeps) {
        (Some(_), Some(_)) => Err(SourceError::Usage(
            "max_samples and max_sweeps cannot both be set".to_string(),
        )),
        (Some(FULL_DATA_SWEEP), None) => Ok(sweep_samples),
        (Some(INFINITELY_REPEAT), None) | (None, None) => Ok(u64::MAX),
        (Some(samples), None) => Ok(samples),
        (None, Some(sweeps)) => Ok(sweeps.saturating_mul(sweep_samples)),
    }
}
