//! JSON rendering of sequences for `ctf dump`: one object per line, numbers in the shortest
//! decimal form that parses back to the same f32/f64 value, written in pieces of bounded
//! size however long a line is.

use std::io::{self, Write};

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

/// Text held before it is written: a JSON line longer than this (a dense input of a huge
/// `dim`, a sequence of millions of samples) is written in pieces of about this size, so
/// that `dump`'s memory does not grow with its lines.
pub const SPILL_BYTES: usize = 64 << 10;

/// Writes JSON lines to `out` through a buffer of about [`SPILL_BYTES`]: the `push_*`
/// functions append to it, and hand it to `out` whenever it fills, also in the middle of a
/// line.
pub struct JsonWriter<W: Write> {
    text: String,
    out: W,
}

impl<W: Write> JsonWriter<W> {
    /// A writer to `out`, with nothing held.
    pub fn new(out: W) -> Self {
        JsonWriter {
            text: String::with_capacity(SPILL_BYTES + 64),
            out,
        }
    }

    /// Writes what is held once it reaches [`SPILL_BYTES`].
    fn spill_if_full(&mut self) -> io::Result<()> {
        if self.text.len() >= SPILL_BYTES {
            self.out.write_all(self.text.as_bytes())?;
            self.text.clear();
        }
        Ok(())
    }

    /// Writes what is held and flushes `out`.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(self.text.as_bytes())?;
        self.text.clear();
        self.out.flush()
    }

    fn push_values<T: Element>(&mut self, values: impl Iterator<Item = T>) -> io::Result<()> {
        self.text.push('[');
        for (i, v) in values.enumerate() {
            if i > 0 {
                self.text.push(',');
            }
            v.write_shortest(&mut self.text);
            self.spill_if_full()?;
        }
        self.text.push(']');
        Ok(())
    }

    /// Writes sequence `seq` of `batch` as `{"key": K, "inputs": {"name": [SAMPLE, ...]}}`
    /// and a line feed (its end may stay held until the next spill or [`flush`](Self::flush)).
    pub fn push_sequence<T: Element>(
        &mut self,
        batch: &ParsedSequences<T>,
        seq: usize,
        inputs: &[InputConfig],
    ) -> io::Result<()> {
        use std::fmt::Write as _;
        let _ = write!(
            self.text,
            "{{\"key\":{},\"inputs\":{{",
            batch.sequences[seq].key
        );
        for (i, input) in inputs.iter().enumerate() {
            if i > 0 {
                self.text.push(',');
            }
            push_json_string(&mut self.text, &input.name);
            self.text.push_str(":[");
            for (k, sample) in batch.samples(seq, i).enumerate() {
                if k > 0 {
                    self.text.push(',');
                }
                match sample {
                    Sample::Dense(values) => self.push_values(values.iter())?,
                    Sample::Sparse { indices, values } => {
                        self.text.push_str("{\"indices\":[");
                        for (j, ix) in indices.iter().enumerate() {
                            if j > 0 {
                                self.text.push(',');
                            }
                            let _ = write!(self.text, "{ix}");
                            self.spill_if_full()?;
                        }
                        self.text.push_str("],\"values\":");
                        self.push_values(values.iter())?;
                        self.text.push('}');
                    }
                }
            }
            self.text.push(']');
        }
        self.text.push_str("}}\n");
        self.spill_if_full()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line of a dense input of dim 3,000,000 (one value given, the rest padded) is
    /// written in pieces: the text held never grows past a piece, and the bytes written are
    /// the whole line.
    #[test]
    fn a_long_line_is_written_in_pieces_of_bounded_size() {
        use ctf_reader::parser::{StreamOptions, StreamParser};
        let dim = 3_000_000;
        let inputs = [InputConfig::dense("a", dim)];
        let mut parser = StreamParser::<f32>::new(&inputs, StreamOptions::default());
        parser.start_file(0);
        parser.feed(b"7 |a 1.5\n").unwrap();
        parser.finish_file().unwrap();
        let mut writer = JsonWriter::new(Vec::new());
        writer
            .push_sequence(parser.sequences(), 0, &inputs)
            .unwrap();
        assert!(
            writer.text.capacity() < 2 * SPILL_BYTES,
            "{}",
            writer.text.capacity()
        );
        writer.flush().unwrap();
        let zeros = ",0".repeat(dim - 1);
        let expected = format!("{{\"key\":7,\"inputs\":{{\"a\":[[1.5{zeros}]]}}}}\n");
        assert_eq!(writer.out.len(), expected.len());
        assert!(writer.out == expected.as_bytes());
    }

    #[test]
    fn escapes_strings() {
        let mut s = String::new();
        push_json_string(&mut s, "a\"b\\c\nd\u{1}é");
        assert_eq!(s, "\"a\\\"b\\\\c\\nd\\u0001é\"");
    }
}
