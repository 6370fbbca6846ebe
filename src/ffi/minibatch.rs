//! `ctf_minibatch`: a minibatch owned by the library, seen from C through borrowed
//! `#[repr(C)]` views ([`ctf_stream_view`], [`ctf_padded_view`]) that point into its pooled
//! buffers without copying. The views stay valid until the minibatch is freed; freeing it
//! returns the buffers to the reader's pool (once no DLPack tensor exported from it is alive
//! either).
//!
//! A minibatch is immutable once handed out: every function taking a `const ctf_minibatch *`
//! may be called from any thread. The padded view is made on first request, once.

use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

use super::config::{ctf_element_type, ctf_storage};
use super::plumbing::{guard, guard_value, out_arg, BoxedHandle, CallResult, Failure};
use super::status::ctf_status;
use crate::minibatch::{Padded, PooledMinibatch, StreamData};
use crate::Element;

/// Padded-view mask value of a sequence's first sample.
pub const CTF_MASK_BEGIN: u8 = 2;
const _: () = assert!(CTF_MASK_BEGIN == crate::minibatch::MASK_BEGIN);
/// Padded-view mask value of a sample after a sequence's first.
pub const CTF_MASK_VALID: u8 = 1;
const _: () = assert!(CTF_MASK_VALID == crate::minibatch::MASK_VALID);
/// Padded-view mask value of padding.
pub const CTF_MASK_PAD: u8 = 0;
const _: () = assert!(CTF_MASK_PAD == crate::minibatch::MASK_PAD);

/// The minibatch as a whole.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ctf_minibatch_info {
    /// Sequences in the minibatch (possibly 0 for a worker's empty share).
    pub sequences: usize,
    /// The key of each sequence (`sequences` entries): its id, or in line mode its 0-based
    /// line number. Borrowed from the minibatch.
    pub keys: *const u64,
    /// Streams, as in `ctf_reader_stream_count`.
    pub stream_count: usize,
    /// Samples counted for the minibatch size (of the inputs that define it).
    pub samples: usize,
    /// Whether a sweep over the corpus ended within this minibatch.
    pub sweep_end: bool,
    /// Whether an epoch ended with this minibatch (only with an epoch size set:
    /// `ctf_config_set_epoch_size`).
    pub epoch_end: bool,
    /// The global timeline position after this minibatch (samples, all workers).
    pub position: u64,
}

/// One stream of a minibatch, borrowed from it (valid until `ctf_minibatch_free`).
///
/// Sequence `i` holds samples `sequence_starts[i]` to `sequence_starts[i + 1]` (exclusive)
/// of this stream, `sequence_lengths[i]` of them. Dense: sample `j` is the `dim` values at
/// `values + j * dim`, with no gaps (`value_count = samples * dim`). Sparse (compressed
/// sparse columns, one column per sample): sample `j` holds `values[k]` at row
/// `row_indices[k]` for `k` from `column_starts[j]` to `column_starts[j + 1]` (exclusive).
/// `values` points to `float` or `double` as `element_type` says.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ctf_stream_view {
    /// Dense or sparse.
    pub storage: ctf_storage,
    /// Float32 (`float`) or Float64 (`double`).
    pub element_type: ctf_element_type,
    /// Dense: values per sample. Sparse: number of rows.
    pub dim: usize,
    /// Samples of this stream in the minibatch, all sequences together.
    pub samples: usize,
    /// Sequences (the same for every stream of a minibatch).
    pub sequences: usize,
    /// The values (`value_count` of them), `float` or `double`.
    pub values: *const c_void,
    /// Number of values: `samples * dim` when dense, the stored values when sparse.
    pub value_count: usize,
    /// Sparse: the row of each value (`value_count` entries). Dense: NULL.
    pub row_indices: *const u32,
    /// Sparse: where each sample's column starts in `values` (`samples + 1` entries, the
    /// first 0, the last `value_count`). Dense: NULL.
    pub column_starts: *const u32,
    /// First sample of each sequence (`sequences + 1` entries, the first 0, the last
    /// `samples`).
    pub sequence_starts: *const usize,
    /// Samples of each sequence in this stream (`sequences` entries; possibly 0).
    pub sequence_lengths: *const usize,
}

/// A padded, rectangular copy of a dense stream (`ctf_minibatch_padded`), owned by the
/// minibatch. Sequence-major: sequence `b`, step `t` is the `dim` values at
/// `values + (b * max_len + t) * dim` and the mask byte `mask[b * max_len + t]`
/// (`CTF_MASK_BEGIN` for a sequence's first sample, `CTF_MASK_VALID` for the others,
/// `CTF_MASK_PAD` for padding, whose values are 0).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ctf_padded_view {
    /// Float32 (`float`) or Float64 (`double`).
    pub element_type: ctf_element_type,
    /// Rows: the minibatch's sequences.
    pub batch: usize,
    /// Steps per row: the longest sequence of this stream.
    pub max_len: usize,
    /// Values per sample.
    pub dim: usize,
    /// `batch * max_len * dim` values.
    pub values: *const c_void,
    /// `batch * max_len` mask bytes.
    pub mask: *const u8,
}

/// A pooled minibatch of either element type.
pub(crate) enum Batch {
    F32(PooledMinibatch<f32>),
    F64(PooledMinibatch<f64>),
}

impl From<PooledMinibatch<f32>> for Batch {
    fn from(batch: PooledMinibatch<f32>) -> Self {
        Batch::F32(batch)
    }
}

impl From<PooledMinibatch<f64>> for Batch {
    fn from(batch: PooledMinibatch<f64>) -> Self {
        Batch::F64(batch)
    }
}

/// A padded copy of either element type.
pub(crate) enum PaddedAny {
    F32(Padded<f32>),
    F64(Padded<f64>),
}

/// What a minibatch handle and its DLPack exports share; its drop returns the buffers to
/// the pool.
pub(crate) struct MinibatchData {
    pub(crate) batch: Batch,
    pub(crate) keys: Vec<u64>,
    pub(crate) lengths: Vec<Vec<usize>>,
    pub(crate) padded: Vec<OnceLock<Result<PaddedAny, String>>>,
}

/// A raw view of one stream's buffers, whatever the element type.
pub(crate) struct RawStream<'a> {
    pub(crate) storage: ctf_storage,
    pub(crate) element_type: ctf_element_type,
    pub(crate) dim: usize,
    pub(crate) samples: usize,
    pub(crate) values: *const c_void,
    pub(crate) value_count: usize,
    pub(crate) row_indices: &'a [u32],
    pub(crate) column_starts: &'a [u32],
    pub(crate) sequence_starts: &'a [usize],
}

fn raw<T: Element>(stream: &StreamData<T>, element_type: ctf_element_type) -> RawStream<'_> {
    RawStream {
        storage: stream.format.into(),
        element_type,
        dim: stream.dim,
        samples: stream.samples,
        values: stream.values.as_ptr().cast(),
        value_count: stream.values.len(),
        row_indices: &stream.row_indices,
        column_starts: &stream.column_starts,
        sequence_starts: &stream.sequence_starts,
    }
}

impl MinibatchData {
    pub(crate) fn stream_count(&self) -> usize {
        match &self.batch {
            Batch::F32(b) => b.streams.len(),
            Batch::F64(b) => b.streams.len(),
        }
    }

    pub(crate) fn stream(&self, stream: usize) -> Result<RawStream<'_>, Failure> {
        let found = match &self.batch {
            Batch::F32(b) => b
                .streams
                .get(stream)
                .map(|s| raw(s, ctf_element_type::Float32)),
            Batch::F64(b) => b
                .streams
                .get(stream)
                .map(|s| raw(s, ctf_element_type::Float64)),
        };
        found.ok_or_else(|| {
            Failure::invalid(format!(
                "stream {stream} does not exist (the minibatch has {})",
                self.stream_count()
            ))
        })
    }

    /// The padded view of dense stream `stream`, made on first use.
    pub(crate) fn padded(&self, stream: usize) -> Result<&PaddedAny, Failure> {
        let cell = self.padded.get(stream).ok_or_else(|| {
            Failure::invalid(format!(
                "stream {stream} does not exist (the minibatch has {})",
                self.stream_count()
            ))
        })?;
        let made = cell.get_or_init(|| match &self.batch {
            Batch::F32(b) => {
                let mut out = Padded::new();
                b.padded(stream, &mut out)
                    .map(|()| PaddedAny::F32(out))
                    .map_err(|e| e.to_string())
            }
            Batch::F64(b) => {
                let mut out = Padded::new();
                b.padded(stream, &mut out)
                    .map(|()| PaddedAny::F64(out))
                    .map_err(|e| e.to_string())
            }
        });
        made.as_ref()
            .map_err(|message| Failure::invalid(message.clone()))
    }
}

/// Minibatch data is shared between threads (const calls from any thread, DLPack deleters
/// on any thread): checked at compile time.
const _: () = {
    fn send_sync<T: Send + Sync>() {}
    #[allow(dead_code)]
    fn data_is_send_sync() {
        send_sync::<PooledMinibatch<f32>>();
        send_sync::<PooledMinibatch<f64>>();
    }
};

/// A minibatch (opaque), from `ctf_reader_next`.
pub struct ctf_minibatch {
    pub(crate) data: Arc<MinibatchData>,
}

impl BoxedHandle for ctf_minibatch {}

impl ctf_minibatch {
    pub(crate) fn new(batch: Batch) -> Self {
        fn layout<T: Element>(b: &PooledMinibatch<T>) -> (Vec<u64>, Vec<Vec<usize>>) {
            let keys = b.sequences.iter().map(|s| s.key).collect();
            let lengths = b
                .streams
                .iter()
                .map(|s| s.sequence_starts.windows(2).map(|w| w[1] - w[0]).collect())
                .collect();
            (keys, lengths)
        }
        let (keys, lengths) = match &batch {
            Batch::F32(b) => layout(b),
            Batch::F64(b) => layout(b),
        };
        let padded = (0..lengths.len()).map(|_| OnceLock::new()).collect();
        ctf_minibatch {
            data: Arc::new(MinibatchData {
                batch,
                keys,
                lengths,
                padded,
            }),
        }
    }
}

/// Runs a call on a minibatch.
///
/// # Safety
/// `minibatch` is NULL or a live minibatch.
unsafe fn with_minibatch(
    minibatch: *const ctf_minibatch,
    body: impl FnOnce(&MinibatchData) -> CallResult,
) -> ctf_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let minibatch = unsafe { ctf_minibatch::from_const(minibatch, "minibatch") }?;
        body(&minibatch.data)
    })
}

/// Frees a minibatch, returning its buffers to the reader's pool (after the last DLPack
/// tensor exported from it is deleted); NULL is a no-op. Every view of it becomes invalid. A
/// minibatch may be freed after its reader.
///
/// Thread safety: any thread, but not concurrently with another use of `minibatch`.
///
/// # Safety
/// `minibatch` is NULL or a live minibatch, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ctf_minibatch_free(minibatch: *mut ctf_minibatch) {
    guard_value((), || {
        // SAFETY: the caller hands back a minibatch made by this library (or NULL).
        unsafe { ctf_minibatch::free(minibatch) }
    })
}

/// Writes what the minibatch is as a whole (sequences, keys, flags, position) to `*out`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `minibatch` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_minibatch_get_info(
    minibatch: *const ctf_minibatch,
    out: *mut ctf_minibatch_info,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live minibatch, and NULL or a writable `out`.
    unsafe {
        with_minibatch(minibatch, |data| {
            let out = out_arg(out, "out")?;
            let (samples, sweep_end, epoch_end, position) = match &data.batch {
                Batch::F32(b) => (b.samples(), b.sweep_end, b.epoch_end, b.position),
                Batch::F64(b) => (b.samples(), b.sweep_end, b.epoch_end, b.position),
            };
            *out = ctf_minibatch_info {
                sequences: data.keys.len(),
                keys: data.keys.as_ptr(),
                stream_count: data.stream_count(),
                samples,
                sweep_end,
                epoch_end,
                position,
            };
            Ok(())
        })
    }
}

/// Writes the view of stream `stream` (0-based, configuration order) to `*out`; a stream
/// index out of range is `CTF_STATUS_INVALID_ARGUMENT`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `minibatch` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_minibatch_stream(
    minibatch: *const ctf_minibatch,
    stream: usize,
    out: *mut ctf_stream_view,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live minibatch, and NULL or a writable `out`.
    unsafe {
        with_minibatch(minibatch, |data| {
            let out = out_arg(out, "out")?;
            let s = data.stream(stream)?;
            let sparse = s.storage == ctf_storage::Sparse;
            *out = ctf_stream_view {
                storage: s.storage,
                element_type: s.element_type,
                dim: s.dim,
                samples: s.samples,
                sequences: data.keys.len(),
                values: s.values,
                value_count: s.value_count,
                row_indices: if sparse {
                    s.row_indices.as_ptr()
                } else {
                    std::ptr::null()
                },
                column_starts: if sparse {
                    s.column_starts.as_ptr()
                } else {
                    std::ptr::null()
                },
                sequence_starts: s.sequence_starts.as_ptr(),
                sequence_lengths: data.lengths[stream].as_ptr(),
            };
            Ok(())
        })
    }
}

/// Writes the padded view of dense stream `stream` to `*out`, making it on first request
/// (a zero-filled copy, owned by the minibatch). A sparse stream or a stream index out of
/// range is `CTF_STATUS_INVALID_ARGUMENT`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `minibatch` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_minibatch_padded(
    minibatch: *const ctf_minibatch,
    stream: usize,
    out: *mut ctf_padded_view,
) -> ctf_status {
    // SAFETY: the caller passes NULL or a live minibatch, and NULL or a writable `out`.
    unsafe {
        with_minibatch(minibatch, |data| {
            let out = out_arg(out, "out")?;
            *out = match data.padded(stream)? {
                PaddedAny::F32(p) => padded_view(p, ctf_element_type::Float32),
                PaddedAny::F64(p) => padded_view(p, ctf_element_type::Float64),
            };
            Ok(())
        })
    }
}

fn padded_view<T>(p: &Padded<T>, element_type: ctf_element_type) -> ctf_padded_view {
    ctf_padded_view {
        element_type,
        batch: p.batch,
        max_len: p.max_len,
        dim: p.dim,
        values: p.values.as_ptr().cast(),
        mask: p.mask.as_ptr(),
    }
}
