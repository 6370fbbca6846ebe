//! The planner ("randomizer") thread: it walks the timeline, computing each sweep's order,
//! asks the loaders for the parts of the sequences ahead of it (the first window's before
//! the sweep's order is computed: [`head_start`]), and deals the minibatches it
//! plans to the packers in batches ([`PlannedBatch`]), each to the packer with the fewest
//! queued, telling the consumer which packer has it, its route ([`Dealer`]). Dealing by
//! load rather than by turns lets a packer that gets less of a core (it shares one with the
//! planner and the consumer) pack fewer batches instead of holding the other back. How much
//! a batch holds, and a packer's delivery, is set here too.

use std::sync::Arc;
use std::time::Instant;

use super::packer::request_part;
use super::{add_time, Plan, Shared};
use crate::source::minibatch_end;
use crate::sync::channel::Sender;
use crate::timeline::order::{first_window_chunks, OrderSettings};
use crate::timeline::Timeline;

/// A packer sends its packed minibatches at the end of its planned batch, or once they hold
/// this many bytes.
pub const OUTPUT_BATCH_BYTES: usize = 1 << 20;

/// Bytes of text a batch of planned minibatches holds at most, by the corpus's average bytes
/// per sample: about half a delivery ([`OUTPUT_BATCH_BYTES`]). The consumer takes a packer's
/// minibatches a batch at a time, so a packer that is ahead holds its packed batches in its
/// queue of `prefetch` deliveries; with batches of a delivery or less it packs whole batches
/// ahead there instead of stopping part way through one.
pub(super) const BATCH_TEXT_BYTES: u64 = OUTPUT_BATCH_BYTES as u64 / 2;

/// [`Plan::batch_span`]: the look-ahead shared among the batches the packers' queues hold,
/// and [`BATCH_TEXT_BYTES`] of text at `bytes_per_sample`; at least one sample.
pub(super) fn batch_span(ahead_samples: u64, batches_queued: usize, bytes_per_sample: u64) -> u64 {
    let per_batch = ahead_samples / (batches_queued as u64).max(1);
    per_batch
        .min(BATCH_TEXT_BYTES / bytes_per_sample.max(1))
        .max(1)
}

/// One minibatch as the planner chose it, for the packer.
pub(super) struct Planned {
    /// The first minibatch after a start: the packer reads the sequences of it whose parts
    /// are not loaded yet itself (see [`quick_load`]).
    ///
    /// [`quick_load`]: super::packer
    pub(super) quick: bool,
    /// Where the ordinals of this worker's sequences, in timeline order, are among its
    /// batch's [`PlannedBatch::ordinals`].
    pub(super) sequences: std::ops::Range<usize>,
    pub(super) sweep_end: bool,
    pub(super) epoch_end: bool,
    /// Global position after it.
    pub(super) end: u64,
}

/// Planned minibatches handed to the packer at once: one handoff (and wake-up) per batch
/// rather than per minibatch, which matters when minibatches hold a sequence or two.
pub(super) const PLAN_BATCH: usize = 32;

/// Minibatches the planner hands a packer at once, and their sequences in one list: the
/// packer frees one vector per batch that the planner's thread allocated, not one per
/// minibatch (a free from another thread than the allocating one is the slow path of the
/// allocator).
#[derive(Default)]
pub(super) struct PlannedBatch {
    pub(super) minibatches: Vec<Planned>,
    /// The ordinals of every minibatch's sequences, one minibatch after another.
    pub(super) ordinals: Vec<u32>,
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
pub(super) fn run_planner<T>(
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
pub(super) struct Dealer<'a> {
    pub(super) packers: &'a [Sender<Option<PlannedBatch>>],
    pub(super) routes: &'a Sender<usize>,
    /// The packer dealt to last.
    pub(super) last: usize,
}

impl Dealer<'_> {
    /// Sends `batch` to the packer with the fewest batches queued (the first of them after
    /// the one dealt to last, so by turns while they keep pace), then its number to the
    /// consumer; false once the packers or the consumer stopped.
    pub(super) fn send(&mut self, batch: PlannedBatch) -> bool {
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
    pub(super) fn end(&self) {
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
            if shared.reads_each_sequence() {
                continue; // the packers read the sequences themselves
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

/// At the start of a randomized sweep, asks for the parts of its first window (in the
/// sweep's chunk order), from which its first sequences are drawn, before the sweep's order
/// is computed, so that the loaders read them while the planner works (a serial step of a
/// few milliseconds per 100,000 sequences). Not for a worker of several, which loads only
/// some chunks, nor mid-sweep, nor under a memory budget (see `head_start_chunks`); false
/// once shutting down.
pub(super) fn head_start<T>(
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
