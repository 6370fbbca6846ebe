//! Index and chunk-load throughput on the benchmark shapes (issue 3).
//!
//! - `index/<shape>`: building the index of one file (scan + chunking, no cache), warm page
//!   cache. Compare with `wc -l` on the same file for the I/O floor.
//! - `chunk_load/<shape>`: loading (pread + parse + check against the index) every chunk of
//!   the file, in order, with 1 MiB chunks.
//! - `open/<shape>/{scan,cache}`: time to the first parsed chunk, without and with a valid
//!   index cache.
//!
//! Run: `cargo bench --bench index`.

mod support;

use std::path::Path;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ctf_reader::chunks::{ChunkLoader, ParsedChunk};
use ctf_reader::index::build::{default_scan_threads, CacheMode, IndexingOptions, SCAN_BLOCK_SIZE};
use ctf_reader::index::build_index;
use ctf_reader::index::chunking::IndexLimits;
use ctf_reader::ReaderConfig;

use support::{generate, shapes, Shape};

fn config(shape: &Shape, path: &Path, chunk_size: u64) -> ReaderConfig {
    ReaderConfig::builder()
        .file(path.to_string_lossy())
        .inputs(shape.inputs.iter().cloned())
        .chunk_size_in_bytes(chunk_size)
        .build()
        .expect("valid bench config")
}

fn options(cache: CacheMode) -> IndexingOptions {
    options_with_threads(cache, default_scan_threads())
}

fn options_with_threads(cache: CacheMode, scan_threads: usize) -> IndexingOptions {
    IndexingOptions {
        cache,
        on_warning: Arc::new(|w| panic!("{w}")),
        progress: None,
        limits: IndexLimits::default(),
        scan_threads,
        scan_block_bytes: SCAN_BLOCK_SIZE,
    }
}

fn bench_index(c: &mut Criterion) {
    let mut group = c.benchmark_group("index");
    group.sample_size(20);
    for shape in shapes() {
        let path = generate(&shape);
        let cfg = config(&shape, &path, 32 << 20);
        group.throughput(Throughput::Bytes(std::fs::metadata(&path).unwrap().len()));
        // The default (every core, at most 8) and one thread, to show what the split brings.
        for (label, threads) in [("", default_scan_threads()), ("/1-thread", 1)] {
            let options = options_with_threads(CacheMode::Off, threads);
            group.bench_function(format!("{}{label}", shape.name), |b| {
                b.iter(|| build_index(&cfg, &options).unwrap().index.sequences.len())
            });
        }
    }
    group.finish();
}

fn bench_chunk_load(c: &mut Criterion) {
    let mut group = c.benchmark_group("chunk_load");
    group.sample_size(10);
    for shape in shapes() {
        let path = generate(&shape);
        let cfg = config(&shape, &path, 1 << 20);
        let index = build_index(&cfg, &options(CacheMode::Off)).unwrap().index;
        let mut loader = ChunkLoader::<f32>::new(Arc::clone(&index), &cfg);
        let mut chunk = ParsedChunk::new(&cfg.inputs);
        group.throughput(Throughput::Bytes(index.total_bytes()));
        group.bench_function(shape.name, |b| {
            b.iter(|| {
                let mut sequences = 0;
                for id in 0..index.chunks.len() as u32 {
                    loader.load(id, &mut chunk).unwrap();
                    sequences += chunk.sequences.len();
                }
                sequences
            })
        });
    }
    group.finish();
}

fn bench_open(c: &mut Criterion) {
    let mut group = c.benchmark_group("open");
    group.sample_size(20);
    for shape in shapes() {
        let path = generate(&shape);
        let cfg = config(&shape, &path, 1 << 20);
        let first_chunk = |cache| {
            let opened = build_index(&cfg, &options(cache)).unwrap();
            let mut loader = ChunkLoader::<f32>::new(Arc::clone(&opened.index), &cfg);
            let mut chunk = ParsedChunk::new(&cfg.inputs);
            loader.load(0, &mut chunk).unwrap();
            chunk.sequences.len()
        };
        group.bench_function(format!("{}/scan", shape.name), |b| {
            b.iter(|| first_chunk(CacheMode::Off))
        });
        // Write the cache once, then every open reads it.
        drop(build_index(&cfg, &options(CacheMode::Rebuild)).unwrap());
        group.bench_function(format!("{}/cache", shape.name), |b| {
            b.iter(|| first_chunk(CacheMode::Use))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_index, bench_chunk_load, bench_open);
criterion_main!(benches);
