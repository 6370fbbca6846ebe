//! Reader configuration: the typed [`ReaderConfig`] that every stage of the pipeline reads,
//! the BrainScript language that real configurations are written in, and the extraction of a
//! reader section from a BrainScript document.
//!
//! A configuration reaches the reader in one of three ways: BrainScript text
//! ([`ReaderConfig::from_brainscript`]), a config file ([`ReaderConfig::from_file`]), or the
//! Rust builder ([`ReaderConfig::builder`]) for users who do not write BrainScript. All three
//! produce the same validated value.

pub mod brainscript;
mod builder;
mod reader_section;

pub use builder::ReaderConfigBuilder;
pub use reader_section::{ConfigDocument, ConfigError, ConfigOverrides, ConfigWarning};

/// Element type of the decoded values (`precision` in the configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    /// 32-bit IEEE floats (`precision = "float"`, the default).
    Float,
    /// 64-bit IEEE floats (`precision = "double"`).
    Double,
}

/// How an input's values are written in the file and stored in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StorageFormat {
    /// `dim` numbers per sample.
    Dense,
    /// Any number of `index:value` pairs per sample, `index < dim`.
    Sparse,
}

/// Which of CNTK's two reader section forms a configuration used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReaderForm {
    /// `readerType = "CNTKTextFormatReader"` with the parameters directly in the reader record.
    Legacy,
    /// `deserializers = ({ type = "CNTKTextFormatDeserializer"; ... })`.
    Composite,
}

/// One configured input stream.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InputConfig {
    /// The name of the input in the configuration (the key of its record).
    pub name: String,
    /// The name written in the data file after `|`; defaults to `name`.
    pub alias: String,
    /// Dense: values per sample. Sparse: exclusive upper bound of indices.
    pub dim: usize,
    /// Dense or sparse.
    pub format: StorageFormat,
    /// Whether minibatch sizes are counted in samples of this input.
    pub defines_mb_size: bool,
}

impl InputConfig {
    /// A dense input whose alias is its name.
    pub fn dense(name: &str, dim: usize) -> Self {
        Self::new(name, dim, StorageFormat::Dense)
    }

    /// A sparse input whose alias is its name.
    pub fn sparse(name: &str, dim: usize) -> Self {
        Self::new(name, dim, StorageFormat::Sparse)
    }

    /// An input of the given format whose alias is its name.
    pub fn new(name: &str, dim: usize, format: StorageFormat) -> Self {
        InputConfig {
            name: name.to_string(),
            alias: name.to_string(),
            dim,
            format,
            defines_mb_size: false,
        }
    }

    /// Sets the name used in the data file.
    pub fn with_alias(mut self, alias: &str) -> Self {
        self.alias = alias.to_string();
        self
    }

    /// Marks this input as the one minibatch sizes are counted in.
    pub fn defining_mb_size(mut self) -> Self {
        self.defines_mb_size = true;
        self
    }
}

/// Default `chunkSizeInBytes`: 32 MiB.
pub const DEFAULT_CHUNK_SIZE_IN_BYTES: u64 = 32 * 1024 * 1024;

/// A validated reader configuration: every parameter of the CNTK Text Format reader with its
/// default applied (seed 001, SPEC §2).
#[derive(Clone, Debug, PartialEq)]
pub struct ReaderConfig {
    /// The data files, as written in the configuration (relative paths resolve against the
    /// current directory, like CNTK).
    pub files: Vec<String>,
    /// The configured inputs, in configuration order (the stream order of every output).
    pub inputs: Vec<InputConfig>,
    /// Element type of decoded values.
    pub precision: Precision,
    /// Whether sequences are shuffled (`randomize`, default true).
    pub randomize: bool,
    /// Seed of the first sweep; sweep `s` uses `seed + s` (`randomizationSeed`, default 0).
    pub randomization_seed: u64,
    /// `randomizationWindow`, in chunks or samples; `None` means the default (see
    /// [`ReaderConfig::window`]).
    pub randomization_window: Option<u64>,
    /// `sampleBasedRandomizationWindow`; `None` means the default of the reader form.
    pub sample_based_randomization_window: Option<bool>,
    /// Treat every line as its own sequence, ignoring ids (`skipSequenceIds`, default false).
    pub skip_sequence_ids: bool,
    /// Number of invalid sequences skipped before the read fails (`maxErrors`, default 0).
    pub max_errors: u64,
    /// 0 errors only, 1 warnings too (default), 2 informational messages too (`traceLevel`).
    pub trace_level: u32,
    /// Target chunk size (`chunkSizeInBytes`, default 32 MiB; 0 = one sequence per chunk).
    pub chunk_size_in_bytes: u64,
    /// Keep every parsed chunk after first use (`keepDataInMemory`, default false).
    pub keep_data_in_memory: bool,
    /// Every sequence holds one sample; samples are packed freely (`frameMode`, default false).
    pub frame_mode: bool,
    /// Write and reuse an index cache next to the data file (`cacheIndex`, default false).
    pub cache_index: bool,
    /// Randomizer logging level (`verbosity`, default 0).
    pub verbosity: u32,
    /// Which randomizer orders each sweep (`randomizer`, default `"block"`).
    pub randomizer: RandomizerKind,
    /// Number of data-parallel workers (`numDataPartitions`, default 1).
    pub num_data_partitions: u32,
    /// This worker's 0-based rank (`partitionIndex`, default 0; below `numDataPartitions`).
    pub partition_index: u32,
    /// Which reader form the configuration used.
    pub form: ReaderForm,
    /// The deserializers after the first of a composite reader, joined to the first one's
    /// sequences by key (empty for a single deserializer). `files`, the inputs before the
    /// first of theirs, `skip_sequence_ids`, `chunk_size_in_bytes` and `cache_index` above
    /// are the first deserializer's.
    pub joined: Vec<JoinedDeserializer>,
}

/// A deserializer after the first of a composite reader (`deserializers = ({...} : {...})`).
///
/// The first deserializer is primary: its sequences drive order, chunking, sharding and
/// checkpoints. A joined deserializer contributes, to each primary sequence, its own sequence
/// with the same key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct JoinedDeserializer {
    /// Its data files, as written in the configuration.
    pub files: Vec<String>,
    /// Its inputs: a range of [`ReaderConfig::inputs`].
    pub inputs: std::ops::Range<usize>,
    /// Its `skipSequenceIds`.
    pub skip_sequence_ids: bool,
    /// Its `chunkSizeInBytes` (the unit its index groups sequences in).
    pub chunk_size_in_bytes: u64,
    /// Its `cacheIndex`.
    pub cache_index: bool,
}

/// The randomizer of a sweep (SPEC §7.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RandomizerKind {
    /// Block randomization with xoshiro and CNTK's window semantics (`"block"`, the default).
    Block,
    /// CNTK's exact orders: mt19937_64, its chunk shuffle and window swaps (`"cntk"`).
    Cntk,
}

/// The randomization window in effect: `randomizationWindow` in chunks, or in samples with
/// `sampleBasedRandomizationWindow = true`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WindowSize {
    /// A window of this many chunks (0 acts as 1, as in CNTK).
    Chunks(u64),
    /// A window of about this many samples.
    Samples(u64),
}

/// The bytes of data the default randomization window spans: 4 GiB (CNTK's `g_4GB`).
pub const DEFAULT_WINDOW_BYTES: u64 = 4 << 30;

/// The default randomization window, in chunks of `chunk_size_in_bytes`: about 4 GiB of data
/// worth of chunks, `4 GiB / chunk_size_in_bytes` in integer division, as CNTK's legacy and
/// composite readers compute it (`TextConfigHelper.cpp`, `CompositeDataReader.cpp`; seed 001:
/// "128 when the chunk size equals 32MB"). So 128 for the default 32 MiB, 429,496 for
/// 10,000-byte chunks, and 0 (file order, as CNTK's legacy reader) for chunks above 4 GiB.
///
/// For 0 (one sequence per chunk), where CNTK divides by zero, the window is `u64::MAX`
/// chunks: the whole data, the limit of the division as the chunk size shrinks.
pub fn default_window_chunks(chunk_size_in_bytes: u64) -> u64 {
    DEFAULT_WINDOW_BYTES
        .checked_div(chunk_size_in_bytes)
        .unwrap_or(u64::MAX)
}

impl ReaderConfig {
    /// Starts a configuration built field by field.
    pub fn builder() -> ReaderConfigBuilder {
        ReaderConfigBuilder::new()
    }

    /// Checks the settings as [`ReaderConfigBuilder::build`] does: the fields are public, so
    /// a configuration changed after it was built is checked again by the readers that
    /// take it (the minibatch sources).
    pub fn check(&self) -> Result<(), ConfigError> {
        builder::validate(self.clone(), &builder::Origin::default()).map(|_| ())
    }

    /// Whether sweeps are shuffled: `randomize`, unless the window is 0 chunks, which CNTK
    /// reads in file order (its `NoRandomizer`, CNTK-BEHAVIOUR §2.2).
    pub fn shuffles(&self) -> bool {
        self.randomize && self.window() != WindowSize::Chunks(0)
    }

    /// The randomization window in effect. Unset, it is [`default_window_chunks`] of
    /// `chunk_size_in_bytes` in chunks, or, with `sampleBasedRandomizationWindow = true`, the
    /// whole data (`u64::MAX` samples; CNTK's `SIZE_MAX >> 2` covers any corpus alike).
    pub fn window(&self) -> WindowSize {
        match (
            self.sample_based_randomization_window,
            self.randomization_window,
        ) {
            (Some(true), Some(samples)) => WindowSize::Samples(samples),
            (Some(true), None) => WindowSize::Samples(u64::MAX),
            (_, Some(chunks)) => WindowSize::Chunks(chunks),
            (_, None) => WindowSize::Chunks(default_window_chunks(self.chunk_size_in_bytes)),
        }
    }

    /// Index of the input that defines minibatch sizes, if one does.
    pub fn mb_size_input(&self) -> Option<usize> {
        self.inputs.iter().position(|i| i.defines_mb_size)
    }

    /// Whether several deserializers are joined by key.
    pub fn is_composite(&self) -> bool {
        !self.joined.is_empty()
    }

    /// Number of deserializers: 1, plus the joined ones.
    pub fn deserializer_count(&self) -> usize {
        1 + self.joined.len()
    }

    /// The inputs of deserializer `d` (0 is the primary), as a range of
    /// [`inputs`](Self::inputs).
    pub fn deserializer_inputs(&self, d: usize) -> std::ops::Range<usize> {
        match d {
            0 => {
                0..self
                    .joined
                    .first()
                    .map_or(self.inputs.len(), |j| j.inputs.start)
            }
            d => self.joined[d - 1].inputs.clone(),
        }
    }

    /// The configuration of deserializer `d` (0 is the primary) read on its own: its files,
    /// inputs and indexing options, with every reader-level parameter of this one. The index
    /// of each file and the parse of each of its sequences come from it.
    pub fn deserializer_config(&self, d: usize) -> ReaderConfig {
        let mut config = self.clone();
        config.inputs = self.inputs[self.deserializer_inputs(d)].to_vec();
        config.joined = Vec::new();
        if d > 0 {
            let joined = &self.joined[d - 1];
            config.files = joined.files.clone();
            config.skip_sequence_ids = joined.skip_sequence_ids;
            config.chunk_size_in_bytes = joined.chunk_size_in_bytes;
            config.cache_index = joined.cache_index;
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 GiB = 4294967296 bytes, divided by hand.
    #[test]
    fn default_window_chunks_is_four_gib_of_chunks() {
        assert_eq!(default_window_chunks(33_554_432), 128);
        assert_eq!(default_window_chunks(50_000), 85_899);
        assert_eq!(default_window_chunks(10_000), 429_496);
        assert_eq!(default_window_chunks(1), 4_294_967_296);
        assert_eq!(default_window_chunks(4_294_967_296), 1);
        assert_eq!(default_window_chunks(4_294_967_297), 0);
        assert_eq!(default_window_chunks(0), u64::MAX);
    }
}
