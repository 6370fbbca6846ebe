//! The crate's one source of threads and synchronization primitives.
//!
//! Every `Arc`, `Mutex`, `Condvar`, atomic, thread spawn and bounded channel that the reading
//! pipeline's threads share is taken from here, never from `std` directly, so that the same
//! code can be model-checked. A normal build re-exports `std`'s types (and a bounded channel
//! over `crossbeam-channel`); a build with `RUSTFLAGS="--cfg loom"` re-exports
//! [loom](https://docs.rs/loom)'s mocks of them instead (and a small bounded channel built on
//! loom's `Mutex` and `Condvar`, since loom has none and crossbeam's is not loom-aware), so
//! the loom models in this module's tests explore every interleaving of the real code.
//!
//! The names and signatures are `std`'s: [`Mutex::lock`] returns a [`LockResult`] in both
//! builds, so poisoning is handled the same way everywhere. Under `cfg(loom)` these types
//! work only inside `loom::model`; such a build is for running the loom models
//! (`cargo test --release --lib loom`), not for reading data.

#[cfg(not(loom))]
pub use std::sync::{Arc, Condvar, LockResult, Mutex, MutexGuard};

#[cfg(loom)]
pub use loom::sync::{Arc, Condvar, LockResult, Mutex, MutexGuard};

/// The error of a poisoned lock; loom's [`LockResult`] is `std`'s, so this is `std`'s too.
pub use std::sync::PoisonError;

pub mod channel;

/// Atomic integers and flags, as in `std::sync::atomic` (loom's under `cfg(loom)`).
pub mod atomic {
    #[cfg(not(loom))]
    pub use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

    #[cfg(loom)]
    pub use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
}

/// Threads, as in `std::thread` (loom's under `cfg(loom)`): [`spawn`](thread::spawn),
/// [`Builder`](thread::Builder) (with `name` and `stack_size`; its `spawn` returns
/// `io::Result`) and [`JoinHandle`](thread::JoinHandle).
pub mod thread {
    #[cfg(not(loom))]
    pub use std::thread::{spawn, yield_now, Builder, JoinHandle};

    #[cfg(loom)]
    pub use loom::thread::{spawn, yield_now, Builder, JoinHandle};
}

#[cfg(all(test, loom))]
mod loom_tests;
