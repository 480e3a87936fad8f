//! Running what `driver::build(.., "opencl", ..)` makes through Kiln's runtime on the first
//! OpenCL device: inputs copied to the device, the output poisoned with NaN there, the host
//! function called, the output read back. `None` (with the reason printed) where the machine
//! has no OpenCL device.

#![allow(dead_code)]

use kiln_codegen::driver;
use kiln_ffi::device::device_type::OPENCL;
use kiln_ffi::{Any, DataType, Device};
use kiln_runtime::opencl::device::opencl_device_exists;
use kiln_runtime::opencl::OpenClModule;
use kiln_runtime::tensor::Tensor;
use kiln_te::{Schedule, Tensor as TeTensor};

/// The first OpenCL device, or `None` after printing why the test does not run.
pub fn cl0() -> Option<Device> {
    let dev = Device::new(OPENCL, 0);
    if opencl_device_exists(dev) {
        Some(dev)
    } else {
        println!("skipped: no OpenCL device (scripts/setup.sh installs PoCL)");
        None
    }
}

/// A float32 tensor of `shape` on `dev` holding `data`.
pub fn on_device(data: &[f32], shape: &[i64], dev: Device) -> Tensor {
    let t = Tensor::empty(shape, DataType::float(32), dev).unwrap();
    t.copy_from_slice(data).unwrap();
    t
}

/// Builds `s` over `args` (inputs, then one float32 output) for `opencl`, runs it on the
/// device with `inputs` (data and shape of each) into an output of `out_shape` poisoned with
/// NaN, and returns the output; `None` without a device.
pub fn run_opencl(
    s: &Schedule,
    args: &[TeTensor],
    name: &str,
    inputs: &[(&[f32], &[i64])],
    out_shape: &[i64],
) -> Option<Vec<f32>> {
    let dev = cl0()?;
    let m = driver::build(s, args, "opencl", name).unwrap();
    assert_eq!(args.len(), inputs.len() + 1, "one input per input tensor");
    let mut call: Vec<Any> = inputs
        .iter()
        .map(|(v, shape)| on_device(v, shape, dev).into())
        .collect();
    let n = out_shape.iter().product::<i64>() as usize;
    let result = on_device(&vec![f32::NAN; n], out_shape, dev);
    call.push(result.clone().into());
    let views: Vec<_> = call.iter().map(|a| a.view()).collect();
    m.function(name)
        .unwrap()
        .call(&views)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    Some(result.to_vec::<f32>().unwrap())
}

/// Builds the OpenCL program of `s` on the first device, or returns the build error; `None`
/// without a device.
pub fn build_on_device(s: &Schedule, args: &[TeTensor], name: &str) -> Option<Result<(), String>> {
    cl0()?;
    let m = driver::build(s, args, "opencl", name).unwrap();
    let device = &m.imports()[0];
    let node = device
        .downcast_node::<OpenClModule>()
        .expect("an OpenCL module");
    Some(node.build_program(0).map_err(|e| e.to_string()))
}
