//! JSON rendering of sequences for `ctf dump`: one object per line, numbers in the shortest
//! decimal form that parses back to the same f32/f64 value.

use ctf_reader::{Element, InputConfig, ParsedSequences, Sample};

/// Appends `s` as a JSON string literal.
pub fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn push_values<T: Element>(out: &mut String, values: impl Iterator<Item = T>) {
    out.push('[');
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push(',');
        }
        v.write_shortest(out);
    }
    out.push(']');
}

/// Appends sequence `seq` of `batch` as `{"key": K, "inputs": {"name": [SAMPLE, ...]}}` and a
/// line feed.
pub fn push_sequence<T: Element>(
    out: &mut String,
    batch: &ParsedSequences<T>,
    seq: usize,
    inputs: &[InputConfig],
) {
    use std::fmt::Write;
    let _ = write!(out, "{{\"key\":{},\"inputs\":{{", batch.sequences[seq].key);
    for (i, input) in inputs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_string(out, &input.name);
        out.push_str(":[");
        for (k, sample) in batch.samples(seq, i).enumerate() {
            if k > 0 {
                out.push(',');
            }
            match sample {
                Sample::Dense(values) => push_values(out, values.iter()),
                Sample::Sparse { indices, values } => {
                    out.push_str("{\"indices\":[");
                    for (j, ix) in indices.iter().enumerate() {
                        if j > 0 {
                            out.push(',');
                        }
                        let _ = write!(out, "{ix}");
                    }
                    out.push_str("],\"values\":");
                    push_values(out, values.iter());
                    out.push('}');
                }
            }
        }
        out.push(']');
    }
    out.push_str("}}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_strings() {
        let mut s = String::new();
        push_json_string(&mut s, "a\"b\\c\nd\u{1}é");
        assert_eq!(s, "\"a\\\"b\\\\c\\nd\\u0001é\"");
    }
}
