//! `ctf index`: scans every data file, writes its index cache next to it (synchronously,
//! whatever `cacheIndex` says) and prints an indexing summary on stdout.
//!
//! For a composite reader, every deserializer's files are indexed and cached; the summary
//! counts the first deserializer's sequences (the joined ones), every input's samples in its
//! own files, and per joined deserializer the sequences no primary key reaches.
//!
//! An index cache that cannot be written is a warning (`FILE: warning: MESSAGE` on stderr),
//! not an error; a file that cannot be indexed (missing, empty, UTF-16, ...) is exit 1.

use std::time::Instant;

use ctf_reader::index::build::CacheMode;
use ctf_reader::index::{build_index, CorpusIndex, IndexingOptions};

use crate::cli::IndexArgs;
use crate::progress::{self, Progress};
use crate::{print_lines, Failure};

/// Runs `ctf index`.
pub fn run(args: &IndexArgs) -> Result<(), Failure> {
    let config = args.data.reader_config()?;
    let progress = Progress::new("indexing", progress::bar_total(&config));
    let mut options = IndexingOptions::for_config(&config);
    options.cache = CacheMode::Rebuild;
    options.progress = progress.sink();
    if let Some(threads) = args.threads {
        options.scan_threads = threads;
    }
    if config.trace_level >= 1 {
        options.on_warning = progress.warning_sink();
    }
    let start = Instant::now();
    let built = build_index(&config, &options);
    let seconds = start.elapsed().as_secs_f64();
    progress.finish();
    let opened = built.map_err(|e| Failure::Data(e.to_string()))?;
    let index = &opened.index;

    // Each deserializer's own index: the first one's, then the joined ones'.
    let indexes: Vec<&CorpusIndex> = std::iter::once(&**index)
        .chain(index.joined.iter().map(|j| &*j.index))
        .collect();
    let sequences = index.sequences.iter().filter(|e| e.samples > 0).count();
    let mut lines = vec![
        format!("files: {}", index.data_file_count()),
        format!("sequences: {sequences}"),
    ];
    for (d, own) in indexes.iter().enumerate() {
        let inputs = config.deserializer_inputs(d);
        for (i, input) in config.inputs[inputs].iter().enumerate() {
            let samples: u64 = own
                .files
                .iter()
                .map(|f| f.input_lines.get(i).copied().unwrap_or(0))
                .sum();
            lines.push(format!("samples {}: {samples}", input.name));
        }
    }
    for joined in &index.joined {
        lines.push(format!(
            "unmatched sequences in {}: {}",
            joined.name,
            joined.unmatched + joined.repeated
        ));
    }
    // A scan never takes zero time, but the rate must stay finite whatever the clock says.
    let rate = index.data_bytes() as f64 / seconds.max(1e-9) / 1e9;
    lines.extend([
        format!("chunks: {}", index.chunks.len()),
        format!("bytes: {}", index.data_bytes()),
        format!("seconds: {seconds:.3}"),
        format!("GB/s: {rate:.3}"),
        format!("caches written: {}", opened.caches_written),
    ]);
    print_lines(&lines)
}
