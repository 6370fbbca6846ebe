//! How long a consumer slower than the reader waits: reads one sweep of CONFIG in minibatches
//! of `--mb-size` samples, spending `--work-ms` milliseconds of busy work on each (a stand-in
//! for a training step), and prints the consumer's wait per minibatch from the reader's
//! counters. With prefetch, a consumer slower than the reader should wait only for the first
//! minibatch.
//!
//! Usage: `cargo run --release --example slow_consumer -- CONFIG [--mb-size N] [--work-ms M]`.

use std::time::{Duration, Instant};

use ctf_reader::source::{MinibatchSource, ReadLimits};
use ctf_reader::ReaderConfig;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut config_path = None;
    let (mut mb_size, mut work_ms) = (256u64, 2u64);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mb-size" => mb_size = args.next().ok_or("--mb-size needs a value")?.parse()?,
            "--work-ms" => work_ms = args.next().ok_or("--work-ms needs a value")?.parse()?,
            _ => config_path = Some(arg),
        }
    }
    let config_path =
        config_path.ok_or("usage: slow_consumer CONFIG [--mb-size N] [--work-ms M]")?;
    let (config, _warnings) = ReaderConfig::from_file(std::path::Path::new(&config_path), None)?;
    let mut source = MinibatchSource::<f32>::new(
        &config,
        ReadLimits::default(),
        Box::new(|file, d| eprintln!("{file}:{}:{}: {}", d.line, d.col, d.message)),
    )?;
    let work = Duration::from_millis(work_ms);
    let mut first_wait = None;
    let mut minibatches = 0u64;
    let mut checksum = 0.0f64;
    while let Some(mb) = source.next_minibatch(mb_size)? {
        if first_wait.is_none() {
            first_wait = Some(source.counters().wait_time);
        }
        minibatches += 1;
        // Busy work standing in for a training step, touching the minibatch's values.
        let started = Instant::now();
        while started.elapsed() < work {
            checksum += mb.streams[0]
                .values
                .iter()
                .map(|&v| f64::from(v))
                .sum::<f64>();
        }
    }
    let counters = source.counters();
    let first = first_wait.unwrap_or_default();
    let rest = counters.wait_time.saturating_sub(first);
    println!("minibatches: {minibatches}");
    println!("work per minibatch ms: {work_ms}");
    println!("first wait ms: {:.3}", first.as_secs_f64() * 1e3);
    println!(
        "later wait per minibatch ms: {:.4}",
        rest.as_secs_f64() * 1e3 / minibatches.saturating_sub(1).max(1) as f64
    );
    println!("checksum: {checksum}");
    Ok(())
}
