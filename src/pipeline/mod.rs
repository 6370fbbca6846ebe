//! The threaded engine: loader threads, a packer thread and the chunk cache they share
//! ([`engine::ThreadedSource`]). It produces exactly the minibatches of the single-threaded
//! reference engine, [`crate::source::MinibatchSource`].

pub mod cache;
pub mod engine;
