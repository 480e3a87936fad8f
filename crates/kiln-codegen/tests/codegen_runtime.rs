//! Generated code that calls the runtime: parallel loops (closures through
//! `__TVMBackendParallelLaunch`), workspace memory, `tir.call_packed` by name; and one library
//! exported by Kiln and loaded by Apache TVM 0.27 in a Python subprocess (parallel code
//! included).

mod codegen_common;

use codegen_common::*;
use kiln_ffi::{DataType, Function};
use kiln_testing::error::expect_err;
use kiln_tir::op::builtin::{ALLOC_WORKSPACE, FREE_WORKSPACE, ISNULLPTR};
use kiln_tir::op::{self, call_packed};
use kiln_tir::{Buffer, ForKind, PrimExpr, PrimFunc, Stmt, Var};
use std::sync::atomic::{AtomicI64, Ordering};

fn f32t() -> DataType {
    DataType::float(32)
}

/// `C[r * cols + c] = A[r * cols + c] * scale + r` with rows in parallel.
fn parallel_func() -> PrimFunc {
    let rows = Var::int32("rows");
    let cols = Var::int32("cols");
    let n = &rows * &cols;
    let (a, c) = (buf("A", f32t(), n.clone()), buf("C", f32t(), n));
    let scale = Var::new("scale", f32t());
    let (r, k) = (Var::int32("r"), Var::int32("k"));
    let idx = &r * &cols + &k;
    let body = Stmt::for_loop(
        &r,
        0,
        &rows,
        ForKind::Parallel,
        Stmt::for_loop(
            &k,
            0,
            &cols,
            ForKind::Serial,
            c.store(
                a.load(vec![idx.clone()]) * &scale + r.cast(f32t()),
                vec![idx],
            ),
        ),
    );
    packed_func(
        "prows",
        &[
            Param::Scalar(rows),
            Param::Scalar(cols),
            Param::Scalar(scale),
            Param::Tensor(a),
            Param::Tensor(c),
        ],
        body,
    )
}

/// `C[i] = tmp[n - 1 - i]` with `tmp[i] = A[i] * 2` in workspace memory.
fn workspace_func() -> PrimFunc {
    let n = Var::int32("n");
    let (a, c) = (buf("A", f32t(), &n), buf("C", f32t(), &n));
    let tmp = Buffer::decl("tmp", f32t(), vec![n.to_expr()]);
    let i = Var::int32("i");
    let nbytes = n.cast(DataType::int(64)) * 4i64;
    let alloc = PrimExpr::call(
        DataType::handle(),
        ALLOC_WORKSPACE,
        vec![
            PrimExpr::i32(1),
            PrimExpr::i32(0),
            nbytes,
            PrimExpr::i32(2),
            PrimExpr::i32(32),
        ],
    );
    let free = PrimExpr::call(
        DataType::int(32),
        FREE_WORKSPACE,
        vec![PrimExpr::i32(1), PrimExpr::i32(0), tmp.data().to_expr()],
    );
    let is_null = PrimExpr::call(DataType::bool(), ISNULLPTR, vec![tmp.data().to_expr()]);
    let body = Stmt::let_stmt(
        tmp.data(),
        alloc,
        Stmt::assert(
            is_null.logical_not(),
            "RuntimeError: workspace allocation failed",
            Stmt::decl_buffer(
                tmp.clone(),
                Stmt::seq(vec![
                    Stmt::for_loop(
                        &i,
                        0,
                        &n,
                        ForKind::Parallel,
                        tmp.store(a.load(vec![i.to_expr()]) * 2.0, vec![i.to_expr()]),
                    ),
                    Stmt::for_loop(
                        &i,
                        0,
                        &n,
                        ForKind::Serial,
                        c.store(tmp.load(vec![&n - 1 - &i]), vec![i.to_expr()]),
                    ),
                    Stmt::evaluate(free),
                ]),
            ),
        ),
    );
    packed_func("wsrev", &[Param::Tensor(a), Param::Tensor(c)], body)
}

/// `for i in 0..n: call_packed(name, i, 0.5 * i)`.
fn call_packed_func(name: &str, fname: &str) -> PrimFunc {
    let n = Var::int32("n");
    let i = Var::int32("i");
    let body = Stmt::for_loop(
        &i,
        0,
        &n,
        ForKind::Serial,
        Stmt::evaluate(call_packed(
            name,
            vec![
                i.cast(DataType::int(64)),
                i.cast(DataType::float(64)) * PrimExpr::f64(0.5),
            ],
        )),
    );
    packed_func(fname, &[Param::Scalar(n)], body)
}

#[test]
fn parallel_loop_runs_every_row() {
    let m = kiln_codegen::build(&module(vec![parallel_func()]), &native()).unwrap();
    let ll = m.inspect_source("ll").unwrap();
    assert!(ll.contains("__tvm_parallel_lambda"), "{ll}");
    assert!(
        ll.contains("@__TVMBackendParallelLaunch = linkonce dllexport"),
        "{ll}"
    );
    let f = m.function("prows").unwrap();
    for (rows, cols) in [(1usize, 1usize), (7, 33), (64, 100)] {
        let x = rand_f32(rows * cols, 11, -1.0, 1.0);
        let out = nan_f32(rows * cols);
        f.invoke::<()>((rows as i64, cols as i64, 1.5f64, tensor(&x), out.clone()))
            .unwrap();
        // `x * 1.5 + r` may be one FMA (contraction is allowed, as in TVM).
        let want: Vec<f32> = (0..rows * cols)
            .map(|j| x[j].mul_add(1.5, (j / cols) as f32))
            .collect();
        let what = format!("{rows}x{cols}");
        assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-6, &what);
    }
    // Zero rows: nothing to do, no failure.
    f.invoke::<()>((0i64, 4i64, 1.0f64, tensor::<f32>(&[]), tensor::<f32>(&[])))
        .unwrap();
}

#[test]
fn workspace_allocation() {
    let m = kiln_codegen::build(&module(vec![workspace_func()]), &native()).unwrap();
    let f = m.function("wsrev").unwrap();
    for n in [1usize, 100, 5000] {
        let x = rand_f32(n, 12, -3.0, 3.0);
        let out = nan_f32(n);
        f.invoke::<()>((tensor(&x), out.clone())).unwrap();
        let want: Vec<f32> = (0..n).map(|i| x[n - 1 - i] * 2.0).collect();
        assert_eq!(out.to_vec::<f32>().unwrap(), want);
    }
}

static CALLS: AtomicI64 = AtomicI64::new(0);
static SUM_BITS: AtomicI64 = AtomicI64::new(0);

#[test]
fn call_packed_by_name() {
    kiln_ffi::registry::register(
        "testing.codegen_record",
        Function::from_typed(|i: i64, x: f64| -> kiln_ffi::Result<()> {
            CALLS.fetch_add(1, Ordering::SeqCst);
            SUM_BITS.fetch_add(i * 1000 + (x * 10.0) as i64, Ordering::SeqCst);
            Ok(())
        }),
        true,
    )
    .unwrap();
    kiln_ffi::registry::register(
        "testing.codegen_fail",
        Function::from_typed(|i: i64, _x: f64| -> kiln_ffi::Result<()> {
            if i == 2 {
                Err(kiln_ffi::Error::value_error("three strikes"))
            } else {
                Ok(())
            }
        }),
        true,
    )
    .unwrap();
    let md = module(vec![
        call_packed_func("testing.codegen_record", "rec"),
        call_packed_func("testing.codegen_fail", "fails"),
    ]);
    let m = kiln_codegen::build(&md, &native()).unwrap();
    m.function("rec").unwrap().invoke::<()>((4i64,)).unwrap();
    assert_eq!(CALLS.load(Ordering::SeqCst), 4);
    // sum of i*1000 + 5*i for i < 4
    assert_eq!(SUM_BITS.load(Ordering::SeqCst), 6 * 1000 + 5 * 6);
    expect_err(
        m.function("fails").unwrap().invoke::<()>((5i64,)),
        "ValueError",
        "three strikes",
    );
}

#[test]
fn exported_library_runs_in_kiln_and_tvm() {
    // Serial, vectorized and parallel code and a workspace in one library.
    let n = Var::int32("n");
    let (a, b, c) = (
        buf("A", f32t(), &n),
        buf("B", f32t(), &n),
        buf("C", f32t(), &n),
    );
    let i = Var::int32("i");
    let add = packed_func(
        "add",
        &[
            Param::Tensor(a.clone()),
            Param::Tensor(b.clone()),
            Param::Tensor(c.clone()),
        ],
        Stmt::for_loop(
            &i,
            0,
            &n,
            ForKind::Parallel,
            c.store(
                a.load(vec![i.to_expr()]) + op::exp(b.load(vec![i.to_expr()])),
                vec![i.to_expr()],
            ),
        ),
    );
    let md = module(vec![add, parallel_func(), workspace_func()]);
    let m = kiln_codegen::build(&md, &native()).unwrap();
    let dir = work_dir("tvm");
    let so = dir.join("libkernels.so");
    m.downcast_node::<kiln_codegen::LlvmModule>()
        .unwrap()
        .export_library(&so)
        .unwrap();

    let lib = kiln_runtime::module::load_module(&so).unwrap();
    let x = rand_f32(100, 21, -1.0, 1.0);
    let y = rand_f32(100, 22, -1.0, 1.0);
    let out = nan_f32(100);
    lib.function("add")
        .unwrap()
        .invoke::<()>((tensor(&x), tensor(&y), out.clone()))
        .unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p + q.exp()).collect();
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-6, "add");

    let Some(py) = tvm_python() else {
        eprintln!("skipping the Apache TVM check: no .venv with apache-tvm");
        return;
    };
    let script = r#"
import sys, numpy as np, tvm
m = tvm.runtime.load_module(sys.argv[1])
rng = np.random.default_rng(0)
a = rng.standard_normal(1000).astype("float32")
b = rng.standard_normal(1000).astype("float32")
c = tvm.runtime.tensor(np.full(1000, np.nan, dtype="float32"))
m["add"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
np.testing.assert_allclose(c.numpy(), a + np.exp(b), rtol=1e-5)
rows, cols = 37, 29
x = rng.standard_normal(rows * cols).astype("float32")
o = tvm.runtime.tensor(np.full(rows * cols, np.nan, dtype="float32"))
m["prows"](rows, cols, 0.5, tvm.runtime.tensor(x), o)
want = x * np.float32(0.5) + np.repeat(np.arange(rows, dtype="float32"), cols)
np.testing.assert_allclose(o.numpy(), want, rtol=1e-6)
w = tvm.runtime.tensor(np.full(1000, np.nan, dtype="float32"))
m["wsrev"](tvm.runtime.tensor(a), w)
np.testing.assert_allclose(w.numpy(), (a * 2)[::-1], rtol=1e-6)
try:
    m["add"](tvm.runtime.tensor(a), tvm.runtime.tensor(b.astype("float64")), c)
    raise SystemExit("no error for a float64 tensor")
except TypeError as e:
    assert "B.dtype" in str(e), str(e)
try:
    m["add"](tvm.runtime.tensor(a))
    raise SystemExit("no error for one argument")
except TypeError as e:
    assert "Expected 3 arguments" in str(e), str(e)
print("tvm ok")
"#;
    let out = std::process::Command::new(&py)
        .args(["-c", script])
        .arg(&so)
        .env("TVM_NUM_THREADS", "2")
        .output()
        .unwrap();
    let text = kiln_testing::process::combined(&out);
    assert!(out.status.success() && text.contains("tvm ok"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
