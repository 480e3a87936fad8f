//! Kiln's runtime: the deployable half of Kiln (seeds 000-002). Built as `libkiln_runtime.so`, it
//! exports the TVM-FFI C ABI (from [`kiln_ffi`]) plus the backend functions that compiled code
//! calls, and holds tensors, devices, the workspace allocator, the thread pool and modules.

pub use kiln_ffi as ffi;

pub mod cpu;
pub mod device;
pub mod executor;
pub mod graph_executor;
pub mod module;
pub mod opencl;
pub mod tensor;
pub mod thread_pool;
pub mod time_evaluator;
pub mod toolchain;
#[cfg(feature = "vm")]
pub mod vm;
pub mod workspace;

/// Makes sure the FFI core and the runtime parts that are reached only through their start-up
/// registrations (the OpenCL module loader and device API) are linked into the library or
/// executable that calls it.
#[doc(hidden)]
pub fn link_ffi() -> *const () {
    std::hint::black_box(opencl::OpenClModule::load_from_bytes as *const ());
    #[cfg(feature = "opencl")]
    std::hint::black_box(&opencl::device::OPENCL as *const opencl::device::OpenClDeviceApi);
    kiln_ffi::c_api::TVMFFIGetVersion as *const ()
}
