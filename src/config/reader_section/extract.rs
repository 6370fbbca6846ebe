//! Reading the typed parameters out of a chosen reader record, in either CNTK form (legacy
//! `readerType` or composite `deserializers`), and handing them to the shared validation.
//!
//! Parameters are looked up case-insensitively in the record that holds them (the reader,
//! or the deserializer in the composite form) and then outward through the enclosing
//! records; input parameters only in their input record. The string `default` means "use the
//! default". An unquoted name that is not defined anywhere is taken as a string, as CNTK's
//! legacy configuration language does (`format = dense`, `randomize = none`).

use crate::config::brainscript::{self, Error, Evaluator, Expr, ExprKind, Pos, RecordValue, Value};
use crate::config::builder::{defaults, validate, InputOrigin, JoinedOrigin, Origin};
use crate::config::{
    default_window_chunks, ConfigError, ConfigOverrides, ConfigWarning, InputConfig,
    JoinedDeserializer, Precision, RandomizerKind, ReaderConfig, ReaderForm, StorageFormat,
    DEFAULT_CHUNK_SIZE_IN_BYTES,
};

use super::keys::{is_reader_key, reader_keys, suggest, INPUT_PARAMS};

/// An evaluated parameter, before conversion to its type.
enum Raw<'a> {
    /// An evaluated value.
    Value(Value<'a>),
    /// An unquoted name that is not defined anywhere: its text.
    Word(String),
}

/// A parameter found in the configuration.
struct Param<'a> {
    /// How error messages name it: "parameter 'dim' of input 'x'".
    label: String,
    raw: Raw<'a>,
    /// Where its value was written.
    pos: Pos,
    /// Where its key was written.
    key: Pos,
    /// Where each element was written, when the value is an array written in place
    /// (`("a.ctf" : "b.ctf")`); empty otherwise.
    element_pos: Vec<Pos>,
    /// The `ctf` option that can stand in for it (`--file`, `--input`), if any.
    stand_in: Option<&'static str>,
}

/// A reader-level parameter's value in a configuration, as it would be written.
type WrittenValue = fn(&ReaderConfig) -> String;

/// The parameters that hold for the whole reader, with their value in a configuration as it
/// would be written. Every other reader parameter (`file`, `input`, `skipSequenceIds`,
/// `chunkSizeInBytes`, `cacheIndex`) belongs to each deserializer of a composite reader.
const READER_WIDE_PARAMS: [(&str, WrittenValue); 13] = [
    ("precision", |c| {
        match c.precision {
            Precision::Float => "'float'",
            Precision::Double => "'double'",
        }
        .to_string()
    }),
    ("randomize", |c| c.randomize.to_string()),
    ("randomizationSeed", |c| c.randomization_seed.to_string()),
    // Unset acts as the default window in chunks (see `ReaderConfig::window`); with a
    // sample-based window it is the whole data (or an error found later).
    ("randomizationWindow", |c| {
        match (c.randomization_window, c.sample_based_randomization_window) {
            (Some(window), _) => window.to_string(),
            (None, Some(true)) => "'none'".to_string(),
            (None, _) => default_window_chunks(c.chunk_size_in_bytes).to_string(),
        }
    }),
    // Unset acts as false (see `ReaderConfig::window`).
    ("sampleBasedRandomizationWindow", |c| {
        c.sample_based_randomization_window
            .unwrap_or(false)
            .to_string()
    }),
    ("keepDataInMemory", |c| c.keep_data_in_memory.to_string()),
    ("frameMode", |c| c.frame_mode.to_string()),
    ("maxErrors", |c| c.max_errors.to_string()),
    ("traceLevel", |c| c.trace_level.to_string()),
    ("verbosity", |c| c.verbosity.to_string()),
    ("randomizer", |c| {
        match c.randomizer {
            RandomizerKind::Block => "'block'",
            RandomizerKind::Cntk => "'cntk'",
        }
        .to_string()
    }),
    ("numDataPartitions", |c| c.num_data_partitions.to_string()),
    ("partitionIndex", |c| c.partition_index.to_string()),
];

/// Where [`Extractor::check_agreement`] looks for a record's reader-level keys.
#[derive(Clone, Copy)]
enum Lookup {
    /// In the record's own members only.
    Own,
    /// In the record, then in the records enclosing it, as its values are read.
    Outward,
}

/// Reads one reader section; collects warnings on the way.
struct Extractor<'e, 'a> {
    eval: &'e mut Evaluator<'a>,
    source: String,
    warnings: Vec<ConfigWarning>,
    /// Parameters given beside the configuration, which are not read from it.
    overrides: &'e ConfigOverrides,
    /// The options that can replace the files and the inputs of the deserializer being
    /// read: those of the first deserializer only, and its inputs only when it is alone.
    stand_ins: StandIns,
}

/// The `ctf` options that can replace a deserializer's `file` and `input` (see
/// [`ConfigOverrides`]); `None` where none can. (The options for the reader-wide parameters
/// and `skipSequenceIds` replace those in every deserializer alike.)
#[derive(Clone, Copy)]
struct StandIns {
    file: Option<&'static str>,
    input: Option<&'static str>,
}

impl StandIns {
    /// Both, for a legacy reader or the only deserializer of a composite one.
    const BOTH: Self = Self {
        file: Some("--file"),
        input: Some("--input"),
    };
}

/// Whether the evaluation error `err` is the evaluator's refusal of a `$macro$`.
fn is_macro_error(err: &Error) -> bool {
    err.message().starts_with("macro")
}

/// Whether `value` (a `file` parameter's) holds a `$macro$`.
fn holds_macro(value: &Value<'_>) -> bool {
    match value {
        Value::Str(s) => macro_in(s).is_some(),
        Value::Array(items) => items.iter().any(holds_macro),
        _ => false,
    }
}

/// Extracts and validates the configuration of the reader record `reader`.
pub(crate) fn extract<'a>(
    eval: &mut Evaluator<'a>,
    reader: &RecordValue<'a>,
    source: &str,
    overrides: &ConfigOverrides,
) -> Result<(ReaderConfig, Vec<ConfigWarning>), ConfigError> {
    let mut x = Extractor {
        eval,
        source: source.to_string(),
        warnings: Vec::new(),
        overrides,
        stand_ins: StandIns::BOTH,
    };
    match x.reader(reader) {
        Ok(config) => Ok((config, x.warnings)),
        Err(error) => Err(error.with_warnings(x.warnings)),
    }
}

/// A finite non-negative whole number below 2^64, if `n` is one.
fn whole(n: f64) -> Option<u64> {
    let valid = n.is_finite() && n >= 0.0 && n.fract() == 0.0 && n < 18_446_744_073_709_551_616.0;
    // The cast is exact: `n` is a whole number in range.
    valid.then_some(n as u64)
}

/// The value of `text` when it is a decimal integer below 2^64 written with digits only.
/// CNTK runs a configuration with `command` through its legacy parser, which keeps every
/// value as text without its quotes and converts it where it is used (`Config.h`), so
/// `dim = "784"` is 784 there.
fn decimal(text: &str) -> Option<u64> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    digits_only.then(|| text.parse().ok()).flatten()
}

/// The first `$name$` macro inside a string, if any.
fn macro_in(text: &str) -> Option<&str> {
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        let after = rest.get(start + 1..).unwrap_or("");
        let len = after
            .find(|c: char| !(c == '_' || c.is_alphanumeric()))
            .unwrap_or(after.len());
        if len > 0 && after.get(len..).is_some_and(|s| s.starts_with('$')) {
            return text
                .get(text.len() - rest.len() + start..text.len() - rest.len() + start + len + 2);
        }
        rest = after;
    }
    None
}

/// Where each element of `expr` was written, when it is an array written in place; empty
/// otherwise.
fn element_positions(expr: &Expr) -> Vec<Pos> {
    match &expr.kind {
        ExprKind::Array(items) => items.iter().map(|item| item.pos).collect(),
        _ => Vec::new(),
    }
}

impl Param<'_> {
    /// Where element `index` of an array value was written, else where the value was.
    fn element_pos(&self, index: usize) -> Pos {
        self.element_pos.get(index).copied().unwrap_or(self.pos)
    }

    fn described(&self) -> String {
        match &self.raw {
            Raw::Word(w) => format!("the undefined name '{w}'"),
            Raw::Value(Value::Number(n)) => format!("{n}"),
            Raw::Value(Value::Str(s)) => format!("'{s}'"),
            Raw::Value(Value::Bool(b)) => format!("{b}"),
            Raw::Value(v) => v.type_name().to_string(),
        }
    }

    fn error(&self, source: &str, message: String) -> ConfigError {
        ConfigError::at(source, self.pos, message)
    }

    /// The error for a value that is not `expected`; a value holding a `$name$` macro (a
    /// quoted one, as in `dim = "$vocabSize$"`) is reported as that macro.
    fn wrong_type(&self, source: &str, expected: &str) -> ConfigError {
        if let Some(found) = self.text().and_then(macro_in) {
            return self.macro_error(source, found);
        }
        self.error(
            source,
            format!(
                "{} must be {expected}, got {}",
                self.label,
                self.described()
            ),
        )
    }

    fn text(&self) -> Option<&str> {
        match &self.raw {
            Raw::Word(w) => Some(w),
            Raw::Value(Value::Str(s)) => Some(s),
            _ => None,
        }
    }

    fn string(&self, source: &str) -> Result<String, ConfigError> {
        let text = self
            .text()
            .ok_or_else(|| self.wrong_type(source, "a string"))?;
        if let Some(found) = macro_in(text) {
            return Err(self.macro_error(source, found));
        }
        Ok(text.to_string())
    }

    /// The error for the macro `found` in this parameter's value, with the option that
    /// can stand in for it.
    fn macro_error(&self, source: &str, found: &str) -> ConfigError {
        let hint = match self.stand_in {
            Some(option) => format!("edit the configuration or pass {option}"),
            None => "edit the configuration".to_string(),
        };
        self.error(
            source,
            format!(
                "{} uses the macro '{found}', which is not supported; {hint}",
                self.label
            ),
        )
    }

    /// `true`/`false`, or as CNTK's legacy parser also reads them (`Config.h`), `1`/`0` (a
    /// number or text) and `t`/`f`; words in any case.
    fn boolean(&self, source: &str) -> Result<bool, ConfigError> {
        let is_one_of = |words: [&str; 3]| {
            self.text()
                .is_some_and(|t| words.iter().any(|w| t.eq_ignore_ascii_case(w)))
        };
        match &self.raw {
            Raw::Value(Value::Bool(b)) => Ok(*b),
            Raw::Value(Value::Number(n)) if *n == 1.0 => Ok(true),
            Raw::Value(Value::Number(n)) if *n == 0.0 => Ok(false),
            _ if is_one_of(["true", "t", "1"]) => Ok(true),
            _ if is_one_of(["false", "f", "0"]) => Ok(false),
            _ => Err(self.wrong_type(source, "a boolean (true or false)")),
        }
    }

    fn unsigned(&self, source: &str, max: u64, expected: &str) -> Result<u64, ConfigError> {
        let value = match &self.raw {
            Raw::Value(Value::Number(n)) => whole(*n),
            Raw::Value(Value::Str(s)) => decimal(s),
            _ => None,
        };
        value
            .filter(|v| *v <= max)
            .ok_or_else(|| self.wrong_type(source, expected))
    }

    fn u64(&self, source: &str) -> Result<u64, ConfigError> {
        self.unsigned(source, u64::MAX, "a non-negative integer")
    }

    fn u32(&self, source: &str) -> Result<u32, ConfigError> {
        let v = self.unsigned(
            source,
            u64::from(u32::MAX),
            "a non-negative integer below 2^32",
        )?;
        u32::try_from(v).map_err(|_| self.wrong_type(source, "a non-negative integer below 2^32"))
    }
}

impl<'a> Extractor<'_, 'a> {
    fn script_error(&self, err: &Error) -> ConfigError {
        ConfigError::from_script(&self.source, err)
    }

    /// Looks up `key` in `record` (and its enclosing records when `outward`); `None` when
    /// absent or `default`. `stand_in` is the option that can replace it, for its errors.
    fn param(
        &mut self,
        record: &RecordValue<'a>,
        key: &str,
        outward: bool,
        label: String,
        stand_in: Option<&'static str>,
    ) -> Result<Option<Param<'a>>, ConfigError> {
        let found = if outward {
            record.find_outward(key)
        } else {
            record.find(key)
        };
        let Some(found) = found.map_err(|e| self.script_error(&e))? else {
            return Ok(None);
        };
        let expr = &found.member.value;
        let pos = expr.pos;
        let key_pos = found.member.pos;
        let undefined_word = match &expr.kind {
            ExprKind::Ident(name) => match found.owner.resolve(name) {
                Ok(None) => Some(name.clone()),
                Ok(Some(_)) => None,
                Err(e) => return Err(self.script_error(&e)),
            },
            _ => None,
        };
        let raw = match undefined_word {
            Some(word) => Raw::Word(word),
            None => Raw::Value(
                self.eval
                    .eval_member(&found)
                    .map_err(|e| self.eval_error(key, &label, stand_in, pos, &e))?,
            ),
        };
        let param = Param {
            label,
            raw,
            pos,
            key: key_pos,
            element_pos: element_positions(expr),
            stand_in,
        };
        if param
            .text()
            .is_some_and(|t| t.eq_ignore_ascii_case("default"))
        {
            return Ok(None);
        }
        Ok(Some(param))
    }

    /// The error `err` met while evaluating parameter `key`, shown as `label` (written at
    /// `pos`; the option `stand_in` can replace it), reported where it happened, with a hint
    /// where one helps.
    fn eval_error(
        &self,
        key: &str,
        label: &str,
        stand_in: Option<&'static str>,
        pos: Pos,
        err: &Error,
    ) -> ConfigError {
        let mut message = if err.pos() == pos {
            format!("{label}: {}", err.message())
        } else {
            format!("{label} (at {pos}): {}", err.message())
        };
        if let Some(option) = stand_in.filter(|_| is_macro_error(err)) {
            message.push_str(&format!(" (or pass {option})"));
        }
        let path_like = [
            "unknown name",
            "expected ",
            "invalid number",
            "unexpected character",
        ]
        .iter()
        .any(|start| err.message().starts_with(start))
            || err.message().contains("has no member");
        if key.eq_ignore_ascii_case("file") && path_like {
            // `file = data/train.ctf`: CNTK's legacy parser takes the line as text;
            // BrainScript divides `data` by `train.ctf`.
            message.push_str(
                "; write a path in quotes, as in file = \"data/train.ctf\" (an unquoted path \
                 is an expression here)",
            );
        }
        ConfigError::at(&self.source, err.pos(), message)
    }

    /// Fails when `record`, whose members are listed, has an `include`: the included text,
    /// which is not read, might define more of them.
    fn refuse_include(&self, record: &RecordValue<'a>) -> Result<(), ConfigError> {
        match record.record().include {
            Some(at) => Err(self.script_error(&brainscript::include_error(at))),
            None => Ok(()),
        }
    }

    /// A parameter of the input record `record`, which `--input` may stand in for.
    fn input_param(
        &mut self,
        record: &RecordValue<'a>,
        key: &str,
        label: String,
    ) -> Result<Option<Param<'a>>, ConfigError> {
        self.param(record, key, false, label, self.stand_ins.input)
    }

    /// A reader-level parameter.
    fn reader_param(
        &mut self,
        record: &RecordValue<'a>,
        key: &str,
    ) -> Result<Option<Param<'a>>, ConfigError> {
        let stand_in = match key {
            "file" => self.stand_ins.file,
            "input" => self.stand_ins.input,
            "precision" => Some("--precision"),
            "maxErrors" => Some("--max-errors"),
            "traceLevel" => Some("--trace-level"),
            "numDataPartitions" => Some("--workers to ctf read"),
            "partitionIndex" => Some("--rank to ctf read"),
            // The flag sets it only.
            "skipSequenceIds" => Some("--skip-sequence-ids if the macro stands for true"),
            _ => None,
        };
        self.param(record, key, true, format!("parameter '{key}'"), stand_in)
    }

    fn reader(&mut self, reader: &RecordValue<'a>) -> Result<ReaderConfig, ConfigError> {
        self.check_keys(reader, None)?;
        match reader
            .find("deserializers")
            .map_err(|e| self.script_error(&e))?
        {
            Some(found) => {
                let pos = found.member.value.pos;
                let value = self.eval.eval_member(&found).map_err(|e| {
                    self.eval_error("deserializers", "parameter 'deserializers'", None, pos, &e)
                })?;
                let element_pos = element_positions(&found.member.value);
                let deserializers = self.deserializers(value, pos, &element_pos)?;
                if !self.overrides.inputs.is_empty() && deserializers.len() > 1 {
                    return Err(ConfigError::at(
                        &self.source,
                        pos,
                        format!(
                            "the inputs given cannot replace the inputs of a composite reader \
                             of {} deserializers; change their inputs in the configuration",
                            deserializers.len()
                        ),
                    ));
                }
                // `--file` replaces the first deserializer's files only: it stands in for a
                // macro there unless a later deserializer meets one too (the same one, in a
                // `file` they share, or in a name they both use).
                let later_files_free = self.files_free_of_macros(&deserializers[1..]);
                let reader_chunk_size = self.reader_chunk_size(reader)?;
                let mut merged: Option<(ReaderConfig, Origin)> = None;
                for (d, deserializer) in deserializers.iter().enumerate() {
                    self.check_keys(deserializer, None)?;
                    let primary = merged.is_none();
                    self.stand_ins = StandIns {
                        file: (primary && later_files_free).then_some("--file"),
                        input: (deserializers.len() == 1).then_some("--input"),
                    };
                    let (mut config, origin) =
                        self.parameters(deserializer, ReaderForm::Composite, primary)?;
                    size_default_window(&mut config, reader_chunk_size);
                    merged = Some(match merged {
                        None => {
                            // The reader record's reader-level values, its own or an
                            // enclosing record's (CNTK reads them there), must agree with the
                            // first deserializer's, which hold for the whole reader.
                            let mut reader_view = defaults();
                            reader_view.chunk_size_in_bytes = reader_chunk_size;
                            self.reader_wide(reader, &mut reader_view, &mut Origin::default())?;
                            self.check_agreement(
                                reader,
                                Lookup::Outward,
                                "the reader record",
                                &reader_view,
                                &config,
                                &origin,
                            )?;
                            (config, origin)
                        }
                        Some((primary, primary_origin)) => {
                            let number = d + 1;
                            self.check_agreement(
                                deserializer,
                                Lookup::Own,
                                &format!("deserializer {number}"),
                                &config,
                                &primary,
                                &primary_origin,
                            )?;
                            join(primary, primary_origin, config, origin, deserializer.pos())
                        }
                    });
                }
                let Some((config, origin)) = merged else {
                    return Err(ConfigError::at(&self.source, pos, "no deserializer given"));
                };
                validate(config, &origin)
            }
            None => {
                if let Some(p) = self.reader_param(reader, "readerType")? {
                    let reader_type = p.string(&self.source)?;
                    if !reader_type.eq_ignore_ascii_case("CNTKTextFormatReader") {
                        return Err(p.error(
                            &self.source,
                            format!("unsupported readerType '{reader_type}': only 'CNTKTextFormatReader' is supported"),
                        ));
                    }
                }
                let (config, origin) = self.parameters(reader, ReaderForm::Legacy, true)?;
                validate(config, &origin)
            }
        }
    }

    /// The reader-level `chunkSizeInBytes` of a composite reader: the reader record's or an
    /// enclosing record's, else the default. CNTK sizes the default randomization window by
    /// it (`CompositeDataReader.cpp`), whatever the deserializers' own.
    fn reader_chunk_size(&mut self, reader: &RecordValue<'a>) -> Result<u64, ConfigError> {
        let source = self.source.clone();
        match self.reader_param(reader, "chunkSizeInBytes")? {
            Some(p) => p.u64(&source),
            None => Ok(DEFAULT_CHUNK_SIZE_IN_BYTES),
        }
    }

    /// Whether the `file` of each of `deserializers` evaluates without meeting a `$macro$`
    /// (its errors of any other kind are reported when it is read).
    fn files_free_of_macros(&mut self, deserializers: &[RecordValue<'a>]) -> bool {
        deserializers.iter().all(|deserializer| {
            let Ok(Some(found)) = deserializer.find_outward("file") else {
                return true;
            };
            match self.eval.eval_member(&found) {
                Ok(value) => !holds_macro(&value),
                Err(e) => !is_macro_error(&e),
            }
        })
    }

    /// The CTF deserializers of a composite reader, in order (a single record counts as one).
    /// `pos` is where the value was written, `element_pos` where each element was, when it
    /// is an array written in place.
    fn deserializers(
        &mut self,
        value: Value<'a>,
        pos: Pos,
        element_pos: &[Pos],
    ) -> Result<Vec<RecordValue<'a>>, ConfigError> {
        let records = match value {
            Value::Record(r) => vec![r],
            Value::Array(items) => {
                let mut records = Vec::new();
                for (index, item) in items.into_iter().enumerate() {
                    match item {
                        Value::Record(r) => records.push(r),
                        other => {
                            return Err(ConfigError::at(
                                &self.source,
                                element_pos.get(index).copied().unwrap_or(pos),
                                format!(
                                    "each of 'deserializers' must be a record, got {}",
                                    other.type_name()
                                ),
                            ))
                        }
                    }
                }
                records
            }
            other => {
                return Err(ConfigError::at(
                    &self.source,
                    pos,
                    format!(
                        "parameter 'deserializers' must be a record or an array of records, got {}",
                        other.type_name()
                    ),
                ))
            }
        };
        if records.is_empty() {
            return Err(ConfigError::at(&self.source, pos, "no deserializer given"));
        }
        for deserializer in &records {
            self.check_deserializer(deserializer)?;
        }
        Ok(records)
    }

    /// Checks a deserializer's `type` and `module`.
    fn check_deserializer(&mut self, deserializer: &RecordValue<'a>) -> Result<(), ConfigError> {
        let label = "deserializer parameter 'type'".into();
        match self.param(deserializer, "type", false, label, None)? {
            None => {
                return Err(ConfigError::at(
                    &self.source,
                    deserializer.pos(),
                    "deserializer is missing required parameter 'type' (expected \"CNTKTextFormatDeserializer\")",
                ))
            }
            Some(p) => {
                let t = p.string(&self.source)?;
                if !t.eq_ignore_ascii_case("CNTKTextFormatDeserializer") {
                    return Err(p.error(
                        &self.source,
                        format!("unsupported deserializer type '{t}': only 'CNTKTextFormatDeserializer' is supported"),
                    ));
                }
            }
        }
        if let Some(p) = self.param(
            deserializer,
            "module",
            false,
            "deserializer parameter 'module'".into(),
            None,
        )? {
            let m = p.string(&self.source)?;
            if !m.eq_ignore_ascii_case("CNTKTextFormatReader") {
                return Err(p.error(
                    &self.source,
                    format!("unsupported deserializer module '{m}': only 'CNTKTextFormatReader' is supported"),
                ));
            }
        }
        Ok(())
    }

    /// Warns about unknown keys of a reader, deserializer or input record (`input` names the
    /// input), and rejects a key given twice in different case.
    fn check_keys(
        &mut self,
        record: &RecordValue<'a>,
        input: Option<&str>,
    ) -> Result<(), ConfigError> {
        self.refuse_include(record)?;
        let members = &record.record().members;
        for (i, member) in members.iter().enumerate() {
            let name = &member.name;
            let known = match input {
                None => is_reader_key(name),
                Some(_) => INPUT_PARAMS.iter().any(|k| k.eq_ignore_ascii_case(name)),
            };
            if !known {
                let candidate = match input {
                    None => suggest(name, reader_keys()),
                    Some(_) => suggest(name, INPUT_PARAMS.into_iter()),
                };
                let hint = candidate.map_or(String::new(), |c| format!("; did you mean '{c}'?"));
                let message = match input {
                    None => format!("unknown reader parameter '{name}'{hint}"),
                    Some(input) => format!("unknown parameter '{name}' in input '{input}'{hint}"),
                };
                self.warnings
                    .push(ConfigWarning::at(&self.source, member.pos, message));
                continue;
            }
            if input.is_none() && name.eq_ignore_ascii_case("truncated") {
                self.warn_if_truncated(record, name)?;
            }
            if let Some(first) = members
                .iter()
                .take(i)
                .find(|m| m.name.eq_ignore_ascii_case(name))
            {
                return Err(ConfigError::at(
                    &self.source,
                    member.pos,
                    format!(
                        "parameter '{name}' is given twice ('{}' at {}; keys are case-insensitive)",
                        first.name, first.pos
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Warns, at its value, when record `record` sets `truncated` (written `name`) to true:
    /// CNTK's packing for truncated back-propagation through time (sequences cut into
    /// `truncationLength` pieces, interleaved) is not implemented, and minibatches hold
    /// whole sequences. A value that is not a boolean is an error, as in CNTK.
    fn warn_if_truncated(
        &mut self,
        record: &RecordValue<'a>,
        name: &str,
    ) -> Result<(), ConfigError> {
        let label = format!("parameter '{name}'");
        let Some(p) = self.param(record, name, false, label, None)? else {
            return Ok(());
        };
        if p.boolean(&self.source)? {
            self.warnings.push(ConfigWarning::at(
                &self.source,
                p.pos,
                "'truncated = true' (CNTK's packing for truncated back-propagation through \
                 time, with 'truncationLength') is not supported: minibatches hold whole \
                 sequences",
            ));
        }
        Ok(())
    }

    /// Reads every parameter from `params` (reader or deserializer), with where each was
    /// written, for the validation; the overridden ones are taken from the overrides instead
    /// (files and inputs only for the `primary`, first, deserializer).
    fn parameters(
        &mut self,
        params: &RecordValue<'a>,
        form: ReaderForm,
        primary: bool,
    ) -> Result<(ReaderConfig, Origin), ConfigError> {
        let source = self.source.clone();
        let src = source.as_str();
        let mut config = defaults();
        config.form = form;
        let mut origin = Origin {
            source: source.clone(),
            params: Some(params.pos()),
            ..Origin::default()
        };
        let overrides = self.overrides;
        if primary && !overrides.files.is_empty() {
            config.files = overrides.files.clone();
        } else if let Some(p) = self.reader_param(params, "file")? {
            origin.file = Some(p.pos);
            config.files = match &p.raw {
                Raw::Value(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| match item {
                        Value::Str(s) => Param {
                            label: p.label.clone(),
                            raw: Raw::Value(Value::Str(s.clone())),
                            pos: p.element_pos(index),
                            key: p.key,
                            element_pos: Vec::new(),
                            stand_in: p.stand_in,
                        }
                        .string(src),
                        other => Err(ConfigError::at(
                            src,
                            p.element_pos(index),
                            format!("parameter 'file' must be a string or an array of strings, but an element is {}", other.type_name()),
                        )),
                    })
                    .collect::<Result<_, _>>()?,
                _ if p.text().is_some() => vec![p.string(src)?],
                _ => return Err(p.wrong_type(src, "a string or an array of strings")),
            };
        }
        if primary && !overrides.inputs.is_empty() {
            config.inputs = overrides.inputs.clone();
            origin.inputs = vec![InputOrigin::default(); config.inputs.len()];
        } else {
            let input = self.reader_param(params, "input")?.ok_or_else(|| {
                ConfigError::at(src, params.pos(), "missing required parameter 'input'")
            })?;
            origin.input = Some(input.pos);
            let Raw::Value(Value::Record(inputs)) = &input.raw else {
                return Err(input.wrong_type(src, "a record of inputs"));
            };
            self.refuse_include(inputs)?;
            for member in &inputs.record().members {
                let (cfg, at) = self.input(inputs, &member.name, member.pos)?;
                config.inputs.push(cfg);
                origin.inputs.push(at);
            }
        }
        // The parameters of each deserializer.
        if overrides.skip_sequence_ids {
            config.skip_sequence_ids = true;
        } else if let Some(p) = self.reader_param(params, "skipSequenceIds")? {
            config.skip_sequence_ids = p.boolean(src)?;
        }
        if let Some(p) = self.reader_param(params, "cacheIndex")? {
            config.cache_index = p.boolean(src)?;
        }
        if let Some(p) = self.reader_param(params, "chunkSizeInBytes")? {
            config.chunk_size_in_bytes = p.u64(src)?;
        }
        self.reader_wide(params, &mut config, &mut origin)?;
        Ok((config, origin))
    }

    /// Reads the reader-level parameters (see [`READER_WIDE_PARAMS`]) as `params` sees
    /// them: its own, else those of the enclosing records; `origin` records each key found.
    fn reader_wide(
        &mut self,
        params: &RecordValue<'a>,
        config: &mut ReaderConfig,
        origin: &mut Origin,
    ) -> Result<(), ConfigError> {
        let source = self.source.clone();
        let src = source.as_str();
        if let Some(precision) = self.overrides.precision {
            config.precision = precision;
        } else if let Some(p) = self.wide_param(params, origin, "precision")? {
            let s = p.string(src)?;
            config.precision = if s.eq_ignore_ascii_case("float") {
                Precision::Float
            } else if s.eq_ignore_ascii_case("double") {
                Precision::Double
            } else {
                return Err(p.error(
                    src,
                    format!("parameter 'precision' must be 'float' or 'double', got '{s}'"),
                ));
            };
        }
        if let Some(p) = self.wide_param(params, origin, "randomize")? {
            config.randomize = match p.text() {
                Some(t) if t.eq_ignore_ascii_case("none") => false,
                Some(t) if t.eq_ignore_ascii_case("auto") => true,
                _ => p.boolean(src)?,
            };
        }
        if let Some(p) = self.wide_param(params, origin, "randomizationSeed")? {
            config.randomization_seed = p.u64(src)?;
        }
        if let Some(p) = self.wide_param(params, origin, "randomizationWindow")? {
            config.randomization_window = match p.text() {
                Some(t) if t.eq_ignore_ascii_case("auto") => None,
                _ => Some(p.u64(src)?),
            };
        }
        if let Some(p) = self.wide_param(params, origin, "sampleBasedRandomizationWindow")? {
            config.sample_based_randomization_window = Some(p.boolean(src)?);
        }
        let flags: [(&'static str, &mut bool); 2] = [
            ("keepDataInMemory", &mut config.keep_data_in_memory),
            ("frameMode", &mut config.frame_mode),
        ];
        for (key, slot) in flags {
            if let Some(p) = self.wide_param(params, origin, key)? {
                *slot = p.boolean(src)?;
            }
        }
        if let Some(max_errors) = self.overrides.max_errors {
            config.max_errors = max_errors;
        } else if let Some(p) = self.wide_param(params, origin, "maxErrors")? {
            config.max_errors = p.u64(src)?;
        }
        if let Some(trace_level) = self.overrides.trace_level {
            config.trace_level = trace_level;
        } else if let Some(p) = self.wide_param(params, origin, "traceLevel")? {
            config.trace_level = p.u32(src)?;
        }
        if let Some(p) = self.wide_param(params, origin, "verbosity")? {
            config.verbosity = p.u32(src)?;
        }
        if let Some(p) = self.wide_param(params, origin, "randomizer")? {
            let s = p.string(src)?;
            config.randomizer =
                if s.eq_ignore_ascii_case("block") || s.eq_ignore_ascii_case("default") {
                    RandomizerKind::Block
                } else if s.eq_ignore_ascii_case("cntk") {
                    RandomizerKind::Cntk
                } else {
                    return Err(p.error(
                        src,
                        format!("parameter 'randomizer' must be 'block' or 'cntk', got '{s}'"),
                    ));
                };
        }
        if let Some(workers) = self.overrides.num_data_partitions {
            config.num_data_partitions = workers;
            origin.options.push(("numDataPartitions", "--workers"));
        } else if let Some(p) = self.wide_param(params, origin, "numDataPartitions")? {
            config.num_data_partitions = p.u32(src)?;
        }
        if let Some(rank) = self.overrides.partition_index {
            config.partition_index = rank;
            origin.options.push(("partitionIndex", "--rank"));
        } else if let Some(p) = self.wide_param(params, origin, "partitionIndex")? {
            config.partition_index = p.u32(src)?;
        }
        Ok(())
    }

    /// Checks that every reader-level parameter that `record` (named `what` in messages)
    /// writes itself, or with [`Lookup::Outward`] finds in a record enclosing it, has the
    /// value in effect for the whole reader: a reader-level parameter written in a
    /// deserializer, the reader record or around it and not used would be ignored.
    /// `view` holds the values as `record` sees them; `effective` and `effective_origin`
    /// those in effect (the first deserializer's) and where they were written. A parameter
    /// replaced by the overrides is not read, so not compared.
    fn check_agreement(
        &self,
        record: &RecordValue<'a>,
        lookup: Lookup,
        what: &str,
        view: &ReaderConfig,
        effective: &ReaderConfig,
        effective_origin: &Origin,
    ) -> Result<(), ConfigError> {
        for (key, value_of) in READER_WIDE_PARAMS {
            if self.overridden(key) {
                continue;
            }
            let found = match lookup {
                Lookup::Own => record.find(key),
                Lookup::Outward => record.find_outward(key),
            };
            let Some(found) = found.map_err(|e| self.script_error(&e))? else {
                continue;
            };
            let what = if found.owner.pos() == record.pos() {
                what
            } else {
                "a record enclosing the reader"
            };
            let (written, in_effect) = (value_of(view), value_of(effective));
            if written == in_effect {
                continue;
            }
            let whence = match effective_origin.key(key) {
                Some(at) => format!("given at {at}"),
                None => "the default".to_string(),
            };
            return Err(ConfigError::at(
                &self.source,
                found.member.pos,
                format!(
                    "parameter '{key}' of {what} is {written}, but the reader uses {in_effect} \
                     ({whence}); a reader-level parameter holds for every deserializer, so \
                     each record that gives it must give that value (give it once, in the \
                     reader record)"
                ),
            ));
        }
        Ok(())
    }

    /// Whether the overrides replace the reader-level parameter `key`.
    fn overridden(&self, key: &str) -> bool {
        let overrides = self.overrides;
        match key {
            "precision" => overrides.precision.is_some(),
            "maxErrors" => overrides.max_errors.is_some(),
            "traceLevel" => overrides.trace_level.is_some(),
            "numDataPartitions" => overrides.num_data_partitions.is_some(),
            "partitionIndex" => overrides.partition_index.is_some(),
            _ => false,
        }
    }

    /// A reader-level parameter, its key recorded in `origin`.
    fn wide_param(
        &mut self,
        params: &RecordValue<'a>,
        origin: &mut Origin,
        key: &'static str,
    ) -> Result<Option<Param<'a>>, ConfigError> {
        let found = self.reader_param(params, key)?;
        if let Some(p) = &found {
            origin.keys.push((key, p.key));
            origin.values.push((key, p.pos));
        }
        Ok(found)
    }

    /// One input of the `input` record.
    fn input(
        &mut self,
        inputs: &RecordValue<'a>,
        name: &str,
        name_pos: Pos,
    ) -> Result<(InputConfig, InputOrigin), ConfigError> {
        let src = self.source.clone();
        let Some(record) = self
            .param(
                inputs,
                name,
                false,
                format!("input '{name}'"),
                self.stand_ins.input,
            )?
            .map(|p| match p.raw {
                Raw::Value(Value::Record(r)) => Ok(r),
                _ => Err(p.wrong_type(&src, "a record (dim, format, alias, definesMBSize)")),
            })
            .transpose()?
        else {
            return Err(ConfigError::at(
                &src,
                name_pos,
                format!("input '{name}' is 'default'; it must be a record"),
            ));
        };
        self.check_keys(&record, Some(name))?;
        let mut at = InputOrigin {
            name: Some(name_pos),
            ..InputOrigin::default()
        };
        let label = |key: &str| format!("parameter '{key}' of input '{name}'");
        let missing = |key: &str| {
            ConfigError::at(
                &src,
                record.pos(),
                format!("input '{name}' is missing required parameter '{key}'"),
            )
        };
        let dim = self
            .input_param(&record, "dim", label("dim"))?
            .ok_or_else(|| missing("dim"))?;
        at.dim = Some(dim.pos);
        let dim_value = dim.unsigned(&src, u64::MAX, "a positive integer")?;
        let dim_value =
            usize::try_from(dim_value).map_err(|_| dim.wrong_type(&src, "a positive integer"))?;
        let format = self
            .input_param(&record, "format", label("format"))?
            .ok_or_else(|| missing("format"))?;
        let format_text = format.string(&src)?;
        let storage = if format_text.eq_ignore_ascii_case("dense") {
            StorageFormat::Dense
        } else if format_text.eq_ignore_ascii_case("sparse") {
            StorageFormat::Sparse
        } else {
            return Err(format.error(
                &src,
                format!("unknown format '{format_text}' for input '{name}': expected 'dense' or 'sparse'"),
            ));
        };
        let mut config = InputConfig::new(name, dim_value, storage);
        if let Some(alias) = self.input_param(&record, "alias", label("alias"))? {
            at.alias = Some(alias.pos);
            config.alias = alias.string(&src)?;
        }
        if let Some(flag) = self.input_param(&record, "definesMBSize", label("definesMBSize"))? {
            at.defines_mb_size = Some(flag.pos);
            config.defines_mb_size = flag.boolean(&src)?;
        }
        Ok((config, at))
    }
}

/// Gives the deserializer `config` of a composite reader the default randomization window
/// CNTK gives it: [`default_window_chunks`] of the reader-level chunk size
/// (`reader_chunk_size`), not of the deserializer's own. The window is written only when no
/// window is set, it counts chunks, and the two chunk sizes differ; otherwise
/// [`ReaderConfig::window`] already gives that default.
fn size_default_window(config: &mut ReaderConfig, reader_chunk_size: u64) {
    if config.randomization_window.is_none()
        && config.sample_based_randomization_window != Some(true)
        && config.chunk_size_in_bytes != reader_chunk_size
    {
        config.randomization_window = Some(default_window_chunks(reader_chunk_size));
    }
}

/// Appends a deserializer read on its own (`config`, written at `pos`) to a composite
/// configuration as a joined deserializer. Reader-level parameters stay those of the first
/// deserializer (`check_agreement` has checked that this one gives none that differs).
fn join(
    mut primary: ReaderConfig,
    mut origin: Origin,
    config: ReaderConfig,
    config_origin: Origin,
    pos: Pos,
) -> (ReaderConfig, Origin) {
    let start = primary.inputs.len();
    primary.inputs.extend(config.inputs);
    primary.joined.push(JoinedDeserializer {
        files: config.files,
        inputs: start..primary.inputs.len(),
        skip_sequence_ids: config.skip_sequence_ids,
        chunk_size_in_bytes: config.chunk_size_in_bytes,
        cache_index: config.cache_index,
    });
    origin.inputs.extend(config_origin.inputs);
    origin.joined.push(JoinedOrigin {
        record: Some(pos),
        file: config_origin.file,
        input: config_origin.input,
    });
    (primary, origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers() {
        assert_eq!(whole(3.0), Some(3));
        assert_eq!(whole(0.0), Some(0));
        assert_eq!(whole(-1.0), None);
        assert_eq!(whole(1.5), None);
        assert_eq!(whole(f64::INFINITY), None);
        assert_eq!(whole(f64::NAN), None);
        assert_eq!(whole(1e30), None);
    }

    #[test]
    fn every_reader_parameter_is_reader_wide_or_of_each_deserializer() {
        let of_each_deserializer = [
            "file",
            "input",
            "skipSequenceIds",
            "chunkSizeInBytes",
            "cacheIndex",
        ];
        for key in super::super::keys::READER_PARAMS {
            let wide = READER_WIDE_PARAMS.iter().any(|(k, _)| *k == key);
            assert!(wide != of_each_deserializer.contains(&key), "{key}");
        }
    }

    #[test]
    fn decimal_integers_in_strings() {
        assert_eq!(decimal("784"), Some(784));
        assert_eq!(decimal("007"), Some(7));
        assert_eq!(decimal("18446744073709551615"), Some(u64::MAX));
        assert_eq!(decimal("18446744073709551616"), None);
        for text in ["", " 1", "1 ", "+1", "-1", "1.0", "1e3", "0x10", "١"] {
            assert_eq!(decimal(text), None, "{text:?}");
        }
    }

    #[test]
    fn macros_in_strings() {
        assert_eq!(macro_in("$DataDir$/x.txt"), Some("$DataDir$"));
        assert_eq!(macro_in("a/$b$"), Some("$b$"));
        assert_eq!(macro_in("cost $5 and $"), None);
        assert_eq!(macro_in("$$ $x y$"), None);
        assert_eq!(macro_in("é$é$"), Some("$é$"));
    }
}
