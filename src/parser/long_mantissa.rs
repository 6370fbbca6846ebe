//! The correctly rounded `f64` of a decimal whose mantissa has more bits than an `f64`
//! holds: 16 to 19 digits, as `f64` values print in full (`repr`, `%.17g`) and NumPy's
//! `savetxt` writes them by default (`%.18e`). The one-operation fast path of module
//! `number` needs the mantissa exact in an `f64` (below 2^53); these went to the standard
//! library's parser, which scans the token again before it converts it.
//!
//! Here the conversion is integer arithmetic on 128 bits. Times a power of ten from 10^1 to
//! 10^27, the product of the mantissa and the power of five is exact in a `u128` and
//! converts to `f64` with one correct rounding, then scales by the power of two exactly.
//! Divided by 10^1 to 10^40, the mantissa is multiplied by a 128-bit reciprocal of the
//! power of five, which puts the exact quotient within four units of the last place of the
//! product's top 128 bits (aligned to bit 127): the 75 bits below the `f64`'s 53 then decide
//! the rounding, unless they are within four units of the halfway point, where the caller
//! falls back on the standard library (exact ties such as `8423939962499464.5`; about one
//! decimal in 2^70 of those drawn at random otherwise).

/// Largest power of ten a mantissa is multiplied by here: 5^27 is the largest power of
/// five below 2^63, so the product with a `u64` fits a `u128`.
const MOST_TENS: usize = 27;

/// Largest power of ten a mantissa is divided by here: the reciprocals' table has one row
/// per power.
const MOST_TENTHS: usize = 40;

/// 5^0 to 5^27.
const POWERS_OF_FIVE: [u64; MOST_TENS + 1] = {
    let mut powers = [1u64; MOST_TENS + 1];
    let mut k = 1;
    while k <= MOST_TENS {
        powers[k] = powers[k - 1] * 5;
        k += 1;
    }
    powers
};

/// Row `k` (1 to 40): the reciprocal of 5^k, `floor(2^(127 + b) / 5^k)` where `b` is the
/// bit length of 5^k (so its top bit is set: between 2^127 and 2^128), and `b`. Row 0 is
/// unused.
const RECIPROCALS: [(u128, u32); MOST_TENTHS + 1] = {
    let mut rows = [(0u128, 0u32); MOST_TENTHS + 1];
    let mut power: u128 = 1;
    let mut k = 1;
    while k <= MOST_TENTHS {
        power *= 5;
        let bits = 128 - power.leading_zeros();
        // Long division of 2^(127 + bits) by 5^k, a bit at a time (the remainder stays
        // below 5^k < 2^94, so doubling it fits).
        let top = 127 + bits;
        let mut quotient: u128 = 0;
        let mut remainder: u128 = 0;
        let mut bit = top as i32;
        while bit >= 0 {
            remainder = remainder * 2 + if bit as u32 == top { 1 } else { 0 };
            if remainder >= power {
                remainder -= power;
                // Below 2^128: the quotient's bits above 127 are zero.
                quotient |= 1 << bit;
            }
            bit -= 1;
        }
        rows[k] = (quotient, bits);
        k += 1;
    }
    rows
};

/// `2^exp` (`exp` from -1022 to 1023), exactly.
#[inline(always)]
fn power_of_two(exp: i32) -> f64 {
    f64::from_bits(((1023 + exp) as u64) << 52)
}

/// `mantissa` (at least 1) times `10^exp10`, correctly rounded to `f64`, for `exp10` from
/// -40 to 27; `None` outside that range, or when the rounding is too close to call here.
#[inline]
pub(crate) fn long_mantissa_f64(mantissa: u64, exp10: i32) -> Option<f64> {
    debug_assert!(mantissa != 0);
    if exp10 >= 0 {
        let five = *POWERS_OF_FIVE.get(exp10 as usize)?;
        // Exact (below 2^127), then one correct rounding (`as` rounds to nearest, ties to
        // even), then an exact scaling: 2^27 times a value below 2^127 is far below
        // `f64::MAX`.
        let product = u128::from(mantissa) * u128::from(five);
        return Some(product as f64 * power_of_two(exp10));
    }
    let tenths = exp10.unsigned_abs() as usize;
    let &(reciprocal, bits) = RECIPROCALS.get(tenths)?;
    let shift = mantissa.leading_zeros();
    let normal = u128::from(mantissa << shift);
    // The top 128 of the product's 192 bits: `normal * reciprocal / 2^64`, rounded down.
    let low = normal * (reciprocal as u64 as u128);
    let high = normal * (reciprocal >> 64) + (low >> 64);
    // `high` is at least 2^126 (both factors have their top bit set); shifted to 2^127 or
    // more, its top 53 bits are the significand before rounding. The exact quotient,
    // `normal * 2^(127 + bits) / 5^k / 2^64`, is at least `high` and below `high + 2`
    // before the shift (the reciprocal is short of `2^(127 + bits) / 5^k` by less than one,
    // which costs less than `normal < 2^64`, and the dropped 64 bits less than one more
    // unit), so below `high + 4` after it.
    let doubled = 1 - (high >> 127) as u32;
    let high = high << doubled;
    let rest = high & ((1 << BELOW) - 1);
    // Too close to the halfway point to tell the side: left to the caller's slow path.
    if rest.wrapping_sub(HALF - 3) < 4 {
        return None;
    }
    let significand = (high >> BELOW) as u64 + u64::from(rest > HALF);
    // value = significand * 2^exp, between 2^-190 and 2^64; a significand rounded up to
    // 2^53 carries into the exponent's bits.
    let exp = BELOW as i32 - 63 - (bits + shift + doubled) as i32 - tenths as i32;
    Some(f64::from_bits(
        (((exp + 1075) as u64) << 52) + significand - (1 << 52),
    ))
}

/// Bits of a 128-bit product below the 53 of the `f64` significand.
const BELOW: u32 = 128 - 53;

/// Half a unit of the significand's last place, in the product's.
const HALF: u128 = 1 << (BELOW - 1);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Xorshift;

    /// std's correctly rounded value of `mantissa`e`exp10`.
    fn std_f64(mantissa: u128, exp10: i32) -> f64 {
        format!("{mantissa}e{exp10}").parse().unwrap()
    }

    /// `a * b` in 256 bits: (high, low).
    fn wide_product(a: u128, b: u128) -> (u128, u128) {
        let (a1, a0) = (a >> 64, a as u64 as u128);
        let (b1, b0) = (b >> 64, b as u64 as u128);
        let (low, cross1, cross2, high) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
        let middle = (low >> 64) + (cross1 as u64 as u128) + (cross2 as u64 as u128);
        let low = (low as u64 as u128) | (middle << 64);
        let high = high + (cross1 >> 64) + (cross2 >> 64) + (middle >> 64);
        (high, low)
    }

    #[test]
    fn the_reciprocals_are_the_quotients_rounded_down() {
        for (k, &(reciprocal, bits)) in RECIPROCALS.iter().enumerate().skip(1) {
            let five = 5u128.pow(k as u32);
            assert_eq!(bits, 128 - five.leading_zeros(), "5^{k}");
            assert_eq!(reciprocal >> 127, 1, "5^{k}: top bit");
            // 2^(127 + bits) - reciprocal * 5^k is from 0 to 5^k - 1: the remainder.
            let (high, low) = wide_product(reciprocal, five);
            let numerator_high = 1u128 << (bits - 1); // 2^(127 + bits) over 2^128
            let (rest_low, borrow) = 0u128.overflowing_sub(low);
            let rest_high = numerator_high
                .checked_sub(high)
                .and_then(|h| h.checked_sub(u128::from(borrow)));
            assert_eq!(
                rest_high,
                Some(0),
                "5^{k}: the product is not within 5^k below"
            );
            assert!(rest_low < five, "5^{k}: the remainder is 5^k or more");
        }
    }

    /// Whether a point halfway between two `f64`s is within a tenth of a unit of the
    /// mantissa's last digit from `mantissa`e`exp10`: the decimals a tenth below and above
    /// it then round apart.
    fn near_halfway(mantissa: u64, exp10: i32) -> bool {
        let tenfold = u128::from(mantissa) * 10;
        std_f64(tenfold - 1, exp10 - 1) != std_f64(tenfold + 1, exp10 - 1)
    }

    #[test]
    fn long_mantissas_round_as_std_does() {
        let mut rng = Xorshift::new(0x1f83_d9ab_fb41_bd6b);
        let mut refused = 0;
        for n in 0..400_000 {
            // Mostly 16 to 19 digits; some of any length; powers over the whole range.
            let mantissa = match n % 4 {
                0 => 1 + rng.below(u64::MAX - 1),
                1 => {
                    let digits = 1 + rng.below(19) as u32;
                    1 + rng.below(10u64.pow(digits))
                }
                _ => 10u64.pow(15) + rng.below(u64::MAX - 10u64.pow(15)),
            };
            let exp10 = rng.below(68) as i32 - 40;
            match long_mantissa_f64(mantissa, exp10) {
                Some(value) => assert_eq!(
                    value.to_bits(),
                    std_f64(u128::from(mantissa), exp10).to_bits(),
                    "{mantissa}e{exp10}"
                ),
                None => {
                    assert!(near_halfway(mantissa, exp10), "{mantissa}e{exp10} refused");
                    refused += 1;
                }
            }
        }
        // Refused: decimals on a halfway point (integers or halves of 54 bits, of which
        // random mantissas times 10^-1 to 10^-4 hold a few).
        assert!(refused < 100, "{refused} refused");
        assert_eq!(long_mantissa_f64(1, 28), None);
        assert_eq!(long_mantissa_f64(1, -41), None);
        assert_eq!(
            long_mantissa_f64(u64::MAX, 27),
            Some(std_f64(u128::from(u64::MAX), 27))
        );
    }

    #[test]
    fn halfway_points_are_left_to_std() {
        // Decimals exactly halfway between two `f64`s: `odd / 2^j` with a 54-bit odd
        // numerator is `odd * 5^j / 10^j`. Those, and their neighbours a unit of the
        // mantissa away, on both sides.
        let mut rng = Xorshift::new(0x6a09_e667_f3bc_c909);
        let (mut ties, mut refused) = (0, 0);
        for _ in 0..100_000 {
            let j = 1 + rng.below(4) as u32;
            let odd = (1u64 << 53) | rng.below(1 << 53) | 1;
            let Some(tie) = odd.checked_mul(5u64.pow(j)) else {
                continue;
            };
            ties += 1;
            for mantissa in [tie - 1, tie, tie + 1] {
                let exp10 = -(j as i32);
                let want = std_f64(u128::from(mantissa), exp10);
                match long_mantissa_f64(mantissa, exp10) {
                    Some(value) => {
                        assert_eq!(value.to_bits(), want.to_bits(), "{mantissa}e{exp10}")
                    }
                    None => refused += 1,
                }
            }
        }
        // Every tie refused (the exact quotient is then within two units of the point), and
        // about every neighbour converted.
        assert!(
            ties > 20_000 && refused >= ties && refused < ties + ties / 100,
            "{ties} ties, {refused} refused"
        );
    }
}
