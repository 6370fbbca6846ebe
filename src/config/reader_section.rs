//! Reader sections of BrainScript documents: [`ConfigDocument`] parses a whole CNTK
//! configuration, chooses the reader section (`select`), reads its parameters (`extract`)
//! and reports problems as [`ConfigError`]s and [`ConfigWarning`]s.

mod diagnostics;
mod extract;
mod keys;
mod select;

use std::path::Path;

pub use diagnostics::{ConfigError, ConfigWarning};

use super::brainscript::{self, Evaluator, Record};
use super::{InputConfig, Precision, ReaderConfig};
use crate::quote::file_name;
use select::SelectError;

/// Values given beside a configuration (the `ctf` tool's `--file`, `--input`,
/// `--precision`, `--max-errors`, `--trace-level`, `--skip-sequence-ids`, and `ctf read`'s
/// `--workers` and `--rank`) that replace its own: a replaced parameter is not read at all,
/// so a value the reader could not use there (a `$macro$`, a wrong type) or a missing one is
/// no error.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConfigOverrides {
    /// The files of the reader, or of the first deserializer of a composite reader (none:
    /// the configuration's).
    pub files: Vec<String>,
    /// The inputs of a reader with one deserializer (none: the configuration's); a
    /// composite reader's cannot be replaced (an error).
    pub inputs: Vec<InputConfig>,
    /// The precision (none: the configuration's).
    pub precision: Option<Precision>,
    /// `maxErrors` (none: the configuration's).
    pub max_errors: Option<u64>,
    /// `traceLevel` (none: the configuration's).
    pub trace_level: Option<u32>,
    /// `skipSequenceIds = true` for every deserializer (false: each deserializer's own).
    pub skip_sequence_ids: bool,
    /// `numDataPartitions`, the number of workers (none: the configuration's).
    pub num_data_partitions: Option<u32>,
    /// `partitionIndex`, this worker's rank (none: the configuration's). A rank not below
    /// the number of workers is an error naming where each of the two came from.
    pub partition_index: Option<u32>,
}

/// A parsed BrainScript configuration document, from which reader sections are read.
///
/// ```
/// use ctf_reader::config::ConfigDocument;
///
/// let text = r#"
/// command = train
/// precision = "double"
/// train = [
///     reader = [
///         readerType = "CNTKTextFormatReader"
///         file = "train.ctf"
///         input = [ features = [ dim = 28 * 28; format = "dense" ] ]
///     ]
/// ]
/// "#;
/// let doc = ConfigDocument::parse(text, "mnist.cntk").unwrap();
/// let (config, warnings) = doc.reader_config(None).unwrap();
/// assert_eq!(config.inputs[0].dim, 784);
/// assert!(warnings.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct ConfigDocument {
    root: Record,
    source: String,
}

impl ConfigDocument {
    /// Parses `text`; `source_name` names it in diagnostics (usually the file path).
    pub fn parse(text: &str, source_name: &str) -> Result<ConfigDocument, ConfigError> {
        let root =
            brainscript::parse(text).map_err(|e| ConfigError::from_script(source_name, &e))?;
        Ok(ConfigDocument {
            root,
            source: source_name.to_string(),
        })
    }

    /// The name diagnostics use for this document.
    pub fn source_name(&self) -> &str {
        &self.source
    }

    /// The document's top-level record, for evaluating other members with
    /// [`brainscript::Evaluator`].
    pub fn root(&self) -> &Record {
        &self.root
    }

    /// Reads the reader section chosen by `section` (a dotted path, case-insensitive, to a
    /// reader record or to a command record holding one) or, without it, by the rules of
    /// SPEC §7.5: a top-level `reader`, else the reader of the section(s) named by
    /// `command`, else the only `reader` anywhere.
    pub fn reader_config(
        &self,
        section: Option<&str>,
    ) -> Result<(ReaderConfig, Vec<ConfigWarning>), ConfigError> {
        self.reader_config_with(section, &ConfigOverrides::default())
    }

    /// As [`reader_config`](Self::reader_config), with the parameters `overrides` gives
    /// replaced before anything is required or checked.
    pub fn reader_config_with(
        &self,
        section: Option<&str>,
        overrides: &ConfigOverrides,
    ) -> Result<(ReaderConfig, Vec<ConfigWarning>), ConfigError> {
        let mut eval = Evaluator::new(&self.root);
        let reader = select::select(&mut eval, section).map_err(|e| match e {
            SelectError::Script(err) => ConfigError::from_script(&self.source, &err),
            SelectError::Whole(message) => ConfigError::whole(&self.source, message),
        })?;
        extract::extract(&mut eval, &reader, &self.source, overrides)
    }
}

impl ReaderConfig {
    /// Parses BrainScript `text` (named `source_name` in diagnostics) and reads its reader
    /// section (see [`ConfigDocument::reader_config`]).
    pub fn from_brainscript(
        text: &str,
        source_name: &str,
        section: Option<&str>,
    ) -> Result<(ReaderConfig, Vec<ConfigWarning>), ConfigError> {
        ConfigDocument::parse(text, source_name)?.reader_config(section)
    }

    /// Reads a configuration file and its reader section; diagnostics name the file as
    /// given.
    pub fn from_file(
        path: &Path,
        section: Option<&str>,
    ) -> Result<(ReaderConfig, Vec<ConfigWarning>), ConfigError> {
        Self::from_file_with(path, section, &ConfigOverrides::default())
    }

    /// As [`from_file`](Self::from_file), with the parameters `overrides` gives replaced
    /// before anything is required or checked (see [`ConfigOverrides`]).
    pub fn from_file_with(
        path: &Path,
        section: Option<&str>,
        overrides: &ConfigOverrides,
    ) -> Result<(ReaderConfig, Vec<ConfigWarning>), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::whole(
                "",
                format!(
                    "cannot read configuration file '{}': {e}",
                    file_name(&path.display().to_string())
                ),
            )
        })?;
        ConfigDocument::parse(&text, &path.display().to_string())?
            .reader_config_with(section, overrides)
    }
}
