//! A choice source driven by a byte string (in the style of Hypothesis' conjecture data).
//!
//! Every random decision of the generators reads bytes from here. When the bytes run out
//! every read returns 0, and 0 always selects the simplest alternative, so proptest's
//! shrinking of the byte vector (dropping and zeroing bytes) shrinks the generated dataset.
//! [`entropy`] is the byte strings' strategy and [`config`] the property tests' settings.

/// Reads choices from a byte string; exhausted reads are 0.
pub struct Src<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Src<'a> {
    /// A source over `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Src { bytes, pos: 0 }
    }

    /// The next byte, or 0 when exhausted.
    pub fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// The next `n` bytes as a little-endian integer.
    fn uint(&mut self, n: usize) -> u64 {
        (0..n).fold(0u64, |acc, i| acc | (u64::from(self.byte()) << (8 * i)))
    }

    /// A random u32.
    pub fn u32(&mut self) -> u32 {
        self.uint(4) as u32
    }

    /// A random u64.
    pub fn u64(&mut self) -> u64 {
        self.uint(8)
    }

    /// A value in `0..n` (0 when `n <= 1`).
    pub fn below(&mut self, n: usize) -> usize {
        match n {
            0 | 1 => 0,
            2..=256 => usize::from(self.byte()) % n,
            257..=65536 => self.uint(2) as usize % n,
            _ => (self.u64() % n as u64) as usize,
        }
    }

    /// A value in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with about `percent` % probability; a zero byte gives false (unless 100 %).
    pub fn chance(&mut self, percent: u32) -> bool {
        u32::from(self.byte()) * 100 >= (100 - percent) * 256
    }

    /// One element of a non-empty slice.
    pub fn pick<'b, T>(&mut self, items: &'b [T]) -> &'b T {
        &items[self.below(items.len())]
    }

    /// A copy of one element of a non-empty slice.
    pub fn one<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// Shuffles `items` in place (Fisher-Yates; all-zero bytes leave the order unchanged).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in 1..items.len() {
            let j = self.below(i + 1);
            items.swap(i, i - j);
        }
    }
}

/// A byte string for [`Src`] of fewer than `max_len` bytes.
pub fn entropy(max_len: usize) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..max_len)
}

/// A proptest configuration of `cases` times `$PROPS_SCALE` (default 1) cases, for longer
/// hunts.
pub fn config(cases: u32) -> proptest::test_runner::Config {
    let scale = std::env::var("PROPS_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1);
    proptest::test_runner::Config {
        cases: cases * scale,
        failure_persistence: None,
        max_shrink_iters: 3000,
        max_shrink_time: 5000, // ms: shrinking the parser's quadratic split checks is slow
        ..proptest::test_runner::Config::default()
    }
}
