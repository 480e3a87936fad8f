//! Hand-built packed PrimFuncs (the shape MakePackedAPI produces) compiled for
//! `llvm -mcpu=native`, loaded by Kiln and checked against naive Rust loops: elementwise add
//! with a symbolic length, a 16-lane vectorized version, a gather through a strided ramp, a
//! reduction into a stack allocation, and TVM-style TypeError texts from failing asserts.

mod codegen_common;

use codegen_common::*;
use kiln_ffi::DataType;
use kiln_testing::error::{expect_err, expect_err_starting};
use kiln_tir::{ForKind, PrimExpr, Stmt, Var};

fn f32t() -> DataType {
    DataType::float(32)
}

#[test]
fn elementwise_add_symbolic_length() {
    let n = Var::int32("n");
    let (a, b, c) = (
        buf("A", f32t(), &n),
        buf("B", f32t(), &n),
        buf("C", f32t(), &n),
    );
    let i = Var::int32("i");
    let body = Stmt::for_loop(
        &i,
        0,
        &n,
        ForKind::Serial,
        c.store(
            a.load(vec![i.to_expr()]) + b.load(vec![i.to_expr()]),
            vec![i.to_expr()],
        ),
    );
    let f = packed_func(
        "add",
        &[Param::Tensor(a), Param::Tensor(b), Param::Tensor(c)],
        body,
    );
    let m = kiln_codegen::build(&module(vec![f]), &native()).unwrap();
    assert_eq!(m.kind(), "llvm");
    let ll = m.inspect_source("ll").unwrap();
    assert!(ll.contains("i32 @__tvm_ffi_add(ptr noalias"), "{ll}");
    // Buffers carry TBAA tags, so the loop vectorizes without runtime alias checks.
    assert!(ll.contains("!tbaa"), "{ll}");
    assert!(ll.contains("x float>"), "{ll}");
    assert!(!ll.contains("vector.memcheck"), "{ll}");
    assert!(m.inspect_source("asm").unwrap().contains("__tvm_ffi_add"));
    let add = m.function("add").unwrap();
    for len in [1usize, 37, 1000] {
        let x = rand_f32(len, 1, -1.0, 1.0);
        let y = rand_f32(len, 2, -1.0, 1.0);
        let out = nan_f32(len);
        add.invoke::<()>((tensor(&x), tensor(&y), out.clone()))
            .unwrap();
        let want: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
        assert_eq!(out.to_vec::<f32>().unwrap(), want, "n = {len}");
    }
    // The main alias of a one-function module.
    let out = nan_f32(3);
    m.function("main")
        .unwrap()
        .invoke::<()>((
            tensor(&[1f32, 2., 3.]),
            tensor(&[1f32, 1., 1.]),
            out.clone(),
        ))
        .unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![2., 3., 4.]);

    // Asserts: TVM-style error kinds and texts.
    let e = expect_err(
        add.invoke::<()>((tensor(&[1f32]), tensor(&[1f32]))),
        "TypeError",
        "",
    );
    assert_eq!(e.message(), "Expected 3 arguments when calling: `add`");
    expect_err_starting(
        add.invoke::<()>((tensor(&[1f32]), 5i64, tensor(&[1f32]))),
        "TypeError",
        "Mismatched type on argument #1",
    );
    expect_err(
        add.invoke::<()>((tensor(&[1f32]), tensor(&[1i32]), tensor(&[1f32]))),
        "TypeError",
        "B.dtype",
    );
    expect_err(
        add.invoke::<()>((tensor(&[1f32, 2.]), tensor(&[1f32]), tensor(&[1f32, 2.]))),
        "ValueError",
        "B.shape[0]",
    );
}

#[test]
fn vectorized_ramps_and_gather() {
    // C[ramp(16 io, 1, 16)] = A[ramp] * B[ramp] + 2; D[ramp(16 io,1,16)] = A[ramp(16 io + 15, -1, 16)]
    let m_ = Var::int32("m");
    let n = &m_ * 16;
    let (a, b, c, d) = (
        buf("A", f32t(), n.clone()),
        buf("B", f32t(), n.clone()),
        buf("C", f32t(), n.clone()),
        buf("D", f32t(), n.clone()),
    );
    let io = Var::int32("io");
    let base = &io * 16;
    let ramp = PrimExpr::ramp_raw(base.clone(), PrimExpr::i32(1), 16);
    let rev = PrimExpr::ramp_raw(&base + 15, PrimExpr::i32(-1), 16);
    let two = PrimExpr::broadcast_raw(PrimExpr::f32(2.0), 16);
    let body = Stmt::for_loop(
        &io,
        0,
        &m_,
        ForKind::Serial,
        Stmt::seq(vec![
            c.store(
                a.load(vec![ramp.clone()]) * b.load(vec![ramp.clone()]) + two,
                vec![ramp.clone()],
            ),
            d.store(a.load(vec![rev]), vec![ramp.clone()]),
        ]),
    );
    // m is bound from A's shape: A's shape entry is 16 m, so bind m from a scalar argument.
    let f = packed_func(
        "vmul",
        &[
            Param::Scalar(m_.clone()),
            Param::Tensor(a),
            Param::Tensor(b),
            Param::Tensor(c),
            Param::Tensor(d),
        ],
        body,
    );
    let m = kiln_codegen::build(&module(vec![f]), &native()).unwrap();
    let ll = m.inspect_source("ll").unwrap();
    assert!(ll.contains("<16 x float>"), "{ll}");
    assert!(ll.contains("align 64"), "{ll}");
    let len = 16 * 5;
    let x = rand_f32(len, 3, -2.0, 2.0);
    let y = rand_f32(len, 4, -2.0, 2.0);
    let (out, rev_out) = (nan_f32(len), nan_f32(len));
    m.function("vmul")
        .unwrap()
        .invoke::<()>((5i64, tensor(&x), tensor(&y), out.clone(), rev_out.clone()))
        .unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p * q + 2.0).collect();
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-6, "C");
    let want_rev: Vec<f32> = (0..len).map(|i| x[(i / 16) * 16 + 15 - i % 16]).collect();
    assert_eq!(rev_out.to_vec::<f32>().unwrap(), want_rev);
}

#[test]
fn reduction_into_stack_allocation() {
    // out[0] = sum(A); out[1] = max(A), accumulating in a 2-element local allocation.
    let n = Var::int32("n");
    let a = buf("A", f32t(), &n);
    let out = buf("out", f32t(), 2);
    let acc = kiln_tir::Buffer::decl_in("acc", f32t(), vec![PrimExpr::i32(2)], "local");
    let i = Var::int32("i");
    let z = || vec![PrimExpr::i32(0)];
    let one = || vec![PrimExpr::i32(1)];
    let body = Stmt::allocate_buffer(
        &acc,
        Stmt::seq(vec![
            acc.store(PrimExpr::f32(0.0), z()),
            acc.store(PrimExpr::f32(f32::NEG_INFINITY as f64), one()),
            Stmt::for_loop(
                &i,
                0,
                &n,
                ForKind::Serial,
                Stmt::seq(vec![
                    acc.store(acc.load(z()) + a.load(vec![i.to_expr()]), z()),
                    acc.store(
                        kiln_tir::max(acc.load(one()), a.load(vec![i.to_expr()])),
                        one(),
                    ),
                ]),
            ),
            out.store(acc.load(z()), z()),
            out.store(acc.load(one()), one()),
        ]),
    );
    let f = packed_func("reduce", &[Param::Tensor(a), Param::Tensor(out)], body);
    let m = kiln_codegen::build(&module(vec![f]), &native()).unwrap();
    let x = rand_f32(1001, 5, -1.0, 1.0);
    let o = nan_f32(2);
    m.function("reduce")
        .unwrap()
        .invoke::<()>((tensor(&x), o.clone()))
        .unwrap();
    let got = o.to_vec::<f32>().unwrap();
    let sum: f32 = x.iter().sum();
    let mx = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    assert!((got[0] - sum).abs() < 1e-3, "{} vs {sum}", got[0]);
    assert_eq!(got[1], mx);
}
