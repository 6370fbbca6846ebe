//! Integration tests of `ctf read` against its contract (SPEC §7.5 and §3): the `--jsonl` line
//! format and its checksums, sweeps, `--restore`, `--max-samples`, workers and ranks, the
//! minibatch-size schedule, the summary and counters on stderr, exit codes and maxErrors.

#[allow(dead_code)]
mod cli_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cli_support::*;
use tempfile::TempDir;

// ---------------------------------------------------------------------------------------------
// Data and helpers
// ---------------------------------------------------------------------------------------------

/// What the test knows of one sequence of the data it wrote.
#[derive(Clone, Debug, Default)]
struct Seq {
    /// Samples of `x` (every line has `x`, so also the sequence length).
    x_samples: u64,
    x_sum: f64,
    /// Samples of `y` (the first few lines of the sequence only).
    y_samples: u64,
    y_sum: f64,
}

/// Writes `d.ctf`: `n` id-mode sequences (keys 0..n) of 1 to 9 lines, a dense `|x` of dim 2
/// on every line and a sparse `|y` of dim 10 on the first lines. Values are multiples of 1/4
/// so every sum is exact in any order and precision.
fn make_data(dir: &Path, n: u64, seed: u64) -> BTreeMap<u64, Seq> {
    let mut rng = Rng::new(seed);
    let mut text = String::new();
    let mut seqs = BTreeMap::new();
    for key in 0..n {
        let len = 1 + rng.below(9);
        let y_lines = 1 + rng.below(len);
        let mut seq = Seq::default();
        for line in 0..len {
            let a = rng.below(40) as f64 / 4.0 - 3.0;
            let b = rng.below(40) as f64 / 4.0;
            text.push_str(&format!("{key} |x {a} {b}"));
            seq.x_samples += 1;
            seq.x_sum += a + b;
            if line < y_lines {
                text.push_str(" |y");
                let entries = 1 + rng.below(3);
                for e in 0..entries {
                    let v = rng.below(20) as f64 / 4.0 + 0.25;
                    text.push_str(&format!(" {}:{v}", e * 3));
                    seq.y_sum += v;
                }
                seq.y_samples += 1;
            }
            text.push('\n');
        }
        seqs.insert(key, seq);
    }
    write(dir, "d.ctf", text);
    seqs
}

/// A config with many small chunks and a randomization window of a few of them.
fn config_text(seed: u64, extra: &str) -> String {
    format!(
        "reader = [ file = \"d.ctf\" ; randomizationWindow = 4 ; chunkSizeInBytes = 300\n\
         randomizationSeed = {seed} {extra}\n\
         input = [ x = [ dim = 2 ; format = \"dense\" ] ; y = [ dim = 10 ; format = \"sparse\" ] ] ]\n"
    )
}

fn setup(n: u64) -> (TempDir, BTreeMap<u64, Seq>) {
    let dir = TempDir::new().unwrap();
    let seqs = make_data(dir.path(), n, 7);
    write(dir.path(), "r.cntk", config_text(1, ""));
    write(dir.path(), "other.cntk", config_text(2, ""));
    (dir, seqs)
}

/// One `--jsonl` line, decoded.
#[derive(Clone, Debug, PartialEq)]
struct Line {
    mb: u64,
    keys: Vec<u64>,
    samples: BTreeMap<String, u64>,
    checksum: BTreeMap<String, f64>,
    sweep_end: bool,
    position: u64,
    checkpoint: String,
}

impl Line {
    /// Everything but `mb` (which is set to 0).
    fn content(&self) -> Line {
        Line {
            mb: 0,
            ..self.clone()
        }
    }
}

fn parse_lines(stdout: &str) -> Vec<Line> {
    read_lines(stdout)
        .into_iter()
        .map(|r| Line {
            mb: r.mb,
            keys: r.keys,
            samples: r.samples.into_iter().collect(),
            checksum: r.checksum.into_iter().collect(),
            sweep_end: r.sweep_end,
            position: r.position,
            checkpoint: r.checkpoint,
        })
        .collect()
}

/// `ctf read r.cntk --jsonl ARGS` in `dir`, expecting exit 0 and nothing on stderr but
/// diagnostics; returns the decoded lines.
fn read(dir: &Path, args: &[&str]) -> Vec<Line> {
    read_with(dir, "r.cntk", args)
}

fn read_with(dir: &Path, config: &str, args: &[&str]) -> Vec<Line> {
    let all = [&["read", config, "--jsonl"][..], args].concat();
    let r = run_expect(&all, Some(dir), 0);
    parse_lines(&r.stdout)
}

fn all_keys(lines: &[Line]) -> Vec<u64> {
    lines.iter().flat_map(|l| l.keys.iter().copied()).collect()
}

/// Sequence ends along the timeline for this key order.
fn ends(order: &[u64], seqs: &BTreeMap<u64, Seq>) -> Vec<u64> {
    let mut at = 0;
    order
        .iter()
        .map(|k| {
            at += seqs[k].x_samples;
            at
        })
        .collect()
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

// ---------------------------------------------------------------------------------------------
// 1. The `--jsonl` line
// ---------------------------------------------------------------------------------------------

#[test]
fn jsonl_lines_have_the_contract_shape_and_checksums_match_the_data() {
    let (dir, seqs) = setup(60);
    for mb in ["1", "7", "20", "64"] {
        let lines = read(dir.path(), &["--mb-size", mb, "--max-sweeps", "2"]);
        assert!(lines.len() > 1, "mb {mb}");
        let mut previous = 0;
        for (i, line) in lines.iter().enumerate() {
            assert_eq!(line.mb, i as u64, "mb {mb}: {line:?}");
            assert!(!line.keys.is_empty(), "{line:?}");
            assert!(line.position > previous, "mb {mb}: {line:?}");
            assert!(
                !line.checkpoint.is_empty() && !line.checkpoint.starts_with('-'),
                "{line:?}"
            );
            let names: Vec<&str> = line.samples.keys().map(String::as_str).collect();
            assert_eq!(names, ["x", "y"], "{line:?}");
            let names: Vec<&str> = line.checksum.keys().map(String::as_str).collect();
            assert_eq!(names, ["x", "y"], "{line:?}");
            let of = |f: fn(&Seq) -> u64| line.keys.iter().map(|k| f(&seqs[k])).sum::<u64>();
            let sum = |f: fn(&Seq) -> f64| line.keys.iter().map(|k| f(&seqs[k])).sum::<f64>();
            assert_eq!(line.samples["x"], of(|s| s.x_samples), "{line:?}");
            assert_eq!(line.samples["y"], of(|s| s.y_samples), "{line:?}");
            assert_eq!(line.checksum["x"], sum(|s| s.x_sum), "{line:?}");
            assert_eq!(line.checksum["y"], sum(|s| s.y_sum), "{line:?}");
            // One worker: the position advances by the samples of the minibatch.
            assert_eq!(line.position - previous, line.samples["x"], "{line:?}");
            previous = line.position;
        }
        // Tokens differ from line to line.
        let tokens: BTreeSet<&str> = lines.iter().map(|l| l.checkpoint.as_str()).collect();
        assert_eq!(tokens.len(), lines.len(), "mb {mb}");
    }
    // The same through --file/--input, without a config file.
    let r = run_expect(
        &[
            "read",
            "--file",
            "d.ctf",
            "--input",
            "x:2:dense",
            "--input",
            "y:10:sparse",
            "--mb-size",
            "16",
            "--jsonl",
        ],
        Some(dir.path()),
        0,
    );
    let lines = parse_lines(&r.stdout);
    assert_eq!(sorted(all_keys(&lines)), (0..60).collect::<Vec<_>>());
    for line in &lines {
        let sum: f64 = line.keys.iter().map(|k| seqs[k].x_sum).sum();
        assert_eq!(line.checksum["x"], sum, "{line:?}");
    }
}

/// The checksum of an input with no stored value (an empty sparse sample) is the empty
/// sum, 0; it was printed as `-0`, the start of Rust's float `Sum`.
#[test]
fn the_checksum_of_no_stored_value_is_zero() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "z.ctf", "|d 1 |s\n");
    let r = run_expect(
        &[
            "read",
            "--file",
            "z.ctf",
            "--input",
            "d:1:dense",
            "--input",
            "s:3:sparse",
            "--mb-size",
            "1",
            "--jsonl",
        ],
        Some(dir.path()),
        0,
    );
    assert!(
        r.stdout.contains("\"checksum\":{\"d\":1,\"s\":0}"),
        "{}",
        r.stdout
    );
}

/// A checksum is printed as `dump` prints numbers: huge and tiny sums with an exponent (two
/// f32 maxima summed were printed as a 39-digit integer, which JSON readers take for an
/// integer), others as plain decimals; each parses back to the exact sum.
#[test]
fn checksums_are_printed_in_the_shortest_form_with_an_exponent_when_huge_or_tiny() {
    let dir = TempDir::new().unwrap();
    // f32 values: 3.4028235e38 (the maximum), 1e-7, 0.5, 1e16, 0.25.
    write(
        dir.path(),
        "n.ctf",
        "1 |a 3.4028235e38 |b 0.0000001 |c 0.5 |d 1e16\n\
         2 |a 3.4028235e38 |b 0.0000001 |c 0.25 |d 1\n",
    );
    let mut args = vec!["read", "--file", "n.ctf", "--mb-size", "2", "--jsonl"];
    for input in ["a:1:dense", "b:1:dense", "c:1:dense", "d:1:dense"] {
        args.extend(["--input", input]);
    }
    let r = run_expect(&args, Some(dir.path()), 0);
    let a = 2.0 * f64::from(f32::MAX);
    let b = 2.0 * f64::from(1e-7f32);
    let d = f64::from(1e16f32) + 1.0;
    let expected = format!("\"checksum\":{{\"a\":{a:e},\"b\":{b:e},\"c\":0.75,\"d\":{d:e}}}");
    assert!(r.stdout.contains(&expected), "{expected}\n{}", r.stdout);
}

/// `dump` writes a long line in pieces: a dense input of dim 100,000,000 (one value given,
/// the rest padded: a 200 MB line) is dumped within 390 MB of address space, where building
/// the line first aborted on the failed allocation (SIGABRT).
#[test]
fn dump_writes_a_long_line_in_pieces() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "wide.ctf", "|a 1\n");
    let args = ["dump", "--file", "wide.ctf", "--input", "a:100000000:dense"];
    let r = run_after_shell("ulimit -v 400000; exec >/dev/null", &args, Some(dir.path()));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("has 1 of 100000000 values; padded"),
        "{}",
        r.stderr
    );
}

/// On a terminal, `ctf read` without `--jsonl` shows a bar of the samples read; it used to
/// show them as bytes (`10 B/39.06 KiB` for 10 of 40,000 samples). The terminal is
/// util-linux's `script` (in Debian's essential `bsdutils`).
#[test]
fn the_read_progress_bar_counts_samples() {
    let dir = TempDir::new().unwrap();
    let text: String = (0..40_000).map(|i| format!("|a {}\n", i % 7)).collect();
    write(dir.path(), "s.ctf", text);
    let command =
        format!("{CTF} read --file s.ctf --input a:1:dense --mb-size 10 --threads 1 >/dev/null");
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux script, to give ctf a terminal");
    assert!(out.status.success(), "{out:?}");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("/40,000 samples"), "{shown:?}");
    assert!(!shown.contains("KiB"), "{shown:?}");
}

/// `mb` numbers the run's minibatches, not its lines (README "The `ctf` tool"): a minibatch
/// holding only an invalid sequence (within `maxErrors`) prints no line but keeps its
/// number, so each rank's lines carry the global minibatch's number.
#[test]
fn an_empty_minibatch_prints_no_line_but_keeps_its_number() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "d.ctf", "1 |a 1\n2 |a 2\n3 |a x\n4 |a 4\n");
    write(
        dir.path(),
        "c.cntk",
        "reader = [ file = \"d.ctf\" ; randomize = false ; maxErrors = 1\n \
         input = [ a = [ dim = 1 ; format = \"dense\" ] ] ]\n",
    );
    let lines = read_with(dir.path(), "c.cntk", &["--mb-size", "1"]);
    let numbered: Vec<(u64, Vec<u64>)> = lines.iter().map(|l| (l.mb, l.keys.clone())).collect();
    assert_eq!(numbered, [(0, vec![1]), (1, vec![2]), (3, vec![4])]);
}

/// A corpus of more files than the process may open at once: each loader keeps at most
/// `MAX_OPEN_FILES` open. Every loader and packer used to keep each file it had read open,
/// and `read`, `stats` and `bench` failed with "Too many open files".
#[test]
fn more_files_than_the_descriptor_limit_are_read() {
    let dir = TempDir::new().unwrap();
    for i in 0..300 {
        write(dir.path(), &format!("p{i:03}.ctf"), format!("|x {i}\n"));
    }
    let data = ["--file", "p*.ctf", "--input", "x:1:dense"];
    for command in [
        &["read", "--mb-size", "7", "--stats"][..],
        &["stats"],
        &["bench"],
    ] {
        let args = [command, &data[..]].concat();
        let r = run_after_shell("ulimit -n 128", &args, Some(dir.path()));
        assert_eq!(r.code, 0, "ctf {}: {}", command[0], r.stderr);
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(all.contains("300"), "ctf {}: {all}", command[0]);
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Sweeps
// ---------------------------------------------------------------------------------------------

#[test]
fn one_sweep_by_default_and_each_sweep_is_a_permutation() {
    let (dir, seqs) = setup(60);
    let all: Vec<u64> = seqs.keys().copied().collect();
    let one = read(dir.path(), &["--mb-size", "16"]);
    assert_eq!(sorted(all_keys(&one)), all);
    assert!(one.last().unwrap().sweep_end, "{:?}", one.last());
    let total: u64 = seqs.values().map(|s| s.x_samples).sum();
    assert_eq!(one.last().unwrap().position, total);

    let three7 = read(dir.path(), &["--mb-size", "7", "--max-sweeps", "3"]);
    let three64 = read(dir.path(), &["--mb-size", "64", "--max-sweeps", "3"]);
    let order = all_keys(&three7);
    assert_eq!(
        order,
        all_keys(&three64),
        "the key order depends on --mb-size"
    );
    assert_eq!(order.len(), 3 * all.len());
    for (i, sweep) in order.chunks(all.len()).enumerate() {
        assert_eq!(
            sorted(sweep.to_vec()),
            all,
            "sweep {i} is not a permutation"
        );
    }
    // The first sweep is the default run's.
    assert_eq!(&order[..all.len()], &all_keys(&one)[..]);
    // Sweeps differ (randomized anew), and lines marked sweep_end end at sweep boundaries.
    assert_ne!(&order[..all.len()], &order[all.len()..2 * all.len()]);
    let marked: Vec<u64> = three7
        .iter()
        .filter(|l| l.sweep_end)
        .map(|l| l.position)
        .collect();
    assert_eq!(marked, [total, 2 * total, 3 * total]);
}

// ---------------------------------------------------------------------------------------------
// 3. Restore
// ---------------------------------------------------------------------------------------------

#[test]
fn restore_continues_exactly_where_the_token_was_taken() {
    let (dir, _) = setup(60);
    let d = dir.path();
    let full = read(d, &["--mb-size", "16", "--max-sweeps", "2"]);
    let order = all_keys(&full);
    let n = full.len();
    assert!(n > 10);
    for k in [0, 1, n / 3, n / 2 - 1, n / 2, n - 2] {
        let token = &full[k].checkpoint;
        let rest = read(
            d,
            &["--mb-size", "16", "--max-sweeps", "2", "--restore", token],
        );
        let expected = &full[k + 1..];
        assert_eq!(rest.len(), expected.len(), "restore after line {k}");
        for (i, (got, want)) in rest.iter().zip(expected).enumerate() {
            assert_eq!(got.mb, i as u64, "mb restarts at 0");
            assert_eq!(got.content(), want.content(), "restore after line {k}");
        }
        // Another minibatch size after the restore: the same sequences in the same order.
        let rest = read(
            d,
            &["--mb-size", "5", "--max-sweeps", "2", "--restore", token],
        );
        let consumed: usize = full[..=k].iter().map(|l| l.keys.len()).sum();
        assert_eq!(all_keys(&rest), &order[consumed..], "after line {k}, mb 5");
        assert_eq!(rest.last().unwrap().position, full.last().unwrap().position);
    }
    // The last token: nothing left.
    let r = run_expect(
        &[
            "read",
            "r.cntk",
            "--jsonl",
            "--mb-size",
            "16",
            "--max-sweeps",
            "2",
            "--restore",
            &full[n - 1].checkpoint,
        ],
        Some(d),
        0,
    );
    assert_eq!(r.stdout, "");

    // A token of another configuration (another seed; other inputs) is refused.
    let token = &full[3].checkpoint;
    let r = run_expect(
        &[
            "read",
            "other.cntk",
            "--jsonl",
            "--mb-size",
            "16",
            "--restore",
            token,
        ],
        Some(d),
        2,
    );
    assert_eq!(r.stdout, "");
    let r = run_expect(
        &[
            "read",
            "r.cntk",
            "--input",
            "x:2:dense",
            "--jsonl",
            "--mb-size",
            "16",
            "--restore",
            token,
        ],
        Some(d),
        2,
    );
    assert_eq!(r.stdout, "");
    // Malformed tokens.
    let mut truncated = token.clone();
    truncated.truncate(token.len() - 3);
    let mut flipped = token.clone().into_bytes();
    let last = flipped.len() - 1;
    flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    for bad in ["", "zzz", "not-a-token", &truncated, &flipped] {
        let r = run_expect(
            &["read", "r.cntk", "--mb-size", "16", "--restore", bad],
            Some(d),
            2,
        );
        assert_eq!(r.stdout, "", "{bad:?}");
    }
}

/// `--restore` takes the token's 40 hex digits in either case, and nothing else: a `+` in a
/// digit pair (which `u8::from_str_radix` would read, `+0` as `00`) is refused, not read as
/// the checkpoint it imitates.
/// A window of 0 chunks reads in file order, as CNTK, which takes its `NoRandomizer` for a
/// window that is not above 0 (CNTK-BEHAVIOUR §2.2); it was read as a window of 1 chunk,
/// shuffled, with no word.
#[test]
fn a_window_of_zero_chunks_reads_in_file_order() {
    let dir = TempDir::new().unwrap();
    let seqs = make_data(dir.path(), 60, 11);
    let config = |window: &str, randomize: &str| {
        format!(
            "reader = [ file = \"d.ctf\" ; chunkSizeInBytes = 0 ; {window} {randomize}\n\
             input = [ x = [ dim = 2 ; format = \"dense\" ] ; y = [ dim = 10 ; format = \"sparse\" ] ] ]\n"
        )
    };
    write(
        dir.path(),
        "zero.cntk",
        config("randomizationWindow = 0", ""),
    );
    write(
        dir.path(),
        "one.cntk",
        config("randomizationWindow = 1", ""),
    );
    write(dir.path(), "plain.cntk", config("", "randomize = false"));
    let file_order: Vec<u64> = seqs.keys().copied().collect();
    let args = ["--mb-size", "16", "--max-sweeps", "2"];
    let zero = read_with(dir.path(), "zero.cntk", &args);
    let plain = read_with(dir.path(), "plain.cntk", &args);
    assert_eq!(
        all_keys(&zero),
        [file_order.clone(), file_order.clone()].concat()
    );
    let contents = |lines: &[Line]| -> Vec<(Vec<u64>, u64, bool)> {
        lines
            .iter()
            .map(|l| (l.keys.clone(), l.position, l.sweep_end))
            .collect()
    };
    assert_eq!(contents(&zero), contents(&plain));
    // A window of one chunk does shuffle (the chunk order), so the test can tell them apart.
    let one = read_with(dir.path(), "one.cntk", &args);
    assert_ne!(all_keys(&one)[..60], file_order[..]);
}

#[test]
fn restore_takes_hex_digits_of_either_case_and_nothing_else() {
    let (dir, _) = setup(30);
    let d = dir.path();
    let full = read(d, &["--mb-size", "16"]);
    let token = &full[1].checkpoint;
    let restored = |token: &str| read(d, &["--mb-size", "16", "--restore", token]);
    let rest = restored(token);
    assert_eq!(rest.len(), full.len() - 2);
    assert_eq!(restored(&token.to_ascii_uppercase()), rest);
    // The position's high bytes are zero: a `00` pair after the 4-byte header.
    let at = (4..12)
        .map(|pair| 2 * pair)
        .rfind(|&at| &token[at..at + 2] == "00")
        .expect("a zero byte in the position");
    let forged = format!("{}+0{}", &token[..at], &token[at + 2..]);
    assert_eq!(forged.len(), 40);
    let r = run_expect(
        &["read", "r.cntk", "--mb-size", "16", "--restore", &forged],
        Some(d),
        2,
    );
    assert_eq!(r.stdout, "");
    assert!(r.stderr.contains("hexadecimal"), "{}", r.stderr);
}

// ---------------------------------------------------------------------------------------------
// 4. --max-samples
// ---------------------------------------------------------------------------------------------

#[test]
fn max_samples_ends_at_the_first_sequence_end_at_or_after_it_also_after_restore() {
    let (dir, seqs) = setup(60);
    let d = dir.path();
    let long = read(d, &["--mb-size", "16", "--max-sweeps", "3"]);
    let sequence_ends = ends(&all_keys(&long), &seqs);
    let total: u64 = seqs.values().map(|s| s.x_samples).sum();
    for limit in [1, 10, 37, 100, total - 1, total, total + 5, 2 * total + 13] {
        let want = *sequence_ends.iter().find(|&&e| e >= limit).unwrap();
        let s = limit.to_string();
        for mb in ["16", "3", "1000"] {
            let lines = read(d, &["--mb-size", mb, "--max-samples", &s]);
            let last = lines.last().unwrap();
            assert_eq!(last.position, want, "--max-samples {limit} --mb-size {mb}");
            // The same sequences as the long run, in the same order.
            let got = all_keys(&lines);
            assert_eq!(ends(&got, &seqs).last(), Some(&want));
            assert_eq!(&got[..], &all_keys(&long)[..got.len()]);
            // Restored after a line: still ends at the same position, counting from 0.
            if lines.len() >= 2 {
                let k = lines.len() / 2 - 1;
                let rest = read(
                    d,
                    &[
                        "--mb-size",
                        mb,
                        "--max-samples",
                        &s,
                        "--restore",
                        &lines[k].checkpoint,
                    ],
                );
                assert_eq!(
                    rest.last().map(|l| l.position),
                    Some(want),
                    "--max-samples {limit} --mb-size {mb} restored after line {k}"
                );
                assert_eq!(
                    all_keys(&rest),
                    &got[lines[..=k].iter().map(|l| l.keys.len()).sum()..]
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Workers
// ---------------------------------------------------------------------------------------------

#[test]
fn ranks_partition_every_global_minibatch() {
    let (dir, _) = setup(60);
    let d = dir.path();
    let base = ["--mb-size", "24", "--max-sweeps", "2"];
    let global = read(d, &[&base[..], &["--workers", "1"]].concat());
    assert_eq!(
        global,
        read(d, &base),
        "--workers 1 differs from no --workers"
    );
    let by_position: BTreeMap<u64, &Line> = global.iter().map(|l| (l.position, l)).collect();
    for k in 1..=4u32 {
        let mut union: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for r in 0..k {
            let (ks, rs) = (k.to_string(), r.to_string());
            let lines = read(d, &[&base[..], &["--workers", &ks, "--rank", &rs]].concat());
            assert!(
                lines.iter().map(|l| l.keys.len()).sum::<usize>() > 0,
                "rank {r} of {k} read nothing"
            );
            for line in &lines {
                let g = by_position.get(&line.position).unwrap_or_else(|| {
                    panic!("rank {r} of {k}: no global minibatch ends at {line:?}")
                });
                // `mb` is the global minibatch index (empty shares print no line).
                assert_eq!(line.mb, g.mb, "rank {r} of {k}: {line:?}");
                assert_eq!(line.sweep_end, g.sweep_end, "rank {r} of {k}: {line:?}");
                union
                    .entry(line.position)
                    .or_default()
                    .extend(line.keys.iter().copied());
            }
        }
        for g in &global {
            let got = union.remove(&g.position).unwrap_or_default();
            let distinct: BTreeSet<u64> = got.iter().copied().collect();
            assert_eq!(
                distinct.len(),
                got.len(),
                "{k} workers: shares overlap at {g:?}"
            );
            assert_eq!(sorted(got), sorted(g.keys.clone()), "{k} workers at {g:?}");
        }
    }
    for (workers, rank) in [("1", "1"), ("3", "3"), ("2", "5")] {
        let r = run_expect(
            &[
                &["read", "r.cntk"][..],
                &base,
                &["--workers", workers, "--rank", rank],
            ]
            .concat(),
            Some(d),
            2,
        );
        assert_eq!(r.stdout, "");
    }
    let r = run_expect(
        &[&["read", "r.cntk"][..], &base, &["--workers", "0"]].concat(),
        Some(d),
        2,
    );
    assert_eq!(r.stdout, "");
    // A rank without --workers keeps the configuration's numDataPartitions, here the
    // default 1: rank 1 is out of range.
    run_expect(
        &[&["read", "r.cntk"][..], &base, &["--rank", "1"]].concat(),
        Some(d),
        2,
    );
}

/// `--workers` and `--rank` each replace only their own key: the other one comes from the
/// configuration (`numDataPartitions`, `partitionIndex`), and only without it from the
/// defaults (1 worker, rank 0).
#[test]
fn workers_and_rank_given_alone_keep_the_other_key_of_the_configuration() {
    let (dir, _) = setup(60);
    let d = dir.path();
    write(
        d,
        "rank1of2.cntk",
        config_text(1, "; numDataPartitions = 2 ; partitionIndex = 1"),
    );
    let base = ["--mb-size", "24", "--max-sweeps", "2"];
    let rank = |r: &str, k: &str| read(d, &[&base[..], &["--workers", k, "--rank", r]].concat());
    let (rank0, rank1) = (rank("0", "2"), rank("1", "2"));
    assert_ne!(all_keys(&rank0), all_keys(&rank1));
    // The configuration alone, and each flag alone with the configuration's value of the
    // other: rank 1 of 2.
    for args in [&[][..], &["--workers", "2"], &["--rank", "1"]] {
        let lines = read_with(d, "rank1of2.cntk", &[&base[..], args].concat());
        assert_eq!(lines, rank1, "{args:?}");
    }
    // `--rank 0` alone: rank 0 of the configuration's 2 workers.
    let lines = read_with(d, "rank1of2.cntk", &[&base[..], &["--rank", "0"]].concat());
    assert_eq!(lines, rank0);
    // `--workers 3` alone keeps partitionIndex 1: rank 1 of 3, not of 2.
    let lines = read_with(
        d,
        "rank1of2.cntk",
        &[&base[..], &["--workers", "3"]].concat(),
    );
    assert_eq!(lines, rank("1", "3"));
    assert_ne!(lines, rank1);
    // `--workers 1` alone leaves partitionIndex 1 out of range: exit 2, at the
    // configuration's key (line 2, column 49), naming both sources.
    let r = run_expect(
        &[&["read", "rank1of2.cntk"][..], &base, &["--workers", "1"]].concat(),
        Some(d),
        2,
    );
    assert_eq!(r.stdout, "");
    assert_eq!(
        r.stderr,
        "rank1of2.cntk:2:49: error: rank 1 (parameter 'partitionIndex') must be below the \
         number of workers, 1 (--workers)\n"
    );
    // `--rank 2` alone against the configuration's 2 workers (line 2, column 25).
    let r = run_expect(
        &[&["read", "rank1of2.cntk"][..], &base, &["--rank", "2"]].concat(),
        Some(d),
        2,
    );
    assert_eq!(
        r.stderr,
        "rank1of2.cntk:2:25: error: rank 2 (--rank) must be below the number of workers, 2 \
         (parameter 'numDataPartitions')\n"
    );
    // Both from the command line: no position.
    let r = run_expect(
        &[
            &["read", "rank1of2.cntk"][..],
            &base,
            &["--workers", "2", "--rank", "2"],
        ]
        .concat(),
        Some(d),
        2,
    );
    assert_eq!(
        r.stderr,
        "error: rank 2 (--rank) must be below the number of workers, 2 (--workers)\n"
    );
}

/// `--workers` and `--rank` stand in for macros in `numDataPartitions` and
/// `partitionIndex`, whose errors suggest them.
#[test]
fn workers_and_rank_stand_in_for_macros_of_the_partition_keys() {
    let (dir, _) = setup(60);
    let d = dir.path();
    write(
        d,
        "macros.cntk",
        config_text(1, "; numDataPartitions = $K$ ; partitionIndex = $R$"),
    );
    write(
        d,
        "rank1of2.cntk",
        config_text(1, "; numDataPartitions = 2 ; partitionIndex = 1"),
    );
    let base = ["--mb-size", "24", "--max-sweeps", "2"];
    let r = run_expect(
        &[&["read", "macros.cntk"][..], &base, &["--rank", "1"]].concat(),
        Some(d),
        2,
    );
    assert!(
        r.stderr
            .starts_with("macros.cntk:2:45: error: parameter 'numDataPartitions'")
            && r.stderr.contains("(or pass --workers to ctf read)"),
        "{}",
        r.stderr
    );
    let r = run_expect(
        &[&["read", "macros.cntk"][..], &base, &["--workers", "2"]].concat(),
        Some(d),
        2,
    );
    assert!(
        r.stderr
            .starts_with("macros.cntk:2:68: error: parameter 'partitionIndex'")
            && r.stderr.contains("(or pass --rank to ctf read)"),
        "{}",
        r.stderr
    );
    let args = [&base[..], &["--workers", "2", "--rank", "1"]].concat();
    assert_eq!(
        read_with(d, "macros.cntk", &args),
        read_with(d, "rank1of2.cntk", &base)
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Argument checks and the minibatch-size schedule
// ---------------------------------------------------------------------------------------------

#[test]
fn bad_limits_and_sizes_are_usage_errors() {
    let (dir, _) = setup(20);
    let d = dir.path();
    for args in [
        &["--mb-size", "8", "--max-samples", "10", "--max-sweeps", "1"][..],
        &["--mb-size", "0"],
        &["--mb-size", "abc"],
        &["--mb-size", "-3"],
        &["--mb-size", "128*0:5"],
        &["--mb-size", "128*2:"],
    ] {
        let r = run_expect(
            &[&["read", "r.cntk", "--jsonl"][..], args].concat(),
            Some(d),
            2,
        );
        assert_eq!(r.stdout, "", "{args:?}");
    }
}

#[test]
fn a_schedule_changes_the_size_per_epoch_and_minibatches_stop_at_epoch_ends() {
    let dir = TempDir::new().unwrap();
    let seqs = make_data(dir.path(), 240, 11);
    write(dir.path(), "r.cntk", config_text(5, ""));
    let total: u64 = seqs.values().map(|s| s.x_samples).sum();
    let epoch = 300u64;
    assert!(total > 3 * epoch, "{total}");
    let e = epoch.to_string();
    let limit = (6 * epoch).to_string();
    let lines = read(
        dir.path(),
        &[
            "--mb-size",
            "128*2:1024",
            "--epoch-size",
            &e,
            "--max-samples",
            &limit,
        ],
    );
    let order = all_keys(&lines);
    let sequence_ends = ends(&order, &seqs);
    let mut start = 0;
    let mut big = false;
    for line in &lines {
        let size = line.samples["x"];
        assert_eq!(line.position - start, size, "{line:?}");
        if start < 2 * epoch {
            assert!(size <= 128 || line.keys.len() == 1, "{line:?}");
        }
        if start >= 2 * epoch && size > 128 {
            big = true;
        }
        // An epoch boundary inside this minibatch: it ends at the first sequence end at or
        // after the boundary.
        for m in 1..=6 {
            let boundary = m * epoch;
            if start < boundary && boundary <= line.position {
                let first_end = *sequence_ends.iter().find(|&&e| e >= boundary).unwrap();
                assert_eq!(
                    line.position, first_end,
                    "minibatch {line:?} (from {start}) crosses the end of epoch {m}"
                );
            }
        }
        start = line.position;
    }
    assert!(big, "the size never grew to 1024 after two epochs");
    // The same sequences as with a constant size.
    let constant = read(dir.path(), &["--mb-size", "50", "--max-samples", &limit]);
    assert_eq!(all_keys(&constant), order);
}

// ---------------------------------------------------------------------------------------------
// 7. Summary and counters
// ---------------------------------------------------------------------------------------------

#[test]
fn without_jsonl_stdout_is_empty_and_the_summary_is_on_stderr() {
    let (dir, seqs) = setup(30);
    let d = dir.path();
    let summary_keys = [
        "minibatches",
        "samples",
        "sequences",
        "MB/s",
        "samples/s",
        "elapsed",
    ];
    let counter_keys = [
        "chunks loaded",
        "bytes read",
        "quick bytes read",
        "cache hits",
        "cache misses",
    ];
    let value = |stderr: &str, name: &str| -> Option<String> {
        let prefix = format!("{name}: ");
        stderr
            .lines()
            .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
    };
    let r = run_expect(&["read", "r.cntk", "--mb-size", "16"], Some(d), 0);
    assert_eq!(r.stdout, "");
    for k in summary_keys {
        assert!(value(&r.stderr, k).is_some(), "no {k}: in\n{}", r.stderr);
    }
    for k in counter_keys {
        assert!(
            value(&r.stderr, k).is_none(),
            "{k}: without --stats\n{}",
            r.stderr
        );
    }
    assert_eq!(value(&r.stderr, "sequences").unwrap(), "30");
    let total: u64 = seqs.values().map(|s| s.x_samples).sum();
    assert_eq!(value(&r.stderr, "samples").unwrap(), total.to_string());

    let r = run_expect(
        &["read", "r.cntk", "--mb-size", "16", "--stats"],
        Some(d),
        0,
    );
    assert_eq!(r.stdout, "");
    for k in summary_keys.iter().chain(&counter_keys) {
        assert!(value(&r.stderr, k).is_some(), "no {k}: in\n{}", r.stderr);
    }
    let n = |k: &str| -> u64 { value(&r.stderr, k).unwrap().trim().parse().unwrap() };
    assert!(n("chunks loaded") > 1, "{}", r.stderr);
    let file_size = std::fs::metadata(d.join("d.ctf")).unwrap().len();
    // Every byte is read, in whole parts or by the first minibatch's packer: a part whose
    // sequences that minibatch holds all is read whole only if its load, asked for ahead,
    // completes before the run ends.
    assert!(
        n("bytes read") + n("quick bytes read") >= file_size,
        "{}",
        r.stderr
    );
    // Read ahead of their parts: at most the first minibatch's 16 samples' lines.
    assert!(n("quick bytes read") < file_size / 2, "{}", r.stderr);
    // With --jsonl the counters are still on stderr, never on stdout.
    let r = run_expect(
        &["read", "r.cntk", "--mb-size", "16", "--stats", "--jsonl"],
        Some(d),
        0,
    );
    assert!(value(&r.stderr, "chunks loaded").is_some(), "{}", r.stderr);
    parse_lines(&r.stdout);
}

// ---------------------------------------------------------------------------------------------
// 8. Data errors and maxErrors
// ---------------------------------------------------------------------------------------------

#[test]
fn an_invalid_sequence_fails_the_read_unless_max_errors_allows_it() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let seqs = make_data(d, 40, 3);
    // Make sequence 17 invalid: a bad value on its first line.
    let text = std::fs::read_to_string(d.join("d.ctf")).unwrap();
    let mut bad_line = 0;
    let lines: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if bad_line == 0 && l.starts_with("17 ") {
                bad_line = i + 1;
                l.replacen("|x ", "|x 1.5x ", 1)
            } else {
                l.to_string()
            }
        })
        .collect();
    write(d, "d.ctf", lines.join("\n") + "\n");
    write(d, "r.cntk", config_text(1, ""));
    write(d, "tolerant.cntk", config_text(1, "; maxErrors = 1"));

    let r = run_expect(
        &["read", "r.cntk", "--mb-size", "16", "--jsonl"],
        Some(d),
        1,
    );
    let errors = diags(&r.stderr, "error");
    assert!(!errors.is_empty(), "{}", r.stderr);
    assert!(
        errors
            .iter()
            .any(|e| e.file == "d.ctf" && e.line == bad_line as u64 && e.col >= 1),
        "no located error on line {bad_line}:\n{}",
        r.stderr
    );
    // What was printed before the failure is whole JSON lines only.
    parse_lines(&r.stdout);

    let lines = read_with(
        d,
        "tolerant.cntk",
        &["--mb-size", "16", "--max-sweeps", "3"],
    );
    let keys = all_keys(&lines);
    assert!(!keys.contains(&17), "the invalid sequence was delivered");
    let valid: Vec<u64> = seqs.keys().copied().filter(|&k| k != 17).collect();
    assert_eq!(keys.len(), 3 * valid.len());
    for sweep in keys.chunks(valid.len()) {
        assert_eq!(sorted(sweep.to_vec()), valid);
    }
    let r = run_expect(
        &[
            "read",
            "tolerant.cntk",
            "--mb-size",
            "16",
            "--max-sweeps",
            "3",
            "--jsonl",
        ],
        Some(d),
        0,
    );
    let errors = diags(&r.stderr, "error");
    assert_eq!(errors.len(), 1, "reported more than once:\n{}", r.stderr);
    assert_eq!(errors[0].line, bad_line as u64, "{}", r.stderr);
}

/// The threaded engine's output does not depend on its thread count (issue 5).
#[test]
fn jsonl_is_identical_at_any_thread_count() {
    let (dir, _) = setup(150);
    let one = run_expect(
        &[
            "read",
            "r.cntk",
            "--jsonl",
            "--mb-size",
            "9",
            "--max-sweeps",
            "2",
            "--threads",
            "1",
        ],
        Some(dir.path()),
        0,
    );
    assert!(one.stdout.lines().count() > 10);
    for threads in ["2", "4"] {
        let other = run_expect(
            &[
                "read",
                "r.cntk",
                "--jsonl",
                "--mb-size",
                "9",
                "--max-sweeps",
                "2",
                "--threads",
                threads,
            ],
            Some(dir.path()),
            0,
        );
        assert_eq!(one.stdout, other.stdout, "--threads {threads}");
    }
}

/// On a cold start with a window covering the corpus, the index build parses the parts it
/// reads and the loaders take them (`parts parsed while indexing`);
/// `--no-parse-while-indexing` reads and parses them when loaded. The minibatches are the
/// same.
#[test]
fn parsing_while_indexing_changes_nothing_but_the_counter() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    make_data(d, 12_000, 5);
    assert!(std::fs::metadata(d.join("d.ctf")).unwrap().len() > 1 << 20);
    // The default window, 128 chunks of 64 KiB: the whole corpus.
    write(
        d,
        "w.cntk",
        "reader = [ file = \"d.ctf\" ; chunkSizeInBytes = 65536\n\
         input = [ x = [ dim = 2 ; format = \"dense\" ] ; y = [ dim = 10 ; format = \"sparse\" ] ] ]\n",
    );
    let parsed_while_indexing = |stderr: &str| -> u64 {
        stderr
            .lines()
            .find_map(|l| l.strip_prefix("parts parsed while indexing: "))
            .unwrap_or_else(|| panic!("no counter in\n{stderr}"))
            .trim()
            .parse()
            .unwrap()
    };
    let args = [
        "read",
        "w.cntk",
        "--jsonl",
        "--mb-size",
        "64",
        "--threads",
        "2",
        "--stats",
    ];
    let on = run_expect(&args, Some(d), 0);
    let mut without = args.to_vec();
    without.push("--no-parse-while-indexing");
    let off = run_expect(&without, Some(d), 0);
    assert!(on.stdout.lines().count() > 100);
    assert_eq!(on.stdout, off.stdout);
    assert!(parsed_while_indexing(&on.stderr) > 0, "{}", on.stderr);
    assert_eq!(parsed_while_indexing(&off.stderr), 0, "{}", off.stderr);
}
