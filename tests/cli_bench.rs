//! Integration tests of `ctf bench`: every documented `key: value` line is on stdout with a
//! sane value, what was read matches the data the test wrote (samples, sequences, bytes =
//! file size × sweeps, checksum of every value), usage errors exit 2, and a malformed file
//! exits 1 with a located error on stderr.

#[allow(dead_code)]
mod cli_support;
mod cpus_support;

use std::path::Path;

use cli_support::*;
use cpus_support::allowed_cpus;
use tempfile::TempDir;

/// Every key `ctf bench` prints, in order (README "Performance").
const KEYS: [&str; 24] = [
    "threads",
    "mb_size",
    "sweeps",
    "minibatches",
    "sequences",
    "samples",
    "bytes",
    "bytes_read",
    "checksum",
    "index_checksum",
    "elapsed_s",
    "MB/s",
    "samples/s",
    "minibatches/s",
    "first_minibatch_s",
    "peak_rss_bytes",
    "index_s",
    "read_s",
    "parse_s",
    "plan_s",
    "pack_s",
    "wait_s",
    "quick_bytes_read",
    "pinned_packers",
];

/// What the test knows of the data it wrote.
struct Data {
    sequences: u64,
    samples: u64,
    /// Sum of every dense `x` value and sparse `y` value (integers: exact in any order).
    value_sum: f64,
    file_size: u64,
}

/// Writes `d.ctf`: `n` id-mode sequences of 1 to 7 lines, a dense `|x` of dim 3 on every
/// line and a sparse `|y` of dim 20 on the first line and some others, small integer values.
fn make_data(dir: &Path, n: u64) -> Data {
    let mut rng = Rng::new(11);
    let mut text = String::new();
    let (mut samples, mut value_sum) = (0u64, 0f64);
    for key in 0..n {
        let lines = 1 + rng.below(7);
        samples += lines;
        for line in 0..lines {
            let x: Vec<u64> = (0..3).map(|_| rng.below(100)).collect();
            value_sum += x.iter().sum::<u64>() as f64;
            text.push_str(&format!("{key} |x {} {} {}", x[0], x[1], x[2]));
            // Every sequence needs a sample of every input: `y` on its first line.
            if line == 0 || rng.chance(2) {
                let (i, v) = (rng.below(20), 1 + rng.below(9));
                value_sum += v as f64;
                text.push_str(&format!(" |y {i}:{v}"));
            }
            text.push('\n');
        }
    }
    write(dir, "d.ctf", &text);
    Data {
        sequences: n,
        samples,
        value_sum,
        file_size: text.len() as u64,
    }
}

const CONFIG: &str = "reader = [ file = \"d.ctf\" ; randomize = true ; randomizationWindow = 3\n\
     chunkSizeInBytes = 400 ; cacheIndex = false\n\
     input = [ x = [ dim = 3 ; format = \"dense\" ] ; y = [ dim = 20 ; format = \"sparse\" ] ] ]\n";

fn setup(n: u64) -> (TempDir, Data) {
    let dir = TempDir::new().unwrap();
    let data = make_data(dir.path(), n);
    write(dir.path(), "r.cntk", CONFIG);
    (dir, data)
}

/// The value of `key` as a float, failing on a missing key or a non-number.
fn number(stdout: &str, key: &str) -> f64 {
    let v = summary(stdout, key);
    v.parse()
        .unwrap_or_else(|_| panic!("'{key}: {v}' is not a number\n{stdout}"))
}

#[test]
fn every_key_is_printed_once_in_order_with_sane_values() {
    let (dir, data) = setup(120);
    let d = dir.path();
    let r = run_expect(&["bench", "r.cntk", "--mb-size", "16"], Some(d), 0);
    let keys: Vec<&str> = r
        .stdout
        .lines()
        .map(|l| l.split_once(": ").expect("key: value").0)
        .collect();
    assert_eq!(keys, KEYS, "{}", r.stdout);
    let out = &r.stdout;
    assert_eq!(summary_n(out, "mb_size"), 16);
    assert_eq!(summary_n(out, "sweeps"), 1);
    assert!(summary_n(out, "threads") >= 1);
    assert_eq!(summary_n(out, "sequences"), data.sequences);
    assert_eq!(summary_n(out, "samples"), data.samples);
    assert_eq!(summary_n(out, "bytes"), data.file_size);
    // Every byte is read, in whole parts or by the first minibatch's packer (a part whose
    // sequences that minibatch holds all may never be read whole in a sweep).
    assert!(
        summary_n(out, "bytes_read") + summary_n(out, "quick_bytes_read") >= data.file_size,
        "{out}"
    );
    assert_eq!(number(out, "checksum"), data.value_sum);
    // Minibatches of at most 16 samples (a longer sequence alone may exceed it, ours are 7).
    let minibatches = summary_n(out, "minibatches");
    assert!(minibatches >= data.samples.div_ceil(16), "{out}");
    assert!(minibatches <= data.samples, "{out}");
    let elapsed = number(out, "elapsed_s");
    assert!(elapsed > 0.0, "{out}");
    for key in ["MB/s", "samples/s", "minibatches/s"] {
        assert!(number(out, key) > 0.0, "{key}\n{out}");
    }
    // The rates are the counts over the elapsed time (to the printed precision).
    let rate = number(out, "samples/s");
    let expected = data.samples as f64 / elapsed;
    assert!((rate - expected).abs() <= 1e-3 * expected + 1.0, "{out}");
    let first = number(out, "first_minibatch_s");
    assert!(first > 0.0 && first <= elapsed, "{out}");
    assert!(number(out, "index_s") <= first, "{out}");
    assert!(number(out, "read_s") <= elapsed, "{out}");
    for key in ["parse_s", "plan_s", "pack_s", "wait_s"] {
        assert!(number(out, key) >= 0.0, "{key}\n{out}");
    }
    assert!(number(out, "parse_s") > 0.0, "{out}");
    // Peak RSS: at least a megabyte (a running process), less than a terabyte.
    if cfg!(target_os = "linux") {
        let rss = summary_n(out, "peak_rss_bytes");
        assert!(rss > 1 << 20 && rss < 1 << 40, "{out}");
    }
}

#[test]
fn packers_are_pinned_one_per_cpu_unless_told_not_to() {
    let (dir, _) = setup(120);
    let d = dir.path();
    let cpus = allowed_cpus().map(|n| n as u64);
    // As many packers as CPUs: each pinned (on Linux); one more: none.
    let threads = cpus.unwrap_or(2);
    let mut checksums = Vec::new();
    for (threads, no_pin, pinned) in [
        (threads, false, cpus.map_or(0, |n| n)),
        (threads, true, 0),
        (threads + 1, false, 0),
    ] {
        let threads = threads.to_string();
        let mut args = vec!["bench", "r.cntk", "--mb-size", "16", "--threads", &threads];
        if no_pin {
            args.push("--no-pin-packers");
        }
        let r = run_expect(&args, Some(d), 0);
        assert_eq!(
            summary_n(&r.stdout, "pinned_packers"),
            pinned,
            "{args:?}\n{}",
            r.stdout
        );
        checksums.push((
            summary(&r.stdout, "checksum").to_string(),
            summary(&r.stdout, "index_checksum").to_string(),
        ));
    }
    assert!(checksums.windows(2).all(|w| w[0] == w[1]), "{checksums:?}");
}

#[test]
fn sweeps_multiply_what_is_read_and_threads_do_not_change_it() {
    let (dir, data) = setup(150);
    let d = dir.path();
    let mut checksums = Vec::new();
    for threads in ["1", "2", "3"] {
        let r = run_expect(
            &[
                "bench",
                "r.cntk",
                "--sweeps",
                "3",
                "--threads",
                threads,
                "--mb-size",
                "32",
            ],
            Some(d),
            0,
        );
        let out = &r.stdout;
        assert_eq!(summary(out, "threads"), threads);
        assert_eq!(summary_n(out, "sweeps"), 3);
        assert_eq!(summary_n(out, "samples"), 3 * data.samples, "{out}");
        assert_eq!(summary_n(out, "sequences"), 3 * data.sequences, "{out}");
        assert_eq!(summary_n(out, "bytes"), 3 * data.file_size, "{out}");
        assert_eq!(number(out, "checksum"), 3.0 * data.value_sum, "{out}");
        checksums.push((
            summary(out, "checksum").to_string(),
            summary(out, "index_checksum").to_string(),
            summary(out, "minibatches").to_string(),
        ));
    }
    assert!(checksums.windows(2).all(|w| w[0] == w[1]), "{checksums:?}");
}

#[test]
fn the_common_data_overrides_work_without_a_config() {
    let (dir, data) = setup(40);
    let d = dir.path();
    let r = run_expect(
        &[
            "bench",
            "--file",
            "d.ctf",
            "--input",
            "x:3:dense",
            "--input",
            "y:20:sparse",
            "--precision",
            "double",
        ],
        Some(d),
        0,
    );
    assert_eq!(summary_n(&r.stdout, "mb_size"), 256);
    assert_eq!(summary_n(&r.stdout, "samples"), data.samples);
    assert_eq!(number(&r.stdout, "checksum"), data.value_sum);
    // `--section` picks a reader record inside a command record.
    write(d, "cmd.cntk", format!("train = [ {CONFIG} ]\n"));
    let r = run_expect(&["bench", "cmd.cntk", "--section", "train"], Some(d), 0);
    assert_eq!(summary_n(&r.stdout, "samples"), data.samples);
}

#[test]
fn usage_errors_exit_2_with_nothing_on_stdout() {
    let (dir, _) = setup(20);
    let d = dir.path();
    for args in [
        &["bench"][..],
        &["bench", "r.cntk", "--mb-size", "0"],
        &["bench", "r.cntk", "--mb-size", "-1"],
        &["bench", "r.cntk", "--mb-size", "lots"],
        &["bench", "r.cntk", "--sweeps", "0"],
        &["bench", "r.cntk", "--threads", "0"],
        &["bench", "r.cntk", "--bogus"],
        &["bench", "missing.cntk"],
        &["bench", "r.cntk", "--section", "nowhere"],
        &["bench", "--section", "train", "--file", "d.ctf"],
        &["bench", "--file", "d.ctf"],
        &["bench", "--file", "d.ctf", "--input", "x:0:dense"],
    ] {
        let r = run_expect(args, Some(d), 2);
        assert_eq!(r.stdout, "", "{args:?}");
        assert!(!r.stderr.is_empty(), "{args:?}");
    }
}

#[test]
fn a_malformed_file_exits_1_with_a_located_error() {
    let (dir, _) = setup(30);
    let d = dir.path();
    let text = std::fs::read_to_string(d.join("d.ctf")).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let bad = lines
        .iter()
        .position(|l| l.starts_with("12 "))
        .expect("sequence 12 exists");
    lines[bad] = lines[bad].replacen("|x ", "|x 4z ", 1);
    write(d, "d.ctf", lines.join("\n") + "\n");
    let r = run_expect(&["bench", "r.cntk"], Some(d), 1);
    assert_eq!(r.stdout, "", "no figures for a failed read");
    let errors = diags(&r.stderr, "error");
    assert!(
        errors
            .iter()
            .any(|e| e.file == "d.ctf" && e.line == bad as u64 + 1 && e.col >= 1),
        "no located error on line {}:\n{}",
        bad + 1,
        r.stderr
    );

    // A missing data file is a data error too (exit 1), naming the file.
    write(d, "gone.cntk", CONFIG.replace("d.ctf", "gone.ctf"));
    let r = run_expect(&["bench", "gone.cntk"], Some(d), 1);
    assert!(r.stderr.contains("gone.ctf"), "{}", r.stderr);
}
