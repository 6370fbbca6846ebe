//! The randomizers: they decide the order in which the sequences of the corpus are delivered
//! in each sweep.
//!
//! [`cntk`] reproduces CNTK's `BlockRandomizer` exactly (chunk shuffle, randomization windows
//! and the windowed sequence shuffle), on top of the 64-bit Mersenne Twister of [`mt19937`].

pub mod cntk;
pub mod mt19937;
