//! Diagnostics: the errors and warnings found in data, with the position they refer to.
//!
//! The parser reports positions as line and column within one file and knows nothing of file
//! names; the reader that drives it attaches the file name when it prints a diagnostic as
//! `FILE:LINE:COL: error: MESSAGE` (SPEC §7.5).

use std::fmt;

/// How serious a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    /// Invalidates the sequence it belongs to.
    Error,
    /// Reported, but the data is used (for example a zero-padded dense sample).
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// One error or warning about the data, positioned in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// 1-based line number within the file; 0 for a diagnostic of the whole file
    /// ([`of_whole_file`](Self::of_whole_file)).
    pub line: u64,
    /// 1-based column, counted in bytes (0 with line 0).
    pub col: u64,
    /// What is wrong, naming the input where there is one.
    pub message: String,
    /// For the data of a joined deserializer (composite readers): where in its files the
    /// diagnostic really lies. `line` and `col` are then the first line, column 1, of the
    /// primary sequence it was joined to, which orders it among that file's diagnostics.
    pub joined_at: Option<Box<JoinedPosition>>,
}

/// A position in a joined deserializer's file (see [`Diagnostic::joined_at`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedPosition {
    /// The file, as written in the configuration.
    pub file: String,
    /// 1-based line number within the file.
    pub line: u64,
    /// 1-based column, counted in bytes.
    pub col: u64,
}

impl Diagnostic {
    /// An error or warning at `line`:`col` of the file it is reported with.
    pub fn new(severity: Severity, line: u64, col: u64, message: String) -> Self {
        Diagnostic {
            severity,
            line,
            col,
            message,
            joined_at: None,
        }
    }

    /// An error or warning about the whole file it is reported with, at no line: an index
    /// cache that cannot be used or written, keys a joined deserializer does not share.
    /// It reads `FILE: warning: MESSAGE`.
    pub fn of_whole_file(severity: Severity, message: String) -> Self {
        Diagnostic::new(severity, 0, 0, message)
    }

    /// The file and diagnostic to report for one found in `file`: itself, or for a joined
    /// deserializer's data, the same diagnostic at its place in that deserializer's file.
    pub fn resolved<'a>(&'a self, file: &'a str) -> (&'a str, std::borrow::Cow<'a, Diagnostic>) {
        match &self.joined_at {
            None => (file, std::borrow::Cow::Borrowed(self)),
            Some(at) => (
                &at.file,
                std::borrow::Cow::Owned(Diagnostic::new(
                    self.severity,
                    at.line,
                    at.col,
                    self.message.clone(),
                )),
            ),
        }
    }

    /// Renders the diagnostic with the file name as written in the configuration.
    pub fn display_in<'a>(&'a self, file: &'a str) -> impl fmt::Display + 'a {
        DiagnosticInFile { diag: self, file }
    }
}

struct DiagnosticInFile<'a> {
    diag: &'a Diagnostic,
    file: &'a str,
}

impl fmt::Display for DiagnosticInFile<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (file, d) = self.diag.resolved(self.file);
        let file = crate::quote::file_name(file);
        if d.line == 0 {
            return write!(f, "{}: {}: {}", file, d.severity, d.message);
        }
        write!(
            f,
            "{}:{}:{}: {}: {}",
            file, d.line, d.col, d.severity, d.message
        )
    }
}

/// Writes `line` and a line feed to standard error in one `write`, and ignores a standard
/// error that fails (a closed pipe, as in `ctf validate 2>&1 | head -1`): a message that
/// cannot be shown must not stop a read, nor panic as `eprintln!` does.
///
/// `eprintln!` on the unbuffered standard error makes one `write` per piece of its format
/// (about ten for a diagnostic), so the lines of processes sharing one terminal or file
/// could be torn apart, and a file with a million errors took a million times ten system
/// calls. Every message of this crate and of `ctf` on standard error goes through here.
pub fn write_stderr_line(line: impl fmt::Display) {
    let _ = write_line(&mut std::io::stderr().lock(), line);
}

/// `line` and a line feed, formatted first and then written to `out` with one `write_all`.
fn write_line(out: &mut impl std::io::Write, line: impl fmt::Display) -> std::io::Result<()> {
    use std::fmt::Write as _;
    let mut text = String::new();
    // Writing into a String fails only if a Display impl reports an error; show what it gave.
    let _ = writeln!(text, "{line}");
    out.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records each `write` call it gets.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl std::io::Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_diagnostic_line_is_written_whole_in_one_write() {
        let d = Diagnostic::new(
            Severity::Error,
            12,
            7,
            "input 'x': malformed number 'z': not a number".to_string(),
        );
        let mut out = Writes::default();
        write_line(&mut out, d.display_in("data/train.ctf")).unwrap();
        assert_eq!(
            out.0,
            vec![
                b"data/train.ctf:12:7: error: input 'x': malformed number 'z': not a number\n"
                    .to_vec()
            ]
        );
    }

    #[test]
    fn a_diagnostic_of_the_whole_file_has_no_position() {
        let d = Diagnostic::of_whole_file(Severity::Warning, "ignoring it".to_string());
        assert_eq!(
            d.display_in("d.ctf.0a1b2c3d.ctfidx").to_string(),
            "d.ctf.0a1b2c3d.ctfidx: warning: ignoring it"
        );
    }
}
