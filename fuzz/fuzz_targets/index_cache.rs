//! The index-cache loader (`index::cache::read_cache`) on damaged caches. At start-up the
//! target writes a small data file (fixed content and modification time) and its real
//! cache; each input then damages that cache: byte 0 picks the mode (bit 0: recompute the
//! trailing checksum so that the damage reaches the field checks; bit 1: the rest of the
//! input is the whole cache file instead of patches), the rest is a list of
//! `(offset u16 LE, byte)` patches. The loader must refuse with a reason or load sequences
//! that keep the documented invariants (inside the data file, in order, not overlapping,
//! never empty, never more samples than bytes); never a panic.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use ctf_reader::index::build::{CacheMode, IndexingOptions};
use ctf_reader::index::cache::{cache_path, read_cache, CacheKey, CacheRead, IndexFingerprint};
use ctf_reader::index::files::content_hash;
use ctf_reader::index::scan::ScannedSequence;
use ctf_reader::index::{build_index, FileStamp};
use ctf_reader::{InputConfig, ReaderConfig};
use libfuzzer_sys::fuzz_target;
use xxhash_rust::xxh3::xxh3_64;

struct Setup {
    data_size: u64,
    stamp: FileStamp,
    content_hash: u64,
    fingerprint: IndexFingerprint,
    template: Vec<u8>,
    scratch: PathBuf,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ctf-fuzz-index-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("data.ctf");
        let mut text = String::new();
        for id in 0..40u64 {
            for t in 0..1 + id % 3 {
                text.push_str(&format!("{} |a {t} 1 |s {}:2\n", id * 7, id % 10));
            }
        }
        text.push_str("|# a comment line\n18446744073709551616 |a 1\n");
        std::fs::write(&data, &text).unwrap();
        let file = std::fs::File::options().write(true).open(&data).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789))
            .unwrap();
        drop(file);
        let config = ReaderConfig::builder()
            .file(data.to_string_lossy())
            .input(InputConfig::dense("a", 2))
            .input(InputConfig::sparse("s", 10))
            .cache_index(true)
            .build()
            .unwrap();
        let mut options = IndexingOptions::for_config(&config);
        options.cache = CacheMode::Rebuild;
        let opened = build_index(&config, &options).unwrap();
        if let Some(writer) = opened.cache_writer {
            writer.wait();
        }
        let fingerprint = IndexFingerprint::of(&config);
        let template = std::fs::read(cache_path(&data, &fingerprint)).unwrap();
        let handle = std::fs::File::open(&data).unwrap();
        Setup {
            data_size: text.len() as u64,
            stamp: FileStamp::of_path(&data).unwrap(),
            content_hash: content_hash(&handle, text.len() as u64).unwrap(),
            fingerprint,
            template,
            scratch: dir.join("fuzzed.ctfidx"),
        }
    })
}

fuzz_target!(|input: &[u8]| {
    let s = setup();
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    let mut cache = if mode & 2 != 0 {
        rest.to_vec()
    } else {
        let mut cache = s.template.clone();
        for patch in rest.chunks_exact(3) {
            let at = usize::from(u16::from_le_bytes([patch[0], patch[1]]));
            if let Some(byte) = cache.get_mut(at) {
                *byte = patch[2];
            }
        }
        cache
    };
    if mode & 1 != 0 && cache.len() >= 8 {
        let body = cache.len() - 8;
        let sum = xxh3_64(&cache[..body]).to_le_bytes();
        cache[body..].copy_from_slice(&sum);
    }
    std::fs::write(&s.scratch, &cache).unwrap();
    let key = CacheKey {
        stamp: s.stamp,
        content_hash: s.content_hash,
        fingerprint: &s.fingerprint,
        key_base: 0,
    };
    let mut sequences: Vec<ScannedSequence> = Vec::new();
    let mut sink = |q: &ScannedSequence| {
        sequences.push(*q);
        Ok(())
    };
    match read_cache(&s.scratch, &key, &mut sink).expect("the sink never fails") {
        CacheRead::Loaded(_) => {
            let mut end = 0;
            let mut line = 0;
            for q in &sequences {
                assert!(
                    q.start >= end && q.end > q.start && q.end <= s.data_size,
                    "{q:?}"
                );
                assert!(q.line > line, "{q:?}");
                assert!(q.samples <= q.end - q.start, "{q:?}");
                end = q.end;
                line = q.line;
            }
        }
        CacheRead::Unusable(reason) => assert!(!reason.is_empty()),
        CacheRead::Absent | CacheRead::NotAFile => panic!("the scratch cache is a file"),
    }
});
