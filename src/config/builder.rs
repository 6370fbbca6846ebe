//! [`ReaderConfigBuilder`]: a reader configuration written in Rust rather than BrainScript.
//! It starts from the defaults of seed 001 and ends in the same validation as a BrainScript
//! reader section (see [`validate()`]), so both paths accept and reject the same settings.

mod validate;

pub(crate) use validate::{validate, InputOrigin, JoinedOrigin, Origin};

use super::{
    InputConfig, JoinedDeserializer, Precision, RandomizerKind, ReaderConfig, ReaderForm,
    DEFAULT_CHUNK_SIZE_IN_BYTES,
};
use crate::config::ConfigError;

/// The defaults of every parameter (seed 001), with no files and no inputs.
pub(crate) fn defaults() -> ReaderConfig {
    ReaderConfig {
        files: Vec::new(),
        inputs: Vec::new(),
        precision: Precision::Float,
        randomize: true,
        randomization_seed: 0,
        randomization_window: None,
        sample_based_randomization_window: None,
        skip_sequence_ids: false,
        max_errors: 0,
        trace_level: 1,
        chunk_size_in_bytes: DEFAULT_CHUNK_SIZE_IN_BYTES,
        keep_data_in_memory: false,
        frame_mode: false,
        cache_index: false,
        verbosity: 0,
        randomizer: RandomizerKind::Block,
        num_data_partitions: 1,
        partition_index: 0,
        form: ReaderForm::Legacy,
        joined: Vec::new(),
    }
}

/// Builds a [`ReaderConfig`] field by field, starting from the defaults.
///
/// ```
/// use ctf_reader::{InputConfig, Precision, ReaderConfig};
///
/// let config = ReaderConfig::builder()
///     .file("train.ctf")
///     .input(InputConfig::dense("features", 784).with_alias("x"))
///     .input(InputConfig::sparse("labels", 10))
///     .precision(Precision::Double)
///     .randomize(false)
///     .build()
///     .unwrap();
/// assert_eq!(config.inputs[0].alias, "x");
/// assert_eq!(config.trace_level, 1);
/// ```
#[derive(Clone, Debug)]
pub struct ReaderConfigBuilder {
    config: ReaderConfig,
}

impl Default for ReaderConfigBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ReaderConfigBuilder {
    /// A builder holding the defaults, with no files and no inputs yet.
    pub fn new() -> Self {
        ReaderConfigBuilder { config: defaults() }
    }

    /// A builder starting from an existing configuration (for example one read from
    /// BrainScript, to override some of its parameters); `build` validates it again.
    pub fn from_config(config: ReaderConfig) -> Self {
        ReaderConfigBuilder { config }
    }

    /// Adds a data file (to the deserializer being described).
    pub fn file(mut self, path: impl Into<String>) -> Self {
        self.current_files().push(path.into());
        self
    }

    /// Adds several data files, in order (to the deserializer being described).
    pub fn files<I, S>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.current_files()
            .extend(paths.into_iter().map(Into::into));
        self
    }

    /// Adds an input (to the deserializer being described); inputs keep the order they are
    /// added in.
    pub fn input(mut self, input: InputConfig) -> Self {
        self.config.inputs.push(input);
        if let Some(joined) = self.config.joined.last_mut() {
            joined.inputs.end = self.config.inputs.len();
        }
        self
    }

    /// Adds several inputs, in order (to the deserializer being described).
    pub fn inputs(mut self, inputs: impl IntoIterator<Item = InputConfig>) -> Self {
        for input in inputs {
            self = self.input(input);
        }
        self
    }

    /// Starts describing the next deserializer of a composite reader: later `file`,
    /// `input`, `skip_sequence_ids`, `chunk_size_in_bytes` and `cache_index` calls apply to
    /// it. Its sequences are joined by key to those of the first deserializer (see
    /// [`JoinedDeserializer`]); the form becomes [`ReaderForm::Composite`].
    ///
    /// ```
    /// use ctf_reader::{InputConfig, ReaderConfig};
    ///
    /// let config = ReaderConfig::builder()
    ///     .file("features.ctf")
    ///     .input(InputConfig::dense("x", 784))
    ///     .then_deserializer()
    ///     .file("labels.ctf")
    ///     .input(InputConfig::dense("y", 10))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.deserializer_count(), 2);
    /// assert_eq!(config.deserializer_config(1).files, ["labels.ctf"]);
    /// ```
    pub fn then_deserializer(mut self) -> Self {
        let at = self.config.inputs.len();
        self.config.joined.push(JoinedDeserializer {
            files: Vec::new(),
            inputs: at..at,
            skip_sequence_ids: false,
            chunk_size_in_bytes: DEFAULT_CHUNK_SIZE_IN_BYTES,
            cache_index: false,
        });
        self.config.form = ReaderForm::Composite;
        self
    }

    /// The file list of the deserializer being described.
    fn current_files(&mut self) -> &mut Vec<String> {
        match self.config.joined.last_mut() {
            Some(joined) => &mut joined.files,
            None => &mut self.config.files,
        }
    }

    /// Sets `precision` (default float).
    pub fn precision(mut self, precision: Precision) -> Self {
        self.config.precision = precision;
        self
    }

    /// Sets `randomize` (default true).
    pub fn randomize(mut self, randomize: bool) -> Self {
        self.config.randomize = randomize;
        self
    }

    /// Sets `randomizationSeed` (default 0).
    pub fn randomization_seed(mut self, seed: u64) -> Self {
        self.config.randomization_seed = seed;
        self
    }

    /// Sets `randomizationWindow` (default: 4 GiB / `chunkSizeInBytes` chunks, see
    /// [`ReaderConfig::window`]).
    pub fn randomization_window(mut self, window: u64) -> Self {
        self.config.randomization_window = Some(window);
        self
    }

    /// Sets `sampleBasedRandomizationWindow` (default: chosen by the reader form).
    pub fn sample_based_randomization_window(mut self, sample_based: bool) -> Self {
        self.config.sample_based_randomization_window = Some(sample_based);
        self
    }

    /// Sets `skipSequenceIds` (default false).
    pub fn skip_sequence_ids(mut self, skip: bool) -> Self {
        match self.config.joined.last_mut() {
            Some(joined) => joined.skip_sequence_ids = skip,
            None => self.config.skip_sequence_ids = skip,
        }
        self
    }

    /// Sets `maxErrors` (default 0).
    pub fn max_errors(mut self, max_errors: u64) -> Self {
        self.config.max_errors = max_errors;
        self
    }

    /// Sets `traceLevel` (default 1).
    pub fn trace_level(mut self, level: u32) -> Self {
        self.config.trace_level = level;
        self
    }

    /// Sets `chunkSizeInBytes` (default 32 MiB).
    pub fn chunk_size_in_bytes(mut self, bytes: u64) -> Self {
        match self.config.joined.last_mut() {
            Some(joined) => joined.chunk_size_in_bytes = bytes,
            None => self.config.chunk_size_in_bytes = bytes,
        }
        self
    }

    /// Sets `keepDataInMemory` (default false).
    pub fn keep_data_in_memory(mut self, keep: bool) -> Self {
        self.config.keep_data_in_memory = keep;
        self
    }

    /// Sets `frameMode` (default false).
    pub fn frame_mode(mut self, frame_mode: bool) -> Self {
        self.config.frame_mode = frame_mode;
        self
    }

    /// Sets `cacheIndex` (default false).
    pub fn cache_index(mut self, cache: bool) -> Self {
        match self.config.joined.last_mut() {
            Some(joined) => joined.cache_index = cache,
            None => self.config.cache_index = cache,
        }
        self
    }

    /// Sets `randomizer` (default [`RandomizerKind::Block`]).
    pub fn randomizer(mut self, randomizer: RandomizerKind) -> Self {
        self.config.randomizer = randomizer;
        self
    }

    /// Sets `numDataPartitions` and `partitionIndex`: this reader is worker `rank` of
    /// `workers` (default 0 of 1).
    pub fn partition(mut self, rank: u32, workers: u32) -> Self {
        self.config.partition_index = rank;
        self.config.num_data_partitions = workers;
        self
    }

    /// Sets `verbosity` (default 0).
    pub fn verbosity(mut self, verbosity: u32) -> Self {
        self.config.verbosity = verbosity;
        self
    }

    /// Sets the reader form whose defaults apply (default [`ReaderForm::Legacy`]).
    pub fn form(mut self, form: ReaderForm) -> Self {
        self.config.form = form;
        self
    }

    /// Validates the settings (the same checks as a BrainScript reader section).
    pub fn build(self) -> Result<ReaderConfig, ConfigError> {
        validate(self.config, &Origin::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StorageFormat;

    #[test]
    fn defaults_match_seed_001() {
        let c = ReaderConfig::builder()
            .file("a.ctf")
            .input(InputConfig::dense("x", 3))
            .build()
            .unwrap();
        assert_eq!(c.precision, Precision::Float);
        assert!(c.randomize);
        assert_eq!(c.randomization_seed, 0);
        assert_eq!(c.randomization_window, None);
        assert_eq!(c.sample_based_randomization_window, None);
        assert!(!c.skip_sequence_ids);
        assert_eq!(c.max_errors, 0);
        assert_eq!(c.trace_level, 1);
        assert_eq!(c.chunk_size_in_bytes, 33_554_432);
        assert!(!c.keep_data_in_memory && !c.frame_mode && !c.cache_index);
        assert_eq!(c.verbosity, 0);
        assert_eq!(c.form, ReaderForm::Legacy);
    }

    #[test]
    fn every_setter() {
        let c = ReaderConfig::builder()
            .files(["a", "b"])
            .inputs([InputConfig::new("y", 5, StorageFormat::Sparse).defining_mb_size()])
            .precision(Precision::Double)
            .randomize(false)
            .randomization_seed(7)
            .randomization_window(9)
            .sample_based_randomization_window(true)
            .skip_sequence_ids(true)
            .max_errors(3)
            .trace_level(2)
            .chunk_size_in_bytes(0)
            .keep_data_in_memory(true)
            .frame_mode(true)
            .cache_index(true)
            .verbosity(4)
            .form(ReaderForm::Composite)
            .build()
            .unwrap();
        assert_eq!(c.files, ["a", "b"]);
        assert_eq!(c.mb_size_input(), Some(0));
        assert_eq!(c.randomization_window, Some(9));
        assert_eq!(c.sample_based_randomization_window, Some(true));
        assert_eq!((c.max_errors, c.trace_level, c.verbosity), (3, 2, 4));
        assert_eq!(c.chunk_size_in_bytes, 0);
        assert!(c.keep_data_in_memory && c.frame_mode && c.cache_index && c.skip_sequence_ids);
        assert_eq!(c.form, ReaderForm::Composite);
    }
}
