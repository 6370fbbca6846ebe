//! Timeline tests on real indexes of generated files, against naive expectations.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::config::{InputConfig, RandomizerKind};
use crate::index::build::{CacheMode, IndexingOptions};
use crate::index::build_index;

/// A corpus of sequences with the given sample counts (ids 0, 1, ...), indexed with chunks
/// of about `chunk_size` bytes; also returns the configuration and keeps the files alive.
/// A sequence of 0 samples is one line of an input outside the configuration.
struct Corpus {
    _dir: tempfile::TempDir,
    config: ReaderConfig,
    index: Arc<CorpusIndex>,
}

fn corpus(lengths: &[u32], chunk_size: u64, edit: impl Fn(ReaderConfig) -> ReaderConfig) -> Corpus {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.ctf");
    let mut text = String::new();
    for (id, &len) in lengths.iter().enumerate() {
        for t in 0..len {
            text.push_str(&format!("{id} |x {t}\n"));
        }
        if len == 0 {
            text.push_str(&format!("{id} |unread 1\n"));
        }
    }
    std::fs::write(&path, text).unwrap();
    let config = ReaderConfig::builder()
        .file(path.to_string_lossy())
        .input(InputConfig::dense("x", 1))
        .chunk_size_in_bytes(chunk_size)
        .build()
        .unwrap();
    let config = edit(config);
    let mut options = IndexingOptions::for_config(&config);
    options.cache = CacheMode::Off;
    let index = build_index(&config, &options).unwrap().index;
    Corpus {
        _dir: dir,
        config,
        index,
    }
}

fn with(f: impl Fn(&mut ReaderConfig)) -> impl Fn(ReaderConfig) -> ReaderConfig {
    move |mut c| {
        f(&mut c);
        c
    }
}

/// The configuration edit of an order: randomized or not, by `kind`, in windows of `window`
/// chunks.
fn ordered(
    randomize: bool,
    kind: RandomizerKind,
    window: u64,
) -> impl Fn(ReaderConfig) -> ReaderConfig {
    with(move |c| {
        c.randomize = randomize;
        c.randomizer = kind;
        c.randomization_window = Some(window);
    })
}

fn timeline(c: &Corpus) -> Timeline {
    Timeline::new(Arc::clone(&c.index), &c.config).unwrap()
}

/// Every selection until `end`, with size `size`.
fn run(t: &mut Timeline, size: u64, end: u64) -> Vec<Selection> {
    std::iter::from_fn(|| t.next_minibatch(size, end)).collect()
}

fn keys(c: &Corpus, selections: &[Selection]) -> Vec<u64> {
    selections
        .iter()
        .flat_map(|s| {
            s.sequences
                .iter()
                .map(|&o| c.index.sequences[o as usize].key)
        })
        .collect()
}

const LENGTHS: [u32; 23] = [
    3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6,
];

#[test]
fn every_sequence_once_per_sweep_and_order_independent_of_size() {
    for randomize in [false, true] {
        for kind in [RandomizerKind::Block, RandomizerKind::Cntk] {
            let c = corpus(&LENGTHS, 40, ordered(randomize, kind, 3));
            let n = c.index.total_samples();
            assert_eq!(n, LENGTHS.iter().map(|&l| u64::from(l)).sum::<u64>());
            let by_128 = run(&mut timeline(&c), 128, 3 * n);
            let by_64 = run(&mut timeline(&c), 64, 3 * n);
            let by_7 = run(&mut timeline(&c), 7, 3 * n);
            let by_1 = run(&mut timeline(&c), 1, 3 * n);
            assert_eq!(keys(&c, &by_64), keys(&c, &by_128));
            assert_eq!(keys(&c, &by_64), keys(&c, &by_7));
            assert_eq!(keys(&c, &by_64), keys(&c, &by_1));
            let all = keys(&c, &by_7);
            assert_eq!(all.len(), 3 * LENGTHS.len());
            for sweep in all.chunks(LENGTHS.len()) {
                let mut sorted = sweep.to_vec();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..LENGTHS.len() as u64).collect::<Vec<_>>());
            }
            if !randomize {
                assert_eq!(&all[..LENGTHS.len()], &(0..23).collect::<Vec<u64>>()[..]);
            }
            // Sizes: within the budget unless one sequence; positions chain.
            let mut at = 0;
            for s in &by_7 {
                assert_eq!(s.start, at);
                assert_eq!(s.end - s.start, s.global_samples);
                assert!(s.global_samples <= 7 || s.sequences.len() == 1, "{s:?}");
                at = s.end;
            }
        }
    }
}

#[test]
fn sequences_without_samples_take_no_place_in_any_order() {
    // Every third sequence holds no sample of the configured input.
    let lengths: Vec<u32> = (0..48)
        .map(|i| if i % 3 == 1 { 0 } else { 1 + i % 4 })
        .collect();
    let with_samples: Vec<u64> = (0..48).filter(|i| i % 3 != 1).collect();
    for randomize in [false, true] {
        for kind in [RandomizerKind::Block, RandomizerKind::Cntk] {
            for window in [1, 3, 128] {
                let c = corpus(&lengths, 30, ordered(randomize, kind, window));
                let what = format!("randomize {randomize} {kind:?} window {window}");
                assert_eq!(c.index.sequences.len(), lengths.len(), "{what}");
                let n = c.index.total_samples();
                let selections = run(&mut timeline(&c), 5, 2 * n);
                for s in &selections {
                    for &o in &s.sequences {
                        assert!(c.index.sequences[o as usize].samples > 0, "{what}: {s:?}");
                    }
                }
                let all = keys(&c, &selections);
                assert_eq!(all.len(), 2 * with_samples.len(), "{what}");
                for sweep in all.chunks(with_samples.len()) {
                    let mut sorted = sweep.to_vec();
                    sorted.sort_unstable();
                    assert_eq!(sorted, with_samples, "{what}");
                }
            }
        }
    }
}

#[test]
fn sweep_end_marks_minibatches_reaching_a_sweep_end() {
    let c = corpus(&LENGTHS, 40, |c| c);
    let n = c.index.total_samples();
    for s in run(&mut timeline(&c), 10, 4 * n) {
        let boundary = (s.start / n + 1) * n;
        assert_eq!(s.sweep_end, s.end >= boundary, "{s:?}");
    }
}

/// CNTK-BEHAVIOUR §7.2: a 4-sample file of 1-sample sequences.
#[test]
fn cntk_v2_limit_tables() {
    let c = corpus(&[1, 1, 1, 1], 1 << 20, |c| c);
    let shape = |size, end| -> Vec<(u64, bool)> {
        run(&mut timeline(&c), size, end)
            .iter()
            .map(|s| (s.global_samples, s.sweep_end))
            .collect()
    };
    assert_eq!(shape(10, 1), [(1, false)]);
    assert_eq!(shape(5, 3 * 4), [(5, true), (5, true), (2, true)]);
    assert_eq!(shape(5, 11), [(5, true), (5, true), (1, false)]);
}

/// A sequence that starts before the end is delivered whole.
#[test]
fn the_end_cuts_before_a_sequence_never_inside() {
    let c = corpus(&[3, 3, 3, 3], 1 << 20, with(|c| c.randomize = false));
    let got: Vec<u64> = run(&mut timeline(&c), 90, 10)
        .iter()
        .map(|s| s.global_samples)
        .collect();
    assert_eq!(got, [12]);
    let got: Vec<u64> = run(&mut timeline(&c), 6, 7)
        .iter()
        .map(|s| s.global_samples)
        .collect();
    assert_eq!(got, [6, 3]);
}

#[test]
fn sweep_s_with_seed_x_is_sweep_0_with_seed_x_plus_s() {
    let c5 = corpus(&LENGTHS, 30, with(|c| c.randomization_seed = 5));
    let c7 = corpus(&LENGTHS, 30, with(|c| c.randomization_seed = 7));
    let n = c5.index.total_samples();
    let sweep2_seed5 = keys(&c5, &run(&mut timeline(&c5), 1, 3 * n))[2 * 23..].to_vec();
    let sweep0_seed7 = keys(&c7, &run(&mut timeline(&c7), 1, n));
    assert_eq!(sweep2_seed5, sweep0_seed7);
}

#[test]
fn seeking_to_any_minibatch_end_continues_identically() {
    let c = corpus(&LENGTHS, 25, with(|c| c.randomization_window = Some(2)));
    let n = c.index.total_samples();
    let whole = run(&mut timeline(&c), 9, 3 * n);
    for k in 0..whole.len() {
        let mut t = timeline(&c);
        t.seek(whole[k].start);
        assert_eq!(t.position(), whole[k].start);
        assert_eq!(run(&mut t, 9, 3 * n), whole[k..].to_vec(), "restart at {k}");
    }
    // A position inside a sequence rounds up to the next sequence start.
    let starts: Vec<u64> = run(&mut timeline(&c), 1, 3 * n)
        .iter()
        .map(|s| s.start)
        .collect();
    for (i, pair) in starts.windows(2).enumerate() {
        if pair[1] - pair[0] > 1 {
            let mut t = timeline(&c);
            t.seek(pair[0] + 1);
            assert_eq!(t.position(), pair[1], "inside sequence {i}");
        }
    }
}

#[test]
fn workers_share_every_sweep_exactly_and_all_get_data() {
    for (chunk_size, window) in [(1u64 << 20, 128u64), (12, 128), (12, 2)] {
        let c = corpus(
            &LENGTHS,
            chunk_size,
            with(|c| c.randomization_window = Some(window)),
        );
        let n = c.index.total_samples();
        let single = run(&mut timeline(&c), 16, 2 * n);
        for workers in 1..=8u32 {
            let mut per_rank = Vec::new();
            for rank in 0..workers {
                let mut t = timeline(&c);
                t.set_partition(rank, workers);
                let selections = run(&mut t, 16, 2 * n);
                // Same global minibatches on every worker.
                assert_eq!(selections.len(), single.len());
                for (a, b) in selections.iter().zip(&single) {
                    assert_eq!((a.start, a.end, a.sweep_end), (b.start, b.end, b.sweep_end));
                    assert!(a.sequences.iter().all(|o| b.sequences.contains(o)));
                }
                let mine = keys(&c, &selections);
                assert!(!mine.is_empty(), "rank {rank} of {workers} got nothing");
                per_rank.push(selections);
            }
            for (i, global) in single.iter().enumerate() {
                let mut union: Vec<u32> = per_rank
                    .iter()
                    .flat_map(|s| s[i].sequences.iter().copied())
                    .collect();
                let len = union.len();
                union.sort_unstable();
                union.dedup();
                assert_eq!(union.len(), len, "disjoint");
                let mut expected = global.sequences.clone();
                expected.sort_unstable();
                assert_eq!(union, expected, "{workers} workers, minibatch {i}");
            }
        }
    }
}

#[test]
fn chunk_sharding_on_many_chunks_gives_each_worker_its_chunks() {
    let lengths: Vec<u32> = (0..400).map(|i| 1 + i % 5).collect();
    let c = corpus(&lengths, 30, with(|c| c.randomization_window = Some(64)));
    assert!(
        c.index.chunks.len() >= 64,
        "{} chunks",
        c.index.chunks.len()
    );
    let n = c.index.total_samples();
    let workers = 4;
    let mut chunks_of = BTreeMap::new();
    for rank in 0..workers {
        let mut t = timeline(&c);
        t.set_partition(rank, workers);
        assert!(t.sharding().by_chunk);
        let mut samples = 0u64;
        let mut global = 0u64;
        for s in run(&mut t, 64, n) {
            global += s.global_samples;
            for o in s.sequences {
                let chunk = c.index.chunks.partition_point(|ch| ch.sequences.end <= o);
                chunks_of.entry(chunk).or_insert_with(Vec::new).push(rank);
                samples += u64::from(c.index.sequences[o as usize].samples);
            }
        }
        // About a quarter of the samples each.
        assert!(
            samples * 5 > global && samples * 3 < global,
            "{samples} of {global}"
        );
    }
    for (chunk, ranks) in chunks_of {
        assert!(
            ranks.windows(2).all(|w| w[0] == w[1]),
            "chunk {chunk}: {ranks:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Restoring at a random minibatch boundary, with another size, continues the same
    /// concatenated order.
    #[test]
    fn restore_with_any_size_keeps_the_order(
        lengths in proptest::collection::vec(1u32..6, 1..40),
        chunk in 8u64..80,
        size_a in 1u64..20,
        size_b in 1u64..20,
        cut in 0usize..100,
        seed in 0u64..5,
    ) {
        let c = corpus(&lengths, chunk, with(|c| {
            c.randomization_seed = seed;
            c.randomization_window = Some(2);
        }));
        let n = c.index.total_samples();
        let whole = keys(&c, &run(&mut timeline(&c), size_a, 2 * n));
        let mut t = timeline(&c);
        let first: Vec<Selection> = std::iter::from_fn(|| t.next_minibatch(size_a, 2 * n))
            .take(cut % (whole.len() + 1))
            .collect();
        let mut resumed = timeline(&c);
        resumed.seek(t.position());
        let mut got = keys(&c, &first);
        got.extend(keys(&c, &run(&mut resumed, size_b, 2 * n)));
        prop_assert_eq!(got, whole);
    }
}

#[test]
fn a_timeline_taking_sweep_orders_from_one_ahead_selects_the_same() {
    let lengths: Vec<u32> = (0..40).map(|i| 1 + i % 4).collect();
    let c = corpus(&lengths, 20, with(|c| c.randomization_window = Some(3)));
    let n = timeline(&c).sweep_samples();
    let end = 5 * n;
    let expected = run(&mut timeline(&c), 7, end);
    // The planner's pattern: a second timeline runs up to 1.5 sweeps ahead and lends its
    // sweep orders; one lent order is skipped over by a seek.
    let mut t = timeline(&c);
    let mut ahead = timeline(&c);
    let mut got = Vec::new();
    while let Some(s) = t.next_minibatch(7, end) {
        while ahead.position() < s.end + n + n / 2 && ahead.next_minibatch(1, end).is_some() {}
        t.share_sweep_ahead(&ahead);
        got.push(s);
    }
    assert_eq!(got, expected);
    // Lent an order two sweeps ahead, then sought into the sweep between.
    let mut t = timeline(&c);
    let mut far = timeline(&c);
    far.seek(2 * n);
    t.share_sweep_ahead(&far);
    t.seek(n);
    let mut plain = timeline(&c);
    plain.seek(n);
    assert_eq!(run(&mut t, 5, end), run(&mut plain, 5, end));
}

#[test]
fn the_first_sequences_of_a_sweep_come_from_its_first_window_chunks() {
    let lengths: Vec<u32> = (0..60).map(|i| 1 + (i * 7) % 5).collect();
    for randomizer in [RandomizerKind::Block, RandomizerKind::Cntk] {
        for (window, sample_based) in [(1, false), (2, false), (3, false), (128, false), (9, true)]
        {
            let c = corpus(
                &lengths,
                24,
                with(|c| {
                    c.randomizer = randomizer;
                    c.randomization_window = Some(window);
                    c.sample_based_randomization_window = Some(sample_based);
                }),
            );
            let settings = order::OrderSettings::of(&c.config);
            for sweep in 0..3 {
                let plan = order::sweep_order(&c.index, &settings, sweep);
                let first = order::first_window_chunks(&c.index, &settings, sweep);
                let what = format!("{randomizer:?} window {window} ({sample_based}) sweep {sweep}");
                // They lead the sweep's chunk order...
                for (k, &chunk) in first.iter().enumerate() {
                    assert_eq!(plan.chunk_position[chunk as usize], k as u32, "{what}");
                }
                // ...and every sequence delivered in the first randomized chunk's span is
                // drawn from one of them.
                let leading = plan.chunk_position.iter().position(|&p| p == 0).unwrap();
                let span = c.index.chunks[leading]
                    .sequences
                    .clone()
                    .filter(|&o| c.index.sequences[o as usize].samples > 0)
                    .count();
                assert!(span > 0 && !first.is_empty(), "{what}");
                for ordinal in plan.sequences[..span].iter().map(|s| s.ordinal) {
                    let home = c
                        .index
                        .chunks
                        .iter()
                        .position(|ch| ch.sequences.contains(&ordinal));
                    assert!(first.contains(&(home.unwrap() as u32)), "{what}: {ordinal}");
                }
            }
        }
    }
    // Not randomized: nothing to load ahead of the order.
    let c = corpus(&lengths, 24, with(|c| c.randomize = false));
    let settings = order::OrderSettings::of(&c.config);
    assert!(order::first_window_chunks(&c.index, &settings, 0).is_empty());
}
