//! The generated OpenCL C compiles: each program is built with the system's OpenCL driver
//! (`libOpenCL.so.1`, loaded at run time; `clBuildProgram` on the first device of the first
//! platform). Skipped, with the reason printed, where no OpenCL platform is present.

mod device_common;

use device_common::{matmul, matmul_shared, rowsum, vadd};
use kiln_codegen::driver;
use kiln_te::{compute, create_schedule, placeholder, thread_axis, Schedule, Tensor};
use kiln_tir::{DataType, PrimExpr};
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;

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

/// The entry points of the OpenCL library this test calls, with a context on one device.
struct Cl {
    device: *mut c_void,
    context: *mut c_void,
    create_program: CreateProgram,
    build_program: BuildProgram,
    build_info: BuildInfo,
    release_program: Release,
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
    fn open() -> Result<Cl, String> {
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
        Ok(Cl {
            device,
            context,
            create_program: sym(lib, "clCreateProgramWithSource")?,
            build_program: sym(lib, "clBuildProgram")?,
            build_info: sym(lib, "clGetProgramBuildInfo")?,
            release_program: sym(lib, "clReleaseProgram")?,
        })
    }

    /// Builds `source`; the build log on failure.
    fn build(&self, source: &str) -> Result<(), String> {
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
            Ok(())
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

fn source(s: &Schedule, args: &[Tensor], name: &str) -> String {
    let m = driver::build(s, args, "opencl", name).unwrap();
    m.imports()[0].inspect_source("cl").unwrap()
}

/// Everything the generated code does besides plain indexing: floor division and modulo,
/// min/max of ints and floats, math builtins, casts, int64 and double values, selects.
fn mixed() -> (Schedule, Vec<Tensor>) {
    let n = PrimExpr::i32(300);
    let a = placeholder(std::slice::from_ref(&n), DataType::float(32), "A");
    let d = placeholder(std::slice::from_ref(&n), DataType::float(64), "D");
    let ix = placeholder(std::slice::from_ref(&n), DataType::int(64), "I");
    let b = compute(
        std::slice::from_ref(&n),
        |i| {
            let x = a.at_vars(i);
            let k = ix.at_vars(i);
            let q = kiln_tir::floordiv(k.clone(), PrimExpr::i64(7))
                + kiln_tir::floormod(k.clone(), PrimExpr::i64(-3))
                + kiln_tir::min(k, PrimExpr::i64(5));
            let f = kiln_tir::op::sqrt(kiln_tir::op::exp(x.clone()))
                + kiln_tir::max(x.clone(), PrimExpr::f32(0.5))
                + kiln_tir::floormod(x.clone(), PrimExpr::f32(2.0))
                + kiln_tir::op::sigmoid(x.clone())
                + kiln_tir::cast(DataType::float(32), d.at_vars(i) * 2.0)
                + kiln_tir::cast(DataType::float(32), q);
            kiln_tir::select(x.lt(PrimExpr::f32(0.0)), -f.clone(), f)
        },
        "B",
    );
    let s = create_schedule(&[b.op().clone()]);
    let (o, i) = s.stage(&b).split(&b.axis(0), 64).unwrap();
    s.stage(&b)
        .bind(&o, &thread_axis("blockIdx.x").unwrap())
        .unwrap();
    s.stage(&b)
        .bind(&i, &thread_axis("threadIdx.x").unwrap())
        .unwrap();
    (s, vec![a, d, ix, b])
}

#[test]
fn generated_opencl_builds_on_the_device() {
    let cl = match Cl::open() {
        Ok(cl) => cl,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    // The check is not vacuous: a broken program fails to build.
    assert!(cl
        .build("__kernel void f(int n) { undeclared_variable = n; }")
        .is_err());
    let programs = [
        ("vadd", vadd()),
        ("rowsum", rowsum()),
        ("matmul", matmul()),
        ("matmul_shared", matmul_shared(64)),
        ("mixed", mixed()),
    ];
    for (name, (s, args)) in programs {
        let src = source(&s, &args, name);
        if std::env::var_os("KILN_PRINT_OPENCL").is_some() {
            println!("{src}");
        }
        if let Err(log) = cl.build(&src) {
            panic!("{name}: the generated OpenCL C does not build:\n{log}\n--- source ---\n{src}");
        }
    }
}
