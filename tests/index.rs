//! The index and chunk loading (issue 3): reading a corpus chunk by chunk through the index
//! gives exactly what the streaming reader gives, whatever the chunk size, the split into
//! files and the bytes; the index has the boundaries, keys and counts CNTK-BEHAVIOUR §4
//! describes; a changed file is an error.

#[allow(dead_code)] // the parser tests use the rest
mod props_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctf_reader::chunks::{ChunkLoader, LoadError, ParsedChunk};
use ctf_reader::index::build::{default_scan_threads, CacheMode, IndexingOptions, SCAN_BLOCK_SIZE};
use ctf_reader::index::chunking::IndexLimits;
use ctf_reader::index::{build_index, CorpusIndex, IndexError, KeyMode};
use ctf_reader::reader::{read_all, ErrorPolicy, SequenceReader};
use ctf_reader::{Diagnostic, InputConfig, ParsedSequences, ReaderConfig};
use proptest::prelude::*;

use props_support::entropy::Src;
use props_support::model::{gen_dataset_for, gen_inputs, render};
use props_support::run::parse_bits;

fn options() -> IndexingOptions {
    scan_options(default_scan_threads(), SCAN_BLOCK_SIZE)
}

fn scan_options(scan_threads: usize, scan_block_bytes: usize) -> IndexingOptions {
    IndexingOptions {
        cache: CacheMode::Off,
        on_warning: Arc::new(|w| panic!("unexpected warning: {w}")),
        progress: None,
        limits: IndexLimits::default(),
        scan_threads,
        scan_block_bytes,
    }
}

fn config(
    files: &[PathBuf],
    inputs: &[InputConfig],
    chunk_size: u64,
    skip_ids: bool,
) -> ReaderConfig {
    ReaderConfig::builder()
        .files(files.iter().map(|p| p.to_string_lossy().into_owned()))
        .inputs(inputs.iter().cloned())
        .chunk_size_in_bytes(chunk_size)
        .skip_sequence_ids(skip_ids)
        .build()
        .expect("valid config")
}

/// Everything a read produces, in file order.
#[derive(Debug, PartialEq)]
struct Read {
    sequences: ParsedSequences<f64>,
    diagnostics: Vec<(String, Diagnostic)>,
    invalid: Vec<(u64, u64)>,
}

fn via_stream(config: &ReaderConfig) -> Result<Read, String> {
    let out = read_all::<f64>(config, ErrorPolicy::ReportAll);
    // The index stops at the first file-level error, which `ReportAll` reads past.
    if let Some(e) = out.error.or(out.file_errors.into_iter().next()) {
        return Err(e.to_string());
    }
    Ok(Read {
        sequences: out.sequences,
        diagnostics: out.diagnostics,
        invalid: Vec::new(),
    })
}

fn via_chunks(config: &ReaderConfig, part_len: u32) -> Result<(Read, Arc<CorpusIndex>), String> {
    let opened = build_index(config, &options()).map_err(|e| e.to_string())?;
    let index = opened.index;
    let mut loader = ChunkLoader::<f64>::new(Arc::clone(&index), config);
    let mut chunk = ParsedChunk::new(&config.inputs);
    let mut read = Read {
        sequences: ParsedSequences::new(&config.inputs),
        diagnostics: Vec::new(),
        invalid: Vec::new(),
    };
    for id in 0..index.chunks.len() as u32 {
        let count = index.chunk(id).sequences.len() as u32;
        // Whole chunks, or parts of `part_len` sequences (as loader threads split them).
        let step = if part_len == 0 {
            count.max(1)
        } else {
            part_len
        };
        let mut first = 0;
        loop {
            let part = first..(first + step).min(count);
            loader
                .load_part(id, part.clone(), &mut chunk)
                .map_err(|e| e.to_string())?;
            let name = &index.files[index.chunk(id).file as usize].name;
            read.sequences
                .append(&chunk.sequences)
                .expect("a test corpus fits in one column");
            read.diagnostics
                .extend(chunk.diagnostics.iter().map(|d| (name.clone(), d.clone())));
            read.invalid
                .extend(chunk.invalid.iter().map(|s| (s.key, s.line)));
            first = part.end;
            if first >= count {
                break;
            }
        }
    }
    Ok((read, index))
}

/// Writes `texts` as files in a temporary directory.
fn write_files(dir: &Path, texts: &[Vec<u8>]) -> Vec<PathBuf> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let p = dir.join(format!("part-{i}.ctf"));
            std::fs::write(&p, t).unwrap();
            p
        })
        .collect()
}

/// Reading through the index must equal reading the stream, sequence for sequence and
/// diagnostic for diagnostic, for every chunk size.
fn assert_same_as_stream(texts: &[Vec<u8>], inputs: &[InputConfig], skip_ids: bool) {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), texts);
    let streamed = via_stream(&config(&files, inputs, 0, skip_ids));
    for (chunk_size, part_len) in [
        (0, 0),
        (1, 0),
        (7, 0),
        (64, 0),
        (1 << 30, 0),
        (64, 1),
        (1 << 30, 2),
        (1 << 30, 3),
    ] {
        let cfg = config(&files, inputs, chunk_size, skip_ids);
        let chunked = via_chunks(&cfg, part_len);
        match (&streamed, chunked) {
            (Ok(s), Ok((c, index))) => {
                assert_eq!(s.sequences, c.sequences, "chunk size {chunk_size}");
                assert_eq!(s.diagnostics, c.diagnostics, "chunk size {chunk_size}");
                check_index_shape(&index, chunk_size);
            }
            (Err(s), Err(c)) => assert_eq!(s, &c),
            (s, c) => panic!(
                "chunk size {chunk_size}: stream {:?} but chunks {:?}",
                s.as_ref().map(|_| "ok"),
                c.as_ref().map(|_| "ok")
            ),
        }
    }
    assert_scan_independent_of_threads(&config(&files, inputs, 7, skip_ids));
    assert_same_sequence_limit_as_stream(&config(&files, inputs, 0, skip_ids));
}

/// The texts of `config`'s files, for a failure's message.
fn texts_of(config: &ReaderConfig) -> Vec<String> {
    let text = |f: &String| String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
    config.files.iter().map(text).collect()
}

/// Where a sequence limit stops a read: the index refuses the first sequence (in file order)
/// longer than the limit, and the streaming reader must report the same sequence, with the
/// same message, as its first error of that kind; with a limit no sequence exceeds, neither
/// refuses one. Tried with each sequence's length less one as the limit.
fn assert_same_sequence_limit_as_stream(config: &ReaderConfig) {
    let Ok(opened) = build_index(config, &options()) else {
        return; // a fatal error before any limit: the comparison above covers it
    };
    let index = opened.index;
    let mut lengths: Vec<u64> = (0..index.chunks.len() as u32)
        .flat_map(|id| index.chunk_sequences(id).iter().map(|e| u64::from(e.len)))
        .collect();
    lengths.sort_unstable();
    lengths.dedup();
    let mut limits: Vec<u64> = lengths.iter().map(|&n| n - 1).collect();
    limits.extend(lengths.last());
    for limit in limits {
        let mut opts = options();
        opts.limits = IndexLimits {
            max_sequence_bytes: limit,
            ..IndexLimits::default()
        };
        let refused = match build_index(config, &opts) {
            Ok(_) => None,
            Err(IndexError::Data {
                file,
                line,
                col,
                message,
            }) => Some((file, line, col, message)),
            Err(e) => panic!("limit {limit}: {e}"),
        };
        let reported = Arc::new(std::sync::Mutex::new(None));
        let first = Arc::clone(&reported);
        let sink = Box::new(move |file: &str, d: &Diagnostic| {
            let mut first = first.lock().unwrap();
            if first.is_none() && d.message.contains("bytes long; a sequence must be at most") {
                *first = Some((file.to_string(), d.line, d.col, d.message.clone()));
            }
        });
        let mut reader = SequenceReader::<f64>::new(config, ErrorPolicy::ReportAll, sink);
        reader.limit_sequence_bytes(limit as usize);
        while let Ok(Some(_)) = reader.next_batch() {}
        let reported = reported.lock().unwrap().take();
        assert_eq!(
            refused,
            reported,
            "limit {limit}, files {:?}",
            texts_of(config)
        );
    }
}

/// The index must not depend on how many threads scan, nor on where the reads are cut.
fn assert_scan_independent_of_threads(config: &ReaderConfig) {
    let single = build_index(config, &scan_options(1, SCAN_BLOCK_SIZE))
        .map(|o| o.index)
        .map_err(|e| e.to_string());
    for (threads, block) in [(2, 1), (2, 5), (3, 7), (4, 16), (2, 64), (3, 1 << 20)] {
        let split = build_index(config, &scan_options(threads, block))
            .map(|o| o.index)
            .map_err(|e| e.to_string());
        assert_eq!(single, split, "{threads} threads, {block}-byte blocks");
    }
}

/// Structural invariants of an index.
fn check_index_shape(index: &CorpusIndex, chunk_size: u64) {
    let mut next = 0u32;
    for (f, file) in index.files.iter().enumerate() {
        let mut prev_end = 0;
        for id in file.chunks.clone() {
            let c = index.chunk(id);
            assert_eq!(c.file as usize, f);
            assert_eq!(c.sequences.start, next);
            assert!(c.start >= prev_end && c.end() <= file.stamp.size);
            prev_end = c.end();
            next = c.sequences.end;
            let entries = index.chunk_sequences(id);
            assert!(!entries.is_empty());
            assert_eq!(entries[0].offset, 0);
            let last = entries.last().unwrap();
            assert_eq!(last.offset + last.len, c.len);
            if let [.., before, last] = entries {
                // CNTK's rule: the chunk so far plus the incoming sequence fit the limit.
                let so_far = u64::from(before.offset + before.len);
                assert!(so_far + u64::from(last.len) <= chunk_size.min(file.stamp.size));
            }
            assert_eq!(
                c.samples,
                entries.iter().map(|e| u64::from(e.samples)).sum()
            );
        }
    }
    assert_eq!(next as usize, index.sequences.len());
}

const SOUP: &[&[u8]] = &[
    b"1",
    b"2",
    b"7",
    b"0",
    b"99999999999999999999",
    b" ",
    b"  ",
    b"\t",
    b"\r",
    b"\n",
    b"\n",
    b"\n",
    b"|",
    b"|a",
    b"|a ",
    b"|b",
    b"|b ",
    b"|c ",
    b"|#",
    b"|# x",
    b"#",
    b"1:2",
    b"0:1",
    b"9:1",
    b"3",
    b"-2.5",
    b"1e3",
    b"x",
    b":",
    b".",
    b"\xC3\xA9",
    b"\x00",
    b"\xEF\xBB\xBF",
];

fn soup(src: &mut Src) -> Vec<u8> {
    let n = src.range(0, 40);
    let mut out = Vec::new();
    for _ in 0..n {
        let piece: &&[u8] = src.pick(SOUP);
        out.extend_from_slice(piece);
    }
    out
}

fn soup_inputs(src: &mut Src) -> Vec<InputConfig> {
    let mut a = InputConfig::dense("a", 2);
    let mut b = InputConfig::sparse("b", 5);
    match src.below(3) {
        0 => a = a.defining_mb_size(),
        1 => b = b.defining_mb_size(),
        _ => {}
    }
    if src.chance(30) {
        vec![a]
    } else {
        vec![a, b]
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Byte soup, in one to three files: the scanner and the parser agree on every span.
    #[test]
    fn byte_soup_reads_the_same_through_the_index(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut src = Src::new(&bytes);
        let inputs = soup_inputs(&mut src);
        let n_files = src.range(1, 3);
        let texts: Vec<Vec<u8>> = (0..n_files).map(|_| soup(&mut src)).collect();
        let skip_ids = src.chance(20);
        assert_same_as_stream(&texts, &inputs, skip_ids);
    }

    /// Valid datasets with every rendering variation of the parser tests.
    #[test]
    fn generated_datasets_read_the_same_through_the_index(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let mut src = Src::new(&bytes);
        let specs = gen_inputs(&mut src);
        let n_files = src.range(1, 3);
        let mut texts = Vec::new();
        let mut inputs = Vec::new();
        let mut skip_ids = false;
        for _ in 0..n_files {
            let ds = gen_dataset_for(&mut src, specs.clone(), &|t| parse_bits::<f64>(t).is_some());
            let r = render(&mut src, &ds, 0);
            skip_ids = r.options.skip_sequence_ids;
            // Names are free (the data uses aliases); the generator's may collide in case.
            inputs = ds.configs();
            for (i, input) in inputs.iter_mut().enumerate() {
                input.name = format!("in{i}");
            }
            texts.push(r.text);
        }
        assert_same_as_stream(&texts, &inputs, skip_ids);
    }
}

/// Regression cases of the property tests: whitespace before a file's first id (which CNTK
/// skips: the file stays in id mode) once put the parser in line mode while the index, which
/// agreed, gave a different error; now both skip it, whatever the chunks and parts.
#[test]
fn whitespace_before_the_first_id_reads_the_same_through_the_index() {
    let a = InputConfig::dense("a", 2);
    let inputs = vec![a.clone(), InputConfig::sparse("b", 5)];
    let cases: [&[u8]; 6] = [
        b"  5 |a 1 2\n5 |a 3 4\n6 |a 5 6\n",
        b"\t5 |a 1 2 |b\n5 |a 3 4\n6 |a 5 6 |b 1:1\n",
        b"\n \r\n\t 5 |a 1 2\n5 |a 3 4\n6 |a 5 6",
        b"\xEF\xBB\xBF \t5 |a 1 2\n6 |a 5 6\n",
        b"  5 |a x 2\n  5 |a 3 4\n6 |a 5 6\n",
        b"   99999999999999999999 |a 1 2\n6 |a 5 6\n",
    ];
    for text in cases {
        for skip_ids in [false, true] {
            for inputs in [&inputs[..1], &inputs] {
                assert_same_as_stream(&[text.to_vec()], inputs, skip_ids);
                assert_same_as_stream(&[text.to_vec(), text.to_vec()], inputs, skip_ids);
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[cases[2].to_vec(), b" 7 |a 1 2\n".to_vec()]);
    let read = via_stream(&config(&files, &[a], 0, false)).unwrap();
    let keys: Vec<u64> = read.sequences.sequences.iter().map(|s| s.key).collect();
    assert_eq!(keys, [5, 6, 7]);
    assert!(read.diagnostics.is_empty());
}

/// With `skipSequenceIds`, digits after the whitespace that starts a file are skipped, as CNTK
/// does (its index starts the first sequence past that whitespace, its parser skips digits at
/// a row's start); on any later line, and after a line with content, they are junk. A chunk
/// loaded on its own must tell the two apart, also past a long run of blank lines.
#[test]
fn skip_sequence_ids_reads_digits_after_leading_whitespace_the_same_through_the_index() {
    let inputs = vec![InputConfig::dense("a", 2), InputConfig::sparse("b", 5)];
    let long_blank = [
        &b"\n  \r\n"[..],
        &[b'\n'; 70_000][..],
        b"\t 5 |a 1 2\n|a 3 4\n",
    ]
    .concat();
    let cases: [(&[u8], &[u64], &[u64]); 7] = [
        (b"  5 |a 1 2\n6 |a 3 4\n", &[0, 1], &[]),
        (b"\xEF\xBB\xBF\t5 |a 1 2 |b\n|a 3 4\n", &[0, 1], &[]),
        (b"\n \n  5 |a 1 2\n  6 |a 3 4\n", &[2], &[4]),
        (b"  5 |# c\n  6 |a 3 4\n|a 5 6\n", &[2], &[2]),
        (b"|# c\n  5 |a 1 2\n|a 3 4\n", &[2], &[2]),
        (b"|zz 1\n  5 |a 1 2\n", &[], &[2]),
        (&long_blank, &[70_002, 70_003], &[]),
    ];
    for (text, keys, error_lines) in cases {
        assert_same_as_stream(&[text.to_vec()], &inputs, true);
        assert_same_as_stream(&[text.to_vec(), text.to_vec()], &inputs, true);
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(dir.path(), &[text.to_vec()]);
        let (read, _) = via_chunks(&config(&files, &inputs[..1], 0, true), 1).unwrap();
        let got: Vec<u64> = read.sequences.sequences.iter().map(|s| s.key).collect();
        assert_eq!(got, keys, "{:?}", String::from_utf8_lossy(text));
        let lines: Vec<u64> = read.diagnostics.iter().map(|(_, d)| d.line).collect();
        assert_eq!(lines, error_lines, "{:?}", String::from_utf8_lossy(text));
    }
}

/// A line-mode file (`skipSequenceIds` here) whose first sequence's line starts with
/// whitespace and a digit has the text before that line read too (to tell whether it is the
/// file's first line with content), and `bytes_read` counts it; otherwise what comes before
/// the first sequence is not read.
#[test]
fn bytes_read_counts_the_text_read_before_a_line_mode_files_first_sequence() {
    let inputs = vec![InputConfig::dense("a", 2)];
    let long_blank = [&[b'\n'; 70_000][..], b"\t 5 |a 1 2\n|a 3 4\n"].concat();
    // (text, bytes before the first sequence that are not read)
    let cases: [(&[u8], u64); 6] = [
        (b"\n \n  5 |a 1 2\n  6 |a 3 4\n", 0),
        (b"|# c\n  5 |a 1 2\n|a 3 4\n", 0),
        (b"|zz 1\n  5 |a 1 2\n", 0),
        (&long_blank, 0),
        (b"\n \n|a 1 2\n", 3),
        (b"|# c\n5 |a 1 2\n", 5),
    ];
    for (text, unread) in cases {
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(dir.path(), &[text.to_vec()]);
        let config = config(&files, &inputs, 0, true);
        let index = build_index(&config, &options()).unwrap().index;
        let mut loader = ChunkLoader::<f32>::new(Arc::clone(&index), &config);
        let mut chunk = ParsedChunk::new(&config.inputs);
        for id in 0..index.chunks.len() as u32 {
            let count = index.chunk(id).sequences.len() as u32;
            loader.load_part(id, 0..count, &mut chunk).unwrap();
        }
        assert_eq!(
            loader.counters().bytes_read,
            text.len() as u64 - unread,
            "{:?}",
            String::from_utf8_lossy(text)
        );
    }
}

fn dense_a() -> Vec<InputConfig> {
    vec![InputConfig::dense("a", 1), InputConfig::sparse("b", 10)]
}

fn index_of(text: &str, inputs: &[InputConfig], chunk_size: u64) -> CorpusIndex {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[text.as_bytes().to_vec()]);
    let opened = build_index(&config(&files, inputs, chunk_size, false), &options()).unwrap();
    Arc::try_unwrap(opened.index).unwrap()
}

#[test]
fn id_mode_keys_offsets_lengths_and_samples() {
    let text = "\n3 |a 1 |b 0:1\n3 |a 2\n|a 3\n\n5 |a 4 |b\n9 |# only a comment\n";
    let index = index_of(text, &dense_a(), 1 << 20);
    let got: Vec<(u64, u32, u32, u32, u32)> = index
        .sequences
        .iter()
        .map(|e| (e.key, e.offset, e.len, e.samples, e.line))
        .collect();
    // The leading blank line belongs to no sequence; the chunk starts at sequence 3.
    assert_eq!(
        got,
        [(3, 0, 27, 3, 0), (5, 27, 10, 1, 4), (9, 37, 20, 0, 5)]
    );
    assert_eq!(index.chunks.len(), 1);
    assert_eq!((index.chunks[0].start, index.chunks[0].first_line), (1, 2));
    assert_eq!(index.files[0].mode, KeyMode::Ids);
    assert_eq!(index.files[0].lines, 7);
    assert_eq!(index.files[0].input_lines, [4, 2]);
}

#[test]
fn defines_mb_size_counts_lines_of_its_input() {
    let inputs = vec![
        InputConfig::dense("a", 1),
        InputConfig::sparse("b", 10).defining_mb_size(),
    ];
    let index = index_of("1 |a 1 |b 1:1\n1 |a 2\n1 |a 3 |b 2:1\n2 |a 1\n", &inputs, 0);
    let samples: Vec<u32> = index.sequences.iter().map(|e| e.samples).collect();
    // Sequence 2 has no `b`: E = 0 (the parser will find it invalid).
    assert_eq!(samples, [2, 0]);
}

#[test]
fn line_mode_keys_continue_across_files_and_chunk_sizes_apply() {
    let dir = tempfile::tempdir().unwrap();
    let texts = [b"|a 1\n\n|a 2\n".to_vec(), b"|# c\n|a 3".to_vec()];
    let files = write_files(dir.path(), &texts);
    let index = build_index(&config(&files, &dense_a(), 0, false), &options())
        .unwrap()
        .index;
    let keys: Vec<u64> = index.sequences.iter().map(|e| e.key).collect();
    assert_eq!(keys, [0, 2, 4]);
    assert_eq!(index.chunks.len(), 3);
    assert_eq!(index.files[1].key_base, 3);
    let index = build_index(&config(&files, &dense_a(), 1 << 20, false), &options())
        .unwrap()
        .index;
    // Chunks never span files.
    assert_eq!(index.chunks.len(), 2);
}

#[test]
fn globs_expand_sorted_and_repeats_across_files_are_marked() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("p-2.ctf", "4 |a 1\n1 |a 1\n"),
        ("p-1.ctf", "1 |a 1\n2 |a 1\n"),
        ("q.ctf", "9 |a 1\n"),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let pattern = format!("{}/p-*.ctf", dir.path().display());
    let cfg = ReaderConfig::builder()
        .file(pattern)
        .input(InputConfig::dense("a", 1))
        .build()
        .unwrap();
    let index = build_index(&cfg, &options()).unwrap().index;
    let names: Vec<&str> = index
        .files
        .iter()
        .map(|f| f.name.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(names, ["p-1.ctf", "p-2.ctf"]);
    // Keys 1, 2, 4, 1: the second 1 (ordinal 3) repeats.
    assert_eq!(index.repeated, [3]);
    let (read, _) = via_chunks(&cfg, 0).unwrap();
    let keys: Vec<u64> = read.sequences.sequences.iter().map(|s| s.key).collect();
    assert_eq!(keys, [1, 2, 4]);
    assert_eq!(read.invalid, [(1, 2)]);
    assert!(read.diagnostics[0].1.message.contains("already used"));

    let none = ReaderConfig::builder()
        .file(format!("{}/none-*.ctf", dir.path().display()))
        .input(InputConfig::dense("a", 1))
        .build()
        .unwrap();
    let err = build_index(&none, &options()).err().unwrap().to_string();
    assert!(err.contains("no file matches"), "{err}");
}

#[test]
fn keys_repeated_across_files_of_both_modes_are_marked_and_read_as_the_stream_reads_them() {
    // ya has no ids (keys 0, 1; line 3 is blank, so key 2 is no sequence's); yb's ids 0 and
    // 1 repeat them, its 2 does not; zc has no ids again, from key 3 + 4 = 7, so its second
    // line (key 8) repeats yb's id 8.
    let texts = [
        b"|a 100 |b\n|a 101 |b\n\n".to_vec(),
        b"0 |a 200 |b\n2 |a 202 |b\n1 |a 201 |b\n8 |a 208 |b\n".to_vec(),
        b"|a 300 |b\n|a 301 |b\n".to_vec(),
    ];
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &texts);
    let cfg = config(&files, &dense_a(), 0, false);
    let index = build_index(&cfg, &options()).unwrap().index;
    let keys: Vec<u64> = index.sequences.iter().map(|e| e.key).collect();
    assert_eq!(keys, [0, 1, 0, 2, 1, 8, 7, 8]);
    assert_eq!(index.repeated, [2, 4, 7]);
    let (read, _) = via_chunks(&cfg, 0).unwrap();
    let keys: Vec<u64> = read.sequences.sequences.iter().map(|s| s.key).collect();
    assert_eq!(keys, [0, 1, 2, 8, 7]);
    assert_eq!(read.invalid, [(0, 1), (1, 3), (8, 2)]);
    let errors: Vec<(&str, u64, u64)> = read
        .diagnostics
        .iter()
        .map(|(file, d)| (file.rsplit('/').next().unwrap(), d.line, d.col))
        .collect();
    assert_eq!(
        errors,
        [
            ("part-1.ctf", 1, 1),
            ("part-1.ctf", 3, 1),
            ("part-2.ctf", 2, 1)
        ]
    );
    assert_same_as_stream(&texts, &dense_a(), false);
}

#[test]
fn limits_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[b"1 |a 1\n1 |a 2\n2 |a 3\n3 |a 4\n".to_vec()]);
    let cfg = config(&files, &dense_a(), 0, false);
    let mut opts = options();
    opts.limits = IndexLimits {
        max_sequence_bytes: 10,
        max_sequences: 100,
    };
    let err = build_index(&cfg, &opts).err().unwrap();
    assert!(matches!(err, IndexError::Data { line: 1, .. }), "{err}");
    assert!(
        err.to_string().contains("sequence 1 is 14 bytes long"),
        "{err}"
    );
    opts.limits = IndexLimits {
        max_sequence_bytes: 100,
        max_sequences: 2,
    };
    let err = build_index(&cfg, &opts).err().unwrap();
    assert!(matches!(err, IndexError::Data { line: 4, .. }), "{err}");
}

#[test]
fn empty_and_utf16_files_fail_indexing() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[b"|a 1\n".to_vec(), b" \n\n".to_vec()]);
    let err = build_index(&config(&files, &dense_a(), 0, false), &options())
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .ends_with("part-1.ctf: error: the file is empty"),
        "{err}"
    );
    let files = write_files(dir.path(), &[b"\xFF\xFE|\0a\0".to_vec()]);
    let err = build_index(&config(&files, &dense_a(), 0, false), &options())
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("part-0.ctf:1:1: error: the file starts with a UTF-16"),
        "{err}"
    );
}

/// Loads every chunk, after `change` has been applied to the indexed file.
fn load_after(change: impl FnOnce(&Path)) -> Result<(), LoadError> {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..200).map(|i| format!("{i} |a {i}\n")).collect();
    let files = write_files(dir.path(), &[text.into_bytes()]);
    let cfg = config(&files, &dense_a(), 256, false);
    let index = build_index(&cfg, &options()).unwrap().index;
    let mut loader = ChunkLoader::<f32>::new(Arc::clone(&index), &cfg);
    let mut chunk = ParsedChunk::new(&cfg.inputs);
    loader.load(0, &mut chunk).unwrap();
    change(&files[0]);
    for id in 0..index.chunks.len() as u32 {
        loader.load(id, &mut chunk)?;
    }
    Ok(())
}

fn assert_changed(result: Result<(), LoadError>, detail: &str) {
    match result {
        Err(e @ LoadError::Changed { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("data file changed since it was indexed"),
                "{message}"
            );
            assert!(message.contains(detail), "{message}");
        }
        other => panic!("expected a changed-file error, got {other:?}"),
    }
}

#[test]
fn a_file_changed_after_indexing_is_an_error() {
    use std::fs::OpenOptions;
    assert!(load_after(|_| {}).is_ok());
    assert_changed(
        load_after(|p| {
            OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(100)
                .unwrap()
        }),
        "shorter",
    );
    assert_changed(
        load_after(|p| {
            use std::io::Write;
            OpenOptions::new()
                .append(true)
                .open(p)
                .unwrap()
                .write_all(b"999 |a 1\n")
                .unwrap();
        }),
        "longer",
    );
    assert_changed(
        load_after(|p| {
            let other = p.with_extension("new");
            let text = std::fs::read(p).unwrap();
            std::fs::write(&other, text).unwrap();
            std::fs::rename(&other, p).unwrap();
        }),
        "replaced",
    );
    assert_changed(load_after(|p| std::fs::remove_file(p).unwrap()), "removed");
    // Same size, same modification time: the content check still sees it.
    assert_changed(
        load_after(|p| {
            let meta = std::fs::metadata(p).unwrap();
            let text = std::fs::read(p).unwrap();
            let shifted: Vec<u8> = [&text[1..], &b"\n"[..]].concat();
            std::fs::write(p, shifted).unwrap();
            let f = std::fs::File::options().write(true).open(p).unwrap();
            f.set_modified(meta.modified().unwrap()).unwrap();
        }),
        "",
    );
}

/// The streaming reader returns the sequences before a failing point, then the error once;
/// the read is then over (`None`), as `next_batch`'s documentation says.
#[test]
fn the_streaming_reader_reports_its_error_once_then_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.ctf");
    std::fs::write(&path, "1 |x 1\n2 |x oops\n3 |x 3\n").unwrap();
    let config = ReaderConfig::builder()
        .file(path.to_string_lossy())
        .input(InputConfig::dense("x", 1))
        .build()
        .unwrap();
    let mut reader = SequenceReader::<f32>::new(&config, ErrorPolicy::Budget, Box::new(|_, _| {}));
    let first = reader.next_batch().unwrap().expect("sequence 1");
    assert_eq!(
        first.sequences.iter().map(|s| s.key).collect::<Vec<_>>(),
        [1]
    );
    let error = reader.next_batch().unwrap_err();
    assert!(error.to_string().contains("e.ctf:2:"), "{error}");
    assert!(reader.next_batch().unwrap().is_none());
    assert!(reader.next_batch().unwrap().is_none());
}
