//! The index cache (`cacheIndex = true`) through the public API: a fresh cache is written in
//! the background and then reused, giving the very index a scan gives (also with another
//! chunk size); a stale, corrupt or foreign cache is a warning and a rescan, never an error or
//! a panic; other indexing options get their own cache; a cache that cannot be written is a
//! warning; `CacheMode::Rebuild` writes synchronously; two `ctf index` processes racing on one
//! cache leave a valid one; dropping the index finishes the writes; and a cached index lets
//! the first chunk be read without scanning the file.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ctf_reader::chunks::{ChunkLoader, LoadError, ParsedChunk};
use ctf_reader::index::build::{
    default_scan_threads, CacheMode, IndexSource, IndexingOptions, OpenedIndex, SCAN_BLOCK_SIZE,
};
use ctf_reader::index::cache::{cache_path, IndexFingerprint};
use ctf_reader::index::chunking::IndexLimits;
use ctf_reader::index::{build_index, CorpusIndex, IndexWarning, KeyMode};
use ctf_reader::{InputConfig, ReaderConfig};

use IndexSource::{Cache, Scanned};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

type Warnings = Arc<Mutex<Vec<IndexWarning>>>;

const NO_WARNINGS: [IndexWarning; 0] = [];

/// Options with the given cache mode and a sink recording every warning.
fn options(cache: CacheMode) -> (IndexingOptions, Warnings) {
    let warnings: Warnings = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&warnings);
    let options = IndexingOptions {
        cache,
        on_warning: Arc::new(move |w: &IndexWarning| sink.lock().unwrap().push(w.clone())),
        progress: None,
        limits: IndexLimits::default(),
        scan_threads: default_scan_threads(),
        scan_block_bytes: SCAN_BLOCK_SIZE,
    };
    (options, warnings)
}

/// Builds the index; the warnings so far are read from the returned sink.
fn build(config: &ReaderConfig, cache: CacheMode) -> (OpenedIndex, Warnings) {
    let (options, warnings) = options(cache);
    let opened = build_index(config, &options).expect("the corpus indexes");
    (opened, warnings)
}

fn warnings_of(sink: &Warnings) -> Vec<IndexWarning> {
    sink.lock().unwrap().clone()
}

/// The index a plain scan gives (no cache read or written, no warning).
fn scanned(config: &ReaderConfig) -> CorpusIndex {
    let (opened, warnings) = build(config, CacheMode::Off);
    assert!(opened.sources.iter().all(|s| *s == Scanned));
    assert!(opened.cache_writer.is_none());
    assert_eq!(warnings_of(&warnings), NO_WARNINGS);
    opened.index.as_ref().clone()
}

/// Builds with `CacheMode::Use`, waits for the cache writer, and returns the index, the
/// sources and every warning (those of the writer included).
fn build_and_wait(
    config: &ReaderConfig,
) -> (Arc<CorpusIndex>, Vec<IndexSource>, Vec<IndexWarning>) {
    let (opened, warnings) = build(config, CacheMode::Use);
    let all_cached = opened.sources.iter().all(|s| *s == Cache);
    assert_eq!(
        opened.cache_writer.is_some(),
        !all_cached,
        "a writer exactly when a file was scanned: {:?}",
        opened.sources
    );
    if let Some(writer) = opened.cache_writer {
        writer.wait();
    }
    (opened.index, opened.sources, warnings_of(&warnings))
}

/// A `CacheMode::Use` build that must read every file from its cache, silently.
fn cached(config: &ReaderConfig) -> Arc<CorpusIndex> {
    let (opened, warnings) = build(config, CacheMode::Use);
    assert_eq!(opened.sources, vec![Cache; config.files.len()]);
    assert!(opened.cache_writer.is_none());
    assert_eq!(warnings_of(&warnings), NO_WARNINGS);
    opened.index
}

fn config(files: &[PathBuf], inputs: &[InputConfig], chunk_size: u64, skip: bool) -> ReaderConfig {
    ReaderConfig::builder()
        .files(files.iter().map(|p| p.to_string_lossy().into_owned()))
        .inputs(inputs.iter().cloned())
        .chunk_size_in_bytes(chunk_size)
        .skip_sequence_ids(skip)
        .build()
        .expect("valid config")
}

fn ab_inputs() -> Vec<InputConfig> {
    vec![InputConfig::dense("a", 1), InputConfig::sparse("b", 10)]
}

/// The cache file of file `file` of the configuration.
fn cache_of(config: &ReaderConfig, file: usize) -> PathBuf {
    cache_path(
        Path::new(&config.files[file]),
        &IndexFingerprint::of(config),
    )
}

/// Names of the temporary files of cache writers left in `dir`.
fn temp_files(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".tmp."))
        .collect()
}

/// Names of the entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Every chunk of the index, loaded and parsed.
fn load_all(index: &Arc<CorpusIndex>, config: &ReaderConfig) -> Vec<ParsedChunk<f64>> {
    let mut loader = ChunkLoader::<f64>::new(Arc::clone(index), config);
    (0..index.chunks.len() as u32)
        .map(|id| {
            let mut chunk = ParsedChunk::new(&config.inputs);
            loader
                .load(id, &mut chunk)
                .unwrap_or_else(|e| panic!("chunk {id}: {e}"));
            chunk
        })
        .collect()
}

/// An id-mode corpus of `n` sequences of 1 to 3 lines, with comments, blank lines, a line
/// without a configured input, an id beyond 64 bits and a repeated id (non-adjacent).
fn id_text(n: usize) -> String {
    let mut text = String::new();
    for i in 0..n {
        let id = match i {
            7 => "99999999999999999999".to_string(),
            20 => "3".to_string(),
            _ => i.to_string(),
        };
        for k in 0..(i % 3 + 1) {
            text.push_str(&format!("{id} |a {i}.{k} |b {k}:1\n"));
        }
        match i % 11 {
            4 => text.push('\n'),
            5 => text.push_str(&format!("{id} |# a comment\n")),
            6 => text.push_str(&format!("{id} |zz 1\n")),
            _ => {}
        }
    }
    text
}

/// A line-mode file (no ids) of `n` lines, starting at value `from`.
fn line_text(n: usize, from: usize) -> String {
    (from..from + n)
        .map(|i| match i % 9 {
            3 => "|# only a comment\n".to_string(),
            5 => "\n".to_string(),
            _ => format!("|a {i} |b {}:2\n", i % 10),
        })
        .collect()
}

fn write_data(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).unwrap();
    path
}

fn set_mtime(path: &Path, time: SystemTime) {
    let file = OpenOptions::new().write(true).open(path).unwrap();
    file.set_modified(time).unwrap();
}

/// A `CacheMode::Use` build must ignore the one cache `config`'s file 0 has, with a warning
/// naming it and holding `reason`, rescan, give the scan's index, and write a cache that the
/// next build uses. Returns the rescanned index.
fn assert_ignored_and_rewritten(config: &ReaderConfig, reason: &str) -> Arc<CorpusIndex> {
    let cache = cache_of(config, 0);
    let (index, sources, warnings) = build_and_wait(config);
    assert_eq!(sources[0], Scanned);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].file, cache.display().to_string());
    let message = &warnings[0].message;
    assert!(message.contains("ignoring the index cache"), "{message}");
    assert!(message.contains(reason), "{message}");
    assert_eq!(*index, scanned(config));
    let again = cached(config);
    assert_eq!(*again, *index);
    assert_eq!(load_all(&again, config), load_all(&index, config));
    index
}

// ---------------------------------------------------------------------------------------------
// 1. A fresh cache
// ---------------------------------------------------------------------------------------------

#[test]
fn a_fresh_cache_is_written_then_gives_the_same_index_in_id_mode() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path(), "d.ctf", &id_text(120));
    let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 256, false);
    let cache = cache_path(&data, &IndexFingerprint::of(&cfg));

    let (first, warnings) = build(&cfg, CacheMode::Use);
    assert_eq!(first.sources, [Scanned]);
    assert_eq!(first.caches_written, 0);
    first.cache_writer.expect("a cache writer").wait();
    assert_eq!(warnings_of(&warnings), NO_WARNINGS);
    assert!(cache.is_file(), "no cache at {}", cache.display());
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());
    assert_eq!(
        entries(dir.path()),
        ["d.ctf", cache.file_name().unwrap().to_str().unwrap()]
    );

    let second = cached(&cfg);
    assert!(*first.index == *second);
    // The corpus exercises what the cache must carry: several chunks, ids beyond 64 bits (the
    // two lines of sequence 7, each its own sequence) and a repeated id.
    assert!(second.chunks.len() > 5);
    assert_eq!(second.overflowing_ids, [7, 8]);
    assert_eq!(second.repeated.len(), 1);
    assert_eq!(second.files[0].mode, KeyMode::Ids);
    assert_eq!(load_all(&first.index, &cfg), load_all(&second, &cfg));
    // Reading the cache again changes nothing.
    assert_eq!(*cached(&cfg), *second);
}

#[test]
fn a_fresh_cache_is_written_then_gives_the_same_index_in_line_mode_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        write_data(dir.path(), "p0.ctf", &line_text(150, 0)),
        write_data(dir.path(), "p1.ctf", &line_text(90, 1000)),
    ];
    let cfg = config(&files, &ab_inputs(), 300, false);

    let (first, sources, warnings) = build_and_wait(&cfg);
    assert_eq!(sources, [Scanned, Scanned]);
    assert_eq!(warnings, NO_WARNINGS);
    for f in 0..2 {
        assert!(cache_of(&cfg, f).is_file());
    }
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());

    let second = cached(&cfg);
    assert!(*first == *second);
    assert_eq!(second.files[1].key_base, 150);
    assert!(second.files.iter().all(|f| f.mode == KeyMode::Lines));
    // Keys are corpus-wide line numbers: the second file's continue after the first's.
    let first_of_second = second.file_sequences(1).start as usize;
    assert_eq!(second.sequences[first_of_second].key, 150);
    assert_eq!(load_all(&first, &cfg), load_all(&second, &cfg));
}

#[test]
fn a_cache_serves_another_chunk_size() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        write_data(dir.path(), "d.ctf", &id_text(120)),
        write_data(dir.path(), "l.ctf", &line_text(100, 0)),
    ];
    let cfg = config(&files, &ab_inputs(), 256, false);
    let (first, _, warnings) = build_and_wait(&cfg);
    assert_eq!(warnings, NO_WARNINGS);

    for chunk_size in [0, 100, 1000, 1 << 30] {
        let other = config(&files, &ab_inputs(), chunk_size, false);
        // The chunk size is not an indexing option of the cache: the same cache is used.
        assert_eq!(cache_of(&other, 0), cache_of(&cfg, 0));
        let from_cache = cached(&other);
        let fresh = scanned(&other);
        assert!(*from_cache == fresh, "chunk size {chunk_size}");
        assert_ne!(from_cache.chunks.len(), first.chunks.len());
        assert_eq!(from_cache.sequences.len(), first.sequences.len());
        assert_eq!(
            load_all(&from_cache, &other),
            load_all(&Arc::new(fresh), &other)
        );
    }
}

#[test]
fn a_copied_directory_keeps_its_caches() {
    // Device and inode are not part of the cache: a copy with the same size, time and content
    // reuses it.
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path(), "d.ctf", &id_text(40));
    let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 256, false);
    build_and_wait(&cfg);

    let copy = tempfile::tempdir().unwrap();
    for name in entries(dir.path()) {
        let (from, to) = (dir.path().join(&name), copy.path().join(&name));
        fs::copy(&from, &to).unwrap();
        set_mtime(&to, fs::metadata(&from).unwrap().modified().unwrap());
    }
    let copied = config(&[copy.path().join("d.ctf")], &ab_inputs(), 256, false);
    let index = cached(&copied);
    assert_eq!(*index, scanned(&copied));
}

// ---------------------------------------------------------------------------------------------
// 2. A stale cache
// ---------------------------------------------------------------------------------------------

#[test]
fn a_cache_of_a_longer_or_shorter_file_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path(), "d.ctf", &id_text(60));
    let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 256, false);
    let (before, _, _) = build_and_wait(&cfg);

    let mut f = OpenOptions::new().append(true).open(&data).unwrap();
    f.write_all(b"1000 |a 5\n").unwrap();
    drop(f);
    let after = assert_ignored_and_rewritten(&cfg, "size");
    assert_eq!(after.sequences.len(), before.sequences.len() + 1);

    // And shorter again.
    let text = fs::read(&data).unwrap();
    fs::write(&data, &text[..text.len() - 10]).unwrap();
    let shorter = assert_ignored_and_rewritten(&cfg, "size");
    assert_eq!(shorter.sequences, before.sequences);
}

#[test]
fn a_cache_of_a_file_with_another_modification_time_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let text = id_text(60);
    let data = write_data(dir.path(), "d.ctf", &text);
    let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 256, false);
    let (before, _, _) = build_and_wait(&cfg);
    let mtime = fs::metadata(&data).unwrap().modified().unwrap();

    // The same bytes, written again, one second later.
    fs::write(&data, &text).unwrap();
    set_mtime(&data, mtime + Duration::from_secs(1));
    assert_eq!(fs::metadata(&data).unwrap().len(), text.len() as u64);
    let after = assert_ignored_and_rewritten(&cfg, "modification time");
    assert_eq!(after.sequences, before.sequences);
    assert_ne!(after.files[0].stamp, before.files[0].stamp);
}

#[test]
fn a_cache_of_a_file_with_other_content_of_the_same_size_and_time_is_ignored() {
    // Small (entirely hashed) and large (more than 128 KiB: only the ends hashed) files; the
    // change is in the first 64 KiB, and moves a sequence boundary.
    for n in [60, 20_000] {
        let dir = tempfile::tempdir().unwrap();
        let text = id_text(n);
        let data = write_data(dir.path(), "d.ctf", &text);
        let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 4096, false);
        let (before, _, _) = build_and_wait(&cfg);
        let meta = fs::metadata(&data).unwrap();

        // Sequence 2 has 3 lines `2 |a ...`: make its last line start sequence 9 instead.
        let changed = text.replacen("2 |a 2.2", "9 |a 2.2", 1);
        assert_ne!(changed, text);
        assert_eq!(changed.len(), text.len());
        fs::write(&data, &changed).unwrap();
        set_mtime(&data, meta.modified().unwrap());
        let now = fs::metadata(&data).unwrap();
        assert_eq!(
            (now.len(), now.mtime(), now.mtime_nsec()),
            (meta.len(), meta.mtime(), meta.mtime_nsec())
        );
        let after = assert_ignored_and_rewritten(&cfg, "content");
        assert_eq!(after.sequences.len(), before.sequences.len() + 1, "{n}");
        assert_ne!(after.files[0].content_hash, before.files[0].content_hash);
    }
}

/// A rewrite that keeps the size, the modification time and both ends (here the middle of
/// a file over 128 KiB) passes the cache's checks. The read that finds the sequences
/// changed fails, and removes the cache, so that the next build scans the file again
/// instead of failing every later read the same way.
#[test]
fn a_stale_cache_that_passes_the_checks_is_removed_by_the_read_that_finds_it() {
    let dir = tempfile::tempdir().unwrap();
    let text = id_text(20_000);
    assert!(text.len() > 3 * 64 * 1024);
    let data = write_data(dir.path(), "d.ctf", &text);
    let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 4096, false);
    let cache = cache_of(&cfg, 0);
    build_and_wait(&cfg);
    assert!(cache.is_file());
    let meta = fs::metadata(&data).unwrap();

    // Change the id on the first line after the middle of the file.
    let line = text[text.len() / 2..].find('\n').unwrap() + text.len() / 2 + 1;
    let mut changed = text.clone().into_bytes();
    changed[line] = if changed[line] == b'1' { b'2' } else { b'1' };
    fs::write(&data, &changed).unwrap();
    set_mtime(&data, meta.modified().unwrap());
    let now = fs::metadata(&data).unwrap();
    assert_eq!(
        (now.len(), now.mtime_nsec(), now.ino()),
        (meta.len(), meta.mtime_nsec(), meta.ino())
    );

    let stale = cached(&cfg);
    let mut loader = ChunkLoader::<f64>::new(Arc::clone(&stale), &cfg);
    let mut chunk = ParsedChunk::new(&cfg.inputs);
    let failure = (0..stale.chunks.len() as u32)
        .find_map(|id| loader.load(id, &mut chunk).err())
        .expect("a read finds the change");
    let LoadError::Changed { detail, .. } = &failure else {
        panic!("{failure}")
    };
    assert!(
        detail.contains(&format!(
            "its index cache {} was removed, so the next read indexes it again",
            cache.display()
        )),
        "{failure}"
    );
    assert!(!cache.exists());

    let (index, sources, _) = build_and_wait(&cfg);
    assert_eq!(sources, [Scanned]);
    assert_eq!(*index, scanned(&cfg));
    load_all(&index, &cfg);
}

#[test]
fn in_line_mode_a_stale_first_file_shifts_the_keys_of_the_cached_second() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        write_data(dir.path(), "p0.ctf", &line_text(50, 0)),
        write_data(dir.path(), "p1.ctf", &line_text(50, 504)),
    ];
    let cfg = config(&files, &ab_inputs(), 200, false);
    let (before, _, _) = build_and_wait(&cfg);
    let mut f = OpenOptions::new().append(true).open(&files[0]).unwrap();
    f.write_all(b"|a 7\n|a 8\n").unwrap();
    drop(f);

    let (index, sources, warnings) = build_and_wait(&cfg);
    assert_eq!(sources, [Scanned, Cache]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].message.contains("ignoring the index cache"));
    assert_eq!(warnings[0].file, cache_of(&cfg, 0).display().to_string());
    assert_eq!(*index, scanned(&cfg));
    assert_eq!(index.files[1].key_base, before.files[1].key_base + 2);
    let second = index.file_sequences(1).start as usize;
    assert_eq!(index.sequences[second].key, 52);
    assert_eq!(
        load_all(&index, &cfg),
        load_all(&Arc::new(scanned(&cfg)), &cfg)
    );
    cached(&cfg);
}

// ---------------------------------------------------------------------------------------------
// 3. A corrupt cache
// ---------------------------------------------------------------------------------------------

#[test]
fn a_corrupt_cache_is_a_warning_and_a_rescan() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path(), "d.ctf", &id_text(80));
    let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 256, false);
    let (good, _, _) = build_and_wait(&cfg);
    let cache = cache_of(&cfg, 0);
    let original = fs::read(&cache).unwrap();
    let n = original.len();
    assert!(n > 200, "{n}");

    // A cache of another data file (same options), under this file's cache name.
    let other = config(
        &[write_data(dir.path(), "other.ctf", &id_text(30))],
        &ab_inputs(),
        256,
        false,
    );
    build_and_wait(&other);
    let foreign = fs::read(cache_of(&other, 0)).unwrap();

    let mut flipped = original.clone();
    flipped[n / 2] ^= 0x20;
    let mut version = original.clone();
    version[8..12].copy_from_slice(&99u32.to_le_bytes());
    let garbage: Vec<u8> = (0..100u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated to half", original[..n / 2].to_vec(), "truncated"),
        ("one byte flipped", flipped, ""),
        ("version 99", version, "version"),
        ("100 bytes of garbage", garbage, ""),
        ("empty", Vec::new(), "truncated"),
        (
            "another file's cache",
            foreign,
            "different version of the data file",
        ),
    ];
    for (what, bytes, reason) in cases {
        fs::write(&cache, &bytes).unwrap();
        let index = assert_ignored_and_rewritten(&cfg, reason);
        assert_eq!(*index, *good, "{what}");
        // The rewritten cache is the one first written (the data did not change).
        assert_eq!(fs::read(&cache).unwrap(), original, "{what}");
        assert_eq!(temp_files(dir.path()), Vec::<String>::new(), "{what}");
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Other indexing options
// ---------------------------------------------------------------------------------------------

#[test]
fn other_indexing_options_get_their_own_cache() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path(), "d.ctf", &id_text(60));
    let files = [data.clone()];
    let base = config(&files, &ab_inputs(), 256, false);
    build_and_wait(&base);
    let first_cache = cache_of(&base, 0);
    let first_bytes = fs::read(&first_cache).unwrap();
    let first_ino = fs::metadata(&first_cache).unwrap().ino();

    let others = [
        (
            "input subset",
            config(&files, &[InputConfig::dense("a", 1)], 256, false),
        ),
        (
            "other alias",
            config(
                &files,
                &[
                    InputConfig::dense("a", 1),
                    InputConfig::sparse("b", 10).with_alias("c"),
                ],
                256,
                false,
            ),
        ),
        ("skipSequenceIds", config(&files, &ab_inputs(), 256, true)),
        (
            "definesMBSize",
            config(
                &files,
                &[
                    InputConfig::dense("a", 1),
                    InputConfig::sparse("b", 10).defining_mb_size(),
                ],
                256,
                false,
            ),
        ),
    ];
    let mut caches = vec![first_cache.clone()];
    for (what, cfg) in &others {
        let cache = cache_of(cfg, 0);
        assert!(!caches.contains(&cache), "{what}: {}", cache.display());
        let (index, sources, warnings) = build_and_wait(cfg);
        // No cache of these options yet: a scan, silently.
        assert_eq!(sources, [Scanned], "{what}");
        assert_eq!(warnings, NO_WARNINGS, "{what}");
        assert_eq!(*index, scanned(cfg), "{what}");
        assert!(cache.is_file(), "{what}");
        caches.push(cache);
        // The first cache is neither used nor touched.
        assert_eq!(fs::read(&first_cache).unwrap(), first_bytes, "{what}");
        assert_eq!(
            fs::metadata(&first_cache).unwrap().ino(),
            first_ino,
            "{what}"
        );
    }
    // Every cache now lies next to the data, and each configuration reads its own.
    let mut expected: Vec<String> = caches
        .iter()
        .map(|c| c.file_name().unwrap().to_string_lossy().into_owned())
        .chain(["d.ctf".to_string()])
        .collect();
    expected.sort();
    assert_eq!(entries(dir.path()), expected);
    assert_eq!(*cached(&base), scanned(&base));
    for (what, cfg) in &others {
        assert_eq!(*cached(cfg), scanned(cfg), "{what}");
    }
    // The skipSequenceIds index differs (one sequence per line): sharing a cache would be
    // wrong.
    assert_ne!(scanned(&others[2].1).sequences, scanned(&base).sequences);
}

#[test]
fn input_names_and_dimensions_do_not_matter_to_the_cache() {
    // Only aliases are indexing options; the name and dimension of an input are not.
    let dir = tempfile::tempdir().unwrap();
    let files = [write_data(dir.path(), "d.ctf", &id_text(30))];
    let base = config(&files, &ab_inputs(), 256, false);
    build_and_wait(&base);
    let renamed = config(
        &files,
        &[
            InputConfig::dense("features", 1).with_alias("a"),
            InputConfig::sparse("labels", 10).with_alias("b"),
        ],
        256,
        false,
    );
    assert_eq!(cache_of(&renamed, 0), cache_of(&base, 0));
    assert_eq!(*cached(&renamed), scanned(&renamed));
}

// ---------------------------------------------------------------------------------------------
// 5. A cache that cannot be written
// ---------------------------------------------------------------------------------------------

/// Whether a directory without write permission can be written to (root can).
fn permissions_are_bypassed(dir: &Path) -> bool {
    let probe = dir.join("probe");
    fs::create_dir(&probe).unwrap();
    fs::set_permissions(&probe, fs::Permissions::from_mode(0o555)).unwrap();
    let written = File::create(probe.join("x")).is_ok();
    fs::set_permissions(&probe, fs::Permissions::from_mode(0o755)).unwrap();
    fs::remove_dir_all(&probe).unwrap();
    written
}

fn assert_cannot_write(warnings: &[IndexWarning], cache: &Path) {
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].message.contains("cannot write the index cache"),
        "{:?}",
        warnings[0]
    );
    assert_eq!(warnings[0].file, cache.display().to_string());
}

#[test]
fn a_directory_in_place_of_the_cache_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path(), "d.ctf", &id_text(60));
    let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 256, false);
    let cache = cache_of(&cfg, 0);
    // A non-empty directory at the cache's path: no rename can replace it, root or not.
    fs::create_dir(&cache).unwrap();
    fs::write(cache.join("keep"), "x").unwrap();

    // Reading leaves it alone, with one warning that says so, and writes nothing.
    let (opened, warnings) = build(&cfg, CacheMode::Use);
    assert_eq!(opened.sources, [Scanned]);
    assert_eq!(*opened.index, scanned(&cfg));
    assert!(opened.cache_writer.is_none(), "no cache is written");
    let all = warnings_of(&warnings);
    assert_eq!(all.len(), 1, "{all:?}");
    assert!(
        all[0]
            .message
            .contains("not a regular file, so it is left alone"),
        "{all:?}"
    );
    assert!(cache.join("keep").is_file());
    assert_eq!(
        load_all(&opened.index, &cfg).len(),
        opened.index.chunks.len()
    );

    // Rebuild reports it before returning.
    let (opened, warnings) = build(&cfg, CacheMode::Rebuild);
    assert_eq!(opened.sources, [Scanned]);
    assert_eq!(opened.caches_written, 0);
    assert!(opened.cache_writer.is_none());
    assert_cannot_write(&warnings_of(&warnings), &cache);
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());
}

#[test]
fn a_read_only_directory_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    if permissions_are_bypassed(dir.path()) {
        eprintln!("skipped: running with permission checks bypassed (root)");
        return;
    }
    let data = write_data(dir.path(), "d.ctf", &id_text(60));
    let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 256, false);
    let cache = cache_of(&cfg, 0);
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o555)).unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let (index, sources, warnings) = build_and_wait(&cfg);
        assert_eq!(sources, [Scanned]);
        assert_eq!(*index, scanned(&cfg));
        assert_cannot_write(&warnings, &cache);
        assert_eq!(entries(dir.path()), ["d.ctf"]);
    }));
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Rebuild
// ---------------------------------------------------------------------------------------------

#[test]
fn rebuild_ignores_valid_caches_and_writes_before_returning() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        write_data(dir.path(), "d.ctf", &id_text(50)),
        write_data(dir.path(), "l.ctf", &line_text(40, 0)),
    ];
    let cfg = config(&files, &ab_inputs(), 256, false);

    // No caches yet: written before build_index returns.
    let (opened, warnings) = build(&cfg, CacheMode::Rebuild);
    assert_eq!(opened.sources, [Scanned, Scanned]);
    assert_eq!(opened.caches_written, 2);
    assert!(opened.cache_writer.is_none());
    assert_eq!(warnings_of(&warnings), NO_WARNINGS);
    for f in 0..2 {
        assert!(cache_of(&cfg, f).is_file());
    }
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());
    assert_eq!(*opened.index, scanned(&cfg));
    let bytes: Vec<Vec<u8>> = (0..2)
        .map(|f| fs::read(cache_of(&cfg, f)).unwrap())
        .collect();
    let inodes: Vec<u64> = (0..2)
        .map(|f| fs::metadata(cache_of(&cfg, f)).unwrap().ino())
        .collect();
    assert_eq!(*cached(&cfg), *opened.index);

    // Valid caches: not read, replaced.
    let (again, warnings) = build(&cfg, CacheMode::Rebuild);
    assert_eq!(again.sources, [Scanned, Scanned]);
    assert_eq!(again.caches_written, 2);
    assert!(again.cache_writer.is_none());
    assert_eq!(warnings_of(&warnings), NO_WARNINGS);
    for f in 0..2 {
        assert_ne!(fs::metadata(cache_of(&cfg, f)).unwrap().ino(), inodes[f]);
        assert_eq!(fs::read(cache_of(&cfg, f)).unwrap(), bytes[f]);
    }
    assert_eq!(*again.index, *opened.index);

    // A corrupt cache is not even read: no warning, and it is replaced.
    fs::write(cache_of(&cfg, 1), b"garbage").unwrap();
    let (fixed, warnings) = build(&cfg, CacheMode::Rebuild);
    assert_eq!(fixed.caches_written, 2);
    assert_eq!(warnings_of(&warnings), NO_WARNINGS);
    assert_eq!(fs::read(cache_of(&cfg, 1)).unwrap(), bytes[1]);
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// 7. Two processes at once
// ---------------------------------------------------------------------------------------------

#[test]
fn two_ctf_index_processes_at_once_leave_a_valid_cache() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..170_000)
        .map(|i| format!("{i} |a {}\n", i % 97))
        .collect();
    assert!(text.len() > 1_900_000, "{}", text.len());
    let data = write_data(dir.path(), "big.ctf", &text);
    let cfg = config(
        std::slice::from_ref(&data),
        &[InputConfig::dense("a", 1)],
        32 << 20,
        false,
    );
    let cache = cache_of(&cfg, 0);
    let data_arg = data.to_str().unwrap();
    for round in 0..5 {
        let children: Vec<_> = (0..2)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_ctf"))
                    .args(["index", "--file", data_arg, "--input", "a:1:dense"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("ctf starts")
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert!(
                out.status.success(),
                "round {round}: {}\n{stdout}\n{stderr}",
                out.status
            );
            assert!(
                stdout.contains("caches written: 1"),
                "round {round}: {stdout}"
            );
            assert!(!stderr.contains("warning"), "round {round}: {stderr}");
        }
        assert!(cache.is_file(), "round {round}");
        assert_eq!(
            temp_files(dir.path()),
            Vec::<String>::new(),
            "round {round}"
        );
    }
    let index = cached(&cfg);
    assert_eq!(*index, scanned(&cfg));
    assert_eq!(index.sequences.len(), 170_000);
    assert_eq!(entries(dir.path()).len(), 2);
}

// ---------------------------------------------------------------------------------------------
// 8. Dropping the writer
// ---------------------------------------------------------------------------------------------

#[test]
fn dropping_the_opened_index_finishes_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    // Enough caches (8 of about 1.6 MB, written one after the other) that the writer is
    // still busy when the index is dropped, unless the drop waits for it.
    let text: String = (0..50_000).map(|i| format!("{i} |a 1\n")).collect();
    let files: Vec<PathBuf> = (0..8)
        .map(|f| write_data(dir.path(), &format!("d{f}.ctf"), &text))
        .collect();
    let cfg = config(&files, &ab_inputs(), 1 << 16, false);
    let (opened, warnings) = build(&cfg, CacheMode::Use);
    assert_eq!(opened.sources, [Scanned; 8]);
    assert!(opened.cache_writer.is_some());
    let index = Arc::clone(&opened.index);
    drop(opened);
    // No waiting: the drop did.
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());
    for f in 0..8 {
        let cache = cache_of(&cfg, f);
        assert!(cache.is_file(), "{}", cache.display());
        assert!(fs::metadata(&cache).unwrap().len() > 50_000 * 32);
    }
    assert_eq!(warnings_of(&warnings), NO_WARNINGS);
    assert_eq!(*cached(&cfg), *index);
}

// ---------------------------------------------------------------------------------------------
// 9. Time to first chunk
// ---------------------------------------------------------------------------------------------

#[test]
fn with_a_cache_the_first_chunk_is_read_without_scanning_the_file() {
    let dir = tempfile::tempdir().unwrap();
    // About 1 MB: two lines per sequence, fixed-width ids.
    let text: String = (0..40_000)
        .map(|i| format!("{i:06} |a 1 |b 1:1\n{i:06} |a 2\n"))
        .collect();
    let data = write_data(dir.path(), "d.ctf", &text);
    let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 1 << 16, false);
    let (before, _, warnings) = build_and_wait(&cfg);
    assert_eq!(warnings, NO_WARNINGS);
    assert!(before.chunks.len() > 10);

    let index = cached(&cfg);
    let mut loader = ChunkLoader::<f64>::new(Arc::clone(&index), &cfg);
    let mut chunk = ParsedChunk::new(&cfg.inputs);
    loader.load(0, &mut chunk).unwrap();
    let counters = loader.counters();
    assert_eq!(counters.chunks_loaded, 1);
    assert_eq!(counters.bytes_read, u64::from(index.chunk(0).len));
    assert!(counters.bytes_read <= 1 << 16);
    assert_eq!(chunk.sequences.len(), index.chunk_sequences(0).len());

    // The cached build does not read the middle of the file: a same-size change there (time
    // restored) outside the hashed 64 KiB ends goes unseen by it, while a scan sees it. The
    // chunk loader still catches it when it reads that chunk.
    let middle = text.len() / 2;
    let line_start = text[..middle].rfind('\n').unwrap() + 1;
    let mut changed = text.clone().into_bytes();
    changed[line_start..line_start + 6].copy_from_slice(b"999999");
    let mtime = fs::metadata(&data).unwrap().modified().unwrap();
    fs::write(&data, &changed).unwrap();
    set_mtime(&data, mtime);
    let unseen = cached(&cfg);
    assert_eq!(*unseen, *before);
    assert_ne!(scanned(&cfg).sequences, before.sequences);

    let mut loader = ChunkLoader::<f64>::new(Arc::clone(&unseen), &cfg);
    loader.load(0, &mut chunk).unwrap();
    assert_eq!(loader.counters().bytes_read, u64::from(unseen.chunk(0).len));
    let middle_chunk = unseen
        .chunks
        .iter()
        .position(|c| c.start <= line_start as u64 && (line_start as u64) < c.end())
        .unwrap() as u32;
    match loader.load(middle_chunk, &mut chunk) {
        Err(LoadError::Changed { .. }) => {}
        other => panic!("expected a changed-file error, got {other:?}"),
    }
}

/// Regression: a FIFO at the cache path made the build block forever in `open`.
#[test]
fn a_fifo_at_the_cache_path_is_a_warning_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path(), "d.ctf", "1 |a 1\n");
    let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 1 << 16, false);
    let cache = cache_of(&cfg, 0);
    let made = std::process::Command::new("mkfifo").arg(&cache).status();
    if !made.is_ok_and(|s| s.success()) {
        return; // no mkfifo on this machine
    }
    let (opened, warnings) = build(&cfg, CacheMode::Use);
    assert_eq!(opened.sources, [Scanned]);
    drop(opened);
    let text: Vec<String> = warnings_of(&warnings)
        .iter()
        .map(|w| w.to_string())
        .collect();
    let text = text.join("\n");
    assert!(text.contains("not a regular file"), "{text}");
}

/// Temporary files that killed writers left next to the data are removed by the next build
/// that writes a cache there, once old and only when their process is gone.
#[test]
fn abandoned_temporary_caches_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path(), "d.ctf", "1 |a 1\n");
    let cfg = config(std::slice::from_ref(&data), &ab_inputs(), 1 << 16, false);
    let cache = cache_of(&cfg, 0);
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let temp = |pid: u32, tag: &str| {
        let mut name = cache.as_os_str().to_owned();
        name.push(format!(".tmp.{pid}.123456789.{tag}"));
        std::path::PathBuf::from(name)
    };
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 3600);
    let old_dead = temp(dead, "0");
    let young_dead = temp(dead, "1");
    let old_alive = temp(1, "2");
    for (path, old) in [(&old_dead, true), (&young_dead, false), (&old_alive, true)] {
        let f = std::fs::File::create(path).unwrap();
        if old {
            f.set_modified(long_ago).unwrap();
        }
    }
    let (opened, warnings) = build(&cfg, CacheMode::Use);
    opened.cache_writer.unwrap().wait();
    assert_eq!(warnings_of(&warnings), NO_WARNINGS);
    assert!(cache.is_file(), "the cache was written");
    assert!(
        !old_dead.exists(),
        "an old temporary of a dead writer is removed"
    );
    assert!(
        young_dead.exists(),
        "a recent one may belong to a writer elsewhere"
    );
    assert!(old_alive.exists(), "a running writer's is kept");
}

/// A composite reader's match of a joined deserializer's keys is cached next to its file
/// with its `cacheIndex`: made and written on the first build, read on the next (same
/// index), made again when the joined file changes, and written synchronously by
/// `CacheMode::Rebuild`; a joined deserializer without `cacheIndex` gets none.
#[test]
fn composite_join_is_cached_with_the_joined_deserializers_cache_index() {
    let dir = tempfile::tempdir().unwrap();
    let features = dir.path().join("f.ctf");
    let labels = dir.path().join("l.ctf");
    fs::write(&features, "1 |x 1\n2 |x 2\n3 |x 3\n4 |x 4\n").unwrap();
    fs::write(&labels, "3 |y 3\n1 |y 1\n9 |y 9\n2 |y 2\n").unwrap();
    let config = |cache_joined: bool| {
        ReaderConfig::builder()
            .file(features.display().to_string())
            .input(InputConfig::dense("x", 1))
            .cache_index(true)
            .then_deserializer()
            .file(labels.display().to_string())
            .input(InputConfig::dense("y", 1))
            .cache_index(cache_joined)
            .build()
            .unwrap()
    };
    let join_caches = || -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "ctfjoin"))
            .collect();
        found.sort();
        found
    };
    let matches = |opened: &OpenedIndex| opened.index.joined[0].matches.clone();

    let (uncached, _) = build(&config(false), CacheMode::Use);
    assert_eq!(uncached.join_sources, [Scanned]);
    drop(uncached);
    assert!(
        join_caches().is_empty(),
        "no cacheIndex on the joined deserializer"
    );

    let (first, _) = build(&config(true), CacheMode::Use);
    assert_eq!(first.join_sources, [Scanned]);
    assert_eq!(matches(&first), [1, 3, 0, u32::MAX]);
    let first_index = Arc::clone(&first.index);
    drop(first); // waits for the writers
    assert_eq!(join_caches().len(), 1);

    let (second, warnings) = build(&config(true), CacheMode::Use);
    assert_eq!(second.sources, [Cache, Cache]);
    assert_eq!(second.join_sources, [Cache]);
    assert_eq!(*second.index, *first_index);
    assert_eq!(
        warnings_of(&warnings).len(),
        1,
        "the unmatched key 9, again"
    );
    drop(second);

    // Another joined file: the cache is stale, the match is made again and rewritten.
    fs::write(&labels, "4 |y 4\n2 |y 2\n1 |y 1\n3 |y 3\n").unwrap();
    let (changed, _) = build(&config(true), CacheMode::Use);
    assert_eq!(changed.join_sources, [Scanned]);
    assert_eq!(matches(&changed), [2, 1, 3, 0]);
    drop(changed);
    let (again, _) = build(&config(true), CacheMode::Use);
    assert_eq!(again.join_sources, [Cache]);
    assert_eq!(matches(&again), [2, 1, 3, 0]);
    drop(again);

    // `ctf index` (Rebuild) writes every cache before returning, the join's included.
    for cache in join_caches() {
        fs::remove_file(cache).unwrap();
    }
    let (rebuilt, _) = build(&config(false), CacheMode::Rebuild);
    assert_eq!(rebuilt.caches_written, 3);
    assert_eq!(join_caches().len(), 1);
}
