//! The threaded engine against the single-threaded reference: byte-identical minibatches
//! at any number of loader threads and prefetch depth, with restores, partitions and size
//! changes; errors in order; prompt shutdown; many readers created and dropped.

mod cpus_support;
mod engine_support;

use std::path::Path;

use cpus_support::allowed_cpus;
use ctf_reader::minibatch::Minibatch;
use ctf_reader::minibatch::PooledMinibatch;
use ctf_reader::reader::DiagnosticSink;
use ctf_reader::source::{
    MinibatchSource, PipelineOptions, ReadLimits, ReferenceSource, SourceError,
};
use ctf_reader::timeline::schedule::MbSchedule;
use ctf_reader::{InputConfig, ReaderConfig};
use engine_support::{engine, sweeps, within};

fn write_corpus(dir: &Path, sequences: u64) -> String {
    let mut text = String::new();
    for id in 0..sequences {
        for t in 0..1 + id % 6 {
            text.push_str(&format!("{id} |x {id} {t} |y {}:{}\n", (id + t) % 7, t + 1));
        }
    }
    let path = dir.join("d.ctf");
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn config(file: &str) -> ReaderConfig {
    ReaderConfig::builder()
        .file(file)
        .input(InputConfig::dense("x", 2))
        .input(InputConfig::sparse("y", 7))
        .chunk_size_in_bytes(300)
        .randomization_window(3)
        .trace_level(0)
        .build()
        .unwrap()
}

fn quiet() -> DiagnosticSink {
    Box::new(|_, _| {})
}

fn reference(cfg: &ReaderConfig, limits: ReadLimits, size: u64) -> Vec<Minibatch<f32>> {
    let mut s = ReferenceSource::<f32>::new(cfg, limits, quiet()).unwrap();
    std::iter::from_fn(|| s.next_minibatch(size).unwrap().map(|m| m.into_inner())).collect()
}

fn threaded(
    cfg: &ReaderConfig,
    limits: ReadLimits,
    loaders: usize,
    packers: usize,
    prefetch: usize,
) -> MinibatchSource<f32> {
    engine(cfg, limits, loaders, packers, prefetch, 1 << 20)
}

/// Chunks of the corpus `cfg` reads.
fn t_chunks(cfg: &ReaderConfig) -> u64 {
    let s = ReferenceSource::<f32>::new(cfg, sweeps(1), quiet()).unwrap();
    s.index().chunks.len() as u64
}

/// Two loaders, two packers and a prefetch depth of 2, with the given part size, memory
/// budget and parsing while indexing.
fn two_of_each(part_bytes: u64, memory_budget: Option<u64>, stash: bool) -> PipelineOptions {
    PipelineOptions {
        loader_threads: 2,
        packer_threads: 2,
        prefetch: 2,
        part_bytes,
        memory_budget,
        parse_while_indexing: stash,
        pin_packers: false,
    }
}

fn drain(s: &mut MinibatchSource<f32>, size: u64) -> Vec<Minibatch<f32>> {
    std::iter::from_fn(|| s.next_minibatch(size).unwrap().map(|m| m.into_inner())).collect()
}

#[test]
fn same_minibatches_at_any_thread_count_and_prefetch() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 150);
    for randomize in [true, false] {
        let mut cfg = config(&file);
        cfg.randomize = randomize;
        let want = reference(&cfg, sweeps(3), 13);
        for loaders in [1, 2, 4, 8] {
            for packers in [1, 2, 3] {
                for prefetch in [1, 2, 5] {
                    let got = drain(
                        &mut threaded(&cfg, sweeps(3), loaders, packers, prefetch),
                        13,
                    );
                    assert_eq!(
                        got, want,
                        "{loaders} loaders, {packers} packers, prefetch {prefetch}"
                    );
                }
            }
        }
    }
}

#[test]
fn pinned_packers_give_the_same_minibatches() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 150);
    let cfg = config(&file);
    let want = reference(&cfg, sweeps(2), 13);
    let cpus = allowed_cpus();
    for packers in [cpus.unwrap_or(2), cpus.unwrap_or(2) + 1] {
        let options = PipelineOptions {
            packer_threads: packers,
            pin_packers: true,
            ..two_of_each(1 << 20, None, true)
        };
        let mut s = MinibatchSource::with_options(&cfg, sweeps(2), quiet(), options).unwrap();
        let first = drain_n(&mut s, 13, 3);
        let checkpoint = s.checkpoint();
        let pinned = if Some(packers) == cpus {
            packers as u64
        } else {
            0
        };
        assert_eq!(s.counters().pinned_packers, pinned, "{packers} packers");
        s.restore(&checkpoint).unwrap();
        let rest = drain(&mut s, 13);
        assert_eq!(
            s.counters().pinned_packers,
            pinned,
            "{packers} packers, restored"
        );
        assert_eq!([first, rest].concat(), want, "{packers} packers");
    }
}

/// Chunks split into parts of 1 byte (one sequence each), 100 bytes, or whole: the same
/// minibatches, and an invalid sequence charged at the same minibatch.
#[test]
fn chunks_parsed_in_parts_give_the_same_minibatches() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 150);
    let mut cfg = config(&file);
    cfg.chunk_size_in_bytes = 3000;
    let want = reference(&cfg, sweeps(2), 11);
    for part_bytes in [1, 100, 1 << 20] {
        for loaders in [1, 3] {
            let got = drain(&mut engine(&cfg, sweeps(2), loaders, 2, 2, part_bytes), 11);
            assert_eq!(got, want, "parts of {part_bytes} bytes, {loaders} loaders");
        }
    }
    let path = dir.path().join("bad.ctf");
    let mut text = String::new();
    for id in 0..60 {
        let x = if id % 20 == 7 {
            "oops".to_string()
        } else {
            id.to_string()
        };
        text.push_str(&format!("{id} |x {x} 0 |y 0:1\n"));
    }
    std::fs::write(&path, text).unwrap();
    let mut bad = config(&path.to_string_lossy());
    bad.chunk_size_in_bytes = 400;
    bad.max_errors = 2;
    let outcome = |mut next: Box<dyn FnMut() -> Result<Option<Minibatch<f32>>, String>>| {
        let mut got = Vec::new();
        loop {
            match next() {
                Ok(Some(mb)) => got.push(Ok(mb)),
                Ok(None) => break,
                Err(e) => {
                    got.push(Err(e));
                    break;
                }
            }
        }
        got
    };
    let mut r = ReferenceSource::<f32>::new(&bad, sweeps(2), quiet()).unwrap();
    let want = outcome(Box::new(move || {
        r.next_minibatch(5)
            .map(|m| m.map(|m| m.into_inner()))
            .map_err(|e| e.to_string())
    }));
    assert!(
        want.last().unwrap().is_err(),
        "the third invalid sequence fails the read"
    );
    for part_bytes in [1, 50] {
        let mut t = engine(&bad, sweeps(2), 2, 2, 2, part_bytes);
        let got = outcome(Box::new(move || {
            t.next_minibatch(5)
                .map(|m| m.map(|m| m.into_inner()))
                .map_err(|e| e.to_string())
        }));
        assert_eq!(got, want, "parts of {part_bytes} bytes");
    }
}

#[test]
fn restores_partitions_and_size_changes_match_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 120);
    let cfg = config(&file);
    let mut r = ReferenceSource::<f32>::new(&cfg, sweeps(2), quiet()).unwrap();
    let mut t = threaded(&cfg, sweeps(2), 3, 2, 2);
    let mut checkpoints = Vec::new();
    // A script of calls, the same on both engines.
    for step in 0..60u64 {
        match step % 9 {
            4 => {
                let c = checkpoints[(step as usize * 7) % checkpoints.len()];
                r.restore(&c).unwrap();
                t.restore(&c).unwrap();
            }
            7 => {
                let (rank, workers) = ((step % 3) as u32, 3);
                r.set_partition(rank, workers).unwrap();
                t.set_partition(rank, workers).unwrap();
            }
            _ => {
                let size = 1 + step % 17;
                let a = r.next_minibatch(size).unwrap().map(|m| m.into_inner());
                let b = t.next_minibatch(size).unwrap().map(|m| m.into_inner());
                assert_eq!(a, b, "step {step}");
                assert_eq!(r.checkpoint(), t.checkpoint(), "step {step}");
                checkpoints.push(r.checkpoint());
            }
        }
    }
}

#[test]
fn errors_arrive_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = in_order_with_a_bad_sequence(dir.path(), 25);
    let mut r = ReferenceSource::<f32>::new(&cfg, sweeps(1), quiet()).unwrap();
    let mut t = threaded(&cfg, sweeps(1), 4, 3, 3);
    same_until_the_error(&mut r, &mut t, 4, "maxErrors", "");
}

/// 40 sequences of one line, `|x ID 0 |y 0:1`, in file order, sequence `bad` with a
/// malformed value.
fn in_order_with_a_bad_sequence(dir: &Path, bad: u64) -> ReaderConfig {
    let path = dir.join("bad.ctf");
    let mut text = String::new();
    for id in 0..40 {
        let x = if id == bad {
            "oops".to_string()
        } else {
            id.to_string()
        };
        text.push_str(&format!("{id} |x {x} 0 |y 0:1\n"));
    }
    std::fs::write(&path, text).unwrap();
    let mut cfg = config(&path.to_string_lossy());
    cfg.randomize = false;
    cfg
}

/// Reads minibatches of `size` from both engines until the read fails: the same minibatches,
/// then the same error, which contains `error`; an end before it fails the test.
fn same_until_the_error(
    r: &mut ReferenceSource<f32>,
    t: &mut MinibatchSource<f32>,
    size: u64,
    error: &str,
    what: &str,
) {
    loop {
        let a = r.next_minibatch(size).map(|m| m.map(|m| m.into_inner()));
        let b = t.next_minibatch(size).map(|m| m.map(|m| m.into_inner()));
        match (a, b) {
            (Ok(Some(a)), Ok(Some(b))) => assert_eq!(a, b, "{what}"),
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "{what}");
                assert!(a.to_string().contains(error), "{what}: {a}");
                return;
            }
            (a, b) => panic!("{what}: reference {a:?} but threaded {b:?}"),
        }
    }
}

/// A source whose read failed keeps failing when the caller asks for another size, on both
/// engines, until a restore; the restored read goes on past the sequence already charged.
/// (The threaded engine used to start a new run for the new size, past the error.)
#[test]
fn a_failed_source_stays_failed_at_another_size_until_a_restore() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = in_order_with_a_bad_sequence(dir.path(), 10);
    let mut r = ReferenceSource::<f32>::new(&cfg, sweeps(1), quiet()).unwrap();
    let mut t = threaded(&cfg, sweeps(1), 2, 2, 2);
    let start = r.checkpoint();
    let outcome = |s: Result<Option<PooledMinibatch<f32>>, SourceError>| {
        s.map(|m| m.map(|m| m.into_inner().sequences.len()))
            .map_err(|e| e.to_string())
    };
    let first = outcome(r.next_minibatch(16));
    assert!(
        first.as_ref().is_err_and(|e| e.contains(":11:")),
        "{first:?}"
    );
    assert_eq!(outcome(t.next_minibatch(16)), first);
    for size in [16, 3, 40] {
        let again = outcome(r.next_minibatch(size));
        assert!(
            again.as_ref().is_err_and(|e| e.contains("failed earlier")),
            "size {size}: {again:?}"
        );
        assert_eq!(outcome(t.next_minibatch(size)), again, "size {size}");
    }
    // Nor does a schedule (the threaded engine's used to start a new run past the error),
    // and a scheduled size of 0 is refused first, as a size of 0 is.
    for size in [4, 0] {
        r.set_schedule(MbSchedule::constant(size));
        t.set_schedule(MbSchedule::constant(size));
        let again = outcome(r.next_scheduled(16));
        let expected = if size == 0 {
            "at least 1 sample"
        } else {
            "failed earlier"
        };
        assert!(
            again.as_ref().is_err_and(|e| e.contains(expected)),
            "schedule {size}: {again:?}"
        );
        assert_eq!(outcome(t.next_scheduled(16)), again, "schedule {size}");
    }
    r.set_schedule(MbSchedule::constant(16));
    t.set_schedule(MbSchedule::constant(16));
    r.restore(&start).unwrap();
    t.restore(&start).unwrap();
    // Sequence 10 was charged once for the life of the source: the read now skips it.
    for _ in 0..4 {
        let a = r.next_minibatch(16).unwrap().map(|m| m.into_inner());
        let b = t.next_minibatch(16).unwrap().map(|m| m.into_inner());
        assert_eq!(a, b);
    }
}

/// Invalid lines that hold no sample of a configured input, in chunks holding no sample
/// (a chunk of one such line, a file of them), are charged and reported like any other
/// invalid sequence: at the first minibatch, on both engines and at any chunk size. They
/// used to be dropped: no sequence of theirs has a place on the timeline to carry them.
#[test]
fn invalid_lines_in_chunks_without_samples_are_charged() {
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.ctf");
    let junk = dir.path().join("junk.ctf");
    std::fs::write(&data, "|x 1 2 |y 0:1\nnot a sample\n| 3\n|x 3 4 |y 1:1\n").unwrap();
    std::fs::write(&junk, "x y\n|\t7\n").unwrap();
    let files = [
        data.to_string_lossy().into_owned(),
        junk.to_string_lossy().into_owned(),
    ];
    let mut cfg = config(&files[0]);
    cfg.files = files.to_vec();
    cfg.randomize = false;
    cfg.trace_level = 1;
    type Log = Arc<Mutex<Vec<String>>>;
    let logging = |log: &Log| -> DiagnosticSink {
        let log = Arc::clone(log);
        Box::new(move |file, d| log.lock().unwrap().push(d.display_in(file).to_string()))
    };
    let junk_name = files[1].clone();
    let want_errors = [
        format!("{}:2:1:", files[0]),
        format!("{}:3:1:", files[0]),
        format!("{junk_name}:1:1:"),
        format!("{junk_name}:2:1:"),
    ];
    for chunk_size in [0, 20, 1 << 20] {
        cfg.chunk_size_in_bytes = chunk_size;
        // Within the budget: every one reported, the two valid sequences read.
        cfg.max_errors = 4;
        for threaded_engine in [false, true] {
            let log: Log = Arc::default();
            let keys: Vec<u64> = if threaded_engine {
                let options = two_of_each(1, None, true);
                let mut s =
                    MinibatchSource::<f32>::with_options(&cfg, sweeps(1), logging(&log), options)
                        .unwrap();
                drain(&mut s, 4)
            } else {
                let mut s = ReferenceSource::<f32>::new(&cfg, sweeps(1), logging(&log)).unwrap();
                std::iter::from_fn(|| s.next_minibatch(4).unwrap().map(|m| m.into_inner()))
                    .collect()
            }
            .iter()
            .flat_map(|m| m.sequences.iter().map(|s| s.key))
            .collect();
            assert_eq!(keys, [0, 3], "chunks of {chunk_size} bytes");
            let mut logged = log.lock().unwrap().clone();
            logged.sort();
            assert_eq!(logged.len(), 4, "chunks of {chunk_size} bytes: {logged:?}");
            for (line, want) in logged.iter().zip(&want_errors) {
                assert!(
                    line.starts_with(want.as_str()),
                    "{line} should start with {want}"
                );
            }
        }
        // Over the budget: the read fails on both engines, at the same call, with the same
        // error.
        cfg.max_errors = 1;
        let mut r = ReferenceSource::<f32>::new(&cfg, sweeps(1), quiet()).unwrap();
        let mut t = threaded(&cfg, sweeps(1), 2, 2, 2);
        let what = format!("chunks of {chunk_size} bytes");
        same_until_the_error(&mut r, &mut t, 1, "maxErrors = 1", &what);
    }
    // A corpus of junk only: its first error, located, rather than "nothing to read".
    cfg.files = vec![junk_name.clone()];
    cfg.max_errors = 0;
    let want = format!("{junk_name}:1:1: error: too many invalid sequences");
    let r = ReferenceSource::<f32>::new(&cfg, sweeps(1), quiet()).map(|_| ());
    assert!(
        r.as_ref().is_err_and(|e| e.to_string().starts_with(&want)),
        "{r:?}"
    );
    let t = MinibatchSource::<f32>::new(&cfg, sweeps(1), quiet()).map(|_| ());
    assert!(
        t.as_ref().is_err_and(|e| e.to_string().starts_with(&want)),
        "{t:?}"
    );
    cfg.max_errors = 2;
    let r = ReferenceSource::<f32>::new(&cfg, sweeps(1), quiet()).map(|_| ());
    assert!(
        r.as_ref()
            .is_err_and(|e| e.to_string().contains("nothing to read")),
        "{r:?}"
    );
}

/// Minibatches far wider than the window's parts (one sequence per chunk, a window of 128
/// chunks, minibatches of 1,000 samples) do not thrash the chunk cache: every part is read
/// once, none is evicted before its packer takes it. The cache used to hold one window's
/// parts, so the planner's parts were evicted and read again, and every insert walked the
/// pinned ones (100,000 such sequences took 7.2 s, against 0.02 s in chunks of 32 MiB).
#[test]
fn minibatches_wider_than_the_window_read_each_part_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lines.ctf");
    let text: String = (0..20_000).map(|i| format!("|x {i} 1 |y 2:1\n")).collect();
    std::fs::write(&path, &text).unwrap();
    let mut cfg = config(&path.to_string_lossy());
    cfg.chunk_size_in_bytes = 0;
    // (Set: the default for chunks of one sequence is now the whole data.)
    cfg.randomization_window = Some(128);
    let want = reference(&cfg, sweeps(1), 1000);
    let mut t = engine(&cfg, sweeps(1), 2, 2, 2, 1 << 20);
    assert_eq!(drain(&mut t, 1000), want);
    let c = t.counters();
    assert_eq!(c.cache_misses, 0, "{c:?}");
    assert_eq!(c.bytes_read, text.len() as u64, "{c:?}");
}

/// Minibatches that span several small chunks, with a window of a few chunks: the planner
/// asks for the parts of the sequences ahead of the packers, which lag it by the batches
/// queued, so the cache must hold the window around the packers' position and the chunks
/// up to the planner's: every chunk is loaded once in the sweep, none evicted before its
/// last use (give or take a few under load). It used to hold the window and the look-ahead only, and parts were read again
/// in most runs (cache misses).
#[test]
fn minibatches_spanning_several_chunks_load_each_chunk_once_a_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small_chunks.ctf");
    let mut text = String::new();
    for id in 0..1000u64 {
        for t in 0..1 + (id * 7 + 3) % 6 {
            let dense: Vec<String> = (0..8).map(|k| ((id + t + k) % 5).to_string()).collect();
            text.push_str(&format!(
                "{id} |a {} |l {}:1 {}:2\n",
                dense.join(" "),
                (id + t) % 50,
                (id * 3 + t) % 50
            ));
        }
    }
    std::fs::write(&path, &text).unwrap();
    for window in [4, 6, 8, 12] {
        let cfg = ReaderConfig::builder()
            .file(path.to_string_lossy())
            .input(InputConfig::dense("a", 8))
            .input(InputConfig::sparse("l", 50))
            .chunk_size_in_bytes(4_000)
            .randomization_window(window)
            .trace_level(0)
            .build()
            .unwrap();
        let chunks = t_chunks(&cfg);
        assert!(chunks > 2 * window, "{chunks} chunks");
        let want = reference(&cfg, sweeps(1), 256);
        for (loaders, packers) in [(1, 1), (1, 2), (2, 2)] {
            for round in 0..3 {
                let mut t = threaded(&cfg, sweeps(1), loaders, packers, 2);
                assert_eq!(drain(&mut t, 256), want);
                let c = t.counters();
                let at = format!("window {window}, {loaders}+{packers} threads, round {round}");
                // The capacity is sized from the corpus's average chunk, and which parts the
                // LRU keeps depends on timing: on a loaded machine (a build beside the test,
                // or the CI's other tests) a run reads up to 4 of the 32 chunks again. Before,
                // runs with a window of 12 read 30 again.
                assert!(c.cache_misses <= chunks / 4, "{at}: {c:?}");
                assert!(c.chunks_loaded <= chunks + chunks / 4, "{at}: {c:?}");
            }
        }
    }
}

#[test]
fn keep_data_in_memory_reads_every_byte_once_with_threads() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 100);
    let mut cfg = config(&file);
    cfg.keep_data_in_memory = true;
    let mut t = threaded(&cfg, sweeps(3), 2, 2, 2);
    drain(&mut t, 10);
    let bytes = std::fs::metadata(&file).unwrap().len();
    let counters = t.counters();
    assert_eq!(counters.bytes_read, bytes);
    assert_eq!(
        counters.chunks_loaded,
        t_chunks(&cfg),
        "each chunk parsed once"
    );
    assert!(
        counters.parse_time > std::time::Duration::ZERO,
        "{counters:?}"
    );
    assert!(counters.minibatches > 0);
}

#[test]
fn dropping_mid_prefetch_and_many_readers_do_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 60);
    let cfg = config(&file);
    for i in 0..1000u64 {
        let mut t = threaded(
            &cfg,
            sweeps(2),
            1 + (i % 3) as usize,
            1 + (i % 2) as usize,
            1,
        );
        // Some readers never read, some stop with full queues, some read to the end.
        match i % 3 {
            0 => {}
            1 => {
                t.next_minibatch(5).unwrap();
            }
            _ => {
                drain(&mut t, 50);
            }
        }
        drop(t);
    }
}

/// The stress test: every channel at its smallest (prefetch 1: one planned and one packed
/// minibatch; one queued part per loader), 1 to 8 loaders, parts of one sequence, and a
/// script of restores, partitions and size changes: never a hang, always the reference's
/// minibatches.
#[test]
fn smallest_channels_with_1_to_8_loaders_never_hang() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 90);
    for randomize in [true, false] {
        let mut cfg = config(&file);
        cfg.randomize = randomize;
        for loaders in 1..=8usize {
            let cfg = cfg.clone();
            within(120, &format!("{loaders} loaders"), move || {
                let mut r = ReferenceSource::<f32>::new(&cfg, sweeps(3), quiet()).unwrap();
                let mut t = engine(&cfg, sweeps(3), loaders, 1 + loaders % 3, 1, 1);
                let mut checkpoints = vec![t.checkpoint()];
                for step in 0..150u64 {
                    match step % 11 {
                        5 => {
                            let c = checkpoints[(step as usize * 5) % checkpoints.len()];
                            r.restore(&c).unwrap();
                            t.restore(&c).unwrap();
                        }
                        9 => {
                            let workers = 1 + (step % 3) as u32;
                            r.set_partition(0, workers).unwrap();
                            t.set_partition(0, workers).unwrap();
                        }
                        _ => {
                            let size = 1 + (step / 3) % 13;
                            let a = r.next_minibatch(size).unwrap().map(|m| m.into_inner());
                            let b = t.next_minibatch(size).unwrap().map(|m| m.into_inner());
                            assert_eq!(a, b, "{loaders} loaders, step {step}");
                            checkpoints.push(t.checkpoint());
                        }
                    }
                }
            });
        }
    }
}

/// A memory budget bounds the cache's bytes and changes nothing in the minibatches; under a
/// budget too small for the window the packers read each sequence themselves, which the
/// counters show.
#[test]
fn a_memory_budget_bounds_the_cache_and_keeps_the_minibatches() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 400);
    let file_bytes = std::fs::metadata(&file).unwrap().len();
    let mut cfg = config(&file);
    cfg.chunk_size_in_bytes = 2000;
    cfg.randomization_window = Some(4);
    let want = reference(&cfg, sweeps(2), 16);
    let run = |budget: Option<u64>| {
        let options = two_of_each(200, budget, true);
        let mut t = MinibatchSource::with_options(&cfg, sweeps(2), quiet(), options).unwrap();
        let mut got = Vec::new();
        let mut most = 0;
        while let Some(mb) = t.next_minibatch(16).unwrap() {
            most = most.max(t.counters().cache_bytes);
            got.push(mb.into_inner());
        }
        (got, most, t.counters())
    };
    let (got, unbounded_most, unbounded) = run(None);
    assert_eq!(got, want);
    // Two sweeps read the file about twice (1.7 times: the window's last parts stay cached);
    // which parts the LRU keeps depends on timing, so a loaded machine may read a few again
    // (this is the baseline, not the subject).
    assert!(unbounded.bytes_read < 3 * file_bytes, "{unbounded:?}");
    // A budget of a third of what the cache held without one, below the window's parts:
    // once the first loads show it (the parts hold about 4.8 times their text parsed, past
    // the engine's first estimate of 2), the packers read each sequence themselves, once a
    // sweep. Loading parts instead read 7.7 to 12 times the file in two sweeps.
    let budget = unbounded_most / 3;
    let (got, most, counters) = run(Some(budget));
    assert_eq!(
        got, want,
        "the same minibatches within a budget of {budget} bytes"
    );
    // Each of the 2 packers pins the parts of one minibatch (16 samples, at most 16 parts)
    // beyond it, before the switch.
    let pinned_room = 2 * 16 * unbounded_most / (file_bytes / 200);
    assert!(
        most <= budget + pinned_room,
        "cache held {most} bytes, budget {budget} + pinned {pinned_room}"
    );
    assert!(counters.quick_bytes_read > file_bytes, "{counters:?}");
    assert!(
        counters.bytes_read + counters.quick_bytes_read < 3 * file_bytes,
        "each sequence read about once a sweep: {counters:?}"
    );
    // A budget that holds the window and the look-ahead loads whole parts.
    let (got, _, counters) = run(Some(4 * unbounded_most));
    assert_eq!(got, want);
    assert!(counters.bytes_read >= file_bytes, "{counters:?}");
}

/// Every warning and invalid sequence is reported once for the life of the source, when the
/// timeline reaches the sequence carrying it: its own sequence, or for a sequence without
/// samples (no place on the timeline) the next one with samples, or the last one. Both
/// engines, at any part size, report the same in the same order and fail at the same call.
#[test]
fn errors_and_warnings_are_reported_once_by_their_carrier_at_any_part_size() {
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.ctf");
    std::fs::write(
        &path,
        "0 |x 1 2 |y 0:1\n\
         1 |x 1 |y 0:1\n\
         2 |x 5 6\n\
         3 |x oops 2 |y 0:1\n\
         4 |x 3 4 |y 0:1\n\
         5 |x 7 8\n",
    )
    .unwrap();
    let mut cfg = config(&path.to_string_lossy());
    // Samples are counted on y, so sequences 2 and 5 (no y: invalid) have none.
    cfg.inputs[1].defines_mb_size = true;
    cfg.randomize = false;
    cfg.max_errors = 10;
    cfg.trace_level = 1;
    type Log = Arc<Mutex<Vec<(u64, bool)>>>;
    let logging = |log: &Log| -> DiagnosticSink {
        let log = Arc::clone(log);
        Box::new(move |_, d| {
            let error = d.severity == ctf_reader::Severity::Error;
            log.lock().unwrap().push((d.line, error));
        })
    };
    // Line 2: a short dense sample (warning); line 3: sequence 2 has no y, carried by
    // sequence 3; line 4: sequence 3's own error; line 6: sequence 5 has no y, carried by
    // sequence 4, the last with samples.
    let expected = vec![(2, false), (3, true), (4, true), (6, true)];
    let reference_log: Log = Arc::default();
    let mut r = ReferenceSource::<f32>::new(&cfg, sweeps(3), logging(&reference_log)).unwrap();
    let want: Vec<_> =
        std::iter::from_fn(|| r.next_minibatch(1).unwrap().map(|m| m.into_inner())).collect();
    assert_eq!(*reference_log.lock().unwrap(), expected);
    for part_bytes in [1, 20, 1 << 20] {
        let log: Log = Arc::default();
        let options = two_of_each(part_bytes, None, true);
        let mut t = MinibatchSource::with_options(&cfg, sweeps(3), logging(&log), options).unwrap();
        assert_eq!(drain(&mut t, 1), want, "parts of {part_bytes} bytes");
        assert_eq!(
            *log.lock().unwrap(),
            expected,
            "parts of {part_bytes} bytes"
        );
    }
    // maxErrors = 1: the read fails at the call that reaches sequence 3 (the third
    // minibatch of one sequence: 0, 1, then 3, which carries two errors).
    cfg.max_errors = 1;
    let calls = |mut next: Box<dyn FnMut() -> Result<bool, String>>| {
        let mut ok = 0;
        loop {
            match next() {
                Ok(true) => ok += 1,
                Ok(false) => return (ok, None),
                Err(e) => return (ok, Some(e)),
            }
        }
    };
    let mut r = ReferenceSource::<f32>::new(&cfg, sweeps(1), quiet()).unwrap();
    let want = calls(Box::new(move || {
        r.next_minibatch(1)
            .map(|m| m.is_some())
            .map_err(|e| e.to_string())
    }));
    assert_eq!(want.0, 2);
    assert!(
        want.1
            .as_deref()
            .is_some_and(|e| e.contains("notes.ctf:4:")),
        "{want:?}"
    );
    for part_bytes in [1, 1 << 20] {
        let mut t = engine(&cfg, sweeps(1), 2, 2, 2, part_bytes);
        let got = calls(Box::new(move || {
            t.next_minibatch(1)
                .map(|m| m.is_some())
                .map_err(|e| e.to_string())
        }));
        assert_eq!(got, want, "parts of {part_bytes} bytes");
    }
}

/// The first minibatch after a start reads the sequences whose parts are not loaded yet
/// itself (counted as quick bytes), but at most 4 MiB of text: a first minibatch of the
/// whole corpus waits for the parts instead. The minibatches are the reference's either way.
/// The loaders' reads (parts of 64 KiB) are slowed down by the fault hook, so that the parts
/// are not loaded before the packer would read the whole minibatch itself.
#[test]
fn the_first_minibatch_reads_at_most_4_mib_itself() {
    use ctf_reader::chunks::fault::set_read_fault;
    let dir = tempfile::tempdir().unwrap();
    // About 10 MB of text.
    let file = write_corpus(dir.path(), 120_000);
    let file_bytes = std::fs::metadata(&file).unwrap().len();
    assert!(file_bytes > 8 << 20, "{file_bytes}");
    let mut cfg = config(&file);
    cfg.chunk_size_in_bytes = 1 << 20;
    cfg.randomization_window = None;
    for size in [u64::MAX / 2, 64] {
        let want = reference(&cfg, sweeps(1), size);
        set_read_fault(
            Path::new(&file),
            Some(std::sync::Arc::new(|_, len| {
                if len > 4096 {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Ok(())
            })),
        );
        // Without parsing while indexing, which would have every part ready at the start.
        let options = two_of_each(64 << 10, None, false);
        let mut t = MinibatchSource::with_options(&cfg, sweeps(1), quiet(), options).unwrap();
        let got = drain(&mut t, size);
        set_read_fault(Path::new(&file), None);
        assert_eq!(got, want, "minibatches of {size}");
        let counters = t.counters();
        assert!(counters.quick_bytes_read <= 4 << 20, "{counters:?}");
        assert!(counters.quick_bytes_read > 0, "{counters:?}");
        assert_eq!(counters.bytes_read, file_bytes, "{counters:?}");
    }
}

/// Writes the same corpus twice: as one id-mode file `merged.ctf` holding inputs `x`, `y`
/// and `z`, and as three files holding one input each, `y`'s sequences in another order and
/// `z`'s in the same order (so a joined file is read both ways: sequence by sequence, and in
/// one run). Every line of the merged file holds at least one input, so each merged
/// sequence has as many lines as its longest input, which is what a joined sequence counts.
fn write_split_corpus(dir: &Path, sequences: u64) -> [String; 4] {
    let (mut merged, mut xs) = (String::new(), String::new());
    let mut ys = vec![String::new(); sequences as usize];
    let mut zs = vec![String::new(); sequences as usize];
    for id in 0..sequences {
        let (len_x, len_y, len_z) = (1 + id % 4, 1 + (id * 7) % 3, 1 + (id * 5) % 5);
        for t in 0..len_x.max(len_y).max(len_z) {
            merged.push_str(&id.to_string());
            if t < len_x {
                let x = format!(" |x {id} {t}");
                merged.push_str(&x);
                xs.push_str(&format!("{id}{x}\n"));
            }
            if t < len_y {
                let y = format!(" |y {}:{}.5", (id + t) % 7, t);
                merged.push_str(&y);
                ys[id as usize].push_str(&format!("{id}{y}\n"));
            }
            if t < len_z {
                let z = format!(" |z {}.25", id * 10 + t);
                merged.push_str(&z);
                zs[id as usize].push_str(&format!("{id}{z}\n"));
            }
            merged.push('\n');
        }
    }
    // y: a permutation (37 is coprime with the counts used); z: the same order.
    let n = sequences as usize;
    let y_text: String = (0..n).map(|i| ys[(i * 37) % n].as_str()).collect();
    let z_text: String = zs.concat();
    let mut paths = Vec::new();
    for (name, text) in [("merged", merged), ("x", xs), ("y", y_text), ("z", z_text)] {
        let path = dir.join(format!("{name}.ctf"));
        std::fs::write(&path, text).unwrap();
        paths.push(path.to_string_lossy().into_owned());
    }
    paths.try_into().unwrap()
}

/// A composite reader of three deserializers (keys in two orders) gives the minibatches of
/// the one file holding every input: randomized with one sequence per chunk in both (so
/// their timelines match), or in file order with parts of many sequences, with `definesMBSize` in the first or a joined deserializer, in
/// the reference engine and the threaded one at several thread counts and prefetch depths,
/// across restores.
#[test]
fn a_composite_reader_gives_the_minibatches_of_the_merged_file() {
    let dir = tempfile::tempdir().unwrap();
    let [merged, x, y, z] = write_split_corpus(dir.path(), 120);
    for randomize in [true, false] {
        for defining in [None, Some("x"), Some("y")] {
            let input = |name: &str, i: InputConfig| match defining {
                Some(d) if d == name => i.defining_mb_size(),
                _ => i,
            };
            let single = ReaderConfig::builder()
                .file(&merged)
                .input(input("x", InputConfig::dense("x", 2)))
                .input(input("y", InputConfig::sparse("y", 7)))
                .input(InputConfig::dense("z", 1))
                .chunk_size_in_bytes(0)
                .randomization_window(3)
                .randomize(randomize)
                .trace_level(0)
                .build()
                .unwrap();
            // In file order the chunks do not shape the timeline: parts of many sequences.
            let primary_chunks = if randomize { 0 } else { 700 };
            let composite = ReaderConfig::builder()
                .file(&x)
                .input(input("x", InputConfig::dense("x", 2)))
                .chunk_size_in_bytes(primary_chunks)
                .then_deserializer()
                .file(&y)
                .input(input("y", InputConfig::sparse("y", 7)))
                .chunk_size_in_bytes(40)
                .then_deserializer()
                .file(&z)
                .input(InputConfig::dense("z", 1))
                .randomization_window(3)
                .randomize(randomize)
                .trace_level(0)
                .build()
                .unwrap();
            let want = reference(&single, sweeps(2), 9);
            assert!(want.len() > 20);
            let what = format!("randomize {randomize}, definesMBSize {defining:?}");
            assert!(
                reference(&composite, sweeps(2), 9) == want,
                "reference engine, {what}"
            );
            for (loaders, packers, prefetch) in [(1, 1, 1), (2, 2, 2), (4, 3, 5)] {
                let got = drain(
                    &mut threaded(&composite, sweeps(2), loaders, packers, prefetch),
                    9,
                );
                assert!(got == want, "{loaders} loaders, {packers} packers, {what}");
            }
            // A restore mid-sweep continues exactly as the uninterrupted read.
            let mut source = threaded(&composite, sweeps(2), 2, 2, 2);
            let head = drain_n(&mut source, 9, 11);
            let token = source.checkpoint();
            drop(source);
            let mut restored = threaded(&composite, sweeps(2), 3, 1, 2);
            restored.restore(&token).unwrap();
            let tail = drain(&mut restored, 9);
            assert!(
                head.into_iter().chain(tail).collect::<Vec<_>>() == want,
                "restored, {what}"
            );
        }
    }
}

fn drain_n(s: &mut MinibatchSource<f32>, size: u64, n: usize) -> Vec<Minibatch<f32>> {
    (0..n)
        .map(|_| s.next_minibatch(size).unwrap().unwrap().into_inner())
        .collect()
}

#[test]
fn a_packer_takes_each_part_from_the_cache_once_per_batch_of_minibatches() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 400);
    let mut cfg = config(&file);
    // One chunk of one part, read in file order: every minibatch draws from that part.
    cfg.chunk_size_in_bytes = 1 << 20;
    cfg.randomize = false;
    let want = reference(&cfg, sweeps(1), 1);
    let mut t = threaded(&cfg, sweeps(1), 1, 1, 2);
    let got = drain(&mut t, 1);
    assert_eq!(got, want);
    let counters = t.counters();
    let takes = counters.cache_hits + counters.cache_misses;
    // Batches hold up to 32 minibatches (the first one): a take per batch, not per minibatch.
    assert!(
        takes * 8 <= counters.minibatches,
        "{takes} takes for {} minibatches",
        counters.minibatches
    );
}

/// A corpus of about 1.2 MB in id mode (`ids`) or line mode, with what the parse while
/// indexing must leave to the loaders: invalid sequences, a repeated id, comment and blank
/// lines, runs without a configured input.
fn write_varied_corpus(dir: &Path, ids: bool) -> String {
    let mut text = String::new();
    // Errors in two places only: a part with one is scanned, not parsed.
    for n in 0..if ids { 24_000 } else { 72_000u64 } {
        let id = match n {
            9_001 => 17, // a repeat of an earlier id
            _ => n,
        };
        let prefix = if ids { format!("{id} ") } else { String::new() };
        match (n, n % 997) {
            (500 | 23_500, _) => text.push_str(&format!("{prefix}|x oops 1 |y 0:1\n")),
            (_, 14) => text.push_str(&format!("{prefix}|z 5\n")),
            (_, 15) => text.push_str("|# a comment line\n\n"),
            _ => {
                for t in 0..1 + n % 4 * u64::from(ids) {
                    text.push_str(&format!(
                        "{prefix}|x {n} {t} |y {}:{}\n",
                        (n + t) % 7,
                        t + 1
                    ));
                }
            }
        }
    }
    let path = dir.join(if ids { "ids.ctf" } else { "lines.ctf" });
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// On a cold start with a window covering the corpus (or, in file order, a corpus of at most
/// two chunks), the index build parses the parts it scans, and the loaders take the sequences
/// it kept instead of parsing them again: the minibatches and the diagnostics are the
/// reference's at any thread count. A corpus of more chunks read in file order is only
/// scanned.
#[test]
fn parts_parsed_while_indexing_give_the_reference_minibatches() {
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    // (ids, randomize, chunk size, fewest parts parsed while indexing with 2 or more
    // loaders). Randomized:
    // chunks smaller than the scan's parts (what a part parsed holds of each chunk is a part
    // of its own), and 128 of them in the window, the whole corpus. In file order: two
    // chunks of 1 MiB hold the corpus, chunks of 64 KiB do not.
    let cases = [
        (true, true, 64 << 10, 7),
        (false, true, 64 << 10, 7),
        (true, false, 1 << 20, 3),
        (false, false, 1 << 20, 3),
        (true, false, 64 << 10, 0),
    ];
    for (ids, randomize, chunk_size, fewest_stashed) in cases {
        let file = write_varied_corpus(dir.path(), ids);
        let mut cfg = config(&file);
        cfg.randomize = randomize;
        cfg.chunk_size_in_bytes = chunk_size;
        cfg.randomization_window = None;
        cfg.max_errors = 1000;
        cfg.trace_level = 1;
        type Log = Arc<Mutex<Vec<(u64, String)>>>;
        let logging = |log: &Log| -> DiagnosticSink {
            let log = Arc::clone(log);
            Box::new(move |_, d| log.lock().unwrap().push((d.line, d.message.clone())))
        };
        let reference_log: Log = Arc::default();
        let mut r = ReferenceSource::<f32>::new(&cfg, sweeps(2), logging(&reference_log)).unwrap();
        let want: Vec<_> =
            std::iter::from_fn(|| r.next_minibatch(64).unwrap().map(|m| m.into_inner())).collect();
        let reported = reference_log.lock().unwrap().clone();
        assert!(reported.len() >= 2, "{} diagnostics", reported.len());
        for loaders in [1, 2, 3] {
            let log: Log = Arc::default();
            let options = PipelineOptions {
                loader_threads: loaders,
                packer_threads: 2,
                prefetch: 2,
                part_bytes: 64 << 10,
                memory_budget: None,
                parse_while_indexing: true,
                pin_packers: false,
            };
            let mut t =
                MinibatchSource::with_options(&cfg, sweeps(2), logging(&log), options).unwrap();
            let context = format!("ids {ids}, randomize {randomize}, {loaders} loaders");
            assert_eq!(drain(&mut t, 64), want, "{context}");
            assert_eq!(*log.lock().unwrap(), reported, "{context}");
            let counters = t.counters();
            if loaders > 1 && fewest_stashed > 0 {
                assert!(
                    counters.parts_parsed_while_indexing >= fewest_stashed,
                    "{context}: {counters:?}"
                );
            } else {
                assert_eq!(counters.parts_parsed_while_indexing, 0, "{context}");
            }
        }
    }
}

/// A part whose sequences the first minibatch holds all is read by its packer alone, and
/// need not be read whole before the run ends: `bytes_read` then falls short of the file, and
/// only with `quick_bytes_read` does it cover every byte. Here the first minibatch is the
/// whole sweep and the loaders' reads wait until the counters are taken, so the packer reads
/// every sequence itself. (`ctf read --stats` once asserted `bytes_read` alone covers the
/// file, which failed when a small part was read this way.)
#[test]
fn a_part_the_first_minibatch_holds_whole_is_read_by_its_packer_alone() {
    use ctf_reader::chunks::fault::set_read_fault;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 60);
    let file_bytes = std::fs::metadata(&file).unwrap().len();
    let mut cfg = config(&file);
    cfg.randomization_window = None;
    let size = 1 << 20;
    let want = reference(&cfg, sweeps(1), size);
    assert_eq!(want.len(), 1, "one minibatch holds the sweep");
    let loads_may_read = Arc::new(AtomicBool::new(false));
    let gate = Arc::clone(&loads_may_read);
    set_read_fault(
        Path::new(&file),
        Some(Arc::new(move |_, _| {
            if std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("ctf-loader"))
            {
                while !gate.load(Ordering::Acquire) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            Ok(())
        })),
    );
    let options = two_of_each(1 << 20, None, false);
    let mut t = MinibatchSource::with_options(&cfg, sweeps(1), quiet(), options).unwrap();
    let got = drain(&mut t, size);
    let counters = t.counters();
    loads_may_read.store(true, Ordering::Release);
    drop(t);
    set_read_fault(Path::new(&file), None);
    assert_eq!(got, want);
    assert_eq!(counters.quick_bytes_read, file_bytes, "{counters:?}");
    assert!(counters.bytes_read < file_bytes, "{counters:?}");
}

/// The fields of a configuration are public: one changed after it was built into what its
/// builder refuses (a rank not below the workers, 0 workers) is refused by both engines,
/// rather than read as empty minibatches or as one worker.
#[test]
fn a_configuration_changed_after_it_was_built_is_checked_again() {
    let dir = tempfile::tempdir().unwrap();
    let good = in_order_with_a_bad_sequence(dir.path(), 100);
    for (rank, workers, expected) in [(5, 2, "must be below"), (0, 0, "at least 1")] {
        let mut cfg = good.clone();
        cfg.partition_index = rank;
        cfg.num_data_partitions = workers;
        let messages = [
            ReferenceSource::<f32>::new(&cfg, sweeps(1), quiet()).map(|_| ()),
            MinibatchSource::<f32>::new(&cfg, sweeps(1), quiet()).map(|_| ()),
        ]
        .map(|made| match made {
            Err(SourceError::Usage(message)) => message,
            other => panic!("{rank} of {workers}: {other:?}"),
        });
        for message in messages {
            assert!(
                message.starts_with("invalid configuration: ") && message.contains(expected),
                "{message}"
            );
        }
    }
}
