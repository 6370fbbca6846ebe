//! `ctf stats`: indexes the corpus (reusing or writing index caches as `cacheIndex` says),
//! loads every chunk in file order and prints statistics on stdout: sequences, samples per
//! input, sequence lengths with a power-of-two histogram, and per input the value range
//! (dense) or the non-zero count (sparse).
//!
//! Invalid sequences are handled by the reader's `maxErrors` policy ([`ErrorBudget`]): each
//! skipped one is reported at `traceLevel >= 1` and counted as invalid, and the one beyond the
//! budget fails the command (exit 1) before any summary is printed.

use std::sync::Arc;

use ctf_reader::chunks::{ChunkLoader, ParsedChunk};
use ctf_reader::index::{build_index, IndexingOptions};
use ctf_reader::parser::columns::InputColumn;
use ctf_reader::reader::ErrorBudget;
use ctf_reader::{Diagnostic, Element, InputConfig, Precision, ReaderConfig, StorageFormat};

use crate::cli::DataArgs;
use crate::progress::{self, Progress};
use crate::{print_lines, Failure};

/// Runs `ctf stats`.
pub fn run(args: &DataArgs) -> Result<(), Failure> {
    let config = args.reader_config()?;
    match config.precision {
        Precision::Float => stats::<f32>(&config),
        Precision::Double => stats::<f64>(&config),
    }
}

fn stats<T: Element>(config: &ReaderConfig) -> Result<(), Failure> {
    let bar_total = progress::bar_total(config);
    let indexing = Progress::new("indexing", bar_total);
    let mut options = IndexingOptions::for_config(config);
    options.progress = indexing.sink();
    if config.trace_level >= 1 {
        options.on_warning = indexing.warning_sink();
    }
    let built = build_index(config, &options);
    indexing.finish();
    let mut opened = built.map_err(|e| Failure::Data(e.to_string()))?;
    let index = Arc::clone(&opened.index);

    let load_bytes = index.chunks.iter().map(|c| u64::from(c.len)).sum();
    let loading = Progress::new("reading", bar_total.map(|_| load_bytes));
    let mut report = |file: &str, d: &Diagnostic| loading.eprintln(d.display_in(file));
    let mut loader = ChunkLoader::<T>::new(Arc::clone(&index), config);
    let mut chunk = ParsedChunk::new(&config.inputs);
    let mut budget = ErrorBudget::for_config(config);
    let mut totals = Totals::new(config);
    for (id, c) in (0u32..).zip(&index.chunks) {
        loader
            .load(id, &mut chunk)
            .map_err(|e| Failure::Data(e.to_string()))?;
        let file = index.files.get(c.file as usize).map_or("", |f| &f.name);
        budget
            .charge(file, &chunk.diagnostics, &chunk.invalid, &mut report)
            .map_err(|exceeded| Failure::Data(exceeded.error.to_string()))?;
        totals.add(&chunk);
        loading.inc(u64::from(c.len));
    }
    loading.finish();
    // The caches of `cacheIndex = true` are complete when the command ends.
    if let Some(writer) = opened.cache_writer.take() {
        writer.wait();
    }

    let mut lines = vec![
        format!("files: {}", index.data_file_count()),
        format!(
            "sequences: {} valid, {} invalid",
            totals.valid, totals.invalid
        ),
        format!("chunks: {}", index.chunks.len()),
    ];
    for (input, t) in config.inputs.iter().zip(&totals.inputs) {
        lines.push(format!("samples {}: {}", input.name, t.samples));
    }
    totals.lengths.print(&mut lines);
    for (input, t) in config.inputs.iter().zip(&totals.inputs) {
        lines.push(t.describe(input));
    }
    print_lines(&lines)
}

/// What the valid sequences add up to.
struct Totals<T> {
    /// The input whose samples are a sequence's length (`definesMBSize`), if one is.
    sized_by: Option<usize>,
    valid: u64,
    invalid: u64,
    lengths: Lengths,
    inputs: Vec<InputTotals<T>>,
}

impl<T: Element> Totals<T> {
    fn new(config: &ReaderConfig) -> Self {
        Totals {
            sized_by: config.mb_size_input(),
            valid: 0,
            invalid: 0,
            lengths: Lengths::new(),
            inputs: config
                .inputs
                .iter()
                .map(|_| InputTotals::default())
                .collect(),
        }
    }

    /// Adds the sequences of a loaded chunk.
    fn add(&mut self, chunk: &ParsedChunk<T>) {
        let parsed = &chunk.sequences;
        let n = parsed.len();
        self.valid += n as u64;
        self.invalid += chunk.invalid.len() as u64;
        for seq in 0..n {
            let length = match self.sized_by {
                Some(input) => parsed.sample_count(seq, input),
                None => (0..parsed.columns.len())
                    .map(|input| parsed.sample_count(seq, input))
                    .max()
                    .unwrap_or(0),
            };
            self.lengths.add(length as u64);
        }
        for (totals, column) in self.inputs.iter_mut().zip(&parsed.columns) {
            totals.add(column, n);
        }
    }
}

/// Sequence lengths in samples as minibatches count them (SPEC §3): those of the
/// `definesMBSize` input, else the largest sample count among a sequence's inputs.
struct Lengths {
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
    /// Bucket 0 holds length 0; bucket k ≥ 1 holds lengths 2^(k−1) ..= 2^k − 1.
    buckets: [u64; 65],
}

impl Lengths {
    fn new() -> Self {
        Lengths {
            count: 0,
            sum: 0,
            min: 0,
            max: 0,
            buckets: [0; 65],
        }
    }

    fn add(&mut self, length: u64) {
        if self.count == 0 || length < self.min {
            self.min = length;
        }
        self.max = self.max.max(length);
        self.count += 1;
        self.sum += u128::from(length);
        self.buckets[(u64::BITS - length.leading_zeros()) as usize] += 1;
    }

    fn print(&self, lines: &mut Vec<String>) {
        if self.count == 0 {
            lines.push("sequence length: min -, max -, mean -".to_string());
        } else {
            let mean = self.sum as f64 / self.count as f64;
            lines.push(format!(
                "sequence length: min {}, max {}, mean {mean:.3}",
                self.min, self.max
            ));
        }
        lines.push("length histogram:".to_string());
        for (k, &n) in self.buckets.iter().enumerate().filter(|(_, &n)| n > 0) {
            let (low, high) = match k {
                0 => (0, 0),
                k => (1u64 << (k - 1), u64::MAX >> (64 - k)),
            };
            if low == high {
                lines.push(format!("  {low}: {n}"));
            } else {
                lines.push(format!("  {low}-{high}: {n}"));
            }
        }
    }
}

/// 2^-64: [`InputTotals::scaled_sum`] adds values times this, exactly (a power of two; only
/// values below 2^-958 in magnitude lose bits, which cannot matter once the plain sum has
/// overflowed).
const SCALE_DOWN: f64 = 1.0 / SCALE_UP;
/// 2^64, undoing [`SCALE_DOWN`].
const SCALE_UP: f64 = (1u128 << 64) as f64;

/// What one input's samples in valid sequences add up to.
struct InputTotals<T> {
    samples: u64,
    /// Dense: values; sparse: stored values (nnz).
    values: u64,
    /// The sum of the dense values, the mean's numerator while it is finite.
    sum: f64,
    /// The sum of the dense values times 2^-64, for the mean when `sum` overflows (finite
    /// double values near `f64::MAX`): it stays finite for any count below 2^64.
    scaled_sum: f64,
    min: Option<T>,
    max: Option<T>,
}

impl<T> Default for InputTotals<T> {
    fn default() -> Self {
        InputTotals {
            samples: 0,
            values: 0,
            sum: 0.0,
            scaled_sum: 0.0,
            min: None,
            max: None,
        }
    }
}

impl<T: Element> InputTotals<T> {
    /// Adds the first `sequences` (complete) sequences of `column`.
    fn add(&mut self, column: &InputColumn<T>, sequences: usize) {
        let samples = column.samples_before(sequences).unwrap_or(0);
        self.samples += samples as u64;
        match column.format {
            StorageFormat::Dense => {
                let values = column.values();
                let end = (samples * column.dim).min(values.len());
                for v in values.iter().take(end) {
                    // Two independent additions: the second costs next to nothing beside
                    // the first and the comparisons.
                    self.sum += v.to_f64();
                    self.scaled_sum += v.to_f64() * SCALE_DOWN;
                    self.min = Some(match self.min {
                        Some(m) if m <= v => m,
                        _ => v,
                    });
                    self.max = Some(match self.max {
                        Some(m) if m >= v => m,
                        _ => v,
                    });
                }
                self.values += end as u64;
            }
            StorageFormat::Sparse => {
                let held = samples.min(column.sample_count());
                let nnz = column.entries_of(0..held).map_or(0, |e| e.end);
                self.values += nnz as u64;
            }
        }
    }

    /// The mean of the dense values, given their `min` and `max` (at least one value): the
    /// plain sum over the count while the sum is finite, else the scaled sum's, so finite
    /// values always have a finite mean. It is kept within `[min, max]`, where the exact
    /// mean lies, should rounding push it out (all values `f64::MAX`, say); `max` and `min`
    /// rather than `clamp`, which panics on bounds it does not like.
    fn mean(&self, min: T, max: T) -> f64 {
        let count = self.values as f64;
        let mean = if self.sum.is_finite() {
            self.sum / count
        } else {
            self.scaled_sum / count * SCALE_UP
        };
        mean.max(min.to_f64()).min(max.to_f64())
    }

    /// The `input NAME: ...` line.
    fn describe(&self, input: &InputConfig) -> String {
        match input.format {
            StorageFormat::Dense => {
                let range = match (self.min, self.max) {
                    (Some(min), Some(max)) if self.values > 0 => format!(
                        "min {}, max {}, mean {}",
                        shortest(min),
                        shortest(max),
                        format_mean::<T>(self.mean(min, max))
                    ),
                    _ => "min -, max -, mean -".to_string(),
                };
                format!("input {}: dense, dim {}, {range}", input.name, input.dim)
            }
            StorageFormat::Sparse => {
                let per_sample = if self.samples == 0 {
                    "-".to_string()
                } else {
                    format!("{:.3}", self.values as f64 / self.samples as f64)
                };
                format!(
                    "input {}: sparse, dim {}, nnz {}, nnz per sample {per_sample}",
                    input.name, input.dim, self.values
                )
            }
        }
    }
}

/// A mean as printed: 3 decimals, or from 10^15 on in magnitude (where that would print
/// up to 309 digits before the point) the shortest exponent form that reads back as the same
/// value in the data's precision, such as `1.7e308` (the mean rounded to a float for float
/// data, like its min and max).
fn format_mean<T: Element>(mean: f64) -> String {
    if mean.abs() < 1e15 {
        format!("{mean:.3}")
    } else if T::NAME == <f32 as Element>::NAME {
        // Within the values' range, so within f32's: `as` rounds to the nearest float.
        format!("{:e}", mean as f32)
    } else {
        format!("{mean:e}")
    }
}

/// The shortest decimal that reads back as `v` in its own precision.
fn shortest<T: Element>(v: T) -> String {
    let mut s = String::new();
    v.write_shortest(&mut s);
    s
}
