//! The timeline: which sequences form each minibatch, and on which worker (SPEC §3).
//!
//! The corpus is replicated endlessly: sweep `s` occupies the nominal positions
//! `[s·N, (s+1)·N)` of a global timeline counted in samples, where N is the corpus's sample
//! count and a sequence counts as its index sample count E. Each sweep has its own order,
//! a pure function of the configuration, the seed and `s` ([`order`]). A minibatch takes the
//! next whole sequences of that timeline while their total stays within the requested size
//! (the first is always taken, so an over-long sequence forms a minibatch alone); it may cross
//! sweep ends. So the concatenated order of sequences never depends on the minibatch sizes,
//! and a position is all a checkpoint needs ([`checkpoint`]).
//!
//! With K workers every worker walks the same global timeline and keeps its own share of
//! each global minibatch ([`sharding`]), so their positions and checkpoints are identical.
//!
//! This module only decides: it reads the index, never the data.

pub mod checkpoint;
pub mod order;
pub mod schedule;
pub mod sharding;

use std::fmt;
use std::sync::Arc;

use crate::config::ReaderConfig;
use crate::index::CorpusIndex;

use order::{sweep_order, OrderSettings, OrderedSequence};
use sharding::Sharding;

/// The sequences of one minibatch, as the timeline chose them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// This worker's sequences (index ordinals), in timeline order.
    pub sequences: Vec<u32>,
    /// Samples of the whole global minibatch, every worker's share included.
    pub global_samples: u64,
    /// Global position of the minibatch's first sequence.
    pub start: u64,
    /// Global position just after it (where the next minibatch starts).
    pub end: u64,
    /// Whether it reaches or crosses the end of a sweep.
    pub sweep_end: bool,
}

/// Why a timeline cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimelineError {
    /// The corpus has no sample of a configured input.
    NoSamples,
}

impl fmt::Display for TimelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimelineError::NoSamples => write!(
                f,
                "the corpus holds no sample of a configured input, so there is nothing to read"
            ),
        }
    }
}

impl std::error::Error for TimelineError {}

/// The order of the sweep the timeline is in, and how far it has got.
#[derive(Clone)]
struct Sweep {
    number: u64,
    /// The sequences with samples and their sample counts, in delivery order (shared by
    /// clones): walking the timeline reads them in order instead of the index at random.
    order: Arc<Vec<OrderedSequence>>,
    /// Per chunk of the index, its position in this sweep's chunk order.
    chunk_position: Arc<Vec<u32>>,
    /// Index in `order` of the next sequence.
    next: usize,
}

/// A walk along the global timeline of one corpus and configuration, for one worker.
#[derive(Clone)]
pub struct Timeline {
    index: Arc<CorpusIndex>,
    settings: OrderSettings,
    sharding: Sharding,
    /// N: samples per sweep.
    sweep_samples: u64,
    sweep: Sweep,
    /// A later sweep's order, taken from a timeline ahead ([`Timeline::share_sweep_ahead`]).
    upcoming: Option<Sweep>,
    /// Position of the next sequence (always a sequence start).
    position: u64,
}

impl Timeline {
    /// The timeline of `index` read with `config`, at position 0.
    pub fn new(index: Arc<CorpusIndex>, config: &ReaderConfig) -> Result<Self, TimelineError> {
        let sweep_samples = index.total_samples();
        if sweep_samples == 0 {
            return Err(TimelineError::NoSamples);
        }
        let settings = OrderSettings::of(config);
        let sharding = Sharding::choose(
            &index,
            &settings,
            config.partition_index,
            config.num_data_partitions,
        );
        let sweep = Sweep::compute(&index, &settings, 0);
        Ok(Timeline {
            index,
            settings,
            sharding,
            sweep_samples,
            sweep,
            upcoming: None,
            position: 0,
        })
    }

    /// Samples per sweep (N).
    pub fn sweep_samples(&self) -> u64 {
        self.sweep_samples
    }

    /// Global position of the next sequence.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The index the timeline walks.
    pub fn index(&self) -> &Arc<CorpusIndex> {
        &self.index
    }

    /// How the sequences are shared among workers.
    pub fn sharding(&self) -> &Sharding {
        &self.sharding
    }

    /// Changes this worker's rank and the number of workers; the position is kept.
    pub fn set_partition(&mut self, rank: u32, workers: u32) {
        self.sharding = Sharding::choose(&self.index, &self.settings, rank, workers);
    }

    /// Moves to `position`, rounded up to the next sequence start (in that sweep's order).
    /// Nothing is read: the sweep's order is recomputed from the seed.
    pub fn seek(&mut self, position: u64) {
        self.enter_sweep(position / self.sweep_samples);
        let sweep = &mut self.sweep;
        let mut at = self.position;
        while at < position && sweep.next < sweep.order.len() {
            at += u64::from(sweep.order[sweep.next].samples);
            sweep.next += 1;
        }
        self.position = at;
    }

    /// The next minibatch of about `size` samples (at least one sequence), not starting at
    /// or after `end`; `None` once the position has reached `end`.
    pub fn next_minibatch(&mut self, size: u64, end: u64) -> Option<Selection> {
        let mut sequences = Vec::new();
        let mut selection = self.next_minibatch_into(size, end, &mut sequences)?;
        selection.sequences = sequences;
        Some(selection)
    }

    /// [`next_minibatch`](Self::next_minibatch), appending this worker's sequences to
    /// `sequences` (the selection's own list is left empty): for a caller that collects
    /// many minibatches' sequences in one vector.
    pub fn next_minibatch_into(
        &mut self,
        size: u64,
        end: u64,
        sequences: &mut Vec<u32>,
    ) -> Option<Selection> {
        if self.position >= end {
            return None;
        }
        let start = self.position;
        let next_sweep_end = (start / self.sweep_samples + 1) * self.sweep_samples;
        let mut selection = Selection {
            start,
            ..Selection::default()
        };
        loop {
            if self.position >= end {
                break;
            }
            let (ordinal, samples, owner) = self.peek();
            let samples = u64::from(samples);
            if selection.global_samples > 0 && selection.global_samples + samples > size {
                break;
            }
            selection.global_samples += samples;
            if owner {
                sequences.push(ordinal);
            }
            self.advance(samples);
        }
        selection.end = self.position;
        selection.sweep_end = selection.end >= next_sweep_end;
        Some(selection)
    }

    /// The next sequence, its samples, and whether it is this worker's.
    fn peek(&mut self) -> (u32, u32, bool) {
        let sweep_number = self.position / self.sweep_samples;
        if self.sweep.number != sweep_number {
            self.enter_sweep(sweep_number);
        }
        let sweep = &self.sweep;
        // Within a sweep the positions before `(number + 1)·N` all have a next sequence.
        let OrderedSequence { ordinal, samples } = sweep.order[sweep.next];
        let owner = self
            .sharding
            .owns(&self.index, ordinal, sweep.next, &sweep.chunk_position);
        (ordinal, samples, owner)
    }

    fn advance(&mut self, samples: u64) {
        self.position += samples;
        self.sweep.next += 1;
    }

    /// Lets this timeline take the order of the sweep `other` is in (a timeline of the same
    /// corpus and configuration, further ahead) when it gets there, instead of computing
    /// it again.
    pub fn share_sweep_ahead(&mut self, other: &Timeline) {
        if other.sweep.number > self.sweep.number && self.settings == other.settings {
            self.upcoming = Some(other.sweep.clone());
        }
    }

    /// Computes the order of sweep `number` (unless it is the current one) and stands at
    /// its start.
    fn enter_sweep(&mut self, number: u64) {
        if self.sweep.number != number {
            let shared = self.upcoming.as_ref().is_some_and(|u| u.number == number);
            self.sweep = match self.upcoming.take() {
                Some(sweep) if shared => sweep,
                upcoming => {
                    self.upcoming = upcoming;
                    Sweep::compute(&self.index, &self.settings, number)
                }
            };
        }
        self.sweep.next = 0;
        self.position = number * self.sweep_samples;
    }
}

impl Sweep {
    fn compute(index: &CorpusIndex, settings: &OrderSettings, number: u64) -> Sweep {
        let order = sweep_order(index, settings, number);
        Sweep {
            number,
            order: Arc::new(order.sequences),
            chunk_position: Arc::new(order.chunk_position),
            next: 0,
        }
    }
}

#[cfg(test)]
mod tests;
