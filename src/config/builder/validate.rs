//! The checks every [`ReaderConfig`] passes before use, shared by the builder and the
//! BrainScript extractor. Positions, when the configuration came from text, let the errors
//! point at the offending value.

use crate::config::brainscript::Pos;
use crate::config::{ConfigError, ReaderConfig, ReaderForm, StorageFormat};

/// Largest `dim`: sparse indices are 32-bit signed integers, and a dense sample of that dim
/// already takes 8 GiB (a larger one could not even be sized on some platforms, and a
/// failed allocation aborts the process).
const MAX_DIM: usize = 2_147_483_647;

/// Where the parameters of a configuration were written (all `None` for the builder).
#[derive(Clone, Debug, Default)]
pub(crate) struct Origin {
    /// Name of the configuration source.
    pub source: String,
    /// The record holding the parameters (reader or deserializer).
    pub params: Option<Pos>,
    /// The `file` value.
    pub file: Option<Pos>,
    /// The `input` value.
    pub input: Option<Pos>,
    /// The key of each reader-level parameter read from the configuration, wherever it was
    /// found (the reader record, a deserializer or an enclosing record), by its name as CNTK
    /// spells it (`numDataPartitions`).
    pub keys: Vec<(&'static str, Pos)>,
    /// Where the value of each of those parameters was written, likewise.
    pub values: Vec<(&'static str, Pos)>,
    /// The reader-level parameters given by options beside the configuration instead (see
    /// [`ConfigOverrides`](crate::config::ConfigOverrides)), each with its option's name.
    pub options: Vec<(&'static str, &'static str)>,
    /// One entry per input, in order (of every deserializer).
    pub inputs: Vec<InputOrigin>,
    /// Where each joined deserializer (composite readers) was written, in order.
    pub joined: Vec<JoinedOrigin>,
}

/// Where the parameters of one joined deserializer were written.
#[derive(Clone, Debug, Default)]
pub(crate) struct JoinedOrigin {
    /// Its record.
    pub record: Option<Pos>,
    /// Its `file` value.
    pub file: Option<Pos>,
    /// Its `input` value.
    pub input: Option<Pos>,
}

/// Where the parameters of one input were written.
#[derive(Clone, Debug, Default)]
pub(crate) struct InputOrigin {
    /// The input's name.
    pub name: Option<Pos>,
    /// The `dim` value.
    pub dim: Option<Pos>,
    /// The `alias` value.
    pub alias: Option<Pos>,
    /// The `definesMBSize` value.
    pub defines_mb_size: Option<Pos>,
}

impl Origin {
    fn error(&self, pos: Option<Pos>, message: String) -> ConfigError {
        match pos {
            Some(pos) => ConfigError::at(&self.source, pos, message),
            None => ConfigError::whole(&self.source, message),
        }
    }

    fn input(&self, index: usize) -> InputOrigin {
        self.inputs.get(index).cloned().unwrap_or_default()
    }

    /// Where the reader-level parameter `name` was written, if it was; else the record
    /// holding the parameters.
    fn key_or_params(&self, name: &str) -> Option<Pos> {
        self.key(name).or(self.params)
    }

    /// The option that gave the reader-level parameter `name`, if one did.
    fn option(&self, name: &str) -> Option<&'static str> {
        self.options
            .iter()
            .find(|(key, _)| *key == name)
            .map(|&(_, option)| option)
    }

    /// The value `value` of the reader-level parameter `name` with where it came from, for
    /// a message that mixes values of the configuration and of options: the option, else
    /// the parameter (the message's position), else its default.
    fn source_of(&self, name: &str, value: impl std::fmt::Display) -> String {
        match (self.option(name), self.key(name)) {
            (Some(option), _) => format!("{value} ({option})"),
            (None, Some(_)) => format!("{value} (parameter '{name}')"),
            (None, None) => format!("{value} (the default; '{name}' is not set)"),
        }
    }

    /// Where the value of the reader-level parameter `name` was written, if it was; else
    /// where its key was, else the record holding the parameters.
    fn value_or_key(&self, name: &str) -> Option<Pos> {
        self.values
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|&(_, pos)| pos)
            .or(self.key_or_params(name))
    }

    /// Where the key of the reader-level parameter `name` was written, if it was.
    pub fn key(&self, name: &str) -> Option<Pos> {
        self.keys
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|&(_, pos)| pos)
    }
}

/// Checks the settings that no type can express; returns the configuration unchanged.
pub(crate) fn validate(config: ReaderConfig, origin: &Origin) -> Result<ReaderConfig, ConfigError> {
    if config.files.is_empty() {
        return Err(origin.error(
            origin.params,
            "missing required parameter 'file'".to_string(),
        ));
    }
    if config.files.iter().any(|f| f.trim().is_empty()) {
        return Err(origin.error(
            origin.file.or(origin.params),
            "parameter 'file' must not be an empty path".to_string(),
        ));
    }
    if config.deserializer_inputs(0).is_empty() {
        return Err(origin.error(
            origin.input.or(origin.params),
            "parameter 'input' defines no inputs; at least one is required".to_string(),
        ));
    }
    check_joined(&config, origin)?;
    for (i, input) in config.inputs.iter().enumerate() {
        let at = origin.input(i);
        let name = &input.name;
        let group = deserializer_of(&config, i);
        if name.is_empty() {
            return Err(origin.error(at.name, "an input has an empty name".to_string()));
        }
        if input.dim == 0 {
            return Err(origin.error(
                at.dim.or(at.name),
                format!("parameter 'dim' of input '{name}' must be a positive integer, got 0"),
            ));
        }
        if input.dim > MAX_DIM {
            let format = match input.format {
                StorageFormat::Sparse => "sparse",
                StorageFormat::Dense => "dense",
            };
            return Err(origin.error(
                at.dim.or(at.name),
                format!(
                    "parameter 'dim' of {format} input '{name}' must be at most {MAX_DIM}, got {}",
                    input.dim
                ),
            ));
        }
        if input.alias.is_empty() {
            return Err(origin.error(
                at.alias.or(at.name),
                format!("parameter 'alias' of input '{name}' must not be empty"),
            ));
        }
        let alias = input.alias.as_bytes();
        if alias
            .iter()
            .any(|&b| !(0x21..0x7f).contains(&b) || b == b'|')
            || alias[0] == b'#'
        {
            return Err(origin.error(
                at.alias.or(at.name),
                format!(
                    "alias '{}' of input '{name}' cannot be written in a data file: an alias \
                     is printable ASCII without spaces or '|' and does not start with '#'",
                    input.alias
                ),
            ));
        }
        if let Some(first) = (0..i).find(|&j| config.inputs[j].name.eq_ignore_ascii_case(name)) {
            let other = deserializer_of(&config, first);
            if other != group {
                return Err(origin.error(
                    at.name,
                    format!(
                        "input '{name}' is declared by deserializers {} and {} ('{}'); input \
                         names must be unique across the reader (case-insensitive)",
                        other + 1,
                        group + 1,
                        config.inputs[first].name
                    ),
                ));
            }
            let first = &config.inputs[first];
            return Err(origin.error(
                at.name,
                format!(
                    "input names '{}' and '{name}' collide (names are case-insensitive)",
                    first.name
                ),
            ));
        }
        // Aliases name inputs inside one deserializer's files.
        if let Some(first) = config.inputs[config.deserializer_inputs(group).start..i]
            .iter()
            .find(|o| o.alias == input.alias)
        {
            return Err(origin.error(
                at.alias.or(at.name),
                format!(
                    "alias '{}' is used by both input '{}' and input '{name}'",
                    input.alias, first.name
                ),
            ));
        }
    }
    let defining: Vec<usize> = (0..config.inputs.len())
        .filter(|&i| {
            config
                .inputs
                .get(i)
                .is_some_and(|input| input.defines_mb_size)
        })
        .collect();
    if let [_, second, ..] = defining.as_slice() {
        let names: Vec<&str> = defining
            .iter()
            .filter_map(|&i| config.inputs.get(i).map(|input| input.name.as_str()))
            .collect();
        let at = origin.input(*second);
        return Err(origin.error(
            at.defines_mb_size.or(at.name),
            format!(
                "only one input may set 'definesMBSize', but {} do: {}",
                names.len(),
                names.join(", ")
            ),
        ));
    }
    check_partition(&config, origin)?;
    // The window settings are ignored when `randomize` is false (seed 001).
    if config.randomize && config.sample_based_randomization_window == Some(true) {
        match config.randomization_window {
            // The whole data, as CNTK's legacy reader (`SIZE_MAX >> 2` samples; see
            // `ReaderConfig::window`).
            None if config.form == ReaderForm::Legacy => {}
            // CNTK's composite reader raises a LogicError here.
            None => {
                return Err(origin.error(
                    origin.key_or_params("sampleBasedRandomizationWindow"),
                    "'sampleBasedRandomizationWindow = true' needs a 'randomizationWindow' in \
                     samples"
                        .to_string(),
                ))
            }
            Some(0) => {
                return Err(origin.error(
                    origin.key_or_params("randomizationWindow"),
                    "a sample-based 'randomizationWindow' must be at least 1 sample".to_string(),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(config)
}

/// Checks `numDataPartitions` and `partitionIndex`. When options gave either (`ctf read
/// --workers/--rank`), the message says where each value came from, and points at the one
/// the configuration gave, if any.
fn check_partition(config: &ReaderConfig, origin: &Origin) -> Result<(), ConfigError> {
    let (workers, rank) = (config.num_data_partitions, config.partition_index);
    let (workers_key, rank_key) = ("numDataPartitions", "partitionIndex");
    if workers == 0 {
        let message = match origin.option(workers_key) {
            Some(option) => format!("{option} must be at least 1"),
            None => format!("parameter '{workers_key}' must be at least 1"),
        };
        // A wrong value: pointed at the value.
        return Err(origin.error(origin.value_or_key(workers_key), message));
    }
    if rank < workers {
        return Ok(());
    }
    let pos = match (origin.option(rank_key), origin.option(workers_key)) {
        (None, None) => {
            return Err(origin.error(
                origin.key_or_params(rank_key),
                format!(
                    "parameter '{rank_key}' ({rank}) must be below '{workers_key}' ({workers})"
                ),
            ))
        }
        (None, Some(_)) => origin.key_or_params(rank_key),
        (Some(_), None) => origin.key_or_params(workers_key),
        (Some(_), Some(_)) => None,
    };
    Err(origin.error(
        pos,
        format!(
            "rank {} must be below the number of workers, {}",
            origin.source_of(rank_key, rank),
            origin.source_of(workers_key, workers)
        ),
    ))
}

/// The deserializer (0 for the primary) that input `input` belongs to.
fn deserializer_of(config: &ReaderConfig, input: usize) -> usize {
    config
        .joined
        .iter()
        .rposition(|j| j.inputs.start <= input)
        .map_or(0, |d| d + 1)
}

/// Checks the joined deserializers of a composite reader: files, and inputs that follow the
/// previous deserializer's.
fn check_joined(config: &ReaderConfig, origin: &Origin) -> Result<(), ConfigError> {
    let mut next = config.deserializer_inputs(0).end;
    for (d, joined) in config.joined.iter().enumerate() {
        let written = origin.joined.get(d).cloned().unwrap_or_default();
        let at = written.record.or(origin.params);
        let number = d + 2;
        if joined.files.is_empty() {
            return Err(origin.error(
                at,
                format!("deserializer {number} is missing required parameter 'file'"),
            ));
        }
        if joined.files.iter().any(|f| f.trim().is_empty()) {
            return Err(origin.error(
                written.file.or(at),
                format!("parameter 'file' of deserializer {number} must not be an empty path"),
            ));
        }
        if joined.inputs.start != next || joined.inputs.end > config.inputs.len() {
            return Err(origin.error(
                at,
                format!(
                    "the inputs of deserializer {number} ({:?}) must follow those of the one \
                     before (from {next}) within the {} inputs",
                    joined.inputs,
                    config.inputs.len()
                ),
            ));
        }
        if joined.inputs.is_empty() {
            return Err(origin.error(
                written.input.or(at),
                format!("deserializer {number} defines no inputs; at least one is required"),
            ));
        }
        next = joined.inputs.end;
    }
    if next != config.inputs.len() {
        return Err(origin.error(
            origin.params,
            format!("inputs {next}.. belong to no deserializer (the last one ends at {next})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::InputConfig;

    fn build(inputs: Vec<InputConfig>) -> Result<ReaderConfig, ConfigError> {
        ReaderConfig::builder().file("f").inputs(inputs).build()
    }

    #[test]
    fn builder_errors_have_no_location() {
        let err = ReaderConfig::builder().build().unwrap_err();
        assert_eq!(err.to_string(), "error: missing required parameter 'file'");
        assert_eq!((err.line(), err.col()), (0, 0));
        let err = build(vec![]).unwrap_err();
        assert!(err.message().contains("'input' defines no inputs"));
        let err = ReaderConfig::builder().file(" ").build().unwrap_err();
        assert!(err.message().contains("empty path"));
    }

    #[test]
    fn input_checks() {
        let msg = |inputs| build(inputs).unwrap_err().message().to_string();
        assert!(
            msg(vec![InputConfig::dense("x", 0)]).contains("'dim' of input 'x' must be a positive")
        );
        assert!(msg(vec![InputConfig::sparse("s", 2_147_483_648)]).contains("at most 2147483647"));
        // A dense dim that large is refused too: its samples could not be allocated.
        assert!(msg(vec![InputConfig::dense("d", 2_147_483_648)])
            .contains("parameter 'dim' of dense input 'd' must be at most 2147483647"));
        assert!(msg(vec![InputConfig::dense("d", usize::MAX)]).contains("at most 2147483647"));
        assert!(build(vec![InputConfig::sparse("s", 2_147_483_647)]).is_ok());
        assert!(build(vec![InputConfig::dense("d", 2_147_483_647)]).is_ok());
        assert!(msg(vec![InputConfig::dense("x", 1).with_alias("")])
            .contains("'alias' of input 'x' must not be empty"));
        assert!(msg(vec![InputConfig::dense("", 1)]).contains("empty name"));
        for bad in ["a b", "a|b", "#a", "caf\u{e9}", "tab\t"] {
            assert!(
                msg(vec![InputConfig::dense("x", 1).with_alias(bad)])
                    .contains("cannot be written in a data file"),
                "{bad:?}"
            );
        }
        assert!(build(vec![InputConfig::dense("x", 1).with_alias("a#b")]).is_ok());
        assert!(
            msg(vec![InputConfig::dense("x", 1), InputConfig::dense("X", 1)]).contains("collide")
        );
        assert!(msg(vec![
            InputConfig::dense("x", 1).with_alias("a"),
            InputConfig::dense("y", 1).with_alias("a")
        ])
        .contains("alias 'a' is used by both input 'x' and input 'y'"));
        assert!(msg(vec![
            InputConfig::dense("x", 1).defining_mb_size(),
            InputConfig::dense("y", 1).defining_mb_size()
        ])
        .contains("only one input may set 'definesMBSize', but 2 do: x, y"));
    }
}
