//! The OpenCL device API (device type 4): the devices of the first OpenCL platform that has any,
//! one context over them and one in-order command queue per device, memory as `cl_mem` buffers
//! (the pointer a tensor holds is the `cl_mem` handle; its `byte_offset` is an offset into the
//! buffer), copies host<->device and device<->device, attributes in TVM's numbering.
//!
//! The API is loaded on first use ([`super::api`]); where it is missing, or no platform has a
//! device, every call says so and no OpenCL device exists.

use kiln_ffi::abi::DLTensor;
use kiln_ffi::device::device_type;
use kiln_ffi::{Any, DataType, Device, Error, Result};
use std::ffi::c_void;
use std::sync::OnceLock;

use super::api::{self, api, ClInt, Handle};
use crate::device::{DeviceApi, DeviceAttr, StreamHandle};
use crate::tensor::layout::{checked_nbytes, checked_numel, dims, is_contiguous};

/// The OpenCL device API instance registered for device type 4.
pub static OPENCL: OpenClDeviceApi = OpenClDeviceApi;

crate::register_device_api!(device_type::OPENCL, &OPENCL);

/// The OpenCL implementation of [`DeviceApi`].
pub struct OpenClDeviceApi;

/// One OpenCL device of the workspace and its command queue.
pub(crate) struct ClDevice {
    /// The device.
    pub id: Handle,
    /// Its in-order command queue (the default stream).
    pub queue: Handle,
    /// Kiln's device id.
    pub index: i32,
    /// `CL_DEVICE_NAME`.
    pub name: String,
    /// What a program binary must have been built for to load here: the device's name and
    /// driver version.
    pub binary_key: String,
    /// `CL_DEVICE_MAX_WORK_GROUP_SIZE`.
    pub max_work_group_size: usize,
    /// `CL_DEVICE_MAX_WORK_ITEM_SIZES`.
    pub max_work_item_sizes: Vec<usize>,
}

/// The platform's devices, their context and queues, made once per process.
pub(crate) struct Workspace {
    /// The platform's name (`CL_PLATFORM_NAME`).
    pub platform: String,
    /// The context over every device.
    pub context: Handle,
    /// The devices, indexed by Kiln's device id.
    pub devices: Vec<ClDevice>,
}

// SAFETY: OpenCL contexts, device ids and command queues are thread-safe handles (OpenCL 1.2
// appendix A.2: all API calls are thread-safe except clSetKernelArg and kernel enqueue on one
// cl_kernel, which the module serializes itself).
unsafe impl Send for Workspace {}
// SAFETY: as for Send: the handles are only passed to thread-safe API calls.
unsafe impl Sync for Workspace {}

/// An OpenCL status code as an error naming the call that failed.
pub(crate) fn cl_error(what: &str, code: ClInt) -> Error {
    Error::runtime_error(format!(
        "OpenCL: {what} failed: {} ({code})",
        api::status_name(code)
    ))
}

/// `Ok` for `CL_SUCCESS`, else [`cl_error`].
pub(crate) fn check(what: &str, code: ClInt) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(cl_error(what, code))
    }
}

/// The loaded API, or why OpenCL is not available.
pub(crate) fn loaded() -> Result<&'static api::Api> {
    api().map_err(|why| {
        Error::runtime_error(format!(
            "OpenCL is not available: the ICD loader libOpenCL.so.1 could not be loaded ({why}); \
             install an OpenCL driver (for example Debian's pocl-opencl-icd)"
        ))
    })
}

/// An info query's raw bytes (`clGet*Info` with a size query first).
fn info_bytes(query: impl Fn(usize, *mut c_void, *mut usize) -> ClInt) -> Option<Vec<u8>> {
    let mut n = 0usize;
    if query(0, std::ptr::null_mut(), &mut n) != 0 {
        return None;
    }
    let mut v = vec![0u8; n];
    (query(n, v.as_mut_ptr() as *mut c_void, std::ptr::null_mut()) == 0).then_some(v)
}

fn device_bytes(id: Handle, param: u32) -> Option<Vec<u8>> {
    let cl = api().ok()?;
    // SAFETY: `id` is a device of the loaded platform; the buffer has the size passed.
    info_bytes(|n, p, r| unsafe { (cl.clGetDeviceInfo)(id, param, n, p, r) })
}

fn text(v: Option<Vec<u8>>) -> String {
    v.map(|v| {
        String::from_utf8_lossy(&v)
            .trim_end_matches('\0')
            .trim()
            .to_string()
    })
    .unwrap_or_default()
}

fn device_string(id: Handle, param: u32) -> String {
    text(device_bytes(id, param))
}

fn device_u64(id: Handle, param: u32) -> Option<u64> {
    let v = device_bytes(id, param)?;
    Some(match v.len() {
        4 => u32::from_ne_bytes(v[..4].try_into().ok()?) as u64,
        8 => u64::from_ne_bytes(v[..8].try_into().ok()?),
        _ => return None,
    })
}

fn device_sizes(id: Handle, param: u32) -> Vec<usize> {
    device_bytes(id, param)
        .map(|v| {
            v.chunks_exact(std::mem::size_of::<usize>())
                .map(|c| usize::from_ne_bytes(c.try_into().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

fn init() -> Result<Workspace> {
    let cl = loaded()?;
    let mut n = 0u32;
    // SAFETY: a count query.
    let code = unsafe { (cl.clGetPlatformIDs)(0, std::ptr::null_mut(), &mut n) };
    if code != 0 || n == 0 {
        return Err(Error::runtime_error(format!(
            "OpenCL: no platform is installed (clGetPlatformIDs: {})",
            api::status_name(code)
        )));
    }
    let mut platforms = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: room for `n` platform ids.
    check("clGetPlatformIDs", unsafe {
        (cl.clGetPlatformIDs)(n, platforms.as_mut_ptr(), std::ptr::null_mut())
    })?;
    for platform in platforms {
        let mut count = 0u32;
        // SAFETY: a count query on a platform id just listed.
        let code = unsafe {
            (cl.clGetDeviceIDs)(
                platform,
                api::DEVICE_TYPE_ALL,
                0,
                std::ptr::null_mut(),
                &mut count,
            )
        };
        if code != 0 || count == 0 {
            continue;
        }
        let mut ids = vec![std::ptr::null_mut(); count as usize];
        // SAFETY: room for `count` device ids.
        check("clGetDeviceIDs", unsafe {
            (cl.clGetDeviceIDs)(
                platform,
                api::DEVICE_TYPE_ALL,
                count,
                ids.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })?;
        // SAFETY: the platform id is valid; the buffer has the size passed.
        let name = text(info_bytes(|n, p, r| unsafe {
            (cl.clGetPlatformInfo)(platform, api::PLATFORM_NAME, n, p, r)
        }));
        let mut code = 0;
        // SAFETY: `ids` are devices of one platform; no properties, no callback.
        let context = unsafe {
            (cl.clCreateContext)(
                std::ptr::null(),
                count,
                ids.as_ptr(),
                std::ptr::null(),
                std::ptr::null_mut(),
                &mut code,
            )
        };
        check("clCreateContext", code)?;
        let mut devices = Vec::with_capacity(ids.len());
        for id in ids {
            // SAFETY: `context` holds `id`; no properties (an in-order queue).
            let queue = unsafe { (cl.clCreateCommandQueue)(context, id, 0, &mut code) };
            check("clCreateCommandQueue", code)?;
            devices.push(ClDevice {
                id,
                queue,
                index: devices.len() as i32,
                name: device_string(id, api::DEVICE_NAME),
                binary_key: format!(
                    "{} | {}",
                    device_string(id, api::DEVICE_NAME),
                    device_string(id, api::DRIVER_VERSION)
                ),
                max_work_group_size: device_u64(id, api::DEVICE_MAX_WORK_GROUP_SIZE).unwrap_or(1)
                    as usize,
                max_work_item_sizes: device_sizes(id, api::DEVICE_MAX_WORK_ITEM_SIZES),
            });
        }
        return Ok(Workspace {
            platform: name,
            context,
            devices,
        });
    }
    Err(Error::runtime_error(
        "OpenCL: no platform has a device (clGetDeviceIDs found none)",
    ))
}

/// The process's OpenCL workspace, made on first use; the error says why there is none.
pub(crate) fn workspace() -> Result<&'static Workspace> {
    static WS: OnceLock<std::result::Result<Workspace, Error>> = OnceLock::new();
    WS.get_or_init(init).as_ref().map_err(Clone::clone)
}

/// The workspace device for `dev`, or an error naming the device ids that exist.
pub(crate) fn cl_device(dev: Device) -> Result<&'static ClDevice> {
    let ws = workspace()?;
    usize::try_from(dev.device_id())
        .ok()
        .and_then(|i| ws.devices.get(i))
        .ok_or_else(|| {
            Error::value_error(format!(
                "OpenCL device {} does not exist: the platform `{}` has {} device(s) (ids 0..{})",
                dev.device_id(),
                ws.platform,
                ws.devices.len(),
                ws.devices.len()
            ))
        })
}

impl ClDevice {
    /// The queue work goes to: `stream` when given, else this thread's current stream of the
    /// device (`TVMFFIEnvSetStream`), else the device's default queue.
    pub(crate) fn queue_for(&self, stream: StreamHandle) -> Handle {
        if !stream.is_null() {
            return stream;
        }
        let current = crate::device::stream::current_stream(device_type::OPENCL, self.index);
        if current.is_null() {
            self.queue
        } else {
            current
        }
    }
}

/// Whether `dev` is an OpenCL device that exists.
pub fn opencl_device_exists(dev: Device) -> bool {
    cl_device(dev).is_ok()
}

/// The number of bytes a tensor's elements cover; strided tensors are refused (OpenCL buffers
/// are copied as byte ranges).
fn compact_bytes(t: &DLTensor, what: &str) -> Result<usize> {
    // SAFETY: the DeviceApi contract: `t` describes valid shape (and strides) arrays.
    let (shape, strides) = unsafe { dims(t) };
    if !is_contiguous(shape, strides) {
        return Err(Error::value_error(format!(
            "OpenCL copies need compact tensors; `{what}` (shape {shape:?}) has strides"
        )));
    }
    checked_nbytes(checked_numel(shape)?, DataType(t.dtype))
}

impl DeviceApi for OpenClDeviceApi {
    fn name(&self) -> &'static str {
        "opencl"
    }

    fn get_attr(&self, dev: Device, kind: DeviceAttr) -> Result<Any> {
        let Ok(d) = cl_device(dev) else {
            return Ok(if kind == DeviceAttr::Exist {
                Any::from(0i64)
            } else {
                Any::none()
            });
        };
        use api as cd;
        let int = |p| device_u64(d.id, p).map_or(Any::none(), |v| Any::from(v as i64));
        Ok(match kind {
            DeviceAttr::Exist => Any::from(1i64),
            DeviceAttr::MaxThreadsPerBlock => Any::from(d.max_work_group_size as i64),
            // OpenCL has no warp; TVM reports 1 as well.
            DeviceAttr::WarpSize => Any::from(1i64),
            DeviceAttr::MaxSharedMemoryPerBlock => int(cd::DEVICE_LOCAL_MEM_SIZE),
            DeviceAttr::ComputeVersion => {
                // "OpenCL 3.0 PoCL ..." -> "3.0"
                let v = device_string(d.id, cd::DEVICE_VERSION);
                Any::from(v.split_whitespace().nth(1).unwrap_or("").to_string())
            }
            DeviceAttr::DeviceName => Any::from(d.name.clone()),
            DeviceAttr::MaxClockRate => int(cd::DEVICE_MAX_CLOCK_FREQUENCY),
            DeviceAttr::MultiProcessorCount => int(cd::DEVICE_MAX_COMPUTE_UNITS),
            DeviceAttr::MaxThreadDimensions => {
                let s = &d.max_work_item_sizes;
                let at = |i: usize| s.get(i).copied().unwrap_or(1);
                Any::from(format!("[{}, {}, {}]", at(0), at(1), at(2)))
            }
            DeviceAttr::ApiVersion => Any::from(device_string(d.id, cd::DEVICE_VERSION)),
            DeviceAttr::DriverVersion => Any::from(device_string(d.id, cd::DRIVER_VERSION)),
            DeviceAttr::TotalGlobalMemory => int(cd::DEVICE_GLOBAL_MEM_SIZE),
            DeviceAttr::ImagePitchAlignment => int(cd::DEVICE_IMAGE_PITCH_ALIGNMENT),
            _ => Any::none(),
        })
    }

    fn alloc_data_space(
        &self,
        dev: Device,
        nbytes: usize,
        _alignment: usize,
        _dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        cl_device(dev)?;
        let (cl, ws) = (loaded()?, workspace()?);
        let mut code = 0;
        // A zero-size buffer is invalid in OpenCL; one byte keeps the handle unique and valid.
        // SAFETY: a plain read-write buffer of the workspace's context, no host pointer.
        let mem = unsafe {
            (cl.clCreateBuffer)(
                ws.context,
                api::MEM_READ_WRITE,
                nbytes.max(1),
                std::ptr::null_mut(),
                &mut code,
            )
        };
        check(
            &format!(
                "clCreateBuffer of {nbytes} bytes on opencl:{}",
                dev.device_id()
            ),
            code,
        )?;
        Ok(mem)
    }

    unsafe fn free_data_space(&self, _dev: Device, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: the DeviceApi contract: `ptr` is a cl_mem from alloc_data_space.
        check("clReleaseMemObject", unsafe {
            (loaded()?.clReleaseMemObject)(ptr)
        })
    }

    unsafe fn copy_data_from_to(
        &self,
        from: &DLTensor,
        to: &DLTensor,
        stream: StreamHandle,
    ) -> Result<()> {
        let nbytes = compact_bytes(from, "from")?;
        let to_bytes = compact_bytes(to, "to")?;
        if nbytes != to_bytes {
            return Err(Error::value_error(format!(
                "OpenCL copy of {nbytes} bytes into a tensor of {to_bytes} bytes"
            )));
        }
        if nbytes == 0 {
            return Ok(());
        }
        let cl = loaded()?;
        let (fd, td) = (Device(from.device), Device(to.device));
        let on_cl = |d: Device| d.device_type() == device_type::OPENCL;
        let (fo, to_off) = (from.byte_offset as usize, to.byte_offset as usize);
        let none = std::ptr::null_mut();
        match (on_cl(fd), on_cl(td)) {
            (true, false) => {
                let q = cl_device(fd)?.queue_for(stream);
                // SAFETY: `from.data` is a cl_mem of at least byte_offset + nbytes bytes and
                // `to` is host memory of nbytes after its offset (the DeviceApi contract); the
                // read blocks, so the host memory is written when it returns.
                check("clEnqueueReadBuffer", unsafe {
                    let dst = (to.data as *mut u8).add(to_off) as *mut c_void;
                    (cl.clEnqueueReadBuffer)(
                        q,
                        from.data,
                        api::TRUE,
                        fo,
                        nbytes,
                        dst,
                        0,
                        std::ptr::null(),
                        none,
                    )
                })
            }
            (false, true) => {
                let q = cl_device(td)?.queue_for(stream);
                // SAFETY: as above with the roles swapped; the write blocks until the host
                // memory has been read.
                check("clEnqueueWriteBuffer", unsafe {
                    let src = (from.data as *const u8).add(fo) as *const c_void;
                    (cl.clEnqueueWriteBuffer)(
                        q,
                        to.data,
                        api::TRUE,
                        to_off,
                        nbytes,
                        src,
                        0,
                        std::ptr::null(),
                        none,
                    )
                })
            }
            (true, true) => {
                let q = cl_device(fd)?.queue_for(stream);
                cl_device(td)?;
                // SAFETY: both are cl_mem buffers of the workspace's one context, each at
                // least offset + nbytes long (the DeviceApi contract).
                check("clEnqueueCopyBuffer", unsafe {
                    (cl.clEnqueueCopyBuffer)(
                        q,
                        from.data,
                        to.data,
                        fo,
                        to_off,
                        nbytes,
                        0,
                        std::ptr::null(),
                        none,
                    )
                })?;
                // SAFETY: a queue of the workspace.
                check("clFinish", unsafe { (cl.clFinish)(q) })
            }
            (false, false) => Err(Error::value_error(
                "the OpenCL device API was asked to copy between two host tensors",
            )),
        }
    }

    fn create_stream(&self, dev: Device) -> Result<StreamHandle> {
        let (cl, ws, d) = (loaded()?, workspace()?, cl_device(dev)?);
        let mut code = 0;
        // SAFETY: a device of the workspace's context; no properties (an in-order queue).
        let q = unsafe { (cl.clCreateCommandQueue)(ws.context, d.id, 0, &mut code) };
        check("clCreateCommandQueue", code)?;
        Ok(q)
    }

    unsafe fn free_stream(&self, dev: Device, stream: StreamHandle) -> Result<()> {
        let d = cl_device(dev)?;
        if stream.is_null() || stream == d.queue {
            return Ok(());
        }
        // SAFETY: the DeviceApi contract: a queue from create_stream for `dev`, idle.
        check("clReleaseCommandQueue", unsafe {
            (loaded()?.clReleaseCommandQueue)(stream)
        })
    }

    unsafe fn stream_sync(&self, dev: Device, stream: StreamHandle) -> Result<()> {
        let q = cl_device(dev)?.queue_for(stream);
        // SAFETY: a queue of the workspace.
        check("clFinish", unsafe { (loaded()?.clFinish)(q) })
    }
}
