//! Integration tests of `ctf index` and `ctf stats` against their contract (SPEC §7.5 and the
//! commands' help): exact summaries on stdout and nothing else, index caches next to the data,
//! warnings and errors on stderr, exit codes, the maxErrors policy, globs and cached indexes.

#[allow(dead_code)]
mod cli_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use cli_support::*;
use ctf_reader::index::build::CacheMode;
use ctf_reader::index::cache::{cache_path, IndexFingerprint};
use ctf_reader::index::{build_index, IndexingOptions};
use ctf_reader::{InputConfig, ReaderConfig};
use tempfile::TempDir;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The `key: value` lines of a summary, checking that every line has that form.
fn pairs(stdout: &str) -> Vec<(String, String)> {
    assert!(stdout.ends_with('\n'), "no final newline: {stdout:?}");
    stdout
        .lines()
        .map(|line| {
            let (k, v) = line
                .split_once(": ")
                .unwrap_or_else(|| panic!("not a `key: value` line: {line:?}\n{stdout}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// Checks an `index` summary: exactly the keys of the contract, in order, with the given
/// values (`seconds` and `GB/s` are checked for their form only). Returns the seconds.
fn check_index_summary(stdout: &str, inputs: &[&str], expected: &[(&str, String)]) -> f64 {
    let got = pairs(stdout);
    let mut keys = vec!["files".to_string(), "sequences".to_string()];
    keys.extend(inputs.iter().map(|i| format!("samples {i}")));
    keys.extend(
        ["chunks", "bytes", "seconds", "GB/s", "caches written"]
            .iter()
            .map(|k| k.to_string()),
    );
    let got_keys: Vec<&String> = got.iter().map(|(k, _)| k).collect();
    assert_eq!(got_keys, keys.iter().collect::<Vec<_>>(), "{stdout}");
    for (key, value) in expected {
        let found = &got.iter().find(|(k, _)| k == key).unwrap().1;
        assert_eq!(found, value, "{key} in\n{stdout}");
    }
    let three_decimals = |key: &str| -> f64 {
        let v = &got.iter().find(|(k, _)| k == key).unwrap().1;
        let (_, decimals) = v.split_once('.').unwrap_or_else(|| panic!("{key}: {v}"));
        assert_eq!(decimals.len(), 3, "{key}: {v}");
        v.parse().unwrap_or_else(|_| panic!("{key}: {v}"))
    };
    let seconds = three_decimals("seconds");
    let rate = three_decimals("GB/s");
    assert!(seconds >= 0.0 && rate >= 0.0, "{stdout}");
    seconds
}

fn expect(key: &str, value: impl ToString) -> (&str, String) {
    (key, value.to_string())
}

/// The index cache files (`NAME.<8 hex>.ctfidx`) of data file `name` in `dir`.
fn caches_of(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let file = p.file_name().unwrap().to_str().unwrap();
            file.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('.'))
                .and_then(|rest| rest.strip_suffix(".ctfidx"))
                .is_some_and(|hex| hex.len() == 8 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .collect();
    found.sort();
    found
}

fn config_of(files: &[&Path], inputs: &[InputConfig]) -> ReaderConfig {
    ReaderConfig::builder()
        .files(files.iter().map(|f| s(f).to_string()))
        .inputs(inputs.iter().cloned())
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// ctf index
// ---------------------------------------------------------------------------------------------

/// Id mode. Sequences: 1 (2 lines: a twice, b once), 2, 3; `9 |zz 5` holds no configured
/// input (an index entry with 0 samples, not a sequence).
const A_CTF: &str = "1 |a 1 2 |b 0:1\n1 |a 3 4\n2 |a 5 6 |b 1:1 2:2\n9 |zz 5\n3 |b 4:1 |a 0 0\n";
/// Sequences 10 and 11 (2 lines: a twice, b once, an empty sparse sample).
const B_CTF: &str = "10 |a 1 1 |b 0:1\n11 |a 2 2 |b\n11 |a 3 3\n";
const AB_INPUTS: [&str; 4] = ["--input", "a:2:dense", "--input", "b:5:sparse"];

fn ab_inputs() -> [InputConfig; 2] {
    [InputConfig::dense("a", 2), InputConfig::sparse("b", 5)]
}

#[test]
fn index_two_files_in_id_mode() {
    let dir = TempDir::new().unwrap();
    let a = write(dir.path(), "a.ctf", A_CTF);
    let b = write(dir.path(), "b.ctf", B_CTF);

    // The premise: the index has an entry with 0 samples, which `sequences` must not count.
    let config = config_of(&[&a, &b], &ab_inputs());
    let mut options = IndexingOptions::for_config(&config);
    options.cache = CacheMode::Off;
    let opened = build_index(&config, &options).unwrap();
    assert_eq!(opened.index.sequences.len(), 6);
    assert_eq!(
        opened
            .index
            .sequences
            .iter()
            .filter(|e| e.samples == 0)
            .count(),
        1
    );

    let args = [
        &["index", "--file", "a.ctf", "--file", "b.ctf"][..],
        &AB_INPUTS,
    ]
    .concat();
    for _ in 0..2 {
        let r = run_expect(&args, Some(dir.path()), 0);
        check_index_summary(
            &r.stdout,
            &["a", "b"],
            &[
                expect("files", 2),
                expect("sequences", 3 + 2),
                // Lines holding a: 4 in a.ctf, 3 in b.ctf; holding b: 3 and 2.
                expect("samples a", 4 + 3),
                expect("samples b", 3 + 2),
                expect("chunks", 2),
                expect("bytes", A_CTF.len() + B_CTF.len()),
                // Every cache is written on every run, whatever cacheIndex says.
                expect("caches written", 2),
            ],
        );
        assert_eq!(
            r.stderr, "",
            "no warning, no progress bar when not a terminal"
        );
    }
    let fingerprint = IndexFingerprint::of(&config);
    for (data, name) in [(&a, "a.ctf"), (&b, "b.ctf")] {
        let cache = cache_path(data, &fingerprint);
        assert!(cache.is_file(), "{} missing", cache.display());
        assert_eq!(caches_of(dir.path(), name), [cache]);
    }
}

/// `part-0.ctf` .. `part-2.ctf` (line mode) and `other.ctf`, which the glob must not match.
fn parts(dir: &Path) -> Vec<(String, &'static str)> {
    let texts = [
        "|a 1 1 |b 0:1\n|a 2 2 |b 1:1\n",
        "|# a comment-only line\n|a 3 3 |b 2:3 4:1\n",
        "|a 4 4 |b\n|a 5 5 |b 3:1\n|a 6 6 |b 0:2\n",
    ];
    write(dir, "other.ctf", "|a 9 9 |b 0:9\n");
    texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let name = format!("part-{i}.ctf");
            write(dir, &name, text);
            (name, *text)
        })
        .collect()
}

#[test]
fn index_a_glob_pattern() {
    let dir = TempDir::new().unwrap();
    let parts = parts(dir.path());
    let pattern = format!("{}/part-*.ctf", s(dir.path()));
    let args = [&["index", "--file", pattern.as_str()][..], &AB_INPUTS].concat();
    let bytes: usize = parts.iter().map(|(_, t)| t.len()).sum();
    for _ in 0..2 {
        // The second run also proves that the caches are not taken for data by the glob.
        let r = run_expect(&args, None, 0);
        check_index_summary(
            &r.stdout,
            &["a", "b"],
            &[
                expect("files", 3),
                // Line mode: one sequence per line holding a configured input.
                expect("sequences", 2 + 1 + 3),
                expect("samples a", 6),
                expect("samples b", 6),
                expect("chunks", 3),
                expect("bytes", bytes),
                expect("caches written", 3),
            ],
        );
        assert_eq!(r.stderr, "");
    }
    for (name, _) in &parts {
        assert_eq!(caches_of(dir.path(), name).len(), 1, "{name}");
    }
    assert!(caches_of(dir.path(), "other.ctf").is_empty());
}

#[test]
fn validate_counts_the_files_a_glob_matches() {
    // Regression: validate printed the number of configured names, not of files.
    let dir = TempDir::new().unwrap();
    parts(dir.path());
    let pattern = format!("{}/part-*.ctf", s(dir.path()));
    let args = [&["validate", "--file", pattern.as_str()][..], &AB_INPUTS].concat();
    let r = run_expect(&args, None, 0);
    assert!(r.stdout.starts_with("files: 3\n"), "{}", r.stdout);
}

#[test]
fn index_counts_samples_per_input_from_lines_with_defines_mb_size() {
    let dir = TempDir::new().unwrap();
    // Sequence 1: x on 3 lines, y on 1; sequence 2: x on 1 line, y on 2.
    write(
        dir.path(),
        "m.ctf",
        "1 |x 1 |y 1\n1 |x 2\n1 |x 3\n2 |x 4 |y 2\n2 |y 3\n",
    );
    write(
        dir.path(),
        "m.cntk",
        "reader = [\n  file = \"m.ctf\"\n  input = [\n    x = [ dim = 1 ; format = \"dense\" ]\n    \
         y = [ dim = 1 ; format = \"dense\" ; definesMBSize = true ]\n  ]\n]\n",
    );
    let r = run_expect(&["index", "m.cntk"], Some(dir.path()), 0);
    check_index_summary(
        &r.stdout,
        &["x", "y"],
        &[
            expect("files", 1),
            expect("sequences", 2),
            expect("samples x", 4),
            expect("samples y", 3),
            expect("chunks", 1),
            expect("caches written", 1),
        ],
    );
    // stats agrees on the samples of each input.
    let r = run_expect(&["stats", "m.cntk"], Some(dir.path()), 0);
    assert!(
        r.stdout.contains("\nsamples x: 4\nsamples y: 3\n"),
        "{}",
        r.stdout
    );
}

#[test]
fn index_warns_when_a_cache_cannot_be_written() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "d.ctf", "1 |a 1 1 |b 0:1\n2 |a 2 2 |b 1:1\n");
    let config = config_of(&[Path::new("d.ctf")], &ab_inputs());
    let cache = cache_path(Path::new("d.ctf"), &IndexFingerprint::of(&config));
    // A non-empty directory where the cache file should go: no rename can replace it.
    write(&dir.path().join(&cache), "keep", "x");

    let args = [&["index", "--file", "d.ctf"][..], &AB_INPUTS].concat();
    let r = run_expect(&args, Some(dir.path()), 0);
    check_index_summary(
        &r.stdout,
        &["a", "b"],
        &[
            expect("files", 1),
            expect("sequences", 2),
            expect("caches written", 0),
        ],
    );
    let prefix = format!("{}: warning: ", cache.display());
    assert!(
        r.stderr.lines().any(|l| l.starts_with(&prefix)),
        "no `{prefix}...` line:\n{}",
        r.stderr
    );
    assert!(!r.stderr.contains(": error: "), "{}", r.stderr);
    assert!(dir.path().join(&cache).join("keep").is_file());
}

#[test]
fn index_and_stats_data_errors_exit_1() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "empty.ctf", "");
    write(dir.path(), "ok.ctf", "1 |v 1\n");
    for sub in ["index", "stats"] {
        let r = run_expect(
            &[sub, "--file", "empty.ctf", "--input", "v:1:dense"],
            Some(dir.path()),
            1,
        );
        assert!(
            r.stderr
                .lines()
                .any(|l| l == "empty.ctf: error: the file is empty"),
            "{sub}: {}",
            r.stderr
        );
        assert_eq!(r.stdout, "", "{sub}");

        for files in [&["missing.ctf"][..], &["ok.ctf", "missing.ctf"]] {
            let mut args = vec![sub];
            for f in files {
                args.extend(["--file", f]);
            }
            args.extend(["--input", "v:1:dense"]);
            let r = run_expect(&args, Some(dir.path()), 1);
            assert!(
                r.stderr.contains("missing.ctf: error: "),
                "{sub}: {}",
                r.stderr
            );
            assert_eq!(r.stdout, "", "{sub}");
        }
        // A glob that matches nothing.
        let r = run_expect(
            &[sub, "--file", "nothing-*.ctf", "--input", "v:1:dense"],
            Some(dir.path()),
            1,
        );
        assert!(r.stderr.contains("nothing-*.ctf"), "{sub}: {}", r.stderr);
    }
}

#[test]
fn index_and_stats_configuration_errors_exit_2() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    write(d, "ok.ctf", "1 |v 1\n");
    write(
        d,
        "dim0.cntk",
        "reader = [ file = \"ok.ctf\" ; input = [ v = [ dim = 0 ; format = \"dense\" ] ] ]",
    );
    write(
        d,
        "syntax.cntk",
        "reader = [ file = \"ok.ctf\" ; input = [ ",
    );
    write(
        d,
        "ok.cntk",
        "reader = [ file = \"ok.ctf\" ; input = [ v = [ dim = 1 ; format = \"dense\" ] ] ]",
    );
    for sub in ["index", "stats"] {
        for args in [
            &[sub, "dim0.cntk"][..],
            &[sub, "syntax.cntk"],
            &[sub, "absent.cntk"],
            &[sub, "ok.cntk", "--section", "nope"],
            &[sub, "--file", "ok.ctf"],
            &[sub, "ok.cntk", "--input", "v:0:dense"],
            &[sub, "ok.cntk", "--no-such-flag"],
        ] {
            let r = run_expect(args, Some(d), 2);
            assert_eq!(r.stdout, "", "{args:?}");
        }
        // Positive control.
        run_expect(&[sub, "ok.cntk"], Some(d), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// ctf stats
// ---------------------------------------------------------------------------------------------

/// Dense `d` (dim 2) and sparse `s` (dim 10), id mode.
///
/// | seq | lines | d samples (values)                    | s samples (nnz)        | length |
/// | 1   | 1     | 1: [1 2]                              | 1: (2)                 | 1      |
/// | 2   | 3     | 3: [-1.5 4] [0 0] [3 8]               | 2: (0) (1)             | 3      |
/// | 3   | 2     | 1: [10 -2]                            | 2: (3) (1)             | 2      |
/// | 4   | 5     | 5: [1 1] x4, [0.5 1]                  | 1: (1)                 | 5      |
/// | 5   | 8     | 8: [0 0] x8                           | 1: (1)                 | 8      |
/// | 6   | -     | `|other` only: not a sequence         |                        |        |
const STATS_CTF: &str = "\
1 |d 1 2 |s 0:1 3:2
2 |d -1.5 4 |s
2 |d 0 0 |s 9:1
2 |d 3 8
3 |d 10 -2 |s 1:1 2:1 3:1
3 |s 4:4
4 |d 1 1 |s 5:0.5
4 |d 1 1
4 |d 1 1
4 |d 1 1
4 |d 0.5 1
5 |d 0 0 |s 7:1
5 |d 0 0
5 |d 0 0
5 |d 0 0
5 |d 0 0
5 |d 0 0
5 |d 0 0
5 |d 0 0
6 |other 1 2 3
";

/// The expected `stats` output for [`STATS_CTF`], computed by hand.
fn stats_expected(chunks: usize) -> String {
    // d: 18 samples, 36 values; sum = (1+2) + (-1.5+4+0+0+3+8) + (10-2) + (1+1)*4 + (0.5+1)
    // + 0 = 3 + 13.5 + 8 + 8 + 1.5 = 34; mean 34 / 36 = 0.9444...
    // s: 7 samples, nnz 2 + 1 + 4 + 1 + 1 = 9; per sample 9 / 7 = 1.2857...
    // lengths 1, 3, 2, 5, 8: mean 19 / 5 = 3.8.
    format!(
        "files: 1\n\
         sequences: 5 valid, 0 invalid\n\
         chunks: {chunks}\n\
         samples d: 18\n\
         samples s: 7\n\
         sequence length: min 1, max 8, mean 3.800\n\
         length histogram:\n\
         \x20 1: 1\n\
         \x20 2-3: 2\n\
         \x20 4-7: 1\n\
         \x20 8-15: 1\n\
         input d: dense, dim 2, min -2, max 10, mean 0.944\n\
         input s: sparse, dim 10, nnz 9, nnz per sample 1.286\n"
    )
}

const DS_INPUTS: [&str; 4] = ["--input", "d:2:dense", "--input", "s:10:sparse"];

#[test]
fn stats_of_a_hand_written_corpus() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "st.ctf", STATS_CTF);
    for precision in ["float", "double"] {
        let args = [
            &["stats", "--file", "st.ctf", "--precision", precision][..],
            &DS_INPUTS,
        ]
        .concat();
        let r = run_expect(&args, Some(dir.path()), 0);
        assert_eq!(r.stdout, stats_expected(1), "{precision}");
        assert_eq!(r.stderr, "", "{precision}");
    }
    // One sequence per chunk: the same statistics over 6 chunks (the `|other` run is an index
    // entry of its own).
    write(
        dir.path(),
        "st.cntk",
        "reader = [ file = \"st.ctf\" ; chunkSizeInBytes = 0\n\
         input = [ d = [ dim = 2 ; format = \"dense\" ] ; s = [ dim = 10 ; format = \"sparse\" ] ] ]",
    );
    let r = run_expect(&["stats", "st.cntk"], Some(dir.path()), 0);
    assert_eq!(r.stdout, stats_expected(6));
    // No cache is written without cacheIndex.
    assert!(caches_of(dir.path(), "st.ctf").is_empty());
}

/// With `definesMBSize`, a sequence's length is that input's samples, as minibatches count
/// it (SPEC §3); it was always the largest input's.
#[test]
fn stats_counts_sequence_lengths_in_the_defines_mb_size_input() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "st.ctf", STATS_CTF);
    write(
        dir.path(),
        "st.cntk",
        "reader = [ file = \"st.ctf\"\n\
         input = [ d = [ dim = 2 ; format = \"dense\" ] ;\n\
         s = [ dim = 10 ; format = \"sparse\" ; definesMBSize = true ] ] ]",
    );
    let r = run_expect(&["stats", "st.cntk"], Some(dir.path()), 0);
    // The `s samples` column of the table above: 1, 2, 2, 1, 1.
    let expected = stats_expected(1).replace(
        "sequence length: min 1, max 8, mean 3.800\n\
         length histogram:\n\
         \x20 1: 1\n\
         \x20 2-3: 2\n\
         \x20 4-7: 1\n\
         \x20 8-15: 1\n",
        "sequence length: min 1, max 2, mean 1.400\n\
         length histogram:\n\
         \x20 1: 3\n\
         \x20 2-3: 2\n",
    );
    assert_ne!(expected, stats_expected(1));
    assert_eq!(r.stdout, expected);
}

#[test]
fn stats_prints_values_in_their_own_precision_and_dashes_when_there_are_none() {
    let dir = TempDir::new().unwrap();
    // Line mode; the third line holds only an unconfigured input.
    write(dir.path(), "v.ctf", "|v 0.3 |w\n|v -0.1 |w\n|u 7\n");
    for precision in ["float", "double"] {
        let r = run_expect(
            &[
                "stats",
                "--file",
                "v.ctf",
                "--input",
                "v:1:dense",
                "--input",
                "w:4:sparse",
                "--precision",
                precision,
            ],
            Some(dir.path()),
            0,
        );
        // Not the f64 widening of the float 0.3 (0.30000001192092896). The mean is (0.3 - 0.1)
        // / 2 = 0.1 up to rounding in either precision.
        assert_eq!(
            r.stdout,
            "files: 1\n\
             sequences: 2 valid, 0 invalid\n\
             chunks: 1\n\
             samples v: 2\n\
             samples w: 2\n\
             sequence length: min 1, max 1, mean 1.000\n\
             length histogram:\n\
             \x20 1: 2\n\
             input v: dense, dim 1, min -0.1, max 0.3, mean 0.100\n\
             input w: sparse, dim 4, nnz 0, nnz per sample 0.000\n",
            "{precision}"
        );
    }
    // No valid sequence at all (the only one is invalid, and skipped).
    write(dir.path(), "bad.ctf", "1 |v x\n");
    let r = run_expect(
        &[
            "stats",
            "--file",
            "bad.ctf",
            "--input",
            "v:1:dense",
            "--input",
            "w:4:sparse",
            "--max-errors",
            "1",
        ],
        Some(dir.path()),
        0,
    );
    assert_eq!(
        r.stdout,
        "files: 1\n\
         sequences: 0 valid, 1 invalid\n\
         chunks: 1\n\
         samples v: 0\n\
         samples w: 0\n\
         sequence length: min -, max -, mean -\n\
         length histogram:\n\
         input v: dense, dim 1, min -, max -, mean -\n\
         input w: sparse, dim 4, nnz 0, nnz per sample -\n"
    );
}

/// The `mean` of `ctf stats`' line for input `name`.
fn stats_mean(stdout: &str, name: &str) -> String {
    let prefix = format!("input {name}: ");
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} line in {stdout}"));
    let (_, mean) = line
        .split_once(", mean ")
        .unwrap_or_else(|| panic!("no mean in {line}"));
    mean.to_string()
}

/// Finite values have a finite mean even when their sum overflows a double: printed in
/// exponent form from 1e15 on, within the values' range, and accurate.
#[test]
fn stats_mean_of_values_whose_sum_overflows_is_finite() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let stats = |data: &str, precision: &str| {
        write(d, "big.ctf", data);
        let r = run_expect(
            &[
                "stats",
                "--file",
                "big.ctf",
                "--input",
                "x:2:dense",
                "--precision",
                precision,
            ],
            Some(d),
            0,
        );
        stats_mean(&r.stdout, "x")
    };
    // The report's case: two values whose sum is beyond f64::MAX.
    assert_eq!(stats("|x 1.7e308 1.7e308\n", "double"), "1.7e308");
    // The largest double: the mean stays within the values' range, never rounding past it.
    let max = "1.7976931348623157e308";
    assert_eq!(
        stats(&format!("|x {max} {max}\n|x {max} {max}\n"), "double"),
        max
    );
    // The sum overflows on the way and comes back: the mean is still right, (1.7 + 1.7 -
    // 1.7 - 1.5) / 4 e308 = 5e306 up to rounding.
    let mean: f64 = stats("|x 1.7e308 1.7e308\n|x -1.7e308 -1.5e308\n", "double")
        .parse()
        .unwrap();
    assert!((mean / 5e306 - 1.0).abs() < 1e-12, "{mean}");
    // Negative: the same in the other direction.
    assert_eq!(stats("|x -1.7e308 -1.7e308\n", "double"), "-1.7e308");
    // Large floats do not overflow a double sum; the mean is printed in the values' own
    // precision.
    assert_eq!(stats("|x 3e38 3e38\n", "float"), "3e38");
    // Below 1e15, three decimals as before.
    assert_eq!(stats("|x 1e14 3e14\n", "double"), "200000000000000.000");
    assert_eq!(stats("|x 1e15 3e15\n", "double"), "2e15");
}

/// Sequences 1..=7 of one dense input; 2 and 4 are invalid (col 6 is the bad value); line 8
/// holds a short sample (zero-padded, a warning).
const TWO_BAD: &str = "1 |a 1 1\n2 |a x 1\n3 |a 3 3\n4 |a 1 y\n5 |a 5 5\n6 |a 6 6\n7 |a 7\n";

fn stats_two_bad(dir: &Path, extra: &[&str], code: i32) -> Run {
    let args = [
        &["stats", "--file", "e.ctf", "--input", "a:2:dense"][..],
        extra,
    ]
    .concat();
    run_expect(&args, Some(dir), code)
}

#[test]
fn stats_applies_the_max_errors_budget() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();

    // One invalid sequence within a budget of 1: skipped, reported, counted.
    write(d, "e.ctf", &TWO_BAD[..TWO_BAD.find("4 |a").unwrap()]);
    let r = stats_two_bad(d, &["--max-errors", "1"], 0);
    let errors = diags(&r.stderr, "error");
    assert_eq!(errors.len(), 1, "{}", r.stderr);
    assert_eq!(
        (errors[0].file.as_str(), errors[0].line, errors[0].col),
        ("e.ctf", 2, 6),
        "{}",
        r.stderr
    );
    assert!(
        errors[0].message.contains('a'),
        "names the input: {}",
        r.stderr
    );
    assert!(
        r.stdout
            .starts_with("files: 1\nsequences: 2 valid, 1 invalid\nchunks: 1\nsamples a: 2\n"),
        "{}",
        r.stdout
    );
    // The same error as the streaming reader reports.
    let dump = run_expect(
        &[
            "dump",
            "--file",
            "e.ctf",
            "--input",
            "a:2:dense",
            "--max-errors",
            "1",
        ],
        Some(d),
        0,
    );
    assert_eq!(diags(&dump.stderr, "error"), errors);
    // traceLevel 0: counted, not reported.
    let r = stats_two_bad(d, &["--max-errors", "1", "--trace-level", "0"], 0);
    assert_eq!(r.stderr, "");
    assert!(r.stdout.contains("sequences: 2 valid, 1 invalid\n"));
    // maxErrors 0 (the default): the first invalid sequence fails.
    let r = stats_two_bad(d, &[], 1);
    assert_eq!(r.stdout, "");
    assert!(
        r.stderr
            .contains("e.ctf:2:6: error: too many invalid sequences: more than maxErrors = 0"),
        "{}",
        r.stderr
    );

    // Two invalid sequences and a warning.
    write(d, "e.ctf", TWO_BAD);
    let r = stats_two_bad(d, &["--max-errors", "2"], 0);
    let lines: Vec<u64> = diags(&r.stderr, "error").iter().map(|e| e.line).collect();
    assert_eq!(lines, [2, 4], "{}", r.stderr);
    let warnings = diags(&r.stderr, "warning");
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    assert_eq!((warnings[0].file.as_str(), warnings[0].line), ("e.ctf", 7));
    assert!(
        r.stdout.contains("sequences: 5 valid, 2 invalid\n"),
        "{}",
        r.stdout
    );
    // ... beyond a budget of 1: exit 1, the reader's too-many-errors message, no summary.
    let r = stats_two_bad(d, &["--max-errors", "1"], 1);
    assert_eq!(r.stdout, "");
    let last = r.stderr.lines().last().unwrap();
    assert!(
        last.starts_with("e.ctf:4:")
            && last.contains(": error: too many invalid sequences: more than maxErrors = 1"),
        "{}",
        r.stderr
    );
    let dump = run_expect(
        &[
            "dump",
            "--file",
            "e.ctf",
            "--input",
            "a:2:dense",
            "--max-errors",
            "1",
        ],
        Some(d),
        1,
    );
    assert_eq!(
        dump.stderr.lines().last(),
        Some(last),
        "same message as dump"
    );
    // The skipped one was reported before.
    assert!(
        r.stderr
            .lines()
            .any(|l| l.starts_with("e.ctf:2:6: error: ")),
        "{}",
        r.stderr
    );
}

#[test]
fn stats_of_a_glob_equals_stats_of_the_file_list() {
    let dir = TempDir::new().unwrap();
    parts(dir.path());
    let pattern = format!("{}/part-*.ctf", s(dir.path()));
    let glob = run_expect(
        &[&["stats", "--file", pattern.as_str()][..], &AB_INPUTS].concat(),
        None,
        0,
    );
    let listed = run_expect(
        &[
            &[
                "stats",
                "--file",
                "part-0.ctf",
                "--file",
                "part-1.ctf",
                "--file",
                "part-2.ctf",
            ][..],
            &AB_INPUTS,
        ]
        .concat(),
        Some(dir.path()),
        0,
    );
    assert_eq!(glob.stdout, listed.stdout);
    // Line mode, one sample per sequence: 6 sequences; b's nnz: 1 + 1 + 2 + 0 + 1 + 1.
    assert!(
        glob.stdout.starts_with(
            "files: 3\nsequences: 6 valid, 0 invalid\nchunks: 3\nsamples a: 6\nsamples b: 6\n"
        ),
        "{}",
        glob.stdout
    );
    assert!(
        glob.stdout
            .ends_with("input b: sparse, dim 5, nnz 6, nnz per sample 1.000\n"),
        "{}",
        glob.stdout
    );
}

#[test]
fn stats_with_cache_index_writes_then_reuses_the_cache() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    write(d, "st.ctf", STATS_CTF);
    write(
        d,
        "st.cntk",
        "reader = [ file = \"st.ctf\" ; cacheIndex = true\n\
         input = [ d = [ dim = 2 ; format = \"dense\" ] ; s = [ dim = 10 ; format = \"sparse\" ] ] ]",
    );
    let config = ReaderConfig::builder()
        .file("st.ctf")
        .inputs([InputConfig::dense("d", 2), InputConfig::sparse("s", 10)])
        .build()
        .unwrap();
    let cache = d.join(cache_path(
        Path::new("st.ctf"),
        &IndexFingerprint::of(&config),
    ));
    assert!(!cache.exists());

    let first = run_expect(&["stats", "st.cntk"], Some(d), 0);
    assert_eq!(first.stdout, stats_expected(1));
    assert_eq!(first.stderr, "");
    assert!(
        cache.is_file(),
        "the cache is complete when the command ends"
    );
    let bytes = std::fs::read(&cache).unwrap();
    let modified = std::fs::metadata(&cache).unwrap().modified().unwrap();

    let second = run_expect(&["stats", "st.cntk"], Some(d), 0);
    assert_eq!(second.stdout, first.stdout);
    assert_eq!(second.stderr, "");
    // Reused, not rewritten.
    assert_eq!(std::fs::read(&cache).unwrap(), bytes);
    assert_eq!(
        std::fs::metadata(&cache).unwrap().modified().unwrap(),
        modified
    );
    assert_eq!(caches_of(d, "st.ctf"), [cache]);
}

// ---------------------------------------------------------------------------------------------
// Progress bars and help
// ---------------------------------------------------------------------------------------------

/// A corpus of a bit more than 100 MB (the size from which bars are shown): long comments,
/// which index and parse fast.
fn big_corpus(dir: &Path) -> usize {
    let comment = "x".repeat(1000);
    let mut text = String::with_capacity(101_200_000);
    let mut n = 0;
    while text.len() <= 101_000_000 {
        text.push_str(&format!("{n} |a 1 1 |b 0:1 |# {comment}\n"));
        n += 1;
    }
    write(dir, "big.ctf", &text);
    n
}

#[test]
fn no_progress_bar_when_stderr_is_not_a_terminal() {
    let dir = TempDir::new().unwrap();
    let n = big_corpus(dir.path());
    let args = [&["index", "--file", "big.ctf"][..], &AB_INPUTS].concat();
    let r = run_expect(&args, Some(dir.path()), 0);
    assert_eq!(r.stderr, "");
    check_index_summary(
        &r.stdout,
        &["a", "b"],
        &[expect("sequences", n), expect("caches written", 1)],
    );
    let args = [&["stats", "--file", "big.ctf"][..], &AB_INPUTS].concat();
    let r = run_expect(&args, Some(dir.path()), 0);
    assert_eq!(r.stderr, "");
    assert!(
        r.stdout
            .starts_with(&format!("files: 1\nsequences: {n} valid, 0 invalid\n")),
        "{}",
        r.stdout
    );
}

/// With a terminal (util-linux `script` provides one; skipped without it), a 100 MB corpus
/// gets a bar on stderr, cleared at the end, and the summary is unchanged.
#[test]
fn progress_bar_on_a_terminal() {
    let has_script = Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        eprintln!("skipped: no `script` command to provide a terminal");
        return;
    }
    let dir = TempDir::new().unwrap();
    big_corpus(dir.path());
    for sub in ["index", "stats"] {
        // stdout goes to a file, stderr to the terminal `script` records.
        let out = dir.path().join(format!("{sub}.out"));
        let command = format!(
            "'{CTF}' {sub} --file big.ctf {} > '{}'",
            AB_INPUTS.join(" "),
            s(&out)
        );
        let run = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let terminal = String::from_utf8_lossy(&run.stdout);
        if !run.status.success() && terminal.is_empty() {
            eprintln!("skipped: `script` could not run ({:?})", run.status);
            return;
        }
        assert!(run.status.success(), "{sub}: {terminal}");
        assert!(terminal.contains("MiB/"), "{sub}: no bar in {terminal:?}");
        // Cleared: the last thing drawn erases the line.
        assert!(
            terminal.trim_end().ends_with("\x1b[2K"),
            "{sub}: {terminal:?}"
        );
        let stdout = std::fs::read_to_string(&out).unwrap();
        assert!(stdout.starts_with("files: 1\n"), "{sub}: {stdout}");
        assert!(!stdout.contains("MiB"), "{sub}: {stdout}");
    }
}

#[test]
fn help_mentions_index_and_stats() {
    let r = run_expect(&["--help"], None, 0);
    let about = r.stdout.lines().next().unwrap();
    assert!(
        about.contains("index") && about.contains("stats"),
        "{about}"
    );
    assert!(r.stdout.contains("\n  index "), "{}", r.stdout);
    assert!(r.stdout.contains("\n  stats "), "{}", r.stdout);
    for sub in ["index", "stats"] {
        let r = run_expect(&[sub, "--help"], None, 0);
        assert!(r.stdout.contains("Usage: ctf "), "{}", r.stdout);
        assert!(r.stdout.contains("--section"), "{}", r.stdout);
    }
}

/// `--threads` changes nothing but the speed; 0 is a usage error.
#[test]
fn threads_option_gives_the_same_summary_and_rejects_zero() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..400).map(|i| format!("{i} |a {i}\n |a 1\n")).collect();
    let data = write(dir.path(), "d.ctf", text);
    let args = |threads: &'static str| -> Vec<&str> {
        vec![
            "index",
            "--threads",
            threads,
            "--file",
            s(&data),
            "--input",
            "a:1:dense",
        ]
    };
    let counts = |run: &Run| -> Vec<String> {
        run.stdout
            .lines()
            .filter(|l| !l.starts_with("seconds") && !l.starts_with("GB/s"))
            .map(str::to_string)
            .collect()
    };
    let one = run_expect(&args("1"), None, 0);
    assert!(
        counts(&one).contains(&"sequences: 400".to_string()),
        "{one:?}"
    );
    let four = run_expect(&args("4"), None, 0);
    assert_eq!(counts(&one), counts(&four));
    let zero = run_expect(&args("0"), None, 2);
    assert!(zero.stderr.contains("from 1 to 1024"), "{zero:?}");
    // Past the engine's bound, an error too (it panicked on a buffer size before).
    let huge = run_expect(&args("18446744073709551615"), None, 2);
    assert!(huge.stderr.contains("from 1 to 1024"), "{huge:?}");
}

/// A FIFO given to the commands that index is refused at once, by name, without opening it
/// (which blocks until a writer comes): it used to wait for a writer, then fail with "Illegal
/// seek (os error 29)".
#[test]
fn a_fifo_is_refused_by_the_commands_that_index() {
    let dir = TempDir::new().unwrap();
    let fifo = dir.path().join("pipe.ctf");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    for args in [
        &["stats"][..],
        &["index"],
        &["read", "--mb-size", "1"],
        &["bench"],
    ] {
        let command = args[0];
        let mut child = Command::new(CTF)
            .args(args)
            .args(["--file", "pipe.ctf", "--input", "x:1:dense"])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > std::time::Duration::from_secs(20) {
                child.kill().unwrap();
                panic!("ctf {command} waits on the FIFO");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let r = finish(command, child.wait_with_output().unwrap());
        assert_eq!(r.code, 1, "ctf {command}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("pipe.ctf: error: a pipe or a socket cannot be indexed"),
            "ctf {command}: {}",
            r.stderr
        );
    }
}
