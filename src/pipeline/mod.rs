//! The threaded engine's parts (issue 5, in progress): so far the chunk cache its actors
//! share. The single-threaded reference engine is [`crate::source::MinibatchSource`].

pub mod cache;
