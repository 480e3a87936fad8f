//! The OpenCL device API and module on whatever OpenCL platform the machine has (PoCL on CI):
//! hand-written kernels launched through the module's packed functions with TVM's launch
//! convention, results against Rust loops on fresh random inputs with poisoned outputs, the
//! module's bytes round trip, device-to-device copies, attributes, and the errors of bad input.
//! Without an OpenCL platform every test prints why and passes without running.
#![cfg(feature = "opencl")]

use kiln_ffi::device::device_type::OPENCL;
use kiln_ffi::{Any, DataType, Device};
use kiln_runtime::module::{load_from_bytes, Module};
use kiln_runtime::opencl::device::opencl_device_exists;
use kiln_runtime::opencl::{FunctionInfo, OpenClModule};
use kiln_runtime::tensor::Tensor;
use kiln_testing::error::expect_err;
use kiln_testing::rng::{random, seed};
use kiln_testing::{assert_close, nan_vec};
use std::ffi::c_void;

fn cl0() -> Option<Device> {
    let dev = Device::new(OPENCL, 0);
    if opencl_device_exists(dev) {
        Some(dev)
    } else {
        eprintln!("skipped: no OpenCL device (install pocl-opencl-icd: scripts/setup.sh does)");
        None
    }
}

const VADD: &str = r#"
__kernel void vadd(__global const float* restrict a, __global const float* restrict b,
                   __global float* restrict c, int n) {
  int i = get_group_id(0) * get_local_size(0) + get_local_id(0);
  if (i < n) {
    c[i] = a[i] + b[i];
  }
}

__kernel void rowsum(__global const float* restrict a, __global float* restrict out, int m) {
  int r = get_group_id(1) * get_local_size(1) + get_local_id(1);
  float s = 0.0f;
  for (int j = 0; j < m; ++j) {
    s += a[r * m + j];
  }
  out[r] = s;
}
"#;

fn handle() -> DataType {
    DataType::handle()
}

fn vadd_module() -> Module {
    OpenClModule::create(
        VADD.to_string(),
        vec![
            FunctionInfo {
                name: "vadd".into(),
                arg_types: vec![handle(), handle(), handle(), DataType::int(32)],
                launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
            },
            FunctionInfo {
                name: "rowsum".into(),
                arg_types: vec![handle(), handle(), DataType::int(32)],
                launch_param_tags: vec!["blockIdx.y".into(), "threadIdx.y".into()],
            },
        ],
    )
    .unwrap()
}

fn on_device(data: &[f32], dev: Device) -> Tensor {
    let t = Tensor::empty(&[data.len() as i64], DataType::float(32), dev).unwrap();
    t.copy_from_slice(data).unwrap();
    t
}

fn ptr(t: &Tensor) -> *mut c_void {
    t.raw_data()
}

fn run_vadd(m: &Module, dev: Device, n: usize, seed: u64) {
    let (a, b) = (random(n, seed), random(n, seed + 1));
    let (da, db) = (on_device(&a, dev), on_device(&b, dev));
    let dc = on_device(&nan_vec(n), dev);
    let threads = 64usize;
    let blocks = n.div_ceil(threads);
    m.function("vadd")
        .unwrap()
        .invoke::<()>((
            ptr(&da),
            ptr(&db),
            ptr(&dc),
            n as i64,
            blocks as i64,
            threads as i64,
        ))
        .unwrap();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_close(&dc.to_vec::<f32>().unwrap(), &want, 0.0, "vadd", seed);
}

#[test]
fn vector_add_and_row_sum_match_loops() {
    let Some(dev) = cl0() else { return };
    let m = vadd_module();
    let seed = seed("opencl_vadd");
    for n in [1usize, 63, 64, 1000, 4099] {
        run_vadd(&m, dev, n, seed + n as u64);
    }
    // A second dimension: one work-item per row, rows split 4 x 8.
    let (rows, cols) = (32usize, 37usize);
    let a = random(rows * cols, seed + 7);
    let da = on_device(&a, dev);
    let out = on_device(&nan_vec(rows), dev);
    m.function("rowsum")
        .unwrap()
        .invoke::<()>((ptr(&da), ptr(&out), cols as i64, 4i64, 8i64))
        .unwrap();
    let want: Vec<f32> = (0..rows)
        .map(|r| a[r * cols..(r + 1) * cols].iter().sum())
        .collect();
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-5, "rowsum", seed);
}

#[test]
fn module_bytes_round_trip_and_run() {
    let Some(dev) = cl0() else { return };
    let m = vadd_module();
    let bytes = m.save_to_bytes().unwrap();
    let back = load_from_bytes("opencl", &bytes).unwrap();
    assert_eq!(back.kind(), "opencl");
    assert_eq!(back.inspect_source("cl").unwrap(), VADD);
    run_vadd(&back, dev, 777, seed("opencl_round_trip"));

    // Damaged bytes: errors name the offset, never a crash.
    for cut in [0usize, 5, 8, 12, bytes.len() - 1] {
        let e = expect_err(
            load_from_bytes("opencl", &bytes[..cut]),
            "ValueError",
            "byte offset",
        );
        assert!(e.message().contains("OpenCL module"), "{}", e.message());
    }
    let mut extra = bytes.clone();
    extra.push(0);
    expect_err(load_from_bytes("opencl", &extra), "ValueError", "trailing");
}

#[test]
fn device_copies_and_attributes() {
    let Some(dev) = cl0() else { return };
    let x = random(1000, seed("opencl_copy"));
    let a = on_device(&x, dev);
    let b = Tensor::empty(&[1000], DataType::float(32), dev).unwrap();
    b.copy_from(&a).unwrap();
    assert_eq!(b.to_vec::<f32>().unwrap(), x);
    // A view with a byte offset copies from the right place.
    let host = Tensor::from_slice(&x, &[1000]).unwrap();
    let back = host
        .to_device(dev)
        .unwrap()
        .to_device(Device::cpu(0))
        .unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), x);

    let attr = kiln_ffi::registry::get("runtime.DeviceGetAttr").unwrap();
    let name: String = attr.invoke((dev, 5i32)).unwrap();
    assert!(!name.is_empty());
    let threads: i64 = attr.invoke((dev, 1i32)).unwrap();
    assert!(threads >= 1);
    let exists: i64 = attr.invoke((Device::new(OPENCL, 99), 0i32)).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn bad_input_gets_clear_errors() {
    let Some(dev) = cl0() else { return };
    // A device that does not exist.
    expect_err(
        Tensor::empty(&[4], DataType::float(32), Device::new(OPENCL, 99)),
        "ValueError",
        "OpenCL device 99 does not exist",
    );
    // A copy of the wrong size.
    let t = Tensor::empty(&[4], DataType::float(32), dev).unwrap();
    expect_err(
        t.copy_from_bytes(&[0u8; 12]),
        "ValueError",
        "holds 16 bytes but got 12",
    );
    // A kernel that does not build: the message quotes the offending source line.
    let broken = OpenClModule::create(
        "__kernel void k(__global float* a) {\n  a[0] = undefined_name;\n}\n".into(),
        vec![FunctionInfo {
            name: "k".into(),
            arg_types: vec![handle()],
            launch_param_tags: vec!["threadIdx.x".into()],
        }],
    )
    .unwrap();
    let e = expect_err(
        broken.function("k").unwrap().invoke::<()>((ptr(&t), 1i64)),
        "RuntimeError",
        "does not build",
    );
    assert!(e.message().contains("undefined_name"), "{}", e.message());
    // A launch larger than the device allows.
    let m = vadd_module();
    let f = m.function("vadd").unwrap();
    expect_err(
        f.invoke::<()>((ptr(&t), ptr(&t), ptr(&t), 4i64, 1i64, 1i64 << 24)),
        "ValueError",
        "is larger than",
    );
    // Wrong arity and argument kinds.
    expect_err(
        f.invoke::<()>((ptr(&t), 4i64)),
        "TypeError",
        "takes 4 argument(s)",
    );
    expect_err(
        f.invoke::<()>((1.5f64, ptr(&t), ptr(&t), 4i64, 1i64, 4i64)),
        "TypeError",
        "argument 0",
    );
    // Module-level checks.
    expect_err(
        OpenClModule::create(
            String::new(),
            vec![FunctionInfo {
                name: "k".into(),
                arg_types: vec![],
                launch_param_tags: vec!["warpIdx.x".into()],
            }],
        ),
        "ValueError",
        "not a thread index",
    );
    let _ = Any::none();
}

#[test]
fn kernels_and_copies_follow_the_current_stream() {
    let Some(dev) = cl0() else { return };
    let api = kiln_runtime::device::device_api(dev).unwrap();
    let stream = api.create_stream(dev).unwrap();
    assert!(!stream.is_null());
    let old = kiln_runtime::device::stream::set_current_stream(OPENCL, 0, stream);
    assert!(old.is_null());
    assert_eq!(
        kiln_runtime::device::stream::current_stream(OPENCL, 0),
        stream
    );
    // Everything below goes to the new queue (an in-order queue, so results are ordered).
    run_vadd(&vadd_module(), dev, 1000, seed("opencl_stream"));
    // SAFETY: the stream was created for `dev` above.
    unsafe { api.stream_sync(dev, stream).unwrap() };
    kiln_runtime::device::stream::set_current_stream(OPENCL, 0, std::ptr::null_mut());
    // SAFETY: created above, idle after the sync, no longer current.
    unsafe { api.free_stream(dev, stream).unwrap() };
    // Another thread's current stream is its own.
    std::thread::spawn(|| {
        assert!(kiln_runtime::device::stream::current_stream(OPENCL, 0).is_null());
    })
    .join()
    .unwrap();
}

#[test]
fn program_binaries_travel_with_the_module() {
    let Some(dev) = cl0() else { return };
    let m = vadd_module();
    let node = || m.downcast_node::<OpenClModule>().unwrap();
    assert!(node().binary_devices().is_empty());
    // Saved before any build: no binary, and the version-1 layout (no binary section) loads.
    let bytes = m.save_to_bytes().unwrap();
    let mut v1 = bytes[..bytes.len() - 8].to_vec();
    v1[..8].copy_from_slice(b"KLNOCL01");
    run_vadd(
        &load_from_bytes("opencl", &v1).unwrap(),
        dev,
        50,
        seed("opencl_v1"),
    );
    // Built once (by a call), the driver's binary is kept and saved.
    run_vadd(&m, dev, 100, seed("opencl_binary"));
    let keys = node().binary_devices();
    if keys.is_empty() {
        println!("skipped the rest: this OpenCL driver gives no program binary");
        return;
    }
    let saved = m.save_to_bytes().unwrap();
    assert!(saved.len() > bytes.len());
    let back = load_from_bytes("opencl", &saved).unwrap();
    assert_eq!(
        back.downcast_node::<OpenClModule>()
            .unwrap()
            .binary_devices(),
        keys
    );
    run_vadd(&back, dev, 1000, seed("opencl_from_binary"));
    // A binary for another device is left alone: the source is built, and its binary added.
    let key = keys[0].as_bytes();
    let at = saved.windows(key.len()).position(|w| w == key).unwrap();
    let mut other = saved.clone();
    other[at..at + key.len()].fill(b'x');
    let moved = load_from_bytes("opencl", &other).unwrap();
    run_vadd(&moved, dev, 333, seed("opencl_other_binary"));
    assert_eq!(
        moved
            .downcast_node::<OpenClModule>()
            .unwrap()
            .binary_devices()
            .len(),
        2
    );
}
