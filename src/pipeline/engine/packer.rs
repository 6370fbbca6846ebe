//! The packer threads: each packs the batches of planned minibatches it is dealt, in order,
//! into its bounded queue of deliveries, which the consumer takes along the planner's routes
//! ([`Packer`], the consumer's end of a run: the queues, the routes and the threads). A
//! packer holds the parts of its current batch pinned in the cache, and for the first
//! minibatch after a start reads the sequences whose parts are not loaded yet itself
//! ([`quick_load`]). How a part is asked for ([`request_part`]), by a packer or the
//! planner, is here too.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::parts::Parts;
use super::planner::{PlannedBatch, OUTPUT_BATCH_BYTES};
use super::{add_time, Charge, Output, Packed, Plan, Shared};
use crate::chunks::{ChunkLoader, ParsedChunk};
use crate::index::{CorpusIndex, JoinedIndex, NO_MATCH};
use crate::parser::Element;
use crate::pipeline::cache::Request;
use crate::source::{LoadedChunk, SourceError};
use crate::sync::atomic::Ordering;
use crate::sync::channel::{Receiver, Sender};
use crate::sync::thread::JoinHandle;
use crate::sync::Arc as ChunkArc;

/// Running packers and planner, the plan they follow, and what the consumer received.
pub(super) struct Packer<T: Element> {
    /// Per packer: its deliveries.
    pub(super) outputs: Vec<Receiver<Output<T>>>,
    /// The packer of each planned batch, in plan order, from the planner.
    pub(super) routes: Receiver<usize>,
    /// The packer whose deliveries come next, `None` until the next route is read.
    pub(super) turn: Option<usize>,
    /// Minibatches received and not yet handed out, in order.
    pub(super) ready: VecDeque<Packed<T>>,
    /// Whether `ready` ends the current packer's turn.
    pub(super) ready_ends_turn: bool,
    /// The packers, then the planner.
    pub(super) threads: Vec<JoinHandle<()>>,
    pub(super) plan: Plan,
    pub(super) finished: bool,
    /// The error that ended this packer's run: later calls repeat it instead of reporting
    /// the end of the data, whatever size they ask for (a restore or a new partition drops
    /// the packer, and the next run starts clean).
    pub(super) failed: Option<String>,
}

impl<T: Element> Packer<T> {
    /// Ends this run with `error`, which later calls repeat.
    pub(super) fn fail(&mut self, error: &SourceError) {
        self.finished = true;
        self.failed = Some(error.to_string());
    }
}

/// A packer thread: packs the batches of planned minibatches it is given, in order, and
/// delivers them to the consumer, a planned batch at a time (or sooner once past
/// [`OUTPUT_BATCH_BYTES`]). The planner's first batch is one minibatch, so the first
/// minibatch is delivered as soon as it is packed; the packer that gets it reads
/// the sequences of it whose parts are not loaded yet itself, up to [`QUICK_BYTES`] of text
/// (see [`quick_load`]).
pub(super) fn run_packer<T: Element>(
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
            packing.quick_bytes_left = if shared.reads_each_sequence() {
                u64::MAX
            } else if next.quick {
                QUICK_BYTES
            } else {
                0
            };
            let sequences = &batch.ordinals[next.sequences.clone()];
            let outcome = pack_held(shared, loads, &mut packing, sequences, &mut packed);
            let ends_turn = k + 1 == count;
            // Sequences read one by one are not shared between minibatches: let them go.
            if ends_turn || shared.reads_each_sequence() {
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

/// Asks for `part` to be loaded unless in memory or under way; false once shutting down.
pub(super) fn request_part<T>(shared: &Shared<T>, loads: &Sender<u32>, part: u32) -> bool {
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
pub(super) fn quick_range(
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
