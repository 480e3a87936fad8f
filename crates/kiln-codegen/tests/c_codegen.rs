//! The `c` target end to end: schedules written with kiln-te, lowered by
//! `kiln_tir::transform::lower_pipeline()`, turned into C, compiled by `cc` into a shared
//! library, loaded by Kiln and run on random data against naive Rust loops (outputs start as
//! NaN): elementwise add with a symbolic length, a parallel loop, a vectorized loop, a
//! reduction, a workspace-sized intermediate, float math and floor division, and TVM's
//! TypeError texts.

#[path = "../../kiln-te/tests/support/workloads.rs"]
mod workloads;

use kiln_codegen::{build_c, Target};
use kiln_ffi::{DataType, Function};
use kiln_runtime::module::Module;
use kiln_runtime::tensor::Tensor as Nd;
use kiln_te::*;
use kiln_testing::error::{expect_err, expect_err_starting};
use kiln_tir::transform::lower_pipeline;
use kiln_tir::{floordiv, floormod, op, IRModule, Var};
use workloads::{broadcast_compute, c, f32t, row_sum_split};

/// Lowers `s` over `args` through the whole pipeline and builds it for the `c` target.
fn build(s: &Schedule, args: &[kiln_te::Tensor], name: &str) -> Module {
    let f = lower(s, args, name).unwrap();
    let m = lower_pipeline()
        .apply(IRModule::from_func(name, f))
        .unwrap();
    build_c(&m, &Target::parse("c").unwrap()).unwrap_or_else(|e| panic!("{e}\n{m}"))
}

use kiln_testing::random as rand_f32;

fn tensor(data: &[f32], shape: &[i64]) -> Nd {
    Nd::from_slice(data, shape).unwrap()
}

fn nan(shape: &[i64]) -> Nd {
    tensor(
        &kiln_testing::nan_vec(kiln_testing::shape::numel(shape)),
        shape,
    )
}

fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    kiln_testing::assert_allclose(got, want, kiln_testing::Tolerance::Scaled(tol.into()), what);
}

fn call(f: &Function, args: &[&Nd]) {
    match args {
        [a, b] => f.invoke::<()>(((*a).clone(), (*b).clone())).unwrap(),
        [a, b, c] => f
            .invoke::<()>(((*a).clone(), (*b).clone(), (*c).clone()))
            .unwrap(),
        _ => unreachable!(),
    }
}

#[test]
fn elementwise_add_symbolic_length_and_type_errors() {
    let n = Var::size_var("n", DataType::int(32));
    let a = placeholder(&[n.to_expr()], f32t(), "A");
    let b = placeholder(&[n.to_expr()], f32t(), "B");
    let cc = compute(&[n.to_expr()], |i| a.at_vars(i) + b.at_vars(i), "C");
    let s = create_schedule(&[cc.op().clone()]);
    let m = build(&s, &[a, b, cc], "add");
    assert_eq!(m.kind(), "c");
    let src = m.inspect_source("c").unwrap();
    assert!(
        src.contains("__attribute__((visibility(\"default\"))) int32_t __tvm_ffi_add(void* self_handle_, const TVMFFIAny* args_"),
        "{src}"
    );
    assert!(src.contains("int32_t __tvm_ffi_main("), "{src}");
    assert!(
        src.contains("TVMFFIErrorSetRaisedFromCStrParts(\"TypeError\""),
        "{src}"
    );
    assert!(!src.contains("#include <tvm"), "self-contained: {src}");
    let add = m.function("add").unwrap();
    for len in [1usize, 37, 1000] {
        let x = rand_f32(len, 1);
        let y = rand_f32(len, 2);
        let out = nan(&[len as i64]);
        let sh = [len as i64];
        call(&add, &[&tensor(&x, &sh), &tensor(&y, &sh), &out]);
        let want: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
        assert_eq!(out.to_vec::<f32>().unwrap(), want, "n = {len}");
    }
    let out = nan(&[2]);
    let main = m.function("main").unwrap();
    call(
        &main,
        &[&tensor(&[1., 2.], &[2]), &tensor(&[3., 4.], &[2]), &out],
    );
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![4., 6.]);

    // TVM's error kinds and texts.
    let sig = "add(A: Tensor([n], float32), B: Tensor([n], float32), C: Tensor([n], float32))";
    let ints = Nd::from_slice(&[1i32, 2], &[2]).unwrap();
    let e = expect_err(
        add.invoke::<()>((tensor(&[1., 2.], &[2]), ints, nan(&[2]))),
        "TypeError",
        "",
    );
    assert_eq!(
        e.message(),
        format!("Mismatched B.dtype on argument #1 when calling:\n  `{sig}`,\n  expected float32")
    );
    let e = expect_err(
        add.invoke::<()>((tensor(&[1.], &[1]), tensor(&[1.], &[1]))),
        "TypeError",
        "",
    );
    assert_eq!(
        e.message(),
        format!("Expected 3 arguments when calling:\n  `{sig}`")
    );
    expect_err_starting(
        add.invoke::<()>((tensor(&[1.], &[1]), 5i64, nan(&[1]))),
        "TypeError",
        "Mismatched type on argument #1",
    );
    expect_err(
        add.invoke::<()>((tensor(&[1., 2.], &[2]), tensor(&[1.], &[1]), nan(&[2]))),
        "ValueError",
        "B.shape[0]",
    );
}

#[test]
fn parallel_rows_with_broadcast() {
    let m = 13;
    let (a, b, cc) = broadcast_compute(m);
    let s = create_schedule(&[cc.op().clone()]);
    let (xo, _xi) = s.stage(&cc).split(&cc.axis(0), 3).unwrap();
    s.stage(&cc).parallel(&xo).unwrap();
    let module = build(&s, &[a, b, cc], "bcast");
    let src = module.inspect_source("c").unwrap();
    assert!(src.contains("__TVMBackendParallelLaunch"), "{src}");
    assert!(
        src.contains("__attribute__((weak, visibility(\"default\"))) void* __TVMBackendParallelLaunch = NULL;"),
        "{src}"
    );
    let f = module.function("bcast").unwrap();
    for rows in [1usize, 7, 64] {
        let av = rand_f32(rows * m as usize, 3);
        let bv = rand_f32(m as usize, 4);
        let out = nan(&[rows as i64, m]);
        call(
            &f,
            &[&tensor(&av, &[rows as i64, m]), &tensor(&bv, &[m]), &out],
        );
        let want: Vec<f32> = (0..rows * m as usize)
            .map(|k| av[k] * bv[k % m as usize] + 1.0)
            .collect();
        assert_eq!(out.to_vec::<f32>().unwrap(), want, "rows = {rows}");
    }
}

#[test]
fn vectorized_inner_loop_with_math() {
    let (n, m) = (5i64, 48i64);
    let a = placeholder(&[c(n), c(m)], f32t(), "A");
    let b = placeholder(&[c(n), c(m)], f32t(), "B");
    let cc = compute(
        &[c(n), c(m)],
        |i| op::exp(a.at_vars(i)) * op::sqrt(op::fabs(b.at_vars(i))) - b.at_vars(i),
        "C",
    );
    let s = create_schedule(&[cc.op().clone()]);
    let (_jo, ji) = s.stage(&cc).split(&cc.axis(1), 8).unwrap();
    s.stage(&cc).vectorize(&ji).unwrap();
    let module = build(&s, &[a, b, cc], "vmath");
    let src = module.inspect_source("c").unwrap();
    assert!(src.contains("kiln_float32x8"), "vector code: {src}");
    assert!(src.contains("memcpy"), "contiguous vector access: {src}");
    let av = rand_f32((n * m) as usize, 5);
    let bv = rand_f32((n * m) as usize, 6);
    let out = nan(&[n, m]);
    call(
        &module.function("vmath").unwrap(),
        &[&tensor(&av, &[n, m]), &tensor(&bv, &[n, m]), &out],
    );
    let want: Vec<f32> = av
        .iter()
        .zip(&bv)
        .map(|(x, y)| x.exp() * y.abs().sqrt() - y)
        .collect();
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-5, "vmath");
}

#[test]
fn reduction_row_max_and_sum() {
    let (n, m) = (6i64, 37i64);
    let (a, b, s) = row_sum_split(n, m);
    let module = build(&s, &[a, b], "rowsum");
    let av = rand_f32((n * m) as usize, 7);
    let out = nan(&[n]);
    call(
        &module.function("rowsum").unwrap(),
        &[&tensor(&av, &[n, m]), &out],
    );
    let want: Vec<f32> = (0..n as usize)
        .map(|i| av[i * m as usize..(i + 1) * m as usize].iter().sum())
        .collect();
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-5, "rowsum");
}

#[test]
fn workspace_intermediate() {
    // T (600 floats = 2400 bytes > 1024) is an intermediate: LowerTVMBuiltin makes it a
    // workspace allocation, which the C code reaches through its context slots.
    let len = 600i64;
    let a = placeholder(&[c(len)], f32t(), "A");
    let t = compute(&[c(len)], |i| a.at_vars(i) * 2.0, "T");
    let cc = compute(
        &[c(len)],
        |i| t.at_vars(i) + t.at(&[(len - 1) - i[0].to_expr()]),
        "C",
    );
    let s = create_schedule(&[cc.op().clone()]);
    let module = build(&s, &[a, cc], "ws");
    let src = module.inspect_source("c").unwrap();
    assert!(
        src.contains("void* __TVMBackendAllocWorkspace = NULL;"),
        "{src}"
    );
    assert!(
        src.contains("void* __TVMBackendFreeWorkspace = NULL;"),
        "{src}"
    );
    let av = rand_f32(len as usize, 8);
    let out = nan(&[len]);
    call(
        &module.function("ws").unwrap(),
        &[&tensor(&av, &[len]), &out],
    );
    let l = len as usize;
    let want: Vec<f32> = (0..l).map(|i| av[i] * 2.0 + av[l - 1 - i] * 2.0).collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);
}

#[test]
fn integer_floor_division_and_modulo() {
    let n = Var::size_var("n", DataType::int(32));
    let i32t = DataType::int(32);
    let a = placeholder(&[n.to_expr()], i32t, "A");
    let b = placeholder(&[n.to_expr()], i32t, "B");
    let cc = compute(
        &[n.to_expr()],
        |i| floordiv(a.at_vars(i), b.at_vars(i)) * 1000 + floormod(a.at_vars(i), b.at_vars(i)),
        "C",
    );
    let s = create_schedule(&[cc.op().clone()]);
    let module = build(&s, &[a, b, cc], "fdiv");
    let av: Vec<i32> = vec![7, -7, 7, -7, 0, -1, 6, -6, 123, -123];
    let bv: Vec<i32> = vec![3, 3, -3, -3, 5, 4, 3, -3, 10, 7];
    let len = av.len() as i64;
    let out = Nd::from_slice(&vec![i32::MIN; av.len()], &[len]).unwrap();
    module
        .function("fdiv")
        .unwrap()
        .invoke::<()>((
            Nd::from_slice(&av, &[len]).unwrap(),
            Nd::from_slice(&bv, &[len]).unwrap(),
            out.clone(),
        ))
        .unwrap();
    // Floor semantics: the quotient rounds toward negative infinity, the remainder takes the
    // divisor's sign.
    let want_floor: Vec<i32> = av
        .iter()
        .zip(&bv)
        .map(|(x, y)| {
            let q = (*x as f64 / *y as f64).floor() as i32;
            q * 1000 + (x - q * y)
        })
        .collect();
    assert_eq!(out.to_vec::<i32>().unwrap(), want_floor);
}
