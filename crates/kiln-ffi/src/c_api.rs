//! The exported C ABI: TVM-FFI's functions under their TVM-FFI names and signatures, so that a C
//! program written against `tvm/ffi/c_api.h`, or a library compiled by Apache TVM, works with
//! Kiln. Every entry catches panics; nothing unwinds into C.
//!
//! Safety contract of every function here: pointer arguments are NULL or valid as the TVM-FFI
//! header describes them (NULL where not allowed gives an error, never a crash).
#![allow(clippy::missing_safety_doc)]

use crate::abi::{ByteArray, DLDataType, ObjectHeader, RawAny, SafeCall, Version, FFI_VERSION};
use crate::any::{Any, AnyView};
use crate::dtype::DataType;
use crate::error::{
    ffi_guard, ffi_guard_void, set_raised, set_raised_raw, take_raised_raw, Error, Result,
};
use crate::function::Function;
use crate::object::{dec_ref, inc_ref, ObjectRef, ObjectType};
use crate::registry;
use crate::sync::RecoverPoison;
use crate::type_registry::{self, TypeInfoC};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

fn null_arg(name: &str) -> Error {
    Error::value_error(format!("argument `{name}` is NULL"))
}

/// Reads a byte array argument as text.
///
/// # Safety
/// `p` must be NULL or point to a valid byte array.
unsafe fn text_arg<'a>(p: *const ByteArray, name: &str) -> Result<&'a str> {
    // SAFETY: the caller guarantees `p` is NULL or points to a valid byte array.
    let arr = unsafe { p.as_ref() }.ok_or_else(|| null_arg(name))?;
    // SAFETY: a valid byte array points to `size` readable bytes, alive for the call.
    std::str::from_utf8(unsafe { arr.as_slice() })
        .map_err(|_| Error::value_error(format!("argument `{name}` is not UTF-8")))
}

unsafe fn cstr_lossy(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: `p` is non-null, and callers pass a NUL-terminated C string from the C side.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// Writes the ABI version.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIGetVersion(out: *mut Version) {
    // SAFETY: `out` is NULL or points to a writable `TVMFFIVersion`, per this module's contract.
    if let Some(out) = unsafe { out.as_mut() } {
        *out = Version {
            major: FFI_VERSION.0,
            minor: FFI_VERSION.1,
            patch: FFI_VERSION.2,
        };
    }
}

/// Adds a strong reference to an object.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectIncRef(obj: *mut c_void) -> c_int {
    match NonNull::new(obj as *mut ObjectHeader) {
        Some(o) => {
            // SAFETY: a non-null `obj` is a live object handle on which the caller holds a
            // reference, so the header is valid to update.
            unsafe { inc_ref(o) };
            0
        }
        None => ffi_guard(|| Err(null_arg("obj"))),
    }
}

/// Drops a strong reference to an object (NULL is ignored).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectDecRef(obj: *mut c_void) -> c_int {
    if let Some(o) = NonNull::new(obj as *mut ObjectHeader) {
        ffi_guard(|| {
            // SAFETY: a non-null `obj` is a live object whose strong reference the caller gives
            // up here.
            unsafe { dec_ref(o) };
            Ok(())
        })
    } else {
        0
    }
}

/// An opaque object that wraps a foreign handle (a Python object, say) and its deleter.
#[repr(C)]
struct OpaqueObj {
    handle: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}
// SAFETY: the handle is owned by the object and only handed to its deleter once, on drop; the
// creator that passes a handle to TVM-FFI vouches that it may be released from any thread (Python
// handles take the GIL in their deleter).
unsafe impl Send for OpaqueObj {}
// SAFETY: Kiln never reads or writes through the handle; shared access only copies the pointer.
unsafe impl Sync for OpaqueObj {}
impl Drop for OpaqueObj {
    fn drop(&mut self) {
        if let Some(d) = self.deleter {
            // SAFETY: the creator handed over the handle with its deleter.
            unsafe { d(self.handle) }
        }
    }
}
// SAFETY: `OpaqueObj` is `repr(C)` and starts with the handle, as TVM-FFI's opaque object cell
// does (`void* handle` right after the header); `OPAQUE_PY_OBJECT` is the type it reports.
unsafe impl ObjectType for OpaqueObj {
    const TYPE_KEY: &'static str = "ffi.OpaquePyObject";
    fn type_index() -> i32 {
        crate::abi::type_index::OPAQUE_PY_OBJECT
    }
}

/// Wraps a foreign handle in an object of the given type index.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectCreateOpaque(
    handle: *mut c_void,
    type_index: i32,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut *mut c_void,
) -> c_int {
    ffi_guard(|| {
        // SAFETY: `out` is NULL or valid for writes, per this module's contract; NULL is an error.
        let out = unsafe { out.as_mut() }.ok_or_else(|| null_arg("out"))?;
        let obj: ObjectRef<OpaqueObj> =
            ObjectRef::new_with_index(type_index, OpaqueObj { handle, deleter });
        *out = obj.into_raw().as_ptr() as *mut c_void;
        Ok(())
    })
}

/// Looks up a type index by key.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeKeyToIndex(type_key: *const ByteArray, out: *mut i32) -> c_int {
    ffi_guard(|| {
        // SAFETY: `type_key` is NULL or a valid byte array, per this module's contract.
        let key = unsafe { text_arg(type_key, "type_key") }?;
        // SAFETY: `out` is NULL or valid for writes, per this module's contract; NULL is an error.
        let out = unsafe { out.as_mut() }.ok_or_else(|| null_arg("out"))?;
        *out = type_registry::index_of_key(key)
            .ok_or_else(|| Error::key_error(format!("unknown type key `{key}`")))?;
        Ok(())
    })
}

/// Registers a type at run time, or returns the index of a known key.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeGetOrAllocIndex(
    type_key: *const ByteArray,
    _static_type_index: i32,
    _type_depth: i32,
    _num_child_slots: i32,
    _child_slots_can_overflow: i32,
    parent_type_index: i32,
) -> i32 {
    let mut index = -1;
    let rc = ffi_guard(|| {
        // SAFETY: `type_key` is NULL or a valid byte array, per this module's contract.
        let key = unsafe { text_arg(type_key, "type_key") }?;
        index = type_registry::get_or_alloc_index(key, parent_type_index)?;
        Ok(())
    });
    if rc == 0 {
        index
    } else {
        -1
    }
}

/// The registered information of a type (key, ancestors, reflected fields), or NULL.
#[no_mangle]
pub extern "C" fn TVMFFIGetTypeInfo(type_index: i32) -> *const TypeInfoC {
    let mut out = std::ptr::null();
    ffi_guard_void(|| {
        if let Some(e) = type_registry::entry(type_index) {
            out = &e.c_info as *const TypeInfoC;
        }
    });
    out
}

/// Makes a function object from a C callback, its context and the context's deleter.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionCreate(
    context: *mut c_void,
    safe_call: Option<SafeCall>,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut *mut c_void,
) -> c_int {
    ffi_guard(|| {
        // SAFETY: `out` is NULL or valid for writes, per this module's contract; NULL is an error.
        let out = unsafe { out.as_mut() }.ok_or_else(|| null_arg("out"))?;
        let call = safe_call.ok_or_else(|| null_arg("safe_call"))?;
        // SAFETY: the C caller supplies a callback that follows the safe-call convention and a
        // context that stays valid until its deleter runs, as TVMFFIFunctionCreate requires.
        let func = unsafe { Function::from_c(context, call, deleter) };
        *out = func.0.into_raw().as_ptr() as *mut c_void;
        Ok(())
    })
}

/// Looks up a global function; `*out` is NULL when the name is not registered.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionGetGlobal(
    name: *const ByteArray,
    out: *mut *mut c_void,
) -> c_int {
    ffi_guard(|| {
        // SAFETY: `name` is NULL or a valid byte array, per this module's contract.
        let name = unsafe { text_arg(name, "name") }?;
        // SAFETY: `out` is NULL or valid for writes, per this module's contract; NULL is an error.
        let out = unsafe { out.as_mut() }.ok_or_else(|| null_arg("out"))?;
        *out = match registry::get(name) {
            Some(f) => f.0.into_raw().as_ptr() as *mut c_void,
            None => std::ptr::null_mut(),
        };
        Ok(())
    })
}

/// Registers a function object under a global name.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionSetGlobal(
    name: *const ByteArray,
    f: *mut c_void,
    allow_override: c_int,
) -> c_int {
    ffi_guard(|| {
        // SAFETY: `name` is NULL or a valid byte array, per this module's contract.
        let name = unsafe { text_arg(name, "name") }?;
        let obj = NonNull::new(f as *mut ObjectHeader).ok_or_else(|| null_arg("f"))?;
        // SAFETY: a non-null `f` is a live object handle borrowed from the caller; every object
        // extends the base `Object` layout, and we take our own reference.
        let obj = unsafe { ObjectRef::<crate::object::Object>::from_borrowed(obj) };
        let func = obj
            .downcast::<crate::function::FunctionObj>()
            .map_err(|o| {
                Error::type_error(format!(
                    "TVMFFIFunctionSetGlobal(`{name}`) expects an ffi.Function, got `{}`",
                    o.type_key()
                ))
            })?;
        registry::register(name, Function(func), allow_override != 0)
    })
}

/// Calls a function object. `result` must be None on entry.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionCall(
    func: *mut c_void,
    args: *mut RawAny,
    num_args: i32,
    result: *mut RawAny,
) -> c_int {
    if func.is_null() {
        return ffi_guard(|| Err(null_arg("func")));
    }
    // SAFETY: a non-null `func` is a live function object, per this module's contract; a function
    // object starts with the header, then the safe-call entry.
    let cell = unsafe {
        &*((func as *const u8).add(std::mem::size_of::<ObjectHeader>())
            as *const crate::function::FunctionObj)
    };
    // SAFETY: `safe_call` follows the safe-call convention; `args`/`num_args` and `result` come
    // from the caller, who must make them valid as TVMFFIFunctionCall requires.
    unsafe { (cell.safe_call)(func, args, num_args, result) }
}

/// Copies a borrowed value into an owned one (objects gain a reference, C strings are copied).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIAnyViewToOwnedAny(
    any_view: *const RawAny,
    out: *mut RawAny,
) -> c_int {
    ffi_guard(|| {
        // SAFETY: `any_view` is NULL or points to a valid value whose referents the caller keeps
        // alive during the call; the view does not outlive this closure.
        let view =
            unsafe { AnyView::from_raw(*any_view.as_ref().ok_or_else(|| null_arg("any_view"))?) };
        // SAFETY: `out` is NULL or valid for writes, per this module's contract; NULL is an error.
        *unsafe { out.as_mut() }.ok_or_else(|| null_arg("out"))? = view.to_owned().into_raw();
        Ok(())
    })
}

/// Makes a string value (small when at most 7 bytes) from bytes.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIStringFromByteArray(
    input: *const ByteArray,
    out: *mut RawAny,
) -> c_int {
    ffi_guard(|| {
        // SAFETY: `input` is NULL or a valid byte array whose bytes live through the call; they
        // are copied before returning.
        let bytes = unsafe { input.as_ref().ok_or_else(|| null_arg("input"))?.as_slice() };
        // SAFETY: `out` is NULL or valid for writes, per this module's contract; NULL is an error.
        *unsafe { out.as_mut() }.ok_or_else(|| null_arg("out"))? =
            Any::from_str_bytes(bytes).into_raw();
        Ok(())
    })
}

/// Makes a bytes value (small when at most 7 bytes) from bytes.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBytesFromByteArray(
    input: *const ByteArray,
    out: *mut RawAny,
) -> c_int {
    ffi_guard(|| {
        // SAFETY: `input` is NULL or a valid byte array whose bytes live through the call; they
        // are copied before returning.
        let bytes = unsafe { input.as_ref().ok_or_else(|| null_arg("input"))?.as_slice() };
        // SAFETY: `out` is NULL or valid for writes, per this module's contract; NULL is an error.
        *unsafe { out.as_mut() }.ok_or_else(|| null_arg("out"))? =
            Any::from_bytes_slice(bytes).into_raw();
        Ok(())
    })
}

/// Parses a data type.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIDataTypeFromString(
    s: *const ByteArray,
    out: *mut DLDataType,
) -> c_int {
    ffi_guard(|| {
        // SAFETY: `s` is NULL or a valid byte array, per this module's contract.
        let dt: DataType = unsafe { text_arg(s, "str") }?.parse()?;
        // SAFETY: `out` is NULL or valid for writes, per this module's contract; NULL is an error.
        *unsafe { out.as_mut() }.ok_or_else(|| null_arg("out"))? = dt.0;
        Ok(())
    })
}

/// Prints a data type into an `ffi.String` object (always an object, even when short: the caller
/// releases it with `TVMFFIObjectDecRef`, as TVM-FFI documents).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIDataTypeToString(
    dtype: *const DLDataType,
    out: *mut RawAny,
) -> c_int {
    ffi_guard(|| {
        // SAFETY: `dtype` is NULL or points to a readable `DLDataType`, per this module's contract.
        let dt = DataType(*unsafe { dtype.as_ref() }.ok_or_else(|| null_arg("dtype"))?);
        // SAFETY: `out` is NULL or valid for writes, per this module's contract; NULL is an error.
        *unsafe { out.as_mut() }.ok_or_else(|| null_arg("out"))? =
            Any::from(crate::Str::new(&dt.to_string())).into_raw();
        Ok(())
    })
}

/// Makes an error object.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorCreate(
    kind: *const ByteArray,
    message: *const ByteArray,
    backtrace: *const ByteArray,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: the pointers are passed on unchanged under the same contract, and NULL cause chain
    // and extra context are allowed.
    unsafe {
        TVMFFIErrorCreateWithCauseAndExtraContext(
            kind,
            message,
            backtrace,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            out,
        )
    }
}

/// Makes an error object with a cause chain and extra context (both optional, borrowed).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorCreateWithCauseAndExtraContext(
    kind: *const ByteArray,
    message: *const ByteArray,
    backtrace: *const ByteArray,
    cause_chain: *mut c_void,
    extra_context: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    ffi_guard(|| {
        let read = |p: *const ByteArray| {
            // SAFETY: each text argument is NULL or a valid byte array, per this module's contract;
            // its bytes are copied at once.
            unsafe { p.as_ref() }
                // SAFETY: as above, a valid byte array points to `size` readable bytes.
                .map(|a| String::from_utf8_lossy(unsafe { a.as_slice() }).into_owned())
                .unwrap_or_default()
        };
        let err = Error::with_backtrace(&read(kind), &read(message), &read(backtrace));
        let cell = err.as_object().payload_ptr();
        for (slot, handle) in [
            // SAFETY: `cell` is the payload of the error object just made, which nothing else
            // references yet; the two borrows are of distinct fields.
            (unsafe { &mut (*cell).cause_chain }, cause_chain),
            // SAFETY: as above.
            (unsafe { &mut (*cell).extra_context }, extra_context),
        ] {
            if let Some(h) = NonNull::new(handle as *mut ObjectHeader) {
                // SAFETY: a non-null cause chain or extra context is a live object borrowed from
                // the caller; the error keeps its own reference.
                unsafe { inc_ref(h) };
                *slot = h.as_ptr();
            }
        }
        // SAFETY: `out` is NULL or valid for writes, per this module's contract; NULL is an error.
        *unsafe { out.as_mut() }.ok_or_else(|| null_arg("out"))? =
            err.into_object().into_raw().as_ptr() as *mut c_void;
        Ok(())
    })
}

/// Stores an error object in this thread's raised slot (the slot takes its own reference).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaised(error: *mut c_void) {
    if let Some(e) = NonNull::new(error as *mut ObjectHeader) {
        // SAFETY: a non-null `error` is a live error object borrowed from the caller; the new
        // reference taken here is the one handed to the raised slot.
        unsafe {
            inc_ref(e);
            set_raised_raw(e);
        }
    }
}

/// Raises an error made from a kind and a message.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStr(kind: *const c_char, message: *const c_char) {
    ffi_guard_void(|| {
        // SAFETY: `kind` and `message` are NULL or NUL-terminated C strings, per the contract.
        let (kind, message) = unsafe { (cstr_lossy(kind), cstr_lossy(message)) };
        set_raised(Error::new(&kind, message))
    });
}

/// Raises an error whose message is the concatenation of `num_parts` C strings (NULL parts are
/// skipped). Code compiled by Apache TVM calls this on its error paths.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStrParts(
    kind: *const c_char,
    parts: *const *const c_char,
    num_parts: i32,
) {
    ffi_guard_void(|| {
        let mut message = String::new();
        if !parts.is_null() {
            for i in 0..num_parts.max(0) as usize {
                // SAFETY: a non-null `parts` holds `num_parts` entries, each NULL or a
                // NUL-terminated C string.
                message.push_str(&unsafe { cstr_lossy(*parts.add(i)) });
            }
        }
        // SAFETY: `kind` is NULL or a NUL-terminated C string, per this module's contract.
        set_raised(Error::new(&unsafe { cstr_lossy(kind) }, message));
    });
}

/// Moves the raised error (or NULL) out of this thread's slot.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorMoveFromRaised(result: *mut *mut c_void) {
    let taken = take_raised_raw()
        .map(|p| p.as_ptr() as *mut c_void)
        .unwrap_or(std::ptr::null_mut());
    // SAFETY: `result` is NULL or valid for writes, per this module's contract.
    match unsafe { result.as_mut() } {
        Some(out) => *out = taken,
        None => {
            if let Some(p) = NonNull::new(taken as *mut ObjectHeader) {
                // SAFETY: the raised slot gave us its strong reference to this live error, and
                // with nowhere to store it we drop it.
                unsafe { dec_ref(p) };
            }
        }
    }
}

static EMPTY_BACKTRACE: ByteArray = ByteArray {
    data: c"".as_ptr(),
    size: 0,
};

/// The backtrace at the call site. Kiln records backtraces in error messages instead, so this is
/// always empty.
#[no_mangle]
pub extern "C" fn TVMFFIBacktrace(
    _filename: *const c_char,
    _lineno: c_int,
    _func: *const c_char,
    _cross: c_int,
) -> *const ByteArray {
    &EMPTY_BACKTRACE
}

static INIT_ONCE_LOCK: Mutex<()> = Mutex::new(());

/// Runs `init` once to fill `*handle` (thread-safe); later calls see the stored handle.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIHandleInitOnce(
    handle: *mut *mut c_void,
    init: Option<unsafe extern "C" fn(*mut *mut c_void) -> c_int>,
) -> c_int {
    if handle.is_null() {
        return ffi_guard(|| Err(null_arg("handle_addr")));
    }
    // SAFETY: a non-null `handle` points to a pointer-sized, aligned slot that lives as long as
    // the caller uses it (a static in practice); other threads access it the same way, atomically.
    let slot = unsafe { &*(handle as *const AtomicPtr<c_void>) };
    if !slot.load(Ordering::Acquire).is_null() {
        return 0;
    }
    let _guard = INIT_ONCE_LOCK.lock().recover();
    if !slot.load(Ordering::Acquire).is_null() {
        return 0;
    }
    let Some(init) = init else {
        return ffi_guard(|| Err(null_arg("init_func")));
    };
    let mut result: *mut c_void = std::ptr::null_mut();
    // SAFETY: `init` is the caller's C initializer; it gets a valid pointer to a local slot.
    let rc = unsafe { init(&mut result) };
    if rc != 0 {
        return rc;
    }
    if result.is_null() {
        return ffi_guard(|| {
            Err(Error::runtime_error(
                "TVMFFIHandleInitOnce: init_func returned a NULL handle",
            ))
        });
    }
    slot.store(result, Ordering::Release);
    0
}

/// Runs `deinit` on `*handle` once and clears it (thread-safe).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIHandleDeinitOnce(
    handle: *mut *mut c_void,
    deinit: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
) -> c_int {
    if handle.is_null() {
        return ffi_guard(|| Err(null_arg("handle_addr")));
    }
    // SAFETY: a non-null `handle` points to a pointer-sized, aligned slot that lives as long as
    // the caller uses it; other threads access it the same way, atomically.
    let slot = unsafe { &*(handle as *const AtomicPtr<c_void>) };
    let _guard = INIT_ONCE_LOCK.lock().recover();
    let current = slot.load(Ordering::Acquire);
    if current.is_null() {
        return 0;
    }
    if let Some(deinit) = deinit {
        // SAFETY: `deinit` is the caller's C finalizer and `current` is the handle its `init`
        // stored; the lock keeps it from running twice.
        let rc = unsafe { deinit(current) };
        if rc != 0 {
            return rc;
        }
    }
    slot.store(std::ptr::null_mut(), Ordering::Release);
    0
}
