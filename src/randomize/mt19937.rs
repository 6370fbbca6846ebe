//! The 64-bit Mersenne Twister, bit for bit the generator of C++'s `std::mt19937_64`.
//!
//! CNTK's randomizers draw from `std::mt19937_64` and reduce each output with `%` (no
//! `uniform_int_distribution`, whose algorithm differs between standard libraries), so the
//! raw output stream is all that [`super::cntk`] needs to reproduce CNTK's orders.

/// Degree of recurrence (state size in 64-bit words).
const N: usize = 312;
/// Middle word offset.
const M: usize = 156;
/// Twist matrix coefficients.
const MATRIX_A: u64 = 0xB502_6F5A_A966_19E9;
/// The most significant 33 bits.
const UPPER_MASK: u64 = 0xFFFF_FFFF_8000_0000;
/// The least significant 31 bits.
const LOWER_MASK: u64 = 0x7FFF_FFFF;
/// Initialization multiplier of the seeding recurrence.
const INIT_MULTIPLIER: u64 = 6_364_136_223_846_793_005;

/// A 64-bit Mersenne Twister (MT19937-64) generator, seeded and tempered exactly like
/// `std::mt19937_64`.
///
/// ```
/// use ctf_reader::randomize::mt19937::Mt19937_64;
/// let mut rng = Mt19937_64::new(0);
/// assert_eq!(rng.next_u64(), 2947667278772165694);
/// ```
#[derive(Clone)]
pub struct Mt19937_64 {
    state: [u64; N],
    index: usize,
}

impl Mt19937_64 {
    /// The default seed of `std::mt19937_64` (a default-constructed engine).
    pub const DEFAULT_SEED: u64 = 5489;

    /// A generator seeded like `std::mt19937_64(seed)`: `x[0] = seed`,
    /// `x[i] = 6364136223846793005 * (x[i-1] ^ (x[i-1] >> 62)) + i` (mod 2^64).
    pub fn new(seed: u64) -> Self {
        let mut state = [0u64; N];
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = INIT_MULTIPLIER
                .wrapping_mul(prev ^ (prev >> 62))
                .wrapping_add(i as u64);
        }
        Mt19937_64 { state, index: N }
    }

    /// The next 64-bit output (the C++ engine's `operator()`).
    pub fn next_u64(&mut self) -> u64 {
        if self.index >= N {
            self.twist();
        }
        let mut x = self.state[self.index];
        self.index += 1;
        x ^= (x >> 29) & 0x5555_5555_5555_5555;
        x ^= (x << 17) & 0x71D6_7FFF_EDA6_0000;
        x ^= (x << 37) & 0xFFF7_EEE0_0000_0000;
        x ^= x >> 43;
        x
    }

    /// Regenerates the whole state block.
    fn twist(&mut self) {
        for i in 0..N {
            let y = (self.state[i] & UPPER_MASK) | (self.state[(i + 1) % N] & LOWER_MASK);
            let mut next = self.state[(i + M) % N] ^ (y >> 1);
            if y & 1 != 0 {
                next ^= MATRIX_A;
            }
            self.state[i] = next;
        }
        self.index = 0;
    }
}

impl std::fmt::Debug for Mt19937_64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mt19937_64")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_0_vectors() {
        let mut rng = Mt19937_64::new(0);
        assert_eq!(rng.next_u64(), 2947667278772165694);
        assert_eq!(rng.next_u64(), 18301848765998365067);
        assert_eq!(rng.next_u64(), 729919693006235833);
    }

    #[test]
    fn seed_1_vectors() {
        let mut rng = Mt19937_64::new(1);
        assert_eq!(rng.next_u64(), 2469588189546311528);
        assert_eq!(rng.next_u64(), 2516265689700432462);
    }

    #[test]
    fn default_seed_10000th_output() {
        // The C++ standard ([rand.predef]) requires the 10000th consecutive invocation of a
        // default-constructed mt19937_64 to produce this value.
        let mut rng = Mt19937_64::new(Mt19937_64::DEFAULT_SEED);
        for _ in 0..9999 {
            rng.next_u64();
        }
        assert_eq!(rng.next_u64(), 9981545732273789042);
    }
}
