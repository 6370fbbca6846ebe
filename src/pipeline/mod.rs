//! The threaded engine: loader threads, a packer thread and the chunk cache they share
//! ([`engine::MinibatchSource`]). It produces exactly the minibatches of the single-threaded
//! reference engine, [`crate::source::ReferenceSource`].

pub mod cache;
pub mod engine;
