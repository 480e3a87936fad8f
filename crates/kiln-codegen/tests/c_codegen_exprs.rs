//! Expression kinds the schedules in `c_codegen*.rs` rarely produce, through the `c` target on
//! a hand-built packed function (the shared `codegen_common` helpers): `Let`, scalar and
//! vector `Select`, `Not`, `if_then_else`, `min`/`max`, float `floormod`, bit operations,
//! `reinterpret`, vector casts, gathers through a reversed ramp, and a scalar argument.

mod codegen_common;

use codegen_common::*;
use kiln_codegen::{build_c, Target};
use kiln_ffi::DataType;
use kiln_tir::{cast, floormod, let_expr, max, min, op, select, ForKind, PrimExpr, Stmt, Var};

#[test]
fn scalar_and_vector_expression_kinds() {
    let (f32t, i32t) = (DataType::float(32), DataType::int(32));
    let m_ = Var::int32("m");
    let n = &m_ * 4;
    let (a, b, c, d) = (
        buf("A", f32t, n.clone()),
        buf("B", i32t, n.clone()),
        buf("C", f32t, n.clone()),
        buf("D", f32t, n.clone()),
    );
    let scale = Var::new("scale", f32t);
    let (io, k, x) = (Var::int32("io"), Var::int32("k"), Var::new("x", f32t));
    let i = &io * 4 + &k;
    let av = a.load(vec![i.clone()]);
    let bv = b.load(vec![i.clone()]);
    // C[i] = let x = A[i] * scale in select(x > 0, x, -x) + float(((B[i] & 7) << 1) ^ 1)
    //        + floormod(x, 0.75) + max(x, 0.25) - min(x, -0.5) + if_then_else(i < 3, 100, 0)
    //        + float(reinterpret<int32>(x) == reinterpret<int32>(x)) + float(!(B[i] > 0))
    let bits = op::bitwise_xor(op::shift_left(op::bitwise_and(bv.clone(), 7), 1), 1);
    let same = op::reinterpret(i32t, x.to_expr()).equal(op::reinterpret(i32t, x.to_expr()));
    let body_x = select(x.to_expr().gt(0.0), x.to_expr(), -x.to_expr())
        + cast(f32t, bits)
        + floormod(x.to_expr(), 0.75)
        + max(x.to_expr(), 0.25)
        - min(x.to_expr(), -0.5)
        + op::if_then_else(i.clone().lt(3), PrimExpr::f32(100.0), PrimExpr::f32(0.0))
        + cast(f32t, same)
        + cast(f32t, PrimExpr::not_raw(bv.gt(0)));
    let scalar = c.store(let_expr(&x, &av * &scale, body_x), vec![i]);
    // D[ramp(4 io, 1, 4)] = select(A[ramp] > 0, A[ramp], float(B[reversed ramp]))
    let base = &io * 4;
    let ramp = PrimExpr::ramp_raw(base.clone(), PrimExpr::i32(1), 4);
    let rev = PrimExpr::ramp_raw(&base + 3, PrimExpr::i32(-1), 4);
    let zero = PrimExpr::broadcast_raw(PrimExpr::f32(0.0), 4);
    let vec_a = a.load(vec![ramp.clone()]);
    let vector = d.store(
        select(
            vec_a.gt(zero),
            vec_a.clone(),
            cast(f32t.with_lanes(4), b.load(vec![rev])),
        ),
        vec![ramp],
    );
    let body = Stmt::for_loop(
        &io,
        0,
        &m_,
        ForKind::Serial,
        Stmt::seq(vec![
            Stmt::for_loop(&k, 0, 4, ForKind::Serial, scalar),
            vector,
        ]),
    );
    let f = packed_func(
        "mix",
        &[
            Param::Scalar(m_.clone()),
            Param::Scalar(scale.clone()),
            Param::Tensor(a),
            Param::Tensor(b),
            Param::Tensor(c),
            Param::Tensor(d),
        ],
        body,
    );
    let m = build_c(&module(vec![f]), &Target::parse("c").unwrap()).unwrap();
    let src = m.inspect_source("c").unwrap();
    assert!(src.contains("kiln_float32x4"), "{src}");
    let len = 12usize;
    let av = rand_f32(len, 7, -2.0, 2.0);
    let bv: Vec<i32> = (0..len as i32).map(|v| v * 37 % 23 - 11).collect();
    let (cout, dout) = (nan_f32(len), nan_f32(len));
    m.function("mix")
        .unwrap()
        .invoke::<()>((
            (len / 4) as i64,
            1.5f64,
            tensor(&av),
            tensor(&bv),
            cout.clone(),
            dout.clone(),
        ))
        .unwrap();
    let floor_mod = |x: f32, y: f32| x - (x / y).floor() * y;
    let want_c: Vec<f32> = (0..len)
        .map(|i| {
            let x = av[i] * 1.5;
            let bits = (((bv[i] & 7) << 1) ^ 1) as f32;
            (if x > 0.0 { x } else { -x }) + bits + floor_mod(x, 0.75) + x.max(0.25) - x.min(-0.5)
                + if i < 3 { 100.0 } else { 0.0 }
                + 1.0
                + if bv[i] > 0 { 0.0 } else { 1.0 }
        })
        .collect();
    assert_close(&cout.to_vec::<f32>().unwrap(), &want_c, 1e-5, "C");
    let want_d: Vec<f32> = (0..len)
        .map(|i| {
            let r = (i / 4) * 4 + 3 - i % 4;
            if av[i] > 0.0 {
                av[i]
            } else {
                bv[r] as f32
            }
        })
        .collect();
    assert_eq!(dout.to_vec::<f32>().unwrap(), want_d);
}
