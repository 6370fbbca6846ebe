//! `ctf bench`: reads full sweeps of a corpus through [`MinibatchSource`], as a trainer would
//! but doing nothing with the minibatches except touching every value (a checksum, printed so
//! that the reading cannot be optimized away), and prints one `key: value` line each on
//! stdout: what was read, throughput, time to the first minibatch, peak memory and the time
//! spent in each stage of the engine. The keys are documented in README "Performance".

use std::num::Wrapping;
use std::time::{Duration, Instant};

use ctf_reader::minibatch::Minibatch;
use ctf_reader::reader::stderr_sink;
use ctf_reader::source::{MinibatchSource, ReadLimits};
use ctf_reader::{Element, Precision, ReaderConfig, StorageFormat};

use crate::cli::BenchArgs;
use crate::{print_lines, Failure};

/// Runs `ctf bench`.
pub fn run(args: &BenchArgs) -> Result<(), Failure> {
    // Time to the first minibatch counts from here: before the configuration is read and the
    // source is opened (the process has done nothing else yet but parse its arguments).
    let start = Instant::now();
    let config = args.data.reader_config()?;
    match config.precision {
        Precision::Float => bench::<f32>(&config, args, start),
        Precision::Double => bench::<f64>(&config, args, start),
    }
}

/// What the consumer saw: counts and the checksums of everything it touched.
#[derive(Default)]
struct Totals {
    minibatches: u64,
    samples: u64,
    sequences: u64,
    /// Sum of every value of every input (dense values, or a sparse input's stored values).
    value_sum: f64,
    /// Wrapping sum of every sparse row index and column start, and of the sequence starts.
    index_sum: u64,
}

impl Totals {
    /// Touches every value and index of `batch`.
    fn add<T: Element>(&mut self, batch: &Minibatch<T>) {
        self.minibatches += 1;
        self.samples += batch.samples() as u64;
        self.sequences += batch.len() as u64;
        for stream in &batch.streams {
            self.value_sum += sum_values(&stream.values);
            if stream.format == StorageFormat::Sparse {
                self.index_sum = self
                    .index_sum
                    .wrapping_add(sum_indices(&stream.row_indices))
                    .wrapping_add(sum_indices(&stream.column_starts));
            }
            self.index_sum = stream
                .sequence_starts
                .iter()
                .fold(self.index_sum, |acc, &i| acc.wrapping_add(i as u64));
        }
    }
}

/// Lanes of [`sum_in_lanes`]: independent sums the compiler keeps in vector registers.
const SUM_LANES: usize = 8;

/// Adds up `items` in [`SUM_LANES`] interleaved partial sums, then the partial sums, then
/// what the lanes left over: so that the consumer is not held to one add per latency of the
/// adder (one chain of floating-point adds made it as slow as a packer on sparse data), in a
/// fixed order, so that the sum is the same on every run and thread count.
fn sum_in_lanes<E, A>(items: &[E], zero: A, add: impl Fn(A, &E) -> A) -> A
where
    A: Copy + std::ops::Add<Output = A>,
{
    let mut lanes = [zero; SUM_LANES];
    let mut groups = items.chunks_exact(SUM_LANES);
    for group in &mut groups {
        for (lane, item) in lanes.iter_mut().zip(group) {
            *lane = add(*lane, item);
        }
    }
    let rest = groups.remainder().iter().fold(zero, &add);
    lanes.into_iter().fold(zero, |a, b| a + b) + rest
}

/// The sum of `values` as doubles.
fn sum_values<T: Element>(values: &[T]) -> f64 {
    sum_in_lanes(values, 0.0, |sum, v| sum + v.to_f64())
}

/// The wrapping sum of `indices` (which does not depend on the order of its terms).
fn sum_indices(indices: &[u32]) -> u64 {
    sum_in_lanes(indices, Wrapping(0u64), |sum, &i| {
        sum + Wrapping(u64::from(i))
    })
    .0
}

fn bench<T: Element>(
    config: &ReaderConfig,
    args: &BenchArgs,
    start: Instant,
) -> Result<(), Failure> {
    let options = args.engine.options();
    let loader_threads = options.loader_threads;
    let limits = ReadLimits {
        max_sweeps: Some(args.sweeps),
        ..ReadLimits::default()
    };
    let opening = Instant::now();
    let mut source = MinibatchSource::<T>::with_options(config, limits, stderr_sink(), options)
        .map_err(Failure::from)?;
    let index_time = opening.elapsed();
    let reading = Instant::now();
    let mut first_minibatch: Option<Duration> = None;
    let mut totals = Totals::default();
    while let Some(batch) = source.next_minibatch(args.mb_size).map_err(Failure::from)? {
        if first_minibatch.is_none() {
            first_minibatch = Some(start.elapsed());
        }
        totals.add(&batch);
    }
    let read_time = reading.elapsed();
    let elapsed = start.elapsed();
    let counters = source.counters();
    let sweep_samples = source.sweep_samples();
    let corpus_bytes = source.index().data_bytes();
    // The corpus bytes the minibatches covered: the files' size (of every deserializer) per
    // sweep of the timeline read. (Delivered samples would undercount: a minibatch counts the
    // largest input's sum, not each sequence's longest input.)
    let bytes = (u128::from(corpus_bytes) * u128::from(source.position())
        / u128::from(sweep_samples.max(1))) as u64;
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let per_second = |n: f64| n / seconds;
    let lines = vec![
        format!("threads: {loader_threads}"),
        format!("mb_size: {}", args.mb_size),
        format!("sweeps: {}", args.sweeps),
        format!("minibatches: {}", totals.minibatches),
        format!("sequences: {}", totals.sequences),
        format!("samples: {}", totals.samples),
        format!("bytes: {bytes}"),
        format!("bytes_read: {}", counters.bytes_read),
        format!("checksum: {}", totals.value_sum),
        format!("index_checksum: {}", totals.index_sum),
        format!("elapsed_s: {:.6}", elapsed.as_secs_f64()),
        format!("MB/s: {:.3}", per_second(bytes as f64) / 1e6),
        format!("samples/s: {:.1}", per_second(totals.samples as f64)),
        format!(
            "minibatches/s: {:.1}",
            per_second(totals.minibatches as f64)
        ),
        match first_minibatch {
            Some(t) => format!("first_minibatch_s: {:.6}", t.as_secs_f64()),
            None => "first_minibatch_s: none".to_string(),
        },
        match peak_rss_bytes() {
            Some(b) => format!("peak_rss_bytes: {b}"),
            None => "peak_rss_bytes: unknown".to_string(),
        },
        format!("index_s: {:.6}", index_time.as_secs_f64()),
        format!("read_s: {:.6}", read_time.as_secs_f64()),
        format!("parse_s: {:.6}", counters.parse_time.as_secs_f64()),
        format!("plan_s: {:.6}", counters.plan_time.as_secs_f64()),
        format!("pack_s: {:.6}", counters.pack_time.as_secs_f64()),
        format!("wait_s: {:.6}", counters.wait_time.as_secs_f64()),
        format!("quick_bytes_read: {}", counters.quick_bytes_read),
        format!("pinned_packers: {}", counters.pinned_packers),
    ];
    print_lines(&lines)
}

/// The process's peak resident set size (`VmHWM` of `/proc/self/status`), where the system
/// has it (Linux).
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut words = line["VmHWM:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        _ => None,
    }
}
