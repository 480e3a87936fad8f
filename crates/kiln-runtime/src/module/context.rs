//! The context slots of a loaded library (ABI.md, "Compiled libraries"): pointer-sized variables
//! that the library defines and the loader fills with the runtime services its code calls.

use super::library::{DsoLibrary, TVMFFIEnvModLookupFromImports};
use crate::{thread_pool, workspace};
use kiln_ffi::c_api;

/// The eight slots and the functions the loader stores in them, in ABI order.
fn slots() -> [(&'static str, usize); 8] {
    [
        (
            "__TVMFFIFunctionCall",
            c_api::TVMFFIFunctionCall as *const () as usize,
        ),
        (
            "__TVMFFIErrorSetRaisedFromCStr",
            c_api::TVMFFIErrorSetRaisedFromCStr as *const () as usize,
        ),
        (
            "__TVMFFIEnvModLookupFromImports",
            TVMFFIEnvModLookupFromImports as *const () as usize,
        ),
        (
            "__TVMFFIHandleInitOnce",
            c_api::TVMFFIHandleInitOnce as *const () as usize,
        ),
        (
            "__TVMBackendAllocWorkspace",
            workspace::TVMBackendAllocWorkspace as *const () as usize,
        ),
        (
            "__TVMBackendFreeWorkspace",
            workspace::TVMBackendFreeWorkspace as *const () as usize,
        ),
        (
            "__TVMBackendParallelLaunch",
            thread_pool::TVMBackendParallelLaunch as *const () as usize,
        ),
        (
            "__TVMBackendParallelBarrier",
            thread_pool::TVMBackendParallelBarrier as *const () as usize,
        ),
    ]
}

/// Fills every context slot that `lib` defines.
pub(crate) fn fill_context_slots(lib: &DsoLibrary) {
    for (name, value) in slots() {
        let slot = lib.symbol(name) as *mut usize;
        if !slot.is_null() {
            // SAFETY: a context slot is a pointer-sized writable global of the library.
            unsafe { slot.write_volatile(value) };
        }
    }
}

/// The names of the context slots, in ABI order.
pub fn context_slot_names() -> [&'static str; 8] {
    slots().map(|(n, _)| n)
}
