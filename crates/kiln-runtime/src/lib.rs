//! Kiln's runtime: the deployable half of Kiln. Built as `libkiln_runtime.so`, it exports the
//! TVM-FFI C ABI (from [`kiln_ffi`]) and registers the runtime's global functions.

pub use kiln_ffi as ffi;

/// Makes sure the FFI core (and its start-up registrations) is linked into this library.
#[doc(hidden)]
pub fn link_ffi() -> *const () {
    kiln_ffi::c_api::TVMFFIGetVersion as *const ()
}
