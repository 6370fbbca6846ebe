//! Hostile inputs (README "Reliability"): binary garbage, NUL bytes, control bytes quoted
//! (escaped) in messages, a 100 MB line, 10^6 inputs on one line, sparse indices past u64,
//! dimensions up to 2^31−1, 10^7 one-line sequences, 3·10^6 consecutive ids, deeply nested
//! and self-referencing configurations, flat chains of 100,000 terms, huge exponents, invalid
//! UTF-8, and every malformed case of CNTK-BEHAVIOUR §3.8. Each runs the `ctf` binary as a
//! child process under a time limit and (where `/usr/bin/time` exists) a peak-RSS limit, and
//! must give either the right data or a located error `FILE:LINE:COL: error: REASON`; never a
//! panic, a signal or a hang. Expected lines, columns and values are written out by hand.

#[allow(dead_code)]
mod cli_support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cli_support::{diags, finish, json_lines, s, summary_n, write, Diag, Rng, Run, CTF};

/// What a bounded run gave: the run, and its peak RSS in KiB where measured.
struct Bounded {
    run: Run,
    peak_kib: Option<u64>,
}

/// Runs `ctf ARGS` in a child process; fails the test if it runs longer than `seconds` or
/// (where `/usr/bin/time` measures it) peaks above `max_mib` MiB of resident memory.
fn bounded(args: &[&str], seconds: u64, max_mib: u64) -> Bounded {
    let time = Path::new("/usr/bin/time");
    let mut cmd = if time.exists() {
        let mut c = Command::new(time);
        c.args(["-f", "peak-kib=%M", CTF]);
        c
    } else {
        Command::new(CTF)
    };
    let what = format!("ctf {}", args.join(" "));
    let mut child = cmd
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drain the pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_thread = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut v).unwrap();
        v
    });
    let err_thread = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).unwrap();
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(seconds) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{what}: still running after {seconds} s (a hang?)");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = std::process::Output {
        status,
        stdout: out_thread.join().unwrap(),
        stderr: err_thread.join().unwrap(),
    };
    let mut run = finish(&what, output);
    let mut peak_kib = None;
    if let Some(at) = run.stderr.rfind("peak-kib=") {
        let kib: u64 = run.stderr[at + 9..].trim().parse().unwrap();
        run.stderr.truncate(at);
        assert!(
            kib <= max_mib * 1024,
            "{what}: peak RSS {} MiB, above the bound of {max_mib} MiB",
            kib / 1024
        );
        peak_kib = Some(kib);
    }
    // `/usr/bin/time` reports a signal as "Command terminated by signal N".
    assert!(
        !run.stderr.contains("terminated by signal"),
        "{what}: {}",
        run.stderr
    );
    Bounded { run, peak_kib }
}

fn validate(file: &Path, inputs: &[&str], seconds: u64, max_mib: u64) -> Bounded {
    let mut args = vec!["validate", "--file", s(file)];
    for i in inputs {
        args.extend(["--input", i]);
    }
    bounded(&args, seconds, max_mib)
}

fn dump(file: &Path, inputs: &[&str], seconds: u64, max_mib: u64) -> Bounded {
    let mut args = vec!["dump", "--max-errors", "1000", "--file", s(file)];
    for i in inputs {
        args.extend(["--input", i]);
    }
    bounded(&args, seconds, max_mib)
}

/// The located errors of a run, checking each names `file` and has a reason.
fn errors_of(run: &Run, file: &Path) -> Vec<Diag> {
    let errors = diags(&run.stderr, "error");
    for e in &errors {
        assert_eq!(e.file, s(file), "{e:?}");
        assert!(
            e.line >= 1 && e.col >= 1 && !e.message.trim().is_empty(),
            "{e:?}"
        );
    }
    errors
}

/// Asserts exactly one located error, at `line`:`col`, whose reason contains `reason`.
fn assert_one_error(run: &Run, file: &Path, line: u64, col: u64, reason: &str) {
    let errors = errors_of(run, file);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        errors.len() == 1
            && errors[0].line == line
            && errors[0].col == col
            && errors[0].message.contains(reason),
        "expected one error at {line}:{col} containing {reason:?}, got:\n{}",
        run.stderr
    );
}

/// 1 MiB of random bytes: exit 1 with located errors (bytes ≥ 0x80, control bytes, garbage
/// where a sample should start), bounded memory, no panic. Also with `ctf read`.
#[test]
fn binary_garbage_is_a_located_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(8);
    // Start with a configured input so the garbage is inside sequences, not only skipped.
    let mut bytes = b"|a 1 ".to_vec();
    bytes.extend((0..1 << 20).map(|_| rng.next() as u8));
    let file = write(dir.path(), "garbage.bin", &bytes);
    let b = validate(&file, &["a:3:dense", "s:10:sparse"], 60, 200);
    assert_eq!(b.run.code, 1, "{}", b.run.stderr);
    let errors = errors_of(&b.run, &file);
    assert!(!errors.is_empty(), "{}", b.run.stderr);
    // Errors come in file order.
    assert!(errors.windows(2).all(|w| w[0].line <= w[1].line));
    let r = bounded(
        &[
            "read",
            "--mb-size",
            "64",
            "--file",
            s(&file),
            "--input",
            "a:3:dense",
        ],
        60,
        200,
    );
    assert!(r.run.code == 1 || r.run.code == 0, "{}", r.run.stderr);
    if r.run.code == 1 {
        assert!(r.run.stderr.contains("garbage.bin"), "{}", r.run.stderr);
    }
}

/// A NUL byte in a value, between values and in a name: each an error at its column.
#[test]
fn nul_bytes_are_errors_at_their_column() {
    let dir = tempfile::tempdir().unwrap();
    for (text, col) in [
        // Right after a digit: the number is malformed (its column).
        (&b"1 |a 1\x002\n"[..], 6),
        // Alone between values: not a number.
        (b"1 |a 1 \x00 2\n", 8),
        (b"1 |a\x00 1 2\n", 5),
        (b"\x00 |a 1\n", 1),
    ] {
        let file = write(dir.path(), "nul.ctf", text);
        let b = validate(&file, &["a:3:dense"], 10, 100);
        assert_one_error(&b.run, &file, 1, col, "");
    }
}

/// NUL, ESC, BEL and bytes that are not UTF-8 inside malformed values: the messages quote
/// them escaped (`\0`, `\x1B`, `\x07`, `\xFF`), so stderr holds no control byte but the line
/// feeds that end its lines, and the bytes shown are the data's, not U+FFFD.
#[test]
fn control_bytes_in_a_quoted_value_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let text = b"1 |a 1\x00\x1b[31m2\n2 |s 3:\x1b]0;x\x07\n3 |a 5\xff\xfe\n";
    let file = write(dir.path(), "control.ctf", text);
    let b = validate(&file, &["a:3:dense", "s:10:sparse"], 10, 100);
    assert_eq!(b.run.code, 1, "{}", b.run.stderr);
    let raw_controls: Vec<char> = b
        .run
        .stderr
        .chars()
        .filter(|&c| c.is_control() && c != '\n')
        .collect();
    assert!(
        raw_controls.is_empty(),
        "{raw_controls:?} in {}",
        b.run.stderr
    );
    assert!(!b.run.stderr.contains('\u{fffd}'), "{}", b.run.stderr);
    let errors = errors_of(&b.run, &file);
    let located: Vec<(u64, u64, &str)> = errors
        .iter()
        .map(|e| (e.line, e.col, e.message.as_str()))
        .collect();
    assert_eq!(
        located,
        [
            (
                1,
                6,
                "input 'a': malformed number '1\\0\\x1B[31m2': unexpected character after \
                 the number"
            ),
            (
                2,
                6,
                "input 's': malformed sparse entry '3:\\x1B]0;x\\x07': not a number"
            ),
            (
                3,
                6,
                "input 'a': malformed number '5\\xFF\\xFE': unexpected character after the \
                 number"
            ),
        ],
        "{}",
        b.run.stderr
    );
}

/// One 100 MB line: a comment of 100 MB before a value reads the value; 100 MB of garbage
/// after a configured name is one located error. Memory stays within a few times the line.
#[test]
fn a_100_mb_line_is_read_or_rejected_in_bounded_memory() {
    const LEN: usize = 100 << 20;
    let dir = tempfile::tempdir().unwrap();
    let mut line = b"7 |# ".to_vec();
    line.resize(LEN, b'x');
    line.extend_from_slice(b" |a 1.5 -2 |s 3:4\n8 |a 9 8 |s 0:1\n");
    let file = write(dir.path(), "long.ctf", &line);
    let d = dump(&file, &["a:2:dense", "s:10:sparse"], 60, 600);
    assert_eq!(d.run.code, 0, "{}", d.run.stderr);
    let lines = json_lines(&d.run.stdout);
    assert_eq!(lines.len(), 2, "{}", d.run.stdout);
    assert_eq!(lines[0].at("key").int(), 7);
    assert_eq!(
        lines[0].at("inputs").at("a").arr()[0],
        cli_support::json::parse("[1.5,-2]").unwrap()
    );
    assert_eq!(lines[1].at("key").int(), 8);
    if let Some(kib) = d.peak_kib {
        eprintln!("dump of a 100 MB line: peak RSS {} MiB", kib / 1024);
    }

    let mut bad = b"|a ".to_vec();
    bad.resize(LEN, b'z');
    bad.push(b'\n');
    let file = write(dir.path(), "long-bad.ctf", &bad);
    let v = validate(&file, &["a:2:dense"], 60, 600);
    assert_one_error(&v.run, &file, 1, 4, "");
}

/// 10^6 inputs on one line: unconfigured names are skipped and the configured sample at the
/// end is read; one input repeated 10^6 times is one error ("twice on a line").
#[test]
fn a_million_inputs_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("5");
    for i in 0..1_000_000 {
        text.push_str(&format!(" |n{i} 1"));
    }
    text.push_str(" |a 3\n");
    let file = write(dir.path(), "wide.ctf", &text);
    let d = dump(&file, &["a:1:dense"], 60, 300);
    assert_eq!(d.run.code, 0, "{}", d.run.stderr);
    let lines = json_lines(&d.run.stdout);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].at("key").int(), 5);
    assert_eq!(
        lines[0].at("inputs").at("a").arr()[0],
        cli_support::json::parse("[3]").unwrap()
    );

    let text = format!("5{}\n", " |a 1".repeat(1_000_000));
    let file = write(dir.path(), "repeated.ctf", &text);
    let v = validate(&file, &["a:1:dense"], 60, 300);
    // One error per repetition, each at its pipe: columns 8, 13, 18, ...
    let errors = errors_of(&v.run, &file);
    assert_eq!(v.run.code, 1);
    assert_eq!(errors.len(), 999_999);
    for (k, e) in errors.iter().enumerate().step_by(99_999) {
        assert_eq!((e.line, e.col), (1, 8 + 5 * k as u64), "{e:?}");
        assert!(e.message.contains("twice"), "{e:?}");
    }
}

/// Sparse indices at and past the end of u64 are errors at the index's column, never a
/// wrap-around to a small index.
#[test]
fn sparse_indices_past_u64_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    for index in [
        "18446744073709551615",
        "18446744073709551616",
        "36893488147419103232",
        "99999999999999999999999999999999999999999",
        "4294967296",
        "4294967306",
    ] {
        let file = write(dir.path(), "big.ctf", format!("1 |s {index}:1\n"));
        let v = validate(&file, &["s:10:sparse"], 10, 100);
        assert_one_error(&v.run, &file, 1, 6, "");
    }
}

/// Dimensions up to 2^31−1: a sparse input of that dimension takes its last index and
/// refuses the next; a dense one of 2^24 pads a short sample in bounded memory; a dimension
/// of 2^31 or more is a configuration error (exit 2).
#[test]
fn dimensions_up_to_2_pow_31_minus_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "dim.ctf", "1 |s 2147483646:2.5 0:1\n");
    let d = dump(&file, &["s:2147483647:sparse"], 10, 100);
    assert_eq!(d.run.code, 0, "{}", d.run.stderr);
    let lines = json_lines(&d.run.stdout);
    assert_eq!(
        lines[0].at("inputs").at("s").arr()[0].at("indices"),
        &cli_support::json::parse("[2147483646,0]").unwrap()
    );
    let file = write(dir.path(), "dim2.ctf", "1 |s 2147483647:1\n");
    let v = validate(&file, &["s:2147483647:sparse"], 10, 100);
    assert_one_error(&v.run, &file, 1, 6, "");

    // A dense sample is `dim` values (a short one is zero-padded, CNTK-BEHAVIOUR §3.8), so
    // memory follows the configured dim: 2^24 floats is 64 MiB per sample, within bounds.
    let file = write(dir.path(), "dense.ctf", "1 |a 1 2\n");
    let d = dump(&file, &["a:16777216:dense"], 30, 400);
    assert_eq!(d.run.code, 0, "{}", d.run.stderr);
    assert_eq!(cli_support::keys(&d.run.stdout), [1]);
    // A dim over 2^31 - 1 is refused whatever the format: a dense one used to abort the
    // process on its first short sample (a failed allocation), or to panic on the size.
    for format in ["sparse", "dense"] {
        for dim in ["2147483648", "1099511627776", "18446744073709551615"] {
            let r = bounded(
                &[
                    "validate",
                    "--file",
                    s(&file),
                    "--input",
                    &format!("a:{dim}:{format}"),
                ],
                10,
                100,
            );
            assert_eq!(r.run.code, 2, "dim {dim}: {}", r.run.stderr);
            assert!(
                r.run
                    .stderr
                    .contains(&format!("{format} input 'a' must be at most 2147483647")),
                "{}",
                r.run.stderr
            );
        }
    }
    let r = bounded(
        &[
            "validate",
            "--file",
            s(&file),
            "--input",
            "a:99999999999999999999:dense",
        ],
        10,
        100,
    );
    assert_eq!(r.run.code, 2, "{}", r.run.stderr);
}

/// Engine settings and restore positions no read can use are usage errors (exit 2, no panic,
/// no abort): before 2026-12-07, `--epoch-size 0` divided by zero in the planner thread,
/// `--prefetch` and `--threads` sized queues and buffers from any number (an abort on a
/// failed allocation, or a panic on the size), and a token whose position was near 2^64
/// wrapped the timeline's sums (a read running for ever, or positions going back).
#[test]
fn engine_settings_and_restore_positions_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..40).map(|i| format!("|x {i}\n")).collect();
    let file = write(dir.path(), "x.ctf", text);
    let read = |extra: &[&str]| {
        let mut args = vec![
            "read",
            "--file",
            s(&file),
            "--input",
            "x:1:dense",
            "--mb-size",
            "8",
            "--jsonl",
        ];
        args.extend(extra);
        bounded(&args, 30, 600)
    };
    for (extra, message) in [
        (
            &["--epoch-size", "0"][..],
            "expected a number of at least 1",
        ),
        (&["--prefetch", "257"], "expected a number from 1 to 256"),
        (&["--prefetch", "9223372036854775807"], "from 1 to 256"),
        (&["--threads", "1025"], "expected a number from 1 to 1024"),
        (&["--threads", "4294967295"], "from 1 to 1024"),
    ] {
        let r = read(extra);
        assert_eq!(r.run.code, 2, "{extra:?}: {}", r.run.stderr);
        assert!(
            r.run.stderr.contains(message),
            "{extra:?}: {}",
            r.run.stderr
        );
        assert!(!r.run.stderr.contains("panicked"), "{}", r.run.stderr);
    }
    let r = bounded(
        &[
            "index",
            "--file",
            s(&file),
            "--input",
            "x:1:dense",
            "--threads",
            "18446744073709551615",
        ],
        30,
        600,
    );
    assert_eq!(r.run.code, 2, "{}", r.run.stderr);
    // The largest settings allowed read what the defaults read.
    let plain = read(&[]);
    assert_eq!(plain.run.code, 0, "{}", plain.run.stderr);
    let widest = read(&["--prefetch", "256", "--threads", "64", "--epoch-size", "1"]);
    assert_eq!(widest.run.code, 0, "{}", widest.run.stderr);
    // (In the same order: epochs of one sample cut the minibatches, not the order.)
    let keys = |stdout: &str| -> Vec<u64> {
        json_lines(stdout)
            .iter()
            .flat_map(|m| {
                m.at("sequences")
                    .arr()
                    .iter()
                    .map(|k| k.int())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    assert_eq!(keys(&plain.run.stdout), keys(&widest.run.stdout));
    assert_eq!(keys(&plain.run.stdout).len(), 40);

    // A token of this corpus and order with its position (bytes 4 to 11, little-endian)
    // replaced: past 2^62 it is refused, at 2^62 the read is simply over.
    let lines = json_lines(&plain.run.stdout);
    let cli_support::json::Json::Str(first) = lines[0].at("checkpoint") else {
        panic!("no checkpoint token in {}", plain.run.stdout);
    };
    let with_position = |hex_le: &str| format!("{}{hex_le}{}", &first[..8], &first[24..]);
    for hex_le in ["ffffffffffffffff", "f0ffffffffffffff", "0100000000000040"] {
        let token = with_position(hex_le);
        for limit in [&[][..], &["--max-samples", "18446744073709551615"]] {
            let mut extra = vec!["--restore", &token];
            extra.extend(limit);
            let r = read(&extra);
            assert_eq!(r.run.code, 2, "{hex_le}: {}", r.run.stderr);
            assert!(
                r.run.stderr.contains("is past any position a read reaches"),
                "{}",
                r.run.stderr
            );
        }
    }
    let r = read(&["--restore", &with_position("0000000000000040")]);
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    assert_eq!(r.run.stdout, "");
}

/// 10^7 one-line sequences (50 MB): validated, indexed and read in bounded time and memory.
/// Memory is per sequence, not per byte of data: 24 bytes of index and 8 of the sweep's
/// order, plus what the configuration holds. Measured on 2 threads: `ctf index` 284 MiB
/// (441 before its parts were cut by density, `index::segments`); reads in minibatches of
/// 10,000: with the default window (the whole corpus, so every parsed sequence is held,
/// about 25 bytes each here) 626 MiB, with a window of 4 chunks of 1 MiB 422 MiB.
#[test]
fn ten_million_one_line_sequences() {
    const N: u64 = 10_000_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.ctf");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for i in 0..N {
            writeln!(w, "|a {}", i % 10).unwrap();
        }
    }
    let v = validate(&path, &["a:1:dense"], 120, 200);
    assert_eq!(v.run.code, 0, "{}", v.run.stderr);
    assert_eq!(summary_n(&v.run.stdout, "sequences"), N, "{}", v.run.stdout);
    let file = ["--file", s(&path), "--input", "a:1:dense", "--threads", "2"];
    let index = bounded(&[&["index"], &file[..]].concat(), 120, 360);
    assert_eq!(index.run.code, 0, "{}", index.run.stderr);
    let read = ["read", "--mb-size", "10000", "--jsonl"];
    let whole_window = bounded(&[&read[..], &file[..]].concat(), 120, 800);
    let config = write(
        dir.path(),
        "window.cntk",
        format!(
            "reader = [ file = \"{}\" ; chunkSizeInBytes = 1048576 ; randomizationWindow = 4 ;
             input = [ a = [ dim = 1 ; format = \"dense\" ] ] ]",
            s(&path)
        ),
    );
    let window_of_4 = bounded(
        &[&read[..], &[s(&config), "--threads", "2"]].concat(),
        120,
        520,
    );
    for (what, r) in [("whole", &whole_window), ("4 chunks", &window_of_4)] {
        assert_eq!(r.run.code, 0, "{}", r.run.stderr);
        let mut samples = 0;
        let mut checksum = 0.0;
        for mb in json_lines(&r.run.stdout) {
            samples += mb.at("samples").at("a").int();
            checksum += mb.at("checksum").at("a").num().parse::<f64>().unwrap();
        }
        assert_eq!(samples, N, "window {what}");
        // Each block of ten lines holds 0..9: 45 per block.
        assert_eq!(checksum, 45.0 * (N / 10) as f64, "window {what}");
    }
    for (what, r) in [
        ("index", &index),
        ("read, whole window", &whole_window),
        ("read, window of 4 chunks", &window_of_4),
    ] {
        if let Some(kib) = r.peak_kib {
            eprintln!("10^7 sequences, {what}: peak RSS {} MiB", kib / 1024);
        }
    }
}

/// 3,000,000 sequences numbered 0, 1, 2, …: `validate` and `dump` remember every id (a later
/// sequence may not repeat one), and ids in increasing order by ones take no room, so both
/// stay near their memory for any file (19 MiB). A hash set of every id took about 19 bytes a
/// sequence here: `validate` and `dump` peaked at 75 MiB.
#[test]
fn consecutive_ids_are_remembered_in_flat_memory() {
    const N: u64 = 3_000_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ids.ctf");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for i in 0..N {
            writeln!(w, "{i} |a {}", i % 10).unwrap();
        }
        // A repeat of the first id, at the end: still found.
        writeln!(w, "0 |a 1").unwrap();
    }
    let v = validate(&path, &["a:1:dense"], 60, 50);
    assert_one_error(&v.run, &path, N + 1, 1, "sequence id 0 was already used");
    assert_eq!(summary_n(&v.run.stdout, "sequences"), N, "{}", v.run.stdout);
    let d = dump(&path, &["a:1:dense"], 60, 50);
    assert_eq!(d.run.code, 0, "{}", d.run.stderr);
    let keys = json_lines(&d.run.stdout);
    assert_eq!(keys.len() as u64, N);
    assert_eq!(keys.last().unwrap().at("key").int(), N - 1);
    for (what, r) in [("validate", &v), ("dump", &d)] {
        if let Some(kib) = r.peak_kib {
            eprintln!("{N} consecutive ids, {what}: peak RSS {} MiB", kib / 1024);
        }
    }
}

/// Huge exponents: overflow is an error at the value's column; underflow is zero; an
/// exponent with thousands of digits neither hangs nor wraps.
#[test]
fn huge_exponents() {
    let dir = tempfile::tempdir().unwrap();
    let long_exponent = format!("1e{}", "9".repeat(5000));
    let long_negative = format!("1e-{}", "9".repeat(5000));
    let long_mantissa = format!("0.{}1e5000", "0".repeat(5000));
    for (value, ok, expect) in [
        ("1e39", false, 0.0),
        ("1e999999999999999999999", false, 0.0),
        (long_exponent.as_str(), false, 0.0),
        ("1e-999999999999999999999", true, 0.0),
        (long_negative.as_str(), true, 0.0),
        ("0e999999999999999999999", true, 0.0),
        // 10^-5001 · 10^5000: exactly 0.1, correctly rounded.
        (long_mantissa.as_str(), true, 0.1),
        ("3.4028234e38", true, 3.402_823_4e38),
    ] {
        let file = write(dir.path(), "exp.ctf", format!("1 |a {value}\n"));
        if ok {
            let d = dump(&file, &["a:1:dense"], 10, 100);
            assert_eq!(d.run.code, 0, "{value}: {}", d.run.stderr);
            let got: f64 = json_lines(&d.run.stdout)[0].at("inputs").at("a").arr()[0].arr()[0]
                .num()
                .parse()
                .unwrap();
            assert_eq!(got as f32, expect as f32, "{value}");
        } else {
            let v = validate(&file, &["a:1:dense"], 10, 100);
            assert_one_error(&v.run, &file, 1, 6, "");
        }
    }
}

/// Invalid UTF-8 in an input name of the data is an error at its column; in a comment it is
/// fine; in a configuration it is a configuration error (exit 2), not a panic.
#[test]
fn invalid_utf8_in_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "utf.ctf",
        b"1 |a\xff 1\n2 |\xc3\x28 1 |a 2\n3 |# \xff\xfe |a 3\n",
    );
    let v = validate(&file, &["a:1:dense"], 10, 100);
    let errors = errors_of(&v.run, &file);
    assert_eq!(v.run.code, 1);
    let at: Vec<(u64, u64)> = errors.iter().map(|e| (e.line, e.col)).collect();
    assert_eq!(at, [(1, 5), (2, 4)], "{}", v.run.stderr);
    let d = dump(&file, &["a:1:dense"], 10, 100);
    assert_eq!(cli_support::keys(&d.run.stdout), [3]);

    let config = write(
        dir.path(),
        "bad.cntk",
        [
            &b"reader = [ file = \"utf.ctf\" ; input = [ a\xff = [ dim = 1 ; format = \"dense\" ] ] ]\n"[..],
        ]
        .concat(),
    );
    let r = bounded(&["validate", s(&config)], 10, 100);
    assert_eq!(r.run.code, 2, "{}", r.run.stderr);
    assert!(r.run.stderr.contains("bad.cntk"), "{}", r.run.stderr);
}

/// Writes a configuration (`DATA` standing for the path of a one-line data file) and runs
/// `ctf validate` on it.
fn validate_config(dir: &Path, text: &str) -> Bounded {
    let data = write(dir, "d.ctf", "1 |a 1\n");
    let config: PathBuf = write(dir, "c.cntk", text.replace("DATA", s(&data)));
    bounded(&["validate", s(&config), "--section", "reader"], 20, 200)
}

/// Configurations nested 100,000 deep (records, braces, parentheses, conditionals, unary
/// minus, sums nested to the right) are never a stack overflow: in a key the reader does not
/// read they are no error (kept as text, as CNTK's legacy parser keeps values), and in the
/// `dim` it reads a located error ("nested deeper than 128 levels" but for records, which
/// are no number); self-referencing ones give a configuration error naming the file, never
/// a hang.
#[test]
fn deep_and_self_referencing_configurations() {
    let dir = tempfile::tempdir().unwrap();
    let n = 100_000;
    let deep = [
        format!("x = {}1{}\n", "[ y = ".repeat(n), " ]".repeat(n)),
        format!("x = {}1{}\n", "(".repeat(n), ")".repeat(n)),
        format!("x = {}\n", "-".repeat(n) + "1"),
        format!(
            "x = {}1{}\n",
            "if true then ".repeat(n),
            " else 0".repeat(n)
        ),
        format!("x = {}1{}\n", "{ y = ".repeat(n), " }".repeat(n)),
        format!("x = {}1{}\n", "1 + (".repeat(n), ")".repeat(n)),
    ];
    for (i, text) in deep.iter().enumerate() {
        let full = format!(
            "{text}reader = [ file = \"DATA\" ; input = [ a = [ dim = 1 ; format = \"dense\" ] ] ]\n"
        );
        let b = validate_config(dir.path(), &full);
        assert_eq!(b.run.code, 0, "case {i}: {}", b.run.stderr);
        let value = text.trim_end().trim_start_matches("x = ");
        let used = format!(
            "reader = [ file = \"DATA\" ; input = [ a = [ format = \"dense\" ; dim = {value} ] ] ]\n"
        );
        let b = validate_config(dir.path(), &used);
        let records = i == 0 || i == 4;
        assert!(
            b.run.code == 2
                && b.run.stderr.contains("c.cntk:1:")
                && (records || b.run.stderr.contains("nested deeper")),
            "case {i}: exit {}: {}",
            b.run.code,
            b.run.stderr
        );
    }
    for text in [
        "d = d\nreader = [ file = \"DATA\" ; input = [ a = [ dim = d ; format = \"dense\" ] ] ]\n",
        "p = q + 1\nq = p\nreader = [ file = \"DATA\" ; input = [ a = [ dim = p ; format = \"dense\" ] ] ]\n",
        "reader = [ file = \"DATA\" ; input = [ a = [ dim = reader.input.a.dim ; format = \"dense\" ] ] ]\n",
        "f(x) = f(x + 1)\nreader = [ file = \"DATA\" ; input = [ a = [ dim = f(1) ; format = \"dense\" ] ] ]\n",
    ] {
        let b = validate_config(dir.path(), text);
        assert_eq!(b.run.code, 2, "{text}: {}", b.run.stderr);
        assert!(b.run.stderr.contains("c.cntk"), "{text}: {}", b.run.stderr);
    }
}

/// A flat chain of 100,000 terms of one operator is not nesting: a sparse input whose dim is
/// `1 + 1 + ... + 1` (100,000 terms), and a record whose `randomize` is a chain of 100,000
/// `&&`, are accepted and take effect: index 99,999 is read, 100,000 is refused.
#[test]
fn flat_chains_of_100000_terms_in_configurations() {
    let dir = tempfile::tempdir().unwrap();
    let n = 100_000;
    let data = write(dir.path(), "s.ctf", "1 |a 99999:1\n2 |a 100000:1\n");
    let dim = format!("1{}", " + 1".repeat(n - 1));
    let randomize = format!("true{}", " && true".repeat(n - 1));
    let text = format!(
        "reader = [\n file = \"{}\"\n randomize = {randomize}\n input = [ a = [ dim = {dim} ; format = \"sparse\" ] ]\n]\n",
        s(&data)
    );
    let config = write(dir.path(), "c.cntk", text);
    let b = bounded(&["validate", s(&config), "--section", "reader"], 20, 200);
    assert_one_error(&b.run, &data, 2, 6, "out of range (dim 100000)");

    // 200,000 members in one record (none used), and a duplicate of the used `reader` at
    // the end: each member is checked against the earlier ones in one lookup (a scan of
    // them took 11 s for 100,000 members, and would take about 45 s for these).
    let members: String = (0..200_000).map(|i| format!("D{i} = {i}\n")).collect();
    let reader = format!(
        "reader = [\n file = \"{}\"\n input = [ a = [ dim = 100001 ; format = \"sparse\" ] ]\n]\n",
        s(&data)
    );
    let config = write(dir.path(), "wide.cntk", format!("{members}{reader}"));
    let b = bounded(&["validate", s(&config)], 20, 400);
    assert_eq!(b.run.code, 0, "{}", b.run.stderr);
    let config = write(
        dir.path(),
        "twice.cntk",
        format!("{members}{reader}D17 = 3\nreader = 3\n"),
    );
    let b = bounded(&["validate", s(&config)], 20, 400);
    assert_eq!(b.run.code, 2, "{}", b.run.stderr);
    assert!(
        b.run
            .stderr
            .contains("duplicate member 'reader' (first defined at 200001:1)"),
        "{}",
        b.run.stderr
    );
}

/// Every malformed case of CNTK-BEHAVIOUR §3.8 and SPEC §7.2, one file each: the error is
/// at the line and column written here, and the other sequences of the file are read.
#[test]
fn every_malformed_case_of_cntk_behaviour_3_8() {
    let dir = tempfile::tempdir().unwrap();
    // (case, line 2 of the file, column of its error). Lines 1 and 3 are valid.
    let cases: &[(&str, &str, u64)] = &[
        (".5", "2 |a .5", 6),
        ("-.5", "2 |a -.5", 6),
        ("nan", "2 |a nan", 6),
        ("inf", "2 |a inf", 6),
        ("1e", "2 |a 1e", 6),
        ("1e+", "2 |a 1e+", 6),
        ("1.e5", "2 |a 1.e5", 6),
        ("hex", "2 |a 0x1F", 6),
        ("1,5", "2 |a 1,5", 6),
        ("2.0f", "2 |a 2.0f", 6),
        ("f32 overflow", "2 |a 3.5e38", 6),
        ("sparse index = dim", "2 |s 10:1", 6),
        ("sparse index with sign", "2 |s -1:1", 6),
        ("sparse without value", "2 |s 1:", 6),
        ("sparse without colon", "2 |s 1", 6),
        ("too many dense values", "2 |a 1 2 3 4", 12),
        ("space after the pipe", "2 | a 1", 3),
        ("input twice on a line", "2 |a 1 |a 2", 8),
        ("control byte", "2 |a 1\x072", 6),
        ("byte >= 0x80", "2 |a 1 \u{e9}", 8),
        ("lone minus", "2 |a -", 6),
        // `12.` is a number; the value `+` that follows is malformed.
        ("plus after number", "2 |a 12.+", 9),
    ];
    for (case, line, col) in cases {
        let text = format!("1 |a 1 |s 1:1\n{line}\n3 |a 3 |s 2:1\n");
        let file = write(dir.path(), "case.ctf", &text);
        let v = validate(&file, &["a:3:dense", "s:10:sparse"], 10, 100);
        let errors = errors_of(&v.run, &file);
        assert!(
            v.run.code == 1
                && errors.iter().any(|e| (e.line, e.col) == (2, *col))
                && errors.iter().all(|e| e.line == 2),
            "{case}: expected an error at 2:{col} and none elsewhere:\n{}",
            v.run.stderr
        );
        let d = dump(&file, &["a:3:dense", "s:10:sparse"], 10, 100);
        assert_eq!(cli_support::keys(&d.run.stdout), [1, 3], "{case}");
    }
    // UTF-16 LE byte order mark: fatal, naming the file.
    let file = write(dir.path(), "utf16.ctf", b"\xff\xfe1\x00 \x00|\x00a\x00");
    let v = validate(&file, &["a:3:dense"], 10, 100);
    assert_eq!(v.run.code, 1);
    assert!(v.run.stderr.contains("utf16.ctf"), "{}", v.run.stderr);
    // An input missing from a whole sequence: the sequence is invalid (SPEC §7.3).
    let file = write(
        dir.path(),
        "missing.ctf",
        "1 |a 1 |s 1:1\n2 |a 2\n3 |a 3 |s 0:1\n",
    );
    let v = validate(&file, &["a:3:dense", "s:10:sparse"], 10, 100);
    assert_eq!(v.run.code, 1, "{}", v.run.stderr);
    assert_eq!(errors_of(&v.run, &file)[0].line, 2, "{}", v.run.stderr);
    // A sequence with more lines than samples.
    let file = write(
        dir.path(),
        "rows.ctf",
        "1 |a 1\n2 |a 2 |s 0:1\n2 |s 1:1\n2 |s 2:1\n",
    );
    let v = validate(&file, &["a:3:dense", "s:10:sparse"], 10, 100);
    assert_eq!(v.run.code, 1, "{}", v.run.stderr);
}
