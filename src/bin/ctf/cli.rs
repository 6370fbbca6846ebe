//! Command-line arguments shared by the subcommands, and turning them into a configuration.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use ctf_reader::config::{ConfigOverrides, ReaderConfigBuilder};
use ctf_reader::diag::write_stderr_line;
use ctf_reader::source::{PipelineOptions, MAX_PREFETCH, MAX_THREADS};
use ctf_reader::{InputConfig, Precision, ReaderConfig, StorageFormat};

use crate::Failure;

/// Validate, dump, index and summarize CNTK Text Format (CTF) datasets.
#[derive(Parser, Debug)]
#[command(
    name = "ctf",
    version,
    about = "Validate, dump, index and summarize (stats) CNTK Text Format (CTF) datasets read \
             through a CNTK reader configuration"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print every valid sequence as one JSON object per line, in file order.
    Dump(DataArgs),
    /// Report every error and warning in the data, then a summary; exit 1 on any error.
    Validate(DataArgs),
    /// Scan every file and write its index cache next to it, then print an indexing summary.
    Index(IndexArgs),
    /// Print corpus statistics: sequences, samples, sequence lengths and values per input.
    Stats(DataArgs),
    /// Read minibatches along the timeline, as a trainer would (one sweep by default).
    Read(ReadArgs),
    /// Read full randomized sweeps as fast as possible and print throughput, time to the
    /// first minibatch, peak memory and time per stage on stdout.
    Bench(BenchArgs),
}

/// Where the data and its configuration come from.
#[derive(Args, Debug)]
pub struct DataArgs {
    /// BrainScript configuration holding the reader section.
    pub config: Option<PathBuf>,
    /// Dotted path to the reader record, or to a command record holding one or inside a
    /// record holding one (e.g. `train`).
    #[arg(long, value_name = "PATH")]
    pub section: Option<String>,
    /// Data file to read instead of the configuration's `file` (repeat for several files); for
    /// a composite reader, instead of the first deserializer's.
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<String>,
    /// Input to read instead of the configuration's `input` section (repeatable; not with a
    /// composite reader).
    #[arg(long = "input", value_name = "NAME:DIM:dense|sparse[:ALIAS]", value_parser = parse_input)]
    pub inputs: Vec<InputConfig>,
    /// Element type of the values.
    #[arg(long, value_name = "float|double", value_parser = parse_precision)]
    pub precision: Option<Precision>,
    /// Number of invalid sequences to skip before failing (`dump`, `stats`, `read`, `bench`;
    /// `validate` reports every error).
    #[arg(long, value_name = "N")]
    pub max_errors: Option<u64>,
    /// Treat every line as its own sequence, in every deserializer of a composite reader
    /// (`skipSequenceIds = true` everywhere).
    #[arg(long)]
    pub skip_sequence_ids: bool,
    /// 0: no warnings, nor the errors of invalid sequences skipped within maxErrors (the
    /// error that fails a read is still shown; validate shows every error); 1 or more: all.
    #[arg(long, value_name = "N")]
    pub trace_level: Option<u32>,
}

/// `ctf index`'s arguments.
#[derive(Args, Debug)]
pub struct IndexArgs {
    /// The data to index.
    #[command(flatten)]
    pub data: DataArgs,
    /// Threads scanning each file (default: the available cores; at most 8 are used); the
    /// index is the same whatever the number.
    #[arg(long, value_name = "N", value_parser = thread_count::<usize>)]
    pub threads: Option<usize>,
}

/// `ctf read`'s arguments.
#[derive(Args, Debug)]
pub struct ReadArgs {
    /// The data to read.
    #[command(flatten)]
    pub data: DataArgs,
    /// Minibatch size in samples (the global size with several workers), or a schedule by
    /// epoch such as `128*2:1024`.
    #[arg(long, value_name = "N|SCHEDULE")]
    pub mb_size: String,
    /// Stop at this global position, in samples (positions count from 0, also after
    /// `--restore`).
    #[arg(long, value_name = "S")]
    pub max_samples: Option<u64>,
    /// Stop after this many sweeps.
    #[arg(long, value_name = "K")]
    pub max_sweeps: Option<u64>,
    /// Epochs of this many samples (at least 1): a minibatch takes only sequences that start
    /// before the next epoch end (the last may run past it, delivered whole), and a schedule
    /// advances per epoch (without it, per sweep).
    #[arg(long, value_name = "N", value_parser = at_least_one::<u64>)]
    pub epoch_size: Option<u64>,
    /// Number of data-parallel workers, replacing the configuration's `numDataPartitions`
    /// (default 1); the rank stays the configuration's unless `--rank` is given too.
    #[arg(long, value_name = "K", value_parser = at_least_one::<u32>)]
    pub workers: Option<u32>,
    /// This worker's 0-based rank, replacing the configuration's `partitionIndex` (default
    /// 0); below the number of workers, `--workers` or the configuration's.
    #[arg(long, value_name = "R")]
    pub rank: Option<u32>,
    /// Resume right after the minibatch whose `checkpoint` token this is (40 hexadecimal
    /// digits, either case).
    #[arg(long, value_name = "TOKEN")]
    pub restore: Option<String>,
    /// Print one JSON object per minibatch on stdout.
    #[arg(long)]
    pub jsonl: bool,
    /// The engine's threads.
    #[command(flatten)]
    pub engine: EngineThreads,
    /// Deliveries of packed minibatches each packer queues ahead of the consumer (default 2,
    /// at most 256; a delivery is one minibatch, or several small ones).
    #[arg(long, value_name = "N", value_parser = prefetch_depth)]
    pub prefetch: Option<usize>,
    /// Most bytes of parsed data kept in memory (chunk cache and queued minibatches);
    /// a number of bytes, or with a suffix K, M or G (powers of 1024). Below what a
    /// randomization window of several chunks holds, each sequence is read on its own.
    #[arg(long, value_name = "BYTES", value_parser = byte_count)]
    pub memory_budget: Option<u64>,
    /// On a cold start, only scan the files to index them, and parse each part when it is
    /// loaded: the first minibatch comes sooner, the sweep takes longer (by default the
    /// index build parses the parts it reads when the window covers the corpus, or in file
    /// order when the corpus is at most two chunks, and the loaders take them).
    #[arg(long)]
    pub no_parse_while_indexing: bool,
    /// Print the counters on stderr: chunks loaded, bytes read, quick bytes read, parts
    /// parsed while indexing, pinned packers, cache hits, misses and bytes, parse, plan,
    /// pack and wait seconds.
    #[arg(long)]
    pub stats: bool,
}

/// `ctf bench`'s arguments.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The data to read.
    #[command(flatten)]
    pub data: DataArgs,
    /// Minibatch size in samples.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = at_least_one::<u64>)]
    pub mb_size: u64,
    /// The engine's threads.
    #[command(flatten)]
    pub engine: EngineThreads,
    /// Full sweeps to read.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = at_least_one::<u64>)]
    pub sweeps: u64,
}

/// The threaded engine's threads, as `ctf read` and `ctf bench` set them.
#[derive(Args, Debug)]
pub struct EngineThreads {
    /// Loader (parser) threads, and packer threads (default: the available cores; at most
    /// 1024).
    #[arg(long, value_name = "N", value_parser = thread_count::<u32>)]
    pub threads: Option<u32>,
    /// Leave the packer threads where the system puts them (by default each is pinned to a
    /// CPU of its own when they are as many as the CPUs this process may use; see README
    /// "The `ctf` process's packer threads").
    #[arg(long)]
    pub no_pin_packers: bool,
}

impl EngineThreads {
    /// The engine's default options with these threads: `--threads` loaders and as many
    /// packers, pinned unless `--no-pin-packers` (the tool owns its process; the library
    /// leaves them unpinned).
    pub fn options(&self) -> PipelineOptions {
        let mut options = PipelineOptions::default();
        if let Some(threads) = self.threads {
            options.loader_threads = threads as usize;
            options.packer_threads = threads as usize;
        }
        options.pin_packers = !self.no_pin_packers;
        options
    }
}

/// A byte count: digits, optionally followed by K, M or G (powers of 1024).
fn byte_count(text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.as_bytes().last() {
        Some(b'K' | b'k') => (&text[..text.len() - 1], 1u64 << 10),
        Some(b'M' | b'm') => (&text[..text.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("expected a number of bytes such as 500M, got '{text}'"))
}

/// A count of at least 1 (workers, sizes).
fn at_least_one<N: std::str::FromStr + PartialOrd + From<u8>>(text: &str) -> Result<N, String> {
    match text.parse::<N>() {
        Ok(n) if n >= N::from(1) => Ok(n),
        _ => Err(format!("expected a number of at least 1, got '{text}'")),
    }
}

/// A count from 1 to `max`.
fn count_up_to<N: std::str::FromStr + TryInto<usize> + Copy>(
    text: &str,
    max: usize,
) -> Result<N, String> {
    text.parse::<N>()
        .ok()
        .and_then(|n| {
            let count: usize = n.try_into().ok()?;
            (1..=max).contains(&count).then_some(n)
        })
        .ok_or_else(|| format!("expected a number from 1 to {max}, got '{text}'"))
}

/// A number of threads: 1 to [`MAX_THREADS`].
fn thread_count<N: std::str::FromStr + TryInto<usize> + Copy>(text: &str) -> Result<N, String> {
    count_up_to(text, MAX_THREADS)
}

/// A prefetch depth: 1 to [`MAX_PREFETCH`].
fn prefetch_depth(text: &str) -> Result<usize, String> {
    count_up_to(text, MAX_PREFETCH)
}

fn parse_input(spec: &str) -> Result<InputConfig, String> {
    let parts: Vec<&str> = spec.split(':').collect();
    if !(3..=4).contains(&parts.len()) {
        return Err(format!(
            "expected NAME:DIM:dense|sparse[:ALIAS], got '{spec}'"
        ));
    }
    let name = parts[0];
    if name.is_empty() {
        return Err("the input name is empty".to_string());
    }
    let dim: usize = parts[1].parse().ok().filter(|&d| d > 0).ok_or_else(|| {
        format!(
            "the dim of input '{name}' must be a positive integer, got '{}'",
            parts[1]
        )
    })?;
    let format = match parts[2].to_ascii_lowercase().as_str() {
        "dense" => StorageFormat::Dense,
        "sparse" => StorageFormat::Sparse,
        other => {
            return Err(format!(
                "the format of input '{name}' must be dense or sparse, got '{other}'"
            ))
        }
    };
    let input = InputConfig::new(name, dim, format);
    match parts.get(3) {
        Some(alias) => Ok(input.with_alias(alias)),
        None => Ok(input),
    }
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    match s.to_ascii_lowercase().as_str() {
        "float" => Ok(Precision::Float),
        "double" => Ok(Precision::Double),
        other => Err(format!("expected float or double, got '{other}'")),
    }
}

/// `ctf read`'s `--workers` and `--rank` (none: the configuration's values).
#[derive(Clone, Copy, Debug, Default)]
pub struct Partition {
    /// Number of workers (`numDataPartitions`).
    pub workers: Option<u32>,
    /// This worker's 0-based rank (`partitionIndex`).
    pub rank: Option<u32>,
}

impl DataArgs {
    /// The reader configuration: the config file's reader section with the command line's
    /// overrides applied, or one built from `--file` and `--input` alone.
    pub fn reader_config(&self) -> Result<ReaderConfig, Failure> {
        self.reader_config_and_warnings().map(|(config, _)| config)
    }

    /// [`Self::reader_config`], and how many warnings the configuration drew (printed on
    /// stderr unless the trace level is 0; `validate` counts them in its summary).
    pub fn reader_config_and_warnings(&self) -> Result<(ReaderConfig, u64), Failure> {
        self.partitioned_reader_config(Partition::default())
    }

    /// [`Self::reader_config_and_warnings`] with `ctf read`'s `--workers` and `--rank`,
    /// each replacing only its own key (`numDataPartitions`, `partitionIndex`): the other
    /// keeps the configuration's value, or without one the default (1 worker, rank 0).
    pub fn partitioned_reader_config(
        &self,
        partition: Partition,
    ) -> Result<(ReaderConfig, u64), Failure> {
        // A rank and a number of workers that both come from the command line are checked
        // here; one from the configuration is checked with it, at its position.
        if self.config.is_none() || (partition.workers.is_some() && partition.rank.is_some()) {
            let rank = partition.rank.unwrap_or(0);
            let workers = partition.workers.unwrap_or(1);
            if rank >= workers {
                let workers_from = match partition.workers {
                    Some(_) => "--workers",
                    None => "the default",
                };
                return Err(Failure::Usage(format!(
                    "error: rank {rank} (--rank) must be below the number of workers, \
                     {workers} ({workers_from})"
                )));
            }
        }
        let mut config_warnings = 0;
        let builder = match &self.config {
            Some(path) => {
                // The options replace the configuration's values before anything is
                // required or checked: they can stand in for a `$macro$`, a missing key or
                // a value this reader cannot use.
                let overrides = ConfigOverrides {
                    files: self.files.clone(),
                    inputs: self.inputs.clone(),
                    precision: self.precision,
                    max_errors: self.max_errors,
                    trace_level: self.trace_level,
                    skip_sequence_ids: self.skip_sequence_ids,
                    num_data_partitions: partition.workers,
                    partition_index: partition.rank,
                };
                let (config, warnings) =
                    ReaderConfig::from_file_with(path, self.section.as_deref(), &overrides)
                        .map_err(|e| {
                            // A misspelt key reported as a warning often explains the error.
                            for w in e.warnings() {
                                write_stderr_line(w);
                            }
                            Failure::Usage(e.to_string())
                        })?;
                config_warnings = warnings.len() as u64;
                // Warnings too from traceLevel 1 on (the default); 0 is errors only.
                if config.trace_level >= 1 {
                    for w in &warnings {
                        write_stderr_line(w);
                    }
                }
                ReaderConfigBuilder::from_config(config)
            }
            None if self.section.is_some() => {
                return Err(Failure::Usage(
                    "error: --section needs a CONFIG file".to_string(),
                ))
            }
            None if self.files.is_empty() || self.inputs.is_empty() => {
                return Err(Failure::Usage(
                    "error: give a CONFIG file, or both --file and --input".to_string(),
                ))
            }
            None => {
                let mut builder = ReaderConfig::builder()
                    .files(self.files.iter().cloned())
                    .inputs(self.inputs.iter().cloned())
                    .skip_sequence_ids(self.skip_sequence_ids);
                if let Some(p) = self.precision {
                    builder = builder.precision(p);
                }
                if let Some(m) = self.max_errors {
                    builder = builder.max_errors(m);
                }
                if let Some(t) = self.trace_level {
                    builder = builder.trace_level(t);
                }
                builder.partition(partition.rank.unwrap_or(0), partition.workers.unwrap_or(1))
            }
        };
        let config = builder.build().map_err(|e| Failure::Usage(e.to_string()))?;
        Ok((config, config_warnings))
    }
}
