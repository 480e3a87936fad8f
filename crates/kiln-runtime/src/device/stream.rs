//! The current stream of each device for this thread (TVM-FFI's `TVMFFIEnvSetStream` /
//! `TVMFFIEnvGetStream`): work that a device API queues for a device without being given a
//! stream (kernel launches, copies) goes to the current stream, NULL meaning the device's
//! default stream. Kiln never creates or frees streams here: see [`super::DeviceApi`].

use super::StreamHandle;
use kiln_ffi::error::ffi_guard;
use kiln_ffi::Error;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::os::raw::c_int;

thread_local! {
    static CURRENT: RefCell<HashMap<(i32, i32), usize>> = RefCell::new(HashMap::new());
}

/// Makes `stream` the current stream of `(device_type, device_id)` on this thread and returns
/// the one it replaces (NULL: the default stream).
pub fn set_current_stream(device_type: i32, device_id: i32, stream: StreamHandle) -> StreamHandle {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        let old = if stream.is_null() {
            c.remove(&(device_type, device_id))
        } else {
            c.insert((device_type, device_id), stream as usize)
        };
        old.unwrap_or(0) as StreamHandle
    })
}

/// The current stream of `(device_type, device_id)` on this thread (NULL: the default).
pub fn current_stream(device_type: i32, device_id: i32) -> StreamHandle {
    CURRENT.with(|c| {
        c.borrow()
            .get(&(device_type, device_id))
            .copied()
            .unwrap_or(0) as StreamHandle
    })
}

/// `TVMFFIEnvSetStream`: sets this thread's current stream of a device, writing the previous
/// one to `opt_out_original_stream` when it is not NULL.
///
/// # Safety
/// `opt_out_original_stream` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvSetStream(
    device_type: i32,
    device_id: i32,
    stream: *mut c_void,
    opt_out_original_stream: *mut *mut c_void,
) -> c_int {
    ffi_guard(|| {
        if device_type < 0 || device_id < 0 {
            return Err(Error::value_error(format!(
                "TVMFFIEnvSetStream: no device {device_type}:{device_id}"
            )));
        }
        let old = set_current_stream(device_type, device_id, stream);
        if !opt_out_original_stream.is_null() {
            // SAFETY: non-NULL, and the caller's to write.
            unsafe { *opt_out_original_stream = old };
        }
        Ok(())
    })
}

/// `TVMFFIEnvGetStream`: this thread's current stream of a device (NULL: the default).
#[no_mangle]
pub extern "C" fn TVMFFIEnvGetStream(device_type: i32, device_id: i32) -> *mut c_void {
    current_stream(device_type, device_id)
}
