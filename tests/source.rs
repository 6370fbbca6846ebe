//! `MinibatchSource` end to end on generated files: restore gives exactly the minibatches of
//! the uninterrupted run, workers share every sweep exactly, invalid sequences are skipped
//! and charged once, and a window of the default's 128 chunks shuffles a label-sorted file
//! about as well as a full shuffle.

use std::path::Path;

use ctf_reader::minibatch::Minibatch;
use ctf_reader::reader::DiagnosticSink;
use ctf_reader::source::{MinibatchSource, PipelineOptions, ReadLimits, SourceError};
use ctf_reader::timeline::checkpoint::Checkpoint;
use ctf_reader::{InputConfig, RandomizerKind, ReaderConfig};

/// Sequences with ids 0.., lengths cycling 1..=5, a dense `x` (the line's id and step) and a
/// sparse `y` (one entry per line).
fn write_corpus(dir: &Path, sequences: u64) -> String {
    let mut text = String::new();
    for id in 0..sequences {
        for t in 0..1 + id % 5 {
            text.push_str(&format!("{id} |x {id} {t} |y {}:{}\n", (id + t) % 7, t + 1));
        }
    }
    let path = dir.join("d.ctf");
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn config(file: &str, edit: impl Fn(ReaderConfig) -> ReaderConfig) -> ReaderConfig {
    let c = ReaderConfig::builder()
        .file(file)
        .input(InputConfig::dense("x", 2))
        .input(InputConfig::sparse("y", 7))
        .chunk_size_in_bytes(200)
        .randomization_window(4)
        .trace_level(0)
        .build()
        .unwrap();
    edit(c)
}

fn quiet() -> DiagnosticSink {
    Box::new(|_, _| {})
}

fn source(config: &ReaderConfig, limits: ReadLimits) -> MinibatchSource<f32> {
    MinibatchSource::new(config, limits, quiet()).unwrap()
}

fn sweeps(n: u64) -> ReadLimits {
    ReadLimits {
        max_samples: None,
        max_sweeps: Some(n),
        epoch_size: None,
    }
}

/// Every minibatch until the end, detached from the pool, with its checkpoint.
fn drain(s: &mut MinibatchSource<f32>, size: u64) -> Vec<(Minibatch<f32>, Checkpoint)> {
    let mut out = Vec::new();
    while let Some(mb) = s.next_minibatch(size).unwrap() {
        out.push((mb.into_inner(), s.checkpoint()));
    }
    out
}

fn keys(batches: &[(Minibatch<f32>, Checkpoint)]) -> Vec<u64> {
    batches
        .iter()
        .flat_map(|(mb, _)| mb.sequences.iter().map(|s| s.key))
        .collect()
}

#[test]
fn restore_anywhere_gives_the_same_minibatches() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 60);
    let cfg = config(&file, |c| c);
    let whole = drain(&mut source(&cfg, sweeps(3)), 11);
    assert!(whole.len() > 20);
    // Before the first minibatch, after each one (sweep ends included), and twice in a row.
    let mut starts = vec![source(&cfg, sweeps(3)).checkpoint()];
    starts.extend(whole.iter().map(|(_, c)| *c));
    for (k, checkpoint) in starts.iter().enumerate() {
        let mut resumed = source(&cfg, sweeps(3));
        resumed.restore(checkpoint).unwrap();
        resumed.restore(checkpoint).unwrap();
        let rest = drain(&mut resumed, 11);
        assert_eq!(rest.len(), whole.len() - k, "after minibatch {k}");
        for (a, b) in rest.iter().zip(&whole[k..]) {
            assert_eq!(a.0, b.0, "after minibatch {k}");
            assert_eq!(a.1, b.1);
        }
    }
    // Restoring with another size continues the same order of sequences.
    let mut resumed = source(&cfg, sweeps(3));
    resumed.restore(&whole[5].1).unwrap();
    assert_eq!(keys(&drain(&mut resumed, 3)), keys(&whole[6..]));
}

#[test]
fn a_checkpoint_of_another_order_or_corpus_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 30);
    let cfg = config(&file, |c| c);
    let mut s = source(&cfg, sweeps(1));
    s.next_minibatch(5).unwrap();
    let checkpoint = s.checkpoint();
    for other in [
        config(&file, |mut c| {
            c.randomization_seed = 1;
            c
        }),
        config(&file, |mut c| {
            c.randomizer = RandomizerKind::Cntk;
            c
        }),
        config(&file, |mut c| {
            c.chunk_size_in_bytes = 100;
            c
        }),
    ] {
        let err = source(&other, sweeps(1)).restore(&checkpoint).unwrap_err();
        assert!(matches!(err, SourceError::Checkpoint(_)), "{err}");
        assert!(err.to_string().contains("different"), "{err}");
    }
    // Another worker count or minibatch size is fine.
    let mut s = source(&cfg, sweeps(1));
    s.set_partition(1, 3).unwrap();
    s.restore(&checkpoint).unwrap();
}

#[test]
fn workers_share_each_minibatch_and_sweep_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 90);
    for window in [2u64, 1000] {
        let cfg = config(&file, |mut c| {
            c.randomization_window = Some(window);
            c
        });
        let single = drain(&mut source(&cfg, sweeps(2)), 16);
        for workers in 1..=8u32 {
            let shares: Vec<Vec<(Minibatch<f32>, Checkpoint)>> = (0..workers)
                .map(|rank| {
                    let mut s = source(&cfg, sweeps(2));
                    s.set_partition(rank, workers).unwrap();
                    drain(&mut s, 16)
                })
                .collect();
            for (rank, share) in shares.iter().enumerate() {
                assert_eq!(share.len(), single.len(), "same number of calls");
                assert!(
                    !keys(share).is_empty(),
                    "rank {rank} of {workers} got nothing"
                );
            }
            for (i, (whole, checkpoint)) in single.iter().enumerate() {
                let mut union: Vec<u64> = shares
                    .iter()
                    .flat_map(|s| s[i].0.sequences.iter().map(|q| q.key))
                    .collect();
                let total: usize = shares.iter().map(|s| s[i].0.samples()).sum();
                for share in &shares {
                    assert_eq!(share[i].1, *checkpoint, "identical checkpoints");
                }
                union.sort_unstable();
                let mut expected: Vec<u64> = whole.sequences.iter().map(|q| q.key).collect();
                expected.sort_unstable();
                assert_eq!(union, expected, "{workers} workers, minibatch {i}");
                assert_eq!(total, whole.samples());
            }
        }
    }
}

#[test]
fn invalid_sequences_are_skipped_and_charged_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.ctf");
    std::fs::write(
        &path,
        "1 |x 1 1 |y 0:1\n2 |x 1 oops |y 0:1\n3 |x 3 3 |y 2:1\n",
    )
    .unwrap();
    let file = path.to_string_lossy().into_owned();
    let strict = config(&file, |c| c);
    let mut s = source(&strict, sweeps(1));
    let err = s.next_minibatch(100).unwrap_err();
    assert!(err.to_string().contains("maxErrors"), "{err}");

    let reported = std::sync::Arc::new(std::sync::Mutex::new(0));
    let count = std::sync::Arc::clone(&reported);
    let lenient = config(&file, |mut c| {
        c.max_errors = 1;
        c.trace_level = 1;
        c.keep_data_in_memory = false;
        c
    });
    let mut s = MinibatchSource::<f32>::new(
        &lenient,
        sweeps(3),
        Box::new(move |_, _| *count.lock().unwrap() += 1),
    )
    .unwrap();
    let got = keys(&drain(&mut s, 1));
    assert_eq!(got.len(), 6);
    assert!(!got.contains(&2));
    assert_eq!(
        *reported.lock().unwrap(),
        1,
        "reported once over three sweeps"
    );
}

#[test]
fn limits_are_exclusive_and_size_must_be_positive() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 10);
    let cfg = config(&file, |c| c);
    let both = ReadLimits {
        max_samples: Some(5),
        max_sweeps: Some(1),
        epoch_size: None,
    };
    let err = MinibatchSource::<f32>::new(&cfg, both, quiet())
        .err()
        .unwrap();
    assert!(err.to_string().contains("cannot both"), "{err}");
    let err = source(&cfg, sweeps(1)).next_minibatch(0).unwrap_err();
    assert!(err.to_string().contains("at least 1"), "{err}");
}

#[test]
fn keep_data_in_memory_reads_every_byte_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 80);
    let cfg = config(&file, |mut c| {
        c.keep_data_in_memory = true;
        c
    });
    let mut s = source(&cfg, sweeps(3));
    drain(&mut s, 10);
    let counters = s.counters();
    let bytes = std::fs::metadata(&file).unwrap().len();
    assert_eq!(counters.bytes_read, bytes);
    assert_eq!(counters.chunks_loaded, s.index().chunks.len() as u64);
    // Without it, later sweeps read again. One loader, one packer, one delivery queued and
    // minibatches of one sample: the cache also holds the parts of the minibatches in
    // flight, which with the defaults are most of this corpus of 50 chunks.
    let cfg = config(&file, |c| c);
    let narrow = PipelineOptions {
        loader_threads: 1,
        packer_threads: 1,
        prefetch: 1,
        ..PipelineOptions::default()
    };
    let mut s = MinibatchSource::with_options(&cfg, sweeps(3), quiet(), narrow).unwrap();
    drain(&mut s, 1);
    assert!(
        s.counters().bytes_read > 2 * bytes,
        "without it, later sweeps read again: {:?} of {bytes} bytes",
        s.counters()
    );
}

/// Entropy (bits) of the labels in one minibatch.
fn entropy(labels: &[u64]) -> f64 {
    let mut counts = [0f64; 10];
    for &l in labels {
        counts[l as usize] += 1.0;
    }
    let n = labels.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0.0)
        .map(|&c| -(c / n) * (c / n).log2())
        .sum()
}

fn mean_entropy(cfg: &ReaderConfig) -> f64 {
    let mut s = source(cfg, sweeps(1));
    let mut total = 0.0;
    let mut n = 0.0;
    while let Some(mb) = s.next_minibatch(64).unwrap() {
        let labels: Vec<u64> = mb.streams[0].values.iter().map(|&v| v as u64).collect();
        total += entropy(&labels);
        n += 1.0;
    }
    total / n
}

/// On a label-sorted file, the default window's minibatches are about as mixed as a full
/// shuffle's (issue 4: within 5%). The default window is 4 GiB of chunks, which covers this
/// small file whole; the window here is its count at the default chunk size (128 chunks of
/// 32 MiB), so it covers about a third of the file's chunks, as it would of a corpus of
/// about 11 GiB. File order, and a window of a few chunks, fail the same bound.
#[test]
fn default_window_shuffles_a_sorted_file_like_a_full_shuffle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sorted.ctf");
    let mut text = String::new();
    for i in 0..20_000u64 {
        text.push_str(&format!("|label {}\n", i * 10 / 20_000));
    }
    std::fs::write(&path, text).unwrap();
    let default_window = ctf_reader::config::default_window_chunks(32 << 20);
    assert_eq!(default_window, 128);
    let base = ReaderConfig::builder()
        .file(path.to_string_lossy())
        .input(InputConfig::dense("label", 1))
        .chunk_size_in_bytes(500)
        .randomization_window(default_window)
        .trace_level(0)
        .build()
        .unwrap();
    let chunks = source(&base, sweeps(1)).index().chunks.len() as u64;
    assert!(
        chunks > 2 * default_window,
        "the window must be narrower than the file: {chunks} chunks"
    );
    let windowed = mean_entropy(&base);
    let mut full = base.clone();
    full.randomization_window = Some(1 << 40);
    let shuffled = mean_entropy(&full);
    let mut narrow = base.clone();
    narrow.randomization_window = Some(4);
    let few_chunks = mean_entropy(&narrow);
    let mut unshuffled = base.clone();
    unshuffled.randomize = false;
    let sorted = mean_entropy(&unshuffled);
    eprintln!(
        "label entropy per minibatch ({chunks} chunks): window of {default_window} chunks \
         {windowed:.4}, full shuffle {shuffled:.4}, window of 4 chunks {few_chunks:.4}, \
         file order {sorted:.4}"
    );
    let close = |e: f64| (e - shuffled).abs() <= 0.05 * shuffled;
    assert!(close(windowed), "{windowed} vs {shuffled}");
    assert!(!close(few_chunks), "{few_chunks} vs {shuffled}");
    assert!(!close(sorted), "{sorted} vs {shuffled}");
    assert!(sorted < 0.2, "{sorted}");
}
