//! Unit tests of the threaded engine's modules: the stash dealt to the parts, the dealing
//! of planned batches, part and batch sizes, the loaders' shutdown and the packer's quick
//! loads.

use super::packer::quick_range;
use super::parts::{PiecePlace, SMALLEST_PART_BYTES};
use super::planner::{Dealer, Planned, BATCH_TEXT_BYTES};
use super::*;
use crate::chunks::{ChunkLoader, ParsedChunk};
use crate::config::InputConfig;
use crate::index::stash::StashPiece;
use crate::parser::{Sample, StreamOptions, StreamParser};
use crate::sync::channel::Receiver;
use std::sync::Mutex as StdMutex;

/// What charging a sequence reports: (line, message) of each diagnostic, and the outcome.
fn charged<T: Element>(
    config: &ReaderConfig,
    index: &CorpusIndex,
    loaded: &LoadedChunk<T>,
    within: u32,
    ordinal: u32,
) -> (Vec<(u64, String)>, bool) {
    let log: Arc<StdMutex<Vec<(u64, String)>>> = Arc::default();
    let sink_log = Arc::clone(&log);
    let mut charging = Charging::new(
        config,
        Box::new(move |_, d| sink_log.lock().unwrap().push((d.line, d.message.clone()))),
    );
    let ok = charging
        .charge_sequence(index, loaded, within, ordinal)
        .is_ok();
    let reported = log.lock().unwrap().clone();
    (reported, ok)
}

/// The samples of every input of the valid sequence at `within` (index within the part),
/// with its key; `None` for an invalid one.
fn sequence_of(loaded: &LoadedChunk<f32>, within: u32) -> Option<(u64, Vec<String>)> {
    let position = loaded.position(within)?;
    let seqs = &loaded.parsed.sequences;
    let p = position as usize;
    let samples = (0..seqs.columns.len())
        .flat_map(|input| {
            seqs.samples(p, input)
                .map(|s: Sample<'_, f32>| format!("{s:?}"))
        })
        .collect();
    Some((seqs.sequences[p].key, samples))
}

/// Pieces shared by two or three parts, with the largest part first, last or between
/// (the one whose sequences stay in place), a piece of one part, one of none and one of
/// another element type: each part gets exactly its sequences, or none.
#[test]
fn each_part_gets_its_own_sequences_of_the_stash() {
    let inputs = [InputConfig::dense("d", 2), InputConfig::sparse("s", 10)];
    let parse = |first: usize, count: usize| -> ParsedSequences<f32> {
        let mut text = String::new();
        for k in first..first + count {
            // Sequences of one to three lines, with sparse samples of one to three
            // entries, some of values other than one.
            for line in 0..=k % 3 {
                let entries: Vec<String> = (0..=(k + line) % 3)
                    .map(|e| format!("{}:{}", (k + 2 * e) % 10, 1 + (k * e) % 4))
                    .collect();
                text += &format!("{k} |d {k} {line} |s {}\n", entries.join(" "));
            }
        }
        let mut parser = StreamParser::<f32>::new(&inputs, StreamOptions::default());
        parser.feed(text.as_bytes()).unwrap();
        parser.finish_file().unwrap();
        assert!(
            parser.diagnostics().is_empty(),
            "{:?}",
            parser.diagnostics()
        );
        parser.sequences().clone()
    };
    let piece = |parsed: Box<dyn std::any::Any + Send + Sync>| StashPiece {
        file: 0,
        start: 0,
        end: 0,
        first_line: 1,
        heap_bytes: 0,
        parsed,
    };
    let sizes = [12, 12, 12, 5, 4, 3];
    let pieces: Vec<ParsedSequences<f32>> =
        (0..sizes.len()).map(|p| parse(100 * p, sizes[p])).collect();
    // Per part: its piece and sequences.
    let places: Vec<PiecePlace> = vec![
        Some((0, 0..9)),
        Some((0, 9..12)),
        None,
        Some((1, 0..2)),
        Some((1, 2..12)),
        Some((2, 0..3)),
        Some((2, 3..10)),
        Some((2, 10..12)),
        Some((3, 0..5)),
        Some((5, 0..3)),
    ];
    let mut stashed: Vec<StashPiece> = pieces.iter().map(|p| piece(Box::new(p.clone()))).collect();
    // Piece 4 is not among the places; piece 5 holds another element type.
    stashed[5] = piece(Box::new(parse(500, 3).columns.len()));
    let stash = stash_per_part::<f32>(&inputs, &places, stashed);
    assert_eq!(stash.len(), places.len());
    for (part, (place, got)) in places.iter().zip(&stash).enumerate() {
        let want = match place {
            Some((p, within)) if *p != 5 => {
                let mut want = ParsedSequences::new(&inputs);
                let range = within.start as usize..within.end as usize;
                want.append_range(&pieces[*p as usize], range).unwrap();
                Some(want)
            }
            _ => None,
        };
        assert_eq!(got.as_ref(), want.as_ref(), "part {part}");
    }
}

/// A planned batch of one minibatch whose only sequence is `ordinal`.
fn batch_of(ordinal: u32) -> PlannedBatch {
    PlannedBatch {
        minibatches: vec![Planned {
            quick: false,
            sequences: 0..1,
            sweep_end: false,
            epoch_end: false,
            end: u64::from(ordinal) + 1,
        }],
        ordinals: vec![ordinal],
    }
}

/// The first sequence of each batch queued for a packer, and whether the end follows.
fn queued(planned: &Receiver<Option<PlannedBatch>>) -> (Vec<u32>, bool) {
    let mut firsts = Vec::new();
    while let Ok(batch) = planned.try_recv() {
        match batch {
            Some(batch) => firsts.push(batch.ordinals[batch.minibatches[0].sequences.start]),
            None => return (firsts, true),
        }
    }
    (firsts, false)
}

#[test]
fn batches_go_to_the_packer_with_the_fewest_queued_and_their_routes_to_the_consumer() {
    let channels: Vec<_> = (0..3).map(|_| bounded::<Option<PlannedBatch>>(8)).collect();
    let senders: Vec<_> = channels.iter().map(|(s, _)| s.clone()).collect();
    let (route_to, routes) = bounded::<usize>(16);
    // Packer 0 is two batches behind, packer 1 one.
    for ordinal in [100, 101] {
        senders[0].send(Some(batch_of(ordinal))).unwrap();
    }
    senders[1].send(Some(batch_of(102))).unwrap();
    let mut dealer = Dealer {
        packers: &senders,
        routes: &route_to,
        last: senders.len() - 1,
    };
    // The empty queue first; then, with every queue at one batch but packer 0's, by
    // turns after the last packer dealt to, skipping packer 0 until the others catch up.
    for ordinal in 0..5 {
        assert!(dealer.send(batch_of(ordinal)));
    }
    dealer.end();
    let routed: Vec<usize> = std::iter::from_fn(|| routes.try_recv().ok()).collect();
    assert_eq!(routed, [2, 1, 2, 0, 1, 0]);
    assert_eq!(queued(&channels[0].1), (vec![100, 101, 3], true));
    assert_eq!(queued(&channels[1].1), (vec![102, 1, 4], true));
    assert_eq!(queued(&channels[2].1), (vec![0, 2], true));
}

#[test]
fn dealing_fails_once_the_consumer_or_the_packer_is_gone() {
    let (to_packer, packer) = bounded::<Option<PlannedBatch>>(4);
    let (route_to, routes) = bounded::<usize>(4);
    let senders = [to_packer];
    let mut dealer = Dealer {
        packers: &senders,
        routes: &route_to,
        last: 0,
    };
    assert!(dealer.send(batch_of(0)));
    drop(routes);
    assert!(!dealer.send(batch_of(1)));
    drop(packer);
    assert!(!dealer.send(batch_of(2)));
}

#[test]
fn a_small_corpus_gives_every_loader_four_parts() {
    const MIB: u64 = 1 << 20;
    assert_eq!(part_size(MIB, 100 * MIB, 2), MIB);
    assert_eq!(part_size(MIB, 8 * MIB, 2), MIB);
    assert_eq!(part_size(MIB, 4 * MIB, 2), MIB / 2);
    assert_eq!(part_size(MIB, 4 * MIB, 4), MIB / 4);
    assert_eq!(part_size(MIB, 100 << 10, 2), SMALLEST_PART_BYTES);
    // Parts asked smaller (tests) are kept, and never 0.
    assert_eq!(part_size(20, 4 * MIB, 2), 20);
    assert_eq!(part_size(0, 0, 0), 1);
}

#[test]
fn a_batch_spans_a_share_of_the_look_ahead_and_half_a_delivery_of_text() {
    // The look-ahead shared among six queued batches...
    assert_eq!(batch_span(60_000, 6, 1), 10_000);
    // ...unless that is more text than BATCH_TEXT_BYTES (400-byte samples: 1,310).
    assert_eq!(batch_span(60_000, 6, 400), BATCH_TEXT_BYTES / 400);
    assert_eq!(BATCH_TEXT_BYTES / 400, 1_310);
    // Never below one sample, whatever the sizes.
    assert_eq!(batch_span(0, 6, 400), 1);
    assert_eq!(batch_span(60_000, 6, u64::MAX), 1);
    assert_eq!(batch_span(60_000, 0, 0), 60_000.min(BATCH_TEXT_BYTES));
}

/// Dropping the source while the load queue is full parses none of the queued parts:
/// with the default window the queue holds the whole corpus, which the loaders would
/// otherwise parse before the drop returns.
#[test]
fn loaders_drop_the_queued_requests_once_the_cache_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.ctf");
    let text: String = (0..200).map(|i| format!("{i} |x {i} 1\n")).collect();
    std::fs::write(&path, text).unwrap();
    let config = ReaderConfig::builder()
        .file(path.to_string_lossy())
        .input(InputConfig::dense("x", 2))
        .trace_level(0)
        .build()
        .unwrap();
    let options = PipelineOptions {
        loader_threads: 2,
        packer_threads: 1,
        prefetch: 1,
        part_bytes: 1,
        memory_budget: None,
        parse_while_indexing: true,
        pin_packers: false,
    };
    let source = MinibatchSource::<f32>::with_options(
        &config,
        ReadLimits::default(),
        Box::new(|_, _| {}),
        options,
    )
    .unwrap();
    let shared = SharedArc::clone(&source.shared);
    shared.cache.close();
    let loads = source.loads.clone().unwrap();
    for part in 0..shared.parts.parts.len() as u32 {
        loads.send(part).unwrap();
    }
    drop(loads);
    drop(source);
    assert_eq!(shared.chunks_loaded.load(Ordering::Relaxed), 0);
    assert_eq!(shared.bytes_read.load(Ordering::Relaxed), 0);
}

/// A sequence loaded alone (what the first minibatch after a start does for the parts not
/// loaded yet) is the same as in its part at every part size: the same values, and the
/// same warnings and invalid sequences charged with it, also those of the sequences
/// without samples it carries (before it, or after it as its part's last).
#[test]
fn a_sequence_loaded_alone_is_the_same_as_in_its_part() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.ctf");
    std::fs::write(
        &path,
        "0 |x 1 2 |y 0:1\n1 |x 1 |y 0:1\n2 |x 5 6\n3 |x oops 2 |y 0:1\n4 |x 3 4 |y 0:1\n\
         5 |x 7 8\n6 |x 9 9\n6 |y 1:1\n7 |x 1 |y 2:1\n8 |x 2 2\n9 |y 3:1\n10 |x 4 4\n",
    )
    .unwrap();
    let mut y = InputConfig::sparse("y", 7);
    y.defines_mb_size = true;
    let config = ReaderConfig::builder()
        .file(path.to_string_lossy())
        .input(InputConfig::dense("x", 2))
        .input(y)
        .chunk_size_in_bytes(60)
        .max_errors(100)
        .trace_level(1)
        .build()
        .unwrap();
    let mut indexing = IndexingOptions::for_config(&config);
    indexing.on_warning = Arc::new(|_| {});
    let index = build_index(&config, &indexing).unwrap().index;
    let (mut with_notes, mut before, mut after) = (0, 0, 0);
    for part_bytes in [1, 20, 45, 1 << 20] {
        let (parts, _) = Parts::new(&index, part_bytes, &[]);
        let mut loader = ChunkLoader::<f32>::new(Arc::clone(&index), &config);
        for (part, (chunk, bounds)) in parts.parts.iter().enumerate() {
            let mut parsed = ParsedChunk::new(&config.inputs);
            loader
                .load_part(*chunk, bounds.clone(), &mut parsed)
                .unwrap();
            let whole = LoadedChunk::new(&index, parsed);
            let first = index.chunk(*chunk).sequences.start;
            for within in bounds.clone() {
                if index.chunk_sequences(*chunk)[within as usize].samples == 0 {
                    continue; // not on the timeline
                }
                let range = quick_range(&index, &parts, *chunk, within, part as u32);
                before += usize::from(range.start < within);
                after += usize::from(range.end > within + 1);
                let mut parsed = ParsedChunk::new(&config.inputs);
                loader
                    .load_part(*chunk, range.clone(), &mut parsed)
                    .unwrap();
                let alone = LoadedChunk::new(&index, parsed);
                let what = format!("sequence {within} of chunk {chunk}, parts of {part_bytes} B");
                assert_eq!(
                    sequence_of(&alone, within - range.start),
                    sequence_of(&whole, within - bounds.start),
                    "{what}"
                );
                let ordinal = first + within;
                let charged_alone = charged(&config, &index, &alone, within - range.start, ordinal);
                let charged_whole =
                    charged(&config, &index, &whole, within - bounds.start, ordinal);
                with_notes += usize::from(!charged_whole.0.is_empty());
                assert_eq!(charged_alone, charged_whole, "{what}");
            }
        }
    }
    // The file exercises what it is meant to: notes, and carried sequences on both sides.
    assert!(
        with_notes > 0 && before > 0 && after > 0,
        "{with_notes} {before} {after}"
    );
}
