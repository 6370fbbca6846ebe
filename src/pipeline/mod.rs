//! The threaded engine: loader, planner and packer threads and the chunk cache they share
//! ([`engine::MinibatchSource`]). It produces exactly the minibatches of the single-threaded
//! reference engine, [`crate::source::ReferenceSource`].

mod affinity;
pub mod cache;
pub mod engine;
mod part_finder;

#[cfg(all(test, loom))]
mod loom_tests;
