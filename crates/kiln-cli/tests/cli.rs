//! End-to-end tests of the `kiln` binary: `.npy` round trips, `inspect`, `compile` + `run` +
//! `bench` on a small conv/relu/dense ONNX model (outputs compared to onnxruntime), and clear
//! errors (non-zero exit, no panic) on bad input. Tests that need the project's Python venv
//! (numpy, onnx, onnxruntime) skip with a message when it is missing.

mod common;

use common::{kiln, kiln_ok, s, KILN};
use kiln_testing::process::python_with;
use std::path::Path;
use std::process::Command;

/// Makes `small.onnx` (Conv 3→4 3x3, Relu, Flatten, Gemm to 10; input `x` [N,3,8,8]) in argv[1].
const MAKE_MODEL: &str = r#"
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(0)
inits = [
    numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w"),
    numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
    numpy_helper.from_array((rng.standard_normal((10, 144)) * 0.1).astype(np.float32), "fw"),
    numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fb"),
]
nodes = [
    helper.make_node("Conv", ["x", "w", "b"], ["c"]),
    helper.make_node("Relu", ["c"], ["r"]),
    helper.make_node("Flatten", ["r"], ["f"], axis=1),
    helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
]
g = helper.make_graph(
    nodes, "small",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
"#;

/// Runs a Python snippet with arguments; panics with its stderr when it fails.
fn run_py(py: &Path, code: &str, args: &[&Path]) -> String {
    let out = Command::new(py)
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `kiln`, expects a clean failure (non-zero exit, a `kiln:` message, no panic) whose
/// message contains `needle`.
fn kiln_fails(args: &[&str], needle: &str) {
    let out = kiln(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "kiln {args:?} succeeded");
    assert!(!err.contains("panicked"), "kiln {args:?} panicked:\n{err}");
    assert!(
        err.contains(needle),
        "kiln {args:?}: expected {needle:?} in:\n{err}"
    );
}

#[test]
fn npy_round_trip() {
    let Some(py) = python_with(&["numpy"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let write = r#"
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(3)
np.save(d + "/f32.npy", rng.standard_normal((2, 3, 4)).astype(np.float32))
np.save(d + "/f16.npy", rng.standard_normal((5,)).astype(np.float16))
np.save(d + "/i64.npy", np.arange(-6, 6, dtype=np.int64).reshape(3, 4))
np.save(d + "/i32.npy", np.array(7, dtype=np.int32))
np.save(d + "/i8.npy", np.arange(-4, 4, dtype=np.int8))
np.save(d + "/u8.npy", np.arange(250, 256, dtype=np.uint8).reshape(2, 3))
np.save(d + "/b.npy", np.array([True, False, True]))
"#;
    run_py(&py, write, &[dir.path()]);
    let names = ["f32", "f16", "i64", "i32", "i8", "u8", "b"];
    for n in names {
        let src = dir.path().join(format!("{n}.npy"));
        let dst = dir.path().join(format!("{n}_copy.npy"));
        let out = kiln_ok(&["npy", s(&src), "--copy", s(&dst)]);
        assert!(out.contains(&format!("{n}.npy:")), "{out}");
    }
    let check = r#"
import sys, numpy as np
d = sys.argv[1]
for n in ["f32", "f16", "i64", "i32", "i8", "u8", "b"]:
    a, b = np.load(f"{d}/{n}.npy"), np.load(f"{d}/{n}_copy.npy")
    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), n
print("ok")
"#;
    assert_eq!(run_py(&py, check, &[dir.path()]).trim(), "ok");
    // Fortran order and an unsupported dtype are clear errors.
    let bad = r#"
import sys, numpy as np
np.save(sys.argv[1] + "/fortran.npy", np.asfortranarray(np.ones((2, 3), np.float32)))
np.save(sys.argv[1] + "/c64.npy", np.ones(2, np.complex64))
"#;
    run_py(&py, bad, &[dir.path()]);
    kiln_fails(
        &["npy", s(&dir.path().join("fortran.npy"))],
        "Fortran order",
    );
    kiln_fails(
        &["npy", s(&dir.path().join("c64.npy"))],
        "unsupported dtype",
    );
}

#[test]
fn inspect_onnx_model() {
    let Some(py) = python_with(&["numpy", "onnx"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("small.onnx");
    run_py(&py, MAKE_MODEL, &[&model]);
    let out = kiln_ok(&["inspect", s(&model), "--input-shape", "x=1,3,8,8"]);
    for want in [
        "opset: 13",
        "x: float32 [N, 3, 8, 8]",
        "Conv",
        "Gemm",
        "Relu",
        "@main",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    // Without a static shape the summary still prints; the graph part says why it is missing.
    let out = kiln_ok(&["inspect", s(&model)]);
    assert!(out.contains("op counts"), "{out}");
}

#[test]
fn compile_run_bench_match_onnxruntime() {
    let Some(py) = python_with(&["numpy", "onnx", "onnxruntime"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("small.onnx");
    let lib = dir.path().join("small.so");
    let x = dir.path().join("x.npy");
    let outs = dir.path().join("out");
    run_py(&py, MAKE_MODEL, &[&model]);
    let out = kiln_ok(&[
        "compile",
        s(&model),
        "-o",
        s(&lib),
        "--target",
        "llvm",
        "--input-shape",
        "x=2,3,8,8",
        "-O",
        "3",
    ]);
    assert!(
        out.contains("small.so") && out.contains("compiled in"),
        "{out}"
    );

    let info = kiln_ok(&["inspect", s(&lib)]);
    for want in [
        "GraphExecutorFactory",
        "x: float32 [2, 3, 8, 8]",
        "float32 [2, 10]",
        "params: 4",
    ] {
        assert!(info.contains(want), "missing {want:?} in:\n{info}");
    }

    let make_x = "import sys, numpy as np; np.save(sys.argv[1], \
                  np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32))";
    run_py(&py, make_x, &[&x]);
    kiln_ok(&[
        "run",
        s(&lib),
        "--input",
        &format!("x={}", s(&x)),
        "--output-dir",
        s(&outs),
    ]);
    let compare = r#"
import sys, numpy as np, onnxruntime as ort
model, x, got = sys.argv[1:4]
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
want = sess.run(None, {"x": np.load(x)})[0]
got = np.load(got)
assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype)
np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
print("ok")
"#;
    let y = outs.join("output_0.npy");
    assert_eq!(run_py(&py, compare, &[&model, &x, &y]).trim(), "ok");

    // Random inputs print their seed.
    let out = kiln_ok(&["run", s(&lib), "--seed", "5", "--output-dir", s(&outs)]);
    assert!(out.contains("seed 5"), "{out}");

    let out = Command::new(KILN)
        .args([
            "bench",
            s(&lib),
            "--repeat",
            "3",
            "--number",
            "2",
            "--profile",
        ])
        .env("KILN_NUM_THREADS", "2")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "2 threads",
        "median",
        "min",
        "max",
        "fused_nn_conv2d",
        "Total",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }

    // A wrong input shape, an unknown input name.
    let bad = dir.path().join("bad.npy");
    run_py(
        &py,
        "import sys, numpy as np; np.save(sys.argv[1], np.zeros((1, 3, 8, 8), np.float32))",
        &[&bad],
    );
    let flag = format!("x={}", s(&bad));
    kiln_fails(
        &["run", s(&lib), "--input", &flag],
        "expects float32 [2, 3, 8, 8]",
    );
    let wrong_dtype = dir.path().join("i64.npy");
    run_py(
        &py,
        "import sys, numpy as np; np.save(sys.argv[1], np.zeros((2, 3, 8, 8), np.int64))",
        &[&wrong_dtype],
    );
    let flag = format!("x={}", s(&wrong_dtype));
    kiln_fails(&["run", s(&lib), "--input", &flag], "holds int64");
    // A symbolic dimension without --input-shape names the input and the flag.
    let lib2 = dir.path().join("nodims.so");
    kiln_fails(&["compile", s(&model), "-o", s(&lib2)], "--input-shape x=");
    let flag = format!("nope={}", s(&x));
    kiln_fails(
        &["run", s(&lib), "--input", &flag],
        "no input named \"nope\"",
    );
}

#[test]
fn bad_inputs_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.onnx");
    kiln_fails(&["inspect", s(&missing)], "does not exist");
    kiln_fails(
        &["run", s(&dir.path().join("missing.so"))],
        "does not exist",
    );
    kiln_fails(
        &["bench", s(&dir.path().join("missing.so"))],
        "does not exist",
    );
    kiln_fails(&["npy", s(&dir.path().join("missing.npy"))], "cannot read");
    let out_so = dir.path().join("out.so");
    kiln_fails(&["compile", s(&missing), "-o", s(&out_so)], "load failed");

    let garbage = dir.path().join("garbage.onnx");
    std::fs::write(&garbage, b"this is not a model \x07\x07\x07").unwrap();
    kiln_fails(
        &["compile", s(&garbage), "-o", s(&out_so)],
        "not a valid ONNX model",
    );
    kiln_fails(&["inspect", s(&garbage)], "not a valid ONNX model");
    kiln_fails(&["compile", s(&garbage), "-o", "x.onnx"], "must end in .so");

    let garbage_so = dir.path().join("garbage.so");
    std::fs::write(&garbage_so, b"not a library").unwrap();
    kiln_fails(&["run", s(&garbage_so)], "cannot load");
    kiln_fails(&["inspect", s(&garbage_so)], "cannot load");

    let garbage_npy = dir.path().join("garbage.npy");
    std::fs::write(&garbage_npy, b"\x93NUMPY\x01\x00\xff\x00{").unwrap();
    kiln_fails(
        &["npy", s(&garbage_npy)],
        "garbage.npy is not a valid .npy file",
    );
}
