//! Helpers for the `ctf` tool tests: running the binary, writing data files, reading its
//! diagnostics and JSON output.

pub mod json;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use json::Json;

pub const CTF: &str = env!("CARGO_BIN_EXE_ctf");
pub const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
pub const CONFORMANCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/conformance/cntk/data"
);

/// What one run of `ctf` produced.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Checks what every run must satisfy (SPEC §7.5 "never a panic") and decodes the output.
pub fn finish(what: &str, out: Output) -> Run {
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or_else(|| {
        panic!(
            "{what}: killed by a signal ({:?})\nstderr:\n{stderr}",
            out.status
        )
    });
    assert!(
        code != 101 && !stderr.contains("panicked"),
        "{what}: panicked (exit {code})\nstderr:\n{stderr}"
    );
    Run {
        code,
        stdout,
        stderr,
    }
}

/// Runs `ctf ARGS` in `cwd` (the test process's directory when `None`).
pub fn run(args: &[&str], cwd: Option<&Path>) -> Run {
    let mut cmd = Command::new(CTF);
    cmd.args(args);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let out = cmd.output().expect("spawn ctf");
    finish(&format!("ctf {}", args.join(" ")), out)
}

/// Runs `ctf ARGS` and asserts the exit code, naming the command and its output on failure.
pub fn run_expect(args: &[&str], cwd: Option<&Path>, code: i32) -> Run {
    let r = run(args, cwd);
    assert_eq!(
        r.code,
        code,
        "ctf {}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        r.stdout,
        r.stderr
    );
    if code != 0 {
        assert!(
            !r.stderr.trim().is_empty(),
            "ctf {}: exit {code} without a message on stderr",
            args.join(" ")
        );
    }
    r
}

/// Writes `bytes` to `dir/name` (creating parent directories) and returns the path.
pub fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Every stdout line of `dump` parsed as JSON (each line must be one complete object).
pub fn json_lines(stdout: &str) -> Vec<Json> {
    assert!(
        stdout.is_empty() || stdout.ends_with('\n'),
        "dump output does not end with a newline"
    );
    stdout
        .lines()
        .map(|line| {
            let v = json::parse(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
            assert!(matches!(v, Json::Obj(_)), "not an object: {line}");
            v
        })
        .collect()
}

/// The `key` of every dumped sequence, checking each object has exactly `key` then `inputs`.
pub fn keys(stdout: &str) -> Vec<u64> {
    json_lines(stdout)
        .iter()
        .map(|v| {
            assert_eq!(v.keys(), ["key", "inputs"], "{v:?}");
            v.at("key").int()
        })
        .collect()
}

/// A diagnostic line `FILE:LINE:COL: SEVERITY: MESSAGE`.
#[derive(Debug, Clone, PartialEq)]
pub struct Diag {
    pub file: String,
    pub line: u64,
    pub col: u64,
    pub severity: String,
    pub message: String,
}

/// Parses a diagnostic line; `None` when it does not have the located form.
pub fn parse_diag(line: &str) -> Option<Diag> {
    for severity in ["error", "warning"] {
        let marker = format!(": {severity}: ");
        let Some(at) = line.find(&marker) else {
            continue;
        };
        let (location, message) = (&line[..at], &line[at + marker.len()..]);
        let mut parts = location.rsplitn(3, ':');
        let col = parts.next()?.parse().ok()?;
        let line_no = parts.next()?.parse().ok()?;
        let file = parts.next()?.to_string();
        return Some(Diag {
            file,
            line: line_no,
            col,
            severity: severity.to_string(),
            message: message.to_string(),
        });
    }
    None
}

/// The located diagnostics on stderr of the given severity.
pub fn diags(stderr: &str, severity: &str) -> Vec<Diag> {
    stderr
        .lines()
        .filter_map(parse_diag)
        .filter(|d| d.severity == severity)
        .collect()
}

/// The value of the summary line `NAME: VALUE` on `validate`'s stdout (text after the colon).
pub fn summary<'a>(stdout: &'a str, name: &str) -> &'a str {
    let prefix = format!("{name}: ");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no '{name}:' line in the summary:\n{stdout}"))
        .trim()
}

/// The leading integer of a summary value (`"42 (3 belong to no sequence)"` gives 42).
pub fn summary_n(stdout: &str, name: &str) -> u64 {
    let v = summary(stdout, name);
    let digits: String = v.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("'{name}: {v}' does not start with a number"))
}

/// A small deterministic generator (xorshift64*), so the tests need no extra crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// The significant digits of a decimal number's text (`"0.00120e5"` gives `"12"`; zero gives
/// `"0"`), to compare the length of the printed form with the shortest round-trip form.
pub fn significant_digits(text: &str) -> String {
    let mantissa = text.split(['e', 'E']).next().unwrap();
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_start_matches('0').trim_end_matches('0');
    if digits.is_empty() {
        "0".to_string()
    } else {
        digits.to_string()
    }
}

/// One `ctf read --jsonl` line, decoded, with its members in the order written (SPEC §7.5).
#[derive(Clone, Debug, PartialEq)]
pub struct ReadLine {
    pub mb: u64,
    pub keys: Vec<u64>,
    pub samples: Vec<(String, u64)>,
    pub checksum: Vec<(String, f64)>,
    pub sweep_end: bool,
    pub position: u64,
    pub checkpoint: String,
}

/// The members of a `--jsonl` line, in order.
pub const READ_LINE_KEYS: [&str; 7] = [
    "mb",
    "sequences",
    "samples",
    "checksum",
    "sweep_end",
    "position",
    "checkpoint",
];

/// Decodes the `--jsonl` lines of `stdout`; each must have exactly the contract's members.
pub fn read_lines(stdout: &str) -> Vec<ReadLine> {
    json_lines(stdout)
        .iter()
        .map(|v| {
            assert_eq!(v.keys(), READ_LINE_KEYS, "{v:?}");
            let members = |key: &str| -> Vec<(String, String)> {
                match v.at(key) {
                    Json::Obj(m) => m.iter().map(|(k, n)| (k.clone(), n.num().into())).collect(),
                    other => panic!("{key} is not an object: {other:?}"),
                }
            };
            ReadLine {
                mb: v.at("mb").int(),
                keys: v.at("sequences").arr().iter().map(Json::int).collect(),
                samples: members("samples")
                    .into_iter()
                    .map(|(k, n)| (k, n.parse().unwrap()))
                    .collect(),
                checksum: members("checksum")
                    .into_iter()
                    .map(|(k, n)| (k, n.parse().unwrap()))
                    .collect(),
                sweep_end: match v.at("sweep_end") {
                    Json::Bool(b) => *b,
                    other => panic!("sweep_end is not a bool: {other:?}"),
                },
                position: v.at("position").int(),
                checkpoint: match v.at("checkpoint") {
                    Json::Str(t) => t.clone(),
                    other => panic!("checkpoint is not a string: {other:?}"),
                },
            }
        })
        .collect()
}

/// Runs `ctf ARGS` in `dir` (or the current directory) through `sh`, after the shell
/// commands `setup` (`ulimit -n 128`, say), and checks it as [`finish`] does.
pub fn run_after_shell(setup: &str, args: &[&str], dir: Option<&Path>) -> Run {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("{setup}; exec \"$0\" \"$@\""))
        .arg(CTF)
        .args(args);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let out = command.output().unwrap();
    finish(&format!("ctf {} after `{setup}`", args.join(" ")), out)
}
