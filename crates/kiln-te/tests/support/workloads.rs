//! Tensor-expression workloads that the numeric tests of kiln-te (through the reference
//! interpreter) and of kiln-codegen (compiled and run) both build: matmul with two schedules,
//! a broadcast with symbolic rows, a padded conv2d, a four-stage softmax and a sum of squares
//! read through a local cache. kiln-codegen's tests include this file with `#[path]`, so it
//! names only kiln-te and kiln-tir items.
#![allow(dead_code)]

use kiln_te::*;
use kiln_tir::{DataType, PrimExpr, Range, Var};

/// float32.
pub fn f32t() -> DataType {
    DataType::float(32)
}

/// An int32 constant.
pub fn c(v: i64) -> PrimExpr {
    PrimExpr::i32(v)
}

/// `C[n, m] = sum_k A[n, k] * B[k, m]`: (A, B, C, k).
pub fn matmul(n: i64, m: i64, l: i64) -> (Tensor, Tensor, Tensor, IterVar) {
    let a = placeholder(&[c(n), c(l)], f32t(), "A");
    let b = placeholder(&[c(l), c(m)], f32t(), "B");
    let k = reduce_axis_n(l, "k");
    let cc = compute(
        &[c(n), c(m)],
        |i| {
            sum(
                a.at(&[i[0].to_expr(), k.expr()]) * b.at(&[k.expr(), i[1].to_expr()]),
                std::slice::from_ref(&k),
            )
        },
        "C",
    );
    (a, b, cc, k)
}

/// The tiled + vectorized + parallel matmul schedule (tiles `tx` x `ty`, k split by `kf`).
pub fn schedule_tiled(cc: &Tensor, k: &IterVar, tx: i64, ty: i64, kf: i64) -> Schedule {
    let s = create_schedule(&[cc.op().clone()]);
    let st = s.stage(cc);
    let (xo, yo, xi, yi) = st.tile(&cc.axis(0), &cc.axis(1), tx, ty).unwrap();
    let (ko, ki) = st.split(k, kf).unwrap();
    st.reorder(&[xo.clone(), yo.clone(), ko, xi, ki, yi.clone()])
        .unwrap();
    let fused = st.fuse(&xo, &yo).unwrap();
    st.parallel(&fused).unwrap();
    st.vectorize(&yi).unwrap();
    s
}

/// The cache_write + compute_at matmul schedule (8 x 8 output tiles).
pub fn schedule_cache_write(cc: &Tensor, k: &IterVar) -> Schedule {
    let s = create_schedule(&[cc.op().clone()]);
    let cl = s.cache_write(cc, "local").unwrap();
    let st = s.stage(cc);
    let (xo, yo, _xi, yi) = st.tile(&cc.axis(0), &cc.axis(1), 8, 8).unwrap();
    st.vectorize(&yi).unwrap();
    st.parallel(&xo).unwrap();
    let lst = s.stage(&cl);
    lst.compute_at(&st, &yo).unwrap();
    let ax = lst.leaf_iter_vars();
    let (ko, ki) = lst.split(k, 2).unwrap();
    lst.reorder(&[ko, ki, ax[0].clone(), ax[1].clone()])
        .unwrap();
    lst.vectorize(&ax[1]).unwrap();
    s
}

/// `C[n, m] = A[n, m] * B[m] + 1` with symbolic `n`: (A, B, C).
pub fn broadcast_compute(m: i64) -> (Tensor, Tensor, Tensor) {
    let n = Var::size_var("n", DataType::int(32));
    let a = placeholder(&[n.to_expr(), c(m)], f32t(), "A");
    let b = placeholder(&[c(m)], f32t(), "B");
    let cc = compute(
        &[n.to_expr(), c(m)],
        |i| a.at_vars(i) * b.at(&[i[1].to_expr()]) + 1.0,
        "C",
    );
    (a, b, cc)
}

/// [`broadcast_compute`] with rows split by 4 (parallel outer, unrolled inner):
/// (A, B, C, schedule).
pub fn broadcast(m: i64) -> (Tensor, Tensor, Tensor, Schedule) {
    let (a, b, cc) = broadcast_compute(m);
    let s = create_schedule(&[cc.op().clone()]);
    let st = s.stage(&cc);
    let (xo, xi) = st.split(&cc.axis(0), 4).unwrap();
    st.parallel(&xo).unwrap();
    st.unroll(&xi).unwrap();
    (a, b, cc, s)
}

/// A 2-D convolution (CHW data, OIHW weights, stride 1) with zero padding `pad` computed
/// through an inlined padding stage; rows split by 4 with the outer part parallel:
/// (data, weight, conv, schedule). `kiln_testing::reference::conv2d_chw` is its reference.
pub fn conv2d(
    ci: i64,
    h: i64,
    w: i64,
    co: i64,
    kh: i64,
    kw: i64,
    pad: i64,
) -> (Tensor, Tensor, Tensor, Schedule) {
    let data = placeholder(&[c(ci), c(h), c(w)], f32t(), "data");
    let weight = placeholder(&[c(co), c(ci), c(kh), c(kw)], f32t(), "weight");
    let padded = compute(
        &[c(ci), c(h + 2 * pad), c(w + 2 * pad)],
        |i| {
            let (y, x) = (i[1].to_expr() - pad, i[2].to_expr() - pad);
            let inside = y
                .ge(0)
                .logical_and(y.lt(h))
                .logical_and(x.ge(0))
                .logical_and(x.lt(w));
            if_then_else(inside, data.at(&[i[0].to_expr(), y, x]), 0.0)
        },
        "pad",
    );
    let rc = reduce_axis_n(ci, "rc");
    let ry = reduce_axis_n(kh, "ry");
    let rx = reduce_axis_n(kw, "rx");
    let conv = compute(
        &[c(co), c(h), c(w)],
        |i| {
            let (f, y, x) = (i[0].to_expr(), i[1].to_expr(), i[2].to_expr());
            sum(
                padded.at(&[rc.expr(), y + ry.expr(), x + rx.expr()])
                    * weight.at(&[f, rc.expr(), ry.expr(), rx.expr()]),
                &[rc.clone(), ry.clone(), rx.clone()],
            )
        },
        "conv",
    );
    let s = create_schedule(&[conv.op().clone()]);
    s.stage(&padded).compute_inline().unwrap();
    let (yo, _yi) = s.stage(&conv).split(&conv.axis(1), 4).unwrap();
    s.stage(&conv).parallel(&yo).unwrap();
    (data, weight, conv, s)
}

/// Row softmax of an `n` x `m` input in four stages (max, exp, sum, divide), the first three
/// computed at the output's rows, rows in parallel: (X, Y, schedule).
/// `kiln_testing::reference::softmax_rows` is its reference.
pub fn softmax(n: i64, m: i64) -> (Tensor, Tensor, Schedule) {
    let x = placeholder(&[c(n), c(m)], f32t(), "X");
    let k1 = reduce_axis_n(m, "k1");
    let mx = compute(
        &[c(n)],
        |i| {
            max(
                x.at(&[i[0].to_expr(), k1.expr()]),
                std::slice::from_ref(&k1),
            )
        },
        "maxelem",
    );
    let e = compute(
        &[c(n), c(m)],
        |i| kiln_tir::op::exp(x.at_vars(i) - mx.at(&[i[0].to_expr()])),
        "exp",
    );
    let k2 = reduce_axis_n(m, "k2");
    let sm = compute(
        &[c(n)],
        |i| {
            sum(
                e.at(&[i[0].to_expr(), k2.expr()]),
                std::slice::from_ref(&k2),
            )
        },
        "expsum",
    );
    let y = compute(
        &[c(n), c(m)],
        |i| e.at_vars(i) / sm.at(&[i[0].to_expr()]),
        "Y",
    );
    let s = create_schedule(&[y.op().clone()]);
    let sy = s.stage(&y);
    s.stage(&e).compute_at(&sy, &y.axis(0)).unwrap();
    s.stage(&sm).compute_at(&sy, &y.axis(0)).unwrap();
    s.stage(&mx).compute_at(&sy, &y.axis(0)).unwrap();
    sy.parallel(&y.axis(0)).unwrap();
    (x, y, s)
}

/// `B[i] = sum_k A[i, k]^2` through a general combiner (x + y, identity 0), with A read
/// through a `local` cache computed at B's rows: (A, B, schedule).
pub fn sum_of_squares_cache_read(n: i64, m: i64) -> (Tensor, Tensor, Schedule) {
    let a = placeholder(&[c(n), c(m)], f32t(), "A");
    let k = reduce_axis_n(m, "k");
    let b = compute(
        &[c(n)],
        |i| {
            let v = a.at(&[i[0].to_expr(), k.expr()]);
            comm_reduce(
                |x, y| x + y,
                PrimExpr::f32(0.0),
                &v * &v,
                std::slice::from_ref(&k),
                None,
            )
        },
        "B",
    );
    let s = create_schedule(&[b.op().clone()]);
    let al = s.cache_read(&a, "local", &[b.op().clone()]).unwrap();
    s.stage(&al).compute_at(&s.stage(&b), &b.axis(0)).unwrap();
    (a, b, s)
}

/// `B[i] = sum_k A[i, k]` over an `n` x `m` input with k split by 4 and the inner part
/// outermost: (A, B, schedule).
pub fn row_sum_split(n: i64, m: i64) -> (Tensor, Tensor, Schedule) {
    let a = placeholder(&[c(n), c(m)], f32t(), "A");
    let k = reduce_axis(Range::from_min_extent(0, m), "k");
    let b = compute(
        &[c(n)],
        |i| sum(a.at(&[i[0].to_expr(), k.expr()]), std::slice::from_ref(&k)),
        "B",
    );
    let s = create_schedule(&[b.op().clone()]);
    let (ko, ki) = s.stage(&b).split(&k, 4).unwrap();
    s.stage(&b).reorder(&[ki, ko]).unwrap();
    (a, b, s)
}
