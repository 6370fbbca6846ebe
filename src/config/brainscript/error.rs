//! Source positions and the error type shared by the lexer, parser and evaluator.

use std::fmt;

/// A 1-based line and column (the column counts bytes) in the configuration text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Pos {
    /// Line number, starting at 1.
    pub line: u32,
    /// Column in bytes, starting at 1.
    pub col: u32,
}

impl Pos {
    /// A position from a line and a column.
    pub fn new(line: u32, col: u32) -> Self {
        Pos { line, col }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A lexing, parsing or evaluation error at a position of the configuration text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pos: Pos,
    message: String,
}

impl Error {
    /// An error with a message at a position.
    pub fn new(pos: Pos, message: impl Into<String>) -> Self {
        Error {
            pos,
            message: message.into(),
        }
    }

    /// Where the error was found.
    pub fn pos(&self) -> Pos {
        self.pos
    }

    /// What went wrong, without the position.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pos, self.message)
    }
}

impl std::error::Error for Error {}
