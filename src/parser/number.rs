//! Numbers of the CNTK Text Format: the accepted grammar (SPEC §7.2) and the conversion of a
//! scanned number into a correctly rounded `f32` or `f64`.
//!
//! The scanner never allocates. Short integers, and short fractions and negative values (at
//! most six digits, with or without an exponent that ends within the 8 bytes after its `e`),
//! are read eight bytes at a time; fractions of up to 14 digits, with or
//! without an exponent, that end within 16 bytes (`%f`, `%e`, an `f32`'s shortest form) as
//! two words, and of 15 to 19 digits that end within the first 4 bytes of a third (an `f64`
//! printed in full, `%.18e`) as three; other numbers a byte at a time.
//! Conversion takes a fast path when the decimal mantissa and power of ten are both exactly
//! representable (one IEEE operation, hence correctly rounded); for `f32`, when an `f64`
//! computation's rounding errors cannot change the `f32` it rounds to; for `f64`, a longer
//! mantissa (16 to 19 digits) or a power of ten past 10^22 in 128-bit integer arithmetic
//! (module `long_mantissa`). Otherwise it hands the token to the standard library's
//! correctly rounded parser. Values that overflow the element type are errors, unlike CNTK.

use std::fmt::Debug;
use std::ops::Neg;

use crate::parser::long_mantissa::long_mantissa_f64;
use crate::parser::values::EntryValue;

/// Element type of decoded values: `f32` or `f64`.
pub trait Element:
    Copy + Default + PartialEq + PartialOrd + Neg<Output = Self> + Debug + Send + Sync + 'static
{
    /// Name used in messages (`float` / `double`).
    const NAME: &'static str;
    /// The value one (the value of a one-hot entry, which sparse columns need not store).
    const ONE: Self;
    /// Converts an integer mantissa times a power of ten, correctly rounded, when a fast
    /// path can (an exact operation, or for `f32` one whose error cannot change the
    /// rounding), else `None`: the caller then parses the token with
    /// [`parse_token`](Self::parse_token).
    fn from_decimal_fast(negative: bool, mantissa: u64, exp10: i32) -> Option<Self>;
    /// The value of a short decimal, `mantissa` (below `10^7`) over `10^fraction_digits` (at
    /// most 7), negated when `negative`: what [`from_decimal_fast`](Self::from_decimal_fast)
    /// gives for them, without a branch on them. Both are exact in either type (the mantissa
    /// is below `10^7`, itself below `2^24`, and `10^7` is `2^7` times `5^7`, which is below
    /// `2^24` too), so one division rounds correctly,
    /// and `from_decimal_fast` divides the same two (or, with no fraction digits, converts
    /// the mantissa: the same value); the sign is set on the bits, `-0` included.
    fn from_short_decimal(negative: bool, mantissa: u32, fraction_digits: u32) -> Self;
    /// Correctly rounded conversion of a token in the accepted grammar; `None` on overflow.
    fn parse_token(token: &str) -> Option<Self>;
    /// Converts an integer, rounding correctly.
    fn from_u64(v: u64) -> Self;
    /// Widens to `f64` (exact).
    fn to_f64(self) -> f64;
    /// Writes the shortest decimal that parses back to the same value.
    fn write_shortest(self, out: &mut String);
    /// The value as a byte when it is exactly an integer from 0 to 255 (not `-0`, not NaN),
    /// which a column may then store in one byte.
    #[inline]
    fn to_byte(self) -> Option<u8> {
        // Widening to f64 is exact. `as` saturates (NaN gives 0); the bits tell a byte's
        // value from -0, NaN or a fraction.
        let wide = self.to_f64();
        let byte = wide as u8;
        (f64::from(byte).to_bits() == wide.to_bits()).then_some(byte)
    }
    /// The value of a byte (exact).
    #[inline]
    fn from_byte(byte: u8) -> Self {
        Self::from_u64(u64::from(byte))
    }
}

const POW10_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];
const POW10_F32: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

/// `m` times `10^exp10` (`exp10` from -22 to 22, each power exact in `f64`), in one
/// correctly rounded operation.
#[inline(always)]
fn scaled(m: f64, exp10: i32) -> f64 {
    let power = POW10_F64[exp10.unsigned_abs() as usize];
    if exp10 < 0 {
        m / power
    } else {
        m * power
    }
}

impl Element for f64 {
    const NAME: &'static str = "double";
    const ONE: f64 = 1.0;

    /// In one operation when the mantissa and the power of ten are exact in `f64` (below
    /// 2^53, and 10^-22 to 10^22); otherwise by integer arithmetic (module `long_mantissa`:
    /// powers of ten from 10^-40 to 10^27), so that `f64` values printed in full (16 to 19
    /// digits) convert here rather than in the standard library's parser.
    #[inline]
    fn from_decimal_fast(negative: bool, mantissa: u64, exp10: i32) -> Option<f64> {
        let magnitude = if exp10 == 0 {
            mantissa as f64 // integer to float conversion rounds once, correctly
        } else if mantissa < (1 << 53) && (-22..=22).contains(&exp10) {
            scaled(mantissa as f64, exp10)
        } else {
            return long_f64(negative, mantissa, exp10);
        };
        Some(if negative { -magnitude } else { magnitude })
    }

    #[inline(always)]
    fn from_short_decimal(negative: bool, mantissa: u32, fraction_digits: u32) -> f64 {
        let magnitude = f64::from(mantissa) / POW10_F64[fraction_digits as usize];
        f64::from_bits(magnitude.to_bits() | u64::from(negative) << 63)
    }

    #[inline]
    fn from_u64(v: u64) -> f64 {
        v as f64
    }

    fn parse_token(token: &str) -> Option<f64> {
        token.parse::<f64>().ok().filter(|v| v.is_finite())
    }

    #[inline]
    fn to_f64(self) -> f64 {
        self
    }

    fn write_shortest(self, out: &mut String) {
        write_shortest_debug(format_args!("{self:?}"), out);
    }
}

/// [`f64::from_decimal_fast`] of a mantissa of 16 to 19 digits, or a power of ten past
/// 10^22 (module `long_mantissa`). Cold and out of line, apart from the one-operation path
/// that shorter numbers take: with it inline, reading `f32` shortest forms as `f64` took
/// 1–3% longer (`ctf bench`, alternating builds; about as many instructions).
#[cold]
#[inline(never)]
fn long_f64(negative: bool, mantissa: u64, exp10: i32) -> Option<f64> {
    if mantissa == 0 {
        return None;
    }
    let magnitude = long_mantissa_f64(mantissa, exp10)?;
    Some(if negative { -magnitude } else { magnitude })
}

impl Element for f32 {
    const NAME: &'static str = "float";
    const ONE: f32 = 1.0;

    /// In `f32` when the mantissa and the power of ten are exact there; otherwise through
    /// an `f64`, then rounded to `f32`, unless that `f64` is too near a point halfway
    /// between two `f32`s. With a mantissa below `2^53`, the `f64` is the exact value
    /// correctly rounded, and rounding twice gives the correctly rounded `f32` unless the
    /// `f64` lands exactly halfway: each halfway point is an `f64`, and rounding to `f64` is
    /// monotonic, so the `f64` is on the same side of every such point as the exact value,
    /// or on it. A longer mantissa (16 to 19 digits: `f64` values printed in full, `%.18e`)
    /// is rounded first, so the `f64` is within 3 units of its last place of the exact
    /// value, and must be further than that from a halfway point. The values (a mantissa
    /// below `2^64` times `10^-22` to `10^22`) are zero or at least `f32`'s least normal
    /// value, where the 29 bits `f64` has beyond `f32`'s 24 tell a halfway point: a one then
    /// zeros; those past `f32::MAX` are left to the slow path, which reports them. So the 8-
    /// and 9-digit fractions that `f32` values print as (`0.18039216`), and longer ones read
    /// as `f32`, convert here rather than in the standard library's parser.
    #[inline]
    fn from_decimal_fast(negative: bool, mantissa: u64, exp10: i32) -> Option<f32> {
        let magnitude = if exp10 == 0 {
            mantissa as f32 // integer to float conversion rounds once, correctly
        } else if mantissa < (1 << 24) && (-10..=10).contains(&exp10) {
            // Both exact in `f32`: one operation there (shorter than `f64`'s division).
            let m = mantissa as f32;
            if exp10 < 0 {
                m / POW10_F32[(-exp10) as usize]
            } else {
                m * POW10_F32[exp10 as usize]
            }
        } else if (-22..=22).contains(&exp10) {
            let wide = scaled(mantissa as f64, exp10);
            // How far from a halfway point the `f64` must be for its `f32` to be the exact
            // value's: off it, when the mantissa is exact; else further than the error of
            // two roundings (the mantissa's and the operation's, each at most 2^-53 of the
            // value), which is within 3 units of the `f64`'s last place.
            let margin = if mantissa < (1 << 53) { 0 } else { 3 };
            const BEYOND_F32: u64 = (1 << 29) - 1;
            const HALFWAY: u64 = 1 << 28;
            if (wide.to_bits() & BEYOND_F32).abs_diff(HALFWAY) <= margin {
                return None;
            }
            let narrow = wide as f32;
            if narrow.is_infinite() {
                return None; // past `f32::MAX`: the slow path reports the overflow
            }
            narrow
        } else {
            return None;
        };
        Some(if negative { -magnitude } else { magnitude })
    }

    #[inline(always)]
    fn from_short_decimal(negative: bool, mantissa: u32, fraction_digits: u32) -> f32 {
        let magnitude = mantissa as f32 / POW10_F32[fraction_digits as usize];
        f32::from_bits(magnitude.to_bits() | u32::from(negative) << 31)
    }

    #[inline]
    fn from_u64(v: u64) -> f32 {
        v as f32
    }

    fn parse_token(token: &str) -> Option<f32> {
        token.parse::<f32>().ok().filter(|v| v.is_finite())
    }

    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }

    fn write_shortest(self, out: &mut String) {
        write_shortest_debug(format_args!("{self:?}"), out);
    }
}

/// Rust's `Debug` for floats prints the shortest round-tripping digits; drop a `.0` suffix so
/// integers print as JSON integers (`1`, not `1.0`).
fn write_shortest_debug(args: std::fmt::Arguments<'_>, out: &mut String) {
    use std::fmt::Write;
    let start = out.len();
    let _ = out.write_fmt(args);
    if out[start..].ends_with(".0") {
        out.truncate(out.len() - 2);
    }
}

/// Why a token is not a number of the accepted grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumberError {
    /// The token does not start with a sign or a digit (`.5`, `nan`, `x`).
    NotANumber,
    /// A sign is not followed by a digit (`-`, `+.5`).
    NoDigits,
    /// An exponent marker is not followed by digits (`1e`, `1e+`).
    EmptyExponent,
    /// The value does not fit the element type.
    Overflow,
}

impl NumberError {
    /// Human-readable reason.
    pub fn describe(self) -> &'static str {
        match self {
            NumberError::NotANumber => "not a number",
            NumberError::NoDigits => "a sign must be followed by a digit",
            NumberError::EmptyExponent => "the exponent has no digits",
            NumberError::Overflow => "the value overflows the element type",
        }
    }
}

/// The value and count of the leading ASCII digits of the 8 bytes at `bytes[pos..]`, read
/// as one word, when there are 1 to 7 of them; `None` when there are none, 8 or more, or
/// fewer than 8 bytes left (the caller then walks the bytes). Branch-free in the digits, so
/// that a run of numbers of varying length costs no mispredicted loop exits.
#[inline(always)]
pub(crate) fn leading_digits_value(bytes: &[u8], pos: usize) -> Option<(u64, usize)> {
    let (x, n) = crate::parser::word::digit_lanes(crate::parser::word::word_at(bytes, pos)?);
    if n == 0 || n == 8 {
        return None;
    }
    Some((lanes_value(x, n), n as usize))
}

/// The value of the first `n` lanes of `x` (1 to 8), each holding a digit's value, the
/// first digit in the lowest byte: `x` as [`digit_lanes`](crate::parser::word::digit_lanes)
/// gives it.
#[inline(always)]
pub(crate) fn lanes_value(x: u64, n: u32) -> u64 {
    debug_assert!((1..=8).contains(&n), "{n} digits");
    // The digits to the top bytes (zeros below are leading zeros), then their value.
    top_lanes_value(x << (8 * (8 - n)))
}

/// The value of `d`, whose eight lanes each hold a digit's value, the first digit in the
/// lowest byte (leading zeros make up a shorter number): [`lanes_value`] once its digits are
/// moved to the top.
#[inline(always)]
fn top_lanes_value(d: u64) -> u64 {
    // Pairs, quads and the whole, each step combining neighbours with one multiplication:
    // `d * (10 << 8 | 1)` adds ten times each byte to the byte above it, so that the upper
    // byte of each pair holds the pair's value (at most 99: no carry), which the shift brings
    // down; and so on with 100 for the pairs and 10,000 for the quads.
    let d = (d.wrapping_mul(10 << 8 | 1) >> 8) & 0x00ff_00ff_00ff_00ff;
    let d = (d.wrapping_mul(100 << 16 | 1) >> 16) & 0x0000_ffff_0000_ffff;
    d.wrapping_mul(10_000 << 32 | 1) >> 32
}

/// The values of the first `n` bytes of `word` and of the first `m` bytes of `other` (1 to 7
/// each, the first in the lowest byte), which the caller found to be ASCII digits: two
/// [`ascii_digits_value`]s. With SSE2 both are converted at once, in five vector
/// instructions where the two take eight multiplications, shifts and masks each.
#[inline(always)]
pub(crate) fn ascii_digits_value_pair(word: u64, n: u32, other: u64, m: u32) -> (u32, u32) {
    let (first, second) = (top_digit_lanes(word, n), top_digit_lanes(other, m));
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        top_lanes_value_pair_sse2(first, second)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        // At most 7 digits each: below 10^7, within u32.
        (
            top_lanes_value(first) as u32,
            top_lanes_value(second) as u32,
        )
    }
}

/// [`top_lanes_value`] of two words at once, one per 64-bit lane. The steps are those of
/// the scalar one, each in one or two instructions: the pairs (`10 * first + second` in each
/// 16-bit lane, by one multiplication and a shift), the quads (100 times the first pair plus
/// the second, in each 32-bit lane, by one multiply-add), and each word's value (10,000
/// times the first quad plus the second, by a multiply-add of the quads packed to 16 bits:
/// each is at most 9,999).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn top_lanes_value_pair_sse2(first: u64, second: u64) -> (u32, u32) {
    use safe_arch::{
        get_i64_from_m128i_s, mul_i16_horizontal_add_m128i, mul_i16_keep_low_m128i,
        pack_i32_to_i16_m128i, set_i64_m128i, set_splat_i16_m128i, set_splat_i32_m128i,
        shr_imm_u16_m128i,
    };
    let digits = set_i64_m128i(second as i64, first as i64);
    // Each pair's first digit is in the low byte of its 16-bit lane: times 10 << 8 | 1, the
    // high byte gets ten times it plus the second (at most 99, so nothing wraps).
    let pairs = shr_imm_u16_m128i::<8>(mul_i16_keep_low_m128i(
        digits,
        set_splat_i16_m128i(10 << 8 | 1),
    ));
    let quads = mul_i16_horizontal_add_m128i(pairs, set_splat_i32_m128i(1 << 16 | 100));
    let packed = pack_i32_to_i16_m128i(quads, quads);
    let values = mul_i16_horizontal_add_m128i(packed, set_splat_i32_m128i(1 << 16 | 10_000));
    let both = get_i64_from_m128i_s(values) as u64;
    (both as u32, (both >> 32) as u32)
}

/// The value of the first `n` bytes of `word` (1 to 7, the first in the lowest byte), which
/// the caller found to be ASCII digits: a word read from text, before
/// [`digit_lanes`](crate::parser::word::digit_lanes) or any other step.
#[inline(always)]
pub(crate) fn ascii_digits_value(word: u64, n: u32) -> u64 {
    top_lanes_value(top_digit_lanes(word, n))
}

/// The first `n` bytes of `word` (1 to 7 ASCII digits, the first in the lowest byte) as the
/// digits' values moved to the top bytes, zeros below: what [`top_lanes_value`] converts.
#[inline(always)]
fn top_digit_lanes(word: u64, n: u32) -> u64 {
    debug_assert!((1..8).contains(&n), "{n} digits");
    (word ^ (crate::parser::word::ONES * u64::from(b'0'))) << (8 * (8 - n))
}

/// Largest exponent magnitude tracked exactly (a written exponent beyond it is taken as
/// it). Beyond it every value is zero or infinite, however many digits the mantissa has:
/// the digits move the power of ten by one each, and no text in memory holds 2^60 of them.
/// (A smaller limit is wrong for a long mantissa: `1` and 100,001 zeros `e-100001` is 1.)
/// Ten times it plus a digit still fits an `i64`.
const EXP_LIMIT: i64 = 1 << 59;

/// Written exponents from this magnitude on are not handed to the standard library's parser
/// as written: it stops reading an exponent's digits once the exponent passes `2^16`
/// (`core::num::dec2flt`), so it gets a token wrong whose long mantissa offsets such an
/// exponent (`1` and a million digits `e-1000000` reads as infinite). Such a token is
/// rewritten first ([`normalized_token`]).
const STD_EXPONENT_LIMIT: i64 = 1 << 16;

/// A power of ten beyond which `0.d…` (a first digit that is not zero) is zero or infinite in
/// either element type, well within what the standard parser reads exactly.
const NORMALIZED_EXPONENT_LIMIT: i64 = 100_000;

/// Scans the number starting at `bytes[pos]` and converts it.
///
/// Returns the value and the position just past the number. A number ends at the first byte
/// that cannot continue it, so `1-2` yields `1` and stops before `-`.
#[inline(always)]
pub fn scan_number<T: Element>(bytes: &[u8], pos: usize) -> Result<(T, usize), NumberError> {
    match short_integer(bytes, pos) {
        Some((value, end)) => Ok((T::from_u64(value), end)),
        None => scan_number_general(bytes, pos),
    }
}

/// [`scan_number`] for a value a column may store as a byte: an integer from 0 to 255 comes
/// as [`EntryValue::Byte`] (without a conversion to `T` on the fast path).
#[inline(always)]
pub(crate) fn scan_entry_value<T: Element>(
    bytes: &[u8],
    pos: usize,
) -> Result<(EntryValue<T>, usize), NumberError> {
    match short_integer(bytes, pos) {
        Some((value, end)) => Ok((EntryValue::of_integer(value), end)),
        None => scan_entry_value_general(bytes, pos),
    }
}

/// [`scan_entry_value`] out of line: for a caller whose own fast path takes the common
/// values (a sparse entry's one-digit value), so that this one stays out of its loop.
#[inline(never)]
pub(crate) fn scan_entry_value_outlined<T: Element>(
    bytes: &[u8],
    pos: usize,
) -> Result<(EntryValue<T>, usize), NumberError> {
    scan_entry_value(bytes, pos)
}

/// The fast path of [`scan_number`], for the commonest value: a short unsigned integer
/// (`0`, `1`, `255`) of at most 7 digits, not followed by a fraction or an exponent. Returns
/// it and the position after it.
#[inline(always)]
fn short_integer(bytes: &[u8], pos: usize) -> Option<(u64, usize)> {
    // Eight bytes at once where the buffer has them (1 to 7 digits, then a non-digit).
    if let Some((value, digits)) = leading_digits_value(bytes, pos) {
        let end = pos + digits;
        return (!matches!(bytes.get(end), Some(b'.' | b'e' | b'E'))).then_some((value, end));
    }
    let mut value = 0u64;
    let mut i = pos;
    let limit = pos + 8;
    while i < limit {
        let Some(&b) = bytes.get(i) else { break };
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        value = value * 10 + u64::from(digit);
        i += 1;
    }
    (i > pos && i < limit && !matches!(bytes.get(i), Some(b'.' | b'e' | b'E')))
        .then_some((value, i))
}

/// Every number [`short_integer`] does not take: [`ShortDecimal`]'s forms a word at a time,
/// the rest by [`scan_whole_grammar`].
#[inline(never)]
fn scan_number_general<T: Element>(bytes: &[u8], pos: usize) -> Result<(T, usize), NumberError> {
    match ShortDecimal::scan(bytes, pos).and_then(|d| Some((d.value()?, d.end))) {
        Some(scanned) => Ok(scanned),
        None => scan_long_number(bytes, pos),
    }
}

/// Every number neither [`short_integer`] nor [`ShortDecimal`] takes: [`LongDecimal`]'s
/// forms two words at a time, the rest by [`scan_whole_grammar`]. Inlined into the general
/// scans, as the walk was: out of line, its call cost short fractions 3-6% (`ctf bench` of
/// criterion's `sparse-fractions` data, `--threads 1`).
#[inline]
fn scan_long_number<T: Element>(bytes: &[u8], pos: usize) -> Result<(T, usize), NumberError> {
    match LongDecimal::scan(bytes, pos).and_then(|d| Some((d.value()?, d.end))) {
        Some(scanned) => Ok(scanned),
        None => scan_whole_grammar(bytes, pos),
    }
}

/// [`scan_entry_value`] for every number [`short_integer`] does not take, as
/// [`scan_number_general`] takes them.
#[inline(never)]
fn scan_entry_value_general<T: Element>(
    bytes: &[u8],
    pos: usize,
) -> Result<(EntryValue<T>, usize), NumberError> {
    if let Some(decimal) = ShortDecimal::scan(bytes, pos) {
        if let Some(value) = decimal.entry_value() {
            return Ok((value, decimal.end));
        }
    }
    let (value, end) = scan_long_number::<T>(bytes, pos)?;
    Ok((EntryValue::of(value), end))
}

/// Whether the number at `bytes[pos]` starts with `-`, where its digits start, and the 8
/// bytes there as a word (if `bytes` holds them): what the word-at-a-time scans of signed
/// numbers start from.
#[inline(always)]
fn signed_word(bytes: &[u8], pos: usize) -> Option<(bool, usize, u64)> {
    let negative = bytes.get(pos) == Some(&b'-');
    let start = pos + usize::from(negative);
    Some((negative, start, crate::parser::word::word_at(bytes, start)?))
}

/// The commonest numbers after short integers, fractions and negative values (`0.3238`,
/// `-12.5`, `-3`), read as one word: an optional `-`, then, within the 8 bytes after it, 1 to
/// 6 integer digits, optionally a `.` with at least one fraction digit, and the byte that
/// ends the number. The point is taken out of the word, so that one conversion gives the
/// mantissa. That byte may instead be an exponent's `e` (or `E`) when the exponent (an
/// optional sign and its digits) and the byte that ends it lie within the 8 bytes after it:
/// the forms `%g` and Python's `repr` give small and large values (`1e-05`, `2.5e-07`,
/// `1.23457e-05`, `1e+16`).
#[derive(Clone, Copy, Debug)]
struct ShortDecimal {
    negative: bool,
    /// The digits' values, one a lane, the first in the lowest byte, the point left out
    /// (as [`digit_lanes`](crate::parser::word::digit_lanes) gives them).
    lanes: u64,
    /// How many of `lanes` are integer digits (1 to 6).
    integer_digits: usize,
    /// How many of `lanes` follow the point (0 without one).
    fraction_digits: usize,
    /// The exponent after the digits (0 without one).
    exponent: i32,
    /// The position just past the number.
    end: usize,
}

impl ShortDecimal {
    /// The number at `bytes[pos]` when it has this form and the 8 bytes after its sign (and
    /// with an exponent, the 8 after its `e`) are within `bytes`; `None` otherwise.
    #[inline(always)]
    fn scan(bytes: &[u8], pos: usize) -> Option<ShortDecimal> {
        use crate::parser::word::word_at;
        let (negative, start, word) = signed_word(bytes, pos)?;
        let (lanes, non_digits) = crate::parser::word::digit_mask(word);
        let integer_digits = (non_digits.trailing_zeros() / 8) as usize;
        if integer_digits == 0 || integer_digits > 6 {
            return None;
        }
        let below = 8 * integer_digits;
        let (lanes, fraction_digits) = if (word >> below) as u8 == b'.' {
            // The first byte after the point's that is not a digit; the fraction's lanes one
            // lane down, over the point.
            let after = non_digits >> (below + 8) << (below + 8);
            if after == 0 {
                return None; // the fraction may go on past the word
            }
            let fraction_digits = after.trailing_zeros() as usize / 8 - (integer_digits + 1);
            if fraction_digits == 0 {
                return None; // no fraction digit (`5.`)
            }
            (
                (lanes & ((1 << below) - 1)) | (lanes >> (below + 8)) << below,
                fraction_digits,
            )
        } else {
            (lanes, 0)
        };
        let digits_end =
            start + integer_digits + fraction_digits + usize::from(fraction_digits > 0);
        let (exponent, end) = match bytes.get(digits_end) {
            Some(b'e' | b'E') => {
                let (exponent, length) = exponent_in(word_at(bytes, digits_end + 1)?, 8)?;
                (exponent, digits_end + 1 + length)
            }
            _ => (0, digits_end),
        };
        Some(ShortDecimal {
            negative,
            lanes,
            integer_digits,
            fraction_digits,
            exponent,
            end,
        })
    }

    /// The value [`scan_whole_grammar`] computes from the same mantissa (the digits without
    /// the point, at most six) and power of ten, when the exact conversion
    /// ([`Element::from_decimal_fast`]) applies.
    #[inline(always)]
    fn value<T: Element>(&self) -> Option<T> {
        let digits = (self.integer_digits + self.fraction_digits) as u32;
        let mantissa = lanes_value(self.lanes, digits);
        let exp10 = self.exponent - self.fraction_digits as i32;
        T::from_decimal_fast(self.negative, mantissa, exp10)
    }

    /// [`EntryValue::of`] the value, told from the digits when there is no exponent: an
    /// integer that is not negative (no fraction, or one of zeros) is a byte when it is at
    /// most 255, and no other value is. A fraction other than zero cannot round onto an
    /// integer: its mantissa `M` (at most six digits) is below `2^p` (`p` the type's
    /// significand bits, 24 or 53), so the value `M / 10^d` moves by less than
    /// `2^p / 10^d * 2^-p = 10^-d` when rounded, less than its distance to either integer
    /// beside it. With an exponent, from the converted value.
    #[inline(always)]
    fn entry_value<T: Element>(&self) -> Option<EntryValue<T>> {
        if self.exponent != 0 {
            return self.value().map(EntryValue::of);
        }
        let fraction = self.lanes >> (8 * self.integer_digits);
        if fraction & ((1 << (8 * self.fraction_digits)) - 1) == 0 && !self.negative {
            // Below 10^6: exact in either type, as the walk's value is.
            let integer = lanes_value(self.lanes, self.integer_digits as u32);
            return Some(match u8::try_from(integer) {
                Ok(byte) => EntryValue::Byte(byte),
                Err(_) => EntryValue::Wide(T::from_u64(integer)),
            });
        }
        self.value().map(EntryValue::Wide)
    }
}

/// Fractions too long for [`ShortDecimal`]'s word, read as two: an optional `-`, then 1 to
/// 7 integer digits, a `.`, fraction digits to the end of the first 8 bytes after the sign
/// and on into the next 8, and within those 8 either the byte that ends the number or an
/// exponent (`e` or `E`, an optional sign, digits) and the byte that ends it. That is 7 to
/// 14 digits, so the mantissa is below `2^53`. The fractions `%f` prints (`0.180392`, six
/// decimals), those `%e` prints (`1.803922e-01`) and those `f32` values print as
/// (`0.18039216`, `1.2345678e-05`) have this form. So do, as three words, fractions whose
/// digits fill the second word and end within the first 4 bytes of a third, 15 to 19
/// digits: `f64` values printed in full (`0.18039215686274509`, `%.18e`'s
/// `1.803921568627450955e-01`), whose exponent may end with the third word.
#[derive(Clone, Copy, Debug)]
struct LongDecimal {
    negative: bool,
    /// The digits without the point, as an integer.
    mantissa: u64,
    /// The power of ten that scales the mantissa: the exponent less the fraction digits.
    exp10: i32,
    /// The position just past the number.
    end: usize,
}

impl LongDecimal {
    /// The number at `bytes[pos]` when it has this form and the 16 bytes after its sign are
    /// within `bytes`; `None` otherwise.
    #[inline(always)]
    fn scan(bytes: &[u8], pos: usize) -> Option<LongDecimal> {
        use crate::parser::word::{digit_mask, word_at};
        let (negative, start, low) = signed_word(bytes, pos)?;
        let high = word_at(bytes, start + 8)?;
        let (low_lanes, low_others) = digit_mask(low);
        // The point, the only byte of the first word that is not a digit.
        let integer_digits = low_others.trailing_zeros() / 8;
        let point = 8 * integer_digits;
        if integer_digits == 0
            || integer_digits == 8
            || (low >> point) as u8 != b'.'
            || low_others & (low_others - 1) != 0
        {
            return None;
        }
        let (high_lanes, high_others) = digit_mask(high);
        if high_others == 0 {
            // The fraction goes on past the two words.
            return Self::scan_three_words(
                bytes,
                (negative, start),
                (low_lanes, point),
                high_lanes,
            );
        }
        let high_digits = high_others.trailing_zeros() / 8;
        let fraction_digits = 7 - integer_digits + high_digits;
        if fraction_digits == 0 {
            return None; // no fraction digit (`1234567.`)
        }
        // An exponent must end within the second word.
        let (exponent, length) = exponent_after(high, high_digits, || None)?;
        Some(LongDecimal {
            negative,
            mantissa: two_word_value(low_lanes, point, high_lanes, 7 + high_digits),
            exp10: exponent - fraction_digits as i32,
            end: start + 8 + high_digits as usize + length,
        })
    }

    /// [`scan`](Self::scan) of a number whose fraction fills its second word: the third word
    /// must hold the rest of it, 0 to 4 digits (19 in all, so the mantissa fits a `u64`),
    /// then the byte that ends the number or an exponent that ends within the word or with
    /// it. Given the sign and where the digits start, the first word's digit lanes and its
    /// point's bit position, and the second word's lanes. Out of line: it serves the long
    /// forms only, and inlined it would grow the scans that the short ones take.
    #[inline(never)]
    fn scan_three_words(
        bytes: &[u8],
        (negative, start): (bool, usize),
        (low_lanes, point): (u64, u32),
        high_lanes: u64,
    ) -> Option<LongDecimal> {
        use crate::parser::word::{digit_mask, word_at};
        let tail = word_at(bytes, start + 16)?;
        let (tail_lanes, tail_others) = digit_mask(tail);
        let tail_digits = tail_others.trailing_zeros() / 8;
        if tail_digits > 4 {
            return None; // over 19 digits, or on past the third word
        }
        let fraction_digits = 15 - point / 8 + tail_digits;
        // An exponent may end with the third word: the byte after it shows where.
        let (exponent, length) =
            exponent_after(tail, tail_digits, || bytes.get(start + 24).copied())?;
        // The two words' 15 digits, then the tail's.
        let mut mantissa = two_word_value(low_lanes, point, high_lanes, 15);
        if tail_digits > 0 {
            mantissa =
                mantissa * POW10_U64[tail_digits as usize] + lanes_value(tail_lanes, tail_digits);
        }
        Some(LongDecimal {
            negative,
            mantissa,
            exp10: exponent - fraction_digits as i32,
            end: start + 16 + tail_digits as usize + length,
        })
    }

    /// The value [`scan_whole_grammar`] computes from the same mantissa and power of ten,
    /// when its fast conversion ([`Element::from_decimal_fast`]) takes them.
    #[inline(always)]
    fn value<T: Element>(&self) -> Option<T> {
        T::from_decimal_fast(self.negative, self.mantissa, self.exp10)
    }
}

/// The value of a [`LongDecimal`]'s first `digits` digits (1 to 15), given its first word's
/// digit lanes (`low_lanes`), the bit position of its point, and its second word's lanes:
/// the first eight are the first word's lanes below the point, those above it one lane
/// down, and the second word's first on top; the second word's others follow.
#[inline(always)]
fn two_word_value(low_lanes: u64, point: u32, high_lanes: u64, digits: u32) -> u64 {
    let below = (1 << point) - 1;
    let first = (low_lanes & below) | (low_lanes >> 8 & !below) | high_lanes << 56;
    if digits <= 8 {
        lanes_value(first, digits)
    } else {
        let rest = digits - 8;
        lanes_value(first, 8) * POW10_U64[rest as usize] + lanes_value(high_lanes >> 8, rest)
    }
}

/// The exponent, if any, of a [`LongDecimal`] whose digits end `digits` bytes into its last
/// word, `word`: `(0, 0)` when the byte there is not `e` or `E`, else the exponent's value
/// and its length with the `e`. The exponent must end within the word, or with it when
/// `next` gives the byte after the word; `None` when it has no digits or may go on.
#[inline(always)]
fn exponent_after(
    word: u64,
    digits: u32,
    next: impl FnOnce() -> Option<u8>,
) -> Option<(i32, usize)> {
    if !matches!((word >> (8 * digits)) as u8, b'e' | b'E') {
        return Some((0, 0));
    }
    // The bytes after the `e`, and how many of them are text.
    let (mut after, mut held) = (word >> 8 >> (8 * digits), 7 - digits);
    if let Some(byte) = next() {
        after |= u64::from(byte) << (8 * held);
        held += 1;
    }
    let (exponent, length) = exponent_in(after, held)?;
    Some((exponent, 1 + length))
}

/// The exponent at the start of `after` (the bytes after an `e`, the first in the lowest
/// byte, of which the first `held` are text): an optional sign and digits, ended by a byte
/// within those held. Returns its value and length; `None` when it has no digits (an error
/// the walk reports) or may go on past the bytes held.
#[inline(always)]
fn exponent_in(after: u64, held: u32) -> Option<(i32, usize)> {
    let negative = after as u8 == b'-';
    let signed = u32::from(negative || after as u8 == b'+');
    let (lanes, digits) = crate::parser::word::digit_lanes(after >> (8 * signed));
    if digits == 0 || signed + digits >= held {
        return None;
    }
    // At most 7 digits (`held` is at most 8 and holds the byte after them).
    let magnitude = lanes_value(lanes, digits) as i32;
    let exponent = if negative { -magnitude } else { magnitude };
    Some((exponent, (signed + digits) as usize))
}

/// Powers of ten below `10^8`, by exponent.
const POW10_U64: [u64; 8] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000];

/// The whole grammar, a byte at a time: signs, fractions, exponents, long mantissas.
#[inline]
fn scan_whole_grammar<T: Element>(bytes: &[u8], pos: usize) -> Result<(T, usize), NumberError> {
    let start = pos;
    let mut i = pos;
    let mut negative = false;
    match bytes.get(i) {
        Some(b'-') => {
            negative = true;
            i += 1;
        }
        Some(b'+') => i += 1,
        Some(b'0'..=b'9') => {}
        _ => return Err(NumberError::NotANumber),
    }
    let mut digits = Digits::default();
    // The power of ten of the mantissa's last kept digit, in 64 bits: the digits of a long
    // token move it by one each.
    let mut exp10: i64 = 0;
    let int_start = i;
    while let Some(d) = digit_at(bytes, i) {
        if !digits.push(d) {
            exp10 += 1; // an integer digit beyond the kept ones scales the value
        }
        i += 1;
    }
    if i == int_start {
        return Err(NumberError::NoDigits);
    }
    let int_end = i;
    let mut fraction_start = i;
    let mut last_is_digit = true;
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        fraction_start = i;
        last_is_digit = false;
        while let Some(d) = digit_at(bytes, i) {
            last_is_digit = true;
            if digits.push(d) {
                exp10 -= 1; // a kept fraction digit divides the mantissa by ten
            }
            i += 1;
        }
    }
    let fraction_end = i;
    let Digits {
        mantissa, dropped, ..
    } = digits;
    let mut written_exponent: i64 = 0;
    if last_is_digit && matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        let mut exp_negative = false;
        match bytes.get(i) {
            Some(b'-') => {
                exp_negative = true;
                i += 1;
            }
            Some(b'+') => i += 1,
            _ => {}
        }
        let exp_start = i;
        let mut e: i64 = 0;
        while let Some(d) = digit_at(bytes, i) {
            e = (e * 10 + i64::from(d)).min(EXP_LIMIT);
            i += 1;
        }
        if i == exp_start {
            return Err(NumberError::EmptyExponent);
        }
        written_exponent = if exp_negative { -e } else { e };
        // Exact: both terms are far within 2^62.
        exp10 += written_exponent;
    }
    if mantissa == 0 && !dropped {
        let zero = T::default();
        return Ok((if negative { -zero } else { zero }, i));
    }
    if !dropped {
        // A power of ten beyond 32 bits (zero or infinite) is left to the standard parser.
        if let Ok(exp10) = i32::try_from(exp10) {
            if let Some(v) = T::from_decimal_fast(negative, mantissa, exp10) {
                return Ok((v, i));
            }
        }
    }
    let value = if written_exponent.abs() < STD_EXPONENT_LIMIT {
        // The token is ASCII by construction; the standard parser accepts this whole
        // grammar.
        let token = std::str::from_utf8(&bytes[start..i]).map_err(|_| NumberError::NotANumber)?;
        T::parse_token(token)
    } else {
        T::parse_token(&normalized_token(
            negative,
            &bytes[int_start..int_end],
            &bytes[fraction_start..fraction_end],
            written_exponent,
        ))
    };
    match value {
        Some(v) => Ok((v, i)),
        None => Err(NumberError::Overflow),
    }
}

/// The number of sign `negative`, integer digits `int`, fraction digits `fraction` and
/// exponent `exponent`, which has a digit that is not zero, written as `0.d…e±k` with `d`
/// not zero and `k` at most [`NORMALIZED_EXPONENT_LIMIT`] in magnitude (beyond it the value
/// is zero or infinite all the same): a token the standard parser reads exactly, for one
/// whose exponent it would not ([`STD_EXPONENT_LIMIT`]). Rare: the copy is not a concern.
#[cold]
#[inline(never)]
fn normalized_token(negative: bool, int: &[u8], fraction: &[u8], exponent: i64) -> String {
    let digits = || int.iter().chain(fraction);
    let leading_zeros = digits().take_while(|&&d| d == b'0').count();
    let significant = int.len() + fraction.len() - leading_zeros;
    let mut token = String::with_capacity(significant + 32);
    if negative {
        token.push('-');
    }
    token.push_str("0.");
    token.extend(digits().skip(leading_zeros).map(|&d| char::from(d)));
    // The value is `0.d…` times ten to the significant digits, less the fraction's, plus
    // the exponent (each far within 2^62).
    let power = (significant as i64 - fraction.len() as i64 + exponent)
        .clamp(-NORMALIZED_EXPONENT_LIMIT, NORMALIZED_EXPONENT_LIMIT);
    token.push('e');
    token.push_str(&power.to_string());
    token
}

/// The decimal digit at `bytes[i]`, if there is one.
#[inline]
fn digit_at(bytes: &[u8], i: usize) -> Option<u8> {
    let d = bytes.get(i)?.wrapping_sub(b'0');
    (d <= 9).then_some(d)
}

/// The significant digits of a decimal mantissa: at most 19 are kept (they fit a `u64`).
#[derive(Default)]
struct Digits {
    mantissa: u64,
    kept: u32,
    /// Whether a non-zero digit beyond the kept ones was seen (the value is then inexact).
    dropped: bool,
}

impl Digits {
    /// Adds the next digit; returns whether it fell within the kept precision (leading zeros
    /// do, without being counted).
    #[inline]
    fn push(&mut self, d: u8) -> bool {
        if self.kept == 19 {
            self.dropped |= d != 0;
            return false;
        }
        if self.mantissa != 0 || d != 0 {
            self.mantissa = self.mantissa * 10 + u64::from(d);
            self.kept += 1;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Xorshift;

    fn num<T: Element>(s: &str) -> Result<(T, usize), NumberError> {
        scan_number::<T>(s.as_bytes(), 0)
    }

    #[test]
    fn to_byte_takes_exactly_the_integers_0_to_255() {
        fn check<T: Element>(text: &str, want: Option<u8>) {
            let value = num::<T>(text).unwrap().0;
            assert_eq!(value.to_byte(), want, "{} {text}", T::NAME);
            if let Some(b) = want {
                assert_eq!(T::from_byte(b), value, "{} {text}", T::NAME);
            }
        }
        for (text, want) in [
            ("0", Some(0)),
            ("1", Some(1)),
            ("3.0", Some(3)),
            ("2e2", Some(200)),
            ("255", Some(255)),
            ("256", None),
            ("-0", None),
            ("-1", None),
            ("0.5", None),
            ("254.999", None),
            ("1e30", None),
        ] {
            check::<f32>(text, want);
            check::<f64>(text, want);
        }
        for special in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e-30] {
            assert_eq!(special.to_byte(), None);
            assert_eq!((special as f32).to_byte(), None);
        }
        for b in 0..=255u8 {
            assert_eq!(f32::from_byte(b).to_byte(), Some(b));
            assert_eq!(f64::from_byte(b).to_byte(), Some(b));
        }
    }

    /// `value` as `n` ASCII digits (leading zeros included) followed by `8 - n` bytes of every
    /// kind a digit word may meet (a digit, a space, a colon, 0xff, 0), from the `filler`-th
    /// on: a word whose first `n` digits only must make the value.
    fn digit_word(value: u64, n: u32, filler: usize) -> u64 {
        let mut text = format!("{value:0width$}", width = n as usize).into_bytes();
        text.extend((0..8 - n as usize).map(|i| [b'9', b' ', 0xff, b':', 0][(filler + i) % 5]));
        u64::from_le_bytes(text[..8].try_into().unwrap())
    }

    #[test]
    fn ascii_digits_value_reads_the_first_n_digits_whatever_follows() {
        // Every length, the extremes and a deterministic spread of values, each followed by
        // bytes of every kind: they must not carry into the value.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for n in 1..=7u32 {
            let top = 10u64.pow(n);
            let mut values = vec![0, 1, top - 1, top / 10, top / 2];
            values.extend((0..2_000).map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                (state >> 20) % top
            }));
            for (k, &value) in values.iter().enumerate() {
                let word = digit_word(value, n, k);
                assert_eq!(
                    ascii_digits_value(word, n),
                    value,
                    "{value} ({n} digits, {k})"
                );
            }
        }
    }

    #[test]
    fn ascii_digits_value_pair_reads_both_words_as_one_at_a_time() {
        // Every pair of lengths, each word's value drawn anew (the extremes among them), and
        // each followed by bytes of every kind, which must carry into neither value.
        let mut rng = Xorshift::new(0x2545_f491_4f6c_dd1d);
        let mut next = move || rng.next_u64();
        for n in 1..=7u32 {
            for m in 1..=7u32 {
                let (top_n, top_m) = (10u64.pow(n), 10u64.pow(m));
                for k in 0..500 {
                    let (a, b) = match k {
                        0 => (0, top_m - 1),
                        1 => (top_n - 1, 0),
                        2 => (top_n - 1, top_m - 1),
                        _ => (next() % top_n, next() % top_m),
                    };
                    let (x, y) = (
                        digit_word(a, n, next() as usize),
                        digit_word(b, m, next() as usize),
                    );
                    assert_eq!(
                        ascii_digits_value_pair(x, n, y, m),
                        (a as u32, b as u32),
                        "{a} ({n} digits), {b} ({m} digits)"
                    );
                    assert_eq!((ascii_digits_value(x, n), ascii_digits_value(y, m)), (a, b));
                }
            }
        }
    }

    #[test]
    fn leading_digits_value_reads_1_to_7_digits() {
        for text in [
            "0:1 abcd", "7|xxxxxx", "12:3 xxx", "981:1 19", "45362:2 ", "123456:x", "9999999 ",
        ] {
            let digits = text.bytes().take_while(u8::is_ascii_digit).count();
            let value: u64 = text[..digits].parse().unwrap();
            assert_eq!(
                leading_digits_value(text.as_bytes(), 0),
                Some((value, digits)),
                "{text}"
            );
        }
        let padded = b"xx0042:1";
        assert_eq!(
            leading_digits_value(padded, 2),
            None,
            "fewer than 8 bytes left"
        );
        assert_eq!(leading_digits_value(b"12345678:1", 0), None, "8 digits");
        assert_eq!(leading_digits_value(b":1 2 3 4 5", 0), None, "no digit");
        assert_eq!(
            leading_digits_value(b"1/2:3456", 0),
            Some((1, 1)),
            "'/' is not a digit"
        );
        assert_eq!(leading_digits_value(b"12\xff45678", 0), Some((12, 2)));
    }

    #[test]
    fn entry_values_agree_with_the_whole_grammar_at_every_length() {
        // 1 to 10 digits, then each byte that ends or continues a number, with the buffer
        // ending right after it or going on (the word-at-once path needs 8 bytes).
        for digits in 1..=10usize {
            let number: String = "9876543210".chars().take(digits).collect();
            for follower in ["", " ", "|", "\n", ".", ".5", "e3", "E-2", ":", "x"] {
                for tail in ["", "        "] {
                    let text = format!("{number}{follower}{tail}");
                    let bytes = text.as_bytes();
                    let general = scan_whole_grammar::<f64>(bytes, 0);
                    let entry =
                        scan_entry_value::<f64>(bytes, 0).map(|(value, end)| (value.value(), end));
                    assert_eq!(entry, general, "{text:?}");
                }
            }
        }
    }

    /// A number of the forms the fast paths take and of those they leave to the walk, with
    /// what may follow it: an optional sign, 0 to 9 integer digits (leading zeros now and
    /// then), a point with 0 to 9 fraction digits or none, an exponent of 0 to 9 digits or
    /// none, then a byte
    /// that ends or continues a number, and the buffer ending there or going on.
    fn drawn_number(rng: &mut Xorshift) -> String {
        let digits = |rng: &mut Xorshift, most: u64| -> String {
            let n = rng.below(most + 1);
            (0..n)
                .map(|k| match (k, rng.below(4)) {
                    (0, 0) => '0',
                    _ => char::from(b'0' + rng.below(10) as u8),
                })
                .collect()
        };
        let mut text = String::from(rng.pick(&["", "", "-", "-", "+"]));
        if rng.below(8) == 0 {
            // Within 10^-4 of an integer, below or above it, which an `f32` rounds onto when
            // the fraction is long enough (`254.9999999` is 255): the entry value is then a
            // byte, as the walk's is.
            let nines = rng.below(2) == 0;
            text += &format!("{}.", rng.below(300));
            let run = if nines { "99999999" } else { "00000000" };
            text += &run[..4 + rng.below(4) as usize];
            text += &digits(rng, 2);
        } else if rng.below(6) == 0 {
            // 14 to 21 digits, 1 to 7 of them before the point: around the three words'
            // limits (`f64` values printed in full).
            let integer = 1 + rng.below(7);
            let fraction = 14 + rng.below(8) - integer;
            text += &format!("{}.", 1 + rng.below(10u64.pow(integer as u32) - 1));
            for _ in 0..fraction {
                text.push(char::from(b'0' + rng.below(10) as u8));
            }
        } else {
            text += &digits(rng, 9);
            if rng.below(4) != 0 {
                text.push('.');
                text += &digits(rng, 9);
            }
        }
        if rng.below(8) == 0 {
            text += rng.pick(&["e", "E", "e-", "e+"]);
            // Now and then past the 7 digits an exponent may have within a word.
            let most = if rng.below(8) == 0 { 9 } else { 3 };
            text += &digits(rng, most);
        }
        text += rng.pick(&["", " ", "|", "\n", ":", ".", ".5", "e", "x", "-1"]);
        if rng.below(4) != 0 {
            text += "        ";
        }
        text
    }

    #[test]
    fn fast_paths_agree_with_the_walk_and_with_std() {
        // Every scan (`scan_number`, `scan_entry_value`, in both precisions) gives the walk's
        // value, to the bit (`-0` included), stops where it stops, and an entry value is a
        // byte exactly when the walk's value is; an accepted token has the value the standard
        // library's correctly rounded parser gives it.
        fn check<T: Element>(text: &str, bits: impl Fn(T) -> u64) -> [bool; 4] {
            let bytes = text.as_bytes();
            let walk = scan_whole_grammar::<T>(bytes, 0);
            let as_bits = |scanned: Result<(T, usize), NumberError>| {
                scanned.map(|(value, end)| (bits(value), end))
            };
            let want = as_bits(walk);
            assert_eq!(
                as_bits(scan_number::<T>(bytes, 0)),
                want,
                "{} {text:?}",
                T::NAME
            );
            let entry = |value: EntryValue<T>| match value {
                EntryValue::Byte(byte) => (true, bits(T::from_byte(byte))),
                EntryValue::Wide(value) => (false, bits(value)),
            };
            let entry_want = walk.map(|(value, end)| (entry(EntryValue::of(value)), end));
            let entry_got = scan_entry_value::<T>(bytes, 0).map(|(v, end)| (entry(v), end));
            assert_eq!(entry_got, entry_want, "{} {text:?} as an entry", T::NAME);
            let fast = ShortDecimal::scan(bytes, 0);
            if let Some(decimal) = fast {
                if let Some(value) = decimal.value::<T>() {
                    let got = Ok((bits(value), decimal.end));
                    assert_eq!(got, want, "{} {text:?} fast", T::NAME);
                }
                if let Some(value) = decimal.entry_value::<T>() {
                    let got = Ok((entry(value), decimal.end));
                    assert_eq!(got, entry_want, "{} {text:?} fast", T::NAME);
                }
            }
            let long = LongDecimal::scan(bytes, 0);
            if let Some(value) = long.and_then(|decimal| decimal.value::<T>()) {
                let got = Ok((bits(value), long.map_or(0, |decimal| decimal.end)));
                assert_eq!(got, want, "{} {text:?} in two words", T::NAME);
            }
            if let Ok((value, end)) = walk {
                let std = T::parse_token(&text[..end]);
                assert!(
                    std.is_some_and(|std| bits(std) == bits(value)),
                    "{} {text:?} against std",
                    T::NAME
                );
            }
            // Taken as three words: over 14 digits before any exponent.
            let three = long.is_some_and(|decimal| {
                let mantissa = text[..decimal.end].split(['e', 'E']).next().unwrap_or("");
                mantissa.bytes().filter(u8::is_ascii_digit).count() > 14
            });
            // Taken as one word with an exponent.
            let short_exponent =
                fast.is_some_and(|decimal| text[..decimal.end].contains(['e', 'E']));
            [
                fast.is_some(),
                long.is_some() && fast.is_none(),
                three,
                short_exponent,
            ]
        }
        let mut rng = Xorshift::new(0x9e37_79b9_7f4a_7c15);
        let (mut fast, mut long, mut three, mut short_exponent) = (0, 0, 0, 0);
        for _ in 0..200_000 {
            let text = drawn_number(&mut rng);
            let [one_word, two_words, three_words, exponent] =
                check::<f32>(&text, |v| u64::from(v.to_bits()));
            check::<f64>(&text, f64::to_bits);
            fast += usize::from(one_word);
            long += usize::from(two_words);
            three += usize::from(three_words);
            short_exponent += usize::from(exponent);
        }
        assert!(three > 5_000, "{three} of 200,000 in three words");
        assert!(
            short_exponent > 1_500,
            "{short_exponent} of 200,000 in one word with an exponent"
        );
        // The draws reach the fast paths and the walk often.
        assert!(
            (15_000..180_000).contains(&fast),
            "{fast} of 200,000 on the fast path"
        );
        assert!(
            (20_000..180_000).contains(&(fast + long)) && long > 20_000,
            "{long} of 200,000 on the two-word path"
        );
    }

    #[test]
    fn one_word_exponents_end_where_the_walk_ends() {
        // At the limits of the word after the `e`: (text, whether the one-word scan takes
        // it). What it takes, `scan_number` and `scan_entry_value` give as the walk does.
        let cases = &[
            ("1e-05 ", true),
            ("1e5|", true),
            ("-2.5e-07\n", true),
            ("1.23457e-05 ", true),
            ("12345.5E+12:", true),
            ("123456.5E+12:", false), // the fraction may go on past the word
            ("1e+16 ", true),
            ("2.5e2 ", true), // 250: a byte as an entry value
            ("-0e7 ", true),  // minus zero
            ("1e-000005 ", true),
            ("1e-0000005 ", false), // the exponent's end is past the word
            ("1e0000005 ", true),
            ("1e1234567 ", true), // overflow: taken, but the walk reports it
            ("1e12345678 ", false),
            ("1e-123456 ", true), // zero
            ("1.5e ", false),
            ("1.5e- ", false),
            ("1.5E+|", false),
            ("1234567e-3 ", false),
            ("5.e3 ", false),
        ];
        scans_at_limits(cases, 8, "one word", |bytes| {
            let d = ShortDecimal::scan(bytes, 0)?;
            Some((d.value::<f32>(), d.value::<f64>(), d.end))
        });
        // The 8 bytes after the `e` must be within the buffer.
        assert!(ShortDecimal::scan(b"1.5e-05 ", 0).is_none());
        assert!(ShortDecimal::scan(b"1.5e-05         ", 0).is_some());
    }

    /// A limits test of a fast scan (`scan`: its values as `f32` and as `f64`, when it
    /// converts them, and its end; `None` when it does not take the number): each text,
    /// followed by `padding` spaces, is taken or not as its case says, and the scans agree
    /// with the walk on it (`agrees_with_the_walk`).
    fn scans_at_limits(
        cases: &[(&str, bool)],
        padding: usize,
        name: &str,
        scan: impl Fn(&[u8]) -> Option<(Option<f32>, Option<f64>, usize)>,
    ) {
        for &(text, taken) in cases {
            let padded = format!("{text}{}", " ".repeat(padding));
            let fast = scan(padded.as_bytes());
            assert_eq!(fast.is_some(), taken, "{text:?}");
            agrees_with_the_walk(text, padded.as_bytes(), fast, name);
        }
    }

    /// For a limits test: `scan_number` and `scan_entry_value` give the walk's value (to the
    /// bit) and end in both precisions, and so does a fast scan that took the number
    /// (`fast`: its values as `f32` and as `f64`, when it converts them, and its end).
    fn agrees_with_the_walk(
        text: &str,
        bytes: &[u8],
        fast: Option<(Option<f32>, Option<f64>, usize)>,
        scan: &str,
    ) {
        fn agree<T: Element>(
            text: &str,
            bytes: &[u8],
            fast: Option<(Option<T>, usize)>,
            scan: &str,
            bits: impl Fn(T) -> u64,
        ) {
            let bits = |(value, end): (T, usize)| (bits(value), end);
            let walk = scan_whole_grammar::<T>(bytes, 0);
            assert_eq!(
                scan_number::<T>(bytes, 0).map(&bits),
                walk.map(&bits),
                "{text:?} as {}",
                T::NAME
            );
            let as_entry = |(value, end): (EntryValue<T>, usize)| match value {
                EntryValue::Byte(byte) => (Some(byte), bits((T::from_byte(byte), end))),
                EntryValue::Wide(value) => (None, bits((value, end))),
            };
            let entry_want = walk.map(|(value, end)| as_entry((EntryValue::of(value), end)));
            assert_eq!(
                scan_entry_value::<T>(bytes, 0).map(as_entry),
                entry_want,
                "{text:?} as an entry of {}",
                T::NAME
            );
            if let Some((Some(value), end)) = fast {
                let got = Ok(bits((value, end)));
                assert_eq!(got, walk.map(&bits), "{text:?} as {}, {scan}", T::NAME);
            }
        }
        let f32s = fast.map(|(value, _, end)| (value, end));
        agree::<f32>(text, bytes, f32s, scan, |v| u64::from(v.to_bits()));
        let f64s = fast.map(|(_, value, end)| (value, end));
        agree::<f64>(text, bytes, f64s, scan, f64::to_bits);
    }

    #[test]
    fn two_word_decimals_end_where_the_walk_ends() {
        // At the limits of the two words: (text, whether they take it).
        let cases = &[
            ("0.18039216 ", true),
            ("-0.18039216|", true),
            ("0.180392\n", true),
            ("1234567.5 ", true),
            ("1234567.1234567 ", true),
            ("-0.0000000000000 ", true),
            ("1234567. ", false),
            ("12345678.5 ", false),
            ("1234567.12345678", true),
            ("12.34567890123456", true),
            ("1.803922e-01 ", true),
            ("1.2345678e-05|", true),
            ("-1.803922E+01 ", true),
            ("1.803922e01x", true),
            ("12345.6789012e5 ", true),
            ("1.2345678e-0005 ", true),
            ("1.803922e ", false),
            ("1.803922e- ", false),
            ("1.803922e+x", false),
            ("1234567.1234567e1", false),
            ("1.2345678e-00005", false),
            ("0.1803921e5 ", true),
            ("0.1803921E5 ", true),
            // Three words.
            ("0.18039215686274509 ", true),
            ("1.803921568627450955e-01 ", true),
            ("-1.803921568627450955E+01|", true),
            ("1234567.123456781234 ", true),
            ("1.23456781234567e5 ", true),
            ("0.1803921568627450e5\n", true),
            ("1.803921568627450955e-0100 ", false),
            ("1.803921568627450955e-01", true),
            ("1.8039215686274509551 ", false),
            ("0.180392156862745095 ", true),
            ("12.34567890123456789 ", true),
            ("12.345678901234567891 ", false),
            ("1.803921568627450955e ", false),
            ("1.80392156862745095e+308 ", true),
            ("+0.18039216 ", false),
            (".18039216 ", false),
            ("0.1 |", false),
            ("1234567 .5", false),
            ("123456789012345 ", false),
        ];
        scans_at_limits(cases, 16, "two words", |bytes| {
            let d = LongDecimal::scan(bytes, 0)?;
            Some((d.value::<f32>(), d.value::<f64>(), d.end))
        });
        // An exponent that ends the third word, with no byte after it to show its end.
        assert!(LongDecimal::scan(b"1.803921568627450955e-01", 0).is_none());
        assert!(LongDecimal::scan(b"1.803921568627450955e-01 ", 0).is_some());
    }

    #[test]
    fn f32_conversions_through_f64_round_as_std_does() {
        // (mantissa, power of ten) as text, for std's correctly rounded parser.
        fn std_f32(mantissa: u64, exp10: i32) -> u32 {
            format!("{mantissa}e{exp10}")
                .parse::<f32>()
                .unwrap()
                .to_bits()
        }
        // The conversion's value, when it gives one, is std's.
        fn convert(mantissa: u64, exp10: i32) -> Option<f32> {
            let fast = f32::from_decimal_fast(false, mantissa, exp10);
            if let Some(value) = fast {
                assert_eq!(
                    value.to_bits(),
                    std_f32(mantissa, exp10),
                    "{mantissa}e{exp10}"
                );
            }
            fast
        }
        let mut rng = Xorshift::new(0x2545_f491_4f6c_dd1d);
        // Mantissas of 1 to 19 digits and powers of ten within the fast path: refused only
        // exactly halfway (`3e10`), very near it, or past `f32::MAX` (0.7% of the draws).
        let mut refused = 0;
        for _ in 0..100_000 {
            let digits = 1 + rng.below(19) as u32;
            let mantissa = rng.below(10u64.pow(digits));
            let exp10 = rng.below(45) as i32 - 22;
            refused += usize::from(convert(mantissa, exp10).is_none());
        }
        assert!(refused < 1_500, "{refused} of 100,000 refused");
        assert_eq!(convert(3_402_823_466_385_288_598, 20), Some(f32::MAX));
        // Rounds past f32::MAX.
        assert_eq!(convert(3_402_823_669_209_384_635, 20), None);
        // Decimals of 15 to 19 digits closest to the `f64`s at and beside the points halfway
        // between two `f32`s, where rounding twice can go the wrong way: those of 15 and 16
        // digits often round onto the point itself as `f64`s, and the longer ones round
        // within a few units of the `f64`'s last place of it.
        let mut halfway = 0;
        for _ in 0..10_000 {
            let low = f32::from_bits(0x3580_0000 + rng.below(0x1200_0000) as u32);
            let high = f32::from_bits(low.to_bits() + 1);
            let point = (f64::from(low) + f64::from(high)) / 2.0;
            for beside in -3i64..=3 {
                let near = f64::from_bits(point.to_bits().wrapping_add_signed(beside));
                for digits in 15..=19 {
                    let text = format!("{near:.*e}", digits - 1);
                    let (significand, exponent) = text.split_once('e').unwrap();
                    let nearest: u64 = significand.replace('.', "").parse().unwrap();
                    let exp10 = exponent.parse::<i32>().unwrap() - (digits as i32 - 1);
                    for mantissa in [nearest - 1, nearest, nearest + 1] {
                        halfway += usize::from(convert(mantissa, exp10).is_none());
                    }
                }
            }
        }
        assert!(
            halfway > 10_000,
            "{halfway} decimals refused near halfway points"
        );
    }

    #[test]
    fn accepted_forms() {
        for (s, v) in [
            ("1", 1.0),
            ("-1", -1.0),
            ("+1", 1.0),
            ("02.0", 2.0),
            ("5.", 5.0),
            ("45.", 45.0),
            ("1e5", 1e5),
            ("1E-05", 1e-5),
            ("1.5e+3", 1.5e3),
            ("-6.3423e+015", -6.3423e15),
            ("9.10e-11", 9.10e-11),
            ("0.000001", 1e-6),
        ] {
            let (x, end) = num::<f64>(s).unwrap();
            assert_eq!(x, v, "{s}");
            assert_eq!(end, s.len(), "{s}");
        }
    }

    #[test]
    fn value_ends_at_first_byte_that_cannot_continue_it() {
        assert_eq!(num::<f64>("1-2"), Ok((1.0, 1)));
        assert_eq!(num::<f64>("3+4"), Ok((3.0, 1)));
        assert_eq!(num::<f64>("1.5.3"), Ok((1.5, 3)));
        // `1.e5`: the exponent may only follow a digit, so the number is `1.`.
        assert_eq!(num::<f64>("1.e5"), Ok((1.0, 2)));
        assert_eq!(num::<f64>("2.0f"), Ok((2.0, 3)));
    }

    #[test]
    fn rejected_forms() {
        assert_eq!(num::<f64>(".5"), Err(NumberError::NotANumber));
        assert_eq!(num::<f64>("-.5"), Err(NumberError::NoDigits));
        assert_eq!(num::<f64>("+.5"), Err(NumberError::NoDigits));
        assert_eq!(num::<f64>("nan"), Err(NumberError::NotANumber));
        assert_eq!(num::<f64>("inf"), Err(NumberError::NotANumber));
        assert_eq!(num::<f64>("-"), Err(NumberError::NoDigits));
        assert_eq!(num::<f64>("1e"), Err(NumberError::EmptyExponent));
        assert_eq!(num::<f64>("1e+"), Err(NumberError::EmptyExponent));
        assert_eq!(num::<f64>("12.+e"), Ok((12.0, 3)));
        assert_eq!(num::<f64>("1e309"), Err(NumberError::Overflow));
        assert_eq!(num::<f32>("1e39"), Err(NumberError::Overflow));
        assert_eq!(num::<f32>("3.5e38"), Err(NumberError::Overflow));
        assert!(num::<f32>("3.4e38").is_ok());
    }

    #[test]
    fn zero_and_sign() {
        let (z, _) = num::<f64>("-0").unwrap();
        assert!(z == 0.0 && z.is_sign_negative());
        let (z, _) = num::<f32>("-0.000e5").unwrap();
        assert!(z == 0.0 && z.is_sign_negative());
        let (z, _) = num::<f64>("0e999999999999").unwrap();
        assert!(z == 0.0 && z.is_sign_positive());
        assert_eq!(num::<f64>("1e-400").unwrap().0, 0.0);
    }

    #[test]
    fn correctly_rounded_against_std() {
        for s in [
            "0.1",
            "0.3",
            "123456789012345678901234567890",
            "1.00000017881393432617187499",
            "1.00000017881393432617187501",
            "9007199254740993",
            "2.2250738585072011e-308",
            "4.9e-324",
            "16777217",
            "0.000000000000000000000000000000000001",
            "3.4028235e38",
            "1.1754942e-38",
            "7.038531e-26",
            // Mantissas of 16 to 19 digits (module `long_mantissa`), one exactly halfway
            // between two `f64`s, and powers of ten at and past that module's range.
            "0.18039215686274509",
            "-1.803921568627450955e-01",
            "8423939962499464.5",
            "9007199254740993e3",
            "1234567890123456789e27",
            "1234567890123456789e28",
            "9.999999999999999999e-22",
            "1.000000000000000001e-22",
            "1.7976931348623157e308",
            "4.9406564584124654e-324",
        ] {
            assert_eq!(num::<f64>(s).unwrap().0, s.parse::<f64>().unwrap(), "{s}");
            if let Ok(v) = s.parse::<f32>() {
                if v.is_finite() {
                    assert_eq!(num::<f32>(s).unwrap().0, v, "{s}");
                }
            }
        }
    }

    #[test]
    fn long_tokens_are_correctly_rounded_whatever_their_exponent() {
        // Digits that offset a large exponent, before and past the lengths where it once
        // went wrong (the exponent was clamped but not the digits' shift) and where the
        // standard parser's own exponent reading stops (2^16): each token rounds as a short
        // one of the same value does (or, past a halfway point by less than 10^-25, as one
        // past it by 10^-21).
        for n in [25usize, 400, 5_000, 70_000, 100_001, 1_000_000] {
            let z = "0".repeat(n);
            let m = n as i64;
            for (token, short) in [
                (format!("1{z}e-{}", m), "1"),
                (format!("-1{z}e-{}", m + 1), "-0.1"),
                (format!("1{z}1e-{}", m + 1), "1.000000000000000000001"),
                (format!("0.{z}15e{}", m + 1), "1.5"),
                (format!("-0.{z}25e+{}", m + 1), "-2.5"),
                (format!("3.{z}e0"), "3"),
                // Halfway between two `f32`s, and just above.
                (format!("16777217{z}e-{m}"), "16777217"),
                (
                    format!("16777217{z}1e-{}", m + 1),
                    "16777217.000000000000000000001",
                ),
                // The same for `f64`.
                (format!("9007199254740993{z}e-{m}"), "9007199254740993"),
                (
                    format!("9007199254740993{z}1e-{}", m + 1),
                    "9007199254740993.000000000000000000001",
                ),
                // Zero, and the least and greatest values, reached through the digits.
                (format!("1{z}e-99999999999999999999"), "0"),
                (format!("4.9{z}1e-324"), "4.9e-324"),
                (
                    format!("1.7976931348623157{z}e308"),
                    "1.7976931348623157e308",
                ),
            ] {
                let f64_want = short.parse::<f64>().unwrap();
                let (f64_got, end) = num::<f64>(&token).unwrap();
                assert_eq!(end, token.len(), "{short} with {n} zeros");
                assert_eq!(
                    f64_got.to_bits(),
                    f64_want.to_bits(),
                    "{short} with {n} zeros"
                );
                let f32_want = short.parse::<f32>().unwrap();
                if f32_want.is_finite() {
                    let f32_got = num::<f32>(&token).unwrap().0;
                    assert_eq!(f32_got.to_bits(), f32_want.to_bits(), "{short}, {n} zeros");
                }
            }
            // Overflow through the digits, or past any exponent, is an error.
            for token in [
                format!("1{z}e{}", 400 - m),
                format!("0.{z}1e99999999999999999999"),
                format!("-1{z}1e{}", 309 - m),
            ] {
                assert_eq!(num::<f64>(&token), Err(NumberError::Overflow), "{n} zeros");
                assert_eq!(num::<f32>(&token), Err(NumberError::Overflow), "{n} zeros");
            }
        }
    }

    #[test]
    fn shortest_round_trip_printing() {
        let mut s = String::new();
        1.0f64.write_shortest(&mut s);
        s.push(' ');
        0.1f32.write_shortest(&mut s);
        s.push(' ');
        1e30f64.write_shortest(&mut s);
        s.push(' ');
        (-0.0f64).write_shortest(&mut s);
        s.push(' ');
        1.5e-7f32.write_shortest(&mut s);
        assert_eq!(s, "1 0.1 1e30 -0 1.5e-7");
    }
}
