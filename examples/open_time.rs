//! Time to the first chunk, with and without a valid index cache: how long a reader takes
//! from opening a corpus to holding its first parsed chunk, when it must scan every file
//! (`cacheIndex = false`) and when it reads the caches `ctf index` wrote. The index issue's
//! target is a ratio of at least 20 on a ~1 GB corpus.
//!
//! Usage: `cargo run --release --example open_time -- [--chunk-size BYTES] FILE
//! NAME:DIM:dense|sparse...` (an input argument per input; aliases equal names; the chunk
//! size defaults to CNTK's 32 MiB). Writes the index cache next to FILE, then times each way
//! `RUNS` times alternately and prints the medians, their ratio, and how much of the cached
//! open is the index.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctf_reader::chunks::{ChunkLoader, ParsedChunk};
use ctf_reader::index::build::CacheMode;
use ctf_reader::index::{build_index, IndexingOptions};
use ctf_reader::{InputConfig, ReaderConfig};

const RUNS: usize = 5;

fn input(spec: &str) -> Result<InputConfig, String> {
    let parts: Vec<&str> = spec.split(':').collect();
    let [name, dim, storage] = parts[..] else {
        return Err(format!("expected NAME:DIM:dense|sparse, got '{spec}'"));
    };
    let dim: usize = dim.parse().map_err(|_| format!("bad dim in '{spec}'"))?;
    match storage {
        "dense" => Ok(InputConfig::dense(name, dim)),
        "sparse" => Ok(InputConfig::sparse(name, dim)),
        _ => Err(format!("expected dense or sparse in '{spec}'")),
    }
}

/// Opens the corpus and loads its first chunk; returns the time the index took and the
/// whole time.
fn first_chunk(config: &ReaderConfig, cache: CacheMode) -> Result<(Duration, Duration), String> {
    let start = Instant::now();
    let mut options = IndexingOptions::for_config(config);
    options.cache = cache;
    let opened = build_index(config, &options).map_err(|e| e.to_string())?;
    let indexed = start.elapsed();
    let mut loader = ChunkLoader::<f32>::new(Arc::clone(&opened.index), config);
    let mut chunk = ParsedChunk::new(&config.inputs);
    loader.load(0, &mut chunk).map_err(|e| e.to_string())?;
    let elapsed = start.elapsed();
    assert!(
        !chunk.sequences.is_empty(),
        "the first chunk holds sequences"
    );
    Ok((indexed, elapsed))
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut chunk_size = 32 << 20;
    if args.first().map(String::as_str) == Some("--chunk-size") && args.len() > 1 {
        chunk_size = args[1]
            .parse()
            .map_err(|_| "bad --chunk-size".to_string())?;
        args.drain(..2);
    }
    let Some((file, specs)) = args.split_first().filter(|(_, specs)| !specs.is_empty()) else {
        return Err("usage: open_time FILE NAME:DIM:dense|sparse...".to_string());
    };
    let inputs = specs
        .iter()
        .map(|s| input(s))
        .collect::<Result<Vec<_>, _>>()?;
    let config = ReaderConfig::builder()
        .file(file.as_str())
        .inputs(inputs)
        .cache_index(true)
        .chunk_size_in_bytes(chunk_size)
        .build()
        .map_err(|e| e.to_string())?;
    // Write the caches once (as `ctf index` does); every cached open then reads them.
    let mut options = IndexingOptions::for_config(&config);
    options.cache = CacheMode::Rebuild;
    build_index(&config, &options).map_err(|e| e.to_string())?;

    let (mut scanned, mut cached, mut index_scanned, mut index_cached) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let (index, total) = first_chunk(&config, CacheMode::Off)?;
        index_scanned.push(index);
        scanned.push(total);
        let (index, total) = first_chunk(&config, CacheMode::Use)?;
        index_cached.push(index);
        cached.push(total);
    }
    let (scanned, cached) = (median(scanned), median(cached));
    let (index_scanned, index_cached) = (median(index_scanned), median(index_cached));
    println!(
        "index by scanning: {:.1} ms",
        index_scanned.as_secs_f64() * 1e3
    );
    println!(
        "index from cache: {:.1} ms",
        index_cached.as_secs_f64() * 1e3
    );
    println!(
        "first chunk without cache: {:.1} ms",
        scanned.as_secs_f64() * 1e3
    );
    println!(
        "first chunk with cache: {:.1} ms",
        cached.as_secs_f64() * 1e3
    );
    println!(
        "ratio: {:.1}",
        scanned.as_secs_f64() / cached.as_secs_f64().max(1e-9)
    );
    Ok(())
}
