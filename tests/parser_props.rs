//! Property tests of the CTF parser (`ctf_reader::parser::StreamParser`) against SPEC §1 and
//! §7.1-7.3.
//!
//! 1. Round trip: a random valid dataset model, rendered with random valid variations, parses
//!    back to the model (f32 and f64, values bitwise equal to `str::parse`).
//! 2. Splits: feeding a text in two pieces at every split point, byte by byte, or in random
//!    pieces (also calling `clear()` after each piece, as a reader does) gives exactly what
//!    feeding it whole gives, for valid and invalid texts.
//! 3. A naive reference parser (`props_support::reference`) agrees with the parser on
//!    generated valid data, and on corpora of several files (keys and ids across files).
//! 4. Robustness: arbitrary bytes, token soups, nearly valid data and mutated valid texts
//!    never panic, keep the structural invariants, and agree with the naive reference
//!    wherever the SPEC decides the outcome.
//! 5. Error rules, fatal errors and the number grammar, as deterministic tests.
//!
//! Expected values always come from the model, the SPEC or `str::parse`, never from the
//! parser itself. Generators draw their choices from a proptest byte vector
//! (`props_support::entropy`), so failures shrink. `PROPS_SCALE=N` runs N times the cases.

mod props_support;

use std::collections::HashSet;

use ctf_reader::parser::StreamOptions;
use ctf_reader::{InputConfig, Severity};
use proptest::prelude::*;

use props_support::corpus::{gen_corpus, mutate, Corpus};
use props_support::entropy::{config, entropy, Src};
use props_support::grammar::{decrement, exact_decimal};
use props_support::model::{gen_dataset_for, gen_inputs, render, Rendered, Values};
use props_support::reference::{reference, Owner};
use props_support::run::{
    parse_bits, parse_cut, parse_cut_clearing, parse_pieces, parse_whole, show, snapshot, Flt,
    SampleSnap, SeqSnap, Snapshot,
};

/// A generated valid file with what it must parse to.
struct Case {
    inputs: Vec<InputConfig>,
    dims: Vec<usize>,
    key_base: u64,
    rendered: Rendered,
}

fn gen_case<T: Flt>(src: &mut Src) -> Case {
    let key_base = if src.chance(30) {
        src.below(100_000) as u64
    } else {
        0
    };
    let inputs = gen_inputs(src);
    let ds = gen_dataset_for(src, inputs, &|t| parse_bits::<T>(t).is_some());
    let rendered = render(src, &ds, key_base);
    Case {
        inputs: ds.configs(),
        dims: ds.inputs.iter().map(|i| i.dim).collect(),
        key_base,
        rendered,
    }
}

/// The model's sequences as the parser must deliver them.
fn expected_seqs<T: Flt>(case: &Case) -> Vec<SeqSnap> {
    let bits = |t: &str| parse_bits::<T>(t).expect("the model holds valid values only");
    case.rendered
        .expected
        .iter()
        .map(|e| SeqSnap {
            key: e.key,
            line: e.line,
            counted_lines: e.counted_lines,
            inputs: e
                .samples
                .iter()
                .zip(&case.dims)
                .map(|(samples, &dim)| {
                    samples
                        .iter()
                        .map(|v| match v {
                            Values::Dense(tokens) => {
                                let mut values: Vec<u64> = tokens.iter().map(|t| bits(t)).collect();
                                values.resize(dim, 0); // zero padding: +0.0
                                SampleSnap::Dense(values)
                            }
                            Values::Sparse(entries) => SampleSnap::Sparse(
                                entries.iter().map(|(_, i, v)| (*i, bits(v))).collect(),
                            ),
                        })
                        .collect()
                })
                .collect(),
        })
        .collect()
}

fn errors(snap: &Snapshot) -> Vec<&ctf_reader::Diagnostic> {
    snap.diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect()
}

fn warning_lines(snap: &Snapshot) -> Vec<u64> {
    let mut lines: Vec<u64> = snap
        .diags
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .map(|d| d.line)
        .collect();
    lines.sort_unstable();
    lines
}

// ---------------------------------------------------------------------------------------
// 1. Round trip
// ---------------------------------------------------------------------------------------

fn check_round_trip<T: Flt>(bytes: &[u8]) -> Result<(), TestCaseError> {
    let case = gen_case::<T>(&mut Src::new(bytes));
    let r = &case.rendered;
    let text = show(&r.text);
    let snap = parse_whole::<T>(&case.inputs, r.options, case.key_base, &r.text);
    prop_assert!(snap.fatal.is_none(), "fatal {:?} on {}", snap.fatal, text);
    prop_assert!(
        errors(&snap).is_empty(),
        "errors {:?}\non valid {}",
        errors(&snap),
        text
    );
    let expected = expected_seqs::<T>(&case);
    let keys = |s: &[SeqSnap]| s.iter().map(|s| (s.key, s.line)).collect::<Vec<_>>();
    prop_assert_eq!(keys(&snap.seqs), keys(&expected), "(key, line) of {}", text);
    for (got, want) in snap.seqs.iter().zip(&expected) {
        prop_assert_eq!(got, want, "sequence {} of {}", want.key, text);
    }
    let mut padded = r.padded_lines.clone();
    padded.sort_unstable();
    prop_assert_eq!(warning_lines(&snap), padded, "warnings of {}", text);
    let c = snap.counts;
    prop_assert_eq!(
        (
            c.lines,
            c.skipped_lines,
            c.sequences,
            c.invalid_sequences,
            c.errors
        ),
        (r.lines, r.skipped, expected.len() as u64, 0, 0),
        "counts (lines, skipped, sequences, invalid, errors) of {}",
        text
    );
    prop_assert_eq!(c.warnings, r.padded_lines.len() as u64);
    prop_assert_eq!(snap.lines_in_file, r.lines);
    Ok(())
}

proptest! {
    #![proptest_config(config(600))]

    #[test]
    fn round_trip_f32(bytes in entropy(24_000)) {
        check_round_trip::<f32>(&bytes)?;
    }

    #[test]
    fn round_trip_f64(bytes in entropy(24_000)) {
        check_round_trip::<f64>(&bytes)?;
    }
}

// ---------------------------------------------------------------------------------------
// 2. Splits
// ---------------------------------------------------------------------------------------

fn check_splits<T: Flt>(
    inputs: &[InputConfig],
    options: StreamOptions,
    key_base: u64,
    text: &[u8],
    extra_cuts: &mut Src,
) -> Result<(), TestCaseError> {
    let whole = parse_whole::<T>(inputs, options, key_base, text);
    // Every split point of texts up to 2000 bytes. Of longer ones (each split parses the
    // whole text: quadratic), the first and last 200, both sides of every line feed, and
    // about 300 more spread evenly.
    let n = text.len();
    let step = (n / 300).max(1);
    let near_lf = |k: usize| text.get(k) == Some(&b'\n') || k > 0 && text[k - 1] == b'\n';
    let splits =
        (0..=n).filter(|&k| n <= 2000 || k < 200 || k + 200 > n || k % step == 0 || near_lf(k));
    for k in splits {
        let split = parse_cut::<T>(inputs, options, key_base, text, &[k]);
        prop_assert_eq!(&split, &whole, "split at {} of {}", k, show(text));
    }
    let bytewise = parse_pieces::<T>(inputs, options, key_base, text.chunks(1));
    prop_assert_eq!(&bytewise, &whole, "byte by byte: {}", show(text));
    let empty: &[u8] = &[];
    let with_empty = parse_pieces::<T>(inputs, options, key_base, [empty, text, empty]);
    prop_assert_eq!(&with_empty, &whole, "empty pieces around {}", show(text));
    for _ in 0..4 {
        let n = extra_cuts.range(2, 8);
        let mut cuts: Vec<usize> = (0..n).map(|_| extra_cuts.below(text.len() + 1)).collect();
        cuts.sort_unstable();
        let pieces = parse_cut::<T>(inputs, options, key_base, text, &cuts);
        prop_assert_eq!(&pieces, &whole, "cuts {:?} of {}", cuts, show(text));
        // taking the results and clearing after every piece loses and duplicates nothing
        let cleared = parse_cut_clearing::<T>(inputs, options, key_base, text, &cuts);
        prop_assert_eq!(
            &cleared,
            &whole,
            "clear() after the pieces {:?} of {}",
            cuts,
            show(text)
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(120))]

    #[test]
    fn splits_valid(bytes in entropy(3000)) {
        let mut src = Src::new(&bytes);
        let case = gen_case::<f32>(&mut src);
        let r = &case.rendered;
        check_splits::<f32>(&case.inputs, r.options, case.key_base, &r.text, &mut src)?;
    }

    #[test]
    fn splits_mutated(bytes in entropy(3000)) {
        let mut src = Src::new(&bytes);
        let (inputs, options, key_base, text) = mutated_case::<f64>(&mut src);
        check_splits::<f64>(&inputs, options, key_base, &text, &mut src)?;
    }

    #[test]
    fn splits_token_soup(bytes in entropy(300)) {
        let mut src = Src::new(&bytes);
        let (inputs, options, text) = token_soup(&mut src);
        check_splits::<f32>(&inputs, options, 0, &text, &mut src)?;
    }

    #[test]
    fn splits_near_valid(bytes in entropy(600)) {
        let mut src = Src::new(&bytes);
        let (inputs, options, text) = near_valid(&mut src);
        check_splits::<f32>(&inputs, options, 0, &text, &mut src)?;
    }

    #[test]
    fn splits_arbitrary_bytes(text in prop::collection::vec(any::<u8>(), 0..200), opts in 0u8..4) {
        let options = StreamOptions { skip_sequence_ids: opts & 1 != 0, frame_mode: opts & 2 != 0 };
        check_splits::<f32>(&soup_inputs(2, 3), options, 0, &text, &mut Src::new(&[]))?;
    }
}

// ---------------------------------------------------------------------------------------
// 3 and 4. The naive reference, and robustness
// ---------------------------------------------------------------------------------------

/// Invariants that hold for any input whatever the reference says.
fn check_invariants(
    snap: &Snapshot,
    inputs: &[InputConfig],
    text: &[u8],
) -> Result<(), TestCaseError> {
    let shown = show(text);
    let c = snap.counts;
    prop_assert_eq!(c.sequences, snap.seqs.len() as u64, "{}", shown);
    prop_assert_eq!(c.invalid_sequences, snap.invalid.len() as u64, "{}", shown);
    prop_assert_eq!(c.errors, errors(snap).len() as u64, "{}", shown);
    prop_assert_eq!(
        c.warnings,
        (snap.diags.len() - errors(snap).len()) as u64,
        "{}",
        shown
    );
    for d in &snap.diags {
        prop_assert!(
            d.line >= 1 && d.line <= c.lines && d.col >= 1,
            "{:?} outside the file ({} lines): {}",
            d,
            c.lines,
            shown
        );
    }
    let mut last_valid_before = 0;
    for inv in &snap.invalid {
        prop_assert_eq!(
            inv.first_error.severity,
            Severity::Error,
            "{:?}: {}",
            inv,
            shown
        );
        prop_assert!(
            snap.diags.contains(&inv.first_error),
            "{:?} is not among the diagnostics: {}",
            inv,
            shown
        );
        prop_assert!(inv.valid_before >= last_valid_before && inv.valid_before <= snap.seqs.len());
        last_valid_before = inv.valid_before;
    }
    let mut keys = HashSet::new();
    for s in &snap.seqs {
        prop_assert!(
            keys.insert(s.key),
            "key {} delivered twice: {}",
            s.key,
            shown
        );
        prop_assert!(s.line >= 1 && s.line <= c.lines);
        let mut longest = 0;
        for (input, samples) in s.inputs.iter().enumerate() {
            prop_assert!(
                !samples.is_empty(),
                "sequence {} delivered without input {}: {}",
                s.key,
                input,
                shown
            );
            longest = longest.max(samples.len());
            let dim = inputs[input].dim;
            for sample in samples {
                match sample {
                    SampleSnap::Dense(v) => prop_assert_eq!(v.len(), dim, "{}", shown),
                    SampleSnap::Sparse(entries) => {
                        for &(i, _) in entries {
                            prop_assert!((i as usize) < dim, "index {} >= {}: {}", i, dim, shown);
                        }
                    }
                }
            }
        }
        prop_assert!(s.counted_lines as usize <= longest, "{}", shown);
    }
    Ok(())
}

/// Parses `text` and compares with the naive reference.
fn check_against_reference<T: Flt>(
    inputs: &[InputConfig],
    options: StreamOptions,
    key_base: u64,
    text: &[u8],
) -> Result<(), TestCaseError> {
    let snap = parse_whole::<T>(inputs, options, key_base, text);
    let shown = show(text);
    check_invariants(&snap, inputs, text)?;
    let Some(r) = reference::<T>(text, inputs, options, key_base) else {
        prop_assert!(snap.fatal.is_some(), "not fatal: {}", shown);
        return Ok(());
    };
    prop_assert!(snap.fatal.is_none(), "fatal {:?}: {}", snap.fatal, shown);
    prop_assert_eq!(snap.counts.lines, r.lines, "physical lines of {}", shown);
    prop_assert_eq!(snap.lines_in_file, r.lines, "physical lines of {}", shown);
    for d in &snap.diags {
        let len = r.line_len[d.line as usize - 1] as u64;
        prop_assert!(d.col <= len + 1, "{:?} beyond its line: {}", d, shown);
    }
    if r.ambiguous {
        return Ok(());
    }
    prop_assert_eq!(&snap.seqs, &r.seqs, "valid sequences of {}", shown);
    let got: Vec<_> = snap
        .invalid
        .iter()
        .map(|i| (i.line, i.valid_before))
        .collect();
    let want: Vec<_> = r.invalid.iter().map(|i| (i.line, i.valid_before)).collect();
    prop_assert_eq!(
        got,
        want,
        "invalid sequences (line, valid_before) of {}",
        shown
    );
    for (g, w) in snap.invalid.iter().zip(&r.invalid) {
        if let Some(key) = w.key {
            prop_assert_eq!(
                g.key,
                key,
                "key of invalid sequence at line {}: {}",
                w.line,
                shown
            );
        }
        prop_assert_eq!(
            g.first_error.line,
            w.first_error_line,
            "first error of the sequence at line {}: {:?} in {}",
            w.line,
            g.first_error,
            shown
        );
    }
    prop_assert_eq!(
        snap.counts.skipped_lines,
        r.skipped,
        "skipped lines of {}",
        shown
    );
    for d in &snap.diags {
        let owner = r.owner[d.line as usize - 1];
        match d.severity {
            Severity::Error => prop_assert!(
                matches!(owner, Owner::Invalid(_)),
                "{:?} on a line of no invalid sequence: {}",
                d,
                shown
            ),
            Severity::Warning => prop_assert!(
                owner != Owner::Nothing,
                "{:?} on a line of no sequence: {}",
                d,
                shown
            ),
        }
    }
    let valid_warnings: Vec<u64> = warning_lines(&snap)
        .into_iter()
        .filter(|&l| matches!(r.owner[l as usize - 1], Owner::Valid(_)))
        .collect();
    let mut padded = r.padded_in_valid.clone();
    padded.sort_unstable();
    prop_assert_eq!(valid_warnings, padded, "padding warnings of {}", shown);
    Ok(())
}

fn mutated_case<T: Flt>(src: &mut Src) -> (Vec<InputConfig>, StreamOptions, u64, Vec<u8>) {
    let case = gen_case::<T>(src);
    let mut text = case.rendered.text.clone();
    mutate(src, &mut text);
    let mut options = case.rendered.options;
    if src.chance(15) {
        options.skip_sequence_ids = !options.skip_sequence_ids;
    }
    if src.chance(15) {
        options.frame_mode = true;
    }
    (case.inputs, options, case.key_base, text)
}

/// Dense `a`, sparse `b`, and (third) dense `long` written as `c`.
fn soup_inputs(dim_a: usize, dim_b: usize) -> Vec<InputConfig> {
    vec![
        InputConfig::dense("a", dim_a),
        InputConfig::sparse("b", dim_b),
        InputConfig::dense("long", 1).with_alias("c"),
    ]
}

const SOUP: &[&[u8]] = &[
    b"|a",
    b"|b",
    b"|c",
    b"|long",
    b"|#",
    b"|",
    b" ",
    b" ",
    b" ",
    b"\t",
    b"\r",
    b"\n",
    b"\n",
    b"\n",
    b"\r\n",
    b"1",
    b"-2.5",
    b"3:4",
    b"0:1e5",
    b"1:-0",
    b"7",
    b"12",
    b"1e",
    b"e5",
    b":",
    b"#",
    b"+",
    b"-",
    b".",
    b"5.",
    b"1-2",
    b"1e39",
    b"1e309",
    b"\x00",
    b"\xff",
    b"\x80",
    b"\x7f",
    "é".as_bytes(),
    b"\xEF\xBB\xBF",
    b"\xFF\xFE",
    b"|zzz x",
    b"99999999999999999999",
    b"0",
    b"2 ",
    b"1 ",
    b"\n1 ",
    b"\n2 ",
];

fn token_soup(src: &mut Src) -> (Vec<InputConfig>, StreamOptions, Vec<u8>) {
    let inputs = soup_inputs(src.range(1, 3), src.range(1, 4));
    let n = src.range(1, 3);
    let mut text = Vec::new();
    for _ in 0..src.below(80) {
        text.extend_from_slice(SOUP[src.below(SOUP.len())]);
    }
    let options = StreamOptions {
        skip_sequence_ids: src.chance(25),
        frame_mode: src.chance(25),
    };
    (inputs[..n].to_vec(), options, text)
}

proptest! {
    #![proptest_config(config(400))]

    /// Property 3: on generated valid data the naive reference and the parser agree.
    #[test]
    fn reference_agrees_on_valid_data_f32(bytes in entropy(24_000)) {
        let case = gen_case::<f32>(&mut Src::new(&bytes));
        let r = &case.rendered;
        let refd = reference::<f32>(&r.text, &case.inputs, r.options, case.key_base);
        let refd = refd.expect("a valid file is not fatal");
        prop_assert!(!refd.ambiguous && refd.invalid.is_empty(), "reference: {:?}", refd);
        prop_assert_eq!(&refd.seqs, &expected_seqs::<f32>(&case), "reference vs model");
        check_against_reference::<f32>(&case.inputs, r.options, case.key_base, &r.text)?;
    }

    #[test]
    fn reference_agrees_on_valid_data_f64(bytes in entropy(24_000)) {
        let case = gen_case::<f64>(&mut Src::new(&bytes));
        let r = &case.rendered;
        check_against_reference::<f64>(&case.inputs, r.options, case.key_base, &r.text)?;
    }

    /// Property 4: mutated valid texts.
    #[test]
    fn robust_mutations_f32(bytes in entropy(12_000)) {
        let mut src = Src::new(&bytes);
        let (inputs, options, key_base, text) = mutated_case::<f32>(&mut src);
        check_against_reference::<f32>(&inputs, options, key_base, &text)?;
    }

    #[test]
    fn robust_mutations_f64(bytes in entropy(12_000)) {
        let mut src = Src::new(&bytes);
        let (inputs, options, key_base, text) = mutated_case::<f64>(&mut src);
        check_against_reference::<f64>(&inputs, options, key_base, &text)?;
    }
}

const NEAR_VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "2.5",
    "+3",
    "1e5",
    "-0",
    "5.",
    "02.0",
    "1E-05",
    "7e-46",
    "3.4e38",
    "1e39",
    "1e309",
    "1-2",
    ".5",
    "1e",
    "x",
    "nan",
    "1.e5",
    "0e99999999999999999999",
];

/// Nearly valid data for the soup inputs: structured lines whose values sit at the edges of
/// the rules (counts around dim, indices around dim, ids that repeat or overflow, missing
/// inputs, frame mode), with occasional garbage.
fn near_valid(src: &mut Src) -> (Vec<InputConfig>, StreamOptions, Vec<u8>) {
    let (dim_a, dim_b) = (src.range(1, 3), src.range(1, 4));
    let inputs = soup_inputs(dim_a, dim_b)[..src.range(1, 3)].to_vec();
    let mut text = Vec::new();
    if src.chance(10) {
        text.extend_from_slice(b"\xEF\xBB\xBF");
    }
    let ids = src.chance(60);
    for line_no in 0..src.range(1, 12) {
        if ids && (line_no == 0 || src.chance(70)) {
            let id = src.one(&[
                "0",
                "1",
                "2",
                "3",
                "01",
                "18446744073709551615",
                "99999999999999999999",
            ]);
            text.extend_from_slice(id.as_bytes());
            text.extend_from_slice(src.one(&[b" ".as_slice(), b"\t", b""]));
        } else if src.chance(10) {
            text.push(b' ');
        }
        let min_items = usize::from(!src.chance(10));
        for _ in 0..src.range(min_items, 3) {
            let sep: &[u8] = src.one(&[b" ".as_slice(), b"\t", b"  ", b"\r"]);
            match src.below(8) {
                0..=2 => {
                    text.extend_from_slice(b"|a");
                    for _ in 0..src.below(dim_a + 2) {
                        text.extend_from_slice(sep);
                        let v = if src.chance(85) {
                            &NEAR_VALUES[..9]
                        } else {
                            NEAR_VALUES
                        };
                        text.extend_from_slice(src.pick(v).as_bytes());
                    }
                }
                3..=5 => {
                    text.extend_from_slice(b"|b");
                    for _ in 0..src.below(4) {
                        text.extend_from_slice(sep);
                        let index = if src.chance(90) {
                            src.below(dim_b)
                        } else {
                            dim_b
                        };
                        let v = if src.chance(85) {
                            &NEAR_VALUES[..9]
                        } else {
                            NEAR_VALUES
                        };
                        text.extend_from_slice(format!("{index}:{}", src.pick(v)).as_bytes());
                    }
                }
                6 => text.extend_from_slice(src.one(&[b"|c 1".as_slice(), b"|c", b"|c 1 2"])),
                _ => text.extend_from_slice(src.one(&[
                    b"|# c".as_slice(),
                    b"|#|a 1",
                    b"|zzz 1 x",
                    b"|long 5",
                    b"x",
                    b"|",
                    b"\x80",
                ])),
            }
            text.extend_from_slice(src.one(&[b" ".as_slice(), b"", b"\t"]));
        }
        text.extend_from_slice(src.one(&[b"\n".as_slice(), b"\n", b"\r\n", b"\n\n"]));
    }
    if src.chance(30) {
        text.pop();
    }
    let options = StreamOptions {
        skip_sequence_ids: src.chance(15),
        frame_mode: src.chance(25),
    };
    (inputs, options, text)
}

/// Several files through one parser: line-mode keys continue across files (`key_base`) and
/// ids are unique across the corpus.
fn check_corpus<T: Flt>(bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut src = Src::new(bytes);
    let Some(Corpus {
        inputs,
        options,
        texts,
        bases,
        valid: want_seqs,
        invalid: want_invalid,
    }) = gen_corpus::<T>(&mut src, 2, 3, 0)
    else {
        return Ok(()); // a fatal file stops the reader; an ambiguous one decides nothing
    };
    let mut p = ctf_reader::parser::StreamParser::<T>::new(&inputs, options);
    for (text, &base) in texts.iter().zip(&bases) {
        p.start_file(base);
        p.feed(text)
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        p.finish_file()
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
    }
    let snap = snapshot(&p, None);
    let shown: Vec<String> = texts.iter().map(|t| show(t)).collect();
    prop_assert_eq!(
        &snap.seqs,
        &want_seqs,
        "valid sequences of the files {:?}",
        shown
    );
    let got: Vec<_> = snap
        .invalid
        .iter()
        .zip(&want_invalid)
        .map(|(g, w)| (w.0.map(|_| g.key), g.line, g.valid_before))
        .collect();
    prop_assert_eq!(got.len(), snap.invalid.len());
    prop_assert_eq!(snap.invalid.len(), want_invalid.len(), "{:?}", shown);
    prop_assert_eq!(
        got,
        want_invalid,
        "invalid sequences of the files {:?}",
        shown
    );
    Ok(())
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn corpus_of_files_f32(bytes in entropy(12_000)) {
        check_corpus::<f32>(&bytes)?;
    }

    #[test]
    fn corpus_of_files_f64(bytes in entropy(12_000)) {
        check_corpus::<f64>(&bytes)?;
    }
}

proptest! {
    #![proptest_config(config(5000))]

    #[test]
    fn robust_token_soup(bytes in entropy(200)) {
        let mut src = Src::new(&bytes);
        let (inputs, options, text) = token_soup(&mut src);
        check_against_reference::<f32>(&inputs, options, 0, &text)?;
    }

    #[test]
    fn robust_near_valid_f32(bytes in entropy(600)) {
        let (inputs, options, text) = near_valid(&mut Src::new(&bytes));
        check_against_reference::<f32>(&inputs, options, 0, &text)?;
    }

    #[test]
    fn robust_near_valid_f64(bytes in entropy(600)) {
        let (inputs, options, text) = near_valid(&mut Src::new(&bytes));
        check_against_reference::<f64>(&inputs, options, 0, &text)?;
    }

    #[test]
    fn robust_arbitrary_bytes(text in prop::collection::vec(any::<u8>(), 0..300), opts in 0u8..4) {
        let options = StreamOptions { skip_sequence_ids: opts & 1 != 0, frame_mode: opts & 2 != 0 };
        check_against_reference::<f64>(&soup_inputs(2, 3), options, 0, &text)?;
    }
}

/// An id-mode text of long sequences whose lines mostly have one shape of single values (1
/// to 3 samples among a dense input of dim 1, a sparse one and another dense one of dim 1 or,
/// half the time, a second sparse one, in a fixed order: seed 004's rows, the ragged and seq
/// shapes), each line deviating from it now and then (whitespace before the line end, a
/// value or entry the quick paths do not take, another order, another or a repeated sample,
/// a comment, an error, a blank line, an id written another way or left out), now and then
/// every line ending in `\r\n`, so that
/// the parser's runs of such lines (taken in one loop while they continue the sequence)
/// meet every way a run can end.
fn run_lines(src: &mut Src) -> (Vec<InputConfig>, StreamOptions, Vec<u8>) {
    let dim_b = if src.chance(30) {
        src.range(60_000, 200_000)
    } else {
        src.range(1, 50)
    };
    let mut inputs = soup_inputs(1, dim_b);
    // Half the time `c` is a second sparse input (of a small dim), so that lines of two
    // sparse entries (the seq shape) get their own run.
    let dim_c = src.chance(50).then(|| src.range(1, 60));
    if let Some(dim) = dim_c {
        inputs[2] = InputConfig::sparse("long", dim).with_alias("c");
    }
    let entry = |src: &mut Src, dim: usize| {
        let index = if src.chance(97) { src.below(dim) } else { dim };
        let value = src.range(0, 9);
        match src.below(40) {
            // Entries the quick paths do not take: no `:` or another byte for it, a value
            // that is not a digit or has two, no index, an index of 8 digits or more
            // (leading zeros).
            0 => format!("{index}"),
            1 => format!("{index}:{}", src.one(&["x", ".", "-", ":"])),
            2 => format!("{index}:{value}{}", src.range(0, 9)),
            3 => format!(":{value}"),
            4 => format!("{index:08}:{value}"),
            5 => format!("{index}{}{value}", src.one(&[".", ";", "/"])),
            _ => format!("{index}:{value}"),
        }
    };
    // The values of `a`: small ones (a column of bytes) in some texts, so that a run's
    // blocks of lines widen the column in their midst.
    let small = src.chance(40);
    let scalar = move |src: &mut Src| scalar_value(src, small);
    let sample = |src: &mut Src, input: usize, text: &mut Vec<u8>| match (input, dim_c) {
        (0, _) => text.extend_from_slice(format!("|a {}", scalar(src)).as_bytes()),
        (1, _) => text.extend_from_slice(format!("|b {}", entry(src, dim_b)).as_bytes()),
        (_, Some(dim)) => text.extend_from_slice(format!("|c {}", entry(src, dim)).as_bytes()),
        (_, None) => text.extend_from_slice(format!("|c {}", src.below(1000)).as_bytes()),
    };
    let mut shape: Vec<usize> = if dim_c.is_some() && src.chance(60) {
        vec![1, 2]
    } else {
        let mut shape = vec![0, 1, 2];
        shape.truncate(src.range(1, 3));
        shape
    };
    if src.chance(50) {
        shape.reverse();
    }
    let mut text = Vec::new();
    let mut id = src.below(12);
    // Every line ending in a carriage return and a line feed, as files written on Windows.
    let crlf = src.chance(20);
    // Texts whose lines deviate seldom, in long runs of one shape, as real files: the runs
    // then reach the loops that take a block of lines at once.
    let steady = src.chance(30);
    let (id_noise, deviations) = if steady { (80, 2) } else { (12, 12) };
    for _ in 0..src.range(1, 4) {
        let written = id.to_string();
        for line in 0..src.range(2, if steady { 80 } else { 40 }) {
            match src.below(id_noise) {
                0 if line > 0 => {} // no id: the line continues the sequence
                1 => {
                    // A leading zero: the same id by value, in other bytes.
                    text.push(b'0');
                    text.extend_from_slice(written.as_bytes());
                }
                _ => text.extend_from_slice(written.as_bytes()),
            }
            if steady {
                text.push(b' ');
            } else {
                text.extend_from_slice(src.one(&[b" ".as_slice(), b" ", b" ", b"\t"]));
            }
            let deviation = if src.chance(deviations) {
                src.below(12)
            } else {
                99
            };
            let mut order = shape.clone();
            match deviation {
                0 => order.reverse(),
                1 => order.push(src.below(3)),
                2 => {
                    order.pop();
                }
                _ => {}
            }
            for (k, &input) in order.iter().enumerate() {
                if k > 0 {
                    text.push(b' ');
                }
                sample(src, input, &mut text);
                if deviation == 3 && k + 1 == order.len().min(src.range(1, 2)) {
                    // Another value (of the first sample, or of the second): a second
                    // entry, or a dense value of dim 1 too many.
                    text.extend_from_slice(format!(" {}:1", src.below(dim_b)).as_bytes());
                }
            }
            match deviation {
                4 => text.extend_from_slice(src.one(&[
                    b" ".as_slice(),
                    b"\t",
                    b"  ",
                    // Past the bytes of a line the run of two sparse inputs reads.
                    &[b' '; 70][..],
                ])),
                5 => text.extend_from_slice(b"\r"),
                6 => text.extend_from_slice(b" |# a comment"),
                7 => {
                    let v = src.one(&["2.5", "-1", "1e5", "12", "0.5", "x"]);
                    text.extend_from_slice(format!(" |{} {v}", src.one(&["a", "c"])).as_bytes());
                }
                8 => text.extend_from_slice(
                    format!(" |b 3:{}", src.one(&["12", "0.5", "-1"])).as_bytes(),
                ),
                9 => text.extend_from_slice(b" |zzz 1"),
                _ => {}
            }
            if crlf {
                text.push(b'\r');
            }
            text.extend_from_slice(if deviation == 10 { b"\n\n" } else { b"\n" });
        }
        id += src.range(1, 3);
    }
    if src.chance(20) {
        text.pop();
    }
    let options = StreamOptions {
        skip_sequence_ids: false,
        frame_mode: src.chance(10),
    };
    (inputs, options, text)
}

/// A value of a dense input of dim 1 for [`run_lines`] and [`scalar_run_lines`]: mostly
/// an integer (below 256 when `small`, else below 100,000, now and then one above 255 all
/// the same), now and then a form that the blocks of lines of one scalar leave to the
/// line-by-line loop or to the general parse: 7 digits with leading zeros, 8 digits, not
/// an integer, not a number.
fn scalar_value(src: &mut Src, small: bool) -> String {
    match src.below(60) {
        1 => format!("{:07}", src.below(1000)),
        2 => format!("{:08}", src.below(1000)),
        3 => format!("{}", src.range(10_000_000, 99_999_999)),
        4 => src.one(&["-3", "2.5", "1e3"]).to_string(),
        5 => src.one(&["+1", "0x1"]).to_string(),
        6 => format!("{}", src.below(100_000)),
        _ if small => format!("{}", src.below(256)),
        _ => format!("{}", src.below(100_000)),
    }
}

/// An id-mode text of sequences of one dense value per line (`7 |a 98251`: seed 004's
/// rows) in runs of up to 150 lines, the values of [`scalar_value`], now and then every
/// line ending in `\r\n` and now and then a line another way (a tab after the id,
/// whitespace after the value, a second sample, no id): the runs' blocks of 64 bytes of
/// such lines then stop at every kind of line they leave, at the text's end and where a
/// column of bytes must widen.
fn scalar_run_lines(src: &mut Src) -> (Vec<InputConfig>, StreamOptions, Vec<u8>) {
    let small = src.chance(50);
    let crlf = src.chance(20);
    let mut text = Vec::new();
    let mut id = src.below(1000);
    for _ in 0..src.range(1, 4) {
        for line in 0..src.range(1, 150) {
            let deviation = src.below(80);
            if deviation != 1 || line == 0 {
                text.extend_from_slice(id.to_string().as_bytes());
            }
            text.push(if deviation == 2 { b'\t' } else { b' ' });
            text.extend_from_slice(format!("|a {}", scalar_value(src, small)).as_bytes());
            match deviation {
                3 => text.extend_from_slice(src.one(&[b" ".as_slice(), b"\t", b"\r"])),
                4 => text.extend_from_slice(format!(" |a {}", src.below(300)).as_bytes()),
                _ => {}
            }
            if crlf {
                text.push(b'\r');
            }
            text.push(b'\n');
        }
        id += src.range(1, 3);
    }
    let options = StreamOptions {
        skip_sequence_ids: false,
        frame_mode: false,
    };
    // `a` alone: a sequence with no sample of a configured input is invalid, and its
    // values are not compared.
    (vec![InputConfig::dense("a", 1)], options, text)
}

proptest! {
    #![proptest_config(config(200))]

    #[test]
    fn runs_of_scalar_lines_split(bytes in entropy(3000)) {
        let mut src = Src::new(&bytes);
        let (inputs, options, text) = scalar_run_lines(&mut src);
        check_against_reference::<f32>(&inputs, options, 0, &text)?;
        check_splits::<f32>(&inputs, options, 0, &text, &mut src)?;
    }

    #[test]
    fn runs_of_scalar_lines_f64(bytes in entropy(3000)) {
        let (inputs, options, text) = scalar_run_lines(&mut Src::new(&bytes));
        check_against_reference::<f64>(&inputs, options, 0, &text)?;
    }
}

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn runs_of_single_value_lines_split(bytes in entropy(2000)) {
        let mut src = Src::new(&bytes);
        let (inputs, options, text) = run_lines(&mut src);
        check_splits::<f32>(&inputs, options, 0, &text, &mut src)?;
    }

    #[test]
    fn runs_of_single_value_lines_f32(bytes in entropy(2000)) {
        let (inputs, options, text) = run_lines(&mut Src::new(&bytes));
        check_against_reference::<f32>(&inputs, options, 0, &text)?;
    }

    #[test]
    fn runs_of_single_value_lines_f64(bytes in entropy(2000)) {
        let (inputs, options, text) = run_lines(&mut Src::new(&bytes));
        check_against_reference::<f64>(&inputs, options, 0, &text)?;
    }
}

// ---------------------------------------------------------------------------------------
// 5. Error rules, fatal errors, numbers (deterministic)
// ---------------------------------------------------------------------------------------

const IDS: StreamOptions = StreamOptions {
    skip_sequence_ids: false,
    frame_mode: false,
};

/// Parses whole, in two pieces at every point and byte by byte; all must agree.
fn parse<T: Flt>(inputs: &[InputConfig], options: StreamOptions, text: &[u8]) -> Snapshot {
    let whole = parse_whole::<T>(inputs, options, 0, text);
    for k in 0..=text.len() {
        let split = parse_cut::<T>(inputs, options, 0, text, &[k]);
        assert_eq!(split, whole, "split at {k} of {}", show(text));
    }
    let bytewise = parse_pieces::<T>(inputs, options, 0, text.chunks(1));
    assert_eq!(bytewise, whole, "byte by byte: {}", show(text));
    whole
}

fn keys(snap: &Snapshot) -> Vec<u64> {
    snap.seqs.iter().map(|s| s.key).collect()
}

fn invalid_keys(snap: &Snapshot) -> Vec<(u64, u64)> {
    snap.invalid.iter().map(|i| (i.key, i.line)).collect()
}

fn error_lines(snap: &Snapshot) -> Vec<u64> {
    errors(snap).iter().map(|d| d.line).collect()
}

fn dense(values: &[f64]) -> SampleSnap {
    SampleSnap::Dense(values.iter().map(|v| v.to_bits()).collect())
}

fn sparse(entries: &[(u32, f64)]) -> SampleSnap {
    SampleSnap::Sparse(entries.iter().map(|&(i, v)| (i, v.to_bits())).collect())
}

fn a1() -> Vec<InputConfig> {
    vec![InputConfig::dense("a", 1)]
}

#[test]
fn non_adjacent_repeated_id_invalidates_the_later_sequence() {
    let s = parse::<f64>(&a1(), IDS, b"1 |a 1\n2 |a 2\n1 |a 3\n3 |a 4\n");
    assert_eq!(keys(&s), [1, 2, 3]);
    assert_eq!(invalid_keys(&s), [(1, 3)]);
    assert_eq!(error_lines(&s), [3]);
    assert_eq!(s.invalid[0].valid_before, 2);
    // ids written with leading zeros are the same integer
    let s = parse::<f64>(&a1(), IDS, b"7 |a 1\n8 |a 2\n007 |a 3\n");
    assert_eq!(keys(&s), [7, 8]);
    assert_eq!(invalid_keys(&s), [(7, 3)]);
    // ids stay unique across the files of a corpus
    let mut p = ctf_reader::parser::StreamParser::<f64>::new(&a1(), IDS);
    p.start_file(0);
    p.feed(b"1 |a 1\n2 |a 2\n").unwrap();
    p.finish_file().unwrap();
    p.start_file(2);
    p.feed(b"3 |a 3\n1 |a 4\n").unwrap();
    p.finish_file().unwrap();
    let keys: Vec<u64> = p.sequences().sequences.iter().map(|s| s.key).collect();
    assert_eq!(keys, [1, 2, 3]);
    let invalid: Vec<(u64, u64)> = p
        .invalid_sequences()
        .iter()
        .map(|i| (i.key, i.line))
        .collect();
    assert_eq!(invalid, [(1, 2)]);
}

#[test]
fn adjacent_lines_of_one_id_form_one_sequence_across_blank_and_comment_lines() {
    let text = b"1 |a 1\n\n|# between\n  \t\n1 |a 2\n|a 3\n2 |a 4\n";
    let s = parse::<f64>(&a1(), IDS, text);
    assert!(s.diags.is_empty(), "{:?}", s.diags);
    assert_eq!(keys(&s), [1, 2]);
    assert_eq!(
        s.seqs[0].inputs[0],
        [dense(&[1.0]), dense(&[2.0]), dense(&[3.0])]
    );
    assert_eq!((s.seqs[0].line, s.seqs[0].counted_lines), (1, 3));
    assert_eq!(s.seqs[1].line, 7);
    assert_eq!(s.counts.skipped_lines, 3);
}

#[test]
fn a_configured_input_missing_from_a_sequence_makes_it_invalid() {
    let inputs = vec![InputConfig::dense("a", 1), InputConfig::sparse("b", 3)];
    let s = parse::<f64>(&inputs, IDS, b"1 |a 1\n1 |a 2\n2 |a 3 |b\n3 |b 0:1\n");
    assert_eq!(keys(&s), [2]);
    assert_eq!(invalid_keys(&s), [(1, 1), (3, 4)]);
    assert_eq!(s.seqs[0].inputs[1], [sparse(&[])]);
    // line mode: every line is a sequence of its own
    let s = parse::<f64>(&inputs, IDS, b"|a 1 |b 2:5\n|a 2\n|b 1:1\n");
    assert_eq!(keys(&s), [0]);
    assert_eq!(invalid_keys(&s), [(1, 2), (2, 3)]);
}

#[test]
fn more_lines_than_the_longest_input_has_samples_is_invalid() {
    let inputs = vec![InputConfig::dense("a", 1), InputConfig::dense("c", 1)];
    let s = parse::<f64>(&inputs, IDS, b"1 |a 1\n1 |c 2\n2 |a 1 |c 1\n2 |a 2\n");
    assert_eq!(keys(&s), [2]);
    assert_eq!(invalid_keys(&s), [(1, 1)]);
    assert_eq!(s.seqs[0].inputs[0].len(), 2);
    assert_eq!(s.seqs[0].inputs[1].len(), 1);
    // an empty sparse sample is a sample
    let inputs = vec![InputConfig::dense("a", 1), InputConfig::sparse("s", 4)];
    let s = parse::<f64>(&inputs, IDS, b"5 |a 1 |s\n5 |s\n");
    assert_eq!(keys(&s), [5]);
    assert_eq!(s.seqs[0].inputs[1], [sparse(&[]), sparse(&[])]);
    // lines holding only unconfigured inputs do not count
    let s = parse::<f64>(&a1(), IDS, b"5 |a 1\n5 |other 1 2\n5 |a 2\n");
    assert_eq!(keys(&s), [5]);
    assert_eq!(s.seqs[0].counted_lines, 2);
}

#[test]
fn an_input_twice_on_a_line_is_an_error() {
    let s = parse::<f64>(&a1(), IDS, b"|a 1 |a 2\n|a 3\n");
    assert_eq!(keys(&s), [1]);
    assert_eq!(invalid_keys(&s), [(0, 1)]);
    assert_eq!(error_lines(&s), [1]);
    let s = parse::<f64>(&a1(), IDS, b"4 |a 1\n4 |a 2|a 3\n");
    assert_eq!(keys(&s), Vec::<u64>::new());
    assert_eq!(invalid_keys(&s), [(4, 1)]);
    assert_eq!(error_lines(&s), [2]);
    // via the alias: the name is not what the data is matched against
    let inputs = vec![InputConfig::dense("feat", 1).with_alias("f")];
    let s = parse::<f64>(&inputs, IDS, b"|f 1 |feat 7 8 9 x\n|f 1 |f 2\n|F 3\n");
    assert_eq!(keys(&s), [0]);
    assert_eq!(s.seqs[0].inputs[0], [dense(&[1.0])]);
    assert_eq!(invalid_keys(&s), [(1, 2)]);
    assert_eq!(s.counts.skipped_lines, 1); // `|F` is not `f`: no configured sample
}

#[test]
fn frame_mode_rejects_sequences_of_several_samples() {
    let frame = StreamOptions {
        skip_sequence_ids: false,
        frame_mode: true,
    };
    let text = b"1 |a 1\n1 |a 2\n2 |a 3\n";
    let s = parse::<f64>(&a1(), frame, text);
    assert_eq!(keys(&s), [2]);
    assert_eq!(invalid_keys(&s), [(1, 1)]);
    let s = parse::<f64>(&a1(), IDS, text);
    assert_eq!(keys(&s), [1, 2]);
    assert!(s.invalid.is_empty());
}

#[test]
fn bytes_outside_printable_ascii_are_errors_outside_comments_only() {
    let inputs = vec![InputConfig::dense("a", 2), InputConfig::sparse("b", 3)];
    for b in [0x00u8, 0x01, 0x0b, 0x0c, 0x1b, 0x7f, 0x80, 0xc3, 0xe9, 0xff] {
        let bad: Vec<Vec<u8>> = vec![
            [b"|a 1 2 |b".as_slice(), &[b]].concat(),
            [b"|a 1 ".as_slice(), &[b], b"2 |b"].concat(),
            [b"|a 1 2".as_slice(), &[b], b" |b"].concat(),
            [&[b][..], b"|a 1 2 |b"].concat(),
            [b"|a".as_slice(), &[b], b" 1 2 |b"].concat(),
            [b"|a 1 2 |b 1:".as_slice(), &[b]].concat(),
            [b"|a 1 2 |b |zzz x".as_slice(), &[b]].concat(),
            [b"|a 1 2 |b |z".as_slice(), &[b], b"z x"].concat(),
        ];
        for line in bad {
            let text = [b"|a 3 4 |b 0:1\n".as_slice(), &line, b"\n|a 5 6 |b\n"].concat();
            let s = parse::<f32>(&inputs, IDS, &text);
            assert_eq!(keys(&s), [0, 2], "{}", show(&text));
            assert_eq!(invalid_keys(&s), [(1, 2)], "{}", show(&text));
            assert!(error_lines(&s).iter().all(|&l| l == 2), "{:?}", s.diags);
        }
        let good = [
            b"|a 1 2 |# x".as_slice(),
            &[b],
            b" |# y",
            &[b],
            b"|b 0:1 |#",
            &[b],
        ]
        .concat();
        let s = parse::<f32>(&inputs, IDS, &good);
        assert!(s.diags.is_empty(), "{}: {:?}", show(&good), s.diags);
        assert_eq!(keys(&s), [0]);
        // id mode too
        let good = [b"3 |# ".as_slice(), &[b], b"|a 1 2 |b\n"].concat();
        let s = parse::<f32>(&inputs, IDS, &good);
        assert!(s.diags.is_empty(), "{}: {:?}", show(&good), s.diags);
        assert_eq!(keys(&s), [3]);
    }
    let s = parse::<f32>(&inputs, IDS, "|a 1 2 |b |# 日本語 é\n".as_bytes());
    assert!(s.diags.is_empty());
}

#[test]
fn utf16_bom_and_empty_files_are_fatal() {
    for text in [
        b"\xFF\xFE|\x00a\x00 \x001\x00\n\x00".as_slice(),
        b"\xFF\xFE",
        b"\xFF\xFE\n|a 1\n",
    ] {
        let s = parse::<f32>(&a1(), IDS, text);
        assert!(s.fatal.is_some(), "not fatal: {}", show(text));
        assert!(s.seqs.is_empty());
    }
    for text in [
        b"".as_slice(),
        b" ",
        b"\n",
        b"\n\n\n",
        b"\r\n",
        b" \t\r\n\t \n  ",
        b"\xEF\xBB\xBF",
        b"\xEF\xBB\xBF\n \n",
    ] {
        let s = parse::<f32>(&a1(), IDS, text);
        assert!(s.fatal.is_some(), "not fatal: {}", show(text));
        assert!(s.seqs.is_empty() && s.invalid.is_empty());
    }
    // a file of comments only is not empty
    let s = parse::<f32>(&a1(), IDS, b"|# nothing here\n");
    assert!(s.fatal.is_none() && s.seqs.is_empty() && s.diags.is_empty());
}

#[test]
fn line_mode_keys_count_physical_lines() {
    // C23a: keys 0 and 2 (SPEC §7.4)
    let inputs = vec![InputConfig::dense("features", 1)];
    let s = parse::<f32>(&inputs, IDS, b"1 |features 1.0\n\n2 |features 2.0\n");
    assert_eq!(keys(&s), [1, 2]);
    let skip = StreamOptions {
        skip_sequence_ids: true,
        frame_mode: false,
    };
    let s = parse::<f32>(&inputs, skip, b"1 |features 1.0\n\n2 |features 2.0\n");
    assert_eq!(keys(&s), [0, 2]);
    // blank lines before the first sequence count too
    let s = parse::<f32>(&a1(), IDS, b"\n|a 1\n\n|a 2\n");
    assert!(s.diags.is_empty(), "{:?}", s.diags);
    assert_eq!(keys(&s), [1, 3]);
    assert_eq!(s.counts.lines, 4);
    let s = parse::<f32>(&a1(), IDS, b"\r\n  \n|a 1");
    assert!(s.diags.is_empty(), "{:?}", s.diags);
    assert_eq!(keys(&s), [2]);
    // the first line has no id: later ids are ignored
    let s = parse::<f32>(&a1(), IDS, b"|a 1\n5 |a 2\n5 |a 3\n");
    assert_eq!(keys(&s), [0, 1, 2]);
    assert!(s.diags.is_empty());
    // key_base continues the corpus numbering
    let s = parse_whole::<f32>(&a1(), IDS, 100, b"|a 1\n\n|a 2");
    let k: Vec<u64> = s.seqs.iter().map(|s| s.key).collect();
    assert_eq!(k, [100, 102]);
}

#[test]
fn small_files_and_ids_first() {
    for (text, lines, want) in [
        (b"0\n".as_slice(), 1, vec![]),
        (b"1", 1, vec![]),
        (b"7 |a 1", 1, vec![7]),
        (b"7|a 1\n", 1, vec![7]),
        (b"|a", 1, vec![0]),
        (b"|a\n", 1, vec![0]),
        (b"\n|a", 2, vec![1]),
        (b"\xEF\xBB\xBF|a", 1, vec![0]),
        (b"\xEF\xBB\xBF\n9 |a 1", 2, vec![9]),
        (b"\xEF\xBB\xBF12 |a 1\r\n", 1, vec![12]),
    ] {
        let s = parse::<f32>(&a1(), IDS, text);
        assert!(s.fatal.is_none(), "{}", show(text));
        assert_eq!(s.counts.lines, lines, "lines of {}", show(text));
        assert_eq!(keys(&s), want, "keys of {}", show(text));
        assert!(errors(&s).is_empty(), "{}: {:?}", show(text), s.diags);
    }
}

/// `|a TOKEN` as the only line, dense dim 1.
fn one_value<T: Flt>(token: &str) -> Option<u64> {
    let text = format!("|a {token}\n");
    let s = parse::<T>(&a1(), IDS, text.as_bytes());
    assert_eq!(s.seqs.len() + s.invalid.len(), 1, "{text:?}");
    match s.seqs.first() {
        Some(seq) => match &seq.inputs[0][0] {
            SampleSnap::Dense(v) => Some(v[0]),
            other => panic!("{other:?}"),
        },
        None => None,
    }
}

#[test]
fn number_grammar_of_spec_7_2() {
    for tok in [
        "1",
        "-1",
        "+1",
        "02.0",
        "5.",
        "1e5",
        "1E-05",
        "-6.3423e+015",
        "-0",
        "0.000",
        "123456789012345678901234567890",
        "1.000000059604644775390625",
        "4.9e-324",
        "1e-400",
        "0e99999999999999999999",
    ] {
        assert_eq!(one_value::<f64>(tok), parse_bits::<f64>(tok), "f64 {tok}");
        assert_eq!(one_value::<f32>(tok), parse_bits::<f32>(tok), "f32 {tok}");
        assert!(one_value::<f32>(tok).is_some(), "{tok} rejected");
    }
    for tok in [
        ".5", "-.5", "nan", "NaN", "inf", "-inf", "Infinity", "1e", "1e+", "1.e5", "0x10", "1,5",
        "2.0f", "e5", "+", "-", "--1", "+-1", "1..2", "1.5.5", "1e5e5", "1e5.5", "1:2", "#1",
    ] {
        assert_eq!(one_value::<f32>(tok), None, "f32 accepted {tok}");
        assert_eq!(one_value::<f64>(tok), None, "f64 accepted {tok}");
    }
    // a value ends at the first byte that cannot continue it
    let inputs = vec![InputConfig::dense("a", 2)];
    for (text, want) in [
        ("|a 1-2", [1.0, -2.0]),
        ("|a 1+2", [1.0, 2.0]),
        ("|a 1e5-2", [1e5, -2.0]),
        ("|a 5.-1", [5.0, -1.0]),
        ("|a -0-0", [-0.0, -0.0]),
        ("|a 1\t\r2\r", [1.0, 2.0]),
    ] {
        let s = parse::<f64>(&inputs, IDS, text.as_bytes());
        assert!(s.diags.is_empty(), "{text}: {:?}", s.diags);
        assert_eq!(s.seqs[0].inputs[0], [dense(&want)], "{text}");
    }
}

#[test]
fn overflow_is_an_error_and_rounding_is_correct_at_the_boundary() {
    // f32: the midpoint between f32::MAX and 2^128 rounds to infinity: an overflow
    let max32 = f32::MAX.to_bits();
    let (m, e2) = (
        2 * (u128::from(max32 & 0x7f_ffff) | 1 << 23) + 1,
        254 - 150 - 1,
    );
    let halfway32 = exact_decimal(m, e2);
    assert_eq!(halfway32.parse::<f32>(), Ok(f32::INFINITY));
    assert_eq!(one_value::<f32>(&halfway32), None, "{halfway32}");
    assert!(one_value::<f64>(&halfway32).is_some());
    let below = format!("{}.99999", decrement(&halfway32));
    assert_eq!(one_value::<f32>(&below), Some(u64::from(max32)));
    for tok in ["3.5e38", "-3.5e38", "1e39", "1e99999999999999999999"] {
        assert_eq!(one_value::<f32>(tok), None, "{tok}");
    }
    // f64: the same at f64::MAX
    let halfway64 = exact_decimal((1 << 54) - 1, 1023 - 52 - 1);
    assert_eq!(halfway64.parse::<f64>(), Ok(f64::INFINITY));
    assert_eq!(one_value::<f64>(&halfway64), None);
    let below = format!("{}.9", decrement(&halfway64));
    assert_eq!(one_value::<f64>(&below), Some(f64::MAX.to_bits()));
    for tok in ["1e309", "-1.8e308", "2e308"] {
        assert_eq!(one_value::<f64>(tok), None, "{tok}");
    }
    // underflow is not an error: the correctly rounded value is 0 or subnormal
    for tok in ["1e-50", "-1e-50", "7e-46", "1e-400"] {
        assert_eq!(one_value::<f32>(tok), parse_bits::<f32>(tok), "{tok}");
    }
    // overflow in a sparse value
    let inputs = vec![InputConfig::sparse("a", 3)];
    let s = parse::<f32>(&inputs, IDS, b"|a 1:1e39\n");
    assert_eq!(invalid_keys(&s), [(0, 1)]);
}

#[test]
fn spec_7_4_s2_last_line_without_newline() {
    let inputs = vec![InputConfig::dense("A", 3)];
    for text in ["|A", "|A\t", "|A ", "|A     "] {
        let s = parse::<f32>(&inputs, IDS, text.as_bytes());
        assert_eq!(keys(&s), [0], "{text:?}");
        assert_eq!(s.seqs[0].inputs[0], [SampleSnap::Dense(vec![0; 3])]);
        assert_eq!(s.counts.warnings, 1, "{text:?}");
        assert!(errors(&s).is_empty(), "{text:?}");
    }
    for text in ["|A -", "|A +", "|A 12.+", "|A 12.+e", "|A 1:"] {
        let s = parse::<f32>(&inputs, IDS, text.as_bytes());
        assert!(s.seqs.is_empty(), "{text:?}");
        assert_eq!(invalid_keys(&s), [(0, 1)], "{text:?}");
    }
    // an empty sparse sample at the very end is valid (unlike CNTK)
    let inputs = vec![InputConfig::dense("a", 1), InputConfig::sparse("b", 2)];
    let s = parse::<f32>(&inputs, IDS, b"|a 1 |b 1:1\n|a 2 |b");
    assert_eq!(keys(&s), [0, 1]);
    assert_eq!(s.seqs[1].inputs[1], [SampleSnap::Sparse(vec![])]);
}

#[test]
fn dense_and_sparse_value_counts() {
    let inputs = vec![InputConfig::dense("a", 3), InputConfig::sparse("b", 5)];
    let s = parse::<f64>(&inputs, IDS, b"|a 1 2 3 4 |b\n|a 1 |b\n|a 1 2 3 |b 5:1\n");
    assert_eq!(keys(&s), [1]);
    assert_eq!(invalid_keys(&s), [(0, 1), (2, 3)]);
    assert_eq!(s.seqs[0].inputs[0], [dense(&[1.0, 0.0, 0.0])]);
    let warnings: Vec<u64> = warning_lines(&s);
    assert_eq!(warnings, [2]);
    // sparse entries: file order, duplicates kept, indices digits only
    let s = parse::<f64>(
        &inputs,
        IDS,
        b"|a 1 2 3 |b 3:1 0:2 3:-0 04:5e-1\n|a 1 2 3 |b +1:2\n|a 1 2 3 |b 1.0:2\n|a 1 2 3 |b :1\n|a 1 2 3 |b 1 :2\n|a 1 2 3 |b 1: 2\n|a 1 2 3 |b 1:.5\n",
    );
    assert_eq!(keys(&s), [0]);
    assert_eq!(
        s.seqs[0].inputs[1],
        [sparse(&[(3, 1.0), (0, 2.0), (3, -0.0), (4, 0.5)])]
    );
    assert_eq!(s.invalid.len(), 6);
}

#[test]
fn comments_run_to_the_next_pipe_not_followed_by_hash() {
    let inputs = vec![InputConfig::dense("a", 1), InputConfig::sparse("b", 3)];
    let s = parse::<f64>(&inputs, IDS, b"|a 1 |# x |# y |b 1:2\n");
    assert_eq!(s.seqs[0].inputs[1], [sparse(&[(1, 2.0)])]);
    let s = parse::<f64>(&inputs, IDS, b"|# c|#|a 1|b 2:1\n");
    assert!(s.diags.is_empty(), "{:?}", s.diags);
    assert_eq!(s.seqs[0].inputs[0], [dense(&[1.0])]);
    // `|#b` is an escaped pipe inside the comment: b is missing
    let s = parse::<f64>(&inputs, IDS, b"|a 1 |# x |#b 1:2\n");
    assert_eq!(invalid_keys(&s), [(0, 1)]);
    // comments can hold anything but a line feed
    let s = parse::<f64>(&inputs, IDS, b"|a 1 |# \x00\xff\r\t:|##|b 0:1\n");
    assert!(s.diags.is_empty(), "{:?}", s.diags);
}

#[test]
fn crlf_bom_and_whitespace() {
    let inputs = vec![InputConfig::dense("a", 2), InputConfig::sparse("b", 3)];
    let text = b"\xEF\xBB\xBF3\t|a\t1 \t 2\t|b\r\n3 |b 0:1 |a 3 4\r\n\r\n4|a 5 6\r|b\r\n";
    let s = parse::<f64>(&inputs, IDS, text);
    assert!(s.diags.is_empty(), "{:?}", s.diags);
    assert_eq!(keys(&s), [3, 4]);
    assert_eq!(
        s.seqs[0].inputs[0],
        [dense(&[1.0, 2.0]), dense(&[3.0, 4.0])]
    );
    assert_eq!(s.seqs[0].inputs[1], [sparse(&[]), sparse(&[(0, 1.0)])]);
    assert_eq!(s.seqs[1].line, 4);
    assert_eq!(s.counts.lines, 4);
}

#[test]
fn an_id_beyond_64_bits_does_not_swallow_the_next_sequence() {
    // Line 1's id does not fit in 64 bits: an error of line 1's sequence only. Line 2 has the
    // valid id 18446744073709551615 (u64::MAX), a sequence of its own.
    let s = parse::<f64>(
        &a1(),
        IDS,
        b"99999999999999999999 |a 1\n18446744073709551615 |a 2\n",
    );
    assert_eq!(keys(&s), [u64::MAX], "{:?}", s.invalid);
    assert_eq!(s.invalid.len(), 1);
    assert_eq!(s.invalid[0].line, 1);
    let s = parse::<f64>(&a1(), IDS, b"18446744073709551615 |a 2\n");
    assert_eq!(keys(&s), [u64::MAX]);
}
