//! The best time of several in-memory parses of a corpus, one core: for telling two builds
//! of the parser apart on a noisy machine. Run each build's binary in turn, many times
//! (README "Comparing two builds of the parser"): the best of a process's parses leaves out
//! the moments the machine took from it, and the lower percentiles over the processes leave
//! out the processes that never had a quiet moment.
//!
//! Usage: `cargo run --release --example parse_best_of -- CONFIG [PARSES]`: reads the reader
//! section of the BrainScript file CONFIG, its data files (as `ctf bench` finds them, from
//! the current directory) into memory, and parses them `PARSES` times (default 10) with one
//! `StreamParser` in 4 MiB pieces, as `f32` or `f64` as CONFIG's `precision` says. Prints
//! the best time in milliseconds, then the bytes parsed and the best MB/s.

use std::path::Path;
use std::time::Instant;

use ctf_reader::parser::{StreamOptions, StreamParser};
use ctf_reader::{Element, Precision, ReaderConfig};

/// Parses `data` once with `parser` (reused, as a loader reuses its buffers), draining the
/// sequences of each 4 MiB piece; the number of sequences, or why the text is not one to
/// time (a fatal error, or errors: the parse of invalid text is not the one being measured).
/// The parser bench (`benches/parse.rs`) times the same function.
pub fn parse_once<T: Element>(parser: &mut StreamParser<T>, data: &[u8]) -> Result<usize, String> {
    parser.reset();
    let mut sequences = 0;
    for piece in data.chunks(4 << 20) {
        parser.feed(piece).map_err(|e| e.to_string())?;
        sequences += parser.sequences().len();
        parser.clear();
    }
    parser.finish_file().map_err(|e| e.to_string())?;
    sequences += parser.sequences().len();
    let errors = parser.counts().errors;
    parser.clear();
    if errors > 0 {
        return Err(format!(
            "{errors} errors in the corpus (`ctf validate` says where): time a valid one"
        ));
    }
    Ok(sequences)
}

/// The best of `parses` parses of each file's text, in seconds.
#[allow(dead_code)] // the bench includes this file for `parse_once` only
fn best_time<T: Element>(
    config: &ReaderConfig,
    texts: &[Vec<u8>],
    parses: usize,
) -> Result<f64, String> {
    let options = StreamOptions {
        skip_sequence_ids: config.skip_sequence_ids,
        frame_mode: config.frame_mode,
    };
    let mut parser = StreamParser::<T>::new(&config.inputs, options);
    let mut best = f64::INFINITY;
    for _ in 0..parses {
        let started = Instant::now();
        let mut sequences = 0;
        for text in texts {
            sequences += parse_once(&mut parser, text)?;
        }
        best = best.min(started.elapsed().as_secs_f64());
        if sequences == 0 {
            return Err("the corpus holds no sequence".to_string());
        }
    }
    Ok(best)
}

#[allow(dead_code)] // the bench includes this file for `parse_once` only
fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(config_path) = args.first() else {
        return Err("usage: parse_best_of CONFIG [PARSES]".to_string());
    };
    let parses = match args.get(1) {
        Some(n) => n
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or(format!("PARSES must be a positive count, got '{n}'"))?,
        None => 10,
    };
    let (config, _) =
        ReaderConfig::from_file(Path::new(config_path), None).map_err(|e| e.to_string())?;
    let texts = config
        .files
        .iter()
        .map(|f| std::fs::read(f).map_err(|e| format!("cannot read '{f}': {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let best = match config.precision {
        Precision::Float => best_time::<f32>(&config, &texts, parses)?,
        Precision::Double => best_time::<f64>(&config, &texts, parses)?,
    };
    let bytes: usize = texts.iter().map(Vec::len).sum();
    println!(
        "{:.3} ms best of {parses}, {bytes} bytes, {:.1} MB/s",
        best * 1e3,
        bytes as f64 / best / 1e6
    );
    Ok(())
}
