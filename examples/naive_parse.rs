//! The naive baseline of the performance comparisons: a single-thread tokenize-and-parse of a
//! CTF file with the standard library, and nothing else (no validation, no sequences, no
//! columnar output). `ctf validate` must be at least as fast as this on the same file.
//!
//! Usage: `cargo run --release --example naive_parse -- FILE`. Prints lines, values and their
//! sum (so the work cannot be optimized away).

use std::io::{BufRead, BufReader};

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
    let (mut lines, mut values, mut sum, mut bad) = (0u64, 0u64, 0f64, 0u64);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("{path}: {e}");
                std::process::exit(1);
            }
        }
        lines += 1;
        let Ok(text) = std::str::from_utf8(&line) else {
            bad += 1;
            continue;
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
                    values += 1;
                    sum += f64::from(v);
                }
                None => bad += 1,
            }
        }
    }
    println!("lines {lines} values {values} sum {sum} unparsed {bad}");
}
