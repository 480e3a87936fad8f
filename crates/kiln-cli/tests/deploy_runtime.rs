//! The bundled model (`examples/model/model.onnx`) compiled by `kiln compile`, then loaded and
//! run in this process through `kiln_runtime` as an application would (`load_module`,
//! `lib["default"](cpu(0))`, `set_input` / `run` / `get_output` by name): the outputs equal
//! `kiln run`'s bit for bit and onnxruntime's within rtol 1e-4 / atol 1e-5, and executors made
//! from one loaded library run concurrently from several threads, each giving the result of a
//! single-threaded run of its own input.

mod common;

use common::{root, KILN};
use kiln_ffi::{Device, Function};
use kiln_runtime::module::{load_module, Module};
use kiln_runtime::tensor::Tensor;
use kiln_testing::npy;
use kiln_testing::process::python_with;
use kiln_testing::random;
use kiln_testing::rng::fresh_seed;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The bundled model's input (see `examples/model/make_model.py`).
const INPUT: &str = "input";
const SHAPE: [i64; 4] = [1, 3, 32, 32];

/// Compiles the bundled model into `dir/deploy.so` with the `kiln` binary.
fn compile(dir: &Path) -> PathBuf {
    let lib = dir.join("deploy.so");
    let out = Command::new(KILN)
        .arg("compile")
        .arg(root().join("examples/model/model.onnx"))
        .arg("-o")
        .arg(&lib)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kiln compile failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

/// An executor of a loaded library and its packed functions, as an application uses them.
struct Executor {
    set_input: Function,
    run: Function,
    get_output: Function,
    _module: Module,
}

impl Executor {
    /// `lib["default"](cpu(0))`.
    fn new(lib: &Module) -> Executor {
        let default = lib.function("default").unwrap();
        let module: Module = default.invoke((Device::cpu(0),)).unwrap();
        Executor {
            set_input: module.function("set_input").unwrap(),
            run: module.function("run").unwrap(),
            get_output: module.function("get_output").unwrap(),
            _module: module,
        }
    }

    /// Runs on `x` and returns output 0, poisoned with NaN before the run.
    fn infer(&self, x: &[f32]) -> Vec<f32> {
        let input = Tensor::from_slice(x, &SHAPE).unwrap();
        self.set_input
            .call_any(&[INPUT.into(), input.into()])
            .unwrap();
        let out: Tensor = self
            .get_output
            .call_any(&[0i64.into()])
            .unwrap()
            .try_as()
            .unwrap();
        let poison = Tensor::from_slice(&vec![f32::NAN; out.numel()], out.shape()).unwrap();
        out.copy_from(&poison).unwrap();
        self.run.call_any(&[]).unwrap();
        let got = out.to_vec::<f32>().unwrap();
        assert!(got.iter().all(|v| v.is_finite()), "{got:?}");
        got
    }
}

#[test]
fn rust_runtime_matches_cli_and_onnxruntime() {
    kiln::link_all();
    let dir = tempfile::tempdir().unwrap();
    let lib_path = compile(dir.path());
    let seed = fresh_seed();
    let n = SHAPE.iter().product::<i64>() as usize;
    let x = random(n, seed);
    let x_path = dir.path().join("x.npy");
    std::fs::write(&x_path, npy::f32_bytes(&x, &SHAPE)).unwrap();

    let lib = load_module(&lib_path).unwrap();
    let got = Executor::new(&lib).infer(&x);
    let got_path = dir.path().join("rust.npy");
    std::fs::write(&got_path, npy::f32_bytes(&got, &[1, got.len() as i64])).unwrap();

    // `kiln run` on the same library and input gives the same bits.
    let cli_dir = dir.path().join("cli");
    let out = Command::new(KILN)
        .arg("run")
        .arg(&lib_path)
        .arg("--input")
        .arg(format!("{INPUT}={}", x_path.display()))
        .arg("--output-dir")
        .arg(&cli_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli = npy::read_f32_file(&cli_dir.join("output_0.npy"));
    assert_eq!(
        cli.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "seed {seed}"
    );

    // And onnxruntime agrees.
    let Some(py) = python_with(&["numpy", "onnxruntime"]) else {
        return;
    };
    let check = r#"
import sys, numpy as np, onnxruntime as ort
model, x, got = sys.argv[1:4]
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
want = sess.run(None, {"input": np.load(x)})[0]
np.testing.assert_allclose(np.load(got).reshape(want.shape), want, rtol=1e-4, atol=1e-5)
print("ok")
"#;
    let out = Command::new(py)
        .arg("-c")
        .arg(check)
        .arg(root().join("examples/model/model.onnx"))
        .arg(&x_path)
        .arg(&got_path)
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
        "seed {seed}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn executors_from_one_library_run_concurrently() {
    const THREADS: u64 = 6;
    const RUNS: usize = 20;
    kiln::link_all();
    let dir = tempfile::tempdir().unwrap();
    let lib = load_module(compile(dir.path())).unwrap();
    let n = SHAPE.iter().product::<i64>() as usize;
    let base = fresh_seed();
    // Single-threaded results first, one input per thread.
    let single = Executor::new(&lib);
    let expected: Vec<(Vec<f32>, Vec<f32>)> = (0..THREADS)
        .map(|t| {
            let x = random(n, base.wrapping_add(t));
            let y = single.infer(&x);
            (x, y)
        })
        .collect();
    std::thread::scope(|s| {
        for (t, (x, want)) in expected.iter().enumerate() {
            let lib = &lib;
            s.spawn(move || {
                let exec = Executor::new(lib);
                for run in 0..RUNS {
                    let got = exec.infer(x);
                    assert!(
                        got.iter()
                            .zip(want)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "thread {t}, run {run}: differs from the single-threaded result \
                         (seed {})",
                        base.wrapping_add(t as u64)
                    );
                }
            });
        }
    });
}
