//! C's `%g` conversion with the default precision (6), which is what C++ `ostream << x` prints
//! for a `float` (widened to `double` first) or a `double`. CNTK's reader tests wrote their
//! control files this way, so the replay must format values exactly like it.
//!
//! The algorithm is the one of the C standard (7.21.6.1): let X be the decimal exponent the
//! value has once rounded to P = 6 significant digits. If `X < -4` or `X >= P`, use the `e`
//! style with P - 1 fraction digits, otherwise the `f` style with P - 1 - X fraction digits;
//! then remove trailing zeros and a trailing decimal point. The exponent has a sign and at least
//! two digits. Rust's `{:.N}` and `{:.Ne}` round the exact binary value to nearest, ties to
//! even, as glibc does in the default rounding mode.

/// Significant digits of `%g` without an explicit precision.
const PRECISION: i32 = 6;

/// Formats `v` like C's `printf("%g", v)`.
pub fn format_g(v: f64) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let scientific = format!("{:.*e}", (PRECISION - 1) as usize, v);
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("Rust's {:e} output has an exponent");
    let x: i32 = exponent.parse().expect("a decimal exponent");
    if !(-4..PRECISION).contains(&x) {
        let sign = if x < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip_fraction_zeros(mantissa), x.abs())
    } else {
        let fixed = format!("{:.*}", (PRECISION - 1 - x) as usize, v);
        strip_fraction_zeros(&fixed).to_string()
    }
}

/// Removes trailing zeros of a fraction, then a trailing point (`%g` without `#`).
fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::format_g;

    /// Expected strings are what glibc's `printf("%g", x)` prints for these values.
    #[test]
    fn matches_c_printf_g() {
        let cases: &[(f64, &str)] = &[
            (1e20, "1e+20"),
            (-1.07905e8, "-1.07905e+08"),
            (1.15459e-9, "1.15459e-09"),
            (0.0, "0"),
            (-0.0, "-0"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (999999.0, "999999"),
            (999999.5, "1e+06"),
            (0.0001, "0.0001"),
            (1e-5, "1e-05"),
            (0.000123456789, "0.000123457"),
            (-251.7, "-251.7"),
            (45345.1, "45345.1"),
            (3.0, "3"),
            (-6.4265e20, "-6.4265e+20"),
            (1e100, "1e+100"),
            (1e-300, "1e-300"),
            (-0.138918023895589, "-0.138918"),
            (-5.63473366201749e-05, "-5.63473e-05"),
            (123456.7, "123457"),
            (1234567.0, "1.23457e+06"),
            (0.5, "0.5"),
            (f64::INFINITY, "inf"),
        ];
        for &(v, want) in cases {
            assert_eq!(format_g(v), want, "format_g({v:e})");
        }
    }

    /// A float is widened to double before printing: 0.1f32 is 0.100000001490116...
    #[test]
    fn float_values_are_printed_after_widening() {
        assert_eq!(format_g(f64::from(0.1f32)), "0.1");
        assert_eq!(format_g(f64::from(6.78f32)), "6.78");
        assert_eq!(format_g(f64::from(16777217.0f32)), "1.67772e+07");
        assert_eq!(format_g(f64::from(-1.4e-45f32)), "-1.4013e-45");
    }
}
