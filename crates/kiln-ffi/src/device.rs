//! Devices (`DLDevice`): a device type and an id.

use crate::abi::DLDevice;
use std::fmt;

/// DLPack device types.
pub mod device_type {
    /// The host CPU.
    pub const CPU: i32 = 1;
    /// An NVIDIA GPU.
    pub const CUDA: i32 = 2;
    /// Page-locked host memory that CUDA devices can read.
    pub const CUDA_HOST: i32 = 3;
    /// An OpenCL device.
    pub const OPENCL: i32 = 4;
    /// A Vulkan device.
    pub const VULKAN: i32 = 7;
    /// An Apple Metal device.
    pub const METAL: i32 = 8;
    /// An AMD GPU (ROCm).
    pub const ROCM: i32 = 10;
}

/// A device: where memory lives and code runs.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct Device(pub DLDevice);

impl Device {
    /// Makes a device from type and id.
    pub const fn new(device_type: i32, device_id: i32) -> Self {
        Device(DLDevice {
            device_type,
            device_id,
        })
    }
    /// The host CPU.
    pub const fn cpu(id: i32) -> Self {
        Self::new(device_type::CPU, id)
    }
    /// The device type ([`device_type`]).
    pub fn device_type(self) -> i32 {
        self.0.device_type
    }
    /// The device number within its type.
    pub fn device_id(self) -> i32 {
        self.0.device_id
    }
    /// The usual lowercase name of the device type (`cpu`, `cuda`, `opencl`, ...).
    pub fn type_name(self) -> &'static str {
        match self.0.device_type {
            device_type::CPU => "cpu",
            device_type::CUDA => "cuda",
            device_type::CUDA_HOST => "cuda_host",
            device_type::OPENCL => "opencl",
            device_type::VULKAN => "vulkan",
            device_type::METAL => "metal",
            device_type::ROCM => "rocm",
            _ => "unknown",
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.type_name(), self.0.device_id)
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({self})")
    }
}
