//! Packing and end-to-end throughput on the benchmark shapes of `shared/bench/gen_ctf.py`
//! (issue 7), with `Throughput::Bytes` of the file so that the figures compare with the
//! `parse`, `index` and `chunk_load` groups of the other benches.
//!
//! - `pack/<shape>/{one,batched}`: copying every sequence of the file, drawn in a shuffled
//!   order from its parsed chunks (1 MiB chunks, all in memory), into minibatches of at least
//!   256 samples, with [`Minibatch::push_sequence`] one at a time or
//!   [`Minibatch::push_sequences`] a minibatch at a time. No parsing: the packing alone.
//! - `sweep_order/<window>`: the planner's serial step at the start of every sweep, the
//!   randomized order of 250,000 one-sample sequences in 4 chunks (the sparse file of the
//!   README's figures with the default 32 MB chunks), with the default window of 128
//!   chunks (so every chunk) and with a window of 2 chunks.
//! - `pipeline/<shape>/<N>-threads`: one full randomized sweep through
//!   [`MinibatchSource::with_options`] with 1 and 2 loader threads, 256-sample minibatches,
//!   every value touched: indexing (no index cache), loading, parsing, planning, packing, as
//!   `ctf bench` measures it.
//!
//! Run: `cargo bench --bench pipeline`. Needs `python3` and the generator at
//! `../shared/bench/gen_ctf.py` (or `$CTF_GEN_SCRIPT`).

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ctf_reader::chunks::{ChunkLoader, ParsedChunk};
use ctf_reader::index::build::{CacheMode, IndexingOptions, SCAN_BLOCK_SIZE};
use ctf_reader::index::build_index;
use ctf_reader::index::chunking::IndexLimits;
use ctf_reader::minibatch::Minibatch;
use ctf_reader::randomize::{block, Window};
use ctf_reader::reader::stderr_sink;
use ctf_reader::source::{MinibatchSource, PipelineOptions, ReadLimits};
use ctf_reader::{ParsedSequences, ReaderConfig};

use support::{generate, shapes, Shape};

/// Minibatch size of the benches, in samples (the targets use 256).
const MB_SIZE: usize = 256;

fn config(shape: &Shape, path: &Path) -> ReaderConfig {
    ReaderConfig::builder()
        .file(path.to_string_lossy())
        .inputs(shape.inputs.iter().cloned())
        .chunk_size_in_bytes(1 << 20)
        .randomize(true)
        .cache_index(false)
        .build()
        .expect("valid bench config")
}

/// Every parsed chunk of the file, in memory.
fn parse_chunks(cfg: &ReaderConfig) -> Vec<ParsedChunk<f32>> {
    let options = IndexingOptions {
        cache: CacheMode::Off,
        on_warning: Arc::new(|w| panic!("{w}")),
        progress: None,
        limits: IndexLimits::default(),
        scan_threads: 1,
        scan_block_bytes: SCAN_BLOCK_SIZE,
    };
    let index = build_index(cfg, &options)
        .expect("bench data indexes")
        .index;
    let mut loader = ChunkLoader::<f32>::new(Arc::clone(&index), cfg);
    (0..index.chunks.len() as u32)
        .map(|id| {
            let mut chunk = ParsedChunk::new(&cfg.inputs);
            loader.load(id, &mut chunk).expect("bench data loads");
            assert!(chunk.invalid.is_empty(), "benchmark data must be valid");
            chunk
        })
        .collect()
}

/// Every (chunk, sequence) pair, in a fixed shuffled order (xorshift Fisher–Yates), split into
/// minibatches of at least [`MB_SIZE`] samples (the last one may be smaller).
fn shuffled_minibatches(chunks: &[ParsedChunk<f32>]) -> Vec<Vec<(usize, usize)>> {
    let mut all: Vec<(usize, usize)> = chunks
        .iter()
        .enumerate()
        .flat_map(|(c, chunk)| (0..chunk.sequences.len()).map(move |s| (c, s)))
        .collect();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..all.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        all.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let mut batches = vec![Vec::new()];
    let mut samples = 0;
    for (c, s) in all {
        let seqs = &chunks[c].sequences;
        // A sequence's length is its longest input.
        samples += (0..seqs.columns.len())
            .map(|i| seqs.sample_count(s, i))
            .max()
            .unwrap_or(0);
        batches.last_mut().expect("one batch").push((c, s));
        if samples >= MB_SIZE {
            batches.push(Vec::new());
            samples = 0;
        }
    }
    batches.retain(|b| !b.is_empty());
    batches
}

/// Touches every value of the minibatch, so that the copy cannot be optimized away.
fn touch(batch: &Minibatch<f32>) -> f32 {
    batch
        .streams
        .iter()
        .map(|s| s.values.iter().sum::<f32>() + s.row_indices.len() as f32)
        .sum()
}

fn bench_pack(c: &mut Criterion) {
    let mut group = c.benchmark_group("pack");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    for shape in shapes() {
        let path = generate(&shape);
        let cfg = config(&shape, &path);
        let chunks = parse_chunks(&cfg);
        let batches = shuffled_minibatches(&chunks);
        group.throughput(Throughput::Bytes(std::fs::metadata(&path).unwrap().len()));
        let mut mb = Minibatch::<f32>::new(&cfg.inputs);
        group.bench_function(format!("{}/one", shape.name), |b| {
            b.iter(|| {
                let mut sum = 0.0;
                for batch in &batches {
                    mb.clear();
                    for &(c, s) in batch {
                        mb.push_sequence(&chunks[c].sequences, s).expect("packs");
                    }
                    sum += touch(&mb);
                }
                sum
            })
        });
        let mut items: Vec<(&ParsedSequences<f32>, usize)> = Vec::new();
        group.bench_function(format!("{}/batched", shape.name), |b| {
            b.iter(|| {
                let mut sum = 0.0;
                for batch in &batches {
                    mb.clear();
                    items.clear();
                    items.extend(batch.iter().map(|&(c, s)| (&chunks[c].sequences, s)));
                    mb.push_sequences(&items).expect("packs");
                    sum += touch(&mb);
                }
                sum
            })
        });
    }
    group.finish();
}

/// One full sweep through the threaded engine; returns the samples read and the checksum.
fn sweep(cfg: &ReaderConfig, loader_threads: usize) -> (usize, f32) {
    let limits = ReadLimits {
        max_sweeps: Some(1),
        ..ReadLimits::default()
    };
    let options = PipelineOptions {
        loader_threads,
        ..PipelineOptions::default()
    };
    let mut source = MinibatchSource::<f32>::with_options(cfg, limits, stderr_sink(), options)
        .expect("source opens");
    let (mut samples, mut sum) = (0, 0.0);
    while let Some(batch) = source
        .next_minibatch(MB_SIZE as u64)
        .expect("bench data reads")
    {
        samples += batch.samples();
        sum += touch(&batch);
    }
    (samples, sum)
}

fn bench_pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipeline");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(4));
    for shape in shapes() {
        let path = generate(&shape);
        let cfg = config(&shape, &path);
        group.throughput(Throughput::Bytes(std::fs::metadata(&path).unwrap().len()));
        for threads in [1, 2] {
            group.bench_function(format!("{}/{threads}-threads", shape.name), |b| {
                b.iter(|| sweep(&cfg, threads))
            });
        }
    }
    group.finish();
}

fn bench_sweep_order(c: &mut Criterion) {
    let mut group = c.benchmark_group("sweep_order");
    group.sample_size(20);
    let layout = vec![vec![1u64; 62_500]; 4];
    for (name, window) in [
        ("128-chunks", Window::Chunks(128)),
        ("2-chunks", Window::Chunks(2)),
    ] {
        group.bench_function(name, |b| {
            let mut sweep = 0;
            b.iter(|| {
                sweep += 1;
                block::sweep_order(&layout, window, 7, sweep)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_pack, bench_sweep_order, bench_pipeline);
criterion_main!(benches);
