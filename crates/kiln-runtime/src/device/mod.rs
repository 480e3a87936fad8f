//! Devices: what a device must provide ([`DeviceApi`]: allocate, free, copy, streams,
//! attributes, workspace) and the registry that finds the implementation for a device type.
//!
//! The CPU implementation ([`cpu::CpuDeviceApi`]) is always present. Other devices (OpenCL, CUDA)
//! live in their own modules and register themselves, either at start-up with
//! [`register_device_api!`](crate::register_device_api) or at run time with
//! [`register_device_api`], so adding a device never edits this file or the others.

pub mod cpu;
pub mod stream;

use kiln_ffi::abi::DLTensor;
use kiln_ffi::device::device_type;
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{register_global, Any, DataType, Device, Error, Result};
use std::ffi::c_void;
use std::sync::RwLock;

/// Alignment in bytes of every allocation Kiln hands out (TVM's `kAllocAlignment`): generated
/// code assumes it without checking.
pub const ALLOC_ALIGNMENT: usize = 64;

/// A device stream (`TVMStreamHandle`); NULL is the default stream.
pub type StreamHandle = *mut c_void;

/// Device attributes, numbered as TVM's `DeviceAttrKind`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceAttr {
    /// Whether the device exists (an int, 1 or 0).
    Exist = 0,
    /// Largest number of threads in a block (GPUs).
    MaxThreadsPerBlock = 1,
    /// Warp / wavefront / subgroup size.
    WarpSize = 2,
    /// Shared memory per block, in bytes.
    MaxSharedMemoryPerBlock = 3,
    /// Compute capability as text (`"8.6"`).
    ComputeVersion = 4,
    /// The device's name.
    DeviceName = 5,
    /// Clock rate in kHz.
    MaxClockRate = 6,
    /// Number of multiprocessors (compute units; cores on the CPU).
    MultiProcessorCount = 7,
    /// Largest thread block dimensions.
    MaxThreadDimensions = 8,
    /// Registers per block.
    MaxRegistersPerBlock = 9,
    /// AMD GCN architecture number.
    GcnArch = 10,
    /// API version of the device's runtime.
    ApiVersion = 11,
    /// Driver version.
    DriverVersion = 12,
    /// L2 cache size in bytes.
    L2CacheSizeBytes = 13,
    /// Total memory in bytes.
    TotalGlobalMemory = 14,
    /// Memory still available, in bytes.
    AvailableGlobalMemory = 15,
    /// Image row pitch alignment in bytes.
    ImagePitchAlignment = 16,
}

impl DeviceAttr {
    const ALL: [DeviceAttr; 17] = [
        DeviceAttr::Exist,
        DeviceAttr::MaxThreadsPerBlock,
        DeviceAttr::WarpSize,
        DeviceAttr::MaxSharedMemoryPerBlock,
        DeviceAttr::ComputeVersion,
        DeviceAttr::DeviceName,
        DeviceAttr::MaxClockRate,
        DeviceAttr::MultiProcessorCount,
        DeviceAttr::MaxThreadDimensions,
        DeviceAttr::MaxRegistersPerBlock,
        DeviceAttr::GcnArch,
        DeviceAttr::ApiVersion,
        DeviceAttr::DriverVersion,
        DeviceAttr::L2CacheSizeBytes,
        DeviceAttr::TotalGlobalMemory,
        DeviceAttr::AvailableGlobalMemory,
        DeviceAttr::ImagePitchAlignment,
    ];

    /// The attribute with TVM's number `kind`, or a `ValueError` naming it.
    pub fn from_i32(kind: i32) -> Result<DeviceAttr> {
        usize::try_from(kind)
            .ok()
            .and_then(|k| Self::ALL.get(k).copied())
            .ok_or_else(|| {
                Error::value_error(format!(
                    "unknown device attribute kind {kind} (expected 0..={})",
                    Self::ALL.len() - 1
                ))
            })
    }
}

/// What a device must provide. One static instance per device type, shared by all threads.
///
/// Pointers are device pointers: for the CPU they are host addresses; for other devices they
/// may be handles (OpenCL buffers) that only the device API understands.
pub trait DeviceApi: Send + Sync {
    /// Short name of the device type (`"cpu"`, `"opencl"`), for messages.
    fn name(&self) -> &'static str;

    /// Reads an attribute; attributes a device does not know are None.
    fn get_attr(&self, dev: Device, kind: DeviceAttr) -> Result<Any>;

    /// Allocates `nbytes` (0 is allowed and gives a valid, unique pointer) aligned to
    /// `alignment` (a power of two; at least [`ALLOC_ALIGNMENT`] is always used).
    fn alloc_data_space(
        &self,
        dev: Device,
        nbytes: usize,
        alignment: usize,
        dtype_hint: DataType,
    ) -> Result<*mut c_void>;

    /// Frees memory from [`DeviceApi::alloc_data_space`]; NULL is ignored.
    ///
    /// # Safety
    /// `ptr` must come from `alloc_data_space` of this API for `dev` and not be freed yet.
    unsafe fn free_data_space(&self, dev: Device, ptr: *mut c_void) -> Result<()>;

    /// Copies the elements of `from` into `to` (same shape and dtype, checked by the caller),
    /// honouring `byte_offset` and strides. At least one side is on this API's device type; the
    /// other is on the same device type or on the CPU.
    ///
    /// # Safety
    /// Both tensors must describe valid memory for their shape, strides and dtype.
    unsafe fn copy_data_from_to(
        &self,
        from: &DLTensor,
        to: &DLTensor,
        stream: StreamHandle,
    ) -> Result<()>;

    /// Creates a stream; devices without streams return NULL (the default stream).
    fn create_stream(&self, _dev: Device) -> Result<StreamHandle> {
        Ok(std::ptr::null_mut())
    }

    /// Frees a stream from [`DeviceApi::create_stream`].
    ///
    /// # Safety
    /// `stream` must come from `create_stream` for `dev` and be idle.
    unsafe fn free_stream(&self, _dev: Device, _stream: StreamHandle) -> Result<()> {
        Ok(())
    }

    /// Waits until all work queued on `stream` is done.
    ///
    /// # Safety
    /// `stream` must be NULL or a live stream of `dev`.
    unsafe fn stream_sync(&self, dev: Device, stream: StreamHandle) -> Result<()>;

    /// Allocates temporary memory for generated code (`TVMBackendAllocWorkspace`); by default
    /// plain [`DeviceApi::alloc_data_space`].
    fn alloc_workspace(
        &self,
        dev: Device,
        nbytes: usize,
        dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        self.alloc_data_space(dev, nbytes, ALLOC_ALIGNMENT, dtype_hint)
    }

    /// Frees memory from [`DeviceApi::alloc_workspace`].
    ///
    /// # Safety
    /// `ptr` must come from `alloc_workspace` for `dev` and not be freed yet.
    unsafe fn free_workspace(&self, dev: Device, ptr: *mut c_void) -> Result<()> {
        // SAFETY: the default alloc_workspace allocates with alloc_data_space, and the caller
        // guarantees `ptr` came from it.
        unsafe { self.free_data_space(dev, ptr) }
    }
}

/// A device API registered at start-up (see [`register_device_api!`](crate::register_device_api)).
pub struct DeviceApiRegistration {
    /// DLPack device type code.
    pub device_type: i32,
    /// The implementation.
    pub api: &'static dyn DeviceApi,
}

kiln_ffi::inventory::collect!(DeviceApiRegistration);

/// Registers a device API for a device type at start-up:
///
/// ```ignore
/// kiln_runtime::register_device_api!(kiln_ffi::device::device_type::OPENCL, &OpenClDeviceApi);
/// ```
#[macro_export]
macro_rules! register_device_api {
    ($device_type:expr, $api:expr) => {
        $crate::ffi::inventory::submit! {
            $crate::device::DeviceApiRegistration { device_type: $device_type, api: $api }
        }
    };
}

/// Registered APIs by device type; the index is the DLPack device type code.
fn table() -> &'static RwLock<Vec<Option<&'static dyn DeviceApi>>> {
    static TABLE: std::sync::OnceLock<RwLock<Vec<Option<&'static dyn DeviceApi>>>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut v: Vec<Option<&'static dyn DeviceApi>> = vec![None; 32];
        v[device_type::CPU as usize] = Some(&cpu::CPU);
        for reg in kiln_ffi::inventory::iter::<DeviceApiRegistration> {
            if let Ok(i) = usize::try_from(reg.device_type) {
                if v.len() <= i {
                    v.resize(i + 1, None);
                }
                v[i] = Some(reg.api);
            }
        }
        RwLock::new(v)
    })
}

/// Registers (or, with `allow_override`, replaces) the device API of `device_type` at run
/// time, e.g. when a device library is loaded.
pub fn register_device_api(
    device_type: i32,
    api: &'static dyn DeviceApi,
    allow_override: bool,
) -> Result<()> {
    let index = usize::try_from(device_type)
        .ok()
        .filter(|&i| i < 4096)
        .ok_or_else(|| {
            Error::value_error(format!(
                "cannot register a device API for device type {device_type}: not a DLPack device type"
            ))
        })?;
    let mut t = table().write().recover();
    if t.len() <= index {
        t.resize(index + 1, None);
    }
    if let (Some(old), false) = (t[index], allow_override) {
        return Err(Error::value_error(format!(
            "a device API (`{}`) is already registered for device type {device_type}",
            old.name()
        )));
    }
    t[index] = Some(api);
    Ok(())
}

/// The device API of a device type, if one is registered.
pub fn find_device_api(device_type: i32) -> Option<&'static dyn DeviceApi> {
    if device_type == kiln_ffi::device::device_type::CPU {
        return Some(&cpu::CPU);
    }
    let t = table().read().recover();
    usize::try_from(device_type)
        .ok()
        .and_then(|i| t.get(i).copied().flatten())
}

/// Text for a device in messages: `opencl:0`, or `device type 42:0` for unknown types.
pub fn device_label(dev: Device) -> String {
    if dev.type_name() == "unknown" {
        format!("device type {}:{}", dev.device_type(), dev.device_id())
    } else {
        dev.to_string()
    }
}

/// The device API for `dev`, or a `ValueError` that names the device.
pub fn device_api(dev: Device) -> Result<&'static dyn DeviceApi> {
    find_device_api(dev.device_type()).ok_or_else(|| {
        Error::value_error(format!(
            "no device API is registered for {} (DLPack device type {}): this Kiln build does \
             not support that device, or its library is not loaded",
            device_label(dev),
            dev.device_type()
        ))
    })
}

/// True when the device type is registered and the device reports that it exists.
pub fn device_exists(dev: Device) -> bool {
    match find_device_api(dev.device_type()) {
        Some(api) => api
            .get_attr(dev, DeviceAttr::Exist)
            .ok()
            .and_then(|v| v.try_as::<i64>().ok())
            .is_some_and(|v| v != 0),
        None => false,
    }
}

/// True for memory the host can address directly (CPU and pinned host memory).
pub fn is_host(dev: Device) -> bool {
    const ROCM_HOST: i32 = 11;
    matches!(
        dev.device_type(),
        device_type::CPU | device_type::CUDA_HOST | ROCM_HOST
    )
}

/// Copies between two tensors, possibly on different devices, through the device API that owns
/// the non-host side (the CPU API when both are on the host).
///
/// # Safety
/// Both tensors must describe valid memory; the caller has checked that shapes and dtypes match.
pub unsafe fn copy_between(from: &DLTensor, to: &DLTensor, stream: StreamHandle) -> Result<()> {
    let (fd, td) = (Device(from.device), Device(to.device));
    let api = match (is_host(fd), is_host(td)) {
        (true, true) => device_api(Device::cpu(0))?,
        (false, true) => device_api(fd)?,
        (true, false) => device_api(td)?,
        (false, false) if fd.device_type() == td.device_type() => device_api(fd)?,
        (false, false) => {
            return Err(Error::value_error(format!(
                "cannot copy from {} to {} directly: copy through a CPU tensor",
                device_label(fd),
                device_label(td)
            )))
        }
    };
    // SAFETY: this function's own contract is copy_data_from_to's, and `api` is the one that
    // serves the non-host side (or the CPU's, when both are on the host).
    unsafe { api.copy_data_from_to(from, to, stream) }
}

register_global!("runtime.DeviceExists", |dev: Device| device_exists(dev));
register_global!("runtime.DeviceGetAttr", |dev: Device,
                                           kind: i32|
 -> Result<Any> {
    let kind = DeviceAttr::from_i32(kind)?;
    if kind == DeviceAttr::Exist {
        return Ok(Any::from(device_exists(dev) as i64));
    }
    device_api(dev)?.get_attr(dev, kind)
});
register_global!(
    "runtime.Device_StreamCreate",
    |dev: Device| -> Result<*mut c_void> { device_api(dev)?.create_stream(dev) }
);
register_global!("runtime.Device_StreamFree", |dev: Device,
                                               s: *mut c_void|
 -> Result<()> {
    if stream::current_stream(dev.device_type(), dev.device_id()) == s {
        stream::set_current_stream(dev.device_type(), dev.device_id(), std::ptr::null_mut());
    }
    // SAFETY: the caller passes a stream it created for `dev` with Device_StreamCreate and no
    // longer uses.
    unsafe { device_api(dev)?.free_stream(dev, s) }
});
register_global!("runtime.Device_SetStream", |dev: Device, s: *mut c_void| {
    stream::set_current_stream(dev.device_type(), dev.device_id(), s);
});
// `runtime.Device_StreamSync(dev, stream)`: waits for `stream`, or (NULL) for this thread's
// current stream of the device, the default stream unless one was set.
register_global!("runtime.Device_StreamSync", |dev: Device,
                                               s: *mut c_void|
 -> Result<()> {
    let s = if s.is_null() {
        stream::current_stream(dev.device_type(), dev.device_id())
    } else {
        s
    };
    // SAFETY: the caller passes NULL or a stream it created for `dev`.
    unsafe { device_api(dev)?.stream_sync(dev, s) }
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_always_registered() {
        assert_eq!(device_api(Device::cpu(0)).unwrap().name(), "cpu");
        assert!(device_exists(Device::cpu(0)));
    }

    #[test]
    fn unregistered_device_is_a_clear_error() {
        let e = device_api(Device::new(device_type::VULKAN, 1))
            .err()
            .unwrap();
        assert_eq!(e.kind(), "ValueError");
        assert!(e.message().contains("vulkan:1"), "{}", e.message());
        let e = device_api(Device::new(99, 0)).err().unwrap();
        assert!(e.message().contains("device type 99:0"), "{}", e.message());
        assert!(!device_exists(Device::new(99, 0)));
        assert!(!device_exists(Device::new(-3, 0)));
    }

    #[test]
    fn attr_kinds_match_tvm_numbers() {
        assert_eq!(DeviceAttr::from_i32(0).unwrap(), DeviceAttr::Exist);
        assert_eq!(
            DeviceAttr::from_i32(14).unwrap(),
            DeviceAttr::TotalGlobalMemory
        );
        assert_eq!(
            DeviceAttr::from_i32(16).unwrap(),
            DeviceAttr::ImagePitchAlignment
        );
        assert_eq!(DeviceAttr::from_i32(17).unwrap_err().kind(), "ValueError");
        assert!(DeviceAttr::from_i32(-1).is_err());
    }

    struct FakeApi;
    impl DeviceApi for FakeApi {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn get_attr(&self, _dev: Device, kind: DeviceAttr) -> Result<Any> {
            Ok(Any::from((kind == DeviceAttr::Exist) as i64))
        }
        fn alloc_data_space(
            &self,
            dev: Device,
            n: usize,
            a: usize,
            t: DataType,
        ) -> Result<*mut c_void> {
            cpu::CPU.alloc_data_space(dev, n, a, t)
        }
        unsafe fn free_data_space(&self, dev: Device, p: *mut c_void) -> Result<()> {
            // SAFETY: the caller's contract, passed on; memory came from the CPU API.
            unsafe { cpu::CPU.free_data_space(dev, p) }
        }
        unsafe fn copy_data_from_to(
            &self,
            _f: &DLTensor,
            _t: &DLTensor,
            _s: StreamHandle,
        ) -> Result<()> {
            Err(Error::runtime_error("fake copy"))
        }
        unsafe fn stream_sync(&self, _dev: Device, _s: StreamHandle) -> Result<()> {
            Ok(())
        }
    }
    static FAKE: FakeApi = FakeApi;

    #[test]
    fn run_time_registration_and_override() {
        let ty = 1000;
        register_device_api(ty, &FAKE, false).unwrap();
        assert!(device_exists(Device::new(ty, 0)));
        assert_eq!(device_api(Device::new(ty, 0)).unwrap().name(), "fake");
        let e = register_device_api(ty, &FAKE, false).unwrap_err();
        assert!(
            e.message().contains("already registered"),
            "{}",
            e.message()
        );
        register_device_api(ty, &FAKE, true).unwrap();
        assert!(register_device_api(-1, &FAKE, true).is_err());
    }
}
