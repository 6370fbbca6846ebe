//! The composite reader (issue 9; SPEC §1, §3, §7): several CTF deserializers joined by
//! sequence key, the first one primary.
//!
//! Each test writes small generated files into a temporary directory, from a model that knows
//! every key's samples for every input (`tests/composite_support`), and checks what `ctf`
//! and the library deliver against that model: features and labels in files whose keys are in
//! different orders (per-sequence sample counts, values and checksums); line-mode files joined
//! by line number; missing keys with and without `maxErrors`; three deserializers (one of
//! them over two files); a parse error in a secondary file, reported at its own position;
//! unmatched and repeated secondary keys warned once; `ctf dump` in primary file order;
//! `ctf validate` and `ctf bench` on a composite reader; identical minibatches at any thread
//! count, with `keepDataInMemory`, after `--restore`, and split over ranks; `ctf index` and
//! `cacheIndex`; the Rust builder; configuration errors; and a secondary file far larger than
//! the cache read with bounded peak RSS (a child `ctf read` measured with `wait4`). A first
//! test reads each generated file alone, so that a join failure is not a generator mistake.

#[allow(dead_code)]
mod cli_support;
mod composite_support;
mod engine_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cli_support::{diags, json_lines, keys, run_expect, Rng};
use composite_support::*;
use ctf_reader::minibatch::Minibatch;
use ctf_reader::source::{MinibatchSource, ReadLimits, ReferenceSource};
use ctf_reader::{InputConfig, ReaderConfig};
use engine_support::{engine, sweeps};
use tempfile::TempDir;

// ---------------------------------------------------------------------------------------------
// Scenarios and helpers
// ---------------------------------------------------------------------------------------------

/// Features (`x`, dense, dim 2, 1-4 lines) in `features.ctf` and labels (`y`, sparse, dim 5,
/// 1-6 lines, so often longer than the features) in `labels.ctf`, for the same `n` keys
/// (ids 1000, 1007, ...), each file in its own shuffled order.
struct Two {
    dir: TempDir,
    features: Deser,
    labels: Deser,
    /// The primary file's key order and each key's first line there.
    feature_order: Vec<u64>,
    feature_lines: BTreeMap<u64, u64>,
    label_order: Vec<u64>,
}

fn two_files(n: u64, seed: u64) -> Two {
    let mut rng = Rng::new(seed);
    let keys: Vec<u64> = (0..n).map(|i| 1000 + 7 * i).collect();
    let features = Deser::random(
        &mut rng,
        &["features.ctf"],
        vec![Input::dense("x", 2)],
        keys.iter().copied(),
        4,
    );
    let labels = Deser::random(
        &mut rng,
        &["labels.ctf"],
        vec![Input::sparse("y", 5)],
        keys.iter().copied(),
        6,
    );
    let feature_order = shuffled(&mut rng, &keys);
    let label_order = shuffled(&mut rng, &keys);
    assert_ne!(feature_order, label_order);
    let dir = TempDir::new().unwrap();
    let (text, feature_lines) = file_text(&features, &feature_order);
    put(dir.path(), "features.ctf", text);
    let (text, _) = file_text(&labels, &label_order);
    put(dir.path(), "labels.ctf", text);
    Two {
        dir,
        features,
        labels,
        feature_order,
        feature_lines,
        label_order,
    }
}

/// Small chunks in both files (of different sizes) and a window of three chunks.
const PRIMARY_EXTRA: &str = "chunkSizeInBytes = 200";
const SECONDARY_EXTRA: &str = "chunkSizeInBytes = 300";
const RANDOMIZED: &str =
    "randomize = true; randomizationSeed = 5; randomizationWindow = 3; traceLevel = 1";
const IN_ORDER: &str = "randomize = false; traceLevel = 1";

impl Two {
    fn d(&self) -> &Path {
        self.dir.path()
    }

    fn joined(&self) -> Joined {
        Joined::of(&[&self.features, &self.labels])
    }

    /// Writes `name` with these reader-level parameters.
    fn config(&self, name: &str, params: &str) {
        put(
            self.d(),
            name,
            config_text(
                params,
                &[
                    (&self.features, PRIMARY_EXTRA),
                    (&self.labels, SECONDARY_EXTRA),
                ],
                "",
            ),
        );
    }

    /// The same configuration for the library, with absolute file names.
    fn library_config(&self, params: &str) -> ReaderConfig {
        let prefix = format!("{}/", self.d().display());
        let text = config_text(
            params,
            &[
                (&self.features, PRIMARY_EXTRA),
                (&self.labels, SECONDARY_EXTRA),
            ],
            &prefix,
        );
        ReaderConfig::from_brainscript(&text, "composite.cntk", None)
            .unwrap_or_else(|e| panic!("{e}\n{text}"))
            .0
    }
}

/// `ctf read CONFIG --jsonl ARGS` in `dir`, expecting exit 0; the decoded lines and stderr.
fn read(dir: &Path, config: &str, args: &[&str]) -> (Vec<Line>, String) {
    let all = [&["read", config, "--jsonl"][..], args].concat();
    let r = run_expect(&all, Some(dir), 0);
    (parse_lines(&r.stdout), r.stderr)
}

/// Checks a whole `--jsonl` run of one worker against the model: every line's samples and
/// checksums, the position advancing by the joined lengths of its sequences, minibatches
/// within `mb_size` (unless one sequence alone), and each sweep a permutation of the keys.
fn check_run(joined: &Joined, lines: &[Line], mb_size: u64, sweeps: usize) {
    let mut previous = 0;
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line.mb, i as u64, "{line:?}");
        joined.check_line(line);
        let length: u64 = line.keys.iter().map(|&k| joined.length(k)).sum();
        assert_eq!(line.position - previous, length, "position after {line:?}");
        assert!(
            length <= mb_size || line.keys.len() == 1,
            "{length} samples in a minibatch of {mb_size}: {line:?}"
        );
        previous = line.position;
    }
    let order = all_keys(lines);
    let all = joined.keys();
    assert_eq!(order.len(), sweeps * all.len(), "{order:?}");
    for (s, sweep) in order.chunks(all.len()).enumerate() {
        assert_eq!(
            sorted(sweep.to_vec()),
            all,
            "sweep {s} is not a permutation"
        );
    }
    // `sweep_end` marks the minibatches that reach or cross a sweep's end (they may cross).
    let total = joined.sweep_samples();
    let mut previous = 0;
    for line in lines {
        let crosses =
            (1..=sweeps as u64).any(|s| previous < s * total && s * total <= line.position);
        assert_eq!(
            line.sweep_end, crosses,
            "sweeps of {total} samples: {line:?}"
        );
        previous = line.position;
    }
    assert_eq!(previous, sweeps as u64 * total);
}

/// Sample `j` of a minibatch stream, in the model's form.
fn decode(mb: &Minibatch<f32>, input: usize, j: usize, sparse: bool) -> Sample {
    let stream = &mb.streams[input];
    if sparse {
        let (a, b) = (
            stream.column_starts[j] as usize,
            stream.column_starts[j + 1] as usize,
        );
        Sample::Sparse(
            (a..b)
                .map(|v| {
                    (
                        u64::from(stream.row_indices[v]),
                        f64::from(stream.values[v]),
                    )
                })
                .collect(),
        )
    } else {
        let dim = stream.dim;
        Sample::Dense(
            stream.values[j * dim..(j + 1) * dim]
                .iter()
                .map(|&v| f64::from(v))
                .collect(),
        )
    }
}

/// Checks every sequence of a minibatch, value by value, against the model.
fn check_minibatch(joined: &Joined, mb: &Minibatch<f32>) {
    assert_eq!(mb.streams.len(), joined.inputs.len());
    for (s, seq) in mb.sequences.iter().enumerate() {
        let parts = joined
            .seqs
            .get(&seq.key)
            .unwrap_or_else(|| panic!("unexpected key {}", seq.key));
        for (i, input) in joined.inputs.iter().enumerate() {
            let starts = &mb.streams[i].sequence_starts;
            let got: Vec<Sample> = (starts[s]..starts[s + 1])
                .map(|j| decode(mb, i, j, input.sparse))
                .collect();
            assert_eq!(got, parts[i], "key {}, input {}", seq.key, input.name);
        }
    }
}

fn quiet() -> ctf_reader::reader::DiagnosticSink {
    Box::new(|_, _| {})
}

fn reference(cfg: &ReaderConfig, limits: ReadLimits, size: u64) -> Vec<Minibatch<f32>> {
    let mut s = ReferenceSource::<f32>::new(cfg, limits, quiet()).unwrap();
    std::iter::from_fn(|| s.next_minibatch(size).unwrap().map(|m| m.into_inner())).collect()
}

fn drain(s: &mut MinibatchSource<f32>, size: u64) -> Vec<Minibatch<f32>> {
    std::iter::from_fn(|| s.next_minibatch(size).unwrap().map(|m| m.into_inner())).collect()
}

/// The keys of minibatches, in order.
fn mb_keys(mbs: &[Minibatch<f32>]) -> Vec<u64> {
    mbs.iter()
        .flat_map(|m| m.sequences.iter().map(|s| s.key))
        .collect()
}

/// The located error diagnostics whose message contains `part`.
fn errors_with(stderr: &str, part: &str) -> Vec<cli_support::Diag> {
    diags(stderr, "error")
        .into_iter()
        .filter(|d| d.message.contains(part))
        .collect()
}

/// The keys listed at the end of a summary warning (`... (keys 1, 2, 3, ...)`), and whether
/// the list ends in `...`.
fn listed_keys(line: &str) -> (Vec<u64>, bool) {
    let at = line
        .rfind("keys ")
        .unwrap_or_else(|| panic!("no key list in {line:?}"));
    let list = line[at + 5..].trim_end().trim_end_matches(')');
    let mut keys = Vec::new();
    let mut more = false;
    for item in list.split(',').map(str::trim) {
        if item == "..." {
            more = true;
        } else {
            keys.push(
                item.parse()
                    .unwrap_or_else(|_| panic!("{item:?} is not a key in {line:?}")),
            );
        }
    }
    (keys, more)
}

/// `ctf dump` of one deserializer's files on their own (`--file`, `--input`): its sequences in
/// `order`, each as the model says. A check of the test data with the single-deserializer
/// reader, so that a failure of the joins below is not a mistake of the generator.
fn check_alone(dir: &Path, deser: &Deser, order: &[u64]) {
    let mut args = vec!["dump".to_string()];
    for f in &deser.files {
        args.extend(["--file".to_string(), f.clone()]);
    }
    for i in &deser.inputs {
        let format = if i.sparse { "sparse" } else { "dense" };
        args.extend([
            "--input".to_string(),
            format!("{}:{}:{format}:{}", i.name, i.dim, i.alias),
        ]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = run_expect(&args, Some(dir), 0);
    assert_eq!(keys(&r.stdout), order, "{args:?}");
    let alone = Joined::of(&[deser]);
    for object in json_lines(&r.stdout) {
        alone.check_dump_object(&object);
    }
}

#[test]
fn generated_files_read_alone_give_the_model() {
    let t = two_files(40, 17);
    check_alone(t.d(), &t.features, &t.feature_order);
    check_alone(t.d(), &t.labels, &t.label_order);
    let t = three_deserializers(20, 18, None);
    check_alone(t.dir.path(), &t.features, &t.feature_order);
    check_alone(t.dir.path(), &t.labels, &t.label_order);
    check_alone(t.dir.path(), &t.extra, &t.extra_order);
}

// ---------------------------------------------------------------------------------------------
// 1. Joining by key
// ---------------------------------------------------------------------------------------------

#[test]
fn features_and_labels_in_different_key_orders_are_joined_by_key() {
    let t = two_files(60, 1);
    let joined = t.joined();
    // The data really tests a join: the orders differ, and labels are often longer than the
    // features (the joined length is the longer one).
    let longer = joined
        .keys()
        .iter()
        .filter(|&&k| joined.samples(k, 1) > joined.samples(k, 0))
        .count();
    assert!(longer >= 10, "{longer}");
    t.config("c.cntk", IN_ORDER);
    t.config("r.cntk", RANDOMIZED);

    // One sequence per minibatch, in primary file order: each one's samples and checksums.
    let (lines, stderr) = read(t.d(), "c.cntk", &["--mb-size", "1"]);
    assert!(diags(&stderr, "error").is_empty(), "{stderr}");
    for line in &lines {
        assert_eq!(line.keys.len(), 1, "{line:?}");
    }
    assert_eq!(all_keys(&lines), t.feature_order);
    check_run(&joined, &lines, 1, 1);

    // Randomized, two sweeps, several sequences per minibatch.
    for mb in [7u64, 20] {
        let (lines, _) = read(
            t.d(),
            "r.cntk",
            &["--mb-size", &mb.to_string(), "--max-sweeps", "2"],
        );
        check_run(&joined, &lines, mb, 2);
        assert_ne!(
            all_keys(&lines)[..60],
            t.feature_order[..],
            "not randomized"
        );
    }

    // The library: every value of every sequence, through both engines.
    for params in [IN_ORDER, RANDOMIZED] {
        let cfg = t.library_config(params);
        assert_eq!(
            cfg.inputs
                .iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>(),
            ["x", "y"]
        );
        let mbs = reference(&cfg, sweeps(1), 7);
        let mut source = MinibatchSource::<f32>::new(&cfg, sweeps(1), quiet()).unwrap();
        let threaded = drain(&mut source, 7);
        assert_eq!(threaded, mbs, "{params}");
        for mb in &mbs {
            check_minibatch(&joined, mb);
        }
        assert_eq!(sorted(mb_keys(&mbs)), joined.keys());
        if params == IN_ORDER {
            assert_eq!(mb_keys(&mbs), t.feature_order);
        }
        assert_eq!(source.sweep_samples(), joined.sweep_samples());
    }
}

#[test]
fn dump_prints_the_joined_sequences_in_primary_file_order() {
    let t = two_files(40, 2);
    let joined = t.joined();
    // Randomization does not change a dump.
    t.config("r.cntk", RANDOMIZED);
    let r = run_expect(&["dump", "r.cntk"], Some(t.d()), 0);
    assert_eq!(keys(&r.stdout), t.feature_order);
    for object in json_lines(&r.stdout) {
        joined.check_dump_object(&object);
    }
    // Swapping the roles: the labels' file order, and labels first in every object.
    put(
        t.d(),
        "swapped.cntk",
        config_text(IN_ORDER, &[(&t.labels, ""), (&t.features, "")], ""),
    );
    let r = run_expect(&["dump", "swapped.cntk"], Some(t.d()), 0);
    assert_eq!(keys(&r.stdout), t.label_order);
    let swapped = Joined::of(&[&t.labels, &t.features]);
    for object in json_lines(&r.stdout) {
        swapped.check_dump_object(&object);
    }
}

#[test]
fn line_mode_files_are_joined_by_line_number() {
    // Primary: one `|x` line per physical line 0..30, except comment-only lines 5 and 9
    // (no sequence there). Secondary: a `|y` and `|w` line on every line 0..30, in two
    // files (line numbers continue across them). Third: a `|z` line on every line, with ids
    // (repeated on consecutive lines) that `skipSequenceIds = true` ignores.
    let mut rng = Rng::new(3);
    let n = 30u64;
    let primary_keys: Vec<u64> = (0..n).filter(|k| *k != 5 && *k != 9).collect();
    let features = Deser::random(
        &mut rng,
        &["features.ctf"],
        vec![Input::dense("x", 2)],
        primary_keys.iter().copied(),
        1,
    );
    let labels = Deser::random(
        &mut rng,
        &["labels-a.ctf", "labels-b.ctf"],
        vec![Input::sparse("y", 5), Input::dense("w", 1)],
        0..n,
        1,
    );
    let third = Deser::random(&mut rng, &["ids.ctf"], vec![Input::dense("z", 1)], 0..n, 1);
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let mut text = String::new();
    for k in 0..n {
        match features.parts.get(&k) {
            Some(parts) => text.push_str(&sequence_text(None, &features.inputs, parts)),
            None => text.push_str("|# no features here\n"),
        }
    }
    put(d, "features.ctf", text);
    let lines = |keys: std::ops::Range<u64>| -> String {
        keys.map(|k| sequence_text(None, &labels.inputs, &labels.parts[&k]))
            .collect()
    };
    put(d, "labels-a.ctf", lines(0..12));
    put(d, "labels-b.ctf", lines(12..n));
    let text: String = (0..n)
        .map(|k| sequence_text(Some(100 + k / 3), &third.inputs, &third.parts[&k]))
        .collect();
    put(d, "ids.ctf", text);
    let joined = Joined::of(&[&features, &labels, &third]);
    assert_eq!(joined.keys(), primary_keys);
    let third_extra = "skipSequenceIds = true";

    put(
        d,
        "c.cntk",
        config_text(
            IN_ORDER,
            &[(&features, ""), (&labels, ""), (&third, third_extra)],
            "",
        ),
    );
    let r = run_expect(&["dump", "c.cntk"], Some(d), 0);
    assert_eq!(keys(&r.stdout), primary_keys);
    for object in json_lines(&r.stdout) {
        joined.check_dump_object(&object);
    }

    put(
        d,
        "r.cntk",
        config_text(
            RANDOMIZED,
            &[
                (&features, "chunkSizeInBytes = 60"),
                (&labels, ""),
                (&third, third_extra),
            ],
            "",
        ),
    );
    let (lines, stderr) = read(d, "r.cntk", &["--mb-size", "3", "--max-sweeps", "2"]);
    check_run(&joined, &lines, 3, 2);
    // Lines 5 and 9 of the other deserializers have no primary sequence: warned once for
    // each, naming them.
    for file in ["labels-a.ctf, labels-b.ctf", "ids.ctf"] {
        let warned: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("warning:") && l.contains(file) && l.contains("2 sequences"))
            .collect();
        assert_eq!(warned.len(), 1, "{file}\n{stderr}");
        assert_eq!(listed_keys(warned[0]), (vec![5, 9], false), "{stderr}");
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Missing keys and errors in secondary files
// ---------------------------------------------------------------------------------------------

#[test]
fn missing_keys_fail_the_read_without_max_errors_and_are_skipped_with_it() {
    let mut t = two_files(40, 4);
    // Three keys have no labels.
    let missing: Vec<u64> = vec![t.label_order[3], t.label_order[17], t.label_order[30]];
    t.label_order.retain(|k| !missing.contains(k));
    for k in &missing {
        t.labels.parts.remove(k);
    }
    let (text, _) = file_text(&t.labels, &t.label_order);
    put(t.d(), "labels.ctf", text);
    let joined = t.joined();
    assert_eq!(joined.seqs.len(), 37);
    // In primary file order, the first key without labels.
    let first_missing = *t
        .feature_order
        .iter()
        .find(|k| missing.contains(k))
        .unwrap();
    let expected_error = |k: u64| {
        (
            t.feature_lines[&k],
            format!("no sequence with key {k} in labels.ctf"),
        )
    };

    // maxErrors = 0 (the default): the read fails at the first one, named at its primary line.
    t.config("strict.cntk", IN_ORDER);
    for command in [
        &["read", "strict.cntk", "--mb-size", "4", "--jsonl"][..],
        &["dump", "strict.cntk"][..],
    ] {
        let r = run_expect(command, Some(t.d()), 1);
        let found = errors_with(&r.stderr, "no sequence with key");
        assert!(!found.is_empty(), "{command:?}\n{}", r.stderr);
        let (line, message) = expected_error(first_missing);
        assert_eq!(found[0].file, "features.ctf", "{}", r.stderr);
        assert_eq!((found[0].line, found[0].col), (line, 1), "{}", r.stderr);
        // With maxErrors = 0 the message may say the budget is exceeded; it names the key.
        assert!(found[0].message.contains(&message), "{}", r.stderr);
        // Nothing after the failing sequence was printed.
        let printed: Vec<u64> = if command[0] == "dump" {
            keys(&r.stdout)
        } else {
            all_keys(&parse_lines(&r.stdout))
        };
        let before: Vec<u64> = t
            .feature_order
            .iter()
            .copied()
            .take_while(|&k| k != first_missing)
            .collect();
        assert!(before.starts_with(&printed), "{printed:?}");
    }

    // maxErrors = 2 < 3 missing keys: still a failure.
    t.config("two.cntk", &format!("{RANDOMIZED}; maxErrors = 2"));
    let r = run_expect(&["read", "two.cntk", "--mb-size", "4"], Some(t.d()), 1);
    assert!(
        !errors_with(&r.stderr, "no sequence with key").is_empty(),
        "{}",
        r.stderr
    );

    // maxErrors = 3: every other sequence exactly once per sweep, each missing key reported
    // once for the life of the reader, at its primary line.
    t.config("three.cntk", &format!("{RANDOMIZED}; maxErrors = 3"));
    let (lines, stderr) = read(
        t.d(),
        "three.cntk",
        &["--mb-size", "6", "--max-sweeps", "2"],
    );
    for line in &lines {
        joined.check_line(line);
    }
    let order = all_keys(&lines);
    assert_eq!(order.len(), 2 * 37);
    for sweep in order.chunks(37) {
        assert_eq!(sorted(sweep.to_vec()), joined.keys());
    }
    let mut found: Vec<(u64, String)> = errors_with(&stderr, "no sequence with key")
        .into_iter()
        .map(|d| {
            assert_eq!((d.file.as_str(), d.col), ("features.ctf", 1), "{stderr}");
            (d.line, d.message)
        })
        .collect();
    found.sort();
    let mut want: Vec<(u64, String)> = missing.iter().map(|&k| expected_error(k)).collect();
    want.sort();
    assert_eq!(found, want, "{stderr}");

    // dump with maxErrors = 3: the other sequences in primary file order.
    let r = run_expect(&["dump", "three.cntk"], Some(t.d()), 0);
    let want: Vec<u64> = t
        .feature_order
        .iter()
        .copied()
        .filter(|k| !missing.contains(k))
        .collect();
    assert_eq!(keys(&r.stdout), want);
    for object in json_lines(&r.stdout) {
        joined.check_dump_object(&object);
    }
    assert_eq!(
        errors_with(&r.stderr, "no sequence with key").len(),
        3,
        "{}",
        r.stderr
    );
}

#[test]
fn a_parse_error_in_a_secondary_file_is_reported_at_its_own_position() {
    let mut t = two_files(30, 5);
    // The labels are dense here (dim 3), and key K's first label line holds a malformed
    // number.
    let mut rng = Rng::new(55);
    t.labels = Deser::random(
        &mut rng,
        &["labels.ctf"],
        vec![Input::dense("y", 3)],
        t.feature_order.iter().copied(),
        3,
    );
    let bad_key = t.label_order[11];
    let (text, lines) = file_text(&t.labels, &t.label_order);
    let bad_line = lines[&bad_key];
    let prefix = format!("{bad_key} |y 1 ");
    let text: String = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i as u64 + 1 == bad_line {
                format!("{prefix}2.5.3 1\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    put(t.d(), "labels.ctf", text);
    let mut joined = t.joined();
    joined.seqs.remove(&bad_key);
    // Reported (once) at the secondary file's line and column of the malformed number.
    let expect_at = |stderr: &str| {
        let found = errors_with(stderr, "2.5.3");
        assert_eq!(found.len(), 1, "{stderr}");
        assert_eq!(found[0].file, "labels.ctf", "{stderr}");
        assert_eq!(
            (found[0].line, found[0].col),
            (bad_line, prefix.len() as u64 + 1),
            "{stderr}"
        );
    };

    t.config("strict.cntk", RANDOMIZED);
    let r = run_expect(&["read", "strict.cntk", "--mb-size", "5"], Some(t.d()), 1);
    expect_at(&r.stderr);
    let r = run_expect(&["dump", "strict.cntk"], Some(t.d()), 1);
    expect_at(&r.stderr);

    t.config("lenient.cntk", &format!("{RANDOMIZED}; maxErrors = 1"));
    let (lines, stderr) = read(
        t.d(),
        "lenient.cntk",
        &["--mb-size", "5", "--max-sweeps", "2"],
    );
    expect_at(&stderr);
    for line in &lines {
        joined.check_line(line);
    }
    let order = all_keys(&lines);
    assert_eq!(order.len(), 2 * 29);
    for sweep in order.chunks(29) {
        assert_eq!(sorted(sweep.to_vec()), joined.keys());
    }
    let r = run_expect(&["dump", "lenient.cntk"], Some(t.d()), 0);
    let want: Vec<u64> = t
        .feature_order
        .iter()
        .copied()
        .filter(|&k| k != bad_key)
        .collect();
    assert_eq!(keys(&r.stdout), want);
    for object in json_lines(&r.stdout) {
        joined.check_dump_object(&object);
    }
}

#[test]
fn unmatched_and_repeated_secondary_keys_are_warned_once_and_not_read() {
    let t = two_files(30, 6);
    let mut rng = Rng::new(66);
    // Seven extra keys (not multiples of 7 past 1000, so not primary keys) and two keys
    // repeated later in the file with other content, each placed at a random position.
    let extra_keys: Vec<u64> = (0..7).map(|i| 5000 + 3 * i).collect();
    let repeated: Vec<u64> = vec![t.label_order[2], t.label_order[8]];
    let mut entries: Vec<(u64, Vec<Part>)> = t
        .label_order
        .iter()
        .map(|&k| (k, t.labels.parts[&k].clone()))
        .collect();
    for &k in &extra_keys {
        let at = rng.below(entries.len() as u64 + 1) as usize;
        entries.insert(at, (k, random_parts(&mut rng, &t.labels.inputs, 3)));
    }
    for &k in &repeated {
        // After the first occurrence and not next to it (an adjacent one would continue it).
        let first = entries.iter().position(|(e, _)| *e == k).unwrap();
        let at = (first + 2 + rng.below(5) as usize).min(entries.len());
        entries.insert(at, (k, random_parts(&mut rng, &t.labels.inputs, 3)));
    }
    let text: String = entries
        .iter()
        .map(|(k, parts)| sequence_text(Some(*k), &t.labels.inputs, parts))
        .collect();
    put(t.d(), "labels.ctf", text);
    // The first occurrence of a repeated key is the one joined.
    let joined = t.joined();
    let extras_in_file_order: Vec<u64> = entries
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| extra_keys.contains(k))
        .collect();
    let mut seen = BTreeSet::new();
    let repeats_in_file_order: Vec<u64> = entries
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !seen.insert(*k))
        .collect();
    assert_eq!(
        sorted(repeats_in_file_order.clone()),
        sorted(repeated.clone())
    );

    t.config("r.cntk", RANDOMIZED);
    let (lines, stderr) = read(t.d(), "r.cntk", &["--mb-size", "5", "--max-sweeps", "2"]);
    check_run(&joined, &lines, 5, 2);
    assert!(diags(&stderr, "error").is_empty(), "{stderr}");
    let warned = |count: &str| -> Vec<&str> {
        stderr
            .lines()
            .filter(|l| l.contains("warning:") && l.contains("labels.ctf") && l.contains(count))
            .collect()
    };
    let unmatched = warned("7 sequences");
    assert_eq!(unmatched.len(), 1, "{stderr}");
    assert_eq!(
        listed_keys(unmatched[0]),
        (extras_in_file_order[..5].to_vec(), true),
        "{stderr}"
    );
    let repeats = warned("2 sequences");
    assert_eq!(repeats.len(), 1, "{stderr}");
    assert!(repeats[0].contains("repeat"), "{stderr}");
    assert_eq!(
        listed_keys(repeats[0]),
        (repeats_in_file_order, false),
        "{stderr}"
    );

    // `ctf index` counts both kinds of sequences it does not read.
    let r = run_expect(&["index", "r.cntk"], Some(t.d()), 0);
    assert_eq!(
        cli_support::summary_n(&r.stdout, "unmatched sequences in labels.ctf"),
        9,
        "{}",
        r.stdout
    );

    // dump joins the first occurrences too.
    let r = run_expect(&["dump", "r.cntk"], Some(t.d()), 0);
    assert_eq!(keys(&r.stdout), t.feature_order);
    for object in json_lines(&r.stdout) {
        joined.check_dump_object(&object);
    }
}

/// A composite configuration (`params` at reader level) of `p.ctf` (input `x`) and then
/// the files `second` (input `y`, a BrainScript file list), both dense of dim 1.
fn xy_config(params: &str, second: &str) -> String {
    let deserializer = |files: &str, input: &str| {
        format!(
            "{{ type = \"CNTKTextFormatDeserializer\"; module = \"CNTKTextFormatReader\"\n\
             file = {files}\ninput = {{ {input} = {{ dim = 1; format = \"dense\" }} }} }}"
        )
    };
    format!(
        "reader = {{\n{params}\ndeserializers = ({} : {})\n}}\n",
        deserializer("\"p.ctf\"", "x"),
        deserializer(second, "y")
    )
}

/// `ctf dump`'s sequences as (key, x, y), and the warnings on stderr.
fn dump_xy(dir: &Path, config: &str) -> (Vec<(u64, f64, f64)>, Vec<String>) {
    let r = run_expect(&["dump", config], Some(dir), 0);
    let value = |v: &cli_support::Json, input: &str| -> f64 {
        v.at("inputs").at(input).arr()[0].arr()[0]
            .num()
            .parse()
            .unwrap()
    };
    let dumped = json_lines(&r.stdout)
        .iter()
        .map(|v| (v.at("key").int(), value(v, "x"), value(v, "y")))
        .collect();
    let warnings = r
        .stderr
        .lines()
        .filter(|l| l.contains("warning:"))
        .map(str::to_string)
        .collect();
    (dumped, warnings)
}

#[test]
fn a_secondary_key_repeated_across_files_of_both_modes_is_not_joined() {
    // ya.ctf has no ids: its keys are its line numbers 0 and 1, which yb.ctf's ids 0 and 1
    // repeat (SPEC §1: keys are unique across the corpus, and the later sequence is the
    // invalid one). The join takes keys 0 and 1 from ya.ctf, never from yb.ctf.
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    put(d, "p.ctf", "0 |x 0\n1 |x 1\n5 |x 5\n");
    put(d, "ya.ctf", "|y 100\n|y 101\n");
    put(d, "yb.ctf", "0 |y 200\n1 |y 201\n5 |y 205\n");
    let files = "(\"ya.ctf\" : \"yb.ctf\")";
    let expected = [(0, 0.0, 100.0), (1, 1.0, 101.0), (5, 5.0, 205.0)];
    let repeats = "ya.ctf, yb.ctf: warning: 2 sequences repeat the key of an earlier sequence; \
                   they are not read (keys 0, 1)";
    for cache in ["false", "true"] {
        put(
            d,
            "c.cntk",
            xy_config(&format!("randomize = false; cacheIndex = {cache}"), files),
        );
        // With the cache, the second run reads the join from it.
        for _ in 0..2 {
            let (dumped, warnings) = dump_xy(d, "c.cntk");
            assert_eq!(dumped, expected, "cacheIndex = {cache}");
            assert_eq!(warnings, [repeats], "cacheIndex = {cache}");
        }
        let join_caches = caches_of(d, "", "ctfjoin").len();
        assert_eq!(join_caches, usize::from(cache == "true"));
        let (lines, stderr) = read(d, "c.cntk", &["--mb-size", "1"]);
        let read: Vec<(Vec<u64>, f64, f64)> = lines
            .iter()
            .map(|l| {
                let checksum = |input: &str| l.checksum.iter().find(|c| c.0 == input).unwrap().1;
                (l.keys.clone(), checksum("x"), checksum("y"))
            })
            .collect();
        assert_eq!(
            read,
            [
                (vec![0], 0.0, 100.0),
                (vec![1], 1.0, 101.0),
                (vec![5], 5.0, 205.0)
            ]
        );
        assert!(diags(&stderr, "error").is_empty(), "{stderr}");
    }
    let r = run_expect(&["index", "c.cntk"], Some(d), 0);
    assert_eq!(
        cli_support::summary_n(&r.stdout, "unmatched sequences in ya.ctf, yb.ctf"),
        2,
        "{}",
        r.stdout
    );
}

#[test]
fn secondary_ids_too_long_for_64_bits_are_listed_as_written() {
    // An id too long for 64 bits is no key of any sequence: listed as written among the keys
    // the first deserializer does not have. The genuine id 18446744073709551615 is not
    // joined to the primary's id too long for 64 bits (an error of that sequence) either.
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    put(d, "p.ctf", "0 |x 0\n99999999999999999999999 |x 9\n5 |x 5\n");
    put(
        d,
        "q.ctf",
        "0 |y 0\n5 |y 5\n88888888888888888888888 |y 20\n18446744073709551615 |y 21\n",
    );
    put(
        d,
        "c.cntk",
        xy_config("randomize = false; maxErrors = 1", "\"q.ctf\""),
    );
    let r = run_expect(&["dump", "c.cntk"], Some(d), 0);
    assert_eq!(keys(&r.stdout), [0, 5]);
    let warnings: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("warning:"))
        .collect();
    assert_eq!(
        warnings,
        [
            "q.ctf: warning: 2 sequences have keys that the first deserializer does not have; \
          they are not read (keys 88888888888888888888888, 18446744073709551615)"
        ],
        "{}",
        r.stderr
    );
    let errors: Vec<(String, u64, u64, String)> = diags(&r.stderr, "error")
        .into_iter()
        .map(|e| (e.file, e.line, e.col, e.message))
        .collect();
    assert_eq!(
        errors,
        [(
            "p.ctf".to_string(),
            2,
            1,
            "sequence id '99999999999999999999999' does not fit in 64 bits".to_string()
        )]
    );
}

#[test]
fn a_first_id_after_a_carriage_return_is_listed_as_written() {
    // CR is whitespace, so a file may start with one before its first id, also behind a
    // byte order mark; the join's warning reads the id past it.
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    put(d, "p.ctf", "0 |x 0\n");
    for start in ["\r", "\u{feff}\r \t"] {
        put(
            d,
            "q.ctf",
            format!("{start}77777777777777777777777 |y 1\n0 |y 0\n"),
        );
        put(d, "c.cntk", xy_config("randomize = false", "\"q.ctf\""));
        let r = run_expect(&["dump", "c.cntk"], Some(d), 0);
        assert_eq!(keys(&r.stdout), [0]);
        assert!(
            r.stderr.contains(
                "q.ctf: warning: 1 sequences have keys that the first deserializer does not \
                 have; they are not read (keys 77777777777777777777777)"
            ),
            "{:?}",
            r.stderr
        );
    }
}

/// A primary sequence whose key the other deserializer lacks keeps its place on the
/// timeline, counted from the primary's inputs alone (README "Composite readers"): its
/// `definesMBSize` input's samples when it has it, else its longest input's, whichever
/// other input would define the size.
#[test]
fn a_sequence_with_a_missing_key_counts_the_primary_samples_on_the_timeline() {
    let dir = TempDir::new().unwrap();
    // Key 2: `a` 1 sample, `p` 3; the labels lack it.
    put(
        dir.path(),
        "A.ctf",
        "1 |a 1 |p 1\n2 |a 2 |p 1\n2 |p 2\n2 |p 3\n3 |a 3 |p 1\n",
    );
    put(dir.path(), "B.ctf", "1 |b 1\n3 |b 3\n");
    let input = |name: &str, defines: &str| {
        let flag = if name == defines {
            "; definesMBSize = true"
        } else {
            ""
        };
        format!("{name} = [ dim = 1 ; format = \"dense\" {flag} ]")
    };
    for (defines, key_2_samples) in [("a", 1), ("p", 3), ("b", 3), ("", 3)] {
        let config = format!(
            "reader = [ randomize = false ; maxErrors = 1 ; traceLevel = 0\n \
             deserializers = ( [ type = \"CNTKTextFormatDeserializer\" ; file = \"A.ctf\" ; \
             input = [ {} ; {} ] ] : [ type = \"CNTKTextFormatDeserializer\" ; \
             file = \"B.ctf\" ; input = [ {} ] ] ) ]\n",
            input("a", defines),
            input("p", defines),
            input("b", defines)
        );
        put(dir.path(), "c.cntk", config);
        let r = run_expect(
            &["read", "c.cntk", "--mb-size", "1", "--jsonl"],
            Some(dir.path()),
            0,
        );
        let at: Vec<(Vec<u64>, u64)> = parse_lines(&r.stdout)
            .iter()
            .map(|l| (l.keys.clone(), l.position))
            .collect();
        // Keys 1 and 3 have one sample each.
        let expected = [(vec![1], 1), (vec![3], 1 + key_2_samples + 1)];
        assert_eq!(at, expected, "definesMBSize {defines:?}: {}", r.stdout);
    }
}

#[test]
fn validate_reports_every_missing_key_and_the_unmatched_ones() {
    let mut t = two_files(30, 19);
    // Two keys without labels, and three label sequences with keys the features lack.
    let missing = [t.label_order[4], t.label_order[20]];
    t.label_order.retain(|k| !missing.contains(k));
    for k in &missing {
        t.labels.parts.remove(k);
    }
    let mut rng = Rng::new(190);
    let extra: String = [7001u64, 7002, 7003]
        .iter()
        .map(|&k| {
            let parts = random_parts(&mut rng, &t.labels.inputs, 2);
            sequence_text(Some(k), &t.labels.inputs, &parts)
        })
        .collect();
    put(
        t.d(),
        "labels.ctf",
        extra + &file_text(&t.labels, &t.label_order).0,
    );
    let joined = t.joined();
    t.config("c.cntk", IN_ORDER);
    let r = run_expect(&["validate", "c.cntk"], Some(t.d()), 1);
    // Every error, not stopping at maxErrors = 0, each at its primary line.
    let mut found: Vec<(u64, String)> = errors_with(&r.stderr, "no sequence with key")
        .into_iter()
        .map(|d| (d.line, d.message))
        .collect();
    found.sort();
    let mut want: Vec<(u64, String)> = missing
        .iter()
        .map(|&k| {
            let message = format!("no sequence with key {k} in labels.ctf");
            (t.feature_lines[&k], message)
        })
        .collect();
    want.sort();
    assert_eq!(found, want, "{}", r.stderr);
    let warned: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("warning:") && l.contains("labels.ctf") && l.contains("3 sequences"))
        .collect();
    assert_eq!(warned.len(), 1, "{}", r.stderr);
    assert_eq!(listed_keys(warned[0]), (vec![7001, 7002, 7003], false));
    // The summary counts what was reported, and the valid joined sequences' samples.
    let out = &r.stdout;
    assert_eq!(
        cli_support::summary(out, "sequences"),
        "28 valid, 2 invalid"
    );
    for (i, name) in ["x", "y"].iter().enumerate() {
        let samples: u64 = joined.keys().iter().map(|&k| joined.samples(k, i)).sum();
        assert_eq!(
            cli_support::summary_n(out, &format!("samples {name}")),
            samples,
            "{out}"
        );
    }
    let reported = |severity: &str| {
        r.stderr
            .lines()
            .filter(|l| l.contains(&format!("{severity}:")))
            .count() as u64
    };
    assert_eq!(
        cli_support::summary_n(out, "errors"),
        reported("error"),
        "{out}"
    );
    assert_eq!(
        cli_support::summary_n(out, "warnings"),
        reported("warning"),
        "{out}"
    );
}

#[test]
fn bench_reads_and_counts_every_deserializers_files() {
    let t = two_files(40, 20);
    let joined = t.joined();
    t.config("r.cntk", RANDOMIZED);
    let r = run_expect(
        &["bench", "r.cntk", "--sweeps", "2", "--mb-size", "8"],
        Some(t.d()),
        0,
    );
    let out = &r.stdout;
    assert_eq!(cli_support::summary_n(out, "sequences"), 80, "{out}");
    let all: f64 = joined
        .keys()
        .iter()
        .map(|&k| (0..2).map(|i| joined.sum(k, i)).sum::<f64>())
        .sum();
    let checksum: f64 = cli_support::summary(out, "checksum").parse().unwrap();
    assert_eq!(checksum, 2.0 * all, "{out}");
    // "bytes: corpus bytes covered: the files' size x sweeps read" (README): both files.
    let size = |f: &str| std::fs::metadata(t.d().join(f)).unwrap().len();
    let corpus = size("features.ctf") + size("labels.ctf");
    assert!(cli_support::summary_n(out, "bytes_read") >= corpus, "{out}");
    assert_eq!(cli_support::summary_n(out, "bytes"), 2 * corpus, "{out}");
}

// ---------------------------------------------------------------------------------------------
// 3. Three deserializers
// ---------------------------------------------------------------------------------------------

/// Features `x` (primary), labels `y` split over two files, and `z` (dense, dim 3) with `w`
/// (sparse, dim 4) in a third deserializer; every file in its own order.
struct Three {
    dir: TempDir,
    features: Deser,
    labels: Deser,
    extra: Deser,
    feature_order: Vec<u64>,
    feature_lines: BTreeMap<u64, u64>,
    /// The labels' keys in file order (`labels-a.ctf` then `labels-b.ctf`), and the third
    /// file's.
    label_order: Vec<u64>,
    extra_order: Vec<u64>,
}

fn three_deserializers(n: u64, seed: u64, missing_label: Option<usize>) -> Three {
    let mut rng = Rng::new(seed);
    let keys: Vec<u64> = (0..n).map(|i| 10 * i + 1).collect();
    let features = Deser::random(
        &mut rng,
        &["features.ctf"],
        vec![Input::dense("x", 2)],
        keys.iter().copied(),
        3,
    );
    let mut labels = Deser::random(
        &mut rng,
        &["labels-a.ctf", "labels-b.ctf"],
        vec![Input::sparse("y", 5)],
        keys.iter().copied(),
        4,
    );
    let extra = Deser::random(
        &mut rng,
        &["extra.ctf"],
        vec![Input::dense("z", 3), Input::sparse("w", 4)],
        keys.iter().copied(),
        5,
    );
    let feature_order = shuffled(&mut rng, &keys);
    let mut label_order = shuffled(&mut rng, &keys);
    if let Some(i) = missing_label {
        let k = label_order.remove(i);
        labels.parts.remove(&k);
    }
    let extra_order = shuffled(&mut rng, &keys);
    let dir = TempDir::new().unwrap();
    let (text, feature_lines) = file_text(&features, &feature_order);
    put(dir.path(), "features.ctf", text);
    let half = label_order.len() / 2;
    put(
        dir.path(),
        "labels-a.ctf",
        file_text(&labels, &label_order[..half]).0,
    );
    put(
        dir.path(),
        "labels-b.ctf",
        file_text(&labels, &label_order[half..]).0,
    );
    put(dir.path(), "extra.ctf", file_text(&extra, &extra_order).0);
    Three {
        dir,
        features,
        labels,
        extra,
        feature_order,
        feature_lines,
        label_order,
        extra_order,
    }
}

impl Three {
    fn config(&self, name: &str, params: &str) {
        put(
            self.dir.path(),
            name,
            config_text(
                params,
                &[
                    (&self.features, "chunkSizeInBytes = 150"),
                    (&self.labels, ""),
                    (&self.extra, "chunkSizeInBytes = 100"),
                ],
                "",
            ),
        );
    }

    fn joined(&self) -> Joined {
        Joined::of(&[&self.features, &self.labels, &self.extra])
    }
}

#[test]
fn three_deserializers_are_joined_with_streams_in_configuration_order() {
    let t = three_deserializers(50, 7, None);
    let d = t.dir.path();
    let joined = t.joined();
    assert_eq!(joined.names(), ["x", "y", "z", "w"]);
    t.config("r.cntk", RANDOMIZED);
    for mb in ["1", "12"] {
        let (lines, stderr) = read(d, "r.cntk", &["--mb-size", mb, "--max-sweeps", "2"]);
        assert!(diags(&stderr, "error").is_empty(), "{stderr}");
        check_run(&joined, &lines, mb.parse().unwrap(), 2);
    }
    let r = run_expect(&["dump", "r.cntk"], Some(d), 0);
    assert_eq!(keys(&r.stdout), t.feature_order);
    for object in json_lines(&r.stdout) {
        joined.check_dump_object(&object);
    }

    // The library, value by value.
    let text = config_text(
        RANDOMIZED,
        &[
            (&t.features, "chunkSizeInBytes = 150"),
            (&t.labels, ""),
            (&t.extra, "chunkSizeInBytes = 100"),
        ],
        &format!("{}/", d.display()),
    );
    let cfg = ReaderConfig::from_brainscript(&text, "three.cntk", None)
        .unwrap()
        .0;
    let mbs = reference(&cfg, sweeps(2), 9);
    assert_eq!(mbs, drain(&mut engine(&cfg, sweeps(2), 2, 2, 2, 100), 9));
    for mb in &mbs {
        check_minibatch(&joined, mb);
    }
    assert_eq!(mb_keys(&mbs).len(), 100);

    // `definesMBSize` on `z`, an input of the third deserializer: the lengths are z's.
    let mut sized = t.extra.clone();
    sized.inputs[0] = sized.inputs[0].clone().mb_size();
    put(
        d,
        "sized.cntk",
        config_text(
            RANDOMIZED,
            &[
                (&t.features, "chunkSizeInBytes = 150"),
                (&t.labels, ""),
                (&sized, ""),
            ],
            "",
        ),
    );
    let sized_joined = Joined::of(&[&t.features, &t.labels, &sized]);
    assert_ne!(sized_joined.sweep_samples(), joined.sweep_samples());
    let (lines, _) = read(d, "sized.cntk", &["--mb-size", "8", "--max-sweeps", "2"]);
    check_run(&sized_joined, &lines, 8, 2);
}

#[test]
fn a_key_missing_from_a_deserializer_of_several_files_names_them_all() {
    let t = three_deserializers(30, 8, Some(4));
    let d = t.dir.path();
    let joined = t.joined();
    assert_eq!(joined.seqs.len(), 29);
    let missing = *t
        .feature_order
        .iter()
        .find(|k| !joined.seqs.contains_key(k))
        .unwrap();
    t.config("strict.cntk", IN_ORDER);
    let r = run_expect(&["read", "strict.cntk", "--mb-size", "4"], Some(d), 1);
    let found = errors_with(&r.stderr, "no sequence with key");
    assert!(!found.is_empty(), "{}", r.stderr);
    assert_eq!(found[0].file, "features.ctf");
    assert_eq!(
        (found[0].line, found[0].col),
        (t.feature_lines[&missing], 1)
    );
    let message = format!("no sequence with key {missing} in labels-a.ctf, labels-b.ctf");
    assert!(found[0].message.contains(&message), "{}", r.stderr);
    t.config("lenient.cntk", &format!("{IN_ORDER}; maxErrors = 1"));
    let (lines, _) = read(d, "lenient.cntk", &["--mb-size", "4"]);
    for line in &lines {
        joined.check_line(line);
    }
    let want: Vec<u64> = t
        .feature_order
        .iter()
        .copied()
        .filter(|&k| k != missing)
        .collect();
    assert_eq!(all_keys(&lines), want);
}

// ---------------------------------------------------------------------------------------------
// 4. The same minibatches everywhere: threads, keepDataInMemory, restore, ranks
// ---------------------------------------------------------------------------------------------

#[test]
fn the_same_minibatches_at_any_thread_count_and_with_keep_data_in_memory() {
    let t = two_files(80, 9);
    let joined = t.joined();
    t.config("r.cntk", RANDOMIZED);
    t.config(
        "keep.cntk",
        &format!("{RANDOMIZED}; keepDataInMemory = true"),
    );
    let base = ["--mb-size", "9", "--max-sweeps", "3"];
    let mut outputs = Vec::new();
    for threads in ["1", "2", "4"] {
        let args = [&base[..], &["--threads", threads]].concat();
        let r = run_expect(
            &[&["read", "r.cntk", "--jsonl"][..], &args].concat(),
            Some(t.d()),
            0,
        );
        outputs.push(r.stdout);
    }
    assert_eq!(outputs[0], outputs[1], "--threads 1 vs 2");
    assert_eq!(outputs[0], outputs[2], "--threads 1 vs 4");
    let lines = parse_lines(&outputs[0]);
    check_run(&joined, &lines, 9, 3);
    // keepDataInMemory changes no minibatch.
    let (kept, _) = read(t.d(), "keep.cntk", &base);
    assert_eq!(
        kept.iter().map(Line::content).collect::<Vec<_>>(),
        lines.iter().map(Line::content).collect::<Vec<_>>()
    );
    // ... and over three sweeps it reads every byte of both files once (SPEC §7.5), where
    // without it each sweep reads them again. One thread, one delivery queued and
    // minibatches of one sample: the cache holds the parts of the minibatches in flight
    // (`MinibatchSource::fit_cache`), which on this corpus of 80 sequences in chunks of 200
    // bytes are most of it with the defaults.
    let size = |f: &str| std::fs::metadata(t.d().join(f)).unwrap().len();
    let corpus = size("features.ctf") + size("labels.ctf");
    let bytes_read = |config: &str| -> u64 {
        let narrow = [
            "--mb-size",
            "1",
            "--max-sweeps",
            "3",
            "--threads",
            "1",
            "--prefetch",
            "1",
        ];
        let r = run_expect(
            &[&["read", config, "--stats"][..], &narrow].concat(),
            Some(t.d()),
            0,
        );
        let read = |name: &str| -> u64 {
            r.stderr
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name} in\n{}", r.stderr))
                .trim()
                .parse()
                .unwrap()
        };
        // The first minibatch's own quick reads are counted apart (README "The threaded
        // engine"): its chunks are still read whole once.
        read("bytes read:")
    };
    assert_eq!(bytes_read("keep.cntk"), corpus);
    // (A chunk still cached across a sweep's end is not read again.)
    assert!(bytes_read("r.cntk") > 2 * corpus);

    // The library: the reference against the threaded engine at several thread counts,
    // prefetch depths and part sizes (parts smaller than a chunk split its secondary reads).
    let cfg = t.library_config(RANDOMIZED);
    let want = reference(&cfg, sweeps(2), 11);
    for mb in &want {
        check_minibatch(&joined, mb);
    }
    for (loaders, packers, prefetch, part) in [
        (1, 1, 1, 1 << 20),
        (2, 1, 2, 100),
        (4, 2, 1, 1 << 20),
        (4, 3, 3, 64),
    ] {
        let got = drain(
            &mut engine(&cfg, sweeps(2), loaders, packers, prefetch, part),
            11,
        );
        assert_eq!(
            got, want,
            "{loaders} loaders, {packers} packers, part {part}"
        );
    }
}

#[test]
fn restore_gives_the_minibatches_of_the_uninterrupted_run() {
    let t = two_files(50, 10);
    t.config("r.cntk", RANDOMIZED);
    let d = t.d();
    let base = ["--mb-size", "8", "--max-sweeps", "2"];
    let (full, _) = read(d, "r.cntk", &base);
    check_run(&t.joined(), &full, 8, 2);
    let n = full.len();
    assert!(n > 10);
    for k in [0, 3, n / 2 - 1, n / 2, n - 2] {
        let args = [&base[..], &["--restore", &full[k].checkpoint]].concat();
        let (rest, _) = read(d, "r.cntk", &args);
        assert_eq!(rest.len(), n - k - 1, "restore after line {k}");
        for (i, (got, want)) in rest.iter().zip(&full[k + 1..]).enumerate() {
            assert_eq!(got.mb, i as u64);
            assert_eq!(got.content(), want.content(), "restore after line {k}");
        }
    }
    // A token taken before the labels changed (one sequence five samples longer, so longer
    // than its features and the joined timeline differs) is refused.
    let mut labels = t.labels.clone();
    let k = t.label_order[0];
    for _ in 0..5 {
        labels.parts.get_mut(&k).unwrap()[0].push(Sample::Sparse(vec![(1, 0.5)]));
    }
    put(d, "labels.ctf", file_text(&labels, &t.label_order).0);
    let r = run_expect(
        &[
            &["read", "r.cntk"][..],
            &base,
            &["--restore", &full[3].checkpoint],
        ]
        .concat(),
        Some(d),
        2,
    );
    assert_eq!(r.stdout, "");
    put(d, "labels.ctf", file_text(&t.labels, &t.label_order).0);

    // The library: restoring a checkpoint taken mid-sweep continues with the same batches.
    let cfg = t.library_config(RANDOMIZED);
    let mut a = MinibatchSource::<f32>::new(&cfg, sweeps(2), quiet()).unwrap();
    let whole = drain(&mut a, 8);
    let mut b = MinibatchSource::<f32>::new(&cfg, sweeps(2), quiet()).unwrap();
    for _ in 0..7 {
        b.next_minibatch(8).unwrap().unwrap();
    }
    let checkpoint = b.checkpoint();
    let mut c = MinibatchSource::<f32>::new(&cfg, sweeps(2), quiet()).unwrap();
    c.restore(&checkpoint).unwrap();
    assert_eq!(drain(&mut c, 8), whole[7..]);
}

#[test]
fn ranks_together_read_the_joined_corpus_once_per_sweep() {
    let t = two_files(60, 11);
    let joined = t.joined();
    t.config("r.cntk", RANDOMIZED);
    let d = t.d();
    let base = ["--mb-size", "16", "--max-sweeps", "2"];
    let (global, _) = read(d, "r.cntk", &base);
    check_run(&joined, &global, 16, 2);
    let by_position: BTreeMap<u64, &Line> = global.iter().map(|l| (l.position, l)).collect();
    for k in [2u32, 3] {
        let mut union: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for r in 0..k {
            let (ks, rs) = (k.to_string(), r.to_string());
            let (lines, _) = read(
                d,
                "r.cntk",
                &[&base[..], &["--workers", &ks, "--rank", &rs]].concat(),
            );
            assert!(!all_keys(&lines).is_empty(), "rank {r} of {k} read nothing");
            for line in &lines {
                joined.check_line(line);
                assert!(
                    by_position.contains_key(&line.position),
                    "rank {r} of {k}: no global minibatch ends at {line:?}"
                );
                union.entry(line.position).or_default().extend(&line.keys);
            }
        }
        for g in &global {
            let got = union.remove(&g.position).unwrap_or_default();
            assert_eq!(sorted(got), sorted(g.keys.clone()), "{k} workers at {g:?}");
        }
        assert!(union.is_empty(), "{union:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Index caches
// ---------------------------------------------------------------------------------------------

/// The cache files next to data file `name` (of any file when empty) with this extension
/// (`ctfidx`: its index cache; `ctfjoin`: the key match of its deserializer with the
/// primary), with their inode and modification time.
fn caches_of(dir: &Path, name: &str, extension: &str) -> Vec<(String, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let file = entry.file_name().to_string_lossy().into_owned();
        let of_name = name.is_empty() || file.starts_with(&format!("{name}."));
        if of_name && file.ends_with(&format!(".{extension}")) {
            let m = entry.metadata().unwrap();
            found.push((file, m.ino(), m.mtime(), m.mtime_nsec()));
        }
    }
    found.sort();
    found
}

/// Every cache file of the directory (index caches and key matches).
fn all_caches(dir: &Path) -> Vec<(String, u64, i64, i64)> {
    let mut all = caches_of(dir, "", "ctfidx");
    all.extend(caches_of(dir, "", "ctfjoin"));
    all
}

#[test]
fn ctf_index_writes_the_caches_of_every_deserializers_files() {
    let t = three_deserializers(20, 12, None);
    let d = t.dir.path();
    t.config("c.cntk", IN_ORDER);
    let r = run_expect(&["index", "c.cntk"], Some(d), 0);
    for file in ["features.ctf", "labels-a.ctf", "labels-b.ctf", "extra.ctf"] {
        assert_eq!(
            caches_of(d, file, "ctfidx").len(),
            1,
            "{file}: {}",
            r.stdout
        );
    }
    // Each joined deserializer's key match is cached too (next to one of its files).
    let joins = caches_of(d, "", "ctfjoin");
    assert_eq!(joins.len(), 2, "{joins:?}");
    assert!(
        joins.iter().any(|j| j.0.starts_with("extra.ctf.")),
        "{joins:?}"
    );
    assert!(
        joins.iter().any(|j| j.0.starts_with("labels-")),
        "{joins:?}"
    );
    assert_eq!(
        cli_support::summary_n(&r.stdout, "caches written"),
        all_caches(d).len() as u64,
        "{}",
        r.stdout
    );
}

#[test]
fn cache_index_reuses_every_deserializers_cache_and_notices_a_changed_secondary() {
    let mut t = two_files(40, 13);
    let d = t.d().to_path_buf();
    // Two label sequences whose keys the features do not have, at the end of the file: warned
    // on every run, also when the caches are reused (never silently ignored).
    let mut rng = Rng::new(130);
    let extra: String = [9001u64, 9002]
        .iter()
        .map(|&k| {
            sequence_text(
                Some(k),
                &t.labels.inputs,
                &random_parts(&mut rng, &t.labels.inputs, 2),
            )
        })
        .collect();
    put(
        &d,
        "labels.ctf",
        file_text(&t.labels, &t.label_order).0 + &extra,
    );
    let warned = |stderr: &str| {
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| {
                l.contains("warning:") && l.contains("labels.ctf") && l.contains("2 sequences")
            })
            .collect();
        assert_eq!(lines.len(), 1, "{stderr}");
        assert_eq!(listed_keys(lines[0]), (vec![9001, 9002], false), "{stderr}");
    };
    put(
        &d,
        "c.cntk",
        config_text(
            RANDOMIZED,
            &[
                (&t.features, "chunkSizeInBytes = 200; cacheIndex = true"),
                (&t.labels, "cacheIndex = true"),
            ],
            "",
        ),
    );
    let args = ["--mb-size", "6", "--max-sweeps", "2"];
    let (first, stderr) = read(&d, "c.cntk", &args);
    check_run(&t.joined(), &first, 6, 2);
    warned(&stderr);
    // Both index caches and the key match are written.
    let caches = all_caches(&d);
    assert_eq!(
        caches_of(&d, "features.ctf", "ctfidx").len(),
        1,
        "{caches:?}"
    );
    assert_eq!(caches_of(&d, "labels.ctf", "ctfidx").len(), 1, "{caches:?}");
    assert_eq!(caches_of(&d, "", "ctfjoin").len(), 1, "{caches:?}");
    // Second run: the same output, and no cache rewritten.
    let (second, stderr) = read(&d, "c.cntk", &args);
    assert_eq!(second, first);
    warned(&stderr);
    assert_eq!(all_caches(&d), caches);
    // Labels rewritten in another order, one sequence longer: the stale cache is not used.
    let k = t.label_order[0];
    t.labels.parts.get_mut(&k).unwrap()[0].push(Sample::Sparse(vec![(4, 2.5)]));
    let order = shuffled(&mut rng, &t.label_order);
    put(&d, "labels.ctf", file_text(&t.labels, &order).0 + &extra);
    let (third, stderr) = read(&d, "c.cntk", &args);
    check_run(&t.joined(), &third, 6, 2);
    warned(&stderr);
}

// ---------------------------------------------------------------------------------------------
// 6. Configuration: the Rust builder, reader-level parameters, errors
// ---------------------------------------------------------------------------------------------

#[test]
fn the_rust_builder_describes_the_same_composite_reader() {
    let t = two_files(30, 14);
    let path = |f: &str| t.d().join(f).to_string_lossy().into_owned();
    let built = ReaderConfig::builder()
        .file(path("features.ctf"))
        .input(InputConfig::dense("x", 2))
        .chunk_size_in_bytes(200)
        .then_deserializer()
        .file(path("labels.ctf"))
        .input(InputConfig::sparse("y", 5))
        .chunk_size_in_bytes(300)
        .randomization_seed(5)
        .randomization_window(3)
        .build()
        .unwrap();
    let parsed = t.library_config(RANDOMIZED);
    let a = reference(&built, sweeps(2), 5);
    assert_eq!(a, reference(&parsed, sweeps(2), 5));
    let joined = t.joined();
    for mb in &a {
        check_minibatch(&joined, mb);
    }
    assert_eq!(mb_keys(&a).len(), 60);
}

#[test]
fn configuration_errors_and_what_is_allowed() {
    let t = two_files(10, 15);
    let d = t.d();
    let expect_error = |name: &str, text: String, parts: &[&str]| {
        put(d, name, &text);
        for command in ["read", "dump", "validate"] {
            let mut args = vec![command, name];
            if command == "read" {
                args.extend(["--mb-size", "4"]);
            }
            let r = run_expect(&args, Some(d), 2);
            assert_eq!(r.stdout, "", "{command} {name}");
            for part in parts {
                assert!(
                    r.stderr.contains(part),
                    "{command} {name}: no {part:?} in\n{}",
                    r.stderr
                );
            }
        }
        let err = ReaderConfig::from_brainscript(&text, name, None)
            .expect_err("a configuration error")
            .to_string();
        for part in parts {
            assert!(err.contains(part), "{name}: no {part:?} in {err}");
        }
    };

    // An input name used by two deserializers (whatever their aliases).
    let mut dup = t.labels.clone();
    dup.inputs[0] = Input::sparse("x", 5).alias("y");
    expect_error(
        "duplicate.cntk",
        config_text(IN_ORDER, &[(&t.features, ""), (&dup, "")], ""),
        &["unique", "'x'"],
    );
    // A deserializer that is not a record.
    let text = config_text(IN_ORDER, &[(&t.features, ""), (&t.labels, "")], "")
        .replace("\n    deserializers = (", "\n    deserializers = (3 : ");
    expect_error("not-a-record.cntk", text, &["record"]);
    // Two inputs that define the minibatch size, in different deserializers.
    let mut a = t.features.clone();
    a.inputs[0] = a.inputs[0].clone().mb_size();
    let mut b = t.labels.clone();
    b.inputs[0] = b.inputs[0].clone().mb_size();
    expect_error(
        "two-sizes.cntk",
        config_text(IN_ORDER, &[(&a, ""), (&b, "")], ""),
        &["definesMBSize"],
    );
    // A secondary deserializer without a file.
    let text = config_text(IN_ORDER, &[(&t.features, ""), (&t.labels, "")], "")
        .replace("file = \"labels.ctf\"", "");
    expect_error("no-file.cntk", text, &["file"]);

    // Allowed: the same alias in two deserializers (each file has its own names).
    let mut features = t.features.clone();
    features.inputs[0] = features.inputs[0].clone().alias("v");
    let mut labels = t.labels.clone();
    labels.inputs[0] = labels.inputs[0].clone().alias("v");
    let (text, _) = file_text(&features, &t.feature_order);
    assert!(text.contains("|v") && !text.contains("|x"));
    put(d, "features.ctf", text);
    let (text, _) = file_text(&labels, &t.label_order);
    assert!(text.contains("|v") && !text.contains("|y"));
    put(d, "labels.ctf", text);
    put(
        d,
        "alias.cntk",
        config_text(
            // Reader-level parameters in the reader record apply to every deserializer.
            "randomize = false; maxErrors = 0; traceLevel = 1",
            &[(&features, ""), (&labels, "")],
            "",
        ),
    );
    let r = run_expect(&["dump", "alias.cntk"], Some(d), 0);
    let joined = Joined::of(&[&features, &labels]);
    assert_eq!(keys(&r.stdout), t.feature_order);
    for object in json_lines(&r.stdout) {
        joined.check_dump_object(&object);
    }
    let (lines, _) = read(d, "alias.cntk", &["--mb-size", "3"]);
    check_run(&joined, &lines, 3, 1);
    assert_eq!(all_keys(&lines), t.feature_order);
}

// ---------------------------------------------------------------------------------------------
// 7. Memory
// ---------------------------------------------------------------------------------------------

/// `struct rusage` of 64-bit Linux: two `timeval`s, then 14 `long`s, the first `ru_maxrss`
/// (KiB).
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
#[repr(C)]
struct Rusage {
    times: [i64; 4],
    maxrss: i64,
    rest: [i64; 13],
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
extern "C" {
    fn wait4(pid: i32, status: *mut i32, options: i32, rusage: *mut Rusage) -> i32;
}

/// Runs `ctf ARGS` in `dir` with stdout and stderr in files; returns the exit code, stdout,
/// stderr and the child's peak resident set in KiB.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn run_measured(dir: &Path, args: &[&str]) -> (i32, String, String, u64) {
    let out = dir.join("measured.stdout");
    let err = dir.join("measured.stderr");
    // Reaped by `wait4` below, which `Child::wait` cannot do while keeping the usage.
    #[allow(clippy::zombie_processes)]
    let child = std::process::Command::new(cli_support::CTF)
        .args(args)
        .current_dir(dir)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let mut status = 0i32;
    let mut usage = Rusage {
        times: [0; 4],
        maxrss: 0,
        rest: [0; 13],
    };
    // SAFETY: the pointers are to live locals of the right layout; the child is ours and
    // not waited for elsewhere (`Child` does not wait on drop).
    let pid = unsafe { wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    assert_eq!(status & 0x7f, 0, "ctf killed by signal {}", status & 0x7f);
    let code = (status >> 8) & 0xff;
    (
        code,
        std::fs::read_to_string(out).unwrap(),
        std::fs::read_to_string(err).unwrap(),
        usage.maxrss as u64,
    )
}

#[test]
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn a_secondary_file_far_larger_than_the_cache_is_read_in_bounded_memory() {
    use std::io::Write;
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    const N: u64 = 1500;
    const LINES: u64 = 1100;
    let mut rng = Rng::new(16);
    let keys: Vec<u64> = (0..N).map(|i| 2 * i + 1).collect();
    // Primary: one short line per key, in key order; 150-byte chunks (about 12 sequences,
    // whose labels are about 1 MB), a window of 2; two loader threads whatever the machine.
    let mut features = String::new();
    // Per key: the sum of its x values and of its y values.
    let mut x_sum = BTreeMap::new();
    for &k in &keys {
        let (a, b) = (rng.below(8) as f64 / 4.0, rng.below(8) as f64 / 4.0);
        features.push_str(&format!("{k} |x {a} {b}\n"));
        x_sum.insert(k, a + b);
    }
    put(d, "features.ctf", features);
    // Secondary: LINES lines of 16 values per key, keys shuffled: about 150 MB.
    let bodies: Vec<(String, f64)> = (0..16u64)
        .map(|j| {
            let values: Vec<f64> = (0..16u64)
                .map(|i| ((i * 7 + j * 3) % 40) as f64 / 4.0)
                .collect();
            let text: String = values.iter().map(|v| format!(" {v:.2}")).collect();
            (text, values.iter().sum())
        })
        .collect();
    let mut y_sum: BTreeMap<u64, f64> = BTreeMap::new();
    let mut out = std::io::BufWriter::new(std::fs::File::create(d.join("labels.ctf")).unwrap());
    for k in shuffled(&mut rng, &keys) {
        for line in 0..LINES {
            let (body, sum) = &bodies[((k + line) % 16) as usize];
            writeln!(out, "{k} |y{body}").unwrap();
            *y_sum.entry(k).or_default() += sum;
        }
    }
    out.flush().unwrap();
    drop(out);
    let size = std::fs::metadata(d.join("labels.ctf")).unwrap().len();
    assert!(size > 140_000_000, "{size}");
    let deser = |file: &str, input: Input| Deser {
        files: vec![file.to_string()],
        inputs: vec![input],
        parts: BTreeMap::new(),
    };
    put(
        d,
        "c.cntk",
        config_text(
            "randomize = true; randomizationWindow = 2; traceLevel = 1",
            &[
                (
                    &deser("features.ctf", Input::dense("x", 2)),
                    "chunkSizeInBytes = 150",
                ),
                (&deser("labels.ctf", Input::dense("y", 16)), ""),
            ],
            "",
        ),
    );
    let (code, stdout, stderr, peak_kib) = run_measured(
        d,
        &[
            "read",
            "c.cntk",
            "--jsonl",
            "--mb-size",
            "2000",
            "--threads",
            "2",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let lines = parse_lines(&stdout);
    assert_eq!(sorted(all_keys(&lines)), keys);
    // Each minibatch's checksums are its keys' sums (the keys' y sums differ with k % 16).
    for line in &lines {
        let of = |name: &str| line.checksum.iter().find(|(n, _)| n == name).unwrap().1;
        let x: f64 = line.keys.iter().map(|k| x_sum[k]).sum();
        let y: f64 = line.keys.iter().map(|k| y_sum[k]).sum();
        assert_eq!((of("x"), of("y")), (x, y), "{line:?}");
    }
    let samples: u64 = lines
        .iter()
        .map(|l| l.samples.iter().find(|(n, _)| n == "y").unwrap().1)
        .sum();
    assert_eq!(samples, N * LINES);
    let peak = peak_kib * 1024;
    println!(
        "secondary file {size} bytes; peak RSS of ctf read {peak} bytes ({:.1}% of it)",
        100.0 * peak as f64 / size as f64
    );
    assert!(
        peak < size * 2 / 5,
        "peak RSS {peak} bytes is not far below the secondary file's {size} bytes"
    );
}

/// A composite reader in file order of `feat.ctf` (input `f`, its index cached) and
/// `lab.ctf` (input `l`, its index cached if `cache_labels`) in `dir`, both dense of dim 1.
fn features_and_labels(dir: &Path, cache_labels: bool) -> ctf_reader::config::ReaderConfigBuilder {
    let file = |name: &str| dir.join(name).to_string_lossy().into_owned();
    ReaderConfig::builder()
        .file(file("feat.ctf"))
        .input(InputConfig::dense("f", 1))
        .cache_index(true)
        .then_deserializer()
        .file(file("lab.ctf"))
        .input(InputConfig::dense("l", 1))
        .cache_index(cache_labels)
        .randomize(false)
}

/// The warnings of indexing (keys a joined deserializer does not share, an index cache that
/// cannot be used) reach the caller's diagnostic sink, as `FILE: warning: MESSAGE`, on
/// every reading path; they used to go straight to standard error, past the sink.
#[test]
fn warnings_of_indexing_go_to_the_diagnostic_sink() {
    use std::sync::{Arc, Mutex};
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    std::fs::write(d.join("feat.ctf"), "1 |f 1\n2 |f 2\n3 |f 3\n").unwrap();
    std::fs::write(d.join("lab.ctf"), "3 |l 30\n1 |l 10\n2 |l 20\n9 |l 90\n").unwrap();
    let file = |name: &str| d.join(name).to_string_lossy().into_owned();
    let config = |trace_level: u32| {
        features_and_labels(d, false)
            .trace_level(trace_level)
            .build()
            .unwrap()
    };
    type Seen = Arc<Mutex<Vec<String>>>;
    let collecting = |seen: &Seen| -> ctf_reader::reader::DiagnosticSink {
        let seen = Arc::clone(seen);
        Box::new(move |file, d| seen.lock().unwrap().push(d.display_in(file).to_string()))
    };
    let unmatched = format!(
        "{}: warning: 1 sequences have keys that the first deserializer does not have",
        file("lab.ctf")
    );
    let read_with = |path: &str, cfg: &ReaderConfig, seen: &Seen| match path {
        "threaded" => {
            let mut s = MinibatchSource::<f32>::new(cfg, sweeps(1), collecting(seen)).unwrap();
            drain(&mut s, 2);
        }
        "reference" => {
            let mut s = ReferenceSource::<f32>::new(cfg, sweeps(1), collecting(seen)).unwrap();
            while s.next_minibatch(2).unwrap().is_some() {}
        }
        _ => {
            let policy = ctf_reader::reader::ErrorPolicy::Budget;
            let mut r =
                ctf_reader::reader::SequenceReader::<f32>::new(cfg, policy, collecting(seen));
            while r.next_batch().unwrap().is_some() {}
        }
    };
    for path in ["threaded", "reference", "sequences"] {
        let seen: Seen = Arc::default();
        read_with(path, &config(1), &seen);
        let seen = seen.lock().unwrap().clone();
        assert!(
            seen.iter().any(|line| line.starts_with(&unmatched)),
            "{path}: {seen:?}"
        );
        // At traceLevel 0 no warning is reported, these neither.
        let quiet: Seen = Arc::default();
        read_with(path, &config(0), &quiet);
        assert_eq!(*quiet.lock().unwrap(), Vec::<String>::new(), "{path}");
    }
    // An index cache that cannot be used: its warning too.
    let cache = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.to_string_lossy().contains("feat.ctf.")
                && p.extension().is_some_and(|e| e == "ctfidx")
        })
        .expect("the first deserializer's index cache");
    std::fs::write(&cache, b"not an index cache").unwrap();
    let seen: Seen = Arc::default();
    read_with("threaded", &config(1), &seen);
    let seen = seen.lock().unwrap().clone();
    let ignored = format!("{}: warning: ignoring the index cache", cache.display());
    assert!(
        seen.iter().any(|line| line.starts_with(&ignored)),
        "{seen:?}"
    );
}

/// A rewrite of a joined file that keeps its size, modification time and hashed ends (two
/// labels' ids swapped in the middle) passes the index cache's checks: the first read
/// fails and removes the stale index cache; the next rescans the file, and must not join
/// by the join cache made for the old keys (whose identity now covers the keys).
#[test]
fn a_stale_join_cache_is_not_used_after_a_rewrite_that_passes_the_checks() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let text = |input: &str| -> String {
        (1..=20_000)
            .map(|i| format!("{i} |{input} {i}\n"))
            .collect()
    };
    std::fs::write(d.join("feat.ctf"), text("f")).unwrap();
    std::fs::write(d.join("lab.ctf"), text("l")).unwrap();
    let cfg = features_and_labels(d, true).build().unwrap();
    // Each key's label, as read.
    let labels = || -> Result<BTreeMap<u64, f32>, String> {
        let mut s =
            MinibatchSource::<f32>::new(&cfg, sweeps(1), quiet()).map_err(|e| e.to_string())?;
        let mut labels = BTreeMap::new();
        while let Some(mb) = s.next_minibatch(4096).map_err(|e| e.to_string())? {
            for (j, seq) in mb.sequences.iter().enumerate() {
                labels.insert(seq.key, mb.streams[1].values[j]);
            }
        }
        Ok(labels)
    };
    let before = labels().unwrap();
    assert_eq!((before[&10_000], before[&10_001]), (10_000.0, 10_001.0));
    let caches = |ext: &str| -> usize {
        std::fs::read_dir(d)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == ext)
            })
            .count()
    };
    assert_eq!((caches("ctfidx"), caches("ctfjoin")), (2, 1));

    let lab = d.join("lab.ctf");
    let modified = std::fs::metadata(&lab).unwrap().modified().unwrap();
    let swapped = text("l").replacen(
        "10000 |l 10000\n10001 |l 10001\n",
        "10001 |l 10000\n10000 |l 10001\n",
        1,
    );
    std::fs::write(&lab, swapped).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&lab)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    let failed = labels().unwrap_err();
    assert!(failed.contains("changed since it was indexed"), "{failed}");
    let after = labels().unwrap();
    assert_eq!((after[&10_000], after[&10_001]), (10_001.0, 10_000.0));
}
