//! A **test model** of what CNTK's legacy (BrainScript, `readerType = "CNTKTextFormatReader"`)
//! reading loop hands to its reader tests, small enough to check by eye. It is not the crate's
//! packer or timeline (those come in a later issue); it only exists to turn a list of parsed
//! sequences into the token stream CNTK's test harness wrote into its control files.
//!
//! What is modelled (CNTK-BEHAVIOUR §6.1, §6.2, §7.1; conformance README "Reading loop" and
//! "Control file format"):
//!
//! * **Global timeline.** The sweep is the file-order list of sequences; sweep k occupies
//!   samples `[k*M, (k+1)*M)`. Randomization is *not* modelled: every randomized case with a
//!   stored control holds one sequence or only identical sequences, so the shuffled order
//!   prints like file order (C23b's order 1,2 is file order too).
//! * **Epochs.** Epoch e starts at the nominal position `e * epochSize`, rounded up to the next
//!   sequence start, whatever the previous epoch consumed. It ends at `(e+1) * epochSize`: a
//!   sequence that starts before that is delivered whole.
//! * **Minibatches.** The first sequence is always taken; further ones while the total stays
//!   within `min(mbSize, samples left in the sweep)` (legacy minibatches never cross a sweep
//!   end) and the position is before the epoch end.
//! * **Harness.** At most 10 minibatches of an epoch are written.
//! * **Layout** (per stream, [`first_fit`]): width T = longest sequence in that stream's
//!   actual samples; sequences in minibatch order go into the first row with room
//!   (`fill + len <= T`); columns are time-major (`column = t * rows + row`); gaps are skipped.

/// Minibatches CNTK's test harness wrote per epoch (the 11th is fetched and thrown away).
pub const MAX_WRITTEN_MINIBATCHES_PER_EPOCH: usize = 10;

/// The epoch/minibatch schedule of one case (`E/mb/ep` in the conformance README).
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    /// Epoch size in samples.
    pub epoch_size: usize,
    /// Minibatch size in samples.
    pub mb_size: usize,
    /// Number of epochs read.
    pub epochs: usize,
}

/// One minibatch the harness wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Minibatch {
    /// Epoch it belongs to (0-based).
    pub epoch: usize,
    /// Its number within the epoch (0-based).
    pub index: usize,
    /// The sequences it holds, as indices into the file-order sequence list, in minibatch
    /// order.
    pub sequences: Vec<usize>,
}

/// The minibatches of `schedule` over sequences of the given sample counts (file order).
pub fn legacy_minibatches(lengths: &[usize], schedule: Schedule) -> Vec<Minibatch> {
    let Schedule {
        epoch_size,
        mb_size,
        epochs,
    } = schedule;
    assert!(epoch_size > 0 && mb_size > 0, "sizes must be positive");
    assert!(
        lengths.iter().all(|&l| l > 0),
        "every sequence must have samples"
    );
    let n = lengths.len();
    // starts[j] = offset of sequence j within a sweep.
    let mut starts = Vec::with_capacity(n);
    let mut sweep_len = 0;
    for &l in lengths {
        starts.push(sweep_len);
        sweep_len += l;
    }
    assert!(sweep_len > 0, "the corpus is empty");
    let position = |sweep: usize, j: usize| sweep * sweep_len + starts[j];

    let mut out = Vec::new();
    for epoch in 0..epochs {
        let nominal_start = epoch * epoch_size;
        let epoch_end = nominal_start + epoch_size;
        // Round the nominal start up to the next sequence start.
        let mut sweep = nominal_start / sweep_len;
        let mut j = starts.partition_point(|&s| s < nominal_start % sweep_len);
        if j == n {
            sweep += 1;
            j = 0;
        }
        let mut index = 0;
        while index < MAX_WRITTEN_MINIBATCHES_PER_EPOCH && position(sweep, j) < epoch_end {
            let sweep_end = (sweep + 1) * sweep_len;
            let budget = mb_size.min(sweep_end - position(sweep, j));
            // The first sequence is always taken, even when it exceeds the budget.
            let mut taken = vec![j];
            let mut total = lengths[j];
            j += 1;
            while j < n && position(sweep, j) < epoch_end && total + lengths[j] <= budget {
                taken.push(j);
                total += lengths[j];
                j += 1;
            }
            if j == n {
                sweep += 1;
                j = 0;
            }
            out.push(Minibatch {
                epoch,
                index,
                sequences: taken,
            });
            index += 1;
        }
    }
    out
}

/// The packed layout of one stream in one minibatch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Parallel rows (P).
    pub rows: usize,
    /// Time steps (T).
    pub width: usize,
    /// For each column `t * rows + row`: the sequence (position in the minibatch) and sample
    /// index it holds, or `None` for a gap.
    pub columns: Vec<Option<(usize, usize)>>,
}

/// First-fit packing of sequences with the given lengths, in order (CNTK-BEHAVIOUR §6.2).
pub fn first_fit(lengths: &[usize]) -> Layout {
    let width = lengths.iter().copied().max().unwrap_or(0);
    let mut fills: Vec<usize> = Vec::new();
    let mut placement = Vec::with_capacity(lengths.len());
    for &len in lengths {
        let row = match fills.iter().position(|&fill| fill + len <= width) {
            Some(row) => row,
            None => {
                fills.push(0);
                fills.len() - 1
            }
        };
        placement.push((row, fills[row]));
        fills[row] += len;
    }
    let rows = fills.len();
    let mut columns = vec![None; rows * width];
    for (seq, (&len, &(row, offset))) in lengths.iter().zip(&placement).enumerate() {
        for k in 0..len {
            columns[(offset + k) * rows + row] = Some((seq, k));
        }
    }
    Layout {
        rows,
        width,
        columns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(mbs: &[Minibatch], lengths: &[usize]) -> Vec<(usize, usize)> {
        mbs.iter()
            .map(|m| (m.epoch, m.sequences.iter().map(|&s| lengths[s]).sum()))
            .collect()
    }

    /// README C07: epoch 7, mb 3, ten 1-sample sequences: 3,3,1 in every epoch (cut at the
    /// sweep end); epoch 1 starts at position 7.
    #[test]
    fn minibatches_stop_at_sweep_and_epoch_ends() {
        let lengths = [1; 10];
        let schedule = Schedule {
            epoch_size: 7,
            mb_size: 3,
            epochs: 3,
        };
        let mbs = legacy_minibatches(&lengths, schedule);
        let got: Vec<usize> = sizes(&mbs, &lengths).iter().map(|s| s.1).collect();
        assert_eq!(got, [3, 3, 1, 3, 3, 1, 3, 3, 1]);
        assert_eq!(mbs[3].sequences, [7, 8, 9]);
        assert_eq!(mbs[4].sequences, [0, 1, 2]);
        assert_eq!(mbs[5].sequences, [3]);
        assert_eq!(mbs[6].sequences, [4, 5, 6]);
    }

    /// CNTK-BEHAVIOUR §6.1 (`CheckNoDegenerateMinibatches`): 3-sample sequences, mb 90,
    /// epoch 100 give 90 and 12, not 90, 9 and 3.
    #[test]
    fn last_minibatch_is_not_split() {
        let lengths = [3; 100];
        let schedule = Schedule {
            epoch_size: 100,
            mb_size: 90,
            epochs: 1,
        };
        let mbs = legacy_minibatches(&lengths, schedule);
        assert_eq!(sizes(&mbs, &lengths), [(0, 90), (0, 12)]);
    }

    /// SPEC §7.4 C24: two 1-sample sequences, epoch 3, mb 3 deliver 1, 2 | 1.
    #[test]
    fn epoch_runs_into_the_next_sweep() {
        let mbs = legacy_minibatches(
            &[1, 1],
            Schedule {
                epoch_size: 3,
                mb_size: 3,
                epochs: 1,
            },
        );
        let seqs: Vec<Vec<usize>> = mbs.into_iter().map(|m| m.sequences).collect();
        assert_eq!(seqs, [vec![0, 1], vec![0]]);
    }

    /// A nominal epoch start inside a sequence rounds up to the next sequence.
    #[test]
    fn epoch_start_rounds_up() {
        let lengths = [4, 4];
        let mbs = legacy_minibatches(
            &lengths,
            Schedule {
                epoch_size: 3,
                mb_size: 100,
                epochs: 3,
            },
        );
        let got: Vec<(usize, Vec<usize>)> =
            mbs.into_iter().map(|m| (m.epoch, m.sequences)).collect();
        // epoch 0: [0,3) takes seq 0 (starts at 0); epoch 1: [3,6) rounds up to 4;
        // epoch 2: [6,9) rounds up to 8 = sweep 1, seq 0.
        assert_eq!(got, [(0, vec![0]), (1, vec![1]), (2, vec![0])]);
    }

    /// At most 10 minibatches of an epoch are written.
    #[test]
    fn ten_minibatches_per_epoch() {
        let mbs = legacy_minibatches(
            &[1; 50],
            Schedule {
                epoch_size: 30,
                mb_size: 1,
                epochs: 2,
            },
        );
        assert_eq!(mbs.len(), 20);
        assert_eq!(mbs[10].sequences, [30]);
    }

    /// CNTK-BEHAVIOUR §6.2: lengths 2, 1, 1 give 2 rows; row 1 holds B then C.
    #[test]
    fn first_fit_shares_rows_time_major() {
        let layout = first_fit(&[2, 1, 1]);
        assert_eq!((layout.rows, layout.width), (2, 2));
        assert_eq!(
            layout.columns,
            [Some((0, 0)), Some((1, 0)), Some((0, 1)), Some((2, 0))]
        );
        let gaps = first_fit(&[2, 2, 1]);
        assert_eq!(gaps.rows, 3);
        assert_eq!(gaps.columns[5], None);
    }
}
