//! Parser throughput on the benchmark shapes of `shared/bench/gen_ctf.py` (dense, sparse,
//! seq, ragged), generated at bench time with smaller N, and on the sparse and dense shapes
//! with fractional values (`support::fraction_shapes`), and on seed 004's rows
//! (`support::row_shapes`), parsed in memory on one core: as `f32`, and the `-doubles`
//! shapes as `f64`. Each parse is `parse_once` of `examples/parse_best_of.rs`, the tool for
//! comparing two builds (README "Comparing two builds of the parser").
//!
//! The `naive` group runs, on the same data in the same run, the naive single-thread
//! tokenize-and-parse of `examples/naive_parse.rs` (split on whitespace, `str::parse`): the
//! ratio of the two is what to compare across runs on a noisy machine.
//!
//! Run: `cargo bench --bench parse`. Needs `python3` and the generator at
//! `../shared/bench/gen_ctf.py` (or `$CTF_GEN_SCRIPT`).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ctf_reader::parser::{StreamOptions, StreamParser};

#[path = "../examples/parse_best_of.rs"]
mod best_of;
#[path = "../examples/naive_parse.rs"]
mod naive;
mod support;

use support::{fraction_shapes, generate, row_shapes, shapes};

fn bench_parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");
    group.sample_size(10);
    for shape in shapes()
        .into_iter()
        .chain(fraction_shapes())
        .chain(row_shapes())
    {
        let data = std::fs::read(generate(&shape)).expect("generated data is readable");
        group.throughput(Throughput::Bytes(data.len() as u64));
        if shape.name.ends_with("-doubles") {
            let mut parser = StreamParser::<f64>::new(&shape.inputs, StreamOptions::default());
            group.bench_function(format!("{}/f64", shape.name), |b| {
                b.iter(|| best_of::parse_once(&mut parser, &data).expect("valid data"))
            });
        } else {
            let mut parser = StreamParser::<f32>::new(&shape.inputs, StreamOptions::default());
            group.bench_function(format!("{}/f32", shape.name), |b| {
                b.iter(|| best_of::parse_once(&mut parser, &data).expect("valid data"))
            });
        }
    }
    group.finish();
    let mut group = c.benchmark_group("naive");
    group.sample_size(10);
    for shape in shapes()
        .into_iter()
        .chain(fraction_shapes())
        .chain(row_shapes())
    {
        let data = std::fs::read(generate(&shape)).expect("generated data is readable");
        group.throughput(Throughput::Bytes(data.len() as u64));
        group.bench_function(shape.name, |b| {
            b.iter(|| {
                let mut totals = naive::Totals::default();
                for line in data.split(|&b| b == b'\n') {
                    naive::parse_line(line, &mut totals);
                }
                assert_eq!(totals.unparsed, 0, "benchmark data must parse");
                totals.values
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_parse);
criterion_main!(benches);
