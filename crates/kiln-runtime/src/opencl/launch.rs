//! Running an OpenCL module's kernels: the program is built on first call for each device and
//! kept; a call sets the kernel's arguments and enqueues it with the launch dimensions that
//! follow them (see [`FunctionInfo`]).

use kiln_ffi::abi::DLTensor;
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Any, AnyView, DataType, Device, Error, Result};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

use super::api::{self, Handle};
use super::device::{check, cl_device, loaded, workspace};
use super::{Binaries, FunctionInfo, LaunchDims};

thread_local! {
    /// The OpenCL device this thread's kernel calls run on (`__tvm_set_device`; 0 by default).
    static CURRENT_DEVICE: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// Makes `device_id` the OpenCL device of this thread's following kernel calls.
pub fn set_current_device(device_id: i32) {
    CURRENT_DEVICE.with(|d| d.set(device_id));
}

/// A program built for one device and the kernels made from it so far (each behind a lock:
/// setting arguments and enqueuing one `cl_kernel` must not interleave between threads).
struct Built {
    program: Handle,
    kernels: HashMap<String, Arc<Mutex<KernelHandle>>>,
}

struct KernelHandle(Handle);

// SAFETY: OpenCL objects are reference-counted handles usable from any thread; the only
// non-thread-safe use (clSetKernelArg + enqueue on one kernel) is serialized by the Mutex
// around each KernelHandle.
unsafe impl Send for KernelHandle {}
// SAFETY: as for KernelHandle: a program handle is used by thread-safe calls only.
unsafe impl Send for Built {}

impl Drop for Built {
    fn drop(&mut self) {
        let Ok(cl) = loaded() else { return };
        for k in self.kernels.values() {
            // SAFETY: each kernel was created once and is released once, here.
            unsafe { (cl.clReleaseKernel)(k.lock().recover().0) };
        }
        // SAFETY: the program was created once and is released once, here.
        unsafe { (cl.clReleaseProgram)(self.program) };
    }
}

/// The programs of one module, per device id, built on first use.
#[derive(Default)]
pub(crate) struct Programs {
    built: Mutex<HashMap<i32, Built>>,
}

/// The build log with, for each `<line>:<col>: error` it mentions, that line of the source.
fn explain_build_log(log: &str, source: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let mut out = String::new();
    for l in log.lines() {
        out.push_str(l);
        out.push('\n');
        // "<source>:12:5: error: ..." (clang-based drivers); the line number is the first
        // number after a colon.
        let line_no = l
            .split(':')
            .skip(1)
            .find_map(|p| p.trim().parse::<usize>().ok());
        if let (true, Some(n)) = (l.contains("error"), line_no) {
            if let Some(src) = n.checked_sub(1).and_then(|i| lines.get(i)) {
                out.push_str(&format!("  source line {n}: {}\n", src.trim_end()));
            }
        }
    }
    out
}

impl Programs {
    /// Builds the program for `device_id` unless it is built already.
    /// A program binary for the device in `binaries` is tried first (falling back to the
    /// source if the driver refuses it); a program built from source adds its binary there.
    pub(crate) fn build(&self, source: &str, binaries: &Binaries, device_id: i32) -> Result<()> {
        let mut built = self.built.lock().recover();
        if let Entry::Vacant(e) = built.entry(device_id) {
            let dev = cl_device(Device::new(
                kiln_ffi::device::device_type::OPENCL,
                device_id,
            ))?;
            let saved = binaries
                .lock()
                .recover()
                .iter()
                .find(|(k, _)| *k == dev.binary_key)
                .map(|(_, b)| b.clone());
            let program = match saved.and_then(|b| program_from_binary(&b, device_id).ok()) {
                Some(p) => p,
                None => {
                    let p = build_program(source, device_id)?;
                    if let Some(b) = program_binary(p) {
                        let mut list = binaries.lock().recover();
                        list.retain(|(k, _)| *k != dev.binary_key);
                        list.push((dev.binary_key.clone(), b));
                    }
                    p
                }
            };
            e.insert(Built {
                program,
                kernels: HashMap::new(),
            });
        }
        Ok(())
    }

    /// The kernel `name` built for `device_id`, building the program first if needed.
    fn kernel(
        &self,
        source: &str,
        binaries: &Binaries,
        device_id: i32,
        name: &str,
    ) -> Result<Arc<Mutex<KernelHandle>>> {
        let cl = loaded()?;
        self.build(source, binaries, device_id)?;
        let mut built = self.built.lock().recover();
        let b = built.get_mut(&device_id).expect("built above");
        if let Some(k) = b.kernels.get(name) {
            return Ok(k.clone());
        }
        let cname = CString::new(name)
            .map_err(|_| Error::value_error(format!("kernel name {name:?} holds a NUL byte")))?;
        let mut code = 0;
        // SAFETY: a built program and a NUL-terminated name.
        let k = unsafe { (cl.clCreateKernel)(b.program, cname.as_ptr(), &mut code) };
        check(&format!("clCreateKernel `{name}`"), code)?;
        let k = Arc::new(Mutex::new(KernelHandle(k)));
        b.kernels.insert(name.to_string(), k.clone());
        Ok(k)
    }
}

/// A program for `device_id` from a binary the driver made earlier, built (linked) for it.
fn program_from_binary(binary: &[u8], device_id: i32) -> Result<Handle> {
    let cl = loaded()?;
    let dev = cl_device(Device::new(
        kiln_ffi::device::device_type::OPENCL,
        device_id,
    ))?;
    let ws = workspace()?;
    let (mut status, mut code) = (0, 0);
    let (len, ptr) = (binary.len(), binary.as_ptr());
    // SAFETY: one device of the workspace's context and one binary of `len` bytes.
    let program = unsafe {
        (cl.clCreateProgramWithBinary)(ws.context, 1, &dev.id, &len, &ptr, &mut status, &mut code)
    };
    check("clCreateProgramWithBinary", code)?;
    check("clCreateProgramWithBinary (binary status)", status)
        .and_then(|_| {
            check(
                "clBuildProgram (from a binary)",
                build_for(cl, program, dev.id),
            )
        })
        .inspect_err(|_| {
            // SAFETY: created above, released once.
            unsafe { (cl.clReleaseProgram)(program) };
        })?;
    Ok(program)
}

/// `clBuildProgram` of `program` (from source or a binary) for one device, blocking, with no
/// options; the status code.
fn build_for(cl: &api::Api, program: Handle, device: Handle) -> api::ClInt {
    // SAFETY: the program and device belong to the workspace's context; empty options, no
    // callback (a blocking build).
    unsafe {
        (cl.clBuildProgram)(
            program,
            1,
            &device,
            c"".as_ptr(),
            std::ptr::null(),
            std::ptr::null_mut(),
        )
    }
}

/// The binary of a program built for one device, when the driver gives one.
fn program_binary(program: Handle) -> Option<Vec<u8>> {
    let cl = loaded().ok()?;
    let mut size = 0usize;
    // SAFETY: a built program of one device: one size_t.
    let code = unsafe {
        (cl.clGetProgramInfo)(
            program,
            api::PROGRAM_BINARY_SIZES,
            std::mem::size_of::<usize>(),
            &mut size as *mut usize as *mut c_void,
            std::ptr::null_mut(),
        )
    };
    if code != 0 || size == 0 {
        return None;
    }
    let mut bytes = vec![0u8; size];
    let mut ptr = bytes.as_mut_ptr();
    // SAFETY: one pointer to a buffer of the size the driver reported.
    let code = unsafe {
        (cl.clGetProgramInfo)(
            program,
            api::PROGRAM_BINARIES,
            std::mem::size_of::<*mut u8>(),
            &mut ptr as *mut *mut u8 as *mut c_void,
            std::ptr::null_mut(),
        )
    };
    (code == 0).then_some(bytes)
}

/// Builds `source` for OpenCL device `device_id`; a failed build's error holds the compiler's
/// log with the source lines it points at.
fn build_program(source: &str, device_id: i32) -> Result<Handle> {
    let cl = loaded()?;
    let dev = cl_device(Device::new(
        kiln_ffi::device::device_type::OPENCL,
        device_id,
    ))?;
    let ws = workspace()?;
    let mut code = 0;
    let (text, len) = (source.as_ptr() as *const std::ffi::c_char, source.len());
    // SAFETY: one source string with its length (no NUL needed).
    let program = unsafe { (cl.clCreateProgramWithSource)(ws.context, 1, &text, &len, &mut code) };
    check("clCreateProgramWithSource", code)?;
    let code = build_for(cl, program, dev.id);
    if code != 0 {
        let mut n = 0usize;
        let mut log = Vec::new();
        // SAFETY: a size query, then a buffer of that size.
        unsafe {
            if (cl.clGetProgramBuildInfo)(
                program,
                dev.id,
                api::PROGRAM_BUILD_LOG,
                0,
                std::ptr::null_mut(),
                &mut n,
            ) == 0
            {
                log.resize(n, 0u8);
                (cl.clGetProgramBuildInfo)(
                    program,
                    dev.id,
                    api::PROGRAM_BUILD_LOG,
                    n,
                    log.as_mut_ptr() as *mut c_void,
                    std::ptr::null_mut(),
                );
            }
            (cl.clReleaseProgram)(program);
        }
        let log = String::from_utf8_lossy(&log);
        return Err(Error::runtime_error(format!(
            "OpenCL: the module's program does not build for opencl:{device_id} (`{}`): {} \
             ({code})\n{}",
            dev.name,
            api::status_name(code),
            explain_build_log(log.trim_end_matches('\0'), source)
        )));
    }
    Ok(program)
}

/// A buffer argument: an opaque pointer (the `cl_mem`), or a tensor on an OpenCL device
/// whose data it is (at offset 0).
fn buffer_arg(v: &AnyView<'_>, name: &str, i: usize) -> Result<*mut c_void> {
    if let Ok(p) = v.try_as::<*mut c_void>() {
        return Ok(p);
    }
    if let Ok(t) = v.try_as::<*mut DLTensor>() {
        // SAFETY: a DLTensor view from the caller stays valid for the call.
        let t = unsafe { &*t };
        if Device(t.device).device_type() != kiln_ffi::device::device_type::OPENCL
            || t.byte_offset != 0
        {
            return Err(Error::value_error(format!(
                "kernel `{name}` argument {i}: the tensor must be on an OpenCL device at byte offset 0"
            )));
        }
        return Ok(t.data);
    }
    Err(Error::type_error(format!(
        "kernel `{name}` argument {i}: expected a buffer (an OpenCL tensor or its data handle), got type index {}",
        v.type_index()
    )))
}

/// Runs one kernel call: `args` are the kernel's arguments then its launch extents.
pub(crate) fn launch(
    programs: &Programs,
    source: &str,
    binaries: &Binaries,
    info: &FunctionInfo,
    dims: &LaunchDims,
    args: &[AnyView<'_>],
) -> Result<Any> {
    let name = info.name.as_str();
    let nargs = info.arg_types.len();
    if args.len() != nargs + info.launch_param_tags.len() {
        return Err(Error::type_error(format!(
            "kernel `{name}` takes {nargs} argument(s) and {} launch extent(s) ({}), got {} value(s)",
            info.launch_param_tags.len(),
            info.launch_param_tags.join(", "),
            args.len()
        )));
    }
    let mut extents = Vec::with_capacity(args.len() - nargs);
    for (j, v) in args[nargs..].iter().enumerate() {
        let e: i64 = v.try_as().map_err(|_| {
            Error::type_error(format!(
                "kernel `{name}`: launch extent of {} is not an integer",
                info.launch_param_tags[j]
            ))
        })?;
        if e < 0 {
            return Err(Error::value_error(format!(
                "kernel `{name}`: launch extent of {} is {e}",
                info.launch_param_tags[j]
            )));
        }
        extents.push(e as usize);
    }
    let (global, local) = dims.sizes(&extents);
    if global.contains(&0) {
        return Ok(Any::none());
    }
    let device_id = CURRENT_DEVICE.with(|d| d.get());
    let dev = cl_device(Device::new(
        kiln_ffi::device::device_type::OPENCL,
        device_id,
    ))?;
    let group: usize = local.iter().product();
    let per_dim_ok = local
        .iter()
        .enumerate()
        .all(|(d, &l)| dev.max_work_item_sizes.get(d).is_none_or(|&m| l <= m));
    if group > dev.max_work_group_size || !per_dim_ok {
        return Err(Error::value_error(format!(
            "kernel `{name}`: a work-group of {local:?} ({group} work-items) is larger than \
             opencl:{device_id} (`{}`) allows: at most {} work-items, {:?} per dimension",
            dev.name, dev.max_work_group_size, dev.max_work_item_sizes
        )));
    }
    let kernel = programs.kernel(source, binaries, device_id, name)?;
    let k = kernel.lock().recover();
    for (i, (t, v)) in info.arg_types.iter().zip(args).enumerate() {
        set_arg(k.0, i as u32, *t, v, name)?;
    }
    let cl = loaded()?;
    // SAFETY: every argument of the kernel is set (its arity is nargs, from the module's own
    // FunctionInfo), the work sizes have `global.len()` entries, and the queue belongs to the
    // context the program was built in.
    let code = unsafe {
        (cl.clEnqueueNDRangeKernel)(
            dev.queue_for(std::ptr::null_mut()),
            k.0,
            global.len() as u32,
            std::ptr::null(),
            global.as_ptr(),
            local.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null_mut(),
        )
    };
    check(
        &format!("clEnqueueNDRangeKernel `{name}` global {global:?} local {local:?}"),
        code,
    )?;
    Ok(Any::none())
}

fn set_arg(k: Handle, i: u32, t: DataType, v: &AnyView<'_>, name: &str) -> Result<()> {
    let bad = |what: &str| {
        Error::type_error(format!(
            "kernel `{name}` argument {i}: expected {what} ({t}), got type index {}",
            v.type_index()
        ))
    };
    // The argument's bytes, little-endian (x86-64 and every OpenCL host Kiln targets): a
    // buffer's cl_mem handle, or a scalar of the kernel's declared width.
    let (bytes, size) = match (t.code(), t.bits()) {
        (3, _) => {
            let mem = buffer_arg(v, name, i as usize)? as u64;
            (mem.to_le_bytes(), std::mem::size_of::<Handle>())
        }
        (0 | 1, bits @ (1 | 8 | 16 | 32 | 64)) => {
            let x: i64 = v.try_as().map_err(|_| bad("an integer"))?;
            (x.to_le_bytes(), (bits as usize).div_ceil(8))
        }
        (2, 32) => {
            let x: f64 = v.try_as().map_err(|_| bad("a number"))?;
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&(x as f32).to_le_bytes());
            (b, 4)
        }
        (2, 64) => {
            let x: f64 = v.try_as().map_err(|_| bad("a number"))?;
            (x.to_le_bytes(), 8)
        }
        _ => return Err(bad("a supported argument type")),
    };
    // SAFETY: `size` bytes of the argument's value, as the kernel declares it.
    let r = unsafe { (loaded()?.clSetKernelArg)(k, i, size, bytes.as_ptr() as *const c_void) };
    check(&format!("clSetKernelArg `{name}` #{i}"), r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_log_lines_are_shown_with_their_source() {
        let src = "__kernel void f() {\n  int x = y;\n}\n";
        let log = "<source>:2:11: error: use of undeclared identifier 'y'";
        let out = explain_build_log(log, src);
        assert!(
            out.contains("source line 2: int x = y;")
                || out.contains("source line 2:   int x = y;"),
            "{out}"
        );
    }
}
