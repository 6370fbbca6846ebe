//! `ctf read`: reads minibatches along the timeline, as a trainer would (SPEC §7.5).
//!
//! With `--jsonl`, one JSON object per non-empty minibatch on stdout: its index, the keys of
//! its sequences, samples and checksum per input, `sweep_end`, the position after it and the
//! checkpoint token to resume right after it. Without, a progress bar and a summary on
//! stderr. `--stats` adds the counters (chunks loaded, bytes read, quick bytes read, cache hits and misses,
//! seconds spent parsing summed over the loader threads, seconds the consumer waited).

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Instant;

use ctf_reader::diag::write_stderr_line;
use ctf_reader::minibatch::Minibatch;
use ctf_reader::reader::stderr_sink;
use ctf_reader::source::MinibatchSource;
use ctf_reader::source::ReadLimits;
use ctf_reader::timeline::checkpoint::Checkpoint;
use ctf_reader::timeline::schedule::MbSchedule;
use ctf_reader::{Element, Precision, ReaderConfig};

use crate::cli::{Partition, ReadArgs};
use crate::json::push_json_string;
use crate::progress::Progress;
use crate::Failure;

/// Runs `ctf read`.
pub fn run(args: &ReadArgs) -> Result<(), Failure> {
    let partition = Partition {
        workers: args.workers,
        rank: args.rank,
    };
    let (config, _) = args.data.partitioned_reader_config(partition)?;
    let schedule: MbSchedule = args
        .mb_size
        .parse()
        .map_err(|e| Failure::Usage(format!("error: {e}")))?;
    if args.max_samples.is_some() && args.max_sweeps.is_some() {
        return Err(Failure::Usage(
            "error: give --max-samples or --max-sweeps, not both".to_string(),
        ));
    }
    let limits = ReadLimits {
        max_samples: args.max_samples,
        max_sweeps: match (args.max_samples, args.max_sweeps) {
            (None, None) => Some(1),
            (_, sweeps) => sweeps,
        },
        epoch_size: args.epoch_size,
    };
    let restore = match &args.restore {
        Some(token) => {
            Some(Checkpoint::from_token(token).map_err(|e| Failure::Usage(format!("error: {e}")))?)
        }
        None => None,
    };
    match config.precision {
        Precision::Float => read::<f32>(&config, limits, schedule, restore, args),
        Precision::Double => read::<f64>(&config, limits, schedule, restore, args),
    }
}

fn read<T: Element>(
    config: &ReaderConfig,
    limits: ReadLimits,
    schedule: MbSchedule,
    restore: Option<Checkpoint>,
    args: &ReadArgs,
) -> Result<(), Failure> {
    let start = Instant::now();
    let mut options = args.engine.options();
    if let Some(prefetch) = args.prefetch {
        options.prefetch = prefetch;
    }
    options.memory_budget = args.memory_budget;
    options.parse_while_indexing = !args.no_parse_while_indexing;
    let mut source =
        MinibatchSource::<T>::with_options(config, limits.clone(), stderr_sink(), options)
            .map_err(Failure::from)?;
    if let Some(checkpoint) = &restore {
        source.restore(checkpoint).map_err(Failure::from)?;
    }
    source.set_schedule(schedule);
    let total = match (limits.max_samples, limits.max_sweeps) {
        (Some(s), None) if s < ctf_reader::source::FULL_DATA_SWEEP => Some(s),
        (None, Some(k)) => k.checked_mul(source.sweep_samples()),
        _ => None,
    }
    .map(|end| end.saturating_sub(source.position()));
    let progress = (!args.jsonl).then(|| Progress::of_samples("reading", total));
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let (mut minibatches, mut samples, mut sequences) = (0u64, 0u64, 0u64);
    let mut line = String::new();
    let mut last_position = source.position();
    loop {
        let batch = match source.next_scheduled(1) {
            Ok(Some(batch)) => batch,
            Ok(None) => break,
            Err(e) => {
                let _ = out.flush();
                if let Some(p) = &progress {
                    p.finish();
                }
                return Err(Failure::from(e));
            }
        };
        if let Some(p) = &progress {
            p.inc(batch.position - last_position);
        }
        last_position = batch.position;
        samples += batch.samples() as u64;
        sequences += batch.len() as u64;
        if args.jsonl && !batch.is_empty() {
            line.clear();
            push_minibatch(&mut line, minibatches, &batch, config, &source.checkpoint());
            if let Err(e) = out.write_all(line.as_bytes()) {
                if e.kind() == io::ErrorKind::BrokenPipe {
                    return Ok(());
                }
                return Err(Failure::Data(format!(
                    "error: cannot write the output: {e}"
                )));
            }
        }
        minibatches += 1;
    }
    match out.flush() {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
        Err(e) => {
            return Err(Failure::Data(format!(
                "error: cannot write the output: {e}"
            )))
        }
    }
    if let Some(p) = &progress {
        p.finish();
    }
    let seconds = start.elapsed().as_secs_f64().max(1e-9);
    let counters = source.counters();
    let mut summary = Vec::new();
    if !args.jsonl {
        summary.extend([
            format!("minibatches: {minibatches}"),
            format!("samples: {samples}"),
            format!("sequences: {sequences}"),
            format!("MB/s: {:.1}", counters.bytes_read as f64 / seconds / 1e6),
            format!("samples/s: {:.0}", samples as f64 / seconds),
            format!("elapsed: {seconds:.3} s"),
        ]);
    }
    if args.stats {
        summary.extend([
            format!("chunks loaded: {}", counters.chunks_loaded),
            format!("bytes read: {}", counters.bytes_read),
            format!("quick bytes read: {}", counters.quick_bytes_read),
            format!(
                "parts parsed while indexing: {}",
                counters.parts_parsed_while_indexing
            ),
            format!("pinned packers: {}", counters.pinned_packers),
            format!("cache hits: {}", counters.cache_hits),
            format!("cache misses: {}", counters.cache_misses),
            format!("cache bytes: {}", counters.cache_bytes),
            format!("parse seconds: {:.3}", counters.parse_time.as_secs_f64()),
            format!("plan seconds: {:.3}", counters.plan_time.as_secs_f64()),
            format!("pack seconds: {:.3}", counters.pack_time.as_secs_f64()),
            format!("wait seconds: {:.3}", counters.wait_time.as_secs_f64()),
        ]);
    }
    if !summary.is_empty() {
        write_stderr_line(summary.join("\n"));
    }
    Ok(())
}

/// One `--jsonl` line.
fn push_minibatch<T: Element>(
    out: &mut String,
    number: u64,
    batch: &Minibatch<T>,
    config: &ReaderConfig,
    checkpoint: &Checkpoint,
) {
    let _ = write!(out, "{{\"mb\":{number},\"sequences\":[");
    for (i, s) in batch.sequences.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}", s.key);
    }
    out.push_str("],\"samples\":{");
    for (i, (input, stream)) in config.inputs.iter().zip(&batch.streams).enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_string(out, &input.name);
        let _ = write!(out, ":{}", stream.samples);
    }
    out.push_str("},\"checksum\":{");
    for (i, (input, stream)) in config.inputs.iter().zip(&batch.streams).enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_string(out, &input.name);
        // Dense values, or a sparse input's stored values: the sum is the same either way.
        // It starts from +0 (as a C loop or Python's `sum` would), not from the -0 of
        // `Sum for f64`, so an input with no stored value sums to 0, not -0.
        let sum = stream.values.iter().fold(0.0, |sum, v| sum + v.to_f64());
        out.push(':');
        push_number(out, sum);
    }
    let _ = writeln!(
        out,
        "}},\"sweep_end\":{},\"position\":{},\"checkpoint\":\"{}\"}}",
        batch.sweep_end,
        batch.position,
        checkpoint.to_token()
    );
}

/// A double as JSON, in `dump`'s form: the shortest that parses back to it, integers without
/// a fraction, an exponent from 1e16 on and from 1e-5 down (so a huge sum is not a 300-digit
/// integer that a JSON reader takes for an integer); never NaN or infinite in valid data,
/// but an overflowing sum becomes `null`.
fn push_number(out: &mut String, v: f64) {
    if !v.is_finite() {
        out.push_str("null");
    } else {
        v.write_shortest(out);
    }
}
