//! `ctf_reader`: a [`MinibatchSource`] behind an opaque handle. It tells its streams before
//! reading, hands out minibatches ([`super::minibatch::ctf_minibatch`]), and takes and
//! restores checkpoints as bytes; its counters and position are readable at any time.
//!
//! The source sits behind a mutex, so the functions taking a `const ctf_reader *` may be
//! called from any thread, also while another thread is in `ctf_reader_next` (those that read
//! the source's state wait for it; the stream information does not).

use std::ffi::{c_char, CString};
use std::sync::{Mutex, MutexGuard};

use super::config::{config_failure, ctf_config, ctf_element_type, ctf_storage, ReaderOptions};
use super::minibatch::{ctf_minibatch, Batch};
use super::plumbing::{
    bytes_arg, c_string, guard, guard_value, opt_str_arg, out_arg, str_arg, BoxedHandle,
    CallResult, Failure,
};
use super::status::{ctf_status, CTF_CHECKPOINT_SIZE};
use crate::source::{MinibatchSource, PipelineOptions, SourceError};
use crate::timeline::checkpoint::Checkpoint;
use crate::{Precision, ReaderConfig};

/// What a reader tells about one stream (input), in configuration order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ctf_stream_info {
    /// The input's name (NUL-terminated, owned by the reader, valid until it is freed).
    pub name: *const c_char,
    /// The name used in the data (`alias`; the name when none was given), owned by the
    /// reader.
    pub alias: *const c_char,
    /// Dense: values per sample. Sparse: number of rows (row indices are below it).
    pub dim: usize,
    /// Dense or sparse.
    pub storage: ctf_storage,
    /// Float32 or Float64, the same for every stream of a reader.
    pub element_type: ctf_element_type,
    /// Whether this input's samples count for the minibatch size (`definesMBSize`).
    pub defines_mb_size: bool,
}

/// The reader's counters (SPEC 7.5): what loading cost so far.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ctf_counters {
    /// Chunks parsed (a chunk parsed in parts counts when its last part is parsed).
    pub chunks_loaded: u64,
    /// Bytes read from the data files.
    pub bytes_read: u64,
    /// Chunk cache hits.
    pub cache_hits: u64,
    /// Chunk cache misses.
    pub cache_misses: u64,
    /// Minibatches handed out.
    pub minibatches: u64,
    /// Seconds spent parsing, summed over the loader threads.
    pub parse_seconds: f64,
    /// Seconds the caller waited in `ctf_reader_next`.
    pub wait_seconds: f64,
    /// Bytes of parsed data the chunk cache holds now.
    pub cache_bytes: u64,
    /// Seconds spent planning (walking the timeline, computing sweep orders, and in the
    /// threaded engine asking for the parts ahead).
    pub plan_seconds: f64,
    /// Seconds spent packing minibatches (copying sequences into them; in the threaded
    /// engine also finding them and waiting for a part still loading), summed over the
    /// packer threads.
    pub pack_seconds: f64,
    /// Bytes read sequence by sequence: for the first minibatch after a start or restore,
    /// the sequences whose chunks were not loaded yet; and under a memory budget too small
    /// for the randomization window, every sequence (`ctf_config_set_memory_budget`). The
    /// first minibatch's chunks are read whole too, in `bytes_read`, when a later minibatch
    /// needs them; a chunk whose sequences the first minibatch holds all may never be. Over
    /// a whole sweep, `bytes_read` plus these cover every byte of every chunk.
    pub quick_bytes_read: u64,
}

/// Where a reader stands on the global timeline.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ctf_progress {
    /// Samples of the global timeline consumed (all workers together), from 0.
    pub position: u64,
    /// The current epoch (0-based): `position / epoch_size`.
    pub epoch: u64,
    /// The epoch size in samples (the sweep size unless one was set; without one, no
    /// minibatch stops at its end).
    pub epoch_size: u64,
    /// Samples in one sweep over the corpus (all workers together).
    pub sweep_samples: u64,
}

enum Engine {
    F32(MinibatchSource<f32>),
    F64(MinibatchSource<f64>),
}

macro_rules! with_engine {
    ($engine:expr, $source:ident => $body:expr) => {
        match $engine {
            Engine::F32($source) => $body,
            Engine::F64($source) => $body,
        }
    };
}

struct StreamNames {
    name: CString,
    alias: CString,
}

struct ReaderState {
    engine: Engine,
    /// Set by the first failure of the source; every later read repeats it until a
    /// restore.
    failed: Option<String>,
    ended: bool,
}

/// A reader of randomized minibatches (opaque).
pub struct ctf_reader {
    names: Vec<StreamNames>,
    config: ReaderConfig,
    options: ReaderOptions,
    state: Mutex<ReaderState>,
    /// The message of the last failed call, behind a lock of its own: calls that only read
    /// the stream information, and `ctf_reader_message`, never wait for the state's lock,
    /// which a `ctf_reader_next` holds while it reads.
    message: Mutex<CString>,
}

impl BoxedHandle for ctf_reader {}

/// A reader moves between threads and is shared by them (its state behind a mutex):
/// checked at compile time, without any `unsafe impl`.
const _: () = {
    fn send_sync<T: Send + Sync>() {}
    #[allow(dead_code)]
    fn reader_is_send_sync() {
        send_sync::<ctf_reader>();
    }
};

/// The status of a source error.
pub(crate) fn source_status(e: &SourceError) -> ctf_status {
    use crate::chunks::LoadError;
    use crate::index::IndexError;
    match e {
        SourceError::Internal(_) | SourceError::Load(LoadError::Panicked { .. }) => {
            ctf_status::Panic
        }
        SourceError::Index(IndexError::Io { .. }) | SourceError::Load(LoadError::Io { .. }) => {
            ctf_status::IoError
        }
        SourceError::Index(_)
        | SourceError::Load(_)
        | SourceError::Data(_)
        | SourceError::Timeline(_)
        | SourceError::Pack(_) => ctf_status::DataError,
        SourceError::Checkpoint(_) => ctf_status::CheckpointError,
        SourceError::Usage(_) => ctf_status::InvalidArgument,
    }
}

fn source_failure(e: SourceError) -> Failure {
    Failure::new(source_status(&e), e.to_string())
}

impl ctf_reader {
    fn open(config: ReaderConfig, options: ReaderOptions) -> Result<Self, Failure> {
        let mut pipeline = PipelineOptions::default();
        if options.threads > 0 {
            pipeline.loader_threads = options.threads;
            pipeline.packer_threads = options.threads;
        }
        if options.prefetch > 0 {
            pipeline.prefetch = options.prefetch;
        }
        if options.memory_budget > 0 {
            pipeline.memory_budget = Some(options.memory_budget);
        }
        pipeline.parse_while_indexing = !options.no_parse_while_indexing;
        pipeline.pin_packers = options.pin_packers;
        let limits = options.limits.clone();
        let mut engine = match config.precision {
            Precision::Float => Engine::F32(
                MinibatchSource::with_options(&config, limits, options.sink(), pipeline)
                    .map_err(source_failure)?,
            ),
            Precision::Double => Engine::F64(
                MinibatchSource::with_options(&config, limits, options.sink(), pipeline)
                    .map_err(source_failure)?,
            ),
        };
        if let Some(schedule) = &options.schedule {
            with_engine!(&mut engine, source => source.set_schedule(schedule.clone()));
        }
        let names: Vec<StreamNames> = config
            .inputs
            .iter()
            .map(|input| StreamNames {
                name: c_string(&input.name),
                alias: c_string(&input.alias),
            })
            .collect();
        Ok(ctf_reader {
            names,
            config,
            options,
            state: Mutex::new(ReaderState {
                engine,
                failed: None,
                ended: false,
            }),
            message: Mutex::new(CString::default()),
        })
    }

    /// Keeps `message` as the reader's last failure.
    fn set_message(&self, message: &str) {
        let message = c_string(message);
        *self.message() = message;
    }

    /// The last failure's message, under its own lock (usable after a panic, like the
    /// state's).
    fn message(&self) -> MutexGuard<'_, CString> {
        self.message.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, ReaderState> {
        // A panic while the lock was held is reported as such; the state stays usable for
        // reading counters and for freeing.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stream_count(&self) -> usize {
        self.names.len()
    }

    /// What stream `stream` is; its strings are the reader's.
    fn stream_info(&self, stream: usize) -> Option<ctf_stream_info> {
        let input = self.config.inputs.get(stream)?;
        let names = self.names.get(stream)?;
        Some(ctf_stream_info {
            name: names.name.as_ptr(),
            alias: names.alias.as_ptr(),
            dim: input.dim,
            storage: input.format.into(),
            element_type: self.config.precision.into(),
            defines_mb_size: input.defines_mb_size,
        })
    }
}

/// Runs a call on a reader, keeping its message on failure.
///
/// # Safety
/// `reader` is NULL or a live reader.
unsafe fn with_reader(
    reader: *const ctf_reader,
    body: impl FnOnce(&ctf_reader, &mut ReaderState) -> CallResult,
) -> ctf_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let reader = unsafe { ctf_reader::from_const(reader, "reader") }?;
        let mut state = reader.lock();
        let result = body(reader, &mut state);
        if let Err(failure) = &result {
            reader.set_message(&failure.message);
        }
        result
    })
}

/// Runs a call that only reads the reader's immutable parts, without waiting for a
/// `ctf_reader_next` in progress (a failure keeps its message under the message's own lock).
///
/// # Safety
/// `reader` is NULL or a live reader.
unsafe fn with_reader_info(
    reader: *const ctf_reader,
    body: impl FnOnce(&ctf_reader) -> CallResult,
) -> ctf_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let reader = unsafe { ctf_reader::from_const(reader, "reader") }?;
        let result = body(reader);
        if let Err(failure) = &result {
            reader.set_message(&failure.message);
        }
        result
    })
}

fn new_reader(
    config: ReaderConfig,
    options: ReaderOptions,
    out: &mut *mut ctf_reader,
) -> CallResult {
    let reader = ctf_reader::open(config, options)?;
    *out = reader.into_raw();
    Ok(())
}

/// Makes a reader of the configuration and options of `config` (which is copied: it may be
/// freed right after). This indexes the corpus (using or writing index caches as
/// `cacheIndex` says) and starts the loader threads. `*out` receives the reader, to be freed
/// with `ctf_reader_free`. Failures (configuration, missing file, file-level data error) are
/// reported by `ctf_last_error_message`.
///
/// Thread safety: any thread; `config` must not be changed during the call.
///
/// # Safety
/// `config` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_new(
    config: *const ctf_config,
    out: *mut *mut ctf_reader,
) -> ctf_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live configuration, and NULL or a writable out.
        let (config, out) = unsafe {
            (
                ctf_config::from_const(config, "config")?,
                out_arg(out, "out")?,
            )
        };
        new_reader(config.build()?, config.options.clone(), out)
    })
}

/// A reader with the default options of a configuration just read, its warnings printed on
/// standard error.
fn reader_of(
    read: Result<(ReaderConfig, Vec<crate::config::ConfigWarning>), crate::config::ConfigError>,
    out: &mut *mut ctf_reader,
) -> CallResult {
    let (config, warnings) = read.map_err(|e| config_failure(&e))?;
    for w in &warnings {
        crate::diag::write_stderr_line(w);
    }
    new_reader(config, ReaderOptions::default(), out)
}

/// Makes a reader, with the default options, of the reader section of BrainScript `text`
/// (`section` as in `ctf_config_from_brainscript`; NULL for the default). Warnings of the
/// configuration go to standard error (`ctf_config_from_brainscript` keeps them instead).
///
/// Thread safety: any thread.
///
/// # Safety
/// Strings are NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_from_brainscript(
    text: *const c_char,
    section: *const c_char,
    out: *mut *mut ctf_reader,
) -> ctf_status {
    guard(|| {
        // SAFETY: the caller passes NUL-terminated strings or NULL, and a writable `out`.
        let (text, section, out) = unsafe {
            (
                str_arg(text, "text")?,
                opt_str_arg(section, "section")?,
                out_arg(out, "out")?,
            )
        };
        reader_of(ReaderConfig::from_brainscript(text, "<text>", section), out)
    })
}

/// Makes a reader, with the default options, of the reader section of the configuration
/// file `path` (`section` as in `ctf_config_from_brainscript`; NULL for the default).
/// Warnings of the configuration go to standard error (`ctf_config_from_file` keeps them
/// instead).
///
/// Thread safety: any thread.
///
/// # Safety
/// Strings are NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_from_file(
    path: *const c_char,
    section: *const c_char,
    out: *mut *mut ctf_reader,
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
        reader_of(super::config::config_file(path, section)?, out)
    })
}

/// Frees a reader and stops its threads; NULL is a no-op. Minibatches it handed out stay
/// valid until they are freed.
///
/// Thread safety: not concurrently with any other use of `reader`.
///
/// # Safety
/// `reader` is NULL or a live reader, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_free(reader: *mut ctf_reader) {
    guard_value((), || {
        // SAFETY: the caller hands back a reader made by this library (or NULL).
        unsafe { ctf_reader::free(reader) }
    })
}

/// The message of the last failed call on `reader` (`""` if none), never NULL. Data errors
/// read `FILE:LINE:COL: error: MESSAGE`. Valid until the next call on `reader` that fails, or
/// its free. NULL `reader` gives `""`.
///
/// Thread safety: any thread, but the text may be replaced by a concurrent failing call.
///
/// # Safety
/// `reader` is NULL or a live reader.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_message(reader: *const ctf_reader) -> *const c_char {
    guard_value(c"".as_ptr(), || {
        // SAFETY: the caller passes NULL or a live reader.
        match unsafe { ctf_reader::from_const(reader, "reader") } {
            // The CString's buffer does not move when the guard is released; it is replaced
            // (and freed) only by a later failing call, as documented.
            Ok(reader) => reader.message().as_ptr(),
            Err(_) => c"".as_ptr(),
        }
    })
}

/// The number of streams (inputs), or 0 for a NULL `reader`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `reader` is NULL or a live reader.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_stream_count(reader: *const ctf_reader) -> usize {
    guard_value(0, || {
        // SAFETY: the caller passes NULL or a live reader.
        unsafe { ctf_reader::from_const(reader, "reader") }.map_or(0, |r| r.stream_count())
    })
}

/// Writes what stream `stream` (0-based, configuration order) is to `*out`. A stream index
/// out of range is `CTF_STATUS_INVALID_ARGUMENT`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `reader` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_stream_info(
    reader: *const ctf_reader,
    stream: usize,
    out: *mut ctf_stream_info,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live reader.
    unsafe {
        with_reader_info(reader, |reader| {
            let out = out_arg(out, "out")?;
            let info = reader.stream_info(stream).ok_or_else(|| {
                Failure::invalid(format!(
                    "stream {stream} does not exist (the reader has {})",
                    reader.stream_count()
                ))
            })?;
            *out = info;
            Ok(())
        })
    }
}

/// Finds the stream whose name or alias is `name` and writes its index to `*out`; no such
/// stream is `CTF_STATUS_INVALID_ARGUMENT`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `reader` is NULL or live; `name` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_find_stream(
    reader: *const ctf_reader,
    name: *const c_char,
    out: *mut usize,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live reader and a NUL-terminated name.
    unsafe {
        with_reader_info(reader, |reader| {
            let name = str_arg(name, "name")?;
            let out = out_arg(out, "out")?;
            let found = reader
                .config
                .inputs
                .iter()
                .position(|i| i.name == name)
                .or_else(|| reader.config.inputs.iter().position(|i| i.alias == name))
                .ok_or_else(|| Failure::invalid(format!("no stream is named '{name}'")))?;
            *out = found;
            Ok(())
        })
    }
}

/// Reads the next minibatch of about `size` samples (whole sequences, counted on the
/// inputs that define the minibatch size; at least one sequence of the global timeline).
/// With a schedule (`ctf_config_set_minibatch_schedule`) the schedule gives the size and
/// `size` is ignored; without, `size` 0 is `CTF_STATUS_INVALID_ARGUMENT`.
///
/// Returns `CTF_STATUS_OK` with `*out` set to a new minibatch (free it with
/// `ctf_minibatch_free`; it may be empty for a worker whose share of this step is empty), or
/// `CTF_STATUS_END_OF_DATA` when the limits are reached (`*out` untouched; every later call
/// says the same). A data error beyond `maxErrors` is `CTF_STATUS_DATA_ERROR` with the
/// `FILE:LINE:COL` message in `ctf_reader_message`, and the minibatch that holds (or would
/// hold) the invalid sequence is not delivered; the reader then stays failed
/// (`CTF_STATUS_READER_FAILED`) until `ctf_reader_restore`.
///
/// Thread safety: one thread at a time per reader.
///
/// # Safety
/// `reader` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_next(
    reader: *mut ctf_reader,
    size: u64,
    out: *mut *mut ctf_minibatch,
) -> ctf_status {
    let mut end = false;
    // SAFETY: the caller passes NULL or a live reader, and NULL or a writable `out`.
    let status = unsafe {
        with_reader(reader, |reader, state| {
            let out = out_arg(out, "out")?;
            if let Some(message) = &state.failed {
                return Err(Failure::new(
                    ctf_status::ReaderFailed,
                    format!("the reader failed earlier: {message}"),
                ));
            }
            if state.ended {
                end = true;
                return Ok(());
            }
            let scheduled = reader.options.schedule.is_some();
            if size == 0 && !scheduled {
                return Err(Failure::invalid(
                    "the minibatch size must be at least 1 sample (or set a schedule)",
                ));
            }
            let next = with_engine!(&mut state.engine, source => {
                let next = if scheduled {
                    source.next_scheduled(size)
                } else {
                    source.next_minibatch(size)
                };
                next.map(|batch| batch.map(Batch::from))
            });
            match next {
                Ok(Some(batch)) => {
                    *out = ctf_minibatch::new(batch).into_raw();
                    Ok(())
                }
                Ok(None) => {
                    state.ended = true;
                    end = true;
                    Ok(())
                }
                Err(e) => {
                    let failure = source_failure(e);
                    state.failed = Some(failure.message.clone());
                    Err(failure)
                }
            }
        })
    };
    if status == ctf_status::Ok && end {
        ctf_status::EndOfData
    } else {
        status
    }
}

/// Writes a checkpoint of the reader (the position after the last minibatch handed out and
/// a fingerprint of the corpus and configuration) to `buffer`, `CTF_CHECKPOINT_SIZE` bytes,
/// and that size to `*written`. A smaller `capacity` is `CTF_STATUS_BUFFER_TOO_SMALL`.
/// Checkpoints are plain bytes: store them with the model.
///
/// Thread safety: any thread.
///
/// # Safety
/// `reader` is NULL or live; `buffer` is NULL or `capacity` writable bytes; `written` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_checkpoint(
    reader: *const ctf_reader,
    buffer: *mut u8,
    capacity: usize,
    written: *mut usize,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live reader and valid buffers.
    unsafe {
        with_reader(reader, |_, state| {
            if buffer.is_null() {
                return Err(Failure::null("buffer"));
            }
            let written = out_arg(written, "written")?;
            if capacity < CTF_CHECKPOINT_SIZE {
                return Err(Failure::new(
                    ctf_status::BufferTooSmall,
                    format!(
                        "a checkpoint needs {CTF_CHECKPOINT_SIZE} bytes, the buffer has {capacity}"
                    ),
                ));
            }
            let bytes = with_engine!(&state.engine, source => source.checkpoint().to_bytes());
            // SAFETY: `buffer` is non-NULL with at least `capacity` >= bytes.len() writable
            // bytes, as the caller promised; the regions cannot overlap (ours is local).
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), buffer, bytes.len());
            *written = bytes.len();
            Ok(())
        })
    }
}

/// Restores a checkpoint made by `ctf_reader_checkpoint` on a reader of the same corpus and
/// order-shaping configuration (files, inputs, chunk size, randomization): the next
/// minibatch is the one that followed the checkpoint, and limits still count from position
/// 0. A malformed or foreign checkpoint is `CTF_STATUS_CHECKPOINT_ERROR` and changes nothing.
/// Restoring also revives a reader that reached its end of data, or that failed: the read
/// then goes on past the invalid sequences already charged against `maxErrors` (each counts
/// once for the life of the reader), so restoring the checkpoint of the last minibatch
/// delivered before a `CTF_STATUS_DATA_ERROR` delivers that failed minibatch's valid
/// sequences, up to the next invalid sequence not yet charged.
///
/// Thread safety: one thread at a time per reader.
///
/// # Safety
/// `reader` is NULL or live; `bytes` is NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_restore(
    reader: *mut ctf_reader,
    bytes: *const u8,
    len: usize,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live reader, and `len` readable bytes.
    unsafe {
        with_reader(reader, |_, state| {
            if bytes.is_null() {
                return Err(Failure::null("bytes"));
            }
            let bytes = bytes_arg(bytes, len, "bytes")?;
            let checkpoint = Checkpoint::from_bytes(bytes)
                .map_err(|e| Failure::new(ctf_status::CheckpointError, e.to_string()))?;
            with_engine!(&mut state.engine, source => source.restore(&checkpoint))
                .map_err(source_failure)?;
            state.ended = false;
            state.failed = None;
            Ok(())
        })
    }
}

/// Writes the reader's counters to `*out`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `reader` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_counters(
    reader: *const ctf_reader,
    out: *mut ctf_counters,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live reader and NULL or a writable `out`.
    unsafe {
        with_reader(reader, |_, state| {
            let out = out_arg(out, "out")?;
            let c = with_engine!(&state.engine, source => source.counters());
            *out = ctf_counters {
                chunks_loaded: c.chunks_loaded,
                bytes_read: c.bytes_read,
                cache_hits: c.cache_hits,
                cache_misses: c.cache_misses,
                minibatches: c.minibatches,
                parse_seconds: c.parse_time.as_secs_f64(),
                wait_seconds: c.wait_time.as_secs_f64(),
                cache_bytes: c.cache_bytes,
                plan_seconds: c.plan_time.as_secs_f64(),
                pack_seconds: c.pack_time.as_secs_f64(),
                quick_bytes_read: c.quick_bytes_read,
            };
            Ok(())
        })
    }
}

/// Writes where the reader stands (position, epoch, epoch size, sweep size) to `*out`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `reader` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_progress(
    reader: *const ctf_reader,
    out: *mut ctf_progress,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live reader and NULL or a writable `out`.
    unsafe {
        with_reader(reader, |reader, state| {
            let out = out_arg(out, "out")?;
            let (position, epoch, sweep) = with_engine!(&state.engine, source => {
                (source.position(), source.epoch(), source.sweep_samples())
            });
            *out = ctf_progress {
                position,
                epoch,
                epoch_size: reader.options.limits.epoch_size.unwrap_or(sweep),
                sweep_samples: sweep,
            };
            Ok(())
        })
    }
}

/// Writes the minibatch size the schedule gives for the current epoch to `*out`; a reader
/// without a schedule is `CTF_STATUS_INVALID_ARGUMENT`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `reader` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_reader_scheduled_size(
    reader: *const ctf_reader,
    out: *mut u64,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live reader and NULL or a writable `out`.
    unsafe {
        with_reader(reader, |reader, state| {
            let out = out_arg(out, "out")?;
            let schedule = reader
                .options
                .schedule
                .as_ref()
                .ok_or_else(|| Failure::invalid("the reader has no minibatch-size schedule"))?;
            let epoch = with_engine!(&state.engine, source => source.epoch());
            *out = schedule.size_for_epoch(epoch);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunks::LoadError;

    #[test]
    fn an_engine_thread_that_panicked_is_the_panic_status() {
        let internal = SourceError::Internal("a packer thread stopped".to_string());
        assert_eq!(source_status(&internal), ctf_status::Panic);
        let loader = SourceError::Load(LoadError::Panicked {
            file: "a.ctf".to_string(),
        });
        assert_eq!(source_status(&loader), ctf_status::Panic);
        let usage = SourceError::Usage("rank 3 is not below 2".to_string());
        assert_eq!(source_status(&usage), ctf_status::InvalidArgument);
    }
}
