//! The part of the OpenCL 1.2 C API that Kiln calls, loaded at run time from the ICD loader
//! (`libOpenCL.so.1`) with `dlopen`, so that a build needs no OpenCL SDK and a machine without a
//! driver fails only when it asks for an OpenCL device.
//!
//! Written out here rather than taken from the `cl3` crate (whose dynamic loader resolves the
//! whole OpenCL 3.0 API): with `cl3` the stripped deploy runtime grew by 75,120 bytes
//! (560,656 -> 635,776, over its 600 KB budget); this table of 23 entry points costs a
//! fraction of that.

use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

/// `cl_int`: an OpenCL status code (0 is success).
pub type ClInt = i32;
/// Any OpenCL object handle (`cl_platform_id`, `cl_device_id`, `cl_context`, `cl_mem`, ...).
pub type Handle = *mut c_void;

/// `CL_DEVICE_TYPE_ALL`.
pub const DEVICE_TYPE_ALL: u64 = 0xFFFF_FFFF;
/// `CL_PLATFORM_NAME`.
pub const PLATFORM_NAME: u32 = 0x0902;
/// `CL_DEVICE_MAX_COMPUTE_UNITS`.
pub const DEVICE_MAX_COMPUTE_UNITS: u32 = 0x1002;
/// `CL_DEVICE_MAX_WORK_GROUP_SIZE`.
pub const DEVICE_MAX_WORK_GROUP_SIZE: u32 = 0x1004;
/// `CL_DEVICE_MAX_WORK_ITEM_SIZES`.
pub const DEVICE_MAX_WORK_ITEM_SIZES: u32 = 0x1005;
/// `CL_DEVICE_MAX_CLOCK_FREQUENCY`.
pub const DEVICE_MAX_CLOCK_FREQUENCY: u32 = 0x100C;
/// `CL_DEVICE_GLOBAL_MEM_SIZE`.
pub const DEVICE_GLOBAL_MEM_SIZE: u32 = 0x101F;
/// `CL_DEVICE_LOCAL_MEM_SIZE`.
pub const DEVICE_LOCAL_MEM_SIZE: u32 = 0x1023;
/// `CL_DEVICE_NAME`.
pub const DEVICE_NAME: u32 = 0x102B;
/// `CL_DRIVER_VERSION`.
pub const DRIVER_VERSION: u32 = 0x102D;
/// `CL_DEVICE_VERSION`.
pub const DEVICE_VERSION: u32 = 0x102F;
/// `CL_DEVICE_IMAGE_PITCH_ALIGNMENT`.
pub const DEVICE_IMAGE_PITCH_ALIGNMENT: u32 = 0x104A;
/// `CL_MEM_READ_WRITE`.
pub const MEM_READ_WRITE: u64 = 1;
/// `CL_PROGRAM_BINARY_SIZES`.
pub const PROGRAM_BINARY_SIZES: u32 = 0x1165;
/// `CL_PROGRAM_BINARIES`.
pub const PROGRAM_BINARIES: u32 = 0x1166;
/// `CL_PROGRAM_BUILD_LOG`.
pub const PROGRAM_BUILD_LOG: u32 = 0x1183;
/// `CL_TRUE` (a blocking read or write).
pub const TRUE: u32 = 1;

macro_rules! api_table {
    ($($name:ident: fn($($arg:ty),* $(,)?) -> $ret:ty;)*) => {
        /// The entry points, resolved once from the ICD loader.
        #[allow(non_snake_case)]
        pub struct Api {
            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                pub $name: unsafe extern "C" fn($($arg),*) -> $ret,
            )*
        }

        /// Resolves every entry point of the table in `lib`, or names the first one missing.
        ///
        /// # Safety
        /// `lib` must be a live `dlopen` handle of an OpenCL ICD loader, whose symbols have
        /// the OpenCL 1.2 signatures written in the table.
        unsafe fn resolve(lib: *mut c_void) -> Result<Api, String> {
            Ok(Api {
                $($name: {
                    let symbol = concat!(stringify!($name), "\0");
                    // SAFETY: `lib` is live (this function's contract); the name is
                    // NUL-terminated.
                    let p = unsafe { libc::dlsym(lib, symbol.as_ptr() as *const c_char) };
                    if p.is_null() {
                        return Err(format!("the OpenCL library has no `{}`", stringify!($name)));
                    }
                    // SAFETY: the symbol is the OpenCL function of that name, whose C
                    // signature the table states.
                    unsafe {
                        std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> $ret>(p)
                    }
                },)*
            })
        }
    };
}

api_table! {
    clGetPlatformIDs: fn(u32, *mut Handle, *mut u32) -> ClInt;
    clGetPlatformInfo: fn(Handle, u32, usize, *mut c_void, *mut usize) -> ClInt;
    clGetDeviceIDs: fn(Handle, u64, u32, *mut Handle, *mut u32) -> ClInt;
    clGetDeviceInfo: fn(Handle, u32, usize, *mut c_void, *mut usize) -> ClInt;
    clCreateContext: fn(*const isize, u32, *const Handle, *const c_void, *mut c_void, *mut ClInt) -> Handle;
    clCreateCommandQueue: fn(Handle, Handle, u64, *mut ClInt) -> Handle;
    clReleaseCommandQueue: fn(Handle) -> ClInt;
    clCreateBuffer: fn(Handle, u64, usize, *mut c_void, *mut ClInt) -> Handle;
    clReleaseMemObject: fn(Handle) -> ClInt;
    clEnqueueReadBuffer: fn(Handle, Handle, u32, usize, usize, *mut c_void, u32, *const Handle, *mut Handle) -> ClInt;
    clEnqueueWriteBuffer: fn(Handle, Handle, u32, usize, usize, *const c_void, u32, *const Handle, *mut Handle) -> ClInt;
    clEnqueueCopyBuffer: fn(Handle, Handle, Handle, usize, usize, usize, u32, *const Handle, *mut Handle) -> ClInt;
    clFinish: fn(Handle) -> ClInt;
    clCreateProgramWithSource: fn(Handle, u32, *const *const c_char, *const usize, *mut ClInt) -> Handle;
    clCreateProgramWithBinary: fn(Handle, u32, *const Handle, *const usize, *const *const u8, *mut ClInt, *mut ClInt) -> Handle;
    clGetProgramInfo: fn(Handle, u32, usize, *mut c_void, *mut usize) -> ClInt;
    clBuildProgram: fn(Handle, u32, *const Handle, *const c_char, *const c_void, *mut c_void) -> ClInt;
    clGetProgramBuildInfo: fn(Handle, Handle, u32, usize, *mut c_void, *mut usize) -> ClInt;
    clReleaseProgram: fn(Handle) -> ClInt;
    clCreateKernel: fn(Handle, *const c_char, *mut ClInt) -> Handle;
    clReleaseKernel: fn(Handle) -> ClInt;
    clSetKernelArg: fn(Handle, u32, usize, *const c_void) -> ClInt;
    clEnqueueNDRangeKernel: fn(Handle, Handle, u32, *const usize, *const usize, *const usize, u32, *const Handle, *mut Handle) -> ClInt;
}

/// The OpenCL API, loaded on first use; the error says why it is not there.
pub fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(|| {
        let mut errors = Vec::new();
        for name in [c"libOpenCL.so.1", c"libOpenCL.so"] {
            // SAFETY: a NUL-terminated library name; the handle is kept for the process.
            let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            if lib.is_null() {
                // SAFETY: dlerror returns NULL or a NUL-terminated message.
                let why = unsafe { libc::dlerror() };
                errors.push(if why.is_null() {
                    format!("{}: not found", name.to_string_lossy())
                } else {
                    // SAFETY: as above, non-NULL.
                    unsafe { CStr::from_ptr(why) }
                        .to_string_lossy()
                        .into_owned()
                });
                continue;
            }
            // SAFETY: `lib` is a live handle of a library named as the ICD loader.
            return unsafe { resolve(lib) };
        }
        Err(errors.join("; "))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The name of an OpenCL status code (`CL_OUT_OF_RESOURCES`), or `unknown`.
pub fn status_name(code: ClInt) -> &'static str {
    match code {
        0 => "CL_SUCCESS",
        -1 => "CL_DEVICE_NOT_FOUND",
        -2 => "CL_DEVICE_NOT_AVAILABLE",
        -3 => "CL_COMPILER_NOT_AVAILABLE",
        -4 => "CL_MEM_OBJECT_ALLOCATION_FAILURE",
        -5 => "CL_OUT_OF_RESOURCES",
        -6 => "CL_OUT_OF_HOST_MEMORY",
        -11 => "CL_BUILD_PROGRAM_FAILURE",
        -30 => "CL_INVALID_VALUE",
        -33 => "CL_INVALID_DEVICE",
        -34 => "CL_INVALID_CONTEXT",
        -36 => "CL_INVALID_COMMAND_QUEUE",
        -38 => "CL_INVALID_MEM_OBJECT",
        -44 => "CL_INVALID_PROGRAM",
        -45 => "CL_INVALID_PROGRAM_EXECUTABLE",
        -46 => "CL_INVALID_KERNEL_NAME",
        -48 => "CL_INVALID_KERNEL",
        -49 => "CL_INVALID_ARG_INDEX",
        -50 => "CL_INVALID_ARG_VALUE",
        -51 => "CL_INVALID_ARG_SIZE",
        -52 => "CL_INVALID_KERNEL_ARGS",
        -53 => "CL_INVALID_WORK_DIMENSION",
        -54 => "CL_INVALID_WORK_GROUP_SIZE",
        -55 => "CL_INVALID_WORK_ITEM_SIZE",
        -61 => "CL_INVALID_BUFFER_SIZE",
        -63 => "CL_INVALID_GLOBAL_WORK_SIZE",
        -1001 => "CL_PLATFORM_NOT_FOUND_KHR",
        _ => "unknown status",
    }
}
