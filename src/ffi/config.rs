//! `ctf_config`: a reader configuration for the C ABI, read from BrainScript text or a
//! configuration file, or built field by field, plus the options of the reader made from it
//! (threads, prefetch depth, worker rank and count, limits, minibatch-size schedule,
//! diagnostics callback).
//!
//! A configuration is a value: [`crate::ffi::reader::ctf_reader_new`] copies it, so one
//! configuration can make several readers (one per rank, say) and be freed right after.

use std::ffi::{c_char, c_int, c_void, CString};

use super::plumbing::{
    enum_arg, guard, opt_str_arg, out_arg, str_arg, BoxedHandle, CEnum, CallResult, Failure,
};
use super::status::ctf_status;
use crate::config::{ConfigWarning, ReaderConfigBuilder};
use crate::reader::{stderr_sink, DiagnosticSink};
use crate::source::{ReadLimits, MAX_PREFETCH, MAX_THREADS};

// The numbers the setters' documentation (and so the header) gives.
const _: () = assert!(MAX_THREADS == 1024 && MAX_PREFETCH == 256);
use crate::timeline::schedule::MbSchedule;
use crate::{InputConfig, Precision, ReaderConfig, StorageFormat};

/// `ctf_config_set_max_samples(config, CTF_FULL_DATA_SWEEP)`: read one sweep.
pub const CTF_FULL_DATA_SWEEP: u64 = 0xFFFFFFFFFFFFFFFE;
const _: () = assert!(CTF_FULL_DATA_SWEEP == crate::source::FULL_DATA_SWEEP);
/// `ctf_config_set_max_samples(config, CTF_INFINITELY_REPEAT)`: read sweep after sweep
/// without end.
pub const CTF_INFINITELY_REPEAT: u64 = 0xFFFFFFFFFFFFFFFF;
const _: () = assert!(CTF_INFINITELY_REPEAT == crate::source::INFINITELY_REPEAT);

/// How an input (a stream) is stored.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ctf_storage {
    /// `dim` values per sample, contiguous.
    Dense = 0,
    /// Compressed sparse columns: one column per sample.
    Sparse = 1,
}

/// The element type of the values (the `precision` of the configuration).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ctf_element_type {
    /// `float` (32 bits).
    Float32 = 0,
    /// `double` (64 bits).
    Float64 = 1,
}

impl CEnum for ctf_storage {
    const ALL: &'static [Self] = &[ctf_storage::Dense, ctf_storage::Sparse];
    const C_NAME: &'static str = "ctf_storage";
    fn number(self) -> c_int {
        self as c_int
    }
}

impl CEnum for ctf_element_type {
    const ALL: &'static [Self] = &[ctf_element_type::Float32, ctf_element_type::Float64];
    const C_NAME: &'static str = "ctf_element_type";
    fn number(self) -> c_int {
        self as c_int
    }
}

impl From<StorageFormat> for ctf_storage {
    fn from(format: StorageFormat) -> Self {
        match format {
            StorageFormat::Dense => ctf_storage::Dense,
            StorageFormat::Sparse => ctf_storage::Sparse,
        }
    }
}

impl From<Precision> for ctf_element_type {
    fn from(precision: Precision) -> Self {
        match precision {
            Precision::Float => ctf_element_type::Float32,
            Precision::Double => ctf_element_type::Float64,
        }
    }
}

/// A diagnostics callback: receives each warning as one line `FILE:LINE:COL: warning:
/// MESSAGE`, each invalid sequence skipped within `maxErrors` as `FILE:LINE:COL: error:
/// MESSAGE`, and each warning about a whole file (an index cache that cannot be used or
/// written, keys a joined deserializer does not share) as `FILE: warning: MESSAGE`
/// (NUL-terminated, valid during the call), with the `user_data` given with it. It is
/// called from the thread that makes the reader and from the reader's own threads, one
/// call at a time, and must not call back into the reader.
pub type ctf_diagnostic_callback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, line: *const c_char)>;

/// What a reader needs besides the [`ReaderConfig`].
#[derive(Clone, Debug, Default)]
pub(crate) struct ReaderOptions {
    /// Loader threads, and packer threads; 0 is the available cores.
    pub(crate) threads: usize,
    /// Minibatches packed ahead; 0 is the default (2).
    pub(crate) prefetch: usize,
    /// Bytes of parsed data kept at most; 0 is no bound.
    pub(crate) memory_budget: u64,
    /// Whether parsing while indexing is off
    /// ([`PipelineOptions::parse_while_indexing`](crate::source::PipelineOptions)).
    pub(crate) no_parse_while_indexing: bool,
    /// Whether to pin the packers
    /// ([`PipelineOptions::pin_packers`](crate::source::PipelineOptions)).
    pub(crate) pin_packers: bool,
    pub(crate) limits: ReadLimits,
    pub(crate) schedule: Option<MbSchedule>,
    pub(crate) callback: ctf_diagnostic_callback,
    /// The callback's user data, as an address (it crosses threads).
    pub(crate) user_data: usize,
}

impl ReaderOptions {
    /// The diagnostics sink: the callback, else standard error.
    pub(crate) fn sink(&self) -> DiagnosticSink {
        match self.callback {
            None => stderr_sink(),
            Some(callback) => {
                let user_data = self.user_data;
                Box::new(move |file, diagnostic| {
                    let line = super::plumbing::c_string(&diagnostic.display_in(file).to_string());
                    // SAFETY: the caller of ctf_config_set_diagnostic_callback promised a
                    // function callable from any thread with this user data.
                    unsafe { callback(user_data as *mut c_void, line.as_ptr()) };
                })
            }
        }
    }
}

/// A reader configuration and reader options (opaque).
pub struct ctf_config {
    pub(crate) builder: ReaderConfigBuilder,
    pub(crate) options: ReaderOptions,
    message: CString,
    /// Warnings of the BrainScript text, as `SOURCE:LINE:COL: warning: MESSAGE`.
    warnings: Vec<CString>,
}

impl BoxedHandle for ctf_config {}

impl ctf_config {
    fn with_builder(builder: ReaderConfigBuilder) -> Self {
        ctf_config {
            builder,
            options: ReaderOptions::default(),
            message: CString::default(),
            warnings: Vec::new(),
        }
    }

    /// The validated configuration.
    pub(crate) fn build(&self) -> Result<ReaderConfig, Failure> {
        self.builder.clone().build().map_err(|e| config_failure(&e))
    }

    fn update(&mut self, f: impl FnOnce(ReaderConfigBuilder) -> ReaderConfigBuilder) {
        self.builder = f(std::mem::take(&mut self.builder));
    }
}

/// Runs a call on a configuration, keeping its message on failure.
///
/// # Safety
/// `config` is NULL or a live configuration used by no other thread during the call.
unsafe fn with_config(
    config: *mut ctf_config,
    body: impl FnOnce(&mut ctf_config) -> CallResult,
) -> ctf_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let config = unsafe { ctf_config::from_mut(config, "config") }?;
        let result = body(config);
        if let Err(failure) = &result {
            config.message = super::plumbing::c_string(&failure.message);
        }
        result
    })
}

/// A configuration error; the warnings found before it follow the error (a misspelt key
/// reported as a warning often explains it).
pub(crate) fn config_failure(e: &crate::config::ConfigError) -> Failure {
    let mut text = e.to_string();
    for w in e.warnings() {
        text.push('\n');
        text.push_str(&w.to_string());
    }
    Failure::new(ctf_status::ConfigError, text)
}

/// The reader section of the configuration file `path`: a file that cannot be found,
/// opened or read is `CTF_STATUS_IO_ERROR`, as a data file is, and one whose text is not
/// UTF-8 `CTF_STATUS_CONFIG_ERROR`; the `Err` of the `Ok` is the configuration's.
pub(crate) fn config_file(
    path: &str,
    section: Option<&str>,
) -> Result<Result<(ReaderConfig, Vec<ConfigWarning>), crate::config::ConfigError>, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        // A file read whole whose text is not UTF-8 is a configuration error.
        let status = match e.kind() {
            std::io::ErrorKind::InvalidData => ctf_status::ConfigError,
            _ => ctf_status::IoError,
        };
        Failure::new(
            status,
            format!("cannot read configuration file '{path}': {e}"),
        )
    })?;
    Ok(ReaderConfig::from_brainscript(&text, path, section))
}

fn parsed(
    result: Result<(ReaderConfig, Vec<ConfigWarning>), crate::config::ConfigError>,
) -> Result<ctf_config, Failure> {
    let (config, warnings) = result.map_err(|e| config_failure(&e))?;
    let mut handle = ctf_config::with_builder(ReaderConfigBuilder::from_config(config));
    handle.warnings = warnings
        .iter()
        .map(|w| super::plumbing::c_string(&w.to_string()))
        .collect();
    Ok(handle)
}

/// Makes an empty configuration (no files, no inputs; CNTK's defaults otherwise) to be
/// filled with `ctf_config_add_file`, `ctf_config_add_input` and the setters.
/// `*out` receives the new configuration, to be freed with `ctf_config_free`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_new(out: *mut *mut ctf_config) -> ctf_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a writable pointer.
        let out = unsafe { out_arg(out, "out") }?;
        *out = ctf_config::with_builder(ReaderConfigBuilder::new()).into_raw();
        Ok(())
    })
}

/// Reads the reader section of BrainScript `text`. `source_name` names the text in messages
/// (NULL: `"<text>"`). `section` is a dotted path to the reader record or to a command record
/// holding one (NULL: a top-level `reader`, else the `reader` of the section named by a
/// top-level `command`, else the only `reader`). On failure (`CTF_STATUS_CONFIG_ERROR`) the
/// message from `ctf_last_error_message` names source, line and column.
///
/// Thread safety: any thread.
///
/// # Safety
/// Strings are NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_from_brainscript(
    text: *const c_char,
    source_name: *const c_char,
    section: *const c_char,
    out: *mut *mut ctf_config,
) -> ctf_status {
    guard(|| {
        // SAFETY: the caller passes NUL-terminated strings or NULL, and a writable `out`.
        let (text, name, section, out) = unsafe {
            (
                str_arg(text, "text")?,
                opt_str_arg(source_name, "source_name")?,
                opt_str_arg(section, "section")?,
                out_arg(out, "out")?,
            )
        };
        let config = parsed(ReaderConfig::from_brainscript(
            text,
            name.unwrap_or("<text>"),
            section,
        ))?;
        *out = config.into_raw();
        Ok(())
    })
}

/// Reads the reader section of the BrainScript configuration file `path` (`section` as in
/// `ctf_config_from_brainscript`). Relative data paths in it resolve against the current
/// directory, as in CNTK.
///
/// Thread safety: any thread.
///
/// # Safety
/// Strings are NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_from_file(
    path: *const c_char,
    section: *const c_char,
    out: *mut *mut ctf_config,
) -> ctf_status {
    guard(|| {
        // SAFETY: the caller passes NUL-terminated strings or NULL, and a writable `out`.
        let (path, section, out) = unsafe {
            (
                str_arg(path, "path")?,
                opt_str_arg(section, "section")?,
                out_arg(out, "out")?,
            )
        };
        let config = parsed(config_file(path, section)?)?;
        *out = config.into_raw();
        Ok(())
    })
}

/// Frees a configuration; NULL is a no-op. Readers made from it are not affected.
///
/// Thread safety: not concurrently with any other use of `config`.
///
/// # Safety
/// `config` is NULL or a live configuration, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_free(config: *mut ctf_config) {
    super::plumbing::guard_value((), || {
        // SAFETY: the caller hands back a configuration made by this library (or NULL).
        unsafe { ctf_config::free(config) }
    })
}

/// The message of the last failed call on `config` (`""` if none), never NULL; valid until
/// the next call that changes `config`, or its free. NULL `config` gives `""`.
///
/// Thread safety: not concurrently with a call that changes `config`.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_message(config: *const ctf_config) -> *const c_char {
    super::plumbing::guard_value(c"".as_ptr(), || {
        // SAFETY: the caller passes NULL or a live configuration.
        match unsafe { ctf_config::from_const(config, "config") } {
            Ok(config) => config.message.as_ptr(),
            Err(_) => c"".as_ptr(),
        }
    })
}

/// The number of warnings reading the BrainScript configuration gave (a misspelt key, a
/// parameter CNTK ignores, ...); 0 for a NULL `config` or one made by `ctf_config_new`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_warning_count(config: *const ctf_config) -> usize {
    super::plumbing::guard_value(0, || {
        // SAFETY: the caller passes NULL or a live configuration.
        unsafe { ctf_config::from_const(config, "config") }.map_or(0, |c| c.warnings.len())
    })
}

/// Warning `index` of the configuration as `SOURCE:LINE:COL: warning: MESSAGE`, owned by the
/// configuration (valid until it is freed); NULL when `index` is out of range or `config` is
/// NULL.
///
/// Thread safety: any thread.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_warning(
    config: *const ctf_config,
    index: usize,
) -> *const c_char {
    super::plumbing::guard_value(std::ptr::null(), || {
        // SAFETY: the caller passes NULL or a live configuration.
        match unsafe { ctf_config::from_const(config, "config") } {
            Ok(c) => c
                .warnings
                .get(index)
                .map_or(std::ptr::null(), |w| w.as_ptr()),
            Err(_) => std::ptr::null(),
        }
    })
}

/// Adds a data file (or a glob pattern) to read, after those already there (of the
/// deserializer being described: see `ctf_config_add_deserializer`).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or live; `path` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_add_file(
    config: *mut ctf_config,
    path: *const c_char,
) -> ctf_status {
    // SAFETY: the caller passes a live configuration and a NUL-terminated path (or NULL).
    unsafe {
        with_config(config, |config| {
            let path = str_arg(path, "path")?.to_string();
            config.update(|b| b.file(path));
            Ok(())
        })
    }
}

/// Adds an input (a stream), after those already there: stream indexes follow this order.
/// It belongs to the deserializer being described (see `ctf_config_add_deserializer`).
/// `alias` is the name used in the data (NULL: the same as `name`); `dim` is at least 1;
/// `storage` is a `ctf_storage` value (an `int`, so that another number is
/// `CTF_STATUS_INVALID_ARGUMENT`, never undefined behaviour).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or live; strings are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_add_input(
    config: *mut ctf_config,
    name: *const c_char,
    alias: *const c_char,
    dim: usize,
    storage: c_int,
) -> ctf_status {
    // SAFETY: the caller passes a live configuration and NUL-terminated strings (or NULL).
    unsafe {
        with_config(config, |config| {
            let name = str_arg(name, "name")?;
            let alias = opt_str_arg(alias, "alias")?.unwrap_or(name);
            let storage = enum_arg::<ctf_storage>(storage, "storage")?;
            if dim == 0 {
                return Err(Failure::invalid(format!(
                    "input '{name}': the dimension must be at least 1"
                )));
            }
            let input = match storage {
                ctf_storage::Dense => InputConfig::dense(name, dim),
                ctf_storage::Sparse => InputConfig::sparse(name, dim),
            }
            .with_alias(alias);
            config.update(|b| b.input(input));
            Ok(())
        })
    }
}

/// Starts the next deserializer of a composite reader: later `ctf_config_add_file` and
/// `ctf_config_add_input` calls, and `ctf_config_set_chunk_size`,
/// `ctf_config_set_cache_index` and `ctf_config_set_skip_sequence_ids`, apply to it. Its
/// sequences are joined to those of the first deserializer by key (the first one's order,
/// chunks and sharding drive the read); its streams follow those already added. Input names
/// must be unique across the reader.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_add_deserializer(config: *mut ctf_config) -> ctf_status {
    // SAFETY: the caller passes a live configuration (or NULL).
    unsafe {
        with_config(config, |config| {
            config.update(|b| b.then_deserializer());
            Ok(())
        })
    }
}

/// Applies a builder setting to a configuration.
///
/// # Safety
/// As [`with_config`].
unsafe fn set(
    config: *mut ctf_config,
    apply: impl FnOnce(ReaderConfigBuilder) -> ReaderConfigBuilder,
) -> ctf_status {
    // SAFETY: forwarded contract.
    unsafe {
        with_config(config, |config| {
            config.update(apply);
            Ok(())
        })
    }
}

/// Sets the element type of the values (`precision`: float or double): `element_type` is a
/// `ctf_element_type` value (an `int`, so that another number is
/// `CTF_STATUS_INVALID_ARGUMENT`, never undefined behaviour).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_element_type(
    config: *mut ctf_config,
    element_type: c_int,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            let precision = match enum_arg::<ctf_element_type>(element_type, "element_type")? {
                ctf_element_type::Float32 => Precision::Float,
                ctf_element_type::Float64 => Precision::Double,
            };
            config.update(|b| b.precision(precision));
            Ok(())
        })
    }
}

/// Sets `randomize` (shuffle sequences within the randomization window).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_randomize(
    config: *mut ctf_config,
    randomize: bool,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe { set(config, |b| b.randomize(randomize)) }
}

/// Sets `randomizationSeed`.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_randomization_seed(
    config: *mut ctf_config,
    seed: u64,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe { set(config, |b| b.randomization_seed(seed)) }
}

/// Sets `maxErrors`: how many invalid sequences are skipped (each reported through the
/// diagnostics) before reading fails with `CTF_STATUS_DATA_ERROR`.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_max_errors(
    config: *mut ctf_config,
    max_errors: u64,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe { set(config, |b| b.max_errors(max_errors)) }
}

/// Sets `traceLevel` (0: no warnings, 1: warnings, 2: more).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_trace_level(
    config: *mut ctf_config,
    level: u32,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe { set(config, |b| b.trace_level(level)) }
}

/// Sets `chunkSizeInBytes`.
///
/// Applies to the deserializer being described (see `ctf_config_add_deserializer`).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_chunk_size(
    config: *mut ctf_config,
    bytes: u64,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe { set(config, |b| b.chunk_size_in_bytes(bytes)) }
}

/// Sets `keepDataInMemory` (parse every chunk once and keep it).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_keep_data_in_memory(
    config: *mut ctf_config,
    keep: bool,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe { set(config, |b| b.keep_data_in_memory(keep)) }
}

/// Sets `frameMode` (every sequence is one sample).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_frame_mode(
    config: *mut ctf_config,
    frame_mode: bool,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe { set(config, |b| b.frame_mode(frame_mode)) }
}

/// Sets `cacheIndex` (write and reuse an index next to each data file).
///
/// Applies to the deserializer being described (see `ctf_config_add_deserializer`).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_cache_index(
    config: *mut ctf_config,
    cache: bool,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe { set(config, |b| b.cache_index(cache)) }
}

/// Sets `skipSequenceIds` (every line is a sequence; keys are line numbers).
///
/// Applies to the deserializer being described (see `ctf_config_add_deserializer`).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_skip_sequence_ids(
    config: *mut ctf_config,
    skip: bool,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe { set(config, |b| b.skip_sequence_ids(skip)) }
}

/// Sets `randomizationWindow`: `window` in samples when `sample_based`, else in chunks.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_randomization_window(
    config: *mut ctf_config,
    window: u64,
    sample_based: bool,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            config.update(|b| {
                b.randomization_window(window)
                    .sample_based_randomization_window(sample_based)
            });
            Ok(())
        })
    }
}

/// Sets this reader's share of the data: worker `rank` (0-based) of `workers`
/// (`partitionIndex` and `numDataPartitions`). Minibatch sizes stay global. `rank` must be
/// below `workers`, else `CTF_STATUS_INVALID_ARGUMENT`.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_partition(
    config: *mut ctf_config,
    rank: u32,
    workers: u32,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            if workers == 0 || rank >= workers {
                return Err(Failure::invalid(format!(
                    "rank {rank} is not below the number of workers {workers}"
                )));
            }
            config.update(|b| b.partition(rank, workers));
            Ok(())
        })
    }
}

/// Sets the number of loader (parser) threads, and of packer threads; 0 (the default) uses
/// the available cores for each. More than 1024 is `CTF_STATUS_INVALID_ARGUMENT`.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_threads(
    config: *mut ctf_config,
    threads: usize,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            if threads > MAX_THREADS {
                return Err(Failure::invalid(format!(
                    "{threads} threads: at most {MAX_THREADS} are allowed"
                )));
            }
            config.options.threads = threads;
            Ok(())
        })
    }
}

/// Sets how many minibatches are packed ahead of the consumer; 0 is the default (2). More
/// than 256 is `CTF_STATUS_INVALID_ARGUMENT`.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_prefetch(
    config: *mut ctf_config,
    prefetch: usize,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            if prefetch > MAX_PREFETCH {
                return Err(Failure::invalid(format!(
                    "a prefetch depth of {prefetch}: at most {MAX_PREFETCH} is allowed"
                )));
            }
            config.options.prefetch = prefetch;
            Ok(())
        })
    }
}

/// Bounds the bytes of parsed data the reader keeps (its chunk cache and queued
/// minibatches) to `bytes`; 0 (the default) sets no bound beyond the randomization window.
/// Under a bound below what a randomization window of several chunks holds parsed, the
/// reader reads and parses each sequence on its own when a minibatch needs it, instead of
/// whole parts of chunks (slower, same minibatches, each sequence read once a sweep).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_memory_budget(
    config: *mut ctf_config,
    bytes: u64,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            config.options.memory_budget = bytes;
            Ok(())
        })
    }
}

/// Whether a cold start (no valid index cache) parses the text while indexing it and keeps
/// the sequences for the loaders (`true`, the default): the sweep is faster, and the first
/// minibatch comes once the corpus is parsed rather than scanned. Only when the
/// randomization window covers the corpus (or, read in file order, the corpus is at most two
/// chunks) and there is no memory budget; the minibatches are the same either way.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_parse_while_indexing(
    config: *mut ctf_config,
    enabled: bool,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            config.options.no_parse_while_indexing = !enabled;
            Ok(())
        })
    }
}

/// Whether to pin each packer thread to a CPU of its own (`false`, the default): on Linux,
/// only when the packers (`ctf_config_set_threads`, default the available cores) are exactly
/// as many as the CPUs the process may use, so that no CPU is taken from the process; the
/// minibatches are the same either way. Without it the system may run two packers on one
/// CPU for a while (README "The `ctf` process's packer threads" has the figures). Leave it
/// off when the host places its own threads, or runs several readers at once.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_pin_packers(
    config: *mut ctf_config,
    enabled: bool,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            config.options.pin_packers = enabled;
            Ok(())
        })
    }
}

/// Reads up to `max_samples` samples of the global timeline (counted from position 0, also
/// after a restore), replacing any max-sweeps limit. `CTF_FULL_DATA_SWEEP` is one sweep,
/// `CTF_INFINITELY_REPEAT` no end. The default is one sweep.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_max_samples(
    config: *mut ctf_config,
    max_samples: u64,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            config.options.limits.max_samples = Some(max_samples);
            config.options.limits.max_sweeps = None;
            Ok(())
        })
    }
}

/// Reads `max_sweeps` sweeps over the corpus, replacing any max-samples limit (the default
/// is 1).
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_max_sweeps(
    config: *mut ctf_config,
    max_sweeps: u64,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            config.options.limits.max_sweeps = Some(max_sweeps);
            config.options.limits.max_samples = None;
            Ok(())
        })
    }
}

/// Sets the epoch size in samples: epochs end at its multiples on the timeline, a
/// minibatch takes only sequences that start before the next epoch end (the last one is
/// delivered whole, and `epoch_end` marks the minibatch that reaches or crosses it), and a
/// schedule changes size per epoch. 0, the default, sets no epoch size: minibatches
/// run across sweep ends (`sweep_end` marks them, as in CNTK V2), `epoch_end` is never set,
/// and the schedule and `ctf_reader_progress` count sweeps as epochs.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_epoch_size(
    config: *mut ctf_config,
    epoch_size: u64,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            config.options.limits.epoch_size = (epoch_size > 0).then_some(epoch_size);
            Ok(())
        })
    }
}

/// Sets a minibatch-size schedule such as `"128*2:1024"` (128 samples for two epochs, then
/// 1024), or one size such as `"64"`. With a schedule, the `size` argument of
/// `ctf_reader_next` is ignored (pass 0). NULL removes the schedule. A malformed schedule is
/// `CTF_STATUS_INVALID_ARGUMENT` and leaves the configuration as it was.
///
/// Thread safety: one thread at a time per configuration.
///
/// # Safety
/// `config` is NULL or live; `schedule` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_minibatch_schedule(
    config: *mut ctf_config,
    schedule: *const c_char,
) -> ctf_status {
    // SAFETY: the caller passes a live configuration and a NUL-terminated string (or NULL).
    unsafe {
        with_config(config, |config| {
            match opt_str_arg(schedule, "schedule")? {
                None => {
                    config.options.schedule = None;
                }
                Some(text) => {
                    let parsed: MbSchedule =
                        text.parse()
                            .map_err(|e: crate::timeline::schedule::ScheduleError| {
                                Failure::invalid(e.to_string())
                            })?;
                    config.options.schedule = Some(parsed);
                }
            }
            Ok(())
        })
    }
}

/// Sends diagnostics (warnings, those of indexing included, and skipped invalid sequences)
/// to `callback` with `user_data` instead of standard error; a NULL `callback` restores
/// standard error.
///
/// Thread safety: one thread at a time per configuration. The callback itself is called from
/// the thread that makes the reader and from the reader's own threads, one call at a time
/// (see `ctf_diagnostic_callback`).
///
/// # Safety
/// `config` is NULL or live; `callback` may be called with `user_data` from any thread until
/// every reader made from this configuration is freed.
#[no_mangle]
pub unsafe extern "C" fn ctf_config_set_diagnostic_callback(
    config: *mut ctf_config,
    callback: ctf_diagnostic_callback,
    user_data: *mut c_void,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live configuration.
    unsafe {
        with_config(config, |config| {
            config.options.callback = callback;
            config.options.user_data = user_data as usize;
            Ok(())
        })
    }
}
