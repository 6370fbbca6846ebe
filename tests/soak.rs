//! Soak (README "Reliability"): 1,000 readers created, read and destroyed (the threaded
//! engine and the C ABI) with the process's threads, file descriptors and resident set
//! sampled, and 1,000 restores at random positions compared with the uninterrupted run.
//! The 20 sweeps with RSS sampled each sweep are `tests/memory.rs` (a process of its own).
//!
//! The phases run one after the other in the one test of this binary, so the process-wide
//! counts (threads, descriptors, RSS) are this test's alone.

#[allow(dead_code)]
mod cli_support;
mod engine_support;

use std::ffi::CString;
use std::path::Path;
use std::ptr;

use cli_support::Rng;
use ctf_reader::ffi::config::{ctf_config, ctf_config_free, ctf_config_from_brainscript};
use ctf_reader::ffi::minibatch::{ctf_minibatch, ctf_minibatch_free};
use ctf_reader::ffi::reader::{
    ctf_reader as CtfReader, ctf_reader_free, ctf_reader_new, ctf_reader_next,
};
use ctf_reader::ffi::status::ctf_status;
use ctf_reader::minibatch::Minibatch;
use ctf_reader::source::{MinibatchSource, ReadLimits};
use ctf_reader::timeline::checkpoint::Checkpoint;
use ctf_reader::{InputConfig, ReaderConfig};
use engine_support::{engine, sweeps};

fn write_corpus(dir: &Path, sequences: u64) -> String {
    let mut text = String::new();
    for id in 0..sequences {
        for t in 0..1 + id % 5 {
            text.push_str(&format!("{id} |x {id} {t} |y {}:{}\n", (id + t) % 7, t + 1));
        }
    }
    let path = dir.join("soak.ctf");
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn config(file: &str) -> ReaderConfig {
    ReaderConfig::builder()
        .file(file)
        .input(InputConfig::dense("x", 2))
        .input(InputConfig::sparse("y", 7))
        .chunk_size_in_bytes(500)
        .randomization_window(4)
        .trace_level(0)
        .build()
        .unwrap()
}

fn source(cfg: &ReaderConfig, limits: ReadLimits, loaders: usize) -> MinibatchSource<f32> {
    engine(cfg, limits, loaders, loaders, 2, 2048)
}

/// A line of `/proc/self/status` as a number (`VmRSS` in KiB, `Threads`).
fn status(name: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no {name} in /proc/self/status"));
    line[name.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Whether RSS is meaningful: under a sanitizer (`.ci/sanitizers.sh` sets `CTF_SANITIZER`)
/// freed memory sits in the sanitizer's quarantine, so only threads and descriptors count.
fn rss_checked() -> bool {
    std::env::var_os("CTF_SANITIZER").is_none()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Waits up to 5 s for the thread count to come back to `baseline` (threads being joined).
fn threads_back_to(baseline: u64) -> u64 {
    let start = std::time::Instant::now();
    loop {
        let now = status("Threads:");
        if now <= baseline || start.elapsed().as_secs() >= 5 {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// 1,000 threaded readers created, partly read and dropped, then 1,000 through the C ABI:
/// no thread, descriptor or memory is left behind.
fn create_destroy_cycles(dir: &Path, file: &str) {
    let cfg = config(file);
    let mut rng = Rng::new(1);
    // Warm up (allocator arenas, the first threads), then take the baseline.
    for _ in 0..20 {
        let mut s = source(&cfg, sweeps(2), 3);
        while s.next_minibatch(64).unwrap().is_some() {}
    }
    let (threads, fds, rss) = (status("Threads:"), open_fds(), status("VmRSS:"));
    let mut rss_after = Vec::new();
    for i in 0..1000u64 {
        let mut s = source(&cfg, sweeps(2), 1 + (i % 4) as usize);
        let reads = rng.below(12);
        let mut held = Vec::new();
        for _ in 0..reads {
            match s.next_minibatch(1 + rng.below(50)).unwrap() {
                Some(mb) if rng.chance(3) => held.push(mb),
                Some(_) => {}
                None => break,
            }
        }
        // Sometimes a minibatch outlives its reader.
        drop(s);
        drop(held);
        if i % 100 == 99 {
            rss_after.push(status("VmRSS:"));
        }
    }
    let now = threads_back_to(threads);
    assert!(now <= threads, "threads: {threads} before, {now} after");
    assert_eq!(open_fds(), fds, "file descriptors left open");
    let most = *rss_after.iter().max().unwrap();
    eprintln!("RSS every 100 readers (KiB, baseline {rss}): {rss_after:?}");
    assert!(
        !rss_checked() || most <= rss + 16 * 1024,
        "RSS grew from {rss} KiB to {most} KiB over 1,000 readers: {rss_after:?}"
    );

    // The C ABI: a configuration from BrainScript, reader, a few minibatches, free.
    let text = format!(
        "reader = [ file = \"{file}\" ; chunkSizeInBytes = 500 ; traceLevel = 0\n input = [ x = [ dim = 2 ; format = \"dense\" ] ; y = [ dim = 7 ; format = \"sparse\" ] ] ]\n"
    );
    let text = CString::new(text).unwrap();
    let name = CString::new(dir.join("soak.cntk").to_string_lossy().into_owned()).unwrap();
    let mut config: *mut ctf_config = ptr::null_mut();
    // SAFETY: valid NUL-terminated strings and out-pointer; the section is NULL (the default).
    let status_code = unsafe {
        ctf_config_from_brainscript(text.as_ptr(), name.as_ptr(), ptr::null(), &mut config)
    };
    assert_eq!(status_code, ctf_status::Ok);
    let (threads, fds, rss) = (status("Threads:"), open_fds(), status("VmRSS:"));
    for i in 0..1000u64 {
        let mut reader: *mut CtfReader = ptr::null_mut();
        // SAFETY: `config` is a live configuration; `reader` a valid out-pointer.
        let st = unsafe { ctf_reader_new(config, &mut reader) };
        assert_eq!(st, ctf_status::Ok);
        for _ in 0..i % 7 {
            let mut mb: *mut ctf_minibatch = ptr::null_mut();
            // SAFETY: `reader` is live; `mb` a valid out-pointer, freed below.
            let st = unsafe { ctf_reader_next(reader, 16, &mut mb) };
            if st != ctf_status::Ok {
                assert_eq!(st, ctf_status::EndOfData);
                break;
            }
            // SAFETY: `mb` was handed out by ctf_reader_next and is freed once.
            unsafe { ctf_minibatch_free(mb) };
        }
        // SAFETY: `reader` is live and freed once.
        unsafe { ctf_reader_free(reader) };
    }
    // SAFETY: `config` is live and freed once.
    unsafe { ctf_config_free(config) };
    let now = threads_back_to(threads);
    assert!(
        now <= threads,
        "C ABI: threads {threads} before, {now} after"
    );
    assert_eq!(open_fds(), fds, "C ABI: file descriptors left open");
    let after = status("VmRSS:");
    assert!(
        !rss_checked() || after <= rss + 16 * 1024,
        "C ABI: RSS grew from {rss} KiB to {after} KiB over 1,000 readers"
    );
}

/// 1,000 restores at random positions of a three-sweep run (on the same reader, and every
/// tenth on a new reader with another thread count), each followed by 1–4 minibatches of
/// the run's size, compared with what the uninterrupted run gave after that position.
fn random_restores(file: &str) {
    let cfg = config(file);
    let size = 24;
    let mut run = source(&cfg, sweeps(3), 2);
    // After minibatch i: its checkpoint, and the minibatches that follow it.
    let mut checkpoints: Vec<Checkpoint> = vec![run.checkpoint()];
    let mut batches: Vec<Minibatch<f32>> = Vec::new();
    while let Some(mb) = run.next_minibatch(size).unwrap() {
        batches.push(mb.into_inner());
        checkpoints.push(run.checkpoint());
    }
    assert!(batches.len() > 100, "{} minibatches", batches.len());
    let mut rng = Rng::new(7);
    let mut reader = source(&cfg, sweeps(3), 2);
    let mut compared = 0;
    for n in 0..1000u64 {
        if n % 10 == 9 {
            reader = source(&cfg, sweeps(3), 1 + (n % 4) as usize);
        }
        let at = rng.below(checkpoints.len() as u64) as usize;
        // The token form half of the time, as a trainer saving it as text would.
        let checkpoint = if n % 2 == 0 {
            checkpoints[at]
        } else {
            Checkpoint::from_token(&checkpoints[at].to_token()).unwrap()
        };
        reader.restore(&checkpoint).unwrap();
        for k in 0..1 + rng.below(4) as usize {
            let got = reader.next_minibatch(size).unwrap().map(|m| m.into_inner());
            assert_eq!(
                got.as_ref(),
                batches.get(at + k),
                "restore {n} at minibatch {at}, then minibatch {k}"
            );
            compared += 1;
        }
    }
    eprintln!("1,000 restores, {compared} minibatches compared");
}

#[test]
fn soak() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_corpus(dir.path(), 400);
    let start = std::time::Instant::now();
    create_destroy_cycles(dir.path(), &file);
    eprintln!("create/destroy: {:?}", start.elapsed());
    let start = std::time::Instant::now();
    random_restores(&file);
    eprintln!("restores: {:?}", start.elapsed());
}
