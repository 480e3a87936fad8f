//! The bundled model compiled with `kiln compile --target opencl`: `kiln inspect` shows the
//! OpenCL module and that every function runs on the device, `kiln run` creates the executor on
//! the OpenCL device itself and matches the stored onnxruntime output, and bad device targets
//! are refused with a message naming the flag. Without an OpenCL device the running part prints
//! why and is skipped.

mod common;

use common::{kiln, kiln_ok, root, run_bundled, s};
use kiln_ffi::device::device_type::OPENCL;
use kiln_ffi::Device;

#[test]
fn the_bundled_model_compiles_for_opencl_and_runs_on_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("cl.so");
    let model = root().join("examples/model/model.onnx");
    let out = kiln_ok(&[
        "compile",
        s(&model),
        "-o",
        s(&lib),
        "--target",
        "opencl -max_num_threads=128",
    ]);
    assert!(out.contains("opencl -max_num_threads=128"), "{out}");
    let text = kiln_ok(&["inspect", s(&lib)]);
    assert!(text.contains("module \"opencl\""), "{text}");
    assert!(
        text.contains("placement (device module \"opencl\"):"),
        "{text}"
    );
    assert!(
        text.contains("fused_nn_softmax: device (") && !text.contains(": host"),
        "{text}"
    );
    if !kiln_runtime::device::device_exists(Device::new(OPENCL, 0)) {
        eprintln!("skipped running: no OpenCL device (scripts/setup.sh installs PoCL)");
        return;
    }
    run_bundled(&lib, dir.path());
}

#[test]
fn bad_device_targets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("bad.so");
    let model = root().join("examples/model/model.onnx");
    for (target, why) in [
        ("opencl -max_num_threads=0", "must be a positive integer"),
        ("opencl -mcpu=native", "unknown flag `-mcpu`"),
        ("openclx", "unknown target kind `openclx`"),
    ] {
        let out = kiln(&["compile", s(&model), "-o", s(&lib), "--target", target]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{target}: {err}");
        assert!(
            err.contains(why) && !err.contains("panicked"),
            "{target}: {err}"
        );
        assert!(!lib.exists());
    }
    let out = kiln(&[
        "compile",
        s(&model),
        "-o",
        s(&lib),
        "--target",
        "opencl",
        "--target",
        "llvm",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot be one of several code variants"),
        "{err}"
    );
}
