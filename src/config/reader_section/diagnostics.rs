//! The configuration error and warning types, both printed as
//! `SOURCE:LINE:COL: error: MESSAGE` (or `warning:`), the prefix shrinking when the source
//! name or the position is unknown.

use std::fmt;

use crate::config::brainscript::{self, Pos};
use crate::quote::file_name;

/// Where a diagnostic points: a source name and, optionally, a position in it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Location {
    source: String,
    pos: Option<Pos>,
}

impl Location {
    fn write_prefix(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.source.is_empty(), self.pos) {
            (false, Some(pos)) => write!(f, "{}:{}: ", file_name(&self.source), pos),
            (false, None) => write!(f, "{}: ", file_name(&self.source)),
            (true, Some(pos)) => write!(f, "{pos}: "),
            (true, None) => Ok(()),
        }
    }
}

/// The accessors and the `Display` of a located message type (a struct with `location` and
/// `message` fields), printed with the given severity word.
macro_rules! located_message {
    ($ty:ident, $severity:literal) => {
        impl $ty {
            /// The text, without the location prefix.
            pub fn message(&self) -> &str {
                &self.message
            }

            /// The 1-based line, or 0 when there is no position.
            pub fn line(&self) -> u32 {
                self.location.pos.map_or(0, |p| p.line)
            }

            /// The 1-based column in bytes, or 0 when there is no position.
            pub fn col(&self) -> u32 {
                self.location.pos.map_or(0, |p| p.col)
            }

            /// The configuration's name as given by the caller (empty for builder errors).
            pub fn source_name(&self) -> &str {
                &self.location.source
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.location.write_prefix(f)?;
                write!(f, concat!($severity, ": {}"), self.message)
            }
        }
    };
}

/// A configuration that cannot be used: unreadable, malformed, or missing or mistyping a
/// parameter. Displays as `SOURCE:LINE:COL: error: MESSAGE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    location: Location,
    message: String,
    /// Warnings found before the error (a misspelt key often explains it).
    warnings: Vec<ConfigWarning>,
}

impl ConfigError {
    /// An error at a position of `source`.
    pub(crate) fn at(source: &str, pos: Pos, message: impl Into<String>) -> Self {
        ConfigError {
            location: Location {
                source: source.to_string(),
                pos: Some(pos),
            },
            message: message.into(),
            warnings: Vec::new(),
        }
    }

    /// An error about `source` as a whole (no position); `source` may be empty.
    pub(crate) fn whole(source: &str, message: impl Into<String>) -> Self {
        ConfigError {
            location: Location {
                source: source.to_string(),
                pos: None,
            },
            message: message.into(),
            warnings: Vec::new(),
        }
    }

    /// Attaches the warnings found before the error.
    pub(crate) fn with_warnings(mut self, warnings: Vec<ConfigWarning>) -> Self {
        self.warnings = warnings;
        self
    }

    /// The warnings found before the error, in the order found (print them first).
    pub fn warnings(&self) -> &[ConfigWarning] {
        &self.warnings
    }

    /// A BrainScript error reported against `source`.
    pub(crate) fn from_script(source: &str, err: &brainscript::Error) -> Self {
        Self::at(source, err.pos(), err.message())
    }
}

located_message!(ConfigError, "error");

impl std::error::Error for ConfigError {}

/// Something in a usable configuration that is probably a mistake, such as an unknown
/// parameter name. Displays as `SOURCE:LINE:COL: warning: MESSAGE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning {
    location: Location,
    message: String,
}

impl ConfigWarning {
    /// A warning at a position of `source`.
    pub(crate) fn at(source: &str, pos: Pos, message: impl Into<String>) -> Self {
        ConfigWarning {
            location: Location {
                source: source.to_string(),
                pos: Some(pos),
            },
            message: message.into(),
        }
    }
}

located_message!(ConfigWarning, "warning");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_forms() {
        let e = ConfigError::at("a.cntk", Pos::new(3, 7), "bad");
        assert_eq!(e.to_string(), "a.cntk:3:7: error: bad");
        assert_eq!((e.line(), e.col(), e.message()), (3, 7, "bad"));
        assert_eq!(ConfigError::whole("", "bad").to_string(), "error: bad");
        assert_eq!(ConfigError::whole("x", "bad").to_string(), "x: error: bad");
        let w = ConfigWarning::at("a.cntk", Pos::new(1, 2), "hm");
        assert_eq!(w.to_string(), "a.cntk:1:2: warning: hm");
    }
}
