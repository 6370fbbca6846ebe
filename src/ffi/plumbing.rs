//! Private plumbing of the C ABI: the panic boundary every export goes through, the
//! thread-local last error, the conversions between C pointers and Rust references (NULL is
//! an error status, never a crash), and the ownership of the boxed handles.
//!
//! The pattern follows rustls-ffi's `ffi.rs` / `panic.rs`: a handle type says how it is
//! owned ([`BoxedHandle`]), so a handle can only be made and freed the way it was allocated.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::status::ctf_status;

thread_local! {
    /// The message of the last failed call on this thread.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Makes a C string of `text`, replacing interior NUL bytes (which a message never needs).
pub(crate) fn c_string(text: &str) -> CString {
    CString::new(text.replace('\0', "\\0")).unwrap_or_default()
}

/// Records `message` as this thread's last error.
pub(crate) fn set_last_error(message: &str) {
    let message = c_string(message);
    LAST_ERROR.with(|last| *last.borrow_mut() = message);
}

/// This thread's last error message; the pointer stays valid until the next failing call on
/// this thread replaces it.
pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}

/// An error of a call: its status and its message.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: ctf_status,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: ctf_status, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
        }
    }

    pub(crate) fn null(argument: &str) -> Self {
        Failure::new(
            ctf_status::NullArgument,
            format!("argument '{argument}' is NULL"),
        )
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Failure::new(ctf_status::InvalidArgument, message)
    }
}

/// The result type of the bodies of exported functions.
pub(crate) type CallResult = Result<(), Failure>;

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Runs the body of an exported function: a failure becomes its status (and this thread's
/// last error), a panic becomes [`ctf_status::Panic`]. Nothing unwinds into C.
pub(crate) fn guard(body: impl FnOnce() -> CallResult) -> ctf_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ctf_status::Ok,
        Ok(Err(failure)) => {
            set_last_error(&failure.message);
            failure.status
        }
        Err(payload) => {
            set_last_error(&format!(
                "internal error (a bug in ctf-reader): {}",
                panic_message(&*payload)
            ));
            ctf_status::Panic
        }
    }
}

/// Runs the body of an exported function that returns a value rather than a status: a panic
/// gives `fallback`.
pub(crate) fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(payload) => {
            set_last_error(&format!(
                "internal error (a bug in ctf-reader): {}",
                panic_message(&*payload)
            ));
            fallback
        }
    }
}

/// Reads a C string argument as UTF-8.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays valid during the call.
pub(crate) unsafe fn str_arg<'a>(ptr: *const c_char, name: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::null(name));
    }
    // SAFETY: non-NULL, and the caller promises a NUL-terminated string valid for the call.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str()
        .map_err(|_| Failure::invalid(format!("argument '{name}' is not valid UTF-8")))
}

/// Reads an optional C string argument (NULL is `None`).
///
/// # Safety
/// As [`str_arg`].
pub(crate) unsafe fn opt_str_arg<'a>(
    ptr: *const c_char,
    name: &str,
) -> Result<Option<&'a str>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { str_arg(ptr, name) }.map(Some)
}

/// An enum of the C ABI that C passes in as an argument. C lets any `int` into an enum type,
/// but a Rust enum holding a value it does not list is undefined behaviour, caught by no
/// guard: so the exported functions take such an argument as a raw `c_int` and convert it
/// with [`enum_arg`].
pub(crate) trait CEnum: Copy + 'static {
    /// Every value of the type.
    const ALL: &'static [Self];
    /// The type's name in the header, for messages.
    const C_NAME: &'static str;
    /// The value's number in the header.
    fn number(self) -> c_int;
}

/// The `E` numbered `value`, or `INVALID_ARGUMENT` naming the argument when `E` has none.
pub(crate) fn enum_arg<E: CEnum>(value: c_int, name: &str) -> Result<E, Failure> {
    E::ALL
        .iter()
        .copied()
        .find(|e| e.number() == value)
        .ok_or_else(|| {
            Failure::invalid(format!(
                "argument '{name}' is {value}, which is no {} value",
                E::C_NAME
            ))
        })
}

/// Checks an out-parameter pointer; the reference is only written on success.
///
/// # Safety
/// `ptr` is NULL or points to writable memory for a `T`, not aliased during the call.
pub(crate) unsafe fn out_arg<'a, T>(ptr: *mut T, name: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: the caller promises a valid, unaliased pointer when it is not NULL.
    unsafe { ptr.as_mut() }.ok_or_else(|| Failure::null(name))
}

/// Reads a byte-slice argument (`ptr`, `len`); NULL is allowed only with `len == 0`.
///
/// # Safety
/// `ptr` points to `len` readable bytes valid during the call, or is NULL.
pub(crate) unsafe fn bytes_arg<'a>(
    ptr: *const u8,
    len: usize,
    name: &str,
) -> Result<&'a [u8], Failure> {
    if ptr.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(Failure::null(name))
        };
    }
    // SAFETY: non-NULL and the caller promises `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A handle type owned through a `Box`: made by [`into_raw`](BoxedHandle::into_raw) in a
/// constructor and released by [`free`](BoxedHandle::free) in its `_free` function only.
pub(crate) trait BoxedHandle: Sized {
    /// Hands a new handle to C.
    fn into_raw(self) -> *mut Self {
        Box::into_raw(Box::new(self))
    }

    /// Borrows a handle given by C.
    ///
    /// # Safety
    /// `ptr` is NULL or a live handle made by [`into_raw`](BoxedHandle::into_raw), not being
    /// freed during the call.
    unsafe fn from_const<'a>(ptr: *const Self, name: &str) -> Result<&'a Self, Failure> {
        // SAFETY: forwarded contract.
        unsafe { ptr.as_ref() }.ok_or_else(|| Failure::null(name))
    }

    /// Borrows a handle given by C for a call that changes it.
    ///
    /// # Safety
    /// As [`from_const`](BoxedHandle::from_const), and no other reference to the handle is
    /// in use during the call (one thread at a time).
    unsafe fn from_mut<'a>(ptr: *mut Self, name: &str) -> Result<&'a mut Self, Failure> {
        // SAFETY: forwarded contract.
        unsafe { ptr.as_mut() }.ok_or_else(|| Failure::null(name))
    }

    /// Frees a handle; NULL is a no-op.
    ///
    /// # Safety
    /// `ptr` is NULL or a live handle made by [`into_raw`](BoxedHandle::into_raw), not used
    /// again afterwards.
    unsafe fn free(ptr: *mut Self) {
        if !ptr.is_null() {
            // SAFETY: the caller hands back ownership of a pointer made by Box::into_raw.
            drop(unsafe { Box::from_raw(ptr) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        // SAFETY: last_error_ptr points to this thread's NUL-terminated message.
        unsafe { CStr::from_ptr(last_error_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_the_panic_status_with_its_message() {
        let status = guard(|| panic!("boom in the engine"));
        assert_eq!(status, ctf_status::Panic);
        assert!(
            last_error().contains("boom in the engine"),
            "{}",
            last_error()
        );
        let value = guard_value(7usize, || panic!("second {}", 2));
        assert_eq!(value, 7);
        assert!(last_error().contains("second 2"), "{}", last_error());
    }

    #[test]
    fn a_failure_becomes_its_status_and_message() {
        let status = guard(|| Err(Failure::invalid("stream 9 does not exist")));
        assert_eq!(status, ctf_status::InvalidArgument);
        assert_eq!(last_error(), "stream 9 does not exist");
        assert_eq!(guard(|| Ok(())), ctf_status::Ok);
        // Success leaves the last error as it was.
        assert_eq!(last_error(), "stream 9 does not exist");
    }

    #[test]
    fn enum_arguments_take_their_numbers_and_refuse_any_other() {
        use crate::ffi::config::ctf_storage;
        use crate::ffi::dlpack::ctf_dlpack_part;
        assert_eq!(
            enum_arg::<ctf_storage>(1, "storage").unwrap(),
            ctf_storage::Sparse
        );
        assert_eq!(
            enum_arg::<ctf_dlpack_part>(5, "part").unwrap(),
            ctf_dlpack_part::Mask
        );
        for value in [-1, 6, 99, c_int::MAX, c_int::MIN] {
            let failure = enum_arg::<ctf_dlpack_part>(value, "part").unwrap_err();
            assert_eq!(failure.status, ctf_status::InvalidArgument);
            assert_eq!(
                failure.message,
                format!("argument 'part' is {value}, which is no ctf_dlpack_part value")
            );
        }
        assert!(enum_arg::<ctf_storage>(2, "storage").is_err());
        // Every value's number is its position: the lists are complete and in order.
        for (i, status) in ctf_status::ALL.iter().enumerate() {
            assert_eq!(status.number(), i as c_int);
        }
    }

    #[test]
    fn messages_with_nul_bytes_stay_readable() {
        set_last_error("a\0b");
        assert_eq!(last_error(), "a\\0b");
    }
}
