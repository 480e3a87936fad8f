//! Modules built for `opencl` run through Kiln's runtime: tensors on the OpenCL device, the
//! host function (LLVM) checks them and launches the generated kernels through the imported
//! OpenCL module (also after `export_library` and loading). Results against Rust loops on
//! fresh random inputs with poisoned outputs.
//! Without an OpenCL device the tests print why and pass without running.

mod device_common;

use device_common::{matmul_shared_local, rowsum, vadd};
use kiln_codegen::driver;
use kiln_ffi::device::device_type::OPENCL;
use kiln_ffi::{DataType, Device};
use kiln_runtime::opencl::device::opencl_device_exists;
use kiln_runtime::tensor::Tensor;
use kiln_testing::rng::{random, seed};
use kiln_testing::{assert_close, nan_vec};

fn cl0() -> Option<Device> {
    let dev = Device::new(OPENCL, 0);
    if opencl_device_exists(dev) {
        Some(dev)
    } else {
        eprintln!("skipped: no OpenCL device");
        None
    }
}

fn on_device(data: &[f32], shape: &[i64], dev: Device) -> Tensor {
    let t = Tensor::empty(shape, DataType::float(32), dev).unwrap();
    t.copy_from_slice(data).unwrap();
    t
}

#[test]
fn vector_add_with_symbolic_length() {
    let Some(dev) = cl0() else { return };
    let (s, args) = vadd();
    let m = driver::build(&s, &args, "opencl", "vadd").unwrap();
    let f = m.function("vadd").unwrap();
    let sd = seed("opencl_run_vadd");
    for n in [1usize, 64, 1000] {
        let (a, b) = (random(n, sd + n as u64), random(n, sd + 1 + n as u64));
        let shape = [n as i64];
        let c = on_device(&nan_vec(n), &shape, dev);
        f.invoke::<()>((
            on_device(&a, &shape, dev),
            on_device(&b, &shape, dev),
            c.clone(),
        ))
        .unwrap();
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        assert_close(&c.to_vec::<f32>().unwrap(), &want, 0.0, "vadd", sd);
    }
    // Exported to one library and loaded again: the kernels travel in it.
    let dir = kiln_runtime::toolchain::TempDir::new("opencl_run").unwrap();
    let so = dir.path().join("vadd.so");
    kiln_runtime::module::export_library(&m, &so, &Default::default()).unwrap();
    let loaded = kiln_runtime::module::load_module(&so).unwrap();
    let n = 300usize;
    let (a, b) = (random(n, sd + 9), random(n, sd + 10));
    let c = on_device(&nan_vec(n), &[n as i64], dev);
    loaded
        .function("vadd")
        .unwrap()
        .invoke::<()>((
            on_device(&a, &[n as i64], dev),
            on_device(&b, &[n as i64], dev),
            c.clone(),
        ))
        .unwrap();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_close(&c.to_vec::<f32>().unwrap(), &want, 0.0, "loaded vadd", sd);
    // A tensor on the CPU is refused by the host function's checks.
    let cpu = Tensor::empty(&[4], DataType::float(32), Device::cpu(0)).unwrap();
    let d = on_device(&[0.0; 4], &[4], dev);
    let e = f.invoke::<()>((cpu, d.clone(), d)).unwrap_err().to_string();
    assert!(e.contains("device_type"), "{e}");
}

#[test]
fn row_sum_and_shared_memory_matmul() {
    let Some(dev) = cl0() else { return };
    let sd = seed("opencl_run_rowsum");
    let (s, args) = rowsum();
    let m = driver::build(&s, &args, "opencl", "rowsum").unwrap();
    let rows = 100usize;
    let a = random(rows * 128, sd);
    let r = on_device(&nan_vec(rows), &[rows as i64], dev);
    m.function("rowsum")
        .unwrap()
        .invoke::<()>((on_device(&a, &[rows as i64, 128], dev), r.clone()))
        .unwrap();
    let want: Vec<f32> = (0..rows)
        .map(|i| a[i * 128..(i + 1) * 128].iter().sum())
        .collect();
    assert_close(&r.to_vec::<f32>().unwrap(), &want, 1e-5, "rowsum", sd);

    let (s, args) = matmul_shared_local(64);
    let m = driver::build(&s, &args, "opencl", "mm").unwrap();
    let (a, b) = (random(64 * 64, sd + 1), random(64 * 64, sd + 2));
    let c = on_device(&nan_vec(64 * 64), &[64, 64], dev);
    m.function("mm")
        .unwrap()
        .invoke::<()>((
            on_device(&a, &[64, 64], dev),
            on_device(&b, &[64, 64], dev),
            c.clone(),
        ))
        .unwrap();
    let mut want = vec![0.0f32; 64 * 64];
    for i in 0..64 {
        for j in 0..64 {
            want[i * 64 + j] = (0..64).map(|k| a[i * 64 + k] * b[k * 64 + j]).sum();
        }
    }
    assert_close(&c.to_vec::<f32>().unwrap(), &want, 1e-4, "mm", sd);
}

#[test]
fn a_function_outlives_its_module() {
    // The host code finds its kernel through the module it was loaded into: the function must
    // keep that module alive after the caller drops it.
    let Some(dev) = cl0() else { return };
    let (s, args) = vadd();
    let f = driver::build(&s, &args, "opencl", "vadd")
        .unwrap()
        .function("vadd")
        .unwrap();
    let sd = seed("opencl_run_outlives");
    let (a, b) = (random(77, sd), random(77, sd + 1));
    let c = on_device(&nan_vec(77), &[77], dev);
    f.invoke::<()>((
        on_device(&a, &[77], dev),
        on_device(&b, &[77], dev),
        c.clone(),
    ))
    .unwrap();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_close(&c.to_vec::<f32>().unwrap(), &want, 0.0, "vadd", sd);
}
