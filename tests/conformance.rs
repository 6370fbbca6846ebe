//! CNTK conformance replay: reads the data files of CNTK v2.7's CTF reader tests
//! (`../shared/conformance/cntk`, see its README) and checks our output against CNTK's stored
//! control files, or against SPEC §7.4 where our expected result differs on purpose.
//!
//! * [`replay_cntk_controls`] runs the case table [`CASES`]: every case with a control file
//!   (C01–C22, C26, C27, C34) plus the SPEC §7.4 variants C23a, C23b and C24.
//!
//!   **Which sequences, in which order, per epoch** come from the crate's real engine: a
//!   [`MinibatchSource`] built with the case's configuration (its chunk size,
//!   `keepDataInMemory`, and for randomized cases `randomizer = "cntk"`, `randomizationSeed
//!   = 0` and the legacy window of 4 GiB / `chunkSizeInBytes` chunks) and
//!   `epoch_size` = the case's epoch size. The test reads epoch by epoch like CNTK's harness
//!   (README "Reading loop"): epoch e starts at its nominal position `e × epochSize`, reached
//!   with `restore` (which rounds up to a sequence start) whatever the previous epoch
//!   consumed; it ends at the minibatch flagged `epoch_end`; at most 10 minibatches are
//!   written, an 11th is fetched and thrown away.
//!
//!   **Only the rendering is test-side**: the real `Minibatch` buffers (dense values, sparse
//!   CSC columns densified) are laid out per stream with CNTK's first-fit layout
//!   (`conformance_support/layout.rs`), written in time-major column order without gaps and
//!   formatted with `%g` (`conformance_support/gfmt.rs`) — CNTK's output format, not ours —
//!   then compared token-wise with the control.
//!
//!   Our minibatches may cross sweep ends (SPEC §7.3 drops the legacy cut at sweep ends; we
//!   do not reintroduce it). No stored control depends on that cut: the only case with a
//!   minibatch that crosses a sweep end is C24 (checked: [`CROSSING_CASES`]), whose expected
//!   output is SPEC §7.4's already. Its check states the boundaries our rule gives (one
//!   minibatch of 3 samples over `[0, 3)`, `sweep_end` set, where the legacy reader cut 2 | 1);
//!   the tokens cannot show them, because all its sequences hold one sample. C05, C07 and C08
//!   also read past their first sweep, but their minibatches end exactly at sweep ends (mb 1,
//!   or C07's epoch ends at 7, 14, 21 with mb 3), so both rules cut them alike; C07's check
//!   states its 3, 3, 1 per epoch.
//! * The V2 `MinibatchSource` behaviours of README V1, V2 and P7 are replayed on
//!   `v2data/SimpleDataTest_cntk_text.txt` (and P7 also on the README's 4-line S0 file).
//!   V3/V4 (distributed warm start, a rank with no data) are not: SPEC §3 gives every rank
//!   data and shares each minibatch among workers, so CNTK's per-rank expectations do not
//!   apply (the same holds for C29, rank 1 of 2 on a one-chunk file).
//! * C25 and C28 (expected errors), S1–S3 (in-memory parser cases), and structural checks of
//!   `100x100_jagged_sequences_sparse.txt` and `v2data/` have their own tests below.
//!
//! No expected value is computed with the code under test: expectations come from the control
//! files, the README and SPEC tables, or a naive parse of the text written here.

#[path = "conformance_support/gfmt.rs"]
mod gfmt;
#[path = "conformance_support/layout.rs"]
mod layout;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use ctf_reader::minibatch::{Minibatch, StreamData};
use ctf_reader::parser::{StreamOptions, StreamParser};
use ctf_reader::reader::{read_all, DiagnosticSink, ErrorPolicy, ReadOutcome};
use ctf_reader::source::{MinibatchSource, ReadLimits, FULL_DATA_SWEEP, INFINITELY_REPEAT};
use ctf_reader::timeline::checkpoint::Checkpoint;
use ctf_reader::{
    Element, InputConfig, Precision, RandomizerKind, ReaderConfig, ReaderForm, Sample, Severity,
    StorageFormat,
};

use gfmt::format_g;
use layout::first_fit;

/// The conformance corpus (beside the repository, in CI too).
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/conformance/cntk");

fn data_path(name: &str) -> String {
    format!("{CORPUS}/data/{name}")
}

// ---------------------------------------------------------------------------------------------
// The case table
// ---------------------------------------------------------------------------------------------

/// One configured input: `name(alias):dim dense|sparse` in the README's table.
#[derive(Clone, Copy, Debug)]
struct Stream {
    name: &'static str,
    alias: &'static str,
    dim: usize,
    sparse: bool,
}

const fn dense(name: &'static str, alias: &'static str, dim: usize) -> Stream {
    Stream {
        name,
        alias,
        dim,
        sparse: false,
    }
}

const fn sparse(name: &'static str, alias: &'static str, dim: usize) -> Stream {
    Stream {
        name,
        alias,
        dim,
        sparse: true,
    }
}

/// The epoch/minibatch schedule of one case (`E/mb/ep` in the conformance README).
#[derive(Clone, Copy, Debug)]
struct Schedule {
    /// Epoch size in samples.
    epoch_size: u64,
    /// Minibatch size in samples.
    mb_size: u64,
    /// Number of epochs read.
    epochs: u64,
}

/// Minibatches CNTK's test harness wrote per epoch (the 11th is fetched and thrown away).
const MAX_WRITTEN_MINIBATCHES_PER_EPOCH: usize = 10;

/// Whether all streams of a minibatch share one layout (the harness default) or each stream
/// has its own ("sep" in the README).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layouts {
    /// One layout for all streams. CNTK rejects streams whose layouts differ, so the replay
    /// requires every stream to pack identically (it does when their lengths are equal).
    Shared,
    /// Each stream packs its own sequences' lengths.
    Separate,
}

/// The runs of a case, by where `definesMBSize` is set.
#[derive(Clone, Copy, Debug)]
enum Runs {
    /// Once, without `definesMBSize`.
    Once,
    /// "×2": once without and once with `definesMBSize` on the named input; both runs must
    /// produce the expected output.
    Twice(&'static str),
    /// Once, with `definesMBSize` on the named input.
    OnlyWith(&'static str),
}

/// What the replayed output must equal.
#[derive(Clone, Copy, Debug)]
enum Expected {
    /// The file of that name in `control/`.
    Control(&'static str),
    /// These whitespace-separated tokens (SPEC §7.4 decides against CNTK's control).
    Tokens(&'static str),
}

/// A check of the delivered minibatches beyond the rendered tokens.
type ReplayCheck = fn(&[Batch]) -> Result<(), String>;

/// One replayed case: a row of the README's case table.
struct Case {
    id: &'static str,
    data: &'static str,
    streams: &'static [Stream],
    precision: Precision,
    /// `randomize` ("Random" in the README's table).
    randomize: bool,
    /// `chunkSizeInBytes`.
    chunk_size: u64,
    /// `keepDataInMemory`.
    keep_in_memory: bool,
    schedule: Schedule,
    layouts: Layouts,
    runs: Runs,
    skip_sequence_ids: bool,
    max_errors: u64,
    expected: Expected,
    check: Option<ReplayCheck>,
}

const fn schedule(epoch_size: u64, mb_size: u64, epochs: u64) -> Schedule {
    Schedule {
        epoch_size,
        mb_size,
        epochs,
    }
}

/// `chunkSizeInBytes` unless a case says otherwise.
const DEFAULT_CHUNK: u64 = 32 << 20;

/// Defaults shared by the table rows (README "Settings common to every legacy case").
const BASE: Case = Case {
    id: "",
    data: "",
    streams: &[],
    precision: Precision::Float,
    randomize: true,
    chunk_size: DEFAULT_CHUNK,
    keep_in_memory: false,
    schedule: schedule(1, 1, 1),
    layouts: Layouts::Shared,
    runs: Runs::Once,
    skip_sequence_ids: false,
    max_errors: 0,
    expected: Expected::Tokens(""),
    check: None,
};

const SIMPLE: &[Stream] = &[dense("features", "F", 2), dense("labels", "L", 2)];
const MNIST: &[Stream] = &[dense("features", "F", 784), dense("labels", "L", 10)];
const ONE_BY_ONE: &[Stream] = &[dense("features", "F", 10000)];
const TEN_BY_ONE_MI: &[Stream] = &[
    dense("features1", "F1", 1),
    dense("features2", "F2", 10),
    dense("features3", "F3", 100),
    dense("features4", "F4", 1000),
    dense("labels1", "L1", 1),
    dense("labels2", "L2", 10),
    dense("labels3", "L3", 100),
];
const HUNDRED_BY_ONE: &[Stream] = &[dense("features", "F", 100), dense("labels", "L", 100)];
const THREE_SPARSE: &[Stream] = &[
    sparse("features1", "F0", 2),
    sparse("features2", "F1", 20),
    sparse("features3", "F2", 200),
];
const BLANK_LINES: &[Stream] = &[dense("features", "features", 1)];

static CASES: &[Case] = &[
    Case {
        id: "C01",
        randomize: false,
        data: "Simple_dense.txt",
        streams: SIMPLE,
        schedule: schedule(1000, 250, 10),
        runs: Runs::Twice("features"),
        expected: Expected::Control("Simple_dense.txt"),
        ..BASE
    },
    Case {
        // The file's `|L` is an unknown input and is skipped.
        id: "C02",
        randomize: false,
        data: "Simple_dense.txt",
        streams: &[dense("features", "F", 2)],
        schedule: schedule(1000, 250, 10),
        runs: Runs::Twice("features"),
        expected: Expected::Control("Simple_dense_single_stream.txt"),
        ..BASE
    },
    Case {
        id: "C03",
        randomize: false,
        chunk_size: 10000,
        keep_in_memory: true,
        data: "MNIST_dense.txt",
        streams: MNIST,
        precision: Precision::Double,
        schedule: schedule(1000, 1000, 1),
        runs: Runs::Twice("labels"),
        expected: Expected::Control("MNIST_dense.txt"),
        ..BASE
    },
    Case {
        id: "C04",
        data: "1x1_dense.txt",
        streams: ONE_BY_ONE,
        precision: Precision::Double,
        schedule: schedule(1, 1, 1),
        runs: Runs::Twice("features"),
        expected: Expected::Control("1x1_1_dense.txt"),
        ..BASE
    },
    Case {
        // The same sample 6 times: 2 per epoch across sweeps.
        id: "C05",
        data: "1x1_dense.txt",
        streams: ONE_BY_ONE,
        precision: Precision::Double,
        schedule: schedule(2, 1, 3),
        runs: Runs::Twice("features"),
        expected: Expected::Control("1x1_2_dense.txt"),
        ..BASE
    },
    Case {
        id: "C06",
        data: "1x10_dense.txt",
        streams: &[dense("features", "F0", 10)],
        schedule: schedule(10, 10, 1),
        runs: Runs::Twice("features"),
        expected: Expected::Control("1x10_dense.txt"),
        ..BASE
    },
    Case {
        // Minibatches of 3, 3, 1 per epoch (README: "cut at the sweep end"; under our rule
        // the epoch end at 7, 14 and 21 cuts them, so the sizes are the same: see the check).
        id: "C07",
        chunk_size: 50000,
        keep_in_memory: true,
        data: "10x1_MI_dense.txt",
        streams: TEN_BY_ONE_MI,
        schedule: schedule(7, 3, 3),
        runs: Runs::Twice("features1"),
        expected: Expected::Control("10x1_MI_2_dense.txt"),
        check: Some(check_c07_minibatches),
        ..BASE
    },
    Case {
        id: "C08",
        chunk_size: 50000,
        keep_in_memory: true,
        data: "10x1_MI_dense.txt",
        streams: TEN_BY_ONE_MI,
        schedule: schedule(10, 1, 3),
        runs: Runs::Twice("features1"),
        expected: Expected::Control("10x1_MI_1_dense.txt"),
        ..BASE
    },
    Case {
        id: "C09",
        randomize: false,
        data: "10x10_dense.txt",
        streams: &[dense("features", "F0", 5)],
        schedule: schedule(100, 100, 1),
        runs: Runs::Twice("features"),
        expected: Expected::Control("10x10_dense.txt"),
        ..BASE
    },
    Case {
        // The data file starts with a UTF-8 BOM.
        id: "C10",
        chunk_size: 10000,
        keep_in_memory: true,
        data: "100x1_dense.txt",
        streams: HUNDRED_BY_ONE,
        precision: Precision::Double,
        schedule: schedule(10, 1, 10),
        runs: Runs::Twice("labels"),
        expected: Expected::Control("100x1_1_dense.txt"),
        ..BASE
    },
    Case {
        id: "C11",
        chunk_size: 10000,
        keep_in_memory: true,
        data: "100x1_dense.txt",
        streams: HUNDRED_BY_ONE,
        precision: Precision::Double,
        schedule: schedule(5, 3, 4),
        runs: Runs::Twice("labels"),
        expected: Expected::Control("100x1_2_dense.txt"),
        ..BASE
    },
    Case {
        // 50 sequences of lengths 1..19 in one minibatch: first-fit packing.
        id: "C12",
        randomize: false,
        data: "50x20_jagged_sequences_dense.txt",
        streams: &[dense("features", "F0", 3)],
        precision: Precision::Double,
        schedule: schedule(508, 508, 1),
        runs: Runs::Twice("features"),
        expected: Expected::Control("50x20_jagged_sequences_dense.txt"),
        ..BASE
    },
    Case {
        id: "C13",
        data: "1x1_sparse.txt",
        streams: &[sparse("features", "F0", 10000)],
        schedule: schedule(1, 1, 1),
        runs: Runs::Twice("features"),
        expected: Expected::Control("1x1_sparse.txt"),
        ..BASE
    },
    Case {
        id: "C14",
        data: "1x2_sparse.txt",
        streams: &[sparse("features", "F0", 1000)],
        schedule: schedule(2, 2, 1),
        runs: Runs::Twice("features"),
        expected: Expected::Control("1x2_sparse.txt"),
        ..BASE
    },
    Case {
        id: "C15",
        data: "1x10_sparse.txt",
        streams: &[sparse("features", "F0", 100)],
        precision: Precision::Double,
        schedule: schedule(10, 10, 1),
        runs: Runs::Twice("features"),
        expected: Expected::Control("1x10_sparse.txt"),
        ..BASE
    },
    Case {
        // An id only on each sequence's first line; id-less lines continue it.
        id: "C16",
        randomize: false,
        data: "10x10_sparse.txt",
        streams: &[sparse("features", "F0", 100)],
        precision: Precision::Double,
        schedule: schedule(100, 100, 1),
        runs: Runs::Twice("features"),
        expected: Expected::Control("10x10_sparse.txt"),
        ..BASE
    },
    Case {
        id: "C17",
        randomize: false,
        data: "3x5_MI_sparse.txt",
        streams: THREE_SPARSE,
        schedule: schedule(15, 15, 1),
        runs: Runs::Twice("features1"),
        expected: Expected::Control("3x5_MI_sparse.txt"),
        ..BASE
    },
    Case {
        id: "C18",
        randomize: false,
        data: "20x10_MI_jagged_samples_sparse.txt",
        streams: THREE_SPARSE,
        schedule: schedule(200, 200, 1),
        runs: Runs::Twice("features1"),
        expected: Expected::Control("20x10_MI_jagged_samples_sparse.txt"),
        ..BASE
    },
    Case {
        id: "C19",
        randomize: false,
        data: "50x20_jagged_sequences_sparse.txt",
        streams: &[sparse("features", "F0", 100)],
        schedule: schedule(564, 564, 1),
        expected: Expected::Control("50x20_jagged_sequences_sparse.txt"),
        ..BASE
    },
    Case {
        id: "C20",
        randomize: false,
        data: "100x100_jagged_sparse.txt",
        streams: &[sparse("features", "F0", 20)],
        schedule: schedule(4887, 4887, 1),
        expected: Expected::Control("100x100_jagged_sparse.txt"),
        ..BASE
    },
    Case {
        // Values with 15-17 significant digits, printed with 6.
        id: "C21",
        data: "space_separated.txt",
        streams: &[
            dense("features1", "F1", 15),
            dense("features2", "F2", 12),
            dense("features3", "F3", 1),
        ],
        precision: Precision::Double,
        schedule: schedule(2, 2, 1),
        runs: Runs::Twice("features1"),
        expected: Expected::Control("space_separated.txt"),
        ..BASE
    },
    Case {
        // No final LF.
        id: "C22",
        data: "missing_trailing_newline.txt",
        streams: &[dense("features", "features", 1)],
        precision: Precision::Double,
        schedule: schedule(2, 2, 1),
        runs: Runs::Twice("features"),
        expected: Expected::Control("missing_trailing_newline.txt"),
        ..BASE
    },
    Case {
        // SPEC §7.4: CNTK fails here (the blank line is an empty row); we succeed with the
        // sequences of lines 0 and 2, so the output is CNTK's C23b control.
        id: "C23a",
        data: "contains_blank_lines.txt",
        streams: BLANK_LINES,
        precision: Precision::Double,
        schedule: schedule(2, 2, 1),
        skip_sequence_ids: true,
        expected: Expected::Control("blank_lines.txt"),
        check: Some(check_blank_lines_line_mode),
        ..BASE
    },
    Case {
        id: "C23b",
        data: "contains_blank_lines.txt",
        streams: BLANK_LINES,
        precision: Precision::Double,
        schedule: schedule(2, 2, 1),
        runs: Runs::OnlyWith("features"),
        skip_sequence_ids: true,
        expected: Expected::Control("blank_lines.txt"),
        check: Some(check_blank_lines_line_mode),
        ..BASE
    },
    Case {
        // SPEC §7.4: the blank line belongs to no sequence, so there is no error and the epoch
        // of 3 samples delivers 1, 2 and then 1 from the next sweep (CNTK's control: `1 2`).
        // SPEC §7.3: one minibatch of 3 that crosses the sweep end (legacy CNTK: 2 | 1); the
        // check asserts those boundaries, the tokens cannot show them.
        id: "C24",
        randomize: false,
        data: "contains_blank_lines.txt",
        streams: BLANK_LINES,
        precision: Precision::Double,
        schedule: schedule(3, 3, 1),
        max_errors: 2,
        expected: Expected::Tokens("1 2 1"),
        check: Some(check_blank_lines_id_mode),
        ..BASE
    },
    Case {
        // Empty dense samples are zeros, short ones zero-padded; empty sparse samples are
        // zero columns. The label stream has 3 rows and one gap.
        id: "C26",
        randomize: false,
        data: "empty_samples.txt",
        streams: &[dense("features", "F0", 10), sparse("labels", "F1", 10)],
        schedule: schedule(6, 6, 1),
        layouts: Layouts::Separate,
        runs: Runs::Twice("features"),
        expected: Expected::Control("empty_samples.txt"),
        ..BASE
    },
    Case {
        // `|#` comments run to the next `|`; label lengths 2,1,1 pack into 2 rows.
        id: "C27",
        randomize: false,
        data: "ref_data_with_escape_sequences.txt",
        streams: &[sparse("features", "F0", 100), dense("labels", "F1", 3)],
        schedule: schedule(9, 9, 1),
        layouts: Layouts::Separate,
        runs: Runs::Twice("features"),
        expected: Expected::Control("ref_data_with_escape_sequences.txt"),
        ..BASE
    },
    Case {
        // The control no CNTK test used (README "Files that no test uses").
        id: "C34",
        data: "1x2_dense.txt",
        streams: &[dense("features", "F0", 100)],
        precision: Precision::Double,
        schedule: schedule(2, 2, 1),
        expected: Expected::Control("1x2_dense.txt"),
        ..BASE
    },
];

/// C07: every epoch delivers 3, 3, 1 samples; epoch e covers `[7e, 7e + 7)`.
fn check_c07_minibatches(batches: &[Batch]) -> Result<(), String> {
    let want: Vec<(u64, u64, u64)> = (0..3)
        .flat_map(|e| [(e, 7 * e, 3), (e, 7 * e + 3, 3), (e, 7 * e + 6, 1)])
        .collect();
    expect_spans(batches, &want)
}

/// C23a/C23b (SPEC §7.4): line mode gives keys 0 and 2 holding 1.0 and 2.0, in one
/// minibatch (the seed-0 CNTK shuffle of 2 sequences keeps the order 1, 2).
fn check_blank_lines_line_mode(batches: &[Batch]) -> Result<(), String> {
    expect_spans(batches, &[(0, 0, 2)])?;
    expect_single_values(&batches[0], &[0, 2], &[1.0, 2.0])
}

/// C24 (SPEC §7.4 and §7.3): id mode gives sequences 1 and 2 with one sample each; the epoch
/// of 3 samples is one minibatch of 3 that crosses the sweep end (`[0, 3)`, `sweep_end`),
/// where the legacy reader cut it into 2 | 1.
fn check_blank_lines_id_mode(batches: &[Batch]) -> Result<(), String> {
    expect_spans(batches, &[(0, 0, 3)])?;
    if !batches[0].sweep_end || !batches[0].epoch_end {
        return Err("the minibatch must end the sweep and the epoch".to_string());
    }
    expect_single_values(&batches[0], &[1, 2, 1], &[1.0, 2.0, 1.0])
}

/// The minibatches are exactly these `(epoch, start, samples)`.
fn expect_spans(batches: &[Batch], want: &[(u64, u64, u64)]) -> Result<(), String> {
    let got: Vec<(u64, u64, u64)> = batches
        .iter()
        .map(|b| (b.epoch, b.start, b.end - b.start))
        .collect();
    if got != want {
        return Err(format!(
            "minibatches (epoch, start, samples): expected {want:?}, got {got:?}"
        ));
    }
    Ok(())
}

fn expect_single_values(batch: &Batch, keys: &[u64], values: &[f64]) -> Result<(), String> {
    let want: Vec<Vec<Vec<f64>>> = values.iter().map(|&v| vec![vec![v]]).collect();
    if batch.keys != keys || batch.streams[0] != want {
        return Err(format!(
            "expected keys {keys:?} with one sample each {values:?}, got keys {:?} and \
             samples {:?}",
            batch.keys, batch.streams[0]
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Replay
// ---------------------------------------------------------------------------------------------

/// One minibatch the harness wrote: the contents of a real [`Minibatch`], values widened to
/// f64 from the element type.
struct Batch {
    epoch: u64,
    /// Its number within the epoch (0-based).
    index: usize,
    /// Global position of its first sequence.
    start: u64,
    /// Global position after it ([`Minibatch::position`]).
    end: u64,
    sweep_end: bool,
    epoch_end: bool,
    /// Whether a sweep end lies strictly inside it (SPEC §7.3: ours may cross; the legacy
    /// reader cut minibatches there).
    crosses_sweep_end: bool,
    /// Sequence keys, in minibatch order.
    keys: Vec<u64>,
    /// `streams[s][i][k]`: sample k of sequence i in stream s, `dim` values (sparse columns
    /// zero-filled, the last of duplicate rows winning, as CNTK's sparse-to-dense copy).
    streams: Vec<Vec<Vec<Vec<f64>>>>,
}

impl Batch {
    fn of<T: Element>(
        mb: &Minibatch<T>,
        epoch: u64,
        index: usize,
        start: u64,
        sweep_samples: u64,
    ) -> Batch {
        Batch {
            epoch,
            index,
            start,
            end: mb.position,
            sweep_end: mb.sweep_end,
            epoch_end: mb.epoch_end,
            crosses_sweep_end: (start / sweep_samples + 1) * sweep_samples < mb.position,
            keys: mb.sequences.iter().map(|s| s.key).collect(),
            streams: mb.streams.iter().map(stream_columns).collect(),
        }
    }
}

/// Per sequence, per sample: the `dim` values of one stream's column, from its flat buffers.
fn stream_columns<T: Element>(data: &StreamData<T>) -> Vec<Vec<Vec<f64>>> {
    let column = |j: usize| -> Vec<f64> {
        match data.format {
            StorageFormat::Dense => data.values[j * data.dim..(j + 1) * data.dim]
                .iter()
                .map(|v| v.to_f64())
                .collect(),
            StorageFormat::Sparse => {
                let mut column = vec![0.0; data.dim];
                let stored = data.column_starts[j] as usize..data.column_starts[j + 1] as usize;
                for k in stored {
                    column[data.row_indices[k] as usize] = data.values[k].to_f64();
                }
                column
            }
        }
    };
    data.sequence_starts
        .windows(2)
        .map(|w| (w[0]..w[1]).map(column).collect())
        .collect()
}

/// The case's reader configuration (README "Settings common to every legacy case"):
/// randomized cases use CNTK's exact shuffle, seed 0 and the legacy window of
/// 4 GiB / `chunkSizeInBytes` chunks.
fn build_config(case: &Case, defines_mb_size: Option<&str>) -> ReaderConfig {
    let mut builder = ReaderConfig::builder()
        .file(data_path(case.data))
        .precision(case.precision)
        .max_errors(case.max_errors)
        .skip_sequence_ids(case.skip_sequence_ids)
        .trace_level(1)
        .frame_mode(false)
        .chunk_size_in_bytes(case.chunk_size)
        .keep_data_in_memory(case.keep_in_memory)
        .form(ReaderForm::Legacy)
        .randomize(case.randomize);
    if case.randomize {
        builder = builder
            .randomizer(RandomizerKind::Cntk)
            .randomization_seed(0)
            .randomization_window((4u64 << 30) / case.chunk_size);
    }
    for s in case.streams {
        let base = if s.sparse {
            InputConfig::sparse(s.name, s.dim)
        } else {
            InputConfig::dense(s.name, s.dim)
        };
        let mut input = base.with_alias(s.alias);
        if defines_mb_size == Some(s.name) {
            input = input.defining_mb_size();
        }
        builder = builder.input(input);
    }
    builder.build().expect("valid configuration")
}

/// A sink that keeps every error reported (warnings are expected in some cases).
fn error_sink() -> (DiagnosticSink, Arc<Mutex<Vec<String>>>) {
    let errors = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&errors);
    let sink: DiagnosticSink = Box::new(move |file, d| {
        if d.severity == Severity::Error {
            kept.lock().unwrap().push(d.display_in(file).to_string());
        }
    });
    (sink, errors)
}

/// Reads a case epoch by epoch with the real [`MinibatchSource`], as CNTK's harness did
/// (README "Reading loop"). Every replayed case must read without any error.
fn read_epochs<T: Element>(case: &Case, config: &ReaderConfig) -> Result<Vec<Batch>, String> {
    let Schedule {
        epoch_size,
        mb_size,
        epochs,
    } = case.schedule;
    let limits = ReadLimits {
        max_samples: None,
        max_sweeps: None,
        epoch_size: Some(epoch_size),
    };
    let (sink, errors) = error_sink();
    let failed = |e: &dyn std::fmt::Display| format!("source failed: {e}");
    let mut source = MinibatchSource::<T>::new(config, limits, sink).map_err(|e| failed(&e))?;
    let mut batches = Vec::new();
    for epoch in 0..epochs {
        // The epoch starts at its nominal position whatever the previous one consumed.
        let nominal = epoch * epoch_size;
        let fingerprint = source.checkpoint().fingerprint;
        source
            .restore(&Checkpoint {
                position: nominal,
                fingerprint,
            })
            .map_err(|e| failed(&e))?;
        if source.position() >= nominal + epoch_size {
            continue; // rounding up to a sequence start passed the whole epoch: it is empty
        }
        for index in 0..=MAX_WRITTEN_MINIBATCHES_PER_EPOCH {
            let start = source.position();
            let Some(mb) = source.next_minibatch(mb_size).map_err(|e| failed(&e))? else {
                break;
            };
            if index == MAX_WRITTEN_MINIBATCHES_PER_EPOCH {
                break; // the 11th minibatch: fetched and thrown away
            }
            batches.push(Batch::of(&mb, epoch, index, start, source.sweep_samples()));
            if mb.epoch_end {
                break;
            }
        }
    }
    let errors = errors.lock().unwrap();
    if !errors.is_empty() {
        return Err(format!(
            "read with {} errors:\n  {}",
            errors.len(),
            errors
                .iter()
                .take(20)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n  ")
        ));
    }
    Ok(batches)
}

/// Where a written column came from, for mismatch reports.
struct Place {
    first_token: usize,
    epoch: u64,
    minibatch: usize,
    stream: &'static str,
    column: usize,
    key: u64,
    sample: usize,
}

/// The harness's output: tokens, with the column each run of tokens came from.
struct Rendered {
    tokens: Vec<String>,
    places: Vec<Place>,
}

impl Rendered {
    fn describe(&self, token: usize) -> String {
        let i = self.places.partition_point(|p| p.first_token <= token);
        match i.checked_sub(1).map(|i| &self.places[i]) {
            Some(p) => format!(
                "epoch {}, minibatch {}, stream {}, column {} = sequence {} sample {}, value {}",
                p.epoch,
                p.minibatch,
                p.stream,
                p.column,
                p.key,
                p.sample,
                token - p.first_token
            ),
            None => "before any column".to_string(),
        }
    }
}

/// Writes what CNTK's harness wrote for the delivered minibatches (README "Control file
/// format"): per minibatch, per stream, the non-gap columns of its first-fit layout in
/// time-major order.
fn render(case: &Case, batches: &[Batch]) -> Result<Rendered, String> {
    let mut out = Rendered {
        tokens: Vec::new(),
        places: Vec::new(),
    };
    for mb in batches {
        let layouts: Vec<_> = mb
            .streams
            .iter()
            .map(|stream| first_fit(&stream.iter().map(Vec::len).collect::<Vec<_>>()))
            .collect();
        if case.layouts == Layouts::Shared && layouts.iter().any(|l| *l != layouts[0]) {
            return Err(format!(
                "epoch {} minibatch {}: streams pack differently, which CNTK rejects for a \
                 shared layout",
                mb.epoch, mb.index
            ));
        }
        for (s, layout) in layouts.iter().enumerate() {
            for (column, cell) in layout.columns.iter().enumerate() {
                let Some((i, k)) = *cell else { continue };
                out.places.push(Place {
                    first_token: out.tokens.len(),
                    epoch: mb.epoch,
                    minibatch: mb.index,
                    stream: case.streams[s].name,
                    column,
                    key: mb.keys[i],
                    sample: k,
                });
                out.tokens
                    .extend(mb.streams[s][i][k].iter().map(|&v| format_g(v)));
            }
        }
    }
    Ok(out)
}

fn expected_tokens(expected: Expected) -> Vec<String> {
    let text = match expected {
        Expected::Control(name) => {
            let path = format!("{CORPUS}/control/{name}");
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
        }
        Expected::Tokens(tokens) => tokens.to_string(),
    };
    text.split_ascii_whitespace().map(str::to_string).collect()
}

/// Token-wise comparison; on a mismatch, the first differing token with context.
fn compare(got: &Rendered, want: &[String]) -> Result<(), String> {
    let got_tokens = &got.tokens;
    let first = got_tokens.iter().zip(want).position(|(g, w)| g != w);
    let i = match first {
        None if got_tokens.len() == want.len() => return Ok(()),
        None => got_tokens.len().min(want.len()),
        Some(i) => i,
    };
    let context = |tokens: &[String]| {
        let from = i.saturating_sub(3);
        let to = (i + 4).min(tokens.len());
        tokens
            .get(from..to)
            .map(|t| t.join(" "))
            .unwrap_or_default()
    };
    Err(format!(
        "first difference at token {i} of {} (control has {}): got {:?}, control {:?}\n  at \
         {}\n  got:     ... {} ...\n  control: ... {} ...",
        got_tokens.len(),
        want.len(),
        got_tokens.get(i).map_or("<end>", String::as_str),
        want.get(i).map_or("<end>", String::as_str),
        got.describe(i),
        context(got_tokens),
        context(want),
    ))
}

/// Reads a case's minibatches in its element type.
fn read_case(case: &Case, config: &ReaderConfig) -> Result<Vec<Batch>, String> {
    match case.precision {
        Precision::Float => read_epochs::<f32>(case, config),
        Precision::Double => read_epochs::<f64>(case, config),
    }
}

/// Reads a case once per run and compares the rendered output with the expectation.
fn replay(case: &Case) -> Result<(), String> {
    let runs: Vec<Option<&str>> = match case.runs {
        Runs::Once => vec![None],
        Runs::Twice(input) => vec![None, Some(input)],
        Runs::OnlyWith(input) => vec![Some(input)],
    };
    let want = expected_tokens(case.expected);
    for defines_mb_size in runs {
        let label = match defines_mb_size {
            None => "without definesMBSize".to_string(),
            Some(name) => format!("with definesMBSize on {name}"),
        };
        let config = build_config(case, defines_mb_size);
        let batches = read_case(case, &config).map_err(|e| format!("{label}: {e}"))?;
        if let Some(check) = case.check {
            check(&batches).map_err(|e| format!("{label}: {e}"))?;
        }
        let rendered = render(case, &batches).map_err(|e| format!("{label}: {e}"))?;
        compare(&rendered, &want).map_err(|e| format!("{label}: {e}"))?;
    }
    Ok(())
}

/// The replay must notice a changed, missing or extra token (guards against a vacuous pass).
#[test]
fn replay_detects_differences() {
    let case = CASES.iter().find(|c| c.id == "C27").unwrap();
    let config = build_config(case, None);
    let batches = read_case(case, &config).unwrap();
    let rendered = render(case, &batches).unwrap();
    let mut want = expected_tokens(case.expected);
    assert!(compare(&rendered, &want).is_ok());
    let last = want.len() - 1;
    want[last] = "1".to_string();
    let e = compare(&rendered, &want).unwrap_err();
    assert!(e.contains(&format!("at token {last} ")), "{e}");
    assert!(e.contains("stream labels"), "{e}");
    want.pop();
    assert!(compare(&rendered, &want).is_err());
    want.extend(["0".to_string(), "0".to_string()]);
    assert!(compare(&rendered, &want).is_err());
    // A changed token in the middle, and a minibatch the harness did not write.
    let mut want = expected_tokens(case.expected);
    let middle = want.len() / 2;
    want[middle] = "12345".to_string();
    assert!(compare(&rendered, &want).is_err());
    let c07 = CASES.iter().find(|c| c.id == "C07").unwrap();
    let mut batches = read_case(c07, &build_config(c07, None)).unwrap();
    let want = expected_tokens(c07.expected);
    assert!(compare(&render(c07, &batches).unwrap(), &want).is_ok());
    batches.pop();
    assert!(compare(&render(c07, &batches).unwrap(), &want).is_err());
}

/// The cases with a minibatch that crosses a sweep end, where the legacy reader would have
/// cut it (SPEC §7.3). Only C24 has one, and its expectation is SPEC-based already.
const CROSSING_CASES: &[&str] = &["C24"];

#[test]
fn replay_cntk_controls() {
    let mut failures = Vec::new();
    let mut crossing = BTreeSet::new();
    for case in CASES {
        let result = replay(case).and_then(|()| {
            let batches = read_case(case, &build_config(case, None))?;
            if batches.iter().any(|b| b.crosses_sweep_end) {
                crossing.insert(case.id);
            }
            Ok(())
        });
        match result {
            Ok(()) => eprintln!("{} {}: ok", case.id, case.data),
            Err(e) => {
                eprintln!("{} {}: FAILED: {e}", case.id, case.data);
                failures.push(format!("{} ({}): {e}", case.id, case.data));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
    assert_eq!(
        crossing.into_iter().collect::<Vec<_>>(),
        CROSSING_CASES,
        "cases whose minibatches cross a sweep end"
    );
}

// ---------------------------------------------------------------------------------------------
// V2 `MinibatchSource` behaviours (README V1, V2, P7) with the real source
// ---------------------------------------------------------------------------------------------
//
// V3 (distributed warm start) and V4 (a rank with no data) are not replayed: SPEC §3 gives
// every rank data and splits each global minibatch among the workers, and SPEC §7.3 drops
// "rank >= number of chunks gets no data", so CNTK's per-rank expectations do not apply.

/// Samples (and one-sample sequences) per sweep of `v2data/SimpleDataTest_cntk_text.txt`.
const V2_SWEEP: u64 = 603;

/// The V2 tests' source on the test file: `features` only (the file's `labels` is unknown
/// and skipped), the default 128-chunk window, CNTK's shuffle.
fn v2_config(
    path: &str,
    input: &str,
    dim: usize,
    randomize: bool,
    seed: Option<u64>,
) -> ReaderConfig {
    let mut builder = ReaderConfig::builder()
        .file(path)
        .input(InputConfig::dense(input, dim))
        .precision(Precision::Float)
        .form(ReaderForm::Composite)
        .trace_level(0)
        .randomize(randomize)
        .randomizer(RandomizerKind::Cntk);
    if let Some(seed) = seed {
        builder = builder.randomization_seed(seed);
    }
    builder.build().unwrap()
}

fn v2_test_file() -> String {
    format!("{CORPUS}/v2data/SimpleDataTest_cntk_text.txt")
}

fn quiet() -> DiagnosticSink {
    Box::new(|_, _| {})
}

fn v2_source(config: &ReaderConfig, limits: ReadLimits) -> MinibatchSource<f32> {
    MinibatchSource::new(config, limits, quiet()).unwrap()
}

/// Whether `[read, read + n)` reaches or crosses a multiple of the sweep size.
fn ends_sweep(read: u64, n: u64, sweep: u64) -> bool {
    (read + n) / sweep > read / sweep
}

/// V1: every call returns `min(mb, maxSamples - read)` samples in as many sequences;
/// `sweep_end` iff the range reaches or crosses a multiple of 603; then the end. Every
/// sweep delivers each line once.
#[test]
fn v1_end_of_sweep() {
    let path = v2_test_file();
    for randomize in [false, true] {
        let config = v2_config(&path, "features", 2, randomize, None);
        for (max_samples, mb) in [
            (FULL_DATA_SWEEP, 603),
            (FULL_DATA_SWEEP, 1000),
            (FULL_DATA_SWEEP, 100),
            (100, 30),
            (2000, 500),
            (2412, 301),
        ] {
            let label = format!("randomize {randomize}, maxSamples {max_samples}, mb {mb}");
            let total = if max_samples == FULL_DATA_SWEEP {
                V2_SWEEP
            } else {
                max_samples
            };
            let limits = ReadLimits {
                max_samples: Some(max_samples),
                max_sweeps: None,
                epoch_size: None,
            };
            let mut source = v2_source(&config, limits);
            let (mut read, mut keys) = (0, Vec::new());
            while read < total {
                let batch = source.next_minibatch(mb).unwrap().expect(&label);
                let n = batch.samples() as u64;
                assert_eq!(n, mb.min(total - read), "{label}: at {read}");
                assert_eq!(batch.sequences.len() as u64, n, "{label}: at {read}");
                let want = ends_sweep(read, n, V2_SWEEP);
                assert_eq!(batch.sweep_end, want, "{label}: sweep_end at {read}+{n}");
                keys.extend(batch.sequences.iter().map(|s| s.key));
                read += n;
            }
            assert!(source.next_minibatch(mb).unwrap().is_none(), "{label}");
            for sweep in keys.chunks(V2_SWEEP as usize) {
                let mut sorted = sweep.to_vec();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), sweep.len(), "{label}: a key twice in a sweep");
                if !randomize {
                    assert_eq!(
                        sweep,
                        (0..sweep.len() as u64).collect::<Vec<_>>(),
                        "{label}"
                    );
                }
            }
        }
    }
}

/// V2: `603 × maxSweeps` samples, then the end. Exactly `maxSweeps` minibatches have
/// `sweep_end` for CNTK's parameters (each minibatch is at most one sweep long, so none
/// spans two sweep ends). Under our crossing rule `sweep_end` means "reaches or crosses a
/// sweep end", so a minibatch longer than a sweep can cover two of them and counts once:
/// 3 sweeps read with mb 1000 give 2 such minibatches (`[0,1000)` and `[1000,1809)`).
#[test]
fn v2_max_sweeps() {
    let path = v2_test_file();
    for randomize in [false, true] {
        let config = v2_config(&path, "features", 2, randomize, None);
        for (max_sweeps, mb, sweep_ends) in [
            (2, 100, 2),
            (2, 603, 2),
            (2, 1000, 2),
            (3, 30, 3),
            (3, 500, 3),
            (3, 301, 3),
            (3, 1000, 2), // not one of CNTK's cases: our crossing rule
        ] {
            let label = format!("randomize {randomize}, maxSweeps {max_sweeps}, mb {mb}");
            let limits = ReadLimits {
                max_samples: None,
                max_sweeps: Some(max_sweeps),
                epoch_size: None,
            };
            let mut source = v2_source(&config, limits);
            let (mut read, mut flagged) = (0, 0);
            while let Some(batch) = source.next_minibatch(mb).unwrap() {
                let n = batch.samples() as u64;
                assert_eq!(batch.sweep_end, ends_sweep(read, n, V2_SWEEP), "{label}");
                flagged += u64::from(batch.sweep_end);
                read += n;
            }
            assert_eq!(read, V2_SWEEP * max_sweeps, "{label}: samples");
            assert_eq!(flagged, sweep_ends, "{label}: minibatches with sweep_end");
            assert!(source.next_minibatch(mb).unwrap().is_none(), "{label}");
        }
    }
}

/// The feature values of the first `samples` samples read with mb 100, unlimited.
fn first_values(config: &ReaderConfig, samples: usize) -> Vec<Vec<f32>> {
    let limits = ReadLimits {
        max_samples: Some(INFINITELY_REPEAT),
        max_sweeps: None,
        epoch_size: None,
    };
    let mut source = v2_source(config, limits);
    let mut out = Vec::new();
    while out.len() < samples {
        let batch = source.next_minibatch(100).unwrap().unwrap();
        let stream = &batch.streams[0];
        out.extend(stream.values.chunks(stream.dim).map(<[f32]>::to_vec));
    }
    out.truncate(samples);
    out
}

/// P7: randomized, unlimited, mb 100: the default seed is seed 0, seed 123 differs, and
/// sweep s of seed x is sweep 0 of seed x + s. On the README's 4-line S0 file (as the
/// Python test) and on the V2 test file.
#[test]
fn p7_sweep_s_uses_seed_plus_s() {
    let dir = tempfile::tempdir().unwrap();
    let s0 = dir.path().join("s0.ctf");
    std::fs::write(&s0, "|S0 1\n|S0 2\n|S0 3\n|S0 4").unwrap();
    let s0 = s0.to_string_lossy().into_owned();
    let s0_config = |seed| v2_config(&s0, "S0", 1, true, seed);
    let default = first_values(&s0_config(None), 100);
    let seed0 = first_values(&s0_config(Some(0)), 100);
    let seed1 = first_values(&s0_config(Some(1)), 100);
    let seed123 = first_values(&s0_config(Some(123)), 100);
    assert_eq!(default, seed0, "the default seed is 0");
    assert_ne!(seed123, seed0, "seed 123 differs");
    assert_eq!(seed0[4..], seed1[..96], "sweep s uses seed + s");

    let path = v2_test_file();
    let sweep = V2_SWEEP as usize;
    let sweeps = 3;
    let base = first_values(
        &v2_config(&path, "features", 2, true, Some(5)),
        sweeps * sweep,
    );
    for s in 0..sweeps {
        let shifted = first_values(
            &v2_config(&path, "features", 2, true, Some(5 + s as u64)),
            sweep,
        );
        assert_eq!(
            base[s * sweep..(s + 1) * sweep],
            shifted[..],
            "sweep {s} of seed 5"
        );
    }
    let other = first_values(&v2_config(&path, "features", 2, true, Some(6)), sweep);
    assert_ne!(
        base[..sweep],
        other[..],
        "seeds 5 and 6 shuffle differently"
    );
}

// ---------------------------------------------------------------------------------------------
// Expected errors: C25, C28
// ---------------------------------------------------------------------------------------------

/// C25: an input twice on a line is an error; with maxErrors 0 the read fails, naming the
/// file, line 1 and the input.
#[test]
fn c25_duplicate_input_fails() {
    let path = data_path("duplicate_inputs.txt");
    let config = ReaderConfig::builder()
        .file(&path)
        .input(InputConfig::dense("features1", 1).with_alias("F1"))
        .input(InputConfig::dense("features2", 1).with_alias("F2"))
        .precision(Precision::Double)
        .max_errors(0)
        .build()
        .unwrap();
    let out = read_all::<f64>(&config, ErrorPolicy::Budget);
    let error = out.error.as_ref().expect("the read must fail").to_string();
    assert!(
        error.contains(&format!("{path}:1:")),
        "names file and line 1: {error}"
    );
    assert!(
        error.contains("features2") || error.contains("F2"),
        "names the input: {error}"
    );
    assert!(out.sequences.is_empty());
}

const INVALID_INPUTS_ERROR_LINES: [u64; 18] = [
    2, 3, 5, 6, 8, 9, 10, 11, 12, 14, 15, 16, 17, 19, 21, 28, 31, 40,
];
/// First line of sequence 123, which breaks the line-count rule (3 lines, 2 samples).
const SEQUENCE_123_LINE: u64 = 35;

fn invalid_inputs_config(max_errors: u64) -> (String, ReaderConfig) {
    let path = data_path("invalid_inputs.txt");
    let config = ReaderConfig::builder()
        .file(&path)
        .input(InputConfig::dense("A", 1))
        .input(InputConfig::sparse("B", 10))
        .precision(Precision::Float)
        .max_errors(max_errors)
        .trace_level(2)
        .build()
        .unwrap();
    (path, config)
}

fn error_lines(out: &ReadOutcome<f32>) -> Vec<u64> {
    out.diagnostics
        .iter()
        .filter(|(_, d)| d.severity == Severity::Error)
        .map(|(_, d)| d.line)
        .collect()
}

/// Only sequence 5 (line 34: `5|A 5.|# ...|B 5:5`) is valid.
fn assert_only_sequence_5(out: &ReadOutcome<f32>) {
    let seqs = &out.sequences;
    let keys: Vec<u64> = seqs.sequences.iter().map(|s| s.key).collect();
    assert_eq!(keys, [5], "only sequence 5 is valid");
    assert_eq!(seqs.sequences[0].line, 34);
    let a: Vec<Sample<'_, f32>> = seqs.samples(0, 0).collect();
    assert_eq!(a, [Sample::Dense((&[5.0][..]).into())]);
    let b: Vec<Sample<'_, f32>> = seqs.samples(0, 1).collect();
    assert_eq!(
        b,
        [Sample::Sparse {
            indices: (&[5][..]).into(),
            values: (&[5.0][..]).into()
        }]
    );
}

/// C28 with every error reported (SPEC §7.4 and the README's line table).
#[test]
fn c28_invalid_inputs_report_all() {
    let (path, config) = invalid_inputs_config(0);
    let out = read_all::<f32>(&config, ErrorPolicy::ReportAll);
    assert!(
        out.error.is_none(),
        "ReportAll never fails: {:?}",
        out.error
    );
    let got: BTreeSet<u64> = error_lines(&out).into_iter().collect();
    let mut want: BTreeSet<u64> = INVALID_INPUTS_ERROR_LINES.into_iter().collect();
    want.insert(SEQUENCE_123_LINE);
    assert_eq!(got, want, "lines with errors");
    for line in [26, 30, 32, 34] {
        assert!(!got.contains(&line), "line {line} has no error");
    }
    assert!(
        out.diagnostics.iter().all(|(file, _)| *file == path),
        "diagnostics name the file as configured"
    );
    let seq_123: Vec<&str> = out
        .diagnostics
        .iter()
        .filter(|(_, d)| d.severity == Severity::Error && d.line == SEQUENCE_123_LINE)
        .map(|(_, d)| d.message.as_str())
        .collect();
    assert!(
        seq_123.iter().any(|m| m.contains("123")),
        "a sequence-level error names sequence 123: {seq_123:?}"
    );
    assert!(
        out.diagnostics
            .iter()
            .any(|(_, d)| d.severity == Severity::Warning && d.line == 39),
        "line 39's empty dense A gives a warning"
    );
    assert_eq!(
        out.counts.invalid_sequences, 6,
        "sequences 1, 2, 3, 4, 123, 6"
    );
    assert_only_sequence_5(&out);
}

/// C28 under the error budget: each invalid sequence reported once, by its first error.
#[test]
fn c28_invalid_inputs_budget() {
    let (_, config) = invalid_inputs_config(99999);
    let out = read_all::<f32>(&config, ErrorPolicy::Budget);
    assert!(out.error.is_none(), "{:?}", out.error);
    // First error lines of sequences 1, 2, 3, 4, 123 and 6.
    assert_eq!(error_lines(&out), [2, 5, 19, 28, SEQUENCE_123_LINE, 40]);
    assert_eq!(out.counts.invalid_sequences, 6);
    assert_only_sequence_5(&out);
}

/// C28 with maxErrors 2: the 3rd invalid sequence (sequence 3, first error on line 19) fails
/// the read; sequence 5 comes later and is not delivered.
#[test]
fn c28_invalid_inputs_budget_exceeded() {
    let (path, config) = invalid_inputs_config(2);
    let out = read_all::<f32>(&config, ErrorPolicy::Budget);
    let error = out.error.as_ref().expect("the read must fail").to_string();
    assert!(error.contains(&format!("{path}:19:")), "{error}");
    assert_eq!(error_lines(&out), [2, 5], "the two tolerated sequences");
    assert!(out.sequences.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Parser cases built in memory: S1, S2, S3 (single dense input A of dim 1, no final newline)
// ---------------------------------------------------------------------------------------------

struct InMemory {
    values: Vec<Vec<f32>>,
    errors: usize,
    warnings: usize,
    invalid: usize,
}

fn parse_in_memory(text: &str) -> InMemory {
    let inputs = [InputConfig::dense("A", 1)];
    let options = StreamOptions {
        skip_sequence_ids: false,
        frame_mode: false,
    };
    let mut parser = StreamParser::<f32>::new(&inputs, options);
    parser.start_file(0);
    parser.feed(text.as_bytes()).expect("no fatal error");
    parser.finish_file().expect("no fatal error");
    let seqs = parser.sequences();
    let values = (0..seqs.len())
        .map(|q| {
            seqs.samples(q, 0)
                .flat_map(|s| match s {
                    Sample::Dense(v) => v.to_vec(),
                    Sample::Sparse { .. } => panic!("A is dense"),
                })
                .collect()
        })
        .collect();
    let count = |sev| {
        parser
            .diagnostics()
            .iter()
            .filter(|d| d.severity == sev)
            .count()
    };
    InMemory {
        values,
        errors: count(Severity::Error),
        warnings: count(Severity::Warning),
        invalid: parser.invalid_sequences().len(),
    }
}

#[test]
fn s1_valid_numbers_without_final_newline() {
    let cases: [(&str, f64); 5] = [
        ("|A 1", 1.0),
        ("|A -123", -123.0),
        ("|A 45.", 45.0),
        ("|A 6.78", 6.78),
        ("|A 9.10e-11", 9.10e-11),
    ];
    for (text, want) in cases {
        let r = parse_in_memory(text);
        assert_eq!((r.errors, r.invalid), (0, 0), "{text:?}");
        assert_eq!(r.values.len(), 1, "{text:?}: one sequence");
        assert_eq!(r.values[0].len(), 1, "{text:?}: one value");
        let got = f64::from(r.values[0][0]);
        assert!(
            ((got - want) / want).abs() <= 1e-7,
            "{text:?}: got {got}, want {want}"
        );
    }
}

#[test]
fn s2_empty_samples_are_valid_malformed_values_are_not() {
    // SPEC §7.4: unlike CNTK, an empty dense sample at the end of a file is a zero sample.
    for text in ["|A", "|A\t", "|A ", "|A     "] {
        let r = parse_in_memory(text);
        assert_eq!((r.errors, r.invalid), (0, 0), "{text:?} is valid");
        assert_eq!(r.values, [vec![0.0]], "{text:?}: one zero sample");
        assert!(r.warnings >= 1, "{text:?}: zero padding gives a warning");
    }
    for text in ["|A -", "|A +", "|A 12.+", "|A 12.+e", "|A 1:"] {
        let r = parse_in_memory(text);
        assert!(r.errors >= 1, "{text:?} is an error");
        assert_eq!(r.invalid, 1, "{text:?}: the sequence is invalid");
        assert!(r.values.is_empty(), "{text:?}: nothing delivered");
    }
}

#[test]
fn s3_unknown_inputs_are_skipped() {
    for (text, want) in [
        ("|A 1 |B 1 2 3", 1.0),
        ("|A 2 |this_input_is_supposed_to_be_also_ignored 1 2 3", 2.0),
    ] {
        let r = parse_in_memory(text);
        assert_eq!((r.errors, r.invalid), (0, 0), "{text:?}");
        assert_eq!(r.values, [vec![want]], "{text:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Files without a control: checks against a naive parse written here
// ---------------------------------------------------------------------------------------------

/// Every error of a read, for failure messages.
fn describe_errors<T>(out: &ReadOutcome<T>) -> String {
    let mut text = String::new();
    if let Some(e) = &out.error {
        text += &format!("\n  read failed: {e}");
    }
    for (file, d) in out.diagnostics.iter().take(20) {
        if d.severity == Severity::Error {
            text += &format!("\n  {}", d.display_in(file));
        }
    }
    text
}

/// `100x100_jagged_sequences_sparse.txt`: every line is `ID|F0 i:v i:v ...`; consecutive lines
/// with one id form a sequence.
#[test]
fn jagged_sequences_sparse_matches_naive_parse() {
    let path = data_path("100x100_jagged_sequences_sparse.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    // Naive parse: (id, [(index, value)]) per line, then grouped by consecutive id.
    type SparseSample = Vec<(u32, f32)>;
    let mut expected: Vec<(u64, Vec<SparseSample>)> = Vec::new();
    for line in text.lines() {
        let (id, rest) = line.split_once("|F0").expect("every line has |F0");
        let id: u64 = id.trim().parse().expect("every line has an id");
        let sample = rest
            .split_ascii_whitespace()
            .map(|entry| {
                let (i, v) = entry.split_once(':').expect("index:value");
                (i.parse().unwrap(), v.parse().unwrap())
            })
            .collect();
        match expected.last_mut() {
            Some((last, samples)) if *last == id => samples.push(sample),
            _ => expected.push((id, vec![sample])),
        }
    }
    let distinct: BTreeSet<u64> = expected.iter().map(|(id, _)| *id).collect();
    assert_eq!(distinct.len(), expected.len(), "ids are not reused");
    assert_eq!(expected.len(), 100);
    let lines_with_f0 = text.lines().filter(|l| l.contains("|F0")).count();

    let config = ReaderConfig::builder()
        .file(&path)
        .input(InputConfig::sparse("features", 20).with_alias("F0"))
        .precision(Precision::Float)
        .build()
        .unwrap();
    let out = read_all::<f32>(&config, ErrorPolicy::Budget);
    assert!(
        out.error.is_none() && out.counts.errors == 0,
        "{}",
        describe_errors(&out)
    );
    let seqs = &out.sequences;
    assert_eq!(seqs.len(), distinct.len(), "one sequence per id");
    let total: usize = (0..seqs.len()).map(|q| seqs.sample_count(q, 0)).sum();
    assert_eq!(total, lines_with_f0, "one sample per line");
    for (q, (id, samples)) in expected.iter().enumerate() {
        assert_eq!(seqs.sequences[q].key, *id);
        let got: Vec<SparseSample> = seqs
            .samples(q, 0)
            .map(|s| match s {
                Sample::Sparse { indices, values } => indices.iter().zip(values.iter()).collect(),
                Sample::Dense(_) => panic!("F0 is sparse"),
            })
            .collect();
        assert_eq!(&got, samples, "sequence {id}");
    }
}

/// `v2data/`: `|labels a b<TAB>|features x y` per line; only `features` is configured, so
/// `labels` is skipped. Line mode: one one-sample sequence per line, keyed by line number.
#[test]
fn v2data_features_match_naive_parse() {
    for (name, lines) in [
        ("SimpleDataTest_cntk_text.txt", 603),
        ("SimpleDataTrain_cntk_text.txt", 10000),
    ] {
        let path = format!("{CORPUS}/v2data/{name}");
        let text = std::fs::read_to_string(&path).unwrap();
        let expected: Vec<[f32; 2]> = text
            .lines()
            .map(|line| {
                let mut tokens = line.split_ascii_whitespace();
                tokens
                    .by_ref()
                    .find(|t| *t == "|features")
                    .expect("|features");
                let mut value = || tokens.next().unwrap().parse::<f32>().unwrap();
                [value(), value()]
            })
            .collect();
        assert_eq!(expected.len(), lines, "{name}");

        let config = ReaderConfig::builder()
            .file(&path)
            .input(InputConfig::dense("features", 2))
            .precision(Precision::Float)
            .build()
            .unwrap();
        let out = read_all::<f32>(&config, ErrorPolicy::Budget);
        assert!(
            out.error.is_none() && out.counts.errors == 0,
            "{name}:{}",
            describe_errors(&out)
        );
        let seqs = &out.sequences;
        assert_eq!(seqs.len(), lines, "{name}: one sequence per line");
        for (q, want) in expected.iter().enumerate() {
            assert_eq!(seqs.sequences[q].key, q as u64, "{name}: line-mode key");
            assert_eq!(seqs.sample_count(q, 0), 1, "{name}: sequence {q}");
            let got: Vec<Sample<'_, f32>> = seqs.samples(q, 0).collect();
            assert_eq!(
                got,
                [Sample::Dense((&want[..]).into())],
                "{name}: line {}",
                q + 1
            );
        }
    }
}
