//! The deterministic generator of the unit tests' generated inputs (test builds only): the
//! same seed gives the same data on every run and machine, so a failure reproduces.

/// Marsaglia's xorshift64 (shifts 13, 7, 17) from a non-zero seed.
pub(crate) struct Xorshift(u64);

impl Xorshift {
    /// The generator starting from `seed` (not 0: it would stay 0).
    pub(crate) fn new(seed: u64) -> Self {
        debug_assert_ne!(seed, 0);
        Self(seed)
    }

    /// The next 64 bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next number below `n` (`next_u64() % n`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// The next of `choices`, each about as often.
    pub(crate) fn pick<T: Copy>(&mut self, choices: &[T]) -> T {
        choices[self.below(choices.len() as u64) as usize]
    }
}
