//! The CTF number grammar of SPEC §7.2, written from the SPEC (not from the crate), and exact
//! decimal expansions of binary floating-point values for correct-rounding tests.

/// Whitespace inside a line: space, TAB and CR (SPEC §7.1).
pub fn is_ws(b: u8) -> bool {
    b == b' ' || b == b'\t' || b == b'\r'
}

/// Bytes allowed outside comments besides whitespace: printable ASCII.
pub fn is_printable(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

fn digits_at(s: &[u8], i: usize) -> usize {
    s[i.min(s.len())..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count()
}

/// Length of the number at the start of `s`: `[+-]? digits (. digits*)? ([eE] [+-]? digits)?`
/// with the SPEC's exception that `1.e5` is rejected (no exponent after a `.` that has no
/// digits after it). `None` when `s` does not start with a number.
pub fn number_prefix(s: &[u8]) -> Option<usize> {
    let mut i = 0;
    if matches!(s.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int = digits_at(s, i);
    if int == 0 {
        return None;
    }
    i += int;
    if s.get(i) == Some(&b'.') {
        i += 1;
        let frac = digits_at(s, i);
        i += frac;
        if frac == 0 {
            return Some(i);
        }
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(s.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exp = digits_at(s, j);
        if exp > 0 {
            i = j + exp;
        }
    }
    Some(i)
}

/// Whether all of `s` is one number of the grammar.
pub fn is_number(s: &[u8]) -> bool {
    number_prefix(s) == Some(s.len())
}

/// Splits a whitespace-free dense token into its values (`1-2` is two values: a value ends
/// at the first byte that cannot continue it, and the next value must start right there).
/// `None` when the token is not a run of numbers.
pub fn split_joined(tok: &[u8]) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < tok.len() {
        let n = number_prefix(&tok[pos..])?;
        out.push(std::str::from_utf8(&tok[pos..pos + n]).ok()?);
        pos += n;
        if pos < tok.len() && !matches!(tok[pos], b'+' | b'-') {
            return None;
        }
    }
    Some(out)
}

/// Little-endian decimal digits times a small factor, in place.
fn mul_small(digits: &mut Vec<u8>, factor: u32) {
    let mut carry = 0u32;
    for d in digits.iter_mut() {
        let v = u32::from(*d) * factor + carry;
        *d = (v % 10) as u8;
        carry = v / 10;
    }
    while carry > 0 {
        digits.push((carry % 10) as u8);
        carry /= 10;
    }
}

/// The exact decimal expansion of `m * 2^e2` (no exponent, no sign).
pub fn exact_decimal(m: u128, e2: i32) -> String {
    let mut digits: Vec<u8> = m.to_string().bytes().rev().map(|b| b - b'0').collect();
    let frac_digits = if e2 >= 0 {
        for _ in 0..e2 {
            mul_small(&mut digits, 2);
        }
        0
    } else {
        // m * 2^e2 = m * 5^-e2 / 10^-e2
        for _ in 0..-e2 {
            mul_small(&mut digits, 5);
        }
        (-e2) as usize
    };
    while digits.len() <= frac_digits {
        digits.push(0);
    }
    let mut s: String = digits.iter().rev().map(|d| char::from(b'0' + d)).collect();
    if frac_digits > 0 {
        s.insert(s.len() - frac_digits, '.');
    }
    s
}

/// Decrements a non-negative decimal integer written as digits (which is at least 1).
pub fn decrement(s: &str) -> String {
    let mut bytes = s.as_bytes().to_vec();
    for b in bytes.iter_mut().rev() {
        if *b == b'0' {
            *b = b'9';
        } else {
            *b -= 1;
            break;
        }
    }
    String::from_utf8(bytes).expect("ASCII digits")
}

/// The midpoint between a finite non-negative float (given by its exponent field, fraction
/// and format) and the next representable value, as `(m, e2)` with value `m * 2^e2`.
pub fn midpoint(exp_field: u32, frac: u64, frac_bits: u32, bias_plus_frac: i32) -> (u128, i32) {
    let (m, e) = if exp_field == 0 {
        (u128::from(frac), 1 - bias_plus_frac)
    } else {
        (
            u128::from(frac | (1u64 << frac_bits)),
            exp_field as i32 - bias_plus_frac,
        )
    };
    (2 * m + 1, e - 1)
}
