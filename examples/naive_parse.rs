//! The naive baseline of the performance comparisons: a single-thread tokenize-and-parse of a
//! CTF file with the standard library, and nothing else (no validation, no sequences, no
//! columnar output). `ctf validate` must be at least as fast as this on the same file; the
//! parser bench (`benches/parse.rs`) runs the same per-line code in memory for its ratios.
//!
//! Usage: `cargo run --release --example naive_parse -- FILE`. Prints lines, values and their
//! sum (so the work cannot be optimized away).

use std::io::{BufRead, BufReader};

/// What the naive pass counted.
#[derive(Debug, Default)]
pub struct Totals {
    /// Lines seen.
    pub lines: u64,
    /// Numbers parsed.
    pub values: u64,
    /// Their sum.
    pub sum: f64,
    /// Tokens that were not numbers (or lines that were not UTF-8).
    pub unparsed: u64,
}

/// Tokenizes one line on whitespace and parses every value with `str::parse`.
pub fn parse_line(line: &[u8], totals: &mut Totals) {
    totals.lines += 1;
    let Ok(text) = std::str::from_utf8(line) else {
        totals.unparsed += 1;
        return;
    };
    for (i, token) in text.split_ascii_whitespace().enumerate() {
        if token.starts_with('|') || i == 0 && token.bytes().all(|b| b.is_ascii_digit()) {
            continue; // an input name, or the leading sequence id
        }
        let value = match token.split_once(':') {
            Some((index, value)) => index.parse::<u32>().ok().and(value.parse::<f32>().ok()),
            None => token.parse::<f32>().ok(),
        };
        match value {
            Some(v) => {
                totals.values += 1;
                totals.sum += f64::from(v);
            }
            None => totals.unparsed += 1,
        }
    }
}

#[allow(dead_code)] // the bench includes this file for `parse_line` only
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: naive_parse FILE");
        std::process::exit(2);
    };
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut line = Vec::new();
    let mut totals = Totals::default();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => parse_line(&line, &mut totals),
            Err(e) => {
                eprintln!("{path}: {e}");
                std::process::exit(1);
            }
        }
    }
    println!(
        "lines {} values {} sum {} unparsed {}",
        totals.lines, totals.values, totals.sum, totals.unparsed
    );
}
