//! Fault injection (README "Reliability"): read errors injected into the chunk source through
//! its test hook (`ctf_reader::chunks::fault`), data files truncated, extended or replaced
//! while the threaded engine reads them, an index cache on a full disk, and consumers that
//! stop early or hold every minibatch. Each fault must end in a clear error naming the file,
//! after exactly the minibatches an undisturbed run gives first; never a hang, a panic,
//! garbage values or unbounded read-ahead.
//!
//! Files changed under the loader itself (`ChunkLoader`) are covered by `tests/index.rs`; a
//! read-only directory and a directory or FIFO in place of the index cache by
//! `tests/index_cache.rs`.

#[allow(dead_code)]
mod cli_support;
mod engine_support;

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cli_support::s;
use ctf_reader::chunks::fault::set_read_fault;
use ctf_reader::minibatch::Minibatch;
use ctf_reader::source::{MinibatchSource, ReadLimits, ReferenceSource, SourceError};
use ctf_reader::{InputConfig, ReaderConfig};
use engine_support::{engine, sweeps, within};

/// `sequences` sequences of 1–4 lines, keys 0.. in file order; x holds the key and the line
/// number within the sequence, so a value from the wrong place would show.
fn write_corpus(dir: &Path, name: &str, sequences: u64) -> String {
    let mut text = String::new();
    for id in 0..sequences {
        for t in 0..1 + id % 4 {
            text.push_str(&format!("{id} |x {id} {t} |y {}:1\n", (id + t) % 5));
        }
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn config(file: &str, randomize: bool) -> ReaderConfig {
    ReaderConfig::builder()
        .file(file)
        .input(InputConfig::dense("x", 2))
        .input(InputConfig::sparse("y", 5))
        .chunk_size_in_bytes(400)
        .randomize(randomize)
        .randomization_window(3)
        .trace_level(0)
        .build()
        .unwrap()
}

fn source(cfg: &ReaderConfig, limits: ReadLimits, loaders: usize) -> MinibatchSource<f32> {
    engine(cfg, limits, loaders, loaders, 2, 1 << 20)
}

/// Reads until the end or the first error: the minibatches before it, and the error.
fn until_error(
    s: &mut MinibatchSource<f32>,
    size: u64,
) -> (Vec<Minibatch<f32>>, Option<SourceError>) {
    let mut got = Vec::new();
    loop {
        match s.next_minibatch(size) {
            Ok(Some(mb)) => got.push(mb.into_inner()),
            Ok(None) => return (got, None),
            Err(e) => return (got, Some(e)),
        }
    }
}

/// The minibatches of an undisturbed run.
fn undisturbed(cfg: &ReaderConfig, limits: ReadLimits, size: u64) -> Vec<Minibatch<f32>> {
    let (got, error) = until_error(&mut source(cfg, limits, 2), size);
    assert!(error.is_none(), "{error:?}");
    got
}

/// A read error injected at one chunk reaches the consumer in order, names the file and the
/// error, and everything delivered before it is the undisturbed run's data; the source keeps
/// failing afterwards instead of skipping the chunk silently. At 1 to 4 loaders.
#[test]
fn an_injected_read_error_is_reported_after_the_data_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), "faulty.ctf", 400);
    for randomize in [false, true] {
        let cfg = config(&file, randomize);
        let expected = undisturbed(&cfg, sweeps(2), 16);
        // Fail every read that covers byte 6000 (a chunk in the middle of the file).
        let calls = Arc::new(AtomicU64::new(0));
        let seen = Arc::clone(&calls);
        set_read_fault(
            Path::new(&file),
            Some(Arc::new(move |offset, len| {
                seen.fetch_add(1, Ordering::Relaxed);
                if offset <= 6000 && 6000 < offset + len as u64 {
                    Err(io::Error::other("injected: device unreachable"))
                } else {
                    Ok(())
                }
            })),
        );
        for loaders in 1..=4 {
            let cfg = cfg.clone();
            let (got, error) = within(60, "injected read error", move || {
                let mut s = source(&cfg, sweeps(2), loaders);
                let (got, error) = until_error(&mut s, 16);
                // Later calls fail too (the data is not silently skipped).
                let again = s.next_minibatch(16);
                assert!(again.is_err(), "a call after the error: {again:?}");
                (got, error)
            });
            let error = error.expect("the read error reaches the consumer");
            let message = error.to_string();
            assert!(
                matches!(error, SourceError::Load(_))
                    && message.contains("faulty.ctf")
                    && message.contains("cannot read")
                    && message.contains("injected: device unreachable"),
                "{message}"
            );
            assert!(got.len() < expected.len(), "{loaders} loaders");
            assert_eq!(got[..], expected[..got.len()], "{loaders} loaders");
        }
        assert!(calls.load(Ordering::Relaxed) > 0, "the hook was not called");
        // Recovery: once the device is back, a restore to the last checkpoint continues
        // exactly where the data stopped: nothing is lost or repeated.
        let mut s = source(&cfg, sweeps(2), 2);
        let (mut got, error) = until_error(&mut s, 16);
        assert!(error.is_some());
        set_read_fault(Path::new(&file), None);
        s.restore(&s.checkpoint()).unwrap();
        let (rest, error) = until_error(&mut s, 16);
        assert!(error.is_none(), "{error:?}");
        got.extend(rest);
        assert_eq!(
            got, expected,
            "randomize {randomize}: data lost or repeated"
        );
    }
    // Without the hook the file reads again.
    let cfg = config(&file, true);
    assert_eq!(undisturbed(&cfg, sweeps(1), 16).len(), {
        let (got, e) = until_error(&mut source(&cfg, sweeps(1), 3), 16);
        assert!(e.is_none());
        got.len()
    });
}

/// A loader thread that panics (here in the read hook, standing for a bug in the parse) is
/// an internal error naming the file, `SourceError::Load(LoadError::Panicked)`, which the C
/// ABI reports as `CTF_STATUS_PANIC`; it was reported as an I/O error ("cannot read"), and a
/// planner's or packer's panic as a usage error.
#[test]
fn a_loader_thread_that_panics_is_an_internal_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), "panicky.ctf", 400);
    let cfg = config(&file, true);
    set_read_fault(
        Path::new(&file),
        Some(Arc::new(|offset, len| {
            if offset <= 6000 && 6000 < offset + len as u64 {
                panic!("injected: a bug in a loader");
            }
            Ok(())
        })),
    );
    let error = within(60, "a panicking loader", move || {
        let mut s = source(&cfg, sweeps(1), 2);
        until_error(&mut s, 16).1
    });
    set_read_fault(Path::new(&file), None);
    let error = error.expect("the panic reaches the consumer as an error");
    let message = error.to_string();
    assert!(
        matches!(
            error,
            SourceError::Load(ctf_reader::chunks::LoadError::Panicked { .. })
        ) && message.contains("panicky.ctf")
            && message.contains("internal error (a bug in ctf-reader)"),
        "{message}"
    );
}

/// A transient read error (the first read past byte 2000 fails, a second read would
/// succeed) never loses or corrupts data: the run either reports it in order (and then a
/// restore to the last checkpoint reads on) or, when the failed load was evicted from the
/// chunk cache before the packer reached it, reads the chunk again. Either way the consumer
/// ends with exactly the undisturbed run's minibatches. At 1 and 3 loaders.
#[test]
fn a_transient_read_error_loses_nothing_at_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), "flaky.ctf", 200);
    for randomize in [false, true] {
        let cfg = config(&file, randomize);
        let expected = undisturbed(&cfg, sweeps(2), 8);
        for loaders in [1, 3] {
            let failed = Arc::new(AtomicU64::new(0));
            let once = Arc::clone(&failed);
            set_read_fault(
                Path::new(&file),
                Some(Arc::new(move |offset, _| {
                    if offset > 2000 && once.fetch_add(1, Ordering::Relaxed) == 0 {
                        Err(io::Error::other("injected: transient EIO"))
                    } else {
                        Ok(())
                    }
                })),
            );
            let cfg2 = cfg.clone();
            let (got, errors) = within(60, "transient error", move || {
                let mut s = source(&cfg2, sweeps(2), loaders);
                let mut got = Vec::new();
                let mut errors = Vec::new();
                loop {
                    match s.next_minibatch(8) {
                        Ok(Some(mb)) => got.push(mb.into_inner()),
                        Ok(None) => break,
                        Err(e) => {
                            errors.push(e.to_string());
                            assert!(errors.len() < 3, "{errors:?}");
                            s.restore(&s.checkpoint()).unwrap();
                        }
                    }
                }
                (got, errors)
            });
            assert!(
                failed.load(Ordering::Relaxed) >= 1,
                "the hook was not called"
            );
            for e in &errors {
                assert!(
                    e.contains("flaky.ctf") && e.contains("transient EIO"),
                    "{e}"
                );
            }
            assert_eq!(
                got, expected,
                "{loaders} loaders, randomize {randomize}: {errors:?}"
            );
            set_read_fault(Path::new(&file), None);
        }
    }
}

/// Truncating, extending or replacing the data file while the threaded engine reads it (over
/// three sweeps, with a window smaller than the corpus so chunks are read again) ends in
/// "data file changed since it was indexed" naming the file; every minibatch before the error
/// is the undisturbed run's.
#[test]
fn a_file_changed_mid_read_is_an_error_never_garbage() {
    type Change = fn(&Path);
    let changes: [(&str, Change); 4] = [
        ("truncated", |p| {
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            let len = f.metadata().unwrap().len();
            f.set_len(len / 2).unwrap();
        }),
        ("extended", |p| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
            f.write_all(b"99999 |x 1 2 |y 0:1\n").unwrap();
        }),
        ("replaced by rename", |p| {
            let text = std::fs::read(p).unwrap();
            let other = p.with_extension("new");
            std::fs::write(&other, text).unwrap();
            std::fs::rename(&other, p).unwrap();
        }),
        ("rewritten in place, same size", |p| {
            let mut text = std::fs::read(p).unwrap();
            // Swap two digits of a value in the last line: same length, other values.
            let at = text.len() - 12;
            text.swap(at, at + 1);
            std::thread::sleep(Duration::from_millis(20));
            std::fs::write(p, text).unwrap();
        }),
    ];
    for (what, change) in changes {
        let dir = tempfile::tempdir().unwrap();
        let file = write_corpus(dir.path(), "live.ctf", 600);
        let cfg = config(&file, true);
        let expected = undisturbed(&cfg, sweeps(3), 16);
        let path = file.clone();
        let (got, error) = within(60, what, move || {
            let mut s = source(&cfg, sweeps(3), 2);
            let first = s.next_minibatch(16).unwrap().unwrap().into_inner();
            change(Path::new(&path));
            let (mut rest, error) = until_error(&mut s, 16);
            rest.insert(0, first);
            (rest, error)
        });
        let message = error
            .unwrap_or_else(|| panic!("{what}: the change went unnoticed"))
            .to_string();
        assert!(
            message.contains("live.ctf")
                && message.contains("data file changed since it was indexed"),
            "{what}: {message}"
        );
        assert!(got.len() < expected.len(), "{what}");
        assert_eq!(got[..], expected[..got.len()], "{what}");
    }
}

/// A consumer that stops calling stops the pipeline: after one minibatch of a 240-chunk
/// corpus, the engine loads a bounded number of chunks (window and look-ahead), then nothing
/// more while the consumer waits; dropping the source then returns at once.
/// The streaming reader of `ctf dump` and `ctf validate` (`SequenceReader`) fails on a file
/// truncated or appended to while it reads, after the complete sequences before the change:
/// it used to end the file early with exit 0, delivering a line cut short by the
/// truncation as a sequence (a value `123` read as `12`, the rest padded with zeros).
#[test]
fn the_streaming_reader_fails_on_a_file_changed_while_it_reads() {
    use ctf_reader::reader::{ErrorPolicy, SequenceReader};
    // About 12 MB: the reader reads 4 MiB at a time.
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), "d.ctf", 200_000);
    let text = std::fs::read(&file).unwrap();
    let cfg = config(&file, false);
    for truncate in [true, false] {
        std::fs::write(&file, &text).unwrap();
        let mut reader = SequenceReader::<f32>::new(&cfg, ErrorPolicy::Budget, Box::new(|_, _| {}));
        let mut keys = Vec::new();
        let mut changed = false;
        loop {
            match reader.next_batch() {
                Ok(Some(batch)) => {
                    for seq in &batch.sequences {
                        // Each sequence whole: key k has 1 + k % 4 lines.
                        assert_eq!(u64::from(seq.counted_lines), 1 + seq.key % 4, "{}", seq.key);
                        keys.push(seq.key);
                    }
                    if !changed {
                        changed = true;
                        let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
                        if truncate {
                            // Inside a line, past the first block.
                            f.set_len(6_000_003).unwrap();
                        } else {
                            use std::io::{Seek, Write};
                            let mut f = f;
                            f.seek(io::SeekFrom::End(0)).unwrap();
                            f.write_all(b"999999 |x 1 2 |y 3:1\n").unwrap();
                        }
                    }
                }
                Ok(None) => panic!("the read ended without an error (truncate: {truncate})"),
                Err(e) => {
                    let message = e.to_string();
                    assert!(message.starts_with(&format!("{file}: error: the file changed while it was read: it held {} bytes when opened", text.len())), "{message}");
                    assert!(
                        message.ends_with(if truncate {
                            "ended after 6000003"
                        } else {
                            "has more now"
                        }),
                        "{message}"
                    );
                    break;
                }
            }
        }
        // File order, from 0, none skipped; the truncated read stops before the cut.
        assert!(keys.iter().enumerate().all(|(i, &k)| i as u64 == k));
        if truncate {
            // Every sequence delivered ends before the cut.
            let next = format!("\n{} |", keys.len());
            let end = text
                .windows(next.len())
                .position(|w| w == next.as_bytes())
                .unwrap();
            assert!(end < 6_000_003, "{} sequences, ending at {end}", keys.len());
        }
        assert!(reader.next_batch().unwrap().is_none());
    }
}

/// Under `ReportAll` (`ctf validate`), a file-level error inside a file (here a line longer
/// than the limit, in the middle of a three-line sequence) is reported once, after the
/// errors of the lines before it; the sequences completed before it are delivered, the
/// sequence it cuts is neither delivered nor counted, and the next file is read whole.
#[test]
fn the_streaming_reader_reports_a_fatal_error_of_a_file_and_reads_the_next() {
    use ctf_reader::reader::{ErrorPolicy, SequenceReader};
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.ctf");
    let long = format!("7 |x 1 {} |y 1:1\n", "2".repeat(200));
    let text = format!(
        "5 |x 1 2 |y 0:1\n6 |x 1 q |y 0:1\n7 |x 1 2 |y 2:1\n{long}7 |x 3 4 |y 3:1\n8 |x 5 6 |y 4:1\n"
    );
    std::fs::write(&first, text).unwrap();
    let second = write_corpus(dir.path(), "second.ctf", 3);
    let first = first.to_string_lossy().into_owned();
    let cfg = ReaderConfig::builder()
        .file(&first)
        .file(&second)
        .input(InputConfig::dense("x", 2))
        .input(InputConfig::sparse("y", 5))
        .trace_level(0)
        .build()
        .unwrap();
    let reported = Arc::new(Mutex::new(Vec::new()));
    let sink_target = Arc::clone(&reported);
    let sink = Box::new(move |file: &str, d: &ctf_reader::Diagnostic| {
        sink_target
            .lock()
            .unwrap()
            .push((file.to_string(), d.line, d.message.clone()));
    });
    let mut reader = SequenceReader::<f32>::new(&cfg, ErrorPolicy::ReportAll, sink);
    reader.limit_line_bytes(100);
    let mut keys = Vec::new();
    while let Some(batch) = reader.next_batch().unwrap() {
        keys.extend(batch.sequences.iter().map(|s| s.key));
    }
    // Sequence 7 is cut by the long line; 8 comes after it in the file given up.
    assert_eq!(keys, [5, 0, 1, 2]);
    let reported = reported.lock().unwrap().clone();
    let at: Vec<(&str, u64)> = reported.iter().map(|(f, l, _)| (f.as_str(), *l)).collect();
    assert_eq!(
        at,
        [(first.as_str(), 2), (first.as_str(), 4)],
        "{reported:?}"
    );
    assert!(reported[1].2.contains("100"), "{reported:?}");
    let counts = reader.counts();
    assert_eq!(
        (counts.sequences, counts.invalid_sequences, counts.errors),
        (4, 1, 2)
    );
    assert_eq!(reader.file_errors().len(), 1);
}

#[test]
fn a_paused_consumer_means_back_pressure() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), "big.ctf", 4000);
    let cfg = config(&file, true);
    let chunks =
        ctf_reader::source::ReferenceSource::<f32>::new(&cfg, sweeps(1), Box::new(|_, _| {}))
            .unwrap()
            .index()
            .chunks
            .len() as u64;
    assert!(chunks > 200, "{chunks} chunks");
    within(60, "paused consumer", move || {
        let mut s = source(&cfg, ReadLimits::default(), 2);
        // Hold the minibatches, as a slow trainer would.
        let held: Vec<_> = (0..3)
            .map(|_| s.next_minibatch(4).unwrap().unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let settled = s.counters();
        std::thread::sleep(Duration::from_millis(300));
        let later = s.counters();
        assert_eq!(
            (settled.chunks_loaded, settled.bytes_read),
            (later.chunks_loaded, later.bytes_read),
            "the engine kept reading while the consumer waited"
        );
        assert!(
            later.chunks_loaded <= 20,
            "{} of {chunks} chunks loaded ahead of a consumer at its third minibatch",
            later.chunks_loaded
        );
        let start = Instant::now();
        drop(s);
        drop(held);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    });
}

/// A consumer holding every minibatch of three sweeps (the pool can recycle none) still gets
/// them all, equal to a consumer that drops each at once: an empty pool allocates instead of
/// blocking, and the engine stays `prefetch` minibatches ahead.
#[test]
fn a_consumer_holding_every_minibatch_gets_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), "held.ctf", 500);
    let cfg = config(&file, true);
    let expected = undisturbed(&cfg, sweeps(3), 8);
    let held = within(60, "holding every minibatch", move || {
        let mut s = source(&cfg, sweeps(3), 2);
        let mut held = Vec::new();
        while let Some(mb) = s.next_minibatch(8).unwrap() {
            held.push(mb);
        }
        held
    });
    let held: Vec<Minibatch<f32>> = held.into_iter().map(|m| m.into_inner()).collect();
    assert_eq!(held, expected);
}

/// Writes `text` as `name` in `dir` and runs `ctf ARGS` with file writes limited to
/// `limit_kib` KiB (`ulimit -f`, with SIGXFSZ ignored, so a write past the limit fails with
/// EFBIG as on a full disk).
fn ctf_with_full_disk(args: &[&str], limit_kib: u64) -> cli_support::Run {
    let setup = format!("trap '' XFSZ; ulimit -f {limit_kib}");
    cli_support::run_after_shell(&setup, args, None)
}

/// An index cache that cannot be written (the disk is full) is a warning: `ctf read` still
/// reads every sequence, `ctf index` reports it and writes no cache, and no partial cache or
/// temporary file is left behind for a later run to trust.
#[test]
fn a_full_disk_for_the_index_cache_is_a_warning_and_leaves_no_partial_cache() {
    let dir = tempfile::tempdir().unwrap();
    // About 1 MB of data: its cache (24 bytes per sequence) is far above the 4 KiB limit.
    let file = write_corpus(dir.path(), "full.ctf", 40_000);
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let config_text = format!(
        "reader = [ file = \"{file}\" ; cacheIndex = true ; randomize = false\n input = [ x = [ dim = 2 ; format = \"dense\" ] ; y = [ dim = 5 ; format = \"sparse\" ] ] ]\n"
    );
    let cfg_path = dir.path().join("r.cntk");
    std::fs::write(&cfg_path, config_text).unwrap();
    let cfg_arg = cfg_path.to_string_lossy().into_owned();

    let r = ctf_with_full_disk(&["read", &cfg_arg, "--jsonl", "--mb-size", "100000"], 4);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("warning"), "{}", r.stderr);
    let sequences: usize = cli_support::json_lines(&r.stdout)
        .iter()
        .map(|j| j.at("sequences").arr().len())
        .sum();
    assert_eq!(sequences, 40_000);
    assert_eq!(listing(), ["full.ctf", "r.cntk"], "{}", r.stderr);

    // README: for `ctf index` too, a cache that cannot be written is a warning naming it.
    let r = ctf_with_full_disk(&["index", &cfg_arg], 4);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(cli_support::summary_n(&r.stdout, "caches written"), 0);
    assert!(
        r.stderr.contains("full.ctf.") && r.stderr.contains("cannot write the index cache"),
        "{}",
        r.stderr
    );
    assert_eq!(listing(), ["full.ctf", "r.cntk"], "{}", r.stderr);

    // With room, the same command writes the cache (so the limit above was what failed).
    let r = cli_support::run(&["index", s(&cfg_path)], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        listing().iter().any(|n| n.ends_with(".ctfidx")),
        "{:?}",
        listing()
    );
}

/// The reference engine behaves like the threaded one after a read error: later calls fail,
/// its checkpoint stays after the last minibatch handed out, and a restore once the device is
/// back reads on with nothing skipped (it used to skip the failed minibatch).
#[test]
fn the_reference_engine_skips_nothing_after_a_read_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), "reference.ctf", 300);
    let cfg = config(&file, false);
    let expected = undisturbed(&cfg, sweeps(1), 10);
    set_read_fault(
        Path::new(&file),
        Some(Arc::new(|offset, _| {
            if offset > 3000 {
                Err(io::Error::other("injected: gone"))
            } else {
                Ok(())
            }
        })),
    );
    let mut s = ReferenceSource::<f32>::new(&cfg, sweeps(1), Box::new(|_, _| {})).unwrap();
    let mut got = Vec::new();
    let error = loop {
        match s.next_minibatch(10) {
            Ok(Some(mb)) => got.push(mb.into_inner()),
            Ok(None) => panic!("the injected error never came"),
            Err(e) => break e.to_string(),
        }
    };
    assert!(
        error.contains("reference.ctf") && error.contains("injected: gone"),
        "{error}"
    );
    let again = s.next_minibatch(10).map(|m| m.is_some());
    assert!(again.is_err(), "a call after the error: {again:?}");
    set_read_fault(Path::new(&file), None);
    let checkpoint = s.checkpoint();
    s.restore(&checkpoint).unwrap();
    while let Some(mb) = s.next_minibatch(10).unwrap() {
        got.push(mb.into_inner());
    }
    assert_eq!(got, expected, "data lost or repeated");
}

/// A composite reader whose joined file (keys in reverse order, so each sequence is its own
/// read) fails or changes mid-read: the error names the joined file and reaches the consumer
/// after exactly the undisturbed data; once reads succeed again, a restore loses and repeats
/// nothing.
#[test]
fn a_joined_file_that_fails_or_changes_is_reported_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let primary = write_corpus(dir.path(), "primary.ctf", 300);
    let joined = dir.path().join("joined.ctf");
    let text: String = (0..300u64)
        .rev()
        .map(|id| format!("{id} |z {}.5\n", id * 3))
        .collect();
    std::fs::write(&joined, text).unwrap();
    let cfg = ReaderConfig::builder()
        .file(&primary)
        .input(InputConfig::dense("x", 2))
        .input(InputConfig::sparse("y", 5))
        .chunk_size_in_bytes(400)
        .randomization_window(3)
        .trace_level(0)
        .then_deserializer()
        .file(joined.to_string_lossy())
        .input(InputConfig::dense("z", 1))
        .build()
        .unwrap();
    let expected = undisturbed(&cfg, sweeps(2), 16);

    // A read error in the joined file, then recovery by restore.
    set_read_fault(
        &joined,
        Some(Arc::new(|offset, len| {
            if offset <= 2000 && 2000 < offset + len as u64 {
                Err(io::Error::other("injected: joined file unreachable"))
            } else {
                Ok(())
            }
        })),
    );
    let mut s = source(&cfg, sweeps(2), 2);
    let (mut got, error) = until_error(&mut s, 16);
    let message = error
        .expect("the read error reaches the consumer")
        .to_string();
    assert!(
        message.contains("joined.ctf") && message.contains("injected: joined file unreachable"),
        "{message}"
    );
    assert_eq!(got[..], expected[..got.len()]);
    set_read_fault(&joined, None);
    s.restore(&s.checkpoint()).unwrap();
    let (rest, error) = until_error(&mut s, 16);
    assert!(error.is_none(), "{error:?}");
    got.extend(rest);
    assert_eq!(got, expected, "data lost or repeated");

    // The joined file rewritten in place (same size, other values) after the first
    // minibatch.
    let cfg_changed = cfg.clone();
    let path = joined.clone();
    let (got, error) = within(60, "joined file rewritten", move || {
        let mut s = source(&cfg_changed, sweeps(2), 2);
        let first = s.next_minibatch(16).unwrap().unwrap().into_inner();
        let mut text = std::fs::read(&path).unwrap();
        let at = text.len() - 4;
        text.swap(at, at - 1);
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, text).unwrap();
        let (mut rest, error) = until_error(&mut s, 16);
        rest.insert(0, first);
        (rest, error)
    });
    let message = error.expect("the change went unnoticed").to_string();
    assert!(
        message.contains("joined.ctf")
            && message.contains("data file changed since it was indexed"),
        "{message}"
    );
    assert!(got.len() < expected.len());
    assert_eq!(got[..], expected[..got.len()]);
}
