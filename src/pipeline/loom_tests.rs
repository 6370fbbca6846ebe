//! Loom models of the pipeline: the chunk cache against a loader's inserts, and the real
//! threaded engine ([`MinibatchSource`]) on a tiny corpus, with one loader thread, its
//! planner and packer, and the consumer (four threads, every channel of capacity 1).
//!
//! The corpus is a real file of three one-line sequences, one chunk each, written once
//! outside the models; only the engine's synchronization is modelled (file reads are plain
//! calls). Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib
//! loom` (`.ci/run` does, in its own target directory).

use std::sync::OnceLock;

use super::cache::{ChunkCache, Request};
use super::engine::{MinibatchSource, PipelineOptions};
use crate::config::{InputConfig, ReaderConfig};
use crate::minibatch::Minibatch;
use crate::source::{ReadLimits, SourceError};
use crate::sync::{thread, Arc};

/// (a) Cache pin and evict against a loader's inserts: capacity 1, two chunks. The taker
/// holds chunk 0 while chunk 1 arrives; whatever the interleaving, every take gets the
/// right chunk (re-requesting one evicted before it was taken, as the packer does), and a
/// chunk held by the taker is never evicted.
#[test]
fn loom_cache_pins_what_is_held_and_evicts_the_rest() {
    loom::model(|| {
        let cache = Arc::new(ChunkCache::<u32, ()>::new(Some(1)));
        assert_eq!(cache.request(0), Request::Load);
        assert_eq!(cache.request(1), Request::Load);
        let loader = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                cache.insert(0, Ok(Arc::new(100)), 1);
                cache.insert(1, Ok(Arc::new(101)), 1);
            })
        };
        let take = |chunk: u32| loop {
            match cache.take(chunk) {
                Ok(Some(Ok(loaded))) => return loaded,
                Ok(Some(Err(_))) => panic!("no load fails here"),
                Ok(None) => {
                    // Evicted before it was taken: load it again, as the packer would.
                    if cache.request(chunk) == Request::Load {
                        cache.insert(chunk, Ok(Arc::new(100 + chunk)), 1);
                    }
                }
                Err(_) => panic!("the cache is not closed"),
            }
        };
        let held = take(0);
        assert_eq!(*held, 100);
        let second = take(1);
        assert_eq!(*second, 101);
        loader.join().unwrap();
        // Both are held, so both are pinned: neither was evicted by the other's insert.
        assert_eq!(cache.len(), 2);
        drop(held);
        drop(second);
        cache.close();
        assert!(cache.take(0).is_err());
    });
}

/// The corpus files of the engine models, written once: three sequences (ids 0, 1, 2) of
/// one sample each, whose values are 1, 2, 3; in the second file the third is malformed.
fn corpus(malformed: bool) -> ReaderConfig {
    static FILES: OnceLock<(tempfile::TempDir, [ReaderConfig; 2])> = OnceLock::new();
    let (_, configs) = FILES.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let configs = [("good.ctf", "2 |x 3\n"), ("bad.ctf", "2 |x 3x\n")].map(|(name, third)| {
            let path = dir.path().join(name);
            std::fs::write(&path, format!("0 |x 1\n1 |x 2\n{third}")).expect("write the corpus");
            ReaderConfig::builder()
                .file(path.to_string_lossy())
                .input(InputConfig::dense("x", 1))
                .randomize(false)
                .chunk_size_in_bytes(1)
                .build()
                .expect("a valid configuration")
        });
        (dir, configs)
    });
    configs[usize::from(malformed)].clone()
}

/// Runs an engine model with at most one preemption per execution: the engine's four
/// threads make far more interleavings than the channel models, and one preemption already
/// covers every order of the actors' channel and cache steps.
fn engine_model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(builder.preemption_bound.map_or(1, |b| b.min(1)));
    builder.check(f);
}

fn options() -> PipelineOptions {
    PipelineOptions {
        loader_threads: 1,
        packer_threads: 1,
        prefetch: 1,
        part_bytes: 1,
        memory_budget: None,
        parse_while_indexing: true,
        pin_packers: false,
    }
}

fn source(config: &ReaderConfig) -> MinibatchSource<f32> {
    MinibatchSource::with_options(
        config,
        ReadLimits::default(),
        Box::new(|_, _| {}),
        options(),
    )
    .expect("the engine starts")
}

fn values(batch: &Minibatch<f32>) -> Vec<f32> {
    batch.streams[0].values.clone()
}

/// (b) The whole corpus arrives in order, then the end, then the engine shuts down.
#[test]
fn loom_engine_delivers_in_order_and_shuts_down() {
    let config = corpus(false);
    engine_model(move || {
        let mut s = source(&config);
        for expected in [1.0, 2.0, 3.0] {
            let batch = s.next_minibatch(1).unwrap().expect("a minibatch");
            assert_eq!(values(&batch), vec![expected]);
        }
        assert!(s.next_minibatch(1).unwrap().is_none());
    });
}

/// (c) Dropping the engine after one minibatch, while the planner and packer block on
/// full channels (or wait for a chunk), stops and joins every thread.
#[test]
fn loom_engine_drop_mid_prefetch_joins_every_thread() {
    let config = corpus(false);
    engine_model(move || {
        let mut s = source(&config);
        let batch = s.next_minibatch(1).unwrap().expect("a minibatch");
        assert_eq!(values(&batch), vec![1.0]);
        drop(s);
        // The minibatch outlives the engine; its buffers go back to a pool nobody uses.
        assert_eq!(values(&batch), vec![1.0]);
    });
}

/// (d) A parse error reaches the consumer in order: the two good minibatches first, then
/// the error (maxErrors = 0), never a hang.
#[test]
fn loom_engine_error_reaches_the_consumer_in_order() {
    let config = corpus(true);
    engine_model(move || {
        let mut s = source(&config);
        assert_eq!(values(&s.next_minibatch(1).unwrap().unwrap()), vec![1.0]);
        assert_eq!(values(&s.next_minibatch(1).unwrap().unwrap()), vec![2.0]);
        match s.next_minibatch(1) {
            Err(SourceError::Data(e)) => assert!(e.to_string().contains("bad.ctf:3"), "{e}"),
            other => panic!(
                "expected the parse error, got {:?}",
                other.map(|b| b.is_some())
            ),
        }
    });
}

/// (e) A restore during prefetch: with the planner and packer blocked on full channels (or
/// waiting for a chunk), the restore stops and joins them and stands at the checkpoint.
/// (What the restarted threads then deliver is checked against the reference engine in
/// `tests/pipeline.rs`; loom's limit of five threads per model leaves no room for them.)
#[test]
fn loom_engine_restore_during_prefetch() {
    let config = corpus(false);
    engine_model(move || {
        let mut s = source(&config);
        assert_eq!(values(&s.next_minibatch(1).unwrap().unwrap()), vec![1.0]);
        let checkpoint = s.checkpoint();
        assert_eq!(values(&s.next_minibatch(1).unwrap().unwrap()), vec![2.0]);
        s.restore(&checkpoint).unwrap();
        assert_eq!(s.position(), checkpoint.position);
        assert_eq!(s.checkpoint(), checkpoint);
    });
}
