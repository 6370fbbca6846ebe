//! DLPack export of minibatch streams, so that libtorch (`torch::fromDLPack`), JAX, CuPy or
//! NumPy take a minibatch without copying.
//!
//! The structs here have the layout of DLPack's (version 0.8 and later) `DLDevice`,
//! `DLDataType`, `DLTensor` and `DLManagedTensor`, under `ctf_` names so that this header and
//! `dlpack.h` can be included together: cast a `ctf_dl_managed_tensor *` to
//! `DLManagedTensor *`. An exported tensor keeps its minibatch's buffers alive until its
//! `deleter` runs, also after `ctf_minibatch_free`; its memory is read-only.

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::config::{ctf_element_type, ctf_storage};
use super::minibatch::{ctf_minibatch, MinibatchData, PaddedAny};
use super::plumbing::{enum_arg, guard, out_arg, BoxedHandle, CEnum, Failure};
use super::status::ctf_status;

/// DLPack's `kDLCPU`.
pub const CTF_DL_CPU: i32 = 1;
/// DLPack's `kDLInt` type code.
pub const CTF_DL_INT: u8 = 0;
/// DLPack's `kDLUInt` type code.
pub const CTF_DL_UINT: u8 = 1;
/// DLPack's `kDLFloat` type code.
pub const CTF_DL_FLOAT: u8 = 2;

/// DLPack's `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ctf_dl_device {
    /// `DLDeviceType`: always `CTF_DL_CPU` here.
    pub device_type: i32,
    /// Device ordinal: 0.
    pub device_id: i32,
}

/// DLPack's `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ctf_dl_data_type {
    /// `CTF_DL_INT`, `CTF_DL_UINT` or `CTF_DL_FLOAT`.
    pub code: u8,
    /// Bits per element.
    pub bits: u8,
    /// Lanes: 1.
    pub lanes: u16,
}

/// DLPack's `DLTensor`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ctf_dl_tensor {
    /// The first element (read-only memory, despite the type).
    pub data: *mut c_void,
    /// The device: the CPU.
    pub device: ctf_dl_device,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: ctf_dl_data_type,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements (compact, row-major).
    pub strides: *mut i64,
    /// Offset in bytes from `data`: 0.
    pub byte_offset: u64,
}

/// DLPack's `DLManagedTensor`: call `deleter(tensor)` once when done with it.
#[repr(C)]
#[derive(Debug)]
pub struct ctf_dl_managed_tensor {
    /// The tensor.
    pub dl_tensor: ctf_dl_tensor,
    /// The library's context (the buffers kept alive).
    pub manager_ctx: *mut c_void,
    /// Frees the tensor and releases the buffers; never NULL here.
    pub deleter: Option<unsafe extern "C" fn(tensor: *mut ctf_dl_managed_tensor)>,
}

/// Which buffer of a stream to export.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ctf_dlpack_part {
    /// The values: dense `[samples, dim]` (ragged: sequences back to back), sparse `[nnz]`;
    /// float32 or float64.
    Values = 0,
    /// Sparse: the row index of each value, `[nnz]` uint32.
    RowIndices = 1,
    /// Sparse: the column starts, `[samples + 1]` uint32.
    ColumnStarts = 2,
    /// The first sample of each sequence, `[sequences + 1]`, signed integers as wide as
    /// `size_t` (int64 on 64-bit platforms): the offsets of the ragged values.
    SequenceStarts = 3,
    /// Dense: the padded view `[sequences, max_len, dim]` (made on first request).
    Padded = 4,
    /// Dense: the padded view's mask `[sequences, max_len]` uint8.
    Mask = 5,
}

impl CEnum for ctf_dlpack_part {
    const ALL: &'static [Self] = &[
        ctf_dlpack_part::Values,
        ctf_dlpack_part::RowIndices,
        ctf_dlpack_part::ColumnStarts,
        ctf_dlpack_part::SequenceStarts,
        ctf_dlpack_part::Padded,
        ctf_dlpack_part::Mask,
    ];
    const C_NAME: &'static str = "ctf_dlpack_part";
    fn number(self) -> c_int {
        self as c_int
    }
}

/// The export: the managed tensor first, so the tensor pointer is the export's.
#[repr(C)]
struct Export {
    managed: ctf_dl_managed_tensor,
    shape: [i64; 3],
    strides: [i64; 3],
    _keep: Arc<MinibatchData>,
}

/// The deleter DLPack consumers call on an export: frees it, letting go of the minibatch's
/// buffers it kept alive.
///
/// # Safety
/// `tensor` is NULL or a tensor made by `export` and not deleted before (DLPack's contract:
/// the consumer calls the deleter once).
unsafe extern "C" fn delete_export(tensor: *mut ctf_dl_managed_tensor) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if tensor.is_null() {
            return;
        }
        // SAFETY: `tensor` was made by `export` as the first field of a boxed `Export`
        // (whose address is also its manager_ctx), and DLPack calls the deleter once.
        drop(unsafe { Box::from_raw(tensor.cast::<Export>()) });
    }));
}

fn dims(values: &[usize]) -> Result<Vec<i64>, Failure> {
    values
        .iter()
        .map(|&v| i64::try_from(v).map_err(|_| Failure::invalid("a tensor extent exceeds int64")))
        .collect()
}

fn float_type(element_type: ctf_element_type) -> ctf_dl_data_type {
    let bits = match element_type {
        ctf_element_type::Float32 => 32,
        ctf_element_type::Float64 => 64,
    };
    ctf_dl_data_type {
        code: CTF_DL_FLOAT,
        bits,
        lanes: 1,
    }
}

fn export(
    keep: &Arc<MinibatchData>,
    data: *const c_void,
    dtype: ctf_dl_data_type,
    shape: &[usize],
) -> Result<*mut ctf_dl_managed_tensor, Failure> {
    let extents = dims(shape)?;
    let mut export = Box::new(Export {
        managed: ctf_dl_managed_tensor {
            dl_tensor: ctf_dl_tensor {
                data: data.cast_mut(),
                device: ctf_dl_device {
                    device_type: CTF_DL_CPU,
                    device_id: 0,
                },
                ndim: extents.len() as i32,
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_export),
        },
        shape: [0; 3],
        strides: [0; 3],
        _keep: Arc::clone(keep),
    });
    let n = extents.len();
    export.shape[..n].copy_from_slice(&extents);
    let mut stride = 1i64;
    for d in (0..n).rev() {
        export.strides[d] = stride;
        stride = stride.saturating_mul(extents[d].max(1));
    }
    export.managed.dl_tensor.shape = export.shape.as_mut_ptr();
    export.managed.dl_tensor.strides = export.strides.as_mut_ptr();
    let raw = Box::into_raw(export);
    // SAFETY: `raw` is a valid, uniquely owned Export just leaked from its box.
    unsafe { (*raw).managed.manager_ctx = raw.cast() };
    Ok(raw.cast())
}

/// Exports `part` of stream `stream` as a DLPack tensor without copying and writes it to
/// `*out`; the caller (or the framework it hands the tensor to) calls its `deleter` once.
/// The tensor keeps the minibatch's buffers alive until then, so the minibatch may be freed
/// first. A part that the stream's storage lacks (row indices of a dense stream, a padded
/// view of a sparse one), a stream out of range, or a `part` that is no `ctf_dlpack_part`
/// value (it is an `int`, so that another number is not undefined behaviour) is
/// `CTF_STATUS_INVALID_ARGUMENT`.
///
/// Thread safety: any thread; the deleter may run on any thread.
///
/// # Safety
/// `minibatch` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ctf_minibatch_dlpack(
    minibatch: *const ctf_minibatch,
    stream: usize,
    part: c_int,
    out: *mut *mut ctf_dl_managed_tensor,
) -> ctf_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live minibatch and NULL or a writable `out`.
        let (minibatch, out) = unsafe {
            (
                ctf_minibatch::from_const(minibatch, "minibatch")?,
                out_arg(out, "out")?,
            )
        };
        let part = enum_arg::<ctf_dlpack_part>(part, "part")?;
        let keep = &minibatch.data;
        let s = keep.stream(stream)?;
        let sparse = s.storage == ctf_storage::Sparse;
        let u32_type = ctf_dl_data_type {
            code: CTF_DL_UINT,
            bits: 32,
            lanes: 1,
        };
        let only_sparse = |what: &str| {
            Failure::invalid(format!(
                "stream {stream} is dense: it has no {what} (only sparse streams do)"
            ))
        };
        let tensor = match part {
            ctf_dlpack_part::Values if sparse => {
                export(keep, s.values, float_type(s.element_type), &[s.value_count])?
            }
            ctf_dlpack_part::Values => export(
                keep,
                s.values,
                float_type(s.element_type),
                &[s.samples, s.dim],
            )?,
            ctf_dlpack_part::RowIndices if sparse => export(
                keep,
                s.row_indices.as_ptr().cast(),
                u32_type,
                &[s.row_indices.len()],
            )?,
            ctf_dlpack_part::RowIndices => return Err(only_sparse("row indices")),
            ctf_dlpack_part::ColumnStarts if sparse => export(
                keep,
                s.column_starts.as_ptr().cast(),
                u32_type,
                &[s.column_starts.len()],
            )?,
            ctf_dlpack_part::ColumnStarts => return Err(only_sparse("column starts")),
            ctf_dlpack_part::SequenceStarts => export(
                keep,
                s.sequence_starts.as_ptr().cast(),
                ctf_dl_data_type {
                    code: CTF_DL_INT,
                    bits: usize::BITS as u8,
                    lanes: 1,
                },
                &[s.sequence_starts.len()],
            )?,
            ctf_dlpack_part::Padded | ctf_dlpack_part::Mask => {
                let padded = keep.padded(stream)?;
                let (values, element_type, mask, batch, max_len, dim) = match padded {
                    PaddedAny::F32(p) => (
                        p.values.as_ptr().cast::<c_void>(),
                        ctf_element_type::Float32,
                        p.mask.as_ptr(),
                        p.batch,
                        p.max_len,
                        p.dim,
                    ),
                    PaddedAny::F64(p) => (
                        p.values.as_ptr().cast::<c_void>(),
                        ctf_element_type::Float64,
                        p.mask.as_ptr(),
                        p.batch,
                        p.max_len,
                        p.dim,
                    ),
                };
                if part == ctf_dlpack_part::Padded {
                    export(
                        keep,
                        values,
                        float_type(element_type),
                        &[batch, max_len, dim],
                    )?
                } else {
                    export(
                        keep,
                        mask.cast(),
                        ctf_dl_data_type {
                            code: CTF_DL_UINT,
                            bits: 8,
                            lanes: 1,
                        },
                        &[batch, max_len],
                    )?
                }
            }
        };
        *out = tensor;
        Ok(())
    })
}
