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

/// Generates the shape's data with the project's deterministic generator (once per target
/// directory) and returns its path.
pub fn generate(shape: &Shape) -> PathBuf {
    let script = std::env::var_os("CTF_GEN_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/gen_ctf.py")
        });
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let out = dir.join(format!("bench-{}-{}.ctf", shape.name, shape.n));
    if !out.exists() {
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
    }
    out
}
