//! Property tests of the two engines, the threaded `MinibatchSource` and the single-threaded
//! `ReferenceSource`, on generated corpora (`props_support::corpus`: one to three files,
//! valid data rendered with random variations, some damaged at random) under random
//! configurations (randomized or not, either randomizer, windows in chunks or samples, chunk
//! sizes down to one sequence, frame mode, `keepDataInMemory`, error budgets above and below
//! the corpus's invalid sequences) and random engine options (loaders, packers, prefetch,
//! part sizes, memory budgets, parsing while indexing).
//!
//! 1. One sweep, read whole: each engine delivers every valid sequence the naive reference
//!    reads from the files exactly once, with its values bit for bit, and nothing else; or,
//!    when the corpus has more invalid sequences than `maxErrors`, fails having delivered
//!    only valid ones. Split among ranks, the ranks' sweeps together are the same set.
//! 2. A random script of calls (minibatches of changing sizes, checkpoints, restores to any
//!    earlier checkpoint, partition changes) gives the same result on both engines at every
//!    step: minibatches, errors, checkpoints.
//!
//! Expected sequences come from the model and the naive reference, never from the engines.
//! `PROPS_SCALE=N` runs N times the cases.

mod engine_support;
#[allow(dead_code)] // the parser tests use the rest
mod props_support;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ctf_reader::minibatch::Minibatch;
use ctf_reader::reader::DiagnosticSink;
use ctf_reader::source::{MinibatchSource, PipelineOptions, ReadLimits, ReferenceSource};
use ctf_reader::timeline::checkpoint::Checkpoint;
use ctf_reader::{Element, Precision, RandomizerKind, ReaderConfig, Severity, StorageFormat};
use proptest::prelude::*;

use engine_support::sweeps;
use props_support::corpus::{gen_corpus, Corpus};
use props_support::entropy::{config, entropy, Src};
use props_support::run::{Flt, SampleSnap};

/// A corpus written to files, the configuration that reads it and the threaded engine's
/// options.
struct Setup {
    /// Holds the files.
    _dir: tempfile::TempDir,
    corpus: Corpus,
    cfg: ReaderConfig,
    options: PipelineOptions,
}

fn precision<T: Element>() -> Precision {
    if std::mem::size_of::<T>() == 4 {
        Precision::Float
    } else {
        Precision::Double
    }
}

/// Draws a corpus and a configuration; `None` when the reference leaves the corpus open.
fn gen_setup<T: Flt>(src: &mut Src) -> Option<Setup> {
    let corpus = gen_corpus::<T>(src, 1, 3, 15)?;
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<String> = corpus
        .texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let path = dir.path().join(format!("f{i}.ctf"));
            std::fs::write(&path, text).unwrap();
            path.to_string_lossy().into_owned()
        })
        .collect();
    let invalid = corpus.invalid.len() as u64;
    let mut builder = ReaderConfig::builder()
        .files(files)
        .inputs(corpus.inputs.clone())
        .precision(precision::<T>())
        .skip_sequence_ids(corpus.options.skip_sequence_ids)
        .frame_mode(corpus.options.frame_mode)
        .randomize(!src.chance(25))
        .randomization_seed(src.below(1000) as u64)
        .randomizer(if src.chance(30) {
            RandomizerKind::Cntk
        } else {
            RandomizerKind::Block
        })
        .chunk_size_in_bytes(match src.below(4) {
            0 => 33_554_432,
            1 => 0,
            _ => src.range(1, 400) as u64,
        })
        .keep_data_in_memory(src.chance(30))
        // Below the invalid sequences one time in five: the read must fail.
        .max_errors(if invalid > 0 && src.chance(20) {
            src.below(invalid as usize) as u64
        } else {
            invalid + src.below(2) as u64
        })
        .trace_level(src.below(3) as u32);
    builder = match src.below(3) {
        0 => builder,
        1 => builder.randomization_window(src.range(1, 4) as u64),
        _ => builder
            .randomization_window(src.range(1, 60) as u64)
            .sample_based_randomization_window(true),
    };
    let cfg = match builder.build() {
        Ok(cfg) => cfg,
        // The parser's inputs may differ only in case; a configuration's may not.
        Err(e) if e.message().contains("collide") => return None,
        Err(e) => panic!("a configuration the generator should not make: {e}"),
    };
    let options = PipelineOptions {
        loader_threads: src.range(1, 4),
        packer_threads: src.range(1, 3),
        prefetch: src.range(1, 4),
        part_bytes: *src.pick(&[1 << 20, 1, 64, 300, 4096]),
        memory_budget: *src.pick(&[None, Some(1), Some(2_000), Some(50_000)]),
        parse_while_indexing: !src.chance(30),
        pin_packers: false,
    };
    Some(Setup {
        _dir: dir,
        corpus,
        cfg,
        options,
    })
}

fn quiet() -> DiagnosticSink {
    Box::new(|_, _| {})
}

/// One engine or the other, behind the calls the properties make.
enum Engine<T: Element> {
    Reference(Box<ReferenceSource<T>>),
    Threaded(Box<MinibatchSource<T>>),
}

impl<T: Element> Engine<T> {
    fn open(
        setup: &Setup,
        limits: ReadLimits,
        threaded: bool,
        sink: DiagnosticSink,
    ) -> Result<Self, String> {
        if threaded {
            MinibatchSource::with_options(&setup.cfg, limits, sink, setup.options)
                .map(|s| Engine::Threaded(Box::new(s)))
        } else {
            ReferenceSource::new(&setup.cfg, limits, sink).map(|s| Engine::Reference(Box::new(s)))
        }
        .map_err(|e| e.to_string())
    }

    fn next(&mut self, size: u64) -> Result<Option<Minibatch<T>>, String> {
        match self {
            Engine::Reference(s) => s.next_minibatch(size).map(|m| m.map(|m| m.into_inner())),
            Engine::Threaded(s) => s.next_minibatch(size).map(|m| m.map(|m| m.into_inner())),
        }
        .map_err(|e| e.to_string())
    }

    fn checkpoint(&self) -> Checkpoint {
        match self {
            Engine::Reference(s) => s.checkpoint(),
            Engine::Threaded(s) => s.checkpoint(),
        }
    }

    fn restore(&mut self, c: &Checkpoint) -> Result<(), String> {
        match self {
            Engine::Reference(s) => s.restore(c),
            Engine::Threaded(s) => s.restore(c),
        }
        .map_err(|e| e.to_string())
    }

    fn set_partition(&mut self, rank: u32, workers: u32) -> Result<(), String> {
        match self {
            Engine::Reference(s) => s.set_partition(rank, workers),
            Engine::Threaded(s) => s.set_partition(rank, workers),
        }
        .map_err(|e| e.to_string())
    }
}

/// The sequences of a minibatch: key and, per input, the samples as IEEE bits.
fn sequences_of<T: Flt>(mb: &Minibatch<T>) -> Vec<(u64, Vec<Vec<SampleSnap>>)> {
    (0..mb.sequences.len())
        .map(|i| {
            let inputs = mb
                .streams
                .iter()
                .map(|s| {
                    (s.sequence_starts[i]..s.sequence_starts[i + 1])
                        .map(|j| match s.format {
                            StorageFormat::Dense => SampleSnap::Dense(
                                s.values[j * s.dim..(j + 1) * s.dim]
                                    .iter()
                                    .map(|v| v.bits())
                                    .collect(),
                            ),
                            StorageFormat::Sparse => {
                                let entries =
                                    s.column_starts[j] as usize..s.column_starts[j + 1] as usize;
                                SampleSnap::Sparse(
                                    s.row_indices[entries.clone()]
                                        .iter()
                                        .zip(&s.values[entries])
                                        .map(|(&r, v)| (r, v.bits()))
                                        .collect(),
                                )
                            }
                        })
                        .collect()
                })
                .collect();
            (mb.sequences[i].key, inputs)
        })
        .collect()
}

/// Sequences as delivered: key and, per input, the samples as IEEE bits.
type Delivered = Vec<(u64, Vec<Vec<SampleSnap>>)>;

/// What one sweep delivered.
struct Sweep {
    /// The sequences, sorted.
    delivered: Delivered,
    /// The error that ended the read, if one did.
    failed: Option<String>,
    /// Errors reported to the diagnostic sink (each skipped invalid sequence's first).
    errors_reported: usize,
}

/// Reads one sweep of `rank` of `workers` in minibatches of `size`.
fn read_sweep<T: Flt>(setup: &Setup, threaded: bool, rank: u32, workers: u32, size: u64) -> Sweep {
    let errors = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&errors);
    let sink: DiagnosticSink = Box::new(move |_, d| {
        if d.severity == Severity::Error {
            counted.fetch_add(1, Ordering::Relaxed);
        }
    });
    let mut delivered = Vec::new();
    let failed = (|| {
        let mut engine = Engine::<T>::open(setup, sweeps(1), threaded, sink)?;
        if workers > 1 {
            engine.set_partition(rank, workers)?;
        }
        while let Some(mb) = engine.next(size)? {
            delivered.extend(sequences_of(&mb));
        }
        Ok(())
    })()
    .err();
    delivered.sort();
    Sweep {
        delivered,
        failed,
        errors_reported: errors.load(Ordering::Relaxed),
    }
}

/// Property 1 (see the module comment).
fn check_one_sweep<T: Flt>(bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut src = Src::new(bytes);
    let Some(setup) = gen_setup::<T>(&mut src) else {
        return Ok(());
    };
    // Valid sequences have unique keys, also across files of both modes (SPEC §1: a line-mode
    // file's keys are line numbers, which another file's ids may repeat, and then the later
    // sequence is invalid). Sequences are compared sorted.
    let mut want: Delivered = setup
        .corpus
        .valid
        .iter()
        .map(|s| (s.key, s.inputs.clone()))
        .collect();
    want.sort();
    let must_fail = setup.corpus.invalid.len() as u64 > setup.cfg.max_errors;
    let size = src.range(1, 40) as u64;
    let workers = src.range(1, 3) as u32;
    let context = || {
        format!(
            "files {:?}, {:?}, {:?}, minibatches of {size}",
            setup
                .corpus
                .texts
                .iter()
                .map(|t| String::from_utf8_lossy(t).into_owned())
                .collect::<Vec<_>>(),
            setup.cfg,
            setup.options
        )
    };
    let invalid = setup.corpus.invalid.len() as u64;
    for threaded in [false, true] {
        let Sweep {
            delivered: got,
            failed,
            errors_reported,
        } = read_sweep::<T>(&setup, threaded, 0, 1, size);
        // Every invalid sequence is reported once (the one over the budget by the error that
        // ends the read), also those in chunks that hold no sample.
        if setup.cfg.trace_level >= 1 {
            prop_assert_eq!(
                errors_reported as u64,
                invalid.min(setup.cfg.max_errors),
                "threaded {}: errors reported; {}",
                threaded,
                context()
            );
        }
        if must_fail || want.is_empty() {
            prop_assert!(
                failed.is_some() || want.is_empty() && got.is_empty(),
                "threaded {}: no error, with more invalid sequences than maxErrors; {}",
                threaded,
                context()
            );
            let mut left = want.clone();
            for seq in &got {
                let Ok(at) = left.binary_search(seq) else {
                    return Err(TestCaseError::fail(format!(
                        "threaded {threaded}: {seq:?} is not a valid sequence left; {}",
                        context()
                    )));
                };
                left.remove(at);
            }
        } else {
            prop_assert_eq!(&failed, &None, "threaded {}; {}", threaded, context());
            prop_assert_eq!(&got, &want, "threaded {}; {}", threaded, context());
        }
    }
    if workers > 1 && !must_fail && !want.is_empty() {
        let mut union = Vec::new();
        for rank in 0..workers {
            let Sweep {
                delivered: got,
                failed,
                ..
            } = read_sweep::<T>(&setup, true, rank, workers, size);
            prop_assert_eq!(
                &failed,
                &None,
                "rank {} of {}; {}",
                rank,
                workers,
                context()
            );
            union.extend(got);
        }
        union.sort();
        prop_assert_eq!(&union, &want, "{} ranks together; {}", workers, context());
    }
    Ok(())
}

/// One call of a script.
#[derive(Debug)]
enum Call {
    Next(u64),
    Restore(usize),
    Partition(u32, u32),
}

/// Property 2 (see the module comment).
fn check_script<T: Flt>(bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut src = Src::new(bytes);
    let Some(setup) = gen_setup::<T>(&mut src) else {
        return Ok(());
    };
    let limits = match src.below(3) {
        0 => sweeps(src.range(1, 3) as u64),
        1 => ReadLimits {
            max_samples: Some(src.range(1, 200) as u64),
            max_sweeps: None,
            epoch_size: None,
        },
        _ => ReadLimits {
            max_samples: None,
            max_sweeps: Some(src.range(1, 3) as u64),
            epoch_size: Some(src.range(1, 50) as u64),
        },
    };
    let script: Vec<Call> = (0..src.range(1, 40))
        .map(|_| match src.below(10) {
            0 => Call::Restore(src.u32() as usize),
            1 => {
                let workers = src.range(1, 3) as u32;
                Call::Partition(src.below(workers as usize) as u32, workers)
            }
            _ => Call::Next(src.range(1, 30) as u64),
        })
        .collect();
    let context = || {
        format!(
            "files {:?}, {:?}, {:?}, {:?}, script {:?}",
            setup
                .corpus
                .texts
                .iter()
                .map(|t| String::from_utf8_lossy(t).into_owned())
                .collect::<Vec<_>>(),
            setup.cfg,
            setup.options,
            limits,
            script
        )
    };
    let reference = Engine::<T>::open(&setup, limits.clone(), false, quiet());
    let threaded = Engine::<T>::open(&setup, limits.clone(), true, quiet());
    let (mut reference, mut threaded) = match (reference, threaded) {
        (Ok(r), Ok(t)) => (r, t),
        (r, t) => {
            prop_assert_eq!(r.err(), t.err(), "opening; {}", context());
            return Ok(());
        }
    };
    let mut checkpoints = vec![reference.checkpoint()];
    for (step, call) in script.iter().enumerate() {
        match *call {
            Call::Next(size) => {
                let a = reference.next(size);
                let b = threaded.next(size);
                prop_assert_eq!(&a, &b, "step {} ({:?}); {}", step, call, context());
            }
            Call::Restore(k) => {
                let c = checkpoints[k % checkpoints.len()];
                let a = reference.restore(&c);
                let b = threaded.restore(&c);
                prop_assert_eq!(&a, &b, "step {} ({:?}); {}", step, call, context());
            }
            Call::Partition(rank, workers) => {
                let a = reference.set_partition(rank, workers);
                let b = threaded.set_partition(rank, workers);
                prop_assert_eq!(&a, &b, "step {} ({:?}); {}", step, call, context());
            }
        }
        let c = reference.checkpoint();
        prop_assert_eq!(
            c,
            threaded.checkpoint(),
            "step {} ({:?}); {}",
            step,
            call,
            context()
        );
        checkpoints.push(c);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn one_sweep_delivers_the_valid_sequences_once_f32(bytes in entropy(6_000)) {
        check_one_sweep::<f32>(&bytes)?;
    }

    #[test]
    fn one_sweep_delivers_the_valid_sequences_once_f64(bytes in entropy(6_000)) {
        check_one_sweep::<f64>(&bytes)?;
    }

    #[test]
    fn scripts_give_the_same_results_on_both_engines_f32(bytes in entropy(6_000)) {
        check_script::<f32>(&bytes)?;
    }

    #[test]
    fn scripts_give_the_same_results_on_both_engines_f64(bytes in entropy(6_000)) {
        check_script::<f64>(&bytes)?;
    }
}

/// The properties are not vacuous: most generated setups are read (not left open by the
/// reference), and among them are corpora of several files, with invalid sequences, with
/// more invalid sequences than `maxErrors`, in frame mode, and read on several loaders.
#[test]
fn generated_setups_cover_the_cases() {
    let (mut read, mut files, mut invalid, mut over, mut frames, mut loaders) = (0, 0, 0, 0, 0, 0);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..300 {
        let bytes: Vec<u8> = (0..6_000)
            .map(|_| {
                // xorshift64: any fixed byte strings do
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let Some(setup) = gen_setup::<f32>(&mut Src::new(&bytes)) else {
            continue;
        };
        read += 1;
        assert!(setup.cfg.files.iter().all(|f| Path::new(f).exists()));
        files += usize::from(setup.cfg.files.len() > 1);
        invalid += usize::from(!setup.corpus.invalid.is_empty());
        over += usize::from(setup.corpus.invalid.len() as u64 > setup.cfg.max_errors);
        frames += usize::from(setup.cfg.frame_mode);
        loaders += usize::from(setup.options.loader_threads > 1);
    }
    assert!(read >= 150, "{read} of 300 setups read");
    for (what, n) in [
        ("several files", files),
        ("invalid sequences", invalid),
        ("over maxErrors", over),
        ("frame mode", frames),
        ("several loaders", loaders),
    ] {
        assert!(n >= 10, "{n} of {read} setups with {what}");
    }
}
