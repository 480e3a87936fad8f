//! A minimal OpenCL host for tests, through the system's `libOpenCL.so.1` loaded at run time:
//! build a program (`clBuildProgram`, with its log on failure) and launch one of its kernels
//! over float buffers and int scalars, reading the buffers back.

#![allow(dead_code)]

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;
use std::sync::Mutex;

/// Serializes the tests' use of the driver (tests of one binary run in parallel threads).
static DRIVER: Mutex<()> = Mutex::new(());

const RTLD_NOW: i32 = 2;
const CL_DEVICE_TYPE_ALL: u64 = 0xFFFF_FFFF;
const CL_PROGRAM_BUILD_LOG: u32 = 0x1183;

extern "C" {
    fn dlopen(filename: *const c_char, flag: i32) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

type GetPlatformIds = unsafe extern "C" fn(u32, *mut *mut c_void, *mut u32) -> i32;
type GetDeviceIds = unsafe extern "C" fn(*mut c_void, u64, u32, *mut *mut c_void, *mut u32) -> i32;
type CreateContext = unsafe extern "C" fn(
    *const isize,
    u32,
    *const *mut c_void,
    *const c_void,
    *mut c_void,
    *mut i32,
) -> *mut c_void;
type CreateProgram = unsafe extern "C" fn(
    *mut c_void,
    u32,
    *const *const c_char,
    *const usize,
    *mut i32,
) -> *mut c_void;
type BuildProgram = unsafe extern "C" fn(
    *mut c_void,
    u32,
    *const *mut c_void,
    *const c_char,
    *const c_void,
    *mut c_void,
) -> i32;
type BuildInfo =
    unsafe extern "C" fn(*mut c_void, *mut c_void, u32, usize, *mut c_void, *mut usize) -> i32;
type Release = unsafe extern "C" fn(*mut c_void) -> i32;
type CreateQueue = unsafe extern "C" fn(*mut c_void, *mut c_void, u64, *mut i32) -> *mut c_void;
type CreateBuffer =
    unsafe extern "C" fn(*mut c_void, u64, usize, *mut c_void, *mut i32) -> *mut c_void;
type CreateKernel = unsafe extern "C" fn(*mut c_void, *const c_char, *mut i32) -> *mut c_void;
type SetKernelArg = unsafe extern "C" fn(*mut c_void, u32, usize, *const c_void) -> i32;
type EnqueueNdRange = unsafe extern "C" fn(
    *mut c_void,
    *mut c_void,
    u32,
    *const usize,
    *const usize,
    *const usize,
    u32,
    *const c_void,
    *mut c_void,
) -> i32;
type EnqueueRead = unsafe extern "C" fn(
    *mut c_void,
    *mut c_void,
    u32,
    usize,
    usize,
    *mut c_void,
    u32,
    *const c_void,
    *mut c_void,
) -> i32;
type Finish = unsafe extern "C" fn(*mut c_void) -> i32;

const CL_MEM_READ_WRITE: u64 = 1;
const CL_MEM_COPY_HOST_PTR: u64 = 32;

/// A kernel argument: a float buffer (read back after the launch) or an int.
pub enum Arg {
    /// A float buffer.
    Buf(Vec<f32>),
    /// An `int` scalar.
    Int(i32),
}

/// The entry points that launch kernels.
struct Launch {
    queue: *mut c_void,
    create_buffer: CreateBuffer,
    create_kernel: CreateKernel,
    set_arg: SetKernelArg,
    enqueue: EnqueueNdRange,
    read: EnqueueRead,
    finish: Finish,
    release_mem: Release,
    release_kernel: Release,
}

/// The entry points of the OpenCL library this test calls, with a context on one device.
pub struct Cl {
    /// Held while the context lives: one test at a time talks to the driver.
    _serial: std::sync::MutexGuard<'static, ()>,
    device: *mut c_void,
    context: *mut c_void,
    create_program: CreateProgram,
    build_program: BuildProgram,
    build_info: BuildInfo,
    release_program: Release,
    launch: Launch,
}

fn sym<T: Copy>(lib: *mut c_void, name: &str) -> Result<T, String> {
    let c = CString::new(name).unwrap();
    // SAFETY: `lib` is a handle from dlopen and `c` a NUL-terminated name.
    let p = unsafe { dlsym(lib, c.as_ptr()) };
    if p.is_null() {
        return Err(format!("libOpenCL has no `{name}`"));
    }
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: `T` is the function pointer type of the OpenCL entry point `name` (same size as
    // a data pointer on the platforms this runs on).
    Ok(unsafe { std::mem::transmute_copy(&p) })
}

impl Cl {
    /// The first device of the first platform, or why there is none.
    pub fn open() -> Result<Cl, String> {
        let serial = DRIVER.lock().unwrap_or_else(|e| e.into_inner());
        let name = CString::new("libOpenCL.so.1").unwrap();
        // SAFETY: dlopen with a NUL-terminated name.
        let lib = unsafe { dlopen(name.as_ptr(), RTLD_NOW) };
        if lib.is_null() {
            return Err("libOpenCL.so.1 cannot be loaded".into());
        }
        let platforms: GetPlatformIds = sym(lib, "clGetPlatformIDs")?;
        let devices: GetDeviceIds = sym(lib, "clGetDeviceIDs")?;
        let create_context: CreateContext = sym(lib, "clCreateContext")?;
        let mut platform = ptr::null_mut();
        let mut n = 0u32;
        // SAFETY: room for one platform id, and a count.
        let rc = unsafe { platforms(1, &mut platform, &mut n) };
        if rc != 0 || n == 0 {
            return Err(format!(
                "no OpenCL platform (clGetPlatformIDs: {rc}, {n} platforms)"
            ));
        }
        let mut device = ptr::null_mut();
        // SAFETY: a platform id from above, room for one device id.
        let rc = unsafe { devices(platform, CL_DEVICE_TYPE_ALL, 1, &mut device, &mut n) };
        if rc != 0 || n == 0 {
            return Err(format!("no OpenCL device (clGetDeviceIDs: {rc})"));
        }
        let mut err = 0;
        // SAFETY: one valid device id; no properties or callback.
        let context = unsafe {
            create_context(
                ptr::null(),
                1,
                &device,
                ptr::null(),
                ptr::null_mut(),
                &mut err,
            )
        };
        if context.is_null() || err != 0 {
            return Err(format!("clCreateContext failed: {err}"));
        }
        let create_queue: CreateQueue = sym(lib, "clCreateCommandQueue")?;
        // SAFETY: a live context and one of its devices, no properties.
        let queue = unsafe { create_queue(context, device, 0, &mut err) };
        if queue.is_null() || err != 0 {
            return Err(format!("clCreateCommandQueue failed: {err}"));
        }
        let launch = Launch {
            queue,
            create_buffer: sym(lib, "clCreateBuffer")?,
            create_kernel: sym(lib, "clCreateKernel")?,
            set_arg: sym(lib, "clSetKernelArg")?,
            enqueue: sym(lib, "clEnqueueNDRangeKernel")?,
            read: sym(lib, "clEnqueueReadBuffer")?,
            finish: sym(lib, "clFinish")?,
            release_mem: sym(lib, "clReleaseMemObject")?,
            release_kernel: sym(lib, "clReleaseKernel")?,
        };
        Ok(Cl {
            _serial: serial,
            device,
            context,
            launch,
            create_program: sym(lib, "clCreateProgramWithSource")?,
            build_program: sym(lib, "clBuildProgram")?,
            build_info: sym(lib, "clGetProgramBuildInfo")?,
            release_program: sym(lib, "clReleaseProgram")?,
        })
    }

    /// Builds `source`; the build log on failure.
    pub fn build(&self, source: &str) -> Result<(), String> {
        self.with_program(source, |_| Ok(()))
    }

    /// Builds `source` and runs `f` on the program; the build log on failure.
    fn with_program(
        &self,
        source: &str,
        f: impl FnOnce(*mut c_void) -> Result<(), String>,
    ) -> Result<(), String> {
        let src = CString::new(source).unwrap();
        let ptrs = [src.as_ptr()];
        let mut err = 0;
        // SAFETY: one NUL-terminated source string (lengths NULL), a live context.
        let program =
            unsafe { (self.create_program)(self.context, 1, ptrs.as_ptr(), ptr::null(), &mut err) };
        if program.is_null() || err != 0 {
            return Err(format!("clCreateProgramWithSource failed: {err}"));
        }
        let options = CString::new("-cl-std=CL1.2").unwrap();
        // SAFETY: the program above, one device of its context, no callback.
        let rc = unsafe {
            (self.build_program)(
                program,
                1,
                &self.device,
                options.as_ptr(),
                ptr::null(),
                ptr::null_mut(),
            )
        };
        let result = if rc == 0 {
            f(program)
        } else {
            let mut log = vec![0u8; 1 << 16];
            let mut len = 0usize;
            // SAFETY: a buffer of log.len() bytes for the NUL-terminated log.
            unsafe {
                (self.build_info)(
                    program,
                    self.device,
                    CL_PROGRAM_BUILD_LOG,
                    log.len(),
                    log.as_mut_ptr().cast(),
                    &mut len,
                )
            };
            let text = CStr::from_bytes_until_nul(&log)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            Err(format!("clBuildProgram failed ({rc}):\n{text}"))
        };
        // SAFETY: the program is no longer used.
        unsafe { (self.release_program)(program) };
        result
    }
}

impl Cl {
    /// Launches kernel `name` of `source` over `groups` work-groups of `local` work-items (per
    /// dimension x, y, z) with `args`; buffers are read back into `args`.
    pub fn run(
        &self,
        source: &str,
        name: &str,
        args: &mut [Arg],
        groups: [usize; 3],
        local: [usize; 3],
    ) -> Result<(), String> {
        let l = &self.launch;
        self.with_program(source, |program| {
            let cname = CString::new(name).unwrap();
            let mut err = 0;
            // SAFETY: a built program and a NUL-terminated kernel name.
            let kernel = unsafe { (l.create_kernel)(program, cname.as_ptr(), &mut err) };
            if kernel.is_null() || err != 0 {
                return Err(format!("clCreateKernel({name}) failed: {err}"));
            }
            let mut mems = Vec::new();
            let mut result = Ok(());
            for (i, a) in args.iter_mut().enumerate() {
                let rc = match a {
                    Arg::Buf(v) => {
                        let bytes = std::mem::size_of_val(v.as_slice());
                        // SAFETY: `v` holds `bytes` bytes, copied into the new buffer.
                        let mem = unsafe {
                            (l.create_buffer)(
                                self.context,
                                CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                bytes,
                                v.as_mut_ptr().cast(),
                                &mut err,
                            )
                        };
                        mems.push(mem);
                        // SAFETY: the argument is the cl_mem handle, passed by address.
                        unsafe {
                            (l.set_arg)(
                                kernel,
                                i as u32,
                                std::mem::size_of::<*mut c_void>(),
                                (&mem as *const *mut c_void).cast(),
                            )
                        }
                    }
                    Arg::Int(x) => {
                        // SAFETY: a 4-byte int argument, passed by address.
                        unsafe { (l.set_arg)(kernel, i as u32, 4, (x as *const i32).cast()) }
                    }
                };
                if (rc != 0 || err != 0) && result.is_ok() {
                    result = Err(format!("setting argument {i} failed: {rc}/{err}"));
                }
            }
            if result.is_ok() {
                let global: Vec<usize> = (0..3).map(|d| groups[d] * local[d]).collect();
                // SAFETY: three global and local sizes for a kernel with all arguments set.
                let rc = unsafe {
                    (l.enqueue)(
                        l.queue,
                        kernel,
                        3,
                        ptr::null(),
                        global.as_ptr(),
                        local.as_ptr(),
                        0,
                        ptr::null(),
                        ptr::null_mut(),
                    )
                };
                if rc != 0 {
                    result = Err(format!("clEnqueueNDRangeKernel failed: {rc}"));
                }
            }
            let mut k = 0;
            for a in args.iter_mut() {
                if let Arg::Buf(v) = a {
                    let bytes = std::mem::size_of_val(v.as_slice());
                    if result.is_ok() {
                        // SAFETY: a blocking read of `bytes` bytes into `v`.
                        let rc = unsafe {
                            (l.read)(
                                l.queue,
                                mems[k],
                                1,
                                0,
                                bytes,
                                v.as_mut_ptr().cast(),
                                0,
                                ptr::null(),
                                ptr::null_mut(),
                            )
                        };
                        if rc != 0 {
                            result = Err(format!("clEnqueueReadBuffer failed: {rc}"));
                        }
                    }
                    // SAFETY: the buffer is no longer used.
                    unsafe { (l.release_mem)(mems[k]) };
                    k += 1;
                }
            }
            // SAFETY: the queue is live; the kernel is no longer used.
            unsafe {
                (l.finish)(l.queue);
                (l.release_kernel)(kernel);
            }
            result
        })
    }
}

/// Deterministic test data.
pub fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

pub fn buf(a: &Arg) -> &[f32] {
    match a {
        Arg::Buf(v) => v,
        Arg::Int(_) => panic!("not a buffer"),
    }
}

pub fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}
