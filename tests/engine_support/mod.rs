//! Helpers for the tests of the threaded engine (`tests/pipeline.rs`, `tests/faults.rs`,
//! `tests/soak.rs`): read limits, an engine with explicit thread counts, and a watchdog.
//! Each test crate uses part of it.
#![allow(dead_code)]

use std::time::Duration;

use ctf_reader::source::{MinibatchSource, PipelineOptions, ReadLimits};
use ctf_reader::ReaderConfig;

/// Read `n` full sweeps.
pub fn sweeps(n: u64) -> ReadLimits {
    ReadLimits {
        max_samples: None,
        max_sweeps: Some(n),
        epoch_size: None,
    }
}

/// A threaded engine with these thread counts, prefetch and part size, no memory budget and
/// no diagnostics.
pub fn engine(
    cfg: &ReaderConfig,
    limits: ReadLimits,
    loaders: usize,
    packers: usize,
    prefetch: usize,
    part_bytes: u64,
) -> MinibatchSource<f32> {
    let options = PipelineOptions {
        loader_threads: loaders,
        packer_threads: packers,
        prefetch,
        part_bytes,
        memory_budget: None,
        parse_while_indexing: true,
        pin_packers: false,
    };
    MinibatchSource::with_options(cfg, limits, Box::new(|_, _| {}), options).unwrap()
}

/// Runs `f` on another thread and fails if it takes more than `seconds` (a hang).
pub fn within<R: Send + 'static>(
    seconds: u64,
    what: &str,
    f: impl FnOnce() -> R + Send + 'static,
) -> R {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(f());
    });
    finished
        .recv_timeout(Duration::from_secs(seconds))
        .unwrap_or_else(|_| panic!("{what}: no result within {seconds} s (a hang or a panic)"))
}
