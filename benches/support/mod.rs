//! Benchmark data shared by the benches: the shapes of `shared/bench/gen_ctf.py` (dense,
//! sparse, seq, ragged) at bench sizes, generated at bench time. Needs `python3` and the
//! generator at `../shared/bench/gen_ctf.py` (or `$CTF_GEN_SCRIPT`).
#![allow(dead_code)] // each bench uses part of it

use std::path::PathBuf;
use std::process::Command;

use ctf_reader::InputConfig;

/// A shape: its generator name, sequence count, and configured inputs.
pub struct Shape {
    /// Generator shape name.
    pub name: &'static str,
    /// Sequences to generate.
    pub n: u32,
    /// The inputs of the shape.
    pub inputs: Vec<InputConfig>,
}

/// The four shapes, at bench sizes (a few MB each).
pub fn shapes() -> Vec<Shape> {
    vec![
        Shape {
            name: "dense",
            n: 6000,
            inputs: vec![
                InputConfig::dense("labels", 10),
                InputConfig::dense("features", 784),
            ],
        },
        Shape {
            name: "sparse",
            n: 40000,
            inputs: vec![
                InputConfig::sparse("src", 100000),
                InputConfig::sparse("tgt", 100000),
            ],
        },
        Shape {
            name: "seq",
            n: 6000,
            inputs: vec![
                InputConfig::sparse("word", 50000),
                InputConfig::sparse("tag", 50),
            ],
        },
        Shape {
            name: "ragged",
            n: 2000,
            inputs: vec![InputConfig::sparse("x", 100000)],
        },
    ]
}

/// The sparse and dense shapes with fractional values, as text written by tools:
/// `-fractions`, those that print a chosen precision, `-floats`, those that print an `f32`
/// in its shortest form (Python's `str` of a NumPy `float32`), and `-doubles`, those that
/// print an `f64` in full (NumPy's `savetxt` default, `%.18e`), to be read as `f64`. Each
/// value of a sparse entry, and each dense feature other than 0, becomes itself divided by
/// 7, with 1 to 5 decimals (drawn by a fixed generator; `0.4286`), as the shortest decimal
/// that reads back as the same `f32` (`0.42857143`), or with 18 decimals after one digit
/// (`4.285714285714285476e-1`), so that the parser's number paths for fractions are
/// measured on numbers of varied lengths.
pub fn fraction_shapes() -> Vec<Shape> {
    let mut out = Vec::new();
    for family in ["fractions", "floats", "doubles"] {
        for s in shapes() {
            let name = match (s.name, family) {
                ("sparse", "fractions") => "sparse-fractions",
                ("dense", "fractions") => "dense-fractions",
                ("sparse", "floats") => "sparse-floats",
                ("dense", "floats") => "dense-floats",
                ("sparse", _) => "sparse-doubles",
                ("dense", _) => "dense-doubles",
                _ => continue,
            };
            out.push(Shape { name, ..s });
        }
    }
    out
}

/// Seed 004's records, as `benches/compare.py` writes them for ctf-reader: sequences of
/// 100 to 199 integers below 100,000, `K |n 1 |x V` on a sequence's first line and `K |x V`
/// on the others (drawn here by a fixed xorshift generator, not NumPy's).
pub fn row_shapes() -> Vec<Shape> {
    vec![Shape {
        name: "seed004",
        n: 2000,
        inputs: vec![InputConfig::dense("n", 1), InputConfig::dense("x", 1)],
    }]
}

/// The text of [`row_shapes`]' `n` sequences.
fn seed004_rows(n: u32) -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut below = |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    let mut out = String::new();
    for key in 0..n {
        let length = 100 + below(100);
        out.push_str(&format!("{key} |n 1 |x {}\n", below(100_000)));
        for _ in 1..length {
            out.push_str(&format!("{key} |x {}\n", below(100_000)));
        }
    }
    out
}

/// Generates the shape's data with the project's deterministic generator (once per target
/// directory) and returns its path; a shape of [`fraction_shapes`] is its integer shape's
/// data with the values rewritten, and [`row_shapes`]' are written here.
pub fn generate(shape: &Shape) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let out = dir.join(format!("bench-{}-{}.ctf", shape.name, shape.n));
    if out.exists() {
        return out;
    }
    if shape.name == "seed004" {
        std::fs::write(&out, seed004_rows(shape.n)).expect("bench data is writable");
        return out;
    }
    if let Some((base, family)) = shape.name.split_once('-') {
        let integers = generate(&Shape {
            name: base,
            n: shape.n,
            inputs: Vec::new(),
        });
        let text = std::fs::read_to_string(integers).expect("generated data is readable");
        let form = match family {
            "floats" => Fraction::Shortest,
            "doubles" => Fraction::Full,
            _ => Fraction::Decimals,
        };
        std::fs::write(&out, with_fractions(&text, form)).expect("bench data is writable");
        return out;
    }
    let script = std::env::var_os("CTF_GEN_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/gen_ctf.py")
        });
    let status = Command::new("python3")
        .arg(&script)
        .arg(shape.name)
        .arg(&out)
        .arg("--n")
        .arg(shape.n.to_string())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("python3 runs the generator");
    assert!(status.success(), "{} failed", script.display());
    out
}

/// How [`with_fractions`] prints a value.
#[derive(Clone, Copy, PartialEq)]
enum Fraction {
    /// With 1 to 5 decimals.
    Decimals,
    /// In an `f32`'s shortest form.
    Shortest,
    /// As an `f64` in full: one digit, 18 decimals and an exponent.
    Full,
}

/// `text` with the values [`fraction_shapes`] describes rewritten: those after a `:`, and the
/// tokens other than `0` of the `features` input, in the form `form`.
fn with_fractions(text: &str, form: Fraction) -> String {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut fraction = |value: &str| -> String {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let x: f64 = value.parse::<f64>().expect("an integer value") / 7.0;
        match form {
            // `Display` prints the shortest decimal that reads back as the same `f32`.
            Fraction::Shortest => (x as f32).to_string(),
            Fraction::Full => format!("{x:.18e}"),
            Fraction::Decimals => format!("{x:.*}", 1 + (state % 5) as usize),
        }
    };
    let mut out = String::with_capacity(text.len() * 2);
    for line in text.lines() {
        let mut input = "";
        for (i, token) in line.split(' ').enumerate() {
            if i > 0 {
                out.push(' ');
            }
            if let Some(name) = token.strip_prefix('|') {
                input = name;
                out.push_str(token);
            } else if let Some((index, value)) = token.split_once(':') {
                out.push_str(index);
                out.push(':');
                out.push_str(&fraction(value));
            } else if input == "features" && token != "0" {
                out.push_str(&fraction(token));
            } else {
                out.push_str(token);
            }
        }
        out.push('\n');
    }
    out
}
