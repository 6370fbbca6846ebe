//! Data and expectations for the composite-reader tests (`tests/composite.rs`): a model of
//! what each key's sequence holds for every input, the CTF text of each deserializer's files
//! written from that model (in an order of keys each file chooses), the BrainScript of a
//! composite reader, and the decoding of `ctf read --jsonl` lines with their members kept in
//! the order written. Every expectation is computed from the model, never from the reader.
//! Values are multiples of 1/4, so every sum is exact in f32 and f64 in any order.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::cli_support::{read_lines, write, Json, ReadLine, Rng};

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

/// One configured input.
#[derive(Clone, Debug)]
pub struct Input {
    pub name: String,
    /// The name used in the data files.
    pub alias: String,
    pub dim: usize,
    pub sparse: bool,
    pub defines_mb_size: bool,
}

impl Input {
    pub fn dense(name: &str, dim: usize) -> Input {
        Input {
            name: name.to_string(),
            alias: name.to_string(),
            dim,
            sparse: false,
            defines_mb_size: false,
        }
    }

    pub fn sparse(name: &str, dim: usize) -> Input {
        Input {
            sparse: true,
            ..Input::dense(name, dim)
        }
    }

    pub fn alias(mut self, alias: &str) -> Input {
        self.alias = alias.to_string();
        self
    }

    pub fn mb_size(mut self) -> Input {
        self.defines_mb_size = true;
        self
    }

    /// The `input` record member of a BrainScript configuration.
    pub fn brainscript(&self) -> String {
        let mut text = format!("{} = {{ ", self.name);
        if self.alias != self.name {
            let _ = write!(text, "alias = \"{}\"; ", self.alias);
        }
        let _ = write!(
            text,
            "dim = {}; format = \"{}\"",
            self.dim,
            if self.sparse { "sparse" } else { "dense" }
        );
        if self.defines_mb_size {
            text.push_str("; definesMBSize = true");
        }
        text.push_str(" }");
        text
    }
}

/// One sample of one input.
#[derive(Clone, Debug, PartialEq)]
pub enum Sample {
    Dense(Vec<f64>),
    /// `(index, value)` pairs in file order.
    Sparse(Vec<(u64, f64)>),
}

impl Sample {
    pub fn sum(&self) -> f64 {
        match self {
            Sample::Dense(v) => v.iter().sum(),
            Sample::Sparse(e) => e.iter().map(|(_, v)| v).sum(),
        }
    }

    /// The sample's text after `|alias` (with its leading space).
    pub fn text(&self) -> String {
        let mut text = String::new();
        match self {
            Sample::Dense(v) => {
                for x in v {
                    let _ = write!(text, " {x}");
                }
            }
            Sample::Sparse(e) => {
                for (i, x) in e {
                    let _ = write!(text, " {i}:{x}");
                }
            }
        }
        text
    }
}

/// What one sequence holds for one input.
pub type Part = Vec<Sample>;

/// Random samples of `input`: dense values in -3..7, sparse values in 0.25..5, 0-3 entries.
pub fn random_sample(rng: &mut Rng, input: &Input) -> Sample {
    if input.sparse {
        let n = rng.below(4);
        Sample::Sparse(
            (0..n)
                .map(|_| {
                    (
                        rng.below(input.dim as u64),
                        rng.below(20) as f64 / 4.0 + 0.25,
                    )
                })
                .collect(),
        )
    } else {
        Sample::Dense(
            (0..input.dim)
                .map(|_| rng.below(40) as f64 / 4.0 - 3.0)
                .collect(),
        )
    }
}

/// The parts of one deserializer's inputs for one sequence: the first input on each of
/// `1..=max_len` lines, every other input on the first `1..=len` of them (so the line-count
/// rule holds).
pub fn random_parts(rng: &mut Rng, inputs: &[Input], max_len: u64) -> Vec<Part> {
    let len = 1 + rng.below(max_len);
    inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            let n = if i == 0 { len } else { 1 + rng.below(len) };
            (0..n).map(|_| random_sample(rng, input)).collect()
        })
        .collect()
}

/// The CTF lines of one sequence: `KEY |alias values ...` (no key in line mode).
pub fn sequence_text(key: Option<u64>, inputs: &[Input], parts: &[Part]) -> String {
    let lines = parts.iter().map(Vec::len).max().unwrap_or(0);
    let mut text = String::new();
    for line in 0..lines {
        if let Some(key) = key {
            let _ = write!(text, "{key}");
        }
        let mut first = key.is_none();
        for (input, part) in inputs.iter().zip(parts) {
            if let Some(sample) = part.get(line) {
                if !first {
                    text.push(' ');
                }
                first = false;
                let _ = write!(text, "|{}{}", input.alias, sample.text());
            }
        }
        text.push('\n');
    }
    text
}

/// One deserializer of a test corpus: its files' names, its inputs, and for each key its
/// parts (one per input).
#[derive(Clone, Debug)]
pub struct Deser {
    pub files: Vec<String>,
    pub inputs: Vec<Input>,
    pub parts: BTreeMap<u64, Vec<Part>>,
}

impl Deser {
    /// A deserializer whose sequences, for each of `keys`, are random (at most `max_len`
    /// lines each).
    pub fn random(
        rng: &mut Rng,
        files: &[&str],
        inputs: Vec<Input>,
        keys: impl IntoIterator<Item = u64>,
        max_len: u64,
    ) -> Deser {
        let parts = keys
            .into_iter()
            .map(|k| (k, random_parts(rng, &inputs, max_len)))
            .collect();
        Deser {
            files: files.iter().map(|f| f.to_string()).collect(),
            inputs,
            parts,
        }
    }

    /// The `{ ... }` record of this deserializer, with `extra` members and `prefix` before
    /// each file name.
    pub fn brainscript(&self, extra: &str, prefix: &str) -> String {
        let file = match &self.files[..] {
            [one] => format!("\"{prefix}{one}\""),
            many => format!(
                "({})",
                many.iter()
                    .map(|f| format!("\"{prefix}{f}\""))
                    .collect::<Vec<_>>()
                    .join(" : ")
            ),
        };
        let inputs: Vec<String> = self.inputs.iter().map(Input::brainscript).collect();
        format!(
            "{{\n        type = \"CNTKTextFormatDeserializer\"\n        \
             module = \"CNTKTextFormatReader\"\n        \
             file = {file}\n        {extra}\n        input = {{ {} }}\n      }}",
            inputs.join("; ")
        )
    }
}

/// The text of a file holding the sequences of `keys`, in that order, with ids; and the
/// 1-based line each sequence starts on.
pub fn file_text(deser: &Deser, keys: &[u64]) -> (String, BTreeMap<u64, u64>) {
    let mut text = String::new();
    let mut lines = BTreeMap::new();
    let mut line = 1;
    for &key in keys {
        lines.insert(key, line);
        let seq = sequence_text(Some(key), &deser.inputs, &deser.parts[&key]);
        line += seq.lines().count() as u64;
        text.push_str(&seq);
    }
    (text, lines)
}

/// A composite reader section: `params` at the reader level, then the deserializers, each
/// with its extra members (file names as written, or after `prefix`).
pub fn config_text(params: &str, deserializers: &[(&Deser, &str)], prefix: &str) -> String {
    let records: Vec<String> = deserializers
        .iter()
        .map(|(d, extra)| d.brainscript(extra, prefix))
        .collect();
    format!(
        "reader = {{\n    {params}\n    deserializers = ({})\n}}\n",
        records.join(" : ")
    )
}

/// The expected joined corpus: every configured input in configuration order, and for each
/// key the parts of every input.
#[derive(Clone, Debug)]
pub struct Joined {
    pub inputs: Vec<Input>,
    pub seqs: BTreeMap<u64, Vec<Part>>,
}

impl Joined {
    /// Joins the deserializers on the primary's keys that every other one has (the keys a
    /// correct reader delivers).
    pub fn of(deserializers: &[&Deser]) -> Joined {
        let inputs = deserializers
            .iter()
            .flat_map(|d| d.inputs.iter().cloned())
            .collect();
        let seqs = deserializers[0]
            .parts
            .keys()
            .filter(|k| deserializers[1..].iter().all(|d| d.parts.contains_key(k)))
            .map(|&k| {
                let parts = deserializers
                    .iter()
                    .flat_map(|d| d.parts[&k].iter().cloned())
                    .collect();
                (k, parts)
            })
            .collect();
        Joined { inputs, seqs }
    }

    pub fn keys(&self) -> Vec<u64> {
        self.seqs.keys().copied().collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.inputs.iter().map(|i| i.name.clone()).collect()
    }

    /// Samples of input `i` in sequence `key`.
    pub fn samples(&self, key: u64, i: usize) -> u64 {
        self.seqs[&key][i].len() as u64
    }

    pub fn sum(&self, key: u64, i: usize) -> f64 {
        self.seqs[&key][i].iter().map(Sample::sum).sum()
    }

    /// The sequence's length on the timeline: the `definesMBSize` input's sample count, or
    /// the largest over all inputs.
    pub fn length(&self, key: u64) -> u64 {
        match self.inputs.iter().position(|i| i.defines_mb_size) {
            Some(i) => self.samples(key, i),
            None => (0..self.inputs.len())
                .map(|i| self.samples(key, i))
                .max()
                .unwrap(),
        }
    }

    pub fn sweep_samples(&self) -> u64 {
        self.seqs.keys().map(|&k| self.length(k)).sum()
    }

    /// Checks one `--jsonl` line against the model: inputs in configuration order, and each
    /// input's samples and checksum those of the line's keys.
    pub fn check_line(&self, line: &Line) {
        let names = self.names();
        let got: Vec<&String> = line.samples.iter().map(|(n, _)| n).collect();
        assert_eq!(got, names.iter().collect::<Vec<_>>(), "{line:?}");
        let got: Vec<&String> = line.checksum.iter().map(|(n, _)| n).collect();
        assert_eq!(got, names.iter().collect::<Vec<_>>(), "{line:?}");
        for (i, name) in names.iter().enumerate() {
            for key in &line.keys {
                assert!(
                    self.seqs.contains_key(key),
                    "unexpected key {key} in {line:?}"
                );
            }
            let samples: u64 = line.keys.iter().map(|&k| self.samples(k, i)).sum();
            let sum: f64 = line.keys.iter().map(|&k| self.sum(k, i)).sum();
            assert_eq!(line.samples[i].1, samples, "samples of {name} in {line:?}");
            assert_eq!(line.checksum[i].1, sum, "checksum of {name} in {line:?}");
        }
    }

    /// Checks a `ctf dump` line (or any `{"key": K, "inputs": {...}}` object) against the
    /// model, value by value.
    pub fn check_dump_object(&self, object: &Json) {
        assert_eq!(object.keys(), ["key", "inputs"], "{object:?}");
        let key = object.at("key").int();
        let parts = self
            .seqs
            .get(&key)
            .unwrap_or_else(|| panic!("dumped key {key} is not expected"));
        let inputs = object.at("inputs");
        let names = self.names();
        assert_eq!(
            inputs.keys(),
            names.iter().map(String::as_str).collect::<Vec<_>>(),
            "key {key}"
        );
        for (i, input) in self.inputs.iter().enumerate() {
            let got: Vec<Sample> = inputs
                .at(&input.name)
                .arr()
                .iter()
                .map(|s| json_sample(s, input.sparse))
                .collect();
            assert_eq!(got, parts[i], "key {key}, input {}", input.name);
        }
    }
}

/// A dumped sample decoded into the model's form.
pub fn json_sample(sample: &Json, sparse: bool) -> Sample {
    let num = |j: &Json| -> f64 { j.num().parse().unwrap() };
    if sparse {
        assert_eq!(sample.keys(), ["indices", "values"], "{sample:?}");
        let indices = sample.at("indices").arr();
        let values = sample.at("values").arr();
        assert_eq!(indices.len(), values.len(), "{sample:?}");
        Sample::Sparse(
            indices
                .iter()
                .zip(values)
                .map(|(i, v)| (i.int(), num(v)))
                .collect(),
        )
    } else {
        Sample::Dense(sample.arr().iter().map(num).collect())
    }
}

// ---------------------------------------------------------------------------------------------
// `ctf read --jsonl`
// ---------------------------------------------------------------------------------------------

/// A line's keys, samples, checksums, `sweep_end` and position.
pub type Content = (Vec<u64>, Vec<(String, u64)>, Vec<(String, f64)>, bool, u64);

/// One `--jsonl` line, members kept in the order written.
pub type Line = ReadLine;

impl Line {
    /// Everything but `mb` and `checkpoint`.
    pub fn content(&self) -> Content {
        (
            self.keys.clone(),
            self.samples.clone(),
            self.checksum.clone(),
            self.sweep_end,
            self.position,
        )
    }
}

pub fn parse_lines(stdout: &str) -> Vec<Line> {
    read_lines(stdout)
}

pub fn all_keys(lines: &[Line]) -> Vec<u64> {
    lines.iter().flat_map(|l| l.keys.iter().copied()).collect()
}

pub fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

/// Writes `text` to `dir/name`.
pub fn put(dir: &Path, name: &str, text: impl AsRef<[u8]>) {
    write(dir, name, text);
}

/// A permutation of `keys` (Fisher-Yates with the test's generator).
pub fn shuffled(rng: &mut Rng, keys: &[u64]) -> Vec<u64> {
    let mut v = keys.to_vec();
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

// ---------------------------------------------------------------------------------------------
// The C program `tests/c_api/composite.c`
// ---------------------------------------------------------------------------------------------

/// The data of the C test: features (`x`, dense, dim 2) and labels (`y`, sparse, dim 5) of 40
/// keys in different orders, a composite configuration of them (randomized, seed 5, a window
/// of 3 chunks, chunks of 200 and 300 bytes, absolute paths), and a second one whose labels
/// file lacks one key.
pub struct CCase {
    pub config: String,
    pub features: String,
    pub labels: String,
    pub missing_config: String,
    pub missing_key: u64,
    pub joined: Joined,
}

impl CCase {
    pub fn write(dir: &Path) -> CCase {
        let mut rng = Rng::new(21);
        let keys: Vec<u64> = (0..40).map(|i| 3 * i + 2).collect();
        let features = Deser::random(
            &mut rng,
            &["features.ctf"],
            vec![Input::dense("x", 2)],
            keys.iter().copied(),
            4,
        );
        let mut labels = Deser::random(
            &mut rng,
            &["labels.ctf"],
            vec![Input::sparse("y", 5)],
            keys.iter().copied(),
            5,
        );
        let feature_order = shuffled(&mut rng, &keys);
        let mut label_order = shuffled(&mut rng, &keys);
        put(dir, "features.ctf", file_text(&features, &feature_order).0);
        put(dir, "labels.ctf", file_text(&labels, &label_order).0);
        let joined = Joined::of(&[&features, &labels]);
        let prefix = format!("{}/", dir.display());
        let params = "randomize = true; randomizationSeed = 5; randomizationWindow = 3";
        put(
            dir,
            "c.cntk",
            config_text(
                params,
                &[
                    (&features, "chunkSizeInBytes = 200"),
                    (&labels, "chunkSizeInBytes = 300"),
                ],
                &prefix,
            ),
        );
        let missing_key = label_order.remove(13);
        labels.parts.remove(&missing_key);
        labels.files = vec!["labels-missing.ctf".to_string()];
        put(
            dir,
            "labels-missing.ctf",
            file_text(&labels, &label_order).0,
        );
        put(
            dir,
            "missing.cntk",
            config_text(
                "randomize = false; maxErrors = 0",
                &[(&features, ""), (&labels, "")],
                &prefix,
            ),
        );
        let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
        CCase {
            config: path("c.cntk"),
            features: path("features.ctf"),
            labels: path("labels.ctf"),
            missing_config: path("missing.cntk"),
            missing_key,
            joined,
        }
    }

    /// The program's arguments.
    pub fn args(&self) -> Vec<&str> {
        vec![
            &self.config,
            &self.features,
            &self.labels,
            &self.missing_config,
        ]
    }

    /// Checks the program's output against the data.
    pub fn check(&self, stdout: &str) {
        let mut sweeps: Vec<Vec<&str>> = Vec::new();
        for label in ["file", "text", "builder"] {
            let lines: Vec<&str> = stdout
                .lines()
                .filter_map(|l| l.strip_prefix(label)?.strip_prefix(' '))
                .collect();
            let streams: Vec<&str> = lines
                .iter()
                .copied()
                .filter(|l| l.starts_with("stream "))
                .collect();
            assert_eq!(
                streams,
                ["stream 0 x x 2 dense", "stream 1 y y 5 sparse"],
                "{label}\n{stdout}"
            );
            assert_eq!(lines.last(), Some(&"end 1"), "{label}\n{stdout}");
            let mbs: Vec<&str> = lines
                .iter()
                .copied()
                .filter(|l| l.starts_with("mb "))
                .collect();
            let mut order = Vec::new();
            for (i, mb) in mbs.iter().enumerate() {
                let words: Vec<&str> = mb.split(' ').collect();
                assert_eq!(words.len(), 10, "{mb}");
                assert_eq!(words[..3], ["mb", &i.to_string(), "keys"], "{mb}");
                let keys: Vec<u64> = words[3].split(',').map(|k| k.parse().unwrap()).collect();
                for (s, name) in ["x", "y"].iter().enumerate() {
                    assert_eq!(words[4 + 3 * s], *name, "{mb}");
                    let samples: u64 = keys.iter().map(|&k| self.joined.samples(k, s)).sum();
                    let sum: f64 = keys.iter().map(|&k| self.joined.sum(k, s)).sum();
                    assert_eq!(words[5 + 3 * s].parse::<u64>().unwrap(), samples, "{mb}");
                    assert_eq!(words[6 + 3 * s].parse::<f64>().unwrap(), sum, "{mb}");
                }
                order.extend(keys);
            }
            assert_eq!(sorted(order), self.joined.keys(), "{label}\n{stdout}");
            sweeps.push(mbs);
        }
        assert_eq!(sweeps[0], sweeps[1], "from_file vs from_brainscript");
        assert_eq!(sweeps[0], sweeps[2], "from_file vs the builder");
        let duplicate = stdout
            .lines()
            .find_map(|l| l.strip_prefix("duplicate "))
            .unwrap_or_else(|| panic!("no duplicate line\n{stdout}"));
        assert!(
            !duplicate.starts_with("0 ") && duplicate.contains("unique"),
            "{duplicate}"
        );
        let missing = stdout
            .lines()
            .find_map(|l| l.strip_prefix("missing "))
            .unwrap_or_else(|| panic!("no missing line\n{stdout}"));
        assert!(missing.starts_with("5 "), "{missing}");
        assert!(
            missing.contains(&format!("no sequence with key {} in", self.missing_key))
                && missing.contains("labels-missing.ctf"),
            "{missing}"
        );
        assert!(stdout.trim_end().ends_with(" passed, 0 failed"), "{stdout}");
    }
}
