//! `kiln demo`: the bundled example. First the FFI the way compiled code and bindings use it
//! (globals by name, callbacks across the ABI, errors with their kind, a reflected object through
//! JSON); then the tensor compiler: a matmul written as a tensor expression, scheduled, lowered,
//! compiled by LLVM for this CPU, loaded and checked against a naive loop; last the main job: the
//! bundled model (`examples/model`, made by `make_model.py` with fixed seeds) compiled by the
//! same pipeline as `kiln compile` into a deploy.so, loaded, run on its stored input, compared to
//! onnxruntime's stored output, and timed. Each step checks its result.

use crate::compile::{build_library, human_size, CompileArgs};
use crate::run::{create_executor, load_factory, lock, runtime_inputs, set_inputs};
use kiln_ffi::{call, json, registry, Any, Array, Device, Error, Function, Result};
use kiln_runtime::toolchain::TempDir;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The tolerances of the comparison with the reference: `|got - want| <= ATOL + RTOL * |want|`.
const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

/// The bundled model's directory in the source tree Kiln was built from.
pub fn default_model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/model")
}

fn check(what: &str, ok: bool) -> Result<()> {
    if ok {
        println!("  ok  {what}");
        Ok(())
    } else {
        Err(Error::runtime_error(format!("demo check failed: {what}")))
    }
}

/// Runs the demo with the model in `model_dir` (default [`default_model_dir`]); fails on the
/// first check that does not hold.
pub fn run(model_dir: Option<&Path>) -> Result<()> {
    println!(
        "Kiln demo: the FFI core ({} global functions registered)",
        registry::names().len()
    );
    let add_one = registry::get_required("testing.add_one")?;
    check(
        "testing.add_one(41) == 42",
        add_one.invoke::<i64>((41i64,))? == 42,
    )?;

    let square = Function::from_typed(|x: f64| x * x);
    let apply = registry::get_required("testing.apply")?;
    let out = call!(apply, square, 1.5f64)?.try_as::<f64>()?;
    check(
        "testing.apply(square, 1.5) == 2.25 through the C convention",
        out == 2.25,
    )?;

    let raise = registry::get_required("testing.test_raise_error")?;
    let err = call!(raise, "ValueError", "bad shape").unwrap_err();
    check(
        "a raised ValueError comes back with kind and message",
        err.kind() == "ValueError" && err.message() == "bad shape",
    )?;

    let make = registry::get_required("kiln.testing.make_node")?;
    let leaf = call!(make, "leaf", 1i64, 0.5f64, Array::empty())?;
    let root = call!(
        make,
        "root",
        2i64,
        1.0f64,
        Array::new(vec![leaf.clone(), leaf])
    )?;
    println!("  {:?}", root);
    let text = json::to_json(&root.view())?;
    let back: Any = json::from_json(&text)?;
    check(
        "the node tree survives a JSON round trip",
        kiln_ffi::reflection::structural_equal(&root.view(), &back.view()),
    )?;

    let nop = registry::get_required("testing.nop")?;
    let n = 1_000_000;
    let start = Instant::now();
    for _ in 0..n {
        nop.call(&[])?;
    }
    println!(
        "  testing.nop from Rust: {:.1} ns per call",
        start.elapsed().as_nanos() as f64 / n as f64
    );
    compile_and_run_matmul()?;
    let dir = model_dir.map_or_else(default_model_dir, Path::to_path_buf);
    compile_and_run_model(&dir).map_err(Error::runtime_error)?;
    println!("demo passed");
    Ok(())
}

/// Builds C = A x B (256^3, float32) with a tiled, vectorized schedule, runs it and checks it.
fn compile_and_run_matmul() -> Result<()> {
    use kiln::runtime::tensor::Tensor;
    use kiln::te::{compute, create_schedule, placeholder, reduce_axis_n, sum};
    use kiln::tir::PrimExpr;
    let n = 256i64;
    let f32t = kiln_ffi::DataType::float(32);
    let dim = || PrimExpr::i32(n);
    println!("Kiln demo: the tensor compiler (matmul {n}x{n}x{n}, float32, llvm -mcpu=native)");
    let a = placeholder(&[dim(), dim()], f32t, "A");
    let b = placeholder(&[dim(), dim()], f32t, "B");
    let k = reduce_axis_n(n, "k");
    let c = compute(
        &[dim(), dim()],
        |i| {
            sum(
                a.at(&[i[0].to_expr(), k.expr()]) * b.at(&[k.expr(), i[1].to_expr()]),
                std::slice::from_ref(&k),
            )
        },
        "C",
    );
    let s = create_schedule(&[c.op().clone()]);
    let st = s.stage(&c);
    let (io, jo, ii, ji) = st.tile(&c.axis(0), &c.axis(1), 8, 16)?;
    st.reorder(&[io, jo, k.clone(), ii, ji.clone()])?;
    st.vectorize(&ji)?;
    let start = Instant::now();
    let module = kiln::codegen::driver::build(&s, &[a, b, c], "llvm -mcpu=native", "matmul")?;
    let f = module.function("matmul")?;
    println!(
        "  compiled in {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );

    // Small integer inputs: every product and partial sum is exact in float32.
    let av: Vec<f32> = (0..n * n).map(|x| ((x * 7) % 13) as f32 - 6.0).collect();
    let bv: Vec<f32> = (0..n * n).map(|x| ((x * 5) % 11) as f32 - 5.0).collect();
    let out = Tensor::from_slice(&vec![f32::NAN; (n * n) as usize], &[n, n])?;
    let (ta, tb) = (
        Tensor::from_slice(&av, &[n, n])?,
        Tensor::from_slice(&bv, &[n, n])?,
    );
    f.invoke::<()>((ta.clone(), tb.clone(), out.clone()))?;
    let got = out.to_vec::<f32>()?;
    let nu = n as usize;
    let ok = (0..nu).all(|i| {
        (0..nu).all(|j| {
            got[i * nu + j]
                == (0..nu)
                    .map(|kk| av[i * nu + kk] * bv[kk * nu + j])
                    .sum::<f32>()
        })
    });
    check("compiled matmul equals the naive loop on every element", ok)?;
    let runs = 20;
    let start = Instant::now();
    for _ in 0..runs {
        f.invoke::<()>((ta.clone(), tb.clone(), out.clone()))?;
    }
    let secs = start.elapsed().as_secs_f64() / runs as f64;
    println!(
        "  {:.3} ms per call, {:.1} GFLOP/s",
        secs * 1e3,
        2.0 * (n * n * n) as f64 / secs / 1e9
    );
    Ok(())
}

/// The largest absolute and relative errors of `got` against `want`, and whether every element
/// is within `ATOL + RTOL * |want|`.
pub fn compare(got: &[f64], want: &[f64]) -> (f64, f64, bool) {
    let (mut max_abs, mut max_rel, mut ok) = (0.0f64, 0.0f64, got.len() == want.len());
    for (&g, &w) in got.iter().zip(want) {
        let err = (g - w).abs();
        max_abs = max_abs.max(err);
        if w != 0.0 {
            max_rel = max_rel.max(err / w.abs());
        }
        // Also false for NaN.
        ok &= err <= ATOL + RTOL * w.abs();
    }
    (max_abs, max_rel, ok)
}

/// The main job: compiles `dir/model.onnx` into a deploy.so in a temporary directory, runs it on
/// `dir/input.npy`, compares with `dir/expected.npy` and prints the latency on one thread.
fn compile_and_run_model(dir: &Path) -> std::result::Result<(), String> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let (model, input, expected) = (
        dir.join("model.onnx"),
        dir.join("input.npy"),
        dir.join("expected.npy"),
    );
    for f in [&model, &input, &expected] {
        if !f.is_file() {
            return Err(format!(
                "the bundled model is incomplete: {} is missing (pass --model-dir, or remake it \
                 with `.venv/bin/python examples/model/make_model.py`)",
                f.display()
            ));
        }
    }
    let target = "llvm -mcpu=native";
    println!(
        "Kiln demo: the bundled model {} ({target})",
        model.display()
    );
    let tmp = TempDir::new("demo").map_err(|e| e.to_string())?;
    let args = CompileArgs {
        model,
        output: tmp.path().join("deploy.so"),
        targets: vec![target.to_string()],
        input_shapes: Vec::new(),
        dims: Vec::new(),
        opt_level: 3,
        tuning_records: None,
    };
    let start = Instant::now();
    build_library(
        &args,
        &Default::default(),
        &indicatif::ProgressBar::hidden(),
    )?;
    let compile_secs = start.elapsed().as_secs_f64();
    let size = std::fs::metadata(&args.output).map_or(0, |m| m.len());
    println!(
        "  compiled (ONNX -> graph -> fused TIR -> LLVM -> deploy.so, {}) in {:.2} s",
        human_size(size),
        compile_secs
    );

    // Timings on one thread, as the reference was made.
    kiln_runtime::thread_pool::set_num_threads(1).map_err(|e| e.to_string())?;
    let factory = load_factory(&args.output)?;
    let exec_module = create_executor(&factory)?;
    let mut exec = lock(&exec_module);
    let names = runtime_inputs(&factory);
    let [name] = names.as_slice() else {
        return Err(format!(
            "the bundled model should have one input, it has {names:?}"
        ));
    };
    set_inputs(&factory, &mut *exec, &[(name.clone(), input.clone())], None)?;
    exec.run().map_err(|e| format!("the run failed: {e}"))?;
    let out = exec
        .get_output(0)
        .and_then(|t| t.to_device(Device::cpu(0)))
        .map_err(|e| format!("cannot read the output: {e}"))?;
    let want = crate::npy::read(&expected)?;
    if out.shape() != want.shape() || out.dtype() != want.dtype() {
        return Err(format!(
            "the output is {} {:?} but {} holds {} {:?}",
            out.dtype(),
            out.shape(),
            expected.display(),
            want.dtype(),
            want.shape()
        ));
    }
    let got = out.to_f64_vec().map_err(|e| e.to_string())?;
    let want_v = want.to_f64_vec().map_err(|e| e.to_string())?;
    let (max_abs, max_rel, ok) = compare(&got, &want_v);
    let summary = format!(
        "output {} {:?} matches onnxruntime's (expected.npy): max abs error {max_abs:.2e}, max \
         rel error {max_rel:.2e} (rtol {RTOL:e}, atol {ATOL:e})",
        out.dtype(),
        out.shape()
    );
    if !ok {
        return Err(format!(
            "demo check failed: the output does not match {}: max abs error {max_abs:.3e}, max \
             rel error {max_rel:.3e} (rtol {RTOL:e}, atol {ATOL:e})\n  got  {got:?}\n  want \
             {want_v:?}",
            expected.display()
        ));
    }
    println!("  ok  {summary}");

    // Latency: warm-up, then the median of 25 measurements, each of enough runs for ~2 ms.
    let warm = Instant::now();
    for _ in 0..3 {
        exec.run().map_err(|e| format!("the run failed: {e}"))?;
    }
    let per_run = warm.elapsed().as_secs_f64() / 3.0;
    let number = ((2e-3 / per_run.max(1e-9)) as u32).clamp(1, 1000);
    let mut ms = Vec::new();
    for _ in 0..25 {
        let t = Instant::now();
        for _ in 0..number {
            exec.run().map_err(|e| format!("the run failed: {e}"))?;
        }
        ms.push(t.elapsed().as_secs_f64() * 1e3 / number as f64);
    }
    let (median, min, max) = crate::bench::stats(&ms);
    println!(
        "  latency (1 thread): median {median:.4} ms, min {min:.4} ms, max {max:.4} ms \
         (25 x {number} runs)"
    );
    drop(exec);
    kiln_runtime::thread_pool::set_num_threads(0).map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn compare() {
        let (abs, rel, ok) = super::compare(&[1.0, 2.0 + 1e-6], &[1.0, 2.0]);
        assert!(ok && (abs - 1e-6).abs() < 1e-12 && (rel - 5e-7).abs() < 1e-12);
        assert!(!super::compare(&[1.001], &[1.0]).2);
        assert!(!super::compare(&[f64::NAN], &[1.0]).2);
        assert!(!super::compare(&[1.0], &[1.0, 2.0]).2);
    }
}
