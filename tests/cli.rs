//! Integration tests of the `ctf` command-line tool against its contract (SPEC §7.5, §1, §7.1;
//! README "The `ctf` tool"): output format of `dump`, diagnostics and summary of `validate`,
//! exit codes, configuration section selection, error policy, streaming and robustness.

#[allow(dead_code)]
mod cli_support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use cli_support::*;
use tempfile::TempDir;

/// A reader section with one dense input `v` of dim 1 reading `file`.
fn v_reader(file: &str) -> String {
    format!("[ file = \"{file}\" ; input = [ v = [ dim = 1 ; format = \"dense\" ] ] ]")
}

// ---------------------------------------------------------------------------------------------
// The bundled example
// ---------------------------------------------------------------------------------------------

#[test]
fn bundled_example_validates() {
    let r = run_expect(
        &["validate", "examples/pos.cntk"],
        Some(Path::new(MANIFEST_DIR)),
        0,
    );
    assert_eq!(summary_n(&r.stdout, "errors"), 0, "{}", r.stdout);
    assert!(diags(&r.stderr, "error").is_empty(), "{}", r.stderr);
}

#[test]
fn bundled_example_dumps_24_sequences_in_file_order() {
    let dir = Path::new(MANIFEST_DIR);
    let r = run_expect(&["dump", "examples/pos.cntk"], Some(dir), 0);
    let lines = json_lines(&r.stdout);
    assert_eq!(lines.len(), 24, "{}", r.stdout);
    assert_eq!(keys(&r.stdout), (100..=123).collect::<Vec<u64>>());

    // Lines per id in the data (every line of pos.ctf starts with its id and holds w, x and t).
    let data = std::fs::read_to_string(dir.join("examples/pos.ctf")).unwrap();
    let mut per_key = std::collections::BTreeMap::new();
    for line in data.lines().filter(|l| !l.trim().is_empty()) {
        let id: u64 = line.split_whitespace().next().unwrap().parse().unwrap();
        *per_key.entry(id).or_insert(0usize) += 1;
    }
    for seq in &lines {
        let inputs = seq.at("inputs");
        // Configuration names (not the aliases w, x, t), in configuration order.
        assert_eq!(inputs.keys(), ["words", "features", "tags"], "{seq:?}");
        let n = per_key[&seq.at("key").int()];
        for name in ["words", "features", "tags"] {
            assert_eq!(inputs.at(name).arr().len(), n, "{name} of {seq:?}");
        }
        for sample in inputs.at("features").arr() {
            assert_eq!(sample.arr().len(), 3, "{seq:?}");
        }
        for sample in inputs.at("words").arr() {
            assert_eq!(sample.keys(), ["indices", "values"]);
            assert_eq!(sample.at("indices").arr().len(), 1);
            assert!(sample.at("indices").arr()[0].int() < 1000);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// dump: output format and numbers
// ---------------------------------------------------------------------------------------------

/// A number token in CNTK's grammar (§7.2).
fn number_token(rng: &mut Rng) -> String {
    const SPECIAL: &str =
        "0 -0 +0 0.0 -0.0 1 -1 +1 02.0 5. 1e5 1E-05 -6.3423e+015 0.1 0.3 16777217 16777216 \
         16777219 3.4028235e38 -3.4028234e38 1.17549435e-38 1.1754942e-38 1e-40 1.4e-45 1e-45 \
         7e-46 0.30000001192092896 8388608.5 9007199254740993 1e22 1e23 \
         123456789012345678901234567890 0.000000000000000000000000000001 2.5 -2.5 \
         1.00000005960464477539062500001 0000000000123 99999999";
    if rng.chance(4) {
        let special: Vec<&str> = SPECIAL.split_whitespace().collect();
        return special[rng.below(special.len() as u64) as usize].to_string();
    }
    let mut t = String::new();
    match rng.below(4) {
        0 => t.push('-'),
        1 if rng.chance(3) => t.push('+'),
        _ => {}
    }
    let digit = |rng: &mut Rng| char::from(b'0' + rng.below(10) as u8);
    let len = if rng.chance(5) { 25 } else { 6 };
    for _ in 0..1 + rng.below(len) {
        t.push(digit(rng));
    }
    let exponent = rng.chance(3);
    match rng.below(4) {
        0 if !exponent => t.push('.'), // `5.` (but `1.e5` is not a CNTK number)
        0 | 1 => {}
        _ => {
            t.push('.');
            let len = if rng.chance(4) { 22 } else { 7 };
            for _ in 0..1 + rng.below(len) {
                t.push(digit(rng));
            }
        }
    }
    if exponent {
        t.push(if rng.chance(2) { 'e' } else { 'E' });
        match rng.below(3) {
            0 => t.push('-'),
            1 => t.push('+'),
            _ => {}
        }
        t.push_str(&rng.below(40).to_string());
    }
    t
}

/// Whether `token` reads as a finite number that does not underflow to zero in f32 (so it is
/// valid in both precisions; overflow is an error by §7.2, total underflow is left unspecified).
fn fits_f32(token: &str) -> bool {
    let v: f32 = token.parse().unwrap();
    let mantissa = token.split(['e', 'E']).next().unwrap();
    let nonzero = mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    v.is_finite() && (v != 0.0 || !nonzero)
}

/// Checks that `printed` (a number of the dump) is the shortest decimal that reads back as
/// exactly the value of `token` (from the data) in the given precision.
fn check_number(printed: &str, token: &str, double: bool) {
    let (same, shortest) = if double {
        let want: f64 = token.parse().unwrap();
        let got: f64 = printed.parse().unwrap();
        (got.to_bits() == want.to_bits(), format!("{want:e}"))
    } else {
        let want: f32 = token.parse().unwrap();
        let got: f32 = printed.parse().unwrap();
        (got.to_bits() == want.to_bits(), format!("{want:e}"))
    };
    let precision = if double { "double" } else { "float" };
    assert!(
        same,
        "{precision}: data token {token} printed as {printed}, which reads back differently"
    );
    assert_eq!(
        significant_digits(printed).len(),
        significant_digits(&shortest).len(),
        "{precision}: data token {token} printed as {printed}, not the shortest form {shortest}"
    );
}

/// One expected sequence: key, dense samples of `feat` (dim 4), sparse samples of `lab`.
struct Expected {
    key: u64,
    feat: Vec<Vec<String>>,
    lab: Vec<Vec<(u64, String)>>,
}

/// Writes a file of multi-line sequences with random numbers, random sample order on the line
/// and random whitespace (space or tab), and returns what `dump` must print for it.
fn write_number_corpus(
    path: &Path,
    rng: &mut Rng,
    tokens: &mut dyn FnMut(&mut Rng) -> String,
) -> Vec<Expected> {
    let mut text = String::new();
    let mut expected = Vec::new();
    let mut key = 3;
    for _ in 0..300 {
        key += 1 + rng.below(1000);
        let mut seq = Expected {
            key,
            feat: Vec::new(),
            lab: Vec::new(),
        };
        for _ in 0..1 + rng.below(3) {
            let ws = |rng: &mut Rng| if rng.chance(3) { "\t" } else { " " };
            let dense: Vec<String> = (0..4).map(|_| tokens(rng)).collect();
            let mut indices: Vec<u64> = Vec::new();
            for _ in 0..rng.below(5) {
                let ix = rng.below(1000);
                if !indices.contains(&ix) {
                    indices.push(ix);
                }
            }
            let sparse: Vec<(u64, String)> = indices.iter().map(|&i| (i, tokens(rng))).collect();
            let mut x = format!("|x{}", ws(rng));
            x.push_str(&dense.join(ws(rng)));
            let mut y = "|y".to_string();
            for (i, v) in &sparse {
                y.push_str(&format!("{}{i}:{v}", ws(rng)));
            }
            let (first, second) = if rng.chance(2) { (x, y) } else { (y, x) };
            text.push_str(&format!("{key}{}{first} {second}\n", ws(rng)));
            seq.feat.push(dense);
            seq.lab.push(sparse);
        }
        expected.push(seq);
    }
    std::fs::write(path, text).unwrap();
    expected
}

fn check_dump_against(stdout: &str, expected: &[Expected], double: bool) {
    let lines = json_lines(stdout);
    assert_eq!(lines.len(), expected.len());
    for (got, want) in lines.iter().zip(expected) {
        assert_eq!(got.keys(), ["key", "inputs"], "{got:?}");
        assert_eq!(got.at("key").int(), want.key);
        let inputs = got.at("inputs");
        // Names, not aliases, in configuration order (the file has them in random order).
        assert_eq!(inputs.keys(), ["feat", "lab"], "{got:?}");
        let feat = inputs.at("feat").arr();
        assert_eq!(feat.len(), want.feat.len(), "key {}", want.key);
        for (sample, tokens) in feat.iter().zip(&want.feat) {
            assert_eq!(sample.arr().len(), 4, "key {}", want.key);
            for (v, token) in sample.arr().iter().zip(tokens) {
                check_number(v.num(), token, double);
            }
        }
        let lab = inputs.at("lab").arr();
        assert_eq!(lab.len(), want.lab.len(), "key {}", want.key);
        for (sample, entries) in lab.iter().zip(&want.lab) {
            assert_eq!(sample.keys(), ["indices", "values"], "key {}", want.key);
            let indices: Vec<u64> = sample.at("indices").arr().iter().map(Json::int).collect();
            let want_indices: Vec<u64> = entries.iter().map(|e| e.0).collect();
            assert_eq!(indices, want_indices, "key {} (file order)", want.key);
            let values = sample.at("values").arr();
            assert_eq!(values.len(), entries.len());
            for (v, (_, token)) in values.iter().zip(entries) {
                check_number(v.num(), token, double);
            }
        }
    }
}

const NUM_CONFIG: &str = r#"
reader = [
    readerType = "CNTKTextFormatReader"
    file = "nums.ctf"
    input = [
        feat = [ dim = 4 ; format = "dense" ; alias = "x" ]
        lab = [ dim = 1000 ; format = "sparse" ; alias = "y" ]
    ]
]
"#;

#[test]
fn dump_prints_exact_shortest_numbers_in_both_precisions() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "c.cntk", NUM_CONFIG);
    let mut rng = Rng::new(7);
    let mut token = |rng: &mut Rng| loop {
        let t = number_token(rng);
        if fits_f32(&t) {
            return t;
        }
    };
    let expected = write_number_corpus(&dir.path().join("nums.ctf"), &mut rng, &mut token);
    for (precision, double) in [("float", false), ("double", true)] {
        let r = run_expect(
            &["dump", "c.cntk", "--precision", precision],
            Some(dir.path()),
            0,
        );
        check_dump_against(&r.stdout, &expected, double);
    }
    // The config's default precision is float.
    let r = run_expect(&["dump", "c.cntk"], Some(dir.path()), 0);
    check_dump_against(&r.stdout, &expected, false);
}

#[test]
fn dump_prints_exact_shortest_numbers_in_the_double_range() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "c.cntk", NUM_CONFIG);
    const WIDE: &str =
        "1.7976931348623157e308 -1.7976931348623157e308 4.9e-324 5e-324 2.2250738585072014e-308 \
         2.2250738585072011e-308 1e300 1e-300 1e39 -4e38 1e-46 9007199254740993 0.1 \
         123456789.123456789e-200";
    let mut rng = Rng::new(11);
    let mut token = |rng: &mut Rng| {
        if rng.chance(2) {
            let wide: Vec<&str> = WIDE.split_whitespace().collect();
            wide[rng.below(wide.len() as u64) as usize].to_string()
        } else {
            let t = number_token(rng);
            if t.parse::<f64>().unwrap().is_finite() {
                t
            } else {
                "1".to_string()
            }
        }
    };
    let expected = write_number_corpus(&dir.path().join("nums.ctf"), &mut rng, &mut token);
    let r = run_expect(
        &["dump", "c.cntk", "--precision", "double"],
        Some(dir.path()),
        0,
    );
    check_dump_against(&r.stdout, &expected, true);
}

#[test]
fn number_check_self_test() {
    check_number("0.1", "0.1", false);
    check_number("1e-45", "1.4e-45", false);
    check_number("16777216", "16777217", false);
    let fails = |printed: &'static str, token: &'static str, double: bool| {
        std::panic::catch_unwind(|| check_number(printed, token, double)).is_err()
    };
    assert!(fails("0.10000000149011612", "0.1", false), "not shortest");
    assert!(!fails("0.1", "0.1", true));
    assert!(fails("0.10000000149011612", "0.1", true), "another value");
    assert!(fails("16777216", "16777217", true), "another value");
}

#[test]
fn dump_precision_flag_decides_the_element_type() {
    let dir = TempDir::new().unwrap();
    let data = write(dir.path(), "d.ctf", "1 |a 16777217 0.1\n");
    let value = |precision: &str| {
        let r = run_expect(
            &[
                "dump",
                "--file",
                s(&data),
                "--input",
                "a:2:dense",
                "--precision",
                precision,
            ],
            None,
            0,
        );
        let seq = &json_lines(&r.stdout)[0];
        let sample = seq.at("inputs").at("a").arr()[0].arr();
        (sample[0].num().to_string(), sample[1].num().to_string())
    };
    let (big, tenth) = value("float");
    assert_eq!(
        big.parse::<f64>().unwrap(),
        16777216.0,
        "float rounds 16777217"
    );
    assert_eq!(tenth.parse::<f32>().unwrap(), 0.1f32);
    let (big, tenth) = value("double");
    assert_eq!(big.parse::<f64>().unwrap(), 16777217.0);
    assert_eq!(tenth.parse::<f64>().unwrap(), 0.1f64);

    // 1e39 overflows f32 (an error of its sequence, §7.2) but not f64.
    let data = write(dir.path(), "o.ctf", "1 |a 1 2\n2 |a 1e39 1\n");
    let args = ["dump", "--file", s(&data), "--input", "a:2:dense"];
    let r = run_expect(&[&args[..], &["--precision", "float"]].concat(), None, 1);
    assert_eq!(keys(&r.stdout), [1]);
    assert!(
        diags(&r.stderr, "error").iter().any(|d| d.line == 2),
        "{}",
        r.stderr
    );
    let r = run_expect(&[&args[..], &["--precision", "double"]].concat(), None, 0);
    assert_eq!(keys(&r.stdout), [1, 2]);
}

#[test]
fn dump_skips_invalid_sequences_of_several_kinds() {
    let dir = TempDir::new().unwrap();
    // 3: missing input b; 1 again (not adjacent): invalid; 4: a sparse index >= dim;
    // 6: input twice on a line. Sequence 5 is valid while `c` is not configured (its `|c`
    // line belongs to no sequence) and breaks the line-count rule when it is.
    let text = "1 |a 1 |b 0:1\n2 |a 2 |b\n3 |a 3\n1 |a 4 |b 1:1\n4 |a 5 |b 9:1\n\
                5 |a 6 |b 1:1\n5 |c 1\n5 |b 2:2\n6 |a 1 |b 1:1 |a 2\n7 |b 0:7 |a 7\n";
    let data = write(dir.path(), "d.ctf", text);
    let r = run_expect(
        &[
            "dump",
            "--file",
            s(&data),
            "--input",
            "a:1:dense",
            "--input",
            "b:3:sparse",
            "--input",
            "c:1:dense",
            "--max-errors",
            "10",
        ],
        None,
        0,
    );
    // With `c` configured every sequence is invalid (most lack `c`).
    assert!(keys(&r.stdout).is_empty(), "{}", r.stdout);
    let r = run_expect(
        &[
            "dump",
            "--file",
            s(&data),
            "--input",
            "a:1:dense",
            "--input",
            "b:3:sparse",
            "--max-errors",
            "5",
        ],
        None,
        0,
    );
    assert_eq!(keys(&r.stdout), [1, 2, 5, 7], "{}", r.stderr);
    let lines: BTreeSet<u64> = diags(&r.stderr, "error").iter().map(|d| d.line).collect();
    for line in [3, 4, 5, 9] {
        assert!(
            lines.contains(&line),
            "no error on line {line}:\n{}",
            r.stderr
        );
    }
}

#[test]
fn dump_line_mode_keys_are_physical_line_numbers_across_files() {
    let dir = TempDir::new().unwrap();
    let one = write(
        dir.path(),
        "one.ctf",
        "|a 1\n\n|# a comment\n|a 2\n|b 5\n|a 3\n",
    );
    let two = write(dir.path(), "two.ctf", "|a 4\n7 |a 5");
    let r = run_expect(
        &["dump", "--file", s(&one), "--input", "a:1:dense"],
        None,
        0,
    );
    assert_eq!(keys(&r.stdout), [0, 3, 5]);
    let r = run_expect(
        &[
            "dump",
            "--file",
            s(&one),
            "--file",
            s(&two),
            "--input",
            "a:1:dense",
        ],
        None,
        0,
    );
    assert_eq!(keys(&r.stdout), [0, 3, 5, 6, 7]);
    let values: Vec<String> = json_lines(&r.stdout)
        .iter()
        .map(|v| v.at("inputs").at("a").arr()[0].arr()[0].num().to_string())
        .collect();
    assert_eq!(values, ["1", "2", "3", "4", "5"]);

    // The first line has no id: every id in the file is ignored.
    let ids = write(dir.path(), "ids.ctf", "|a 1\n5 |a 2\n5 |a 3\n");
    let r = run_expect(
        &["dump", "--file", s(&ids), "--input", "a:1:dense"],
        None,
        0,
    );
    assert_eq!(keys(&r.stdout), [0, 1, 2]);
}

/// Keys with the value (`dump`) or checksum (`read`) of input `a`.
type KeyValues = Vec<(u64, f64)>;
/// Error diagnostics: file, line, column, message.
type Located = Vec<(String, u64, u64, String)>;

/// What `ctf dump` and `ctf validate` (streaming the files) and `ctf read` (through the index)
/// make of some files.
struct MixedRead {
    dumped: KeyValues,
    read: KeyValues,
    dump_errors: Located,
    validate_errors: Located,
    read_errors: Located,
}

/// Reads `files` (one input `a` of dim 1) in file order with `maxErrors` by `ctf dump`,
/// `ctf validate` and `ctf read`, expecting each to succeed unless `maxErrors` is 0.
fn read_mixed(dir: &Path, files: &[&str], max_errors: u64) -> MixedRead {
    let list = files
        .iter()
        .map(|f| format!("\"{f}\""))
        .collect::<Vec<_>>()
        .join(" : ");
    write(
        dir,
        "c.cntk",
        format!(
            "reader = [ file = ({list}) ; randomize = false ; maxErrors = {max_errors}\n\
             input = [ a = [ dim = 1 ; format = \"dense\" ] ] ]"
        ),
    );
    let located = |stderr: &str| -> Located {
        diags(stderr, "error")
            .into_iter()
            .map(|d| (d.file, d.line, d.col, d.message))
            .collect()
    };
    let code = if max_errors == 0 { 1 } else { 0 };
    let dump = run_expect(&["dump", "c.cntk"], Some(dir), code);
    let validate = run_expect(&["validate", "c.cntk"], Some(dir), 1);
    let read = run_expect(
        &["read", "c.cntk", "--jsonl", "--mb-size", "1"],
        Some(dir),
        code,
    );
    MixedRead {
        dumped: json_lines(&dump.stdout)
            .iter()
            .map(|v| {
                let value = v.at("inputs").at("a").arr()[0].arr()[0].num();
                (v.at("key").int(), value.parse().unwrap())
            })
            .collect(),
        read: read_lines(&read.stdout)
            .iter()
            .map(|l| (l.keys[0], l.checksum[0].1))
            .collect(),
        dump_errors: located(&dump.stderr),
        validate_errors: located(&validate.stderr),
        read_errors: located(&read.stderr),
    }
}

#[test]
fn a_key_repeated_across_files_of_both_modes_is_an_error_of_the_later_sequence() {
    // SPEC §1: a line-mode key is the line number across the corpus, and keys are unique
    // across the corpus. ya.ctf has no ids (keys 0 and 1); yb.ctf's ids 0 and 1 repeat them.
    let dir = TempDir::new().unwrap();
    write(dir.path(), "ya.ctf", "|a 100\n|a 101\n");
    write(dir.path(), "yb.ctf", "0 |a 200\n1 |a 201\n5 |a 205\n");
    let r = read_mixed(dir.path(), &["ya.ctf", "yb.ctf"], 5);
    assert_eq!(r.dumped, [(0, 100.0), (1, 101.0), (5, 205.0)]);
    assert_eq!(r.read, r.dumped);
    let used = |id: u64| {
        format!(
            "sequence id {id} was already used as the key of an earlier sequence in a file \
             without ids (whose keys are 0-based line numbers across the corpus)"
        )
    };
    let expected = [
        ("yb.ctf".to_string(), 1, 1, used(0)),
        ("yb.ctf".to_string(), 2, 1, used(1)),
    ];
    assert_eq!(r.validate_errors, expected);
    assert_eq!(r.dump_errors, expected);
    assert_eq!(r.read_errors, expected);
    // With maxErrors = 0 the first one fails the read, after the sequences before it.
    let r = read_mixed(dir.path(), &["ya.ctf", "yb.ctf"], 0);
    assert_eq!(r.dumped, [(0, 100.0), (1, 101.0)]);
    assert_eq!(r.read, r.dumped);
    assert_eq!(r.validate_errors, expected);
    for errors in [r.dump_errors, r.read_errors] {
        let fatal = format!(
            "too many invalid sequences: more than maxErrors = 0 (the last one: {})",
            used(0)
        );
        assert_eq!(errors, [("yb.ctf".to_string(), 1, 1, fatal)]);
    }

    // The other way round: ids 3 and 4, then a file without ids whose keys start at 2 (the
    // lines before it), so its second and third lines repeat them.
    write(dir.path(), "x.ctf", "3 |a 1\n4 |a 2\n");
    write(dir.path(), "z.ctf", "|a 3\n|a 4\n|a 5\n");
    let r = read_mixed(dir.path(), &["x.ctf", "z.ctf"], 5);
    assert_eq!(r.dumped, [(3, 1.0), (4, 2.0), (2, 3.0)]);
    assert_eq!(r.read, r.dumped);
    let repeats = |key: u64| {
        format!(
            "sequence {key} repeats the id {key} of an earlier sequence (in a file without ids \
             a sequence's key is its 0-based line number across the corpus, and keys must be \
             unique)"
        )
    };
    let expected = [
        ("z.ctf".to_string(), 2, 1, repeats(3)),
        ("z.ctf".to_string(), 3, 1, repeats(4)),
    ];
    assert_eq!(r.validate_errors, expected);
    assert_eq!(r.dump_errors, expected);
    assert_eq!(r.read_errors, expected);
}

#[test]
fn dump_sequence_ids_and_skip_sequence_ids() {
    let dir = TempDir::new().unwrap();
    let data = write(dir.path(), "d.ctf", "7 |a 1\n7 |a 2\n9 |a 3\n");
    let r = run_expect(
        &["dump", "--file", s(&data), "--input", "a:1:dense"],
        None,
        0,
    );
    let lines = json_lines(&r.stdout);
    assert_eq!(keys(&r.stdout), [7, 9]);
    assert_eq!(lines[0].at("inputs").at("a").arr().len(), 2);
    let r = run_expect(
        &[
            "dump",
            "--file",
            s(&data),
            "--input",
            "a:1:dense",
            "--skip-sequence-ids",
        ],
        None,
        0,
    );
    assert_eq!(keys(&r.stdout), [0, 1, 2]);
}

#[test]
fn whitespace_before_the_first_id_keeps_id_mode() {
    // CNTK skips the whitespace before a file's first id (CNTK-BEHAVIOUR §3.1, §4.1).
    let dir = TempDir::new().unwrap();
    let want = "{\"key\":5,\"inputs\":{\"a\":[[1],[2]]}}\n{\"key\":6,\"inputs\":{\"a\":[[3]]}}\n";
    for (name, lead) in [("spaces", "  "), ("tab", "\t"), ("blank", "\n \r\n \t")] {
        let data = write(
            dir.path(),
            &format!("{name}.ctf"),
            format!("{lead}5 |a 1\n5 |a 2\n6 |a 3\n"),
        );
        let args = ["--file", s(&data), "--input", "a:1:dense"];
        let r = run_expect(&[&["dump"], &args[..]].concat(), None, 0);
        assert_eq!(r.stdout, want, "{name}");
        let r = run_expect(&[&["validate"], &args[..]].concat(), None, 0);
        assert_eq!(r.stderr, "", "{name}");
        assert_eq!(
            summary(&r.stdout, "sequences"),
            "2 valid, 0 invalid",
            "{name}"
        );
    }
    // An error on that line is at its column counted from the line's first byte.
    let data = write(dir.path(), "bad.ctf", "  5 |a x\n6 |a 3\n");
    let r = run_expect(
        &["validate", "--file", s(&data), "--input", "a:1:dense"],
        None,
        1,
    );
    let errors = diags(&r.stderr, "error");
    assert_eq!(errors.len(), 1, "{}", r.stderr);
    assert_eq!((errors[0].line, errors[0].col), (1, 8), "{}", r.stderr);
}

#[test]
fn skip_sequence_ids_skips_digits_after_the_whitespace_that_starts_a_file() {
    // CNTK's index starts the first sequence past a file's leading whitespace and its parser
    // skips the digits at a row's start (CNTK-BEHAVIOUR §3.2, §4.1): with skipSequenceIds,
    // `  5 |a 1` as the first line is sequence 0 (its line), read the same by `dump`,
    // `validate` and `read` (through the index, parsing while indexing or not).
    let dir = TempDir::new().unwrap();
    let data = write(dir.path(), "d.ctf", "\n \t5 |a 1\n6 |a 2\n|a 3\n");
    let args = [
        "--file",
        s(&data),
        "--input",
        "a:1:dense",
        "--skip-sequence-ids",
    ];
    let r = run_expect(&[&["dump"], &args[..]].concat(), None, 0);
    assert_eq!(
        r.stdout,
        "{\"key\":1,\"inputs\":{\"a\":[[1]]}}\n{\"key\":2,\"inputs\":{\"a\":[[2]]}}\n\
         {\"key\":3,\"inputs\":{\"a\":[[3]]}}\n"
    );
    let r = run_expect(&[&["validate"], &args[..]].concat(), None, 0);
    assert_eq!(r.stderr, "");
    assert_eq!(summary(&r.stdout, "sequences"), "3 valid, 0 invalid");
    for extra in [&[][..], &["--no-parse-while-indexing"]] {
        let read = [&["read"], &args[..], &["--mb-size", "3", "--jsonl"], extra].concat();
        let r = run_expect(&read, None, 0);
        // (In the randomized order.)
        let mut keys: Vec<u64> = json_lines(&r.stdout)
            .iter()
            .flat_map(|mb| mb.at("sequences").arr().to_vec())
            .map(|k| k.num().parse().unwrap())
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, [1, 2, 3]);
    }
    // On a later line, digits after whitespace are junk, as in CNTK: an error at the digit.
    let data = write(dir.path(), "late.ctf", "5 |a 1\n  6 |a 2\n");
    let r = run_expect(
        &[
            "validate",
            "--file",
            s(&data),
            "--input",
            "a:1:dense",
            "--skip-sequence-ids",
        ],
        None,
        1,
    );
    let errors = diags(&r.stderr, "error");
    assert_eq!(errors.len(), 1, "{}", r.stderr);
    assert_eq!((errors[0].line, errors[0].col), (2, 3), "{}", r.stderr);
}

#[test]
fn dump_input_alias_and_empty_sparse_samples() {
    let dir = TempDir::new().unwrap();
    let data = write(dir.path(), "d.ctf", "1 |L 3:1 1:2 |F 1 2\n1 |F 3 4 |L\n");
    let r = run_expect(
        &[
            "dump",
            "--file",
            s(&data),
            "--input",
            "labels:5:sparse:L",
            "--input",
            "features:2:dense:F",
        ],
        None,
        0,
    );
    assert_eq!(
        r.stdout,
        "{\"key\":1,\"inputs\":{\"labels\":[{\"indices\":[3,1],\"values\":[1,2]},\
         {\"indices\":[],\"values\":[]}],\"features\":[[1,2],[3,4]]}}\n"
            .replace(' ', "")
    );
}

#[test]
fn sparse_indices_with_leading_zeros_are_their_value() {
    // Leading zeros never count towards an overflow (SPEC §7.2): 20 digits here.
    let dir = TempDir::new().unwrap();
    let data = write(dir.path(), "z.ctf", "|s 00000000000000000001:1.5 3:2\n");
    let r = run_expect(
        &["dump", "--file", s(&data), "--input", "s:5:sparse"],
        None,
        0,
    );
    assert_eq!(
        r.stdout,
        "{\"key\":0,\"inputs\":{\"s\":[{\"indices\":[1,3],\"values\":[1.5,2]}]}}\n"
    );
    // A real overflow is out of range, shown as written.
    let data = write(dir.path(), "o.ctf", "|s 99999999999999999999:1\n");
    let r = run_expect(
        &["validate", "--file", s(&data), "--input", "s:5:sparse"],
        None,
        1,
    );
    let errors = diags(&r.stderr, "error");
    assert_eq!(errors.len(), 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("sparse index 99999999999999999999 is out of range (dim 5)"),
        "{}",
        r.stderr
    );
    assert_eq!((errors[0].line, errors[0].col), (1, 4));
}

#[test]
fn numbers_of_any_length_are_correctly_rounded() {
    // A token of 100 KB whose digits offset its exponent (SPEC §1, §7.2).
    let dir = TempDir::new().unwrap();
    let token = format!("1{}e-100001", "0".repeat(100_001));
    let data = write(dir.path(), "e.ctf", format!("|a {token}\n"));
    for precision in ["double", "float"] {
        let r = run_expect(
            &[
                "dump",
                "--file",
                s(&data),
                "--input",
                "a:1:dense",
                "--precision",
                precision,
            ],
            None,
            0,
        );
        assert_eq!(
            r.stdout, "{\"key\":0,\"inputs\":{\"a\":[[1]]}}\n",
            "{precision}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration errors
// ---------------------------------------------------------------------------------------------

#[test]
fn configuration_errors_point_at_the_key_they_are_about() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "d.ctf", "1 |x 16777217\n");
    write(dir.path(), "e.ctf", "1 |y 16777217\n");
    // Line 2's keys: numDataPartitions at column 17 (its value 0 at 37), partitionIndex at
    // 40 (or randomizationWindow at 56).
    for (line2, col, message) in [
        (
            "file = \"d.ctf\"; numDataPartitions = 2; partitionIndex = 2",
            40,
            "parameter 'partitionIndex' (2) must be below 'numDataPartitions' (2)",
        ),
        (
            "file = \"d.ctf\"; numDataPartitions = 0",
            37,
            "parameter 'numDataPartitions' must be at least 1",
        ),
        (
            "file = \"d.ctf\"; sampleBasedRandomizationWindow = true; randomizationWindow = 0",
            56,
            "a sample-based 'randomizationWindow' must be at least 1 sample",
        ),
    ] {
        write(
            dir.path(),
            "c.cntk",
            format!("reader = [\n{line2}\ninput = [ x = [ dim = 1 ; format = \"dense\" ] ]\n]\n"),
        );
        let r = run_expect(&["validate", "c.cntk"], Some(dir.path()), 2);
        assert_eq!(
            r.stderr.trim_end(),
            format!("c.cntk:2:{col}: error: {message}")
        );
    }
}

#[test]
fn a_reader_level_key_of_a_later_deserializer_is_not_ignored() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "d.ctf", "1 |x 16777217\n");
    write(dir.path(), "e.ctf", "1 |y 16777217\n");
    let config = |first: &str, second: &str| {
        format!(
            "reader = [\ndeserializers = ( [ type = \"CNTKTextFormatDeserializer\"; file = \"d.ctf\"; {first}input = [ x = [ dim = 1 ; format = \"dense\" ] ] ] :\n[ type = \"CNTKTextFormatDeserializer\"; file = \"e.ctf\"; {second}input = [ y = [ dim = 1 ; format = \"dense\" ] ] ] )\n]\n"
        )
    };
    // `precision = "double"` only in the second deserializer: an error at its key (3:56),
    // not a float reader that reads 16777217 as 16777216.
    write(dir.path(), "c.cntk", config("", "precision = \"double\"; "));
    for sub in ["validate", "dump"] {
        let r = run_expect(&[sub, "c.cntk"], Some(dir.path()), 2);
        assert_eq!(
            r.stderr.trim_end(),
            "c.cntk:3:56: error: parameter 'precision' of deserializer 2 is 'double', but the \
             reader uses 'float' (the default); a reader-level parameter holds for every \
             deserializer, so each record that gives it must give that value (give it once, \
             in the reader record)"
        );
    }
    // The same value in both deserializers is accepted, and holds for the whole reader.
    write(
        dir.path(),
        "c.cntk",
        config("precision = \"double\"; ", "precision = \"double\"; "),
    );
    let r = run_expect(&["dump", "c.cntk"], Some(dir.path()), 0);
    assert_eq!(
        r.stdout.trim_end(),
        r#"{"key":1,"inputs":{"x":[[16777217]],"y":[[16777217]]}}"#
    );
}

// ---------------------------------------------------------------------------------------------
// validate: diagnostics and summary
// ---------------------------------------------------------------------------------------------

#[test]
fn validate_reports_every_error_of_invalid_inputs() {
    let file = format!("{CONFORMANCE}/invalid_inputs.txt");
    let args = [
        "validate",
        "--file",
        &file,
        "--input",
        "A:1:dense",
        "--input",
        "B:10:sparse",
    ];
    let r = run_expect(&args, None, 1);
    let errors = diags(&r.stderr, "error");
    let lines: BTreeSet<u64> = errors.iter().map(|d| d.line).collect();
    let want: BTreeSet<u64> = [
        2, 3, 5, 6, 8, 9, 10, 11, 12, 14, 15, 16, 17, 19, 21, 28, 31, 35, 40,
    ]
    .into();
    assert_eq!(lines, want, "stderr:\n{}", r.stderr);
    for d in &errors {
        assert_eq!(d.file, file, "FILE as given on the command line");
        assert!(d.col >= 1 && !d.message.trim().is_empty(), "{d:?}");
    }
    // Every stderr line is a located diagnostic; the summary counts them.
    for line in r.stderr.lines() {
        assert!(parse_diag(line).is_some(), "unlocated stderr line: {line}");
    }
    assert_eq!(summary_n(&r.stdout, "errors"), errors.len() as u64);
    let warnings = diags(&r.stderr, "warning");
    assert_eq!(summary_n(&r.stdout, "warnings"), warnings.len() as u64);
    assert!(
        summary(&r.stdout, "sequences").starts_with("1 valid"),
        "{}",
        r.stdout
    );
    assert_eq!(summary_n(&r.stdout, "lines"), 42);
    for line in r.stdout.lines() {
        assert!(parse_diag(line).is_none(), "diagnostic on stdout: {line}");
    }

    // maxErrors does not stop validate.
    let mut with_budget = args.to_vec();
    with_budget.extend(["--max-errors", "0"]);
    let again = run_expect(&with_budget, None, 1);
    assert_eq!(diags(&again.stderr, "error"), errors);

    // Only sequence 5 is valid (SPEC §7.4, C28).
    let mut dump = args.to_vec();
    dump[0] = "dump";
    dump.extend(["--max-errors", "100"]);
    let r = run_expect(&dump, None, 0);
    assert_eq!(keys(&r.stdout), [5]);
}

#[test]
fn validate_summary_of_a_clean_file() {
    let dir = TempDir::new().unwrap();
    let data = write(
        dir.path(),
        "d.ctf",
        "1 |a 1 |b 0:1\n1 |a 2\n\n|# only a comment\n2 |a 3 |b 1:1 2:2\n",
    );
    let r = run_expect(
        &[
            "validate",
            "--file",
            s(&data),
            "--input",
            "a:1:dense",
            "--input",
            "b:3:sparse",
        ],
        None,
        0,
    );
    assert_eq!(r.stderr, "", "a clean file has no diagnostics");
    assert_eq!(summary_n(&r.stdout, "lines"), 5);
    let sequences = summary(&r.stdout, "sequences");
    assert!(
        sequences.contains("2 valid") && sequences.contains("0 invalid"),
        "{sequences}"
    );
    assert_eq!(summary_n(&r.stdout, "samples a"), 3);
    assert_eq!(summary_n(&r.stdout, "samples b"), 2);
    assert_eq!(summary_n(&r.stdout, "errors"), 0);
    assert_eq!(summary_n(&r.stdout, "warnings"), 0);
}

#[test]
fn validate_names_the_file_as_written_and_counts_columns_in_bytes() {
    let dir = TempDir::new().unwrap();
    let line2 = "2 |# \u{e9}\u{20ac} comment |a 1.5 12x34\n";
    write(dir.path(), "sub/d.ctf", format!("1 |a 1 2\n{line2}"));
    write(
        dir.path(),
        "c.cntk",
        "reader = [ file = \"./sub//d.ctf\" ; input = [ a = [ dim = 2 ; format = \"dense\" ] ] ]",
    );
    let start = line2.find("12x34").unwrap() as u64 + 1;
    let check = |r: &Run, file: &str| {
        let errors = diags(&r.stderr, "error");
        assert_eq!(errors.len(), 1, "{}", r.stderr);
        let e = &errors[0];
        assert_eq!(e.file, file);
        assert_eq!(e.line, 2);
        assert!(
            (start..start + 5).contains(&e.col),
            "column {} is not within the token at bytes {start}..{} (UTF-8 comment before it)",
            e.col,
            start + 5
        );
    };
    let r = run_expect(&["validate", "c.cntk"], Some(dir.path()), 1);
    check(&r, "./sub//d.ctf");
    let r = run_expect(
        &[
            "validate",
            "--file",
            "sub/../sub/d.ctf",
            "--input",
            "a:2:dense",
        ],
        Some(dir.path()),
        1,
    );
    check(&r, "sub/../sub/d.ctf");
    // The same diagnostic from dump (maxErrors 0 fails the read there).
    let r = run_expect(&["dump", "c.cntk"], Some(dir.path()), 1);
    assert!(
        diags(&r.stderr, "error")
            .iter()
            .any(|d| d.file == "./sub//d.ctf" && d.line == 2),
        "{}",
        r.stderr
    );
    assert_eq!(keys(&r.stdout), [1]);
}

/// A file name that holds a line feed (a glob can match one) is shown escaped, so that each
/// diagnostic stays one `FILE:LINE:COL: error: MESSAGE` line; it used to be split in two.
#[test]
fn a_file_name_with_a_line_feed_keeps_each_diagnostic_on_one_line() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "d0.ctf", "|a 1 2\n");
    write(dir.path(), "d\nx.ctf", "|a 1 x\n");
    write(
        dir.path(),
        "c\nfg.cntk",
        "reader = [ file = \"d*.ctf\" ; input = [ a = [ dim = 2 ; format = \"dense\" ] ] ]",
    );
    let one_line = |r: &Run, expected: &str| {
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{}", r.stderr);
        assert!(lines[0].starts_with(expected), "{}", r.stderr);
    };
    let glob = ["--file", "d*.ctf", "--input", "a:2:dense"];
    let r = run_expect(&[&["validate"][..], &glob].concat(), Some(dir.path()), 1);
    one_line(&r, "d\\nx.ctf:1:6: error: input 'a': malformed number 'x'");
    let r = run_expect(&["validate", "c\nfg.cntk"], Some(dir.path()), 1);
    one_line(&r, "d\\nx.ctf:1:6: error: ");
    let r = run_expect(
        &[&["read", "--mb-size", "4"][..], &glob].concat(),
        Some(dir.path()),
        1,
    );
    one_line(&r, "d\\nx.ctf:1:6: error: too many invalid sequences");
    let r = run_expect(
        &["validate", "--file", "no\nfile.ctf", "--input", "a:2:dense"],
        Some(dir.path()),
        1,
    );
    one_line(&r, "no\\nfile.ctf: error: cannot read: ");
    // The configuration's own name in its diagnostics and errors.
    write(
        dir.path(),
        "bad\ncfg.cntk",
        "reader = [ file = \"d0.ctf\" ; input = [ a = [ dim = 0 ] ] ]",
    );
    let r = run_expect(&["validate", "bad\ncfg.cntk"], Some(dir.path()), 2);
    assert!(
        r.stderr.lines().all(|l| !l.starts_with("cfg.cntk"))
            && r.stderr.contains("bad\\ncfg.cntk:1:"),
        "{}",
        r.stderr
    );
    let r = run_expect(&["validate", "gone\ncfg.cntk"], Some(dir.path()), 2);
    one_line(
        &r,
        "error: cannot read configuration file 'gone\\ncfg.cntk': ",
    );
    // A name without such characters is shown as written, backslash and all.
    write(dir.path(), "e\\1.ctf", "|a y\n");
    let r = run_expect(
        &["validate", "--file", "e\\1.ctf", "--input", "a:2:dense"],
        Some(dir.path()),
        1,
    );
    one_line(&r, "e\\1.ctf:1:4: error: ");
}

/// `ctf validate` of `files` in `dir`, read as one dense input `v` of dim 1, which must exit
/// 1 (an error found).
fn validate_failing(dir: &Path, files: &[&str]) -> Run {
    let mut args = vec!["validate"];
    for file in files {
        args.extend(["--file", file]);
    }
    args.extend(["--input", "v:1:dense"]);
    run_expect(&args, Some(dir), 1)
}

#[test]
fn validate_errors_name_the_right_file_of_several() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "a.ctf", "1 |v 1\n2 |v 2\n");
    write(dir.path(), "b.ctf", "3 |v 3\n4 |v x\n");
    let r = validate_failing(dir.path(), &["a.ctf", "b.ctf"]);
    let errors = diags(&r.stderr, "error");
    assert_eq!(errors.len(), 1, "{}", r.stderr);
    assert_eq!((errors[0].file.as_str(), errors[0].line), ("b.ctf", 2));
}

/// A file that cannot be read, or that a file-level error stops, is one error: `validate`
/// reports it and checks the files after it (it used to stop there, leaving them unchecked).
#[test]
fn validate_reports_a_file_it_cannot_read_and_goes_on_with_the_next() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "a.ctf", "1 |v 1\n2 |v 2\n");
    write(dir.path(), "empty.ctf", "");
    // UTF-16 (a BOM): a file-level error at its first line.
    write(dir.path(), "utf16.ctf", b"\xff\xfe1\x00 \x00|\x00v\x00");
    write(dir.path(), "b.ctf", "3 |v 3\n4 |v x\n5 |v 5\n");
    let files = ["missing.ctf", "a.ctf", "empty.ctf", "utf16.ctf", "b.ctf"];
    let r = validate_failing(dir.path(), &files);
    let file_errors: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| parse_diag(l).is_none())
        .collect();
    assert_eq!(file_errors.len(), 2, "{}", r.stderr);
    assert!(
        file_errors[0].starts_with("missing.ctf: error: cannot read: "),
        "{}",
        r.stderr
    );
    assert!(
        file_errors[1].starts_with("empty.ctf: error: "),
        "{}",
        r.stderr
    );
    let located = diags(&r.stderr, "error");
    let at: Vec<(&str, u64)> = located.iter().map(|d| (d.file.as_str(), d.line)).collect();
    assert_eq!(at, [("utf16.ctf", 1), ("b.ctf", 2)], "{}", r.stderr);
    // Diagnostics in file order, and the summary counts the four.
    let order: Vec<&str> = r
        .stderr
        .lines()
        .map(|l| &l[..l.find(':').unwrap()])
        .collect();
    assert_eq!(order, ["missing.ctf", "empty.ctf", "utf16.ctf", "b.ctf"]);
    assert_eq!(summary_n(&r.stdout, "errors"), 4, "{}", r.stdout);
    assert_eq!(summary(&r.stdout, "sequences"), "4 valid, 1 invalid");
    assert_eq!(summary_n(&r.stdout, "files"), 5);
    // `dump` still stops at the missing file, delivering nothing after it.
    let r = run_expect(
        &[
            "dump",
            "--file",
            "missing.ctf",
            "--file",
            "a.ctf",
            "--input",
            "v:1:dense",
        ],
        Some(dir.path()),
        1,
    );
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(
        r.stderr.starts_with("missing.ctf: error: cannot read: "),
        "{}",
        r.stderr
    );
}

/// A sequence does not continue into the next file: the same id on the last line of one
/// file and the first of the next is a repeat, and the message says the lines must be in
/// one file (it said "adjacent lines", which they are).
#[test]
fn an_id_repeated_at_the_start_of_the_next_file_is_a_repeat_of_another_file() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "a.ctf", "5 |v 1\n");
    write(dir.path(), "b.ctf", "5 |v 2\n6 |v 3\n");
    let r = validate_failing(dir.path(), &["a.ctf", "b.ctf"]);
    let errors = diags(&r.stderr, "error");
    assert_eq!(errors.len(), 1, "{}", r.stderr);
    assert_eq!((errors[0].file.as_str(), errors[0].line), ("b.ctf", 1));
    assert!(
        errors[0]
            .message
            .ends_with("(an id may repeat only on adjacent lines of one file)"),
        "{}",
        r.stderr
    );
}

#[test]
fn validate_counts_the_configurations_warnings_in_its_summary() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "d.ctf", "1 |a 1\n2 |a\n");
    for (trace_level, printed) in [("1", 3), ("0", 0)] {
        let config = format!(
            "reader = [\n  readerType = \"CNTKTextFormatReader\"\n  file = \"d.ctf\"\n  \
             randomise = true\n  traceLevel = {trace_level}\n  \
             input = [ a = [ dim = 2; format = \"dense\" ] ]\n]\n"
        );
        write(dir.path(), "c.cntk", config);
        let r = run_expect(&["validate", "c.cntk"], Some(dir.path()), 0);
        let warnings = diags(&r.stderr, "warning");
        assert_eq!(warnings.len(), printed, "{}", r.stderr);
        if printed > 0 {
            assert_eq!((warnings[0].file.as_str(), warnings[0].line), ("c.cntk", 4));
            assert!(warnings[0].message.contains("randomise"), "{}", r.stderr);
        }
        // Two data warnings (short dense samples) and the misspelt key, printed or not.
        assert_eq!(
            summary_n(&r.stdout, "warnings"),
            3,
            "traceLevel {trace_level}"
        );
    }
}

/// Every option that replaces a configuration value stands in for a macro there.
#[test]
fn options_stand_in_for_macros_of_the_values_they_replace() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "d.ctf", "1 |a 1 2\n2 |a 3 4\n");
    let config = "reader = [\n  file = \"$DataDir$/d.ctf\"\n  precision = \"$P$\"\n  \
                  maxErrors = \"$E$\"\n  traceLevel = $T$\n  skipSequenceIds = \"$S$\"\n  \
                  input = [ a = [ dim = \"$Dim$\"; format = \"dense\" ] ]\n]\n";
    write(dir.path(), "c.cntk", config);
    let options: [&[&str]; 6] = [
        &["--file", "d.ctf"],
        &["--input", "a:2:dense"],
        &["--precision", "double"],
        &["--max-errors", "0"],
        &["--trace-level", "1"],
        &["--skip-sequence-ids"],
    ];
    // Each option left out leaves its macro an error (exit 2) that suggests it.
    for left_out in 0..options.len() {
        let mut args = vec!["dump", "c.cntk"];
        for (i, option) in options.iter().enumerate() {
            if i != left_out {
                args.extend_from_slice(option);
            }
        }
        let r = run_expect(&args, Some(dir.path()), 2);
        assert!(
            r.stderr.contains(&format!("pass {}", options[left_out][0])),
            "{}",
            r.stderr
        );
    }
    let args = [&["dump", "c.cntk"][..], &options.concat()].concat();
    let r = run_expect(&args, Some(dir.path()), 0);
    // Line numbers as keys: skipSequenceIds is on.
    assert_eq!(keys(&r.stdout), [0, 1]);
}

#[test]
fn short_dense_sample_is_a_warning_not_an_error() {
    let dir = TempDir::new().unwrap();
    let data = write(dir.path(), "d.ctf", "1 |a 1\n2 |a\n");
    let args = ["--file", s(&data), "--input", "a:2:dense"];
    let r = run_expect(&[&["validate"], &args[..]].concat(), None, 0);
    let warnings = diags(&r.stderr, "warning");
    assert_eq!(
        warnings.iter().map(|d| d.line).collect::<Vec<_>>(),
        [1, 2],
        "{}",
        r.stderr
    );
    assert!(warnings.iter().all(|d| d.file == s(&data)));
    assert!(diags(&r.stderr, "error").is_empty());
    assert_eq!(summary_n(&r.stdout, "warnings"), 2);
    assert_eq!(summary_n(&r.stdout, "errors"), 0);

    // dump: zero-padded values on stdout, warnings on stderr only.
    let r = run_expect(&[&["dump"], &args[..]].concat(), None, 0);
    assert_eq!(
        r.stdout,
        "{\"key\":1,\"inputs\":{\"a\":[[1,0]]}}\n{\"key\":2,\"inputs\":{\"a\":[[0,0]]}}\n"
    );
    assert_eq!(diags(&r.stderr, "warning").len(), 2, "{}", r.stderr);
    let r = run_expect(
        &[&["dump"], &args[..], &["--trace-level", "0"]].concat(),
        None,
        0,
    );
    assert!(diags(&r.stderr, "warning").is_empty(), "{}", r.stderr);
}

#[test]
fn crlf_bom_missing_newline_and_tabs_are_clean() {
    let dir = TempDir::new().unwrap();
    let plain = "1 |a 1 2 |b 3:4\n1 |a 5 6 |b\n2 |a -1 -2 |b 0:1\n";
    let variants: Vec<(&str, Vec<u8>)> = vec![
        ("plain", plain.into()),
        ("crlf", plain.replace('\n', "\r\n").into()),
        ("bom", [&b"\xEF\xBB\xBF"[..], plain.as_bytes()].concat()),
        ("no-final-newline", plain.trim_end().into()),
        (
            "crlf-no-final-newline",
            plain.trim_end().replace('\n', "\r\n").into(),
        ),
        ("tabs", plain.replace(' ', "\t").into()),
        (
            "mixed",
            plain.replace(' ', " \t ").replace("\n1", "\r\n1").into(),
        ),
    ];
    let mut reference = None;
    for (name, bytes) in variants {
        let data = write(dir.path(), &format!("{name}.ctf"), bytes);
        let args = [
            "--file",
            s(&data),
            "--input",
            "a:2:dense",
            "--input",
            "b:5:sparse",
        ];
        let r = run_expect(&[&["validate"], &args[..]].concat(), None, 0);
        assert_eq!(r.stderr, "", "{name}: no diagnostics expected");
        assert_eq!(summary_n(&r.stdout, "errors"), 0, "{name}");
        assert_eq!(summary_n(&r.stdout, "warnings"), 0, "{name}");
        let r = run_expect(&[&["dump"], &args[..]].concat(), None, 0);
        assert_eq!(keys(&r.stdout), [1, 2], "{name}");
        match &reference {
            None => reference = Some(r.stdout),
            Some(want) => assert_eq!(&r.stdout, want, "{name} dumps differently"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Error policy through dump
// ---------------------------------------------------------------------------------------------

const THREE_BAD: &str = "1 |a 1\n2 |a x\n3 |a 3\n4 |a y\n5 |a 5\n6 |a z\n7 |a 7\n";

fn dump_three_bad(extra: &[&str], code: i32) -> Run {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "e.ctf", THREE_BAD);
    let args = [&["dump", "--file", "e.ctf", "--input", "a:1:dense"], extra].concat();
    run_expect(&args, Some(dir.path()), code)
}

fn error_lines(stderr: &str) -> Vec<u64> {
    let mut lines: Vec<u64> = diags(stderr, "error").iter().map(|d| d.line).collect();
    lines.sort();
    lines
}

#[test]
fn max_errors_0_fails_at_the_first_invalid_sequence() {
    for extra in [&[][..], &["--max-errors", "0"][..]] {
        let r = dump_three_bad(extra, 1);
        assert_eq!(
            keys(&r.stdout),
            [1],
            "valid sequences before it, none after"
        );
        let errors = diags(&r.stderr, "error");
        assert!(
            errors.iter().any(|d| d.file == "e.ctf" && d.line == 2),
            "{}",
            r.stderr
        );
        assert!(errors.iter().all(|d| d.line == 2), "{}", r.stderr);
    }
}

#[test]
fn max_errors_2_fails_at_the_third_invalid_sequence() {
    let r = dump_three_bad(&["--max-errors", "2"], 1);
    assert_eq!(keys(&r.stdout), [1, 3, 5]);
    let lines: BTreeSet<u64> = error_lines(&r.stderr).into_iter().collect();
    assert_eq!(lines, [2, 4, 6].into(), "{}", r.stderr);
}

#[test]
fn max_errors_3_skips_and_reports_each_invalid_sequence_once() {
    let r = dump_three_bad(&["--max-errors", "3"], 0);
    assert_eq!(keys(&r.stdout), [1, 3, 5, 7]);
    assert_eq!(error_lines(&r.stderr), [2, 4, 6], "{}", r.stderr);
    let r = dump_three_bad(&["--max-errors", "3", "--trace-level", "0"], 0);
    assert_eq!(keys(&r.stdout), [1, 3, 5, 7]);
    assert!(diags(&r.stderr, "error").is_empty(), "{}", r.stderr);
    assert!(!r.stderr.contains("error"), "{}", r.stderr);
}

#[test]
fn max_errors_from_the_config_and_overridden_by_the_flag() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "e.ctf", THREE_BAD);
    write(
        dir.path(),
        "c.cntk",
        "reader = [ file = \"e.ctf\" ; maxErrors = 3 ; input = [ a = [ dim = 1 ; format = \"dense\" ] ] ]",
    );
    let r = run_expect(&["dump", "c.cntk"], Some(dir.path()), 0);
    assert_eq!(keys(&r.stdout), [1, 3, 5, 7]);
    let r = run_expect(
        &["dump", "c.cntk", "--max-errors", "1"],
        Some(dir.path()),
        1,
    );
    assert_eq!(keys(&r.stdout), [1, 3]);
}

#[test]
fn valid_sequences_before_a_late_error_are_all_printed() {
    // More than one 4 MiB block of valid data before the invalid sequence.
    let dir = TempDir::new().unwrap();
    let mut text = String::with_capacity(6 << 20);
    for i in 0..420_000u32 {
        text.push_str(&format!("{i} |a 1\n"));
    }
    assert!(text.len() > 4 << 20);
    text.push_str("420000 |a bad\n420001 |a 1\n");
    write(dir.path(), "big.ctf", &text);
    let r = run_expect(
        &["dump", "--file", "big.ctf", "--input", "a:1:dense"],
        Some(dir.path()),
        1,
    );
    assert_eq!(r.stdout.lines().count(), 420_000);
    let last = r.stdout.lines().last().unwrap();
    assert_eq!(last, "{\"key\":419999,\"inputs\":{\"a\":[[1]]}}");
    assert!(
        diags(&r.stderr, "error").iter().any(|d| d.line == 420_001),
        "{}",
        r.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Configuration: section selection, overrides, relative paths
// ---------------------------------------------------------------------------------------------

/// A temp dir with `a.ctf` (key 1), `b.ctf` (key 2) and `c.ctf` (key 3).
fn three_files() -> TempDir {
    let dir = TempDir::new().unwrap();
    for (name, key) in [("a", 1), ("b", 2), ("c", 3)] {
        write(
            dir.path(),
            &format!("{name}.ctf"),
            format!("{key} |v {key}\n"),
        );
    }
    dir
}

fn dump_keys(dir: &Path, config: &str, extra: &[&str]) -> Vec<u64> {
    write(dir, "c.cntk", config);
    let r = run_expect(&[&["dump", "c.cntk"], extra].concat(), Some(dir), 0);
    keys(&r.stdout)
}

#[test]
fn section_selection() {
    let dir = three_files();
    let dir = dir.path();
    let train_test = format!(
        "train = [ action = \"train\" ; reader = {} ]\ntest = [ reader = {} ]\n",
        v_reader("a.ctf"),
        v_reader("b.ctf")
    );
    // A top-level reader wins.
    let top = format!(
        "command = test\nreader = {}\n{train_test}",
        v_reader("c.ctf")
    );
    assert_eq!(dump_keys(dir, &top, &[]), [3]);
    // Else the reader of the section named by `command`.
    assert_eq!(
        dump_keys(dir, &format!("command = train\n{train_test}"), &[]),
        [1]
    );
    assert_eq!(
        dump_keys(dir, &format!("{train_test}command = test\n"), &[]),
        [2]
    );
    // Else the only reader.
    let only = format!("train = [ reader = {} ]\n", v_reader("b.ctf"));
    assert_eq!(dump_keys(dir, &only, &[]), [2]);
    // --section picks a command record or the reader record itself, and beats `command`.
    let with_command = format!("command = train\n{train_test}");
    assert_eq!(dump_keys(dir, &with_command, &["--section", "test"]), [2]);
    assert_eq!(
        dump_keys(dir, &with_command, &["--section", "test.reader"]),
        [2]
    );
    assert_eq!(dump_keys(dir, &train_test, &["--section", "train"]), [1]);
    assert_eq!(
        dump_keys(dir, &train_test, &["--section", "train.reader"]),
        [1]
    );
    assert_eq!(dump_keys(dir, &top, &["--section", "train"]), [1]);

    // Several candidates and no command: exit 2 listing them.
    write(dir, "c.cntk", &train_test);
    for sub in ["dump", "validate"] {
        let r = run_expect(&[sub, "c.cntk"], Some(dir), 2);
        assert_eq!(r.stdout, "");
        assert!(
            r.stderr.contains("train") && r.stderr.contains("test"),
            "the message must list both candidates: {}",
            r.stderr
        );
    }
}

#[test]
fn composite_configuration_with_one_deserializer() {
    let dir = three_files();
    let config = r#"
        reader = {
            randomize = false
            deserializers = ({
                type = "CNTKTextFormatDeserializer" ; module = "CNTKTextFormatReader"
                file = "b.ctf"
                input = { v = { dim = 1 ; format = "dense" } }
            })
        }"#;
    assert_eq!(dump_keys(dir.path(), config, &[]), [2]);
}

#[test]
fn command_line_replaces_the_files_and_inputs_of_the_config() {
    let dir = three_files();
    let dir = dir.path();
    write(dir, "w.ctf", "5 |v 1 |w 2 3\n");
    let config = format!("reader = {}", v_reader("a.ctf"));
    assert_eq!(dump_keys(dir, &config, &[]), [1]);
    assert_eq!(dump_keys(dir, &config, &["--file", "c.ctf"]), [3]);
    assert_eq!(
        dump_keys(dir, &config, &["--file", "b.ctf", "--file", "c.ctf"]),
        [2, 3]
    );
    let r = run_expect(
        &[
            "dump",
            "c.cntk",
            "--file",
            "w.ctf",
            "--input",
            "w:2:dense",
            "--input",
            "u:1:dense:v",
        ],
        Some(dir),
        0,
    );
    assert_eq!(
        r.stdout,
        "{\"key\":5,\"inputs\":{\"w\":[[2,3]],\"u\":[[1]]}}\n"
    );
}

#[test]
fn relative_data_paths_resolve_against_the_current_directory() {
    let dir = TempDir::new().unwrap();
    let dir = dir.path();
    write(dir, "data/d.ctf", "1 |v 1\n");
    // A decoy beside the config: the config's directory is not the base.
    write(dir, "conf/data/d.ctf", "2 |v 2\n");
    write(
        dir,
        "conf/c.cntk",
        format!("reader = {}", v_reader("data/d.ctf")),
    );
    let r = run_expect(&["dump", "conf/c.cntk"], Some(dir), 0);
    assert_eq!(keys(&r.stdout), [1]);
    let r = run_expect(
        &["dump", s(&dir.join("conf/c.cntk"))],
        Some(&dir.join("conf")),
        0,
    );
    assert_eq!(keys(&r.stdout), [2]);
}

// ---------------------------------------------------------------------------------------------
// Exit codes
// ---------------------------------------------------------------------------------------------

/// Runs the case with both subcommands and checks the usage-error contract.
fn assert_usage_error(dir: &Path, args: &[&str]) {
    for sub in ["dump", "validate"] {
        let r = run_expect(&[&[sub], args].concat(), Some(dir), 2);
        assert_eq!(
            r.stdout,
            "",
            "ctf {sub} {}: stdout must be empty",
            args.join(" ")
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    let dir = three_files();
    let dir = dir.path();
    let r = run_expect(&[], Some(dir), 2);
    assert_eq!(r.stdout, "");
    let r = run_expect(&["frobnicate"], Some(dir), 2);
    assert_eq!(r.stdout, "");
    let bad_inputs: &[&[&str]] = &[
        &[],
        &["--bogus"],
        &["--file", "a.ctf"],
        &["--input", "v:1:dense"],
        &["--file", "a.ctf", "--input", "v:0:dense"],
        &["--file", "a.ctf", "--input", "v:x:dense"],
        &["--file", "a.ctf", "--input", "v:-1:dense"],
        &["--file", "a.ctf", "--input", "v:3:weird"],
        &["--file", "a.ctf", "--input", "v:3"],
        &["--file", "a.ctf", "--input", "v"],
        &[
            "--file",
            "a.ctf",
            "--input",
            "v:1:dense",
            "--precision",
            "half",
        ],
        &[
            "--file",
            "a.ctf",
            "--input",
            "v:1:dense",
            "--max-errors",
            "-1",
        ],
        &[
            "--file",
            "a.ctf",
            "--input",
            "v:1:dense",
            "--section",
            "train",
        ],
    ];
    for args in bad_inputs {
        assert_usage_error(dir, args);
    }
}

#[test]
fn configuration_errors_exit_2() {
    let dir = three_files();
    let dir = dir.path();
    let reader = v_reader("a.ctf");
    let configs: &[(&str, String)] = &[
        (
            "unbalanced",
            format!("reader = {}\n", &reader[..reader.len() - 1]),
        ),
        ("garbage", "\u{1}\u{2}][}{ = = ;;\"\n".to_string()),
        ("no-input", "reader = [ file = \"a.ctf\" ]\n".to_string()),
        (
            "no-file",
            "reader = [ input = [ v = [ dim = 1 ; format = \"dense\" ] ] ]\n".to_string(),
        ),
        (
            "bad-format",
            "reader = [ file = \"a.ctf\" ; input = [ v = [ dim = 1 ; format = \"dens\" ] ] ]"
                .to_string(),
        ),
        (
            "zero-dim",
            "reader = [ file = \"a.ctf\" ; input = [ v = [ dim = 0 ; format = \"dense\" ] ] ]"
                .to_string(),
        ),
        ("no-reader", "train = [ action = \"train\" ]\n".to_string()),
        (
            "one-name-in-two-deserializers",
            r#"reader = {
                deserializers = ({
                    type = "CNTKTextFormatDeserializer" ; module = "CNTKTextFormatReader"
                    file = "a.ctf" ; input = { v = { dim = 1 ; format = "dense" } }
                } : {
                    type = "CNTKTextFormatDeserializer" ; module = "CNTKTextFormatReader"
                    file = "b.ctf" ; input = { V = { dim = 1 ; format = "dense" } }
                })
            }"#
            .to_string(),
        ),
    ];
    for (name, text) in configs {
        let file = format!("{name}.cntk");
        write(dir, &file, text);
        assert_usage_error(dir, &[&file]);
    }
    for (name, key) in [
        ("no-input", "input"),
        ("no-file", "file"),
        ("one-name-in-two-deserializers", "unique across the reader"),
    ] {
        let r = run(&["dump", &format!("{name}.cntk")], Some(dir));
        assert!(r.stderr.contains(key), "{name}: {}", r.stderr);
    }
    assert_usage_error(dir, &["missing.cntk"]);
    write(dir, "ok.cntk", format!("reader = {reader}"));
    assert_usage_error(dir, &["ok.cntk", "--section", "nope"]);
    assert_usage_error(dir, &["ok.cntk", "--input", "v:0:dense"]);
    // Positive control: the same config without the bad flag works.
    run_expect(&["dump", "ok.cntk"], Some(dir), 0);
}

#[test]
fn unreadable_empty_and_utf16_data_exit_1() {
    let dir = TempDir::new().unwrap();
    let dir = dir.path();
    write(dir, "empty.ctf", "");
    write(
        dir,
        "utf16le.ctf",
        b"\xFF\xFE1\x00 \x00|\x00v\x00 \x001\x00\n\x00",
    );
    write(
        dir,
        "utf16be.ctf",
        b"\xFE\xFF\x001\x00 \x00|\x00v\x00 \x001\x00\n",
    );
    write(dir, "ok.ctf", "1 |v 1\n");
    for file in ["missing.ctf", "empty.ctf", "utf16le.ctf", "utf16be.ctf"] {
        for sub in ["dump", "validate"] {
            let r = run_expect(&[sub, "--file", file, "--input", "v:1:dense"], Some(dir), 1);
            assert!(r.stderr.contains(file), "{sub} {file}: {}", r.stderr);
            if sub == "dump" {
                assert_eq!(r.stdout, "", "{file}");
            }
        }
        // Through a configuration too.
        write(dir, "c.cntk", format!("reader = {}", v_reader(file)));
        run_expect(&["dump", "c.cntk"], Some(dir), 1);
    }
    // A missing second file: the first file's sequences come out, then exit 1.
    let r = run_expect(
        &[
            "dump",
            "--file",
            "ok.ctf",
            "--file",
            "missing.ctf",
            "--input",
            "v:1:dense",
        ],
        Some(dir),
        1,
    );
    assert!(r.stderr.contains("missing.ctf"));
    assert!(keys(&r.stdout).len() <= 1);
}

#[test]
fn garbage_data_never_panics() {
    let dir = TempDir::new().unwrap();
    let dir = dir.path();
    let mut rng = Rng::new(42);
    let mut files: Vec<(&str, Vec<u8>)> = Vec::new();
    files.push(("random", (0..65_536).map(|_| rng.next() as u8).collect()));
    files.push(("ff", vec![0xFF; 65_536]));
    files.push(("nul", vec![0; 65_536]));
    files.push(("ff-runs", {
        let mut v = Vec::new();
        for i in 0..2000 {
            v.extend_from_slice(format!("{i} |x 1 2 3 |y 1:1\n").as_bytes());
            v.extend(vec![0xFF; rng.below(40) as usize]);
        }
        v
    }));
    files.push(("long-number", {
        let mut v = b"1 |x ".to_vec();
        v.extend(vec![b'9'; 1 << 20]);
        v
    }));
    files.push(("long-dense", "|x 1.5".repeat(1 << 18).into_bytes()));
    files.push(("long-sparse", {
        let mut v = b"1 |y".to_vec();
        for _ in 0..(1 << 18) {
            v.extend_from_slice(b" 1:1");
        }
        v.push(b'\n');
        v
    }));
    files.push(("long-comment", {
        let mut v = b"1 |x 1 2 3 |#".to_vec();
        v.extend(vec![b'c'; 1 << 20]);
        v
    }));
    const SOUP: &[&str] = &[
        "|x",
        "|y",
        "|z",
        " ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "|#",
        "|",
        "#",
        "1",
        "-",
        "+",
        ".",
        "e",
        ":",
        "12",
        "3.5",
        "1e400",
        "-0",
        "99999999999999999999999",
        "\u{e9}",
        "\0",
        "0x1",
        "\u{feff}",
        "7 ",
        "4294967296 ",
        "18446744073709551616 ",
        "2:",
        ":3",
        "1e-400",
    ];
    for name in ["soup0", "soup1", "soup2", "soup3"] {
        let mut v = Vec::new();
        while v.len() < 100_000 {
            v.extend_from_slice(SOUP[rng.below(SOUP.len() as u64) as usize].as_bytes());
        }
        files.push((name, v));
    }
    for (name, bytes) in &files {
        let path = write(dir, &format!("{name}.ctf"), bytes);
        for extra in [
            &[][..],
            &["--max-errors", "1000000", "--precision", "double"][..],
        ] {
            for sub in ["dump", "validate"] {
                let args = [
                    &[
                        sub,
                        "--file",
                        s(&path),
                        "--input",
                        "x:3:dense",
                        "--input",
                        "y:5:sparse",
                    ],
                    extra,
                ]
                .concat();
                let r = run(&args, None);
                assert!(
                    r.code == 0 || r.code == 1,
                    "{name}: ctf {} exited {}\n{}",
                    args.join(" "),
                    r.code,
                    r.stderr
                );
                if sub == "dump" {
                    json_lines(&r.stdout);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Streaming
// ---------------------------------------------------------------------------------------------

#[test]
fn dump_streams_a_30_mb_file_in_bounded_memory() {
    const LINES: usize = 300_000;
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("big.ctf");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for i in 0..LINES {
            writeln!(
                w,
                "{i} |x 0.123456 1.234567 2.345678 3.456789 4.567891 5.678912 6.789123 7.891234 |y 4:1 17:0.5"
            )
            .unwrap();
        }
    }
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size > 28_000_000, "{size}");
    let ctf_args = [
        "dump",
        "--file",
        s(&path),
        "--input",
        "x:8:dense",
        "--input",
        "y:20:sparse",
    ];

    let time = Path::new("/usr/bin/time");
    let out = if time.exists() {
        Command::new(time)
            .args(["-f", "%M", CTF])
            .args(ctf_args)
            .output()
            .unwrap()
    } else {
        Command::new(CTF).args(ctf_args).output().unwrap()
    };
    let r = finish("ctf dump (30 MB)", out);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), LINES);
    let mut lines = r.stdout.lines();
    let first = json::parse(lines.next().unwrap()).unwrap();
    assert_eq!(first.at("key").int(), 0);
    let last = json::parse(r.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last.at("key").int(), LINES as u64 - 1);
    assert_eq!(
        last.at("inputs").at("y").arr()[0].at("indices"),
        &json::parse("[4,17]").unwrap()
    );
    if time.exists() {
        let kb: u64 = r
            .stderr
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("no %M line from /usr/bin/time: {}", r.stderr));
        println!("peak RSS of ctf dump on a {size}-byte file: {kb} KiB");
        assert!(
            kb < 64 * 1024,
            "peak RSS {kb} KiB on a {size}-byte file: memory grows with the file"
        );
    } else {
        println!("note: /usr/bin/time not found; peak RSS not checked");
    }

    // `ctf dump | head -1`: exit 0 or SIGPIPE, never a panic.
    let mut child = Command::new(CTF)
        .args(ctf_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("{\"key\":0,"), "{line}");
    drop(reader);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    use std::os::unix::process::ExitStatusExt;
    assert!(
        out.status.code() == Some(0) || out.status.signal() == Some(13),
        "dump | head -1: {:?}\n{stderr}",
        out.status
    );
}

/// A standard error that is a closed pipe (`ctf validate 2>&1 >/dev/null | head -1`) loses the
/// messages but changes nothing else: the exit code and stdout are those of a normal run,
/// never a panic (`eprintln!` panicked on the first diagnostic, exit 101).
#[test]
fn a_closed_stderr_changes_only_what_is_shown() {
    let dir = TempDir::new().unwrap();
    let dir = dir.path();
    let data: String = (0..2_000)
        .map(|i| {
            if i % 2 == 1 {
                "|v z\n".to_string()
            } else {
                format!("|v {i}\n")
            }
        })
        .collect();
    let file = write(dir, "bad.ctf", data);
    let input = ["--file", s(&file), "--input", "v:1:dense"];
    let cases: [(&[&str], i32); 4] = [
        (&["validate"], 1),
        (&["dump", "--max-errors", "1000"], 0),
        (&["read", "--mb-size", "100", "--max-errors", "1000"], 0),
        (&["stats", "--max-errors", "1000"], 0),
    ];
    for (command, code) in cases {
        let args: Vec<&str> = command.iter().chain(&input).copied().collect();
        let (closed, stderr) = std::io::pipe().unwrap();
        drop(closed);
        let closed_run = Command::new(CTF)
            .args(&args)
            .current_dir(dir)
            .stderr(stderr)
            .output()
            .unwrap();
        let closed_run = finish(&format!("ctf {} 2>closed-pipe", args.join(" ")), closed_run);
        let open_run = run_expect(&args, Some(dir), code);
        assert!(
            !open_run.stderr.is_empty(),
            "ctf {}: nothing on stderr, so the closed pipe tests nothing",
            args.join(" ")
        );
        assert_eq!(
            closed_run.code,
            code,
            "ctf {} 2>closed-pipe",
            args.join(" ")
        );
        assert_eq!(closed_run.stdout, open_run.stdout, "ctf {}", args.join(" "));
    }
}

/// `--file` replaces the first deserializer's files of a composite reader; `--input` cannot
/// say which deserializer an input belongs to, so with a composite reader it is a usage error
/// naming the configuration.
#[test]
fn file_and_input_overrides_of_a_composite_reader() {
    let dir = TempDir::new().unwrap();
    let dir = dir.path();
    write(dir, "f.ctf", "1 |x 1\n2 |x 2\n");
    write(dir, "g.ctf", "2 |x 20\n");
    write(dir, "l.ctf", "2 |y 5\n1 |y 4\n");
    write(
        dir,
        "c.cntk",
        r#"reader = {
            deserializers = ({
                type = "CNTKTextFormatDeserializer" ; file = "f.ctf"
                input = { x = { dim = 1 ; format = "dense" } }
            } : {
                type = "CNTKTextFormatDeserializer" ; file = "l.ctf"
                input = { y = { dim = 1 ; format = "dense" } }
            })
        }"#,
    );
    let r = run_expect(&["dump", "c.cntk", "--file", "g.ctf"], Some(dir), 0);
    assert_eq!(
        r.stdout,
        "{\"key\":2,\"inputs\":{\"x\":[[20]],\"y\":[[5]]}}\n"
    );
    assert_usage_error(dir, &["c.cntk", "--input", "x:1:dense"]);
    let r = run_expect(&["dump", "c.cntk", "--input", "x:1:dense"], Some(dir), 2);
    assert!(
        r.stderr.contains(
            "c.cntk:2:30: error: the inputs given cannot replace the inputs of a composite \
             reader of 2 deserializers"
        ),
        "{}",
        r.stderr
    );
}

/// `--file`, `--input` and `--precision` replace the configuration's values before anything
/// is required or checked, so they stand in for what the configuration lacks or this reader
/// cannot use; `ctf` itself said "edit the configuration or pass --file" for a `$macro$`,
/// but the configuration was checked first and `--file` never helped.
#[test]
fn file_input_and_precision_stand_in_for_what_the_configuration_lacks() {
    let dir = TempDir::new().unwrap();
    let dir = dir.path();
    write(dir, "d.ctf", "|a 1 2\n|a 3 4\n");
    let want = "{\"key\":0,\"inputs\":{\"a\":[[1,2]]}}\n{\"key\":1,\"inputs\":{\"a\":[[3,4]]}}\n";
    let input = "input = [ a = [ dim = 2 ; format = \"dense\" ] ]";
    for (name, body, args) in [
        (
            "macro",
            format!("file = \"$DataDir$/d.ctf\"\n{input}"),
            &["--file", "d.ctf"][..],
        ),
        (
            "bare-macro",
            format!("file = $DataDir$\n{input}"),
            &["--file", "d.ctf"],
        ),
        ("no-file", input.to_string(), &["--file", "d.ctf"]),
        (
            "no-input",
            "file = \"d.ctf\"".to_string(),
            &["--input", "a:2:dense"],
        ),
        (
            "zero-dim",
            "file = \"d.ctf\"\ninput = [ a = [ dim = 0 ; format = \"dense\" ] ]".to_string(),
            &["--input", "a:2:dense"],
        ),
        (
            "half",
            format!("file = \"d.ctf\"\nprecision = \"half\"\n{input}"),
            &["--precision", "float"],
        ),
    ] {
        let config = format!("{name}.cntk");
        write(dir, &config, format!("reader = [\n{body}\n]\n"));
        // Without the value beside it, the configuration is refused...
        run_expect(&["dump", &config], Some(dir), 2);
        // ...and with it, read.
        let r = run_expect(&[&["dump", &config][..], args].concat(), Some(dir), 0);
        assert_eq!(r.stdout, want, "{name}: {}", r.stderr);
    }
}

/// `--skip-sequence-ids` makes every line a sequence in every deserializer of a composite
/// reader, not only in the last one: the files then join line by line.
#[test]
fn skip_sequence_ids_applies_to_every_deserializer_of_a_composite_reader() {
    let dir = TempDir::new().unwrap();
    let dir = dir.path();
    write(dir, "feat.ctf", "1 |f 1 2\n2 |f 3 4\n3 |f 5 6\n");
    write(dir, "lab.ctf", "2 |l 1\n1 |l 0\n4 |l 1\n");
    write(
        dir,
        "comp.cntk",
        r#"reader = {
            randomize = false ; maxErrors = 5
            deserializers = ({
                type = "CNTKTextFormatDeserializer" ; file = "feat.ctf"
                input = { features = { dim = 2 ; format = "dense" ; alias = "f" } }
            } : {
                type = "CNTKTextFormatDeserializer" ; file = "lab.ctf"
                input = { labels = { dim = 1 ; format = "dense" ; alias = "l" } }
            })
        }"#,
    );
    // By id: key 3 has no label (an invalid sequence, within maxErrors).
    let r = run_expect(&["dump", "comp.cntk", "--trace-level", "0"], Some(dir), 0);
    assert_eq!(
        r.stdout,
        "{\"key\":1,\"inputs\":{\"features\":[[1,2]],\"labels\":[[0]]}}\n\
         {\"key\":2,\"inputs\":{\"features\":[[3,4]],\"labels\":[[1]]}}\n"
    );
    // By line, in both files.
    let r = run_expect(&["dump", "comp.cntk", "--skip-sequence-ids"], Some(dir), 0);
    assert_eq!(
        r.stdout,
        "{\"key\":0,\"inputs\":{\"features\":[[1,2]],\"labels\":[[1]]}}\n\
         {\"key\":1,\"inputs\":{\"features\":[[3,4]],\"labels\":[[0]]}}\n\
         {\"key\":2,\"inputs\":{\"features\":[[5,6]],\"labels\":[[1]]}}\n"
    );
    assert!(diags(&r.stderr, "error").is_empty(), "{}", r.stderr);
    // Every subcommand reads the same configuration: `validate` agrees.
    let r = run_expect(
        &["validate", "comp.cntk", "--skip-sequence-ids"],
        Some(dir),
        0,
    );
    assert_eq!(summary_n(&r.stdout, "errors"), 0, "{}", r.stdout);
}

/// Configuration warnings (an unknown key) follow `traceLevel` like the data's: 0 is errors
/// only, from the configuration or `--trace-level`; they were printed at any level.
#[test]
fn configuration_warnings_are_silent_at_trace_level_0() {
    let dir = TempDir::new().unwrap();
    let dir = dir.path();
    write(dir, "d.ctf", "|a 1 2\n");
    let config = |trace: &str| {
        format!(
            "reader = [\n file = \"d.ctf\"\n foo = 1\n {trace}\n input = [ a = [ dim = 2 ; format = \"dense\" ] ]\n]\n"
        )
    };
    write(dir, "quiet.cntk", config("traceLevel = 0"));
    write(dir, "plain.cntk", config(""));
    let warned = "unknown reader parameter 'foo'";
    let r = run_expect(&["dump", "quiet.cntk"], Some(dir), 0);
    assert_eq!(r.stderr, "");
    let r = run_expect(&["dump", "plain.cntk", "--trace-level", "0"], Some(dir), 0);
    assert_eq!(r.stderr, "");
    let r = run_expect(&["dump", "plain.cntk"], Some(dir), 0);
    assert!(r.stderr.contains(warned), "{}", r.stderr);
    let r = run_expect(&["dump", "quiet.cntk", "--trace-level", "1"], Some(dir), 0);
    assert!(r.stderr.contains(warned), "{}", r.stderr);
}

#[test]
fn warnings_and_errors_come_in_file_order_and_stop_at_the_fatal_error() {
    // With maxErrors = 1 the error on line 5 is fatal: the warnings of lines 2 and 4 come
    // in file order among the errors, and that of line 6, after the fatal error, is never
    // reported (`dump` reported every warning of a step first, line 6's too).
    let dir = TempDir::new().unwrap();
    write(
        dir.path(),
        "w.ctf",
        "|a 1 2\n|a 1\n|a x 2\n|a 1\n|a y 1\n|a 1\n",
    );
    write(
        dir.path(),
        "w.cntk",
        "reader = [ file = \"w.ctf\"; maxErrors = 1; randomize = false\n  \
         input = [ a = [ dim = 2; format = \"dense\" ] ] ]\n",
    );
    let padded = "warning: input 'a' has 1 of 2 values; padded with zeros";
    let expected = [
        format!("w.ctf:2:1: {padded}"),
        "w.ctf:3:4: error: input 'a': malformed number 'x': not a number".to_string(),
        format!("w.ctf:4:1: {padded}"),
        "w.ctf:5:4: error: too many invalid sequences: more than maxErrors = 1 (the last \
         one: input 'a': malformed number 'y': not a number)"
            .to_string(),
    ];
    for args in [
        &["dump", "w.cntk"][..],
        &["read", "w.cntk", "--mb-size", "10", "--jsonl"],
    ] {
        let r = run_expect(args, Some(dir.path()), 1);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines, expected, "{args:?}");
    }
}
