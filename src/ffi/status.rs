//! Status codes, error messages and the library version of the C ABI.
//!
//! Every fallible C function returns a [`ctf_status`]; its values are fixed and never
//! renumbered. The text of the last failure on a thread is [`ctf_last_error_message`]; a
//! reader or a configuration also keeps the message of its own last failure.

use std::ffi::{c_char, c_int};

use super::plumbing::{enum_arg, guard_value, last_error_ptr, CEnum};

/// Major version of the library the header came with (the `x` of `x.y.z` in Cargo.toml).
pub const CTF_READER_VERSION_MAJOR: u32 = 0;
/// Minor version of the library the header came with.
pub const CTF_READER_VERSION_MINOR: u32 = 1;
/// Patch version of the library the header came with.
pub const CTF_READER_VERSION_PATCH: u32 = 0;

/// Size in bytes of a checkpoint (`ctf_reader_checkpoint`).
pub const CTF_CHECKPOINT_SIZE: usize = 20;
const _: () = assert!(CTF_CHECKPOINT_SIZE == crate::timeline::checkpoint::CHECKPOINT_LEN);

/// The result of a fallible call. The values are part of the ABI and never change.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ctf_status {
    /// Success; the out-parameters were written.
    Ok = 0,
    /// No more data: the limits (max samples / max sweeps) are reached. Not an error; the
    /// out-parameter is not written. Every later call says the same.
    EndOfData = 1,
    /// A required pointer argument was NULL.
    NullArgument = 2,
    /// An argument is out of range or malformed (a stream index, a dimension of 0, a
    /// schedule string, a rank not below the worker count, a sparse stream asked for a
    /// padded view, ...).
    InvalidArgument = 3,
    /// The configuration is invalid (a BrainScript syntax error, a missing key, ...); the
    /// message names the source, line and column.
    ConfigError = 4,
    /// The data is invalid beyond `maxErrors`, or a file is unusable as data; the message
    /// names the file, line and column.
    DataError = 5,
    /// A file (data or configuration) could not be found, opened or read.
    IoError = 6,
    /// A checkpoint is malformed or was taken on another corpus or configuration.
    CheckpointError = 7,
    /// An output buffer is too small (see the function for the size it needs).
    BufferTooSmall = 8,
    /// A reader that failed earlier was used again; it keeps failing with this status
    /// until a checkpoint is restored.
    ReaderFailed = 9,
    /// A bug in ctf-reader (a Rust panic, caught at the boundary).
    Panic = 10,
}

impl CEnum for ctf_status {
    const ALL: &'static [Self] = &[
        ctf_status::Ok,
        ctf_status::EndOfData,
        ctf_status::NullArgument,
        ctf_status::InvalidArgument,
        ctf_status::ConfigError,
        ctf_status::DataError,
        ctf_status::IoError,
        ctf_status::CheckpointError,
        ctf_status::BufferTooSmall,
        ctf_status::ReaderFailed,
        ctf_status::Panic,
    ];
    const C_NAME: &'static str = "ctf_status";
    fn number(self) -> c_int {
        self as c_int
    }
}

/// A static, human-readable name of `status`, a `ctf_status` value (e.g. `"end of data"`),
/// never NULL; `"unknown status"` for a number that is no `ctf_status` of this library (one
/// added by a later version).
///
/// Thread safety: any thread.
#[no_mangle]
pub extern "C" fn ctf_status_str(status: c_int) -> *const c_char {
    let Ok(status) = enum_arg::<ctf_status>(status, "status") else {
        return c"unknown status".as_ptr();
    };
    let text: &'static std::ffi::CStr = match status {
        ctf_status::Ok => c"ok",
        ctf_status::EndOfData => c"end of data",
        ctf_status::NullArgument => c"NULL argument",
        ctf_status::InvalidArgument => c"invalid argument",
        ctf_status::ConfigError => c"configuration error",
        ctf_status::DataError => c"data error",
        ctf_status::IoError => c"I/O error",
        ctf_status::CheckpointError => c"checkpoint error",
        ctf_status::BufferTooSmall => c"buffer too small",
        ctf_status::ReaderFailed => c"reader failed earlier",
        ctf_status::Panic => c"internal error",
    };
    text.as_ptr()
}

/// The message of the last failed call on the calling thread (`""` if none failed yet), never
/// NULL. Constructors, which have no handle to keep a message in, report here; every other
/// failing call does too. The pointer stays valid until the next failing call on this thread.
///
/// Thread safety: any thread; each thread has its own message.
#[no_mangle]
pub extern "C" fn ctf_last_error_message() -> *const c_char {
    guard_value(c"".as_ptr(), last_error_ptr)
}

/// The version of the library as `"MAJOR.MINOR.PATCH"` (static, never NULL). Compare with
/// the `CTF_READER_VERSION_*` macros of the header you compiled with.
///
/// Thread safety: any thread.
#[no_mangle]
pub extern "C" fn ctf_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn every_status_has_its_name_and_other_numbers_one_of_their_own() {
        let name = |n: c_int| {
            // SAFETY: ctf_status_str returns static NUL-terminated strings.
            unsafe { CStr::from_ptr(ctf_status_str(n)) }
                .to_str()
                .unwrap()
        };
        assert_eq!(name(ctf_status::Ok as c_int), "ok");
        assert_eq!(name(ctf_status::Panic as c_int), "internal error");
        let names: std::collections::BTreeSet<&str> =
            ctf_status::ALL.iter().map(|&s| name(s as c_int)).collect();
        assert_eq!(names.len(), ctf_status::ALL.len());
        assert!(!names.contains("unknown status"));
        for n in [-1, 11, 7000, c_int::MAX, c_int::MIN] {
            assert_eq!(name(n), "unknown status");
        }
    }

    #[test]
    fn version_macros_match_cargo_toml() {
        assert_eq!(
            CTF_READER_VERSION_MAJOR.to_string(),
            env!("CARGO_PKG_VERSION_MAJOR")
        );
        assert_eq!(
            CTF_READER_VERSION_MINOR.to_string(),
            env!("CARGO_PKG_VERSION_MINOR")
        );
        assert_eq!(
            CTF_READER_VERSION_PATCH.to_string(),
            env!("CARGO_PKG_VERSION_PATCH")
        );
    }
}
