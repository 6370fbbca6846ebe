//! Reading minibatches. [`MinibatchSource`], the reader's public face, is the threaded engine
//! of [`crate::pipeline`]; this module holds what it shares with [`ReferenceSource`], the
//! single-threaded reference engine. The reference indexes the corpus, walks the timeline
//! ([`crate::timeline`]), loads and parses the chunks the timeline's minibatches need
//! ([`crate::chunks`]) and packs their sequences into pooled minibatches
//! ([`crate::minibatch`]), all inside [`ReferenceSource::next_minibatch`], in the caller's
//! thread. Its output is the contract the threaded engine reproduces byte for byte.
//!
//! Invalid sequences (parse errors, repeated ids) take their place on the timeline but are
//! left out of the minibatches. Each is charged against `maxErrors`, and reported at
//! `traceLevel >= 1` with the warnings of its lines, once for the life of the source, in the
//! minibatch that would hold it: so a read fails at the same call whatever the part size or
//! thread count, and no chunk must be parsed whole before its first minibatch. A
//! sequence without samples (no place on the timeline) is carried by the next sequence of its
//! chunk that has samples, or the chunk's last one that has; those of a chunk without any
//! sample (junk lines, or a file of them) are charged at the source's first minibatch.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::pipeline::engine::{MinibatchSource, PipelineOptions, MAX_PREFETCH, MAX_THREADS};

use crate::chunks::{ChunkLoader, LoadError, ParsedChunk};
use crate::config::{ReaderConfig, WindowSize};
use crate::index::build::{build_index, IndexingOptions, OpenedIndex};
use crate::index::{CorpusIndex, IndexError, SequenceEntry};
use crate::minibatch::{Minibatch, MinibatchPool, PackError, PooledMinibatch};
use crate::parser::{Element, SequenceLookup};
use crate::reader::{share_with_indexing, DiagnosticSink, ErrorBudget, ReadError};
use crate::timeline::checkpoint::{fingerprint, Checkpoint, CheckpointError};
use crate::timeline::schedule::MbSchedule;
use crate::timeline::{Selection, Timeline, TimelineError};
use crate::{Diagnostic, Severity};

/// `max_samples` value meaning one sweep (CNTK's `FULL_DATA_SWEEP`).
pub const FULL_DATA_SWEEP: u64 = u64::MAX - 1;
/// `max_samples` value meaning no end (CNTK's `INFINITELY_REPEAT`).
pub const INFINITELY_REPEAT: u64 = u64::MAX;

/// Minibatches kept for reuse by a source's pool.
const POOL_CAPACITY: usize = 4;

/// How far and in which steps a source reads. The default reads one sweep
/// (`max_sweeps: Some(1)`): a sample limit needs `max_sweeps: None` beside it. Neither
/// limit is an endless read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadLimits {
    /// Stop at this global position (samples), or [`FULL_DATA_SWEEP`] /
    /// [`INFINITELY_REPEAT`]. Exclusive with `max_sweeps`.
    pub max_samples: Option<u64>,
    /// Stop after this many sweeps. Exclusive with `max_samples`.
    pub max_sweeps: Option<u64>,
    /// Epochs of this many samples (at least 1), ending at its multiples on the timeline: a
    /// minibatch takes only sequences that start before the next epoch end, so its last may
    /// run past that end (a sequence is delivered whole) and the next minibatch starts a new
    /// epoch; the schedule advances per epoch. Without it, minibatches run across sweep ends
    /// and the schedule's epochs are sweeps.
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
    /// A thread of the engine panicked: a bug in ctf-reader (the C ABI's
    /// `CTF_STATUS_PANIC`).
    Internal(String),
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
            SourceError::Internal(m) => write!(f, "internal error (a bug in ctf-reader): {m}"),
        }
    }
}

impl std::error::Error for SourceError {}

/// What a source has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceCounters {
    /// Chunks read and parsed (a chunk read again after eviction counts again).
    pub chunks_loaded: u64,
    /// Bytes read from data files, in chunks or parts of chunks (and, for a line-mode file
    /// whose first sequence's line starts with whitespace and a digit, the text before it,
    /// read to tell whether that line is the file's first with content).
    pub bytes_read: u64,
    /// Bytes the threaded engine read sequence by sequence: for the first minibatch after a
    /// start or restore, the sequences whose parts were not loaded yet (so that it need not
    /// wait for them); and under a memory budget too small for the window, every sequence
    /// (see `PipelineOptions::memory_budget`). The first minibatch's parts are read whole
    /// too, in `bytes_read`, when a later minibatch needs them or a load asked for ahead
    /// completes; a part whose sequences the first minibatch holds all may never be. Over a
    /// whole sweep, `bytes_read` plus these cover every byte of every chunk.
    pub quick_bytes_read: u64,
    /// Parts the threaded engine took from the sequences parsed while indexing (on a cold
    /// start; see `index::stash`) instead of reading and parsing them; counted in
    /// `bytes_read` and `chunks_loaded` too, as their text was read.
    pub parts_parsed_while_indexing: u64,
    /// Packer threads of the threaded engine's current run pinned to a CPU of their own
    /// ([`PipelineOptions::pin_packers`]); 0 for the reference engine.
    pub pinned_packers: u64,
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
    /// Time spent planning: walking the timeline and computing sweep orders. The threaded
    /// engine's planner also walks ahead and asks for the parts it will need, and is timed
    /// per batch of planned minibatches, not per minibatch (two clock reads per minibatch
    /// cost its packing phase about 5% on minibatches of a sequence or two).
    pub plan_time: Duration,
    /// Time spent packing: copying sequences into minibatches. The threaded engine times its
    /// packers per batch of planned minibatches (summed over them, handing the minibatches
    /// over excluded), so this also counts finding each sequence's part and position, and
    /// waiting for a part still being loaded.
    pub pack_time: Duration,
    /// Time the consumer spent waiting inside `next_minibatch` (for the reference engine,
    /// all the work happens there).
    pub wait_time: Duration,
}

/// A parsed chunk (or part of one), where each of its index sequences is among the parsed
/// ones, and what to report when each is first met.
pub(crate) struct LoadedChunk<T> {
    pub(crate) parsed: ParsedChunk<T>,
    /// Per sequence of the part (index order): its position among the valid parsed
    /// sequences, or `u32::MAX` if it is invalid. Empty when every sequence is valid and so
    /// at its own position (the usual case): the packer then looks nothing up.
    positions: Vec<u32>,
    /// Where each parsed sequence lies, one row each, when each holds one sample of every
    /// input and some input stores its sample offsets (see [`SequenceLookup::build`]; built
    /// here, from `parsed`, which nothing changes afterwards).
    pub(crate) lookup: Option<SequenceLookup>,
    /// The warnings of the part, in file order.
    warnings: Vec<Diagnostic>,
    /// What each sequence carries to the error budget, by index within the part (sorted).
    notes: Vec<Notes>,
}

/// The warnings and invalid sequences a sequence carries: its own, and those of sequences
/// with no samples (which take no place on the timeline) just before it, or, for the last
/// sequence with samples of its chunk, just after it.
struct Notes {
    within: u32,
    warnings: Range<usize>,
    invalid: Range<usize>,
}

impl<T> LoadedChunk<T> {
    /// A parsed chunk with the map of its sequences.
    pub(crate) fn new(index: &CorpusIndex, parsed: ParsedChunk<T>) -> Self {
        let positions = positions_of(index, parsed.chunk, &parsed);
        let warnings: Vec<Diagnostic> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .cloned()
            .collect();
        let notes = notes_of(index, &parsed, &warnings);
        LoadedChunk {
            lookup: SequenceLookup::build(&parsed.sequences),
            parsed,
            positions,
            warnings,
            notes,
        }
    }

    /// The position among the parsed valid sequences of the sequence at `within` (index
    /// order within the part), or `None` if it is invalid.
    #[inline]
    pub(crate) fn position(&self, within: u32) -> Option<u32> {
        if self.positions.is_empty() {
            return Some(within);
        }
        match self.positions[within as usize] {
            u32::MAX => None,
            position => Some(position),
        }
    }

    /// Whether no sequence of it carries a warning or an invalid sequence.
    pub(crate) fn notes_empty(&self) -> bool {
        self.notes.is_empty()
    }

    /// Bytes it holds on the heap: the parsed sequences and the map.
    pub(crate) fn heap_bytes(&self) -> usize
    where
        T: Element,
    {
        self.parsed.sequences.heap_bytes()
            + self.positions.capacity() * std::mem::size_of::<u32>()
            + self.lookup.as_ref().map_or(0, SequenceLookup::heap_bytes)
    }
}

/// Which sequence of `parsed` carries which warnings and invalid sequences (see [`Notes`]).
fn notes_of<T>(
    index: &CorpusIndex,
    parsed: &ParsedChunk<T>,
    warnings: &[Diagnostic],
) -> Vec<Notes> {
    let invalid = &parsed.invalid;
    if warnings.is_empty() && invalid.is_empty() {
        return Vec::new();
    }
    let chunk = index.chunk(parsed.chunk);
    let entries =
        &index.chunk_sequences(parsed.chunk)[parsed.part.start as usize..parsed.part.end as usize];
    let last_carrier = entries.iter().rposition(|e| e.samples > 0);
    let (mut w, mut v) = (0, 0);
    let (mut assigned_w, mut assigned_v) = (0, 0);
    let mut notes = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        // This sequence's own notes: those before the next sequence's first line.
        let next_line = entries
            .get(i + 1)
            .map_or(u64::MAX, |next| chunk.first_line + u64::from(next.line));
        while w < warnings.len() && warnings[w].line < next_line {
            w += 1;
        }
        while v < invalid.len() && invalid[v].line < next_line {
            v += 1;
        }
        if entry.samples == 0 {
            continue; // carried by the next sequence with samples (or the last one)
        }
        let (end_w, end_v) = if Some(i) == last_carrier {
            (warnings.len(), invalid.len())
        } else {
            (w, v)
        };
        if end_w > assigned_w || end_v > assigned_v {
            notes.push(Notes {
                within: i as u32,
                warnings: assigned_w..end_w,
                invalid: assigned_v..end_v,
            });
        }
        (assigned_w, assigned_v) = (end_w, end_v);
    }
    notes
}

/// Invalid sequences charged against `maxErrors` and warnings reported, each when the
/// timeline first delivers the sequence carrying it (in the minibatch that holds, or would
/// hold, it), once for the life of a source.
pub(crate) struct Charging {
    budget: ErrorBudget,
    sink: DiagnosticSink,
    /// Ordinals of the sequences whose notes were charged.
    met: HashSet<u32>,
    /// How far [`charge_chunks_without_samples`](Self::charge_chunks_without_samples) got:
    /// the chunk it looks at and the next of that chunk's sequences to charge.
    sampleless_at: (u32, u32),
}

/// Sequences of a chunk without samples parsed at once when it is charged: what a chunk of
/// junk costs in memory is bounded, not its size.
const SAMPLELESS_BATCH: u32 = 4096;

impl Charging {
    pub(crate) fn new(config: &ReaderConfig, sink: DiagnosticSink) -> Self {
        Charging {
            budget: ErrorBudget::for_config(config),
            sink,
            met: HashSet::new(),
            sampleless_at: (0, 0),
        }
    }

    /// Charges what sequence `ordinal` (index `within` its part `loaded`) carries, unless
    /// done before.
    pub(crate) fn charge_sequence<T>(
        &mut self,
        index: &CorpusIndex,
        loaded: &LoadedChunk<T>,
        within: u32,
        ordinal: u32,
    ) -> Result<(), SourceError> {
        if loaded.notes.is_empty() {
            return Ok(());
        }
        let Ok(k) = loaded.notes.binary_search_by_key(&within, |n| n.within) else {
            return Ok(());
        };
        if !self.met.insert(ordinal) {
            return Ok(());
        }
        let notes = &loaded.notes[k];
        let file = &index.files[index.chunk(loaded.parsed.chunk).file as usize].name;
        self.budget
            .charge(
                file,
                &loaded.warnings[notes.warnings.clone()],
                &loaded.parsed.invalid[notes.invalid.clone()],
                &mut *self.sink,
            )
            .map_err(|exceeded| SourceError::Data(exceeded.error))
    }

    /// Charges the invalid sequences and warnings of the chunks that hold no sample, once
    /// for the life of the source. No sequence of such a chunk has a place on the timeline,
    /// so none carries the others' notes (a chunk of junk lines, or a file of them): they are
    /// charged at the source's first minibatch, in chunk order, before that minibatch's own,
    /// or, when the corpus holds no sample at all, before its "nothing to read" error. A
    /// load error leaves the rest to the next call; a chunk whose charge exceeds the budget
    /// is not charged again.
    pub(crate) fn charge_chunks_without_samples<T: Element>(
        &mut self,
        index: &Arc<CorpusIndex>,
        config: &ReaderConfig,
    ) -> Result<(), SourceError> {
        let chunks = index.chunks.len() as u32;
        let mut loader = None;
        let mut parsed = None;
        while self.sampleless_at.0 < chunks {
            let (chunk, from) = self.sampleless_at;
            let c = index.chunk(chunk);
            let count = c.sequences.len() as u32;
            if c.samples != 0 || from >= count {
                self.sampleless_at = (chunk + 1, 0);
                continue;
            }
            let part = from..count.min(from.saturating_add(SAMPLELESS_BATCH));
            let loader =
                loader.get_or_insert_with(|| ChunkLoader::<T>::new(Arc::clone(index), config));
            let into = parsed.get_or_insert_with(|| ParsedChunk::new(&config.inputs));
            loader
                .load_part(chunk, part.clone(), into)
                .map_err(SourceError::Load)?;
            self.sampleless_at = (chunk, part.end);
            let file = &index.files[c.file as usize].name;
            self.budget
                .charge(file, &into.diagnostics, &into.invalid, &mut *self.sink)
                .map_err(|exceeded| SourceError::Data(exceeded.error))?;
        }
        Ok(())
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

/// The furthest position a checkpoint may hold: 2^62 samples, centuries of reading at a
/// billion samples a second. A position past it was never written by a read, and the
/// timeline's sums of positions and sweep sizes could wrap on it.
pub const MAX_CHECKPOINT_POSITION: u64 = 1 << 62;

/// Refuses a checkpoint of another corpus or order, or one whose position no read reaches
/// ([`MAX_CHECKPOINT_POSITION`]).
pub(crate) fn check_checkpoint(
    checkpoint: &Checkpoint,
    fingerprint: u64,
) -> Result<(), SourceError> {
    if checkpoint.fingerprint != fingerprint {
        return Err(SourceError::Checkpoint(CheckpointError {
            message: "it was taken on a different corpus or with a different order-shaping \
                      configuration (files, inputs, chunk size, randomization settings)"
                .to_string(),
        }));
    }
    if checkpoint.position > MAX_CHECKPOINT_POSITION {
        return Err(SourceError::Checkpoint(CheckpointError {
            message: format!(
                "its position {} is past any position a read reaches (at most 2^62 samples)",
                checkpoint.position
            ),
        }));
    }
    Ok(())
}

/// Refuses a configuration its builder would have refused (its fields are public, so it
/// may have been changed after it was built): a rank not below the number of workers, say.
pub(crate) fn check_config(config: &ReaderConfig) -> Result<(), SourceError> {
    config
        .check()
        .map_err(|e| SourceError::Usage(format!("invalid configuration: {}", e.message())))
}

/// Refuses limits no read can follow: epochs of 0 samples.
pub(crate) fn check_limits(limits: &ReadLimits) -> Result<(), SourceError> {
    if limits.epoch_size == Some(0) {
        return Err(SourceError::Usage(
            "the epoch size must be at least 1 sample".to_string(),
        ));
    }
    Ok(())
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
    match loaded.position(within) {
        None => Ok(()),
        Some(position) => batch
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
    /// The error of a failed minibatch: later calls repeat it until a restore.
    failed: Option<String>,
}

impl<T: Element> ReferenceSource<T> {
    /// Indexes the corpus of `config` (using and writing index caches as `cacheIndex` says)
    /// and stands at position 0. Diagnostics go to `sink`.
    pub fn new(
        config: &ReaderConfig,
        limits: ReadLimits,
        sink: DiagnosticSink,
    ) -> Result<Self, SourceError> {
        check_limits(&limits)?;
        check_config(config)?;
        let (sink, on_warning) = share_with_indexing(sink, config);
        let indexing = IndexingOptions {
            on_warning,
            ..IndexingOptions::for_config(config)
        };
        let opened = build_index(config, &indexing).map_err(SourceError::Index)?;
        let index = Arc::clone(&opened.index);
        let timeline = match Timeline::new(Arc::clone(&index), config) {
            Ok(timeline) => timeline,
            Err(e) => {
                if e == TimelineError::NoSamples {
                    // Whatever the corpus holds is invalid or belongs to no sequence: its
                    // errors come first.
                    Charging::new(config, sink)
                        .charge_chunks_without_samples::<T>(&index, config)?;
                }
                return Err(SourceError::Timeline(e));
            }
        };
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
            charging: Charging::new(config, sink),
            fingerprint: fingerprint(&index, config),
            config: config.clone(),
            index,
            _opened: opened,
            timeline,
            limits,
            end,
            schedule: None,
            counters: SourceCounters::default(),
            failed: None,
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
        if let Some(message) = &self.failed {
            return Err(SourceError::Usage(format!(
                "the source failed earlier (restore a checkpoint to retry): {message}"
            )));
        }
        if let Err(e) = self
            .charging
            .charge_chunks_without_samples::<T>(&self.index, &self.config)
        {
            self.failed = Some(e.to_string());
            return Err(e);
        }
        let before = self.timeline.position();
        let (end, epoch_end) =
            minibatch_end(self.timeline.position(), self.end, self.limits.epoch_size);
        let planning = Instant::now();
        let selection = self.timeline.next_minibatch(size, end);
        self.counters.plan_time += planning.elapsed();
        let Some(selection) = selection else {
            return Ok(None);
        };
        let mut batch = self.pool.take_pooled();
        if let Err(e) = self.pack(&selection, &mut batch) {
            // The failed minibatch was not handed out: stand before it, as the threaded
            // engine does, so that its checkpoint and a restore do not skip it.
            self.timeline.seek(before);
            self.failed = Some(e.to_string());
            return Err(e);
        }
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
        self.failed = None;
        Ok(())
    }

    /// Makes this source worker `rank` of `workers` from the current position on.
    pub fn set_partition(&mut self, rank: u32, workers: u32) -> Result<(), SourceError> {
        check_partition(rank, workers)?;
        self.timeline.set_partition(rank, workers);
        self.failed = None;
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
        // Sequence by sequence: load its chunk, charge what it carries (so that a load error
        // and the error budget's come in the order the threaded engine gives them).
        let mut needed: Vec<u32> = Vec::new();
        for &ordinal in &selection.sequences {
            let chunk = chunk_of(&self.index, ordinal);
            if !needed.contains(&chunk) {
                self.ensure_loaded(chunk)?;
                needed.push(chunk);
            }
            if let Some(loaded) = self.chunks.get(&chunk) {
                let within = ordinal - self.index.chunk(chunk).sequences.start;
                self.charging
                    .charge_sequence(&self.index, loaded, within, ordinal)?;
            }
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

    /// Loads `chunk` unless it is in memory.
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
/// valid sequences, or `u32::MAX` when it is invalid or holds no sample; empty when every
/// sequence of the part is at its own position.
fn positions_of<T>(index: &CorpusIndex, chunk: u32, parsed: &ParsedChunk<T>) -> Vec<u32> {
    let c = index.chunk(chunk);
    let valid = &parsed.sequences.sequences;
    let part = parsed.part.start as usize..parsed.part.end as usize;
    let entries = &index.chunk_sequences(chunk)[part];
    let line_of = |entry: &SequenceEntry| c.first_line + u64::from(entry.line);
    // Every sequence valid, each at its own position: nothing to map (checked without
    // building the map).
    if valid.len() == entries.len() && valid.iter().zip(entries).all(|(s, e)| s.line == line_of(e))
    {
        return Vec::new();
    }
    let mut next = 0;
    entries
        .iter()
        .map(|entry| {
            if valid.get(next).is_some_and(|s| s.line == line_of(entry)) {
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
