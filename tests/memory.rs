//! Memory over time (and the sweep soak of README "Reliability"): the resident set of a
//! process reading twenty randomized sweeps, sampled after each, stays flat (no growth per
//! sweep from the cache, the pool, the queues or the sweep orders). This is the only test of
//! its binary, so the process's RSS is this reader's.

use ctf_reader::source::{MinibatchSource, ReadLimits};
use ctf_reader::{InputConfig, ReaderConfig};

/// The resident set of this process in KiB (Linux `/proc`), if known.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn rss_is_flat_over_twenty_sweeps() {
    if rss_kib().is_none() {
        eprintln!("note: no /proc/self/status here, so RSS is not measured");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense.ctf");
    // About 12 MB: 6,000 lines of 256 small integers and a one-hot label.
    let mut text = String::new();
    for line in 0..6000u32 {
        text.push_str("|labels ");
        for k in 0..10 {
            text.push_str(if k == line % 10 { "1 " } else { "0 " });
        }
        text.push_str("|features");
        for k in 0..256u32 {
            text.push_str(&format!(" {}", (line * 31 + k * 7) % 256));
        }
        text.push('\n');
    }
    std::fs::write(&path, &text).unwrap();
    let config = ReaderConfig::builder()
        .file(path.to_string_lossy())
        .input(InputConfig::dense("labels", 10))
        .input(InputConfig::dense("features", 256))
        .chunk_size_in_bytes(1 << 20)
        .randomization_window(2)
        .build()
        .unwrap();
    const SWEEPS: u64 = 20;
    let limits = ReadLimits {
        max_sweeps: Some(SWEEPS),
        ..ReadLimits::default()
    };
    let mut source = MinibatchSource::<f32>::new(&config, limits, Box::new(|_, _| {})).unwrap();
    let mut after_sweep = Vec::new();
    let mut sum = 0.0f64;
    while let Some(mb) = source.next_minibatch(256).unwrap() {
        sum += mb.streams[0]
            .values
            .iter()
            .map(|&v| f64::from(v))
            .sum::<f64>();
        if mb.sweep_end {
            after_sweep.push(rss_kib().unwrap());
        }
    }
    assert_eq!(after_sweep.len() as u64, SWEEPS);
    // Each line has exactly one label set to 1.
    assert_eq!(sum, SWEEPS as f64 * 6000.0);
    // After the first two sweeps have filled the cache and the pool, the resident set does
    // not grow: at most 8 MiB above its level after sweep 2 (the corpus is 12 MB, so one
    // sweep's data kept by mistake would show).
    let settled = after_sweep[1];
    let most = *after_sweep[2..].iter().max().unwrap();
    eprintln!("RSS after each sweep (KiB): {after_sweep:?}");
    assert!(
        most <= settled + 8 * 1024,
        "RSS grew from {settled} KiB after sweep 2 to {most} KiB: {after_sweep:?}"
    );
    // No slow leak either: the last five sweeps are no higher than sweeps 3-7 plus 2 MiB
    // (a leak of 100 KiB per sweep, 0.8% of the corpus, would show over 13 sweeps).
    let early = *after_sweep[2..7].iter().max().unwrap();
    let late = *after_sweep[15..].iter().min().unwrap();
    assert!(
        late <= early + 2 * 1024,
        "RSS creeps up: {early} KiB in sweeps 3-7, {late} KiB at least in sweeps 16-20: {after_sweep:?}"
    );
}
