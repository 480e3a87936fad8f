//! Errors that cross the ABI: the `ffi.Error` object (kind, message, backtrace), the
//! thread-local "raised" slot, and the panic guard that every `extern "C"` entry uses.

use crate::abi::{type_index, ByteArray, ObjectHeader};
use crate::object::{dec_ref, ObjectRef, ObjectType};
use std::cell::Cell;
use std::ffi::c_void;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

/// `TVMFFIErrorCell`: the ABI-visible part of an error object.
#[repr(C)]
pub struct ErrorObj {
    /// The error kind, e.g. `ValueError`.
    pub kind: ByteArray,
    /// The message.
    pub message: ByteArray,
    /// The backtrace text (may be empty).
    pub backtrace: ByteArray,
    /// Replaces or extends the backtrace; set by the error's creator.
    pub update_backtrace:
        Option<unsafe extern "C" fn(obj: *mut c_void, backtrace: *const ByteArray, mode: i32)>,
    /// The error that caused this one, or NULL.
    pub cause_chain: *mut ObjectHeader,
    /// Extra context object, or NULL.
    pub extra_context: *mut ObjectHeader,
}

// SAFETY: the byte arrays point into buffers the error object owns, and the cause and context are
// reference-counted objects; as in TVM-FFI, errors move and are shared between threads (the
// backtrace is updated by the code that raises the error).
unsafe impl Send for ErrorObj {}
// SAFETY: as for Send.
unsafe impl Sync for ErrorObj {}

// SAFETY: #[repr(C)] with the layout of TVMFFIErrorCell for ffi.Error.
unsafe impl ObjectType for ErrorObj {
    const TYPE_KEY: &'static str = "ffi.Error";
    fn type_index() -> i32 {
        type_index::ERROR
    }
}

/// Kiln's error object: the cell followed by the storage it points into.
#[repr(C)]
struct OwnedError {
    cell: ErrorObj,
    kind: Box<[u8]>,
    message: Box<[u8]>,
    backtrace: Vec<u8>,
}

impl Drop for OwnedError {
    fn drop(&mut self) {
        for handle in [self.cell.cause_chain, self.cell.extra_context] {
            if let Some(h) = NonNull::new(handle) {
                // SAFETY: the error owns one reference to its cause and context.
                unsafe { dec_ref(h) };
            }
        }
    }
}

/// Backtrace mode: replace the stored backtrace.
pub const BACKTRACE_REPLACE: i32 = 0;
/// Backtrace mode: append to the stored backtrace.
pub const BACKTRACE_APPEND: i32 = 1;

unsafe extern "C" fn update_backtrace(obj: *mut c_void, backtrace: *const ByteArray, mode: i32) {
    // SAFETY: this entry is only installed on Kiln's error objects, whose payload is an
    // OwnedError; the caller passes a valid byte array.
    let (owned, text) = unsafe {
        (
            &mut *((obj as *mut u8).add(std::mem::size_of::<ObjectHeader>()) as *mut OwnedError),
            (*backtrace).as_slice(),
        )
    };
    if mode == BACKTRACE_APPEND {
        owned.backtrace.extend_from_slice(text);
    } else {
        owned.backtrace = text.to_vec();
    }
    owned.cell.backtrace = ByteArray::from_slice(&owned.backtrace);
}

/// An error as a Rust value: a reference to an `ffi.Error` object (Kiln's or a foreign one).
#[derive(Clone, crate::ObjectRef)]
pub struct Error(ObjectRef<ErrorObj>);

/// Kiln's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Makes an error of the given kind (`"TypeError"`, `"ValueError"`, ...).
    ///
    /// The Rust backtrace is recorded when the environment sets `KILN_BACKTRACE=1` (resolving it
    /// costs milliseconds, too much for errors that callers catch and handle) and the crate's
    /// `backtrace` feature is on (the deployable runtime leaves it out).
    #[inline]
    pub fn new(kind: &str, message: impl Into<String>) -> Error {
        Error::new_string(kind, message.into())
    }

    /// [`new`](Self::new) without the generic argument (one copy for every message type).
    #[inline(never)]
    fn new_string(kind: &str, message: String) -> Error {
        #[cfg(feature = "backtrace")]
        {
            static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
            if *WANTED.get_or_init(|| std::env::var("KILN_BACKTRACE").is_ok_and(|v| v == "1")) {
                let bt = std::backtrace::Backtrace::force_capture().to_string();
                return Error::with_backtrace(kind, &message, &bt);
            }
        }
        Error::with_backtrace(kind, &message, "")
    }

    /// Makes an error with an explicit backtrace text.
    pub fn with_backtrace(kind: &str, message: &str, backtrace: &str) -> Error {
        let kind: Box<[u8]> = kind.as_bytes().into();
        let message: Box<[u8]> = message.as_bytes().into();
        let backtrace = backtrace.as_bytes().to_vec();
        let owned = OwnedError {
            cell: ErrorObj {
                kind: ByteArray::from_slice(&kind),
                message: ByteArray::from_slice(&message),
                backtrace: ByteArray::from_slice(&backtrace),
                update_backtrace: Some(update_backtrace),
                cause_chain: std::ptr::null_mut(),
                extra_context: std::ptr::null_mut(),
            },
            kind,
            message,
            backtrace,
        };
        Error(ObjectRef::new_with_index(type_index::ERROR, owned))
    }

    /// A `TypeError`.
    pub fn type_error(message: impl Into<String>) -> Error {
        Error::new("TypeError", message)
    }

    /// A `ValueError`.
    pub fn value_error(message: impl Into<String>) -> Error {
        Error::new("ValueError", message)
    }

    /// A `RuntimeError`.
    pub fn runtime_error(message: impl Into<String>) -> Error {
        Error::new("RuntimeError", message)
    }

    /// An `IndexError`.
    pub fn index_error(message: impl Into<String>) -> Error {
        Error::new("IndexError", message)
    }

    /// A `KeyError`.
    pub fn key_error(message: impl Into<String>) -> Error {
        Error::new("KeyError", message)
    }

    /// An `AttributeError`.
    pub fn attribute_error(message: impl Into<String>) -> Error {
        Error::new("AttributeError", message)
    }

    /// Wraps an existing error object.
    pub fn from_object(obj: ObjectRef<ErrorObj>) -> Error {
        Error(obj)
    }

    /// The underlying object.
    pub fn as_object(&self) -> &ObjectRef<ErrorObj> {
        &self.0
    }

    /// Gives up the object reference.
    pub fn into_object(self) -> ObjectRef<ErrorObj> {
        self.0
    }

    /// The error kind, e.g. `"ValueError"`.
    pub fn kind(&self) -> String {
        // SAFETY: the cell's byte arrays live as long as the object.
        String::from_utf8_lossy(unsafe { self.0.kind.as_slice() }).into_owned()
    }

    /// The message.
    pub fn message(&self) -> String {
        // SAFETY: as above.
        String::from_utf8_lossy(unsafe { self.0.message.as_slice() }).into_owned()
    }

    /// The backtrace text (may be empty).
    pub fn backtrace(&self) -> String {
        // SAFETY: as above.
        String::from_utf8_lossy(unsafe { self.0.backtrace.as_slice() }).into_owned()
    }

    /// A new error of the same kind whose message starts with `context`.
    #[inline]
    pub fn context(self, context: impl fmt::Display) -> Error {
        self.context_dyn(&context)
    }

    /// [`context`](Self::context) without the generic argument.
    #[inline(never)]
    fn context_dyn(self, context: &dyn fmt::Display) -> Error {
        Error::with_backtrace(
            &self.kind(),
            &format!("{context}: {}", self.message()),
            &self.backtrace(),
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind(), self.message())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl std::error::Error for Error {}

impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind() && self.message() == other.message()
    }
}

/// Builds an error of a given kind with `format!` arguments: `ffi_error!(ValueError, "bad {x}")`.
#[macro_export]
macro_rules! ffi_error {
    ($kind:ident, $($arg:tt)*) => {
        $crate::Error::new(stringify!($kind), format!($($arg)*))
    };
}

/// Returns early with an error: `bail!(TypeError, "expected {}", x)`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::ffi_error!($kind, $($arg)*))
    };
}

thread_local! {
    static RAISED: Cell<Option<NonNull<ObjectHeader>>> = const { Cell::new(None) };
}

/// Stores `err` in this thread's raised slot (replacing, and releasing, any earlier one).
pub fn set_raised(err: Error) {
    let new = err.into_object().upcast().into_raw();
    let old = RAISED.with(|slot| slot.replace(Some(new)));
    if let Some(old) = old {
        // SAFETY: the slot owned one reference.
        unsafe { dec_ref(old) };
    }
}

/// Stores a raw error object (whose reference the caller gives up) in the raised slot.
///
/// # Safety
/// `obj` must be a live object that owns one reference given to the slot.
pub unsafe fn set_raised_raw(obj: NonNull<ObjectHeader>) {
    let old = RAISED.with(|slot| slot.replace(Some(obj)));
    if let Some(old) = old {
        // SAFETY: the slot owned one reference to the error it held.
        unsafe { dec_ref(old) };
    }
}

/// Takes the raised error out of this thread's slot, if any.
pub fn take_raised_raw() -> Option<NonNull<ObjectHeader>> {
    RAISED.with(|slot| slot.take())
}

/// Takes the raised error as an [`Error`]; when a callee returned -1 without raising anything,
/// gives a `RuntimeError` that says so.
pub fn take_raised(context: &str) -> Error {
    match take_raised_raw() {
        Some(obj) => {
            // SAFETY: the slot held an owned reference; error objects always have the error
            // layout (non-error objects are wrapped below).
            let obj = unsafe { ObjectRef::<crate::object::Object>::from_raw(obj) };
            match obj.downcast::<ErrorObj>() {
                Ok(e) => Error(e),
                Err(other) => Error::runtime_error(format!(
                    "{context} raised a non-error object of type {}",
                    other.type_key()
                )),
            }
        }
        None => Error::runtime_error(format!("{context} failed without raising an error")),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Runs `f` for an `extern "C"` entry: 0 on success; -1 with the error (or the panic, as an
/// `InternalError`) stored in the raised slot. Nothing unwinds past this point.
#[inline]
pub fn ffi_guard<F: FnOnce() -> Result<()>>(f: F) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            set_raised(e);
            -1
        }
        Err(payload) => {
            set_raised(Error::new(
                "InternalError",
                format!("panic in Kiln: {}", panic_message(&*payload)),
            ));
            -1
        }
    }
}

/// Runs `f` where no error can be reported (functions returning `void`): a panic is caught and
/// stored in the raised slot.
#[inline]
pub fn ffi_guard_void<F: FnOnce()>(f: F) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        set_raised(Error::new(
            "InternalError",
            format!("panic in Kiln: {}", panic_message(&*payload)),
        ));
    }
}

/// Turns a caught panic payload into an error (for code that catches panics itself).
pub fn error_from_panic(payload: Box<dyn std::any::Any + Send>) -> Error {
    Error::new(
        "InternalError",
        format!("panic in Kiln: {}", panic_message(&*payload)),
    )
}
