//! C-target libraries outside the build: a two-function module (parallel + vectorized, and a
//! workspace intermediate) exported by `CSourceModule::export_library`, loaded again with
//! `load_module`, and, when `.venv` has Apache TVM 0.27, loaded and run by TVM itself.

use kiln_codegen::{build_c, CSourceModule, Target};
use kiln_ffi::DataType;
use kiln_runtime::module::{load_module, Module};
use kiln_runtime::tensor::Tensor as Nd;
use kiln_te::*;
use kiln_tir::transform::lower_pipeline;
use kiln_tir::{IRModule, PrimExpr, Var};
use std::path::PathBuf;

fn f32t() -> DataType {
    DataType::float(32)
}

/// `padd(A, B, C)`: `C = A * 3 + B` over `[n, 16]`, rows parallel, columns vectorized by 8;
/// `ws(A, C)`: `C[i] = T[i] + T[599 - i]` with `T = A * 2` a 2400-byte intermediate.
fn two_functions() -> IRModule {
    let n = Var::size_var("n", DataType::int(32));
    let a = placeholder(&[n.to_expr(), PrimExpr::i32(16)], f32t(), "A");
    let b = placeholder(&[n.to_expr(), PrimExpr::i32(16)], f32t(), "B");
    let c = compute(
        &[n.to_expr(), PrimExpr::i32(16)],
        |i| a.at_vars(i) * 3.0 + b.at_vars(i),
        "C",
    );
    let s = create_schedule(&[c.op().clone()]);
    s.stage(&c).parallel(&c.axis(0)).unwrap();
    let (_, ji) = s.stage(&c).split(&c.axis(1), 8).unwrap();
    s.stage(&c).vectorize(&ji).unwrap();
    let padd = lower(&s, &[a, b, c], "padd").unwrap();

    let len = 600;
    let a = placeholder(&[PrimExpr::i32(len)], f32t(), "A");
    let t = compute(&[PrimExpr::i32(len)], |i| a.at_vars(i) * 2.0, "T");
    let c = compute(
        &[PrimExpr::i32(len)],
        |i| t.at_vars(i) + t.at(&[(len - 1) - i[0].to_expr()]),
        "C",
    );
    let s = create_schedule(&[c.op().clone()]);
    let ws = lower(&s, &[a, c], "ws").unwrap();
    let m = IRModule::new(vec![("padd".into(), padd), ("ws".into(), ws)]).unwrap();
    lower_pipeline().apply(m).unwrap()
}

fn work_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-c-export-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

use kiln_testing::random as rand_f32;

/// Runs both functions of a loaded library and checks them against Rust loops.
fn check(m: &Module) {
    let rows = 9usize;
    let x = rand_f32(rows * 16, 1);
    let y = rand_f32(rows * 16, 2);
    let sh = [rows as i64, 16];
    let out = Nd::from_slice(&vec![f32::NAN; rows * 16], &sh).unwrap();
    m.function("padd")
        .unwrap()
        .invoke::<()>((
            Nd::from_slice(&x, &sh).unwrap(),
            Nd::from_slice(&y, &sh).unwrap(),
            out.clone(),
        ))
        .unwrap();
    // `-march=native` lets the compiler fuse the multiply-add (as LLVM's `contract`).
    let got = out.to_vec::<f32>().unwrap();
    for (i, (p, q)) in x.iter().zip(&y).enumerate() {
        let want = p * 3.0 + q;
        assert!(
            (got[i] - want).abs() <= 1e-6 * want.abs().max(1.0),
            "padd[{i}]"
        );
    }

    let a = rand_f32(600, 3);
    let out = Nd::from_slice(&[f32::NAN; 600], &[600]).unwrap();
    m.function("ws")
        .unwrap()
        .invoke::<()>((Nd::from_slice(&a, &[600]).unwrap(), out.clone()))
        .unwrap();
    let want: Vec<f32> = (0..600).map(|i| a[i] * 2.0 + a[599 - i] * 2.0).collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);
}

#[test]
fn exported_libraries_load_in_kiln() {
    let m = build_c(&two_functions(), &Target::parse("c -mcpu=native").unwrap()).unwrap();
    check(&m);
    assert!(m.function("main").is_err(), "two functions: no main");
    let node = m.downcast_node::<CSourceModule>().unwrap();
    assert!(node.cc_options().iter().any(|o| o == "-march=native"));
    assert_eq!(node.function_names(), ["padd", "ws"]);

    let dir = work_dir("kiln");
    let so = dir.join("own.so");
    node.export_library(&so).unwrap();
    check(&load_module(&so).unwrap());

    let src = dir.join("src.c");
    m.write_to_file(&src, "").unwrap();
    assert_eq!(std::fs::read_to_string(&src).unwrap(), node.source());
    assert!(m.write_to_file(&dir.join("x.o"), "o").is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exported_library_runs_in_apache_tvm() {
    let Some(py) = kiln_testing::process::python_with(&["tvm"]) else {
        eprintln!("skipping the Apache TVM check: no .venv with apache-tvm");
        return;
    };
    let m = build_c(&two_functions(), &Target::parse("c").unwrap()).unwrap();
    let dir = work_dir("tvm");
    let so = dir.join("lib.so");
    m.downcast_node::<CSourceModule>()
        .unwrap()
        .export_library(&so)
        .unwrap();
    let script = r#"
import sys, numpy as np, tvm
m = tvm.runtime.load_module(sys.argv[1])
rng = np.random.default_rng(0)
a = rng.standard_normal((37, 16)).astype("float32")
b = rng.standard_normal((37, 16)).astype("float32")
c = tvm.runtime.tensor(np.full((37, 16), np.nan, dtype="float32"))
m["padd"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
np.testing.assert_allclose(c.numpy(), a * np.float32(3) + b, rtol=1e-6)
x = rng.standard_normal(600).astype("float32")
w = tvm.runtime.tensor(np.full(600, np.nan, dtype="float32"))
m["ws"](tvm.runtime.tensor(x), w)
np.testing.assert_allclose(w.numpy(), x * 2 + (x * 2)[::-1], rtol=1e-6)
try:
    m["padd"](tvm.runtime.tensor(a), tvm.runtime.tensor(b.astype("float64")), c)
    raise SystemExit("no error for a float64 tensor")
except TypeError as e:
    assert "Mismatched B.dtype on argument #1" in str(e), str(e)
print("ok")
"#;
    let out = std::process::Command::new(&py)
        .arg("-c")
        .arg(script)
        .arg(&so)
        .env("TVM_NUM_THREADS", "2")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
