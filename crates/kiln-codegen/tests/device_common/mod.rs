//! Schedules with thread bindings shared by the device code generation tests: a vector add
//! over a symbolic length, a row reduction (one work-item per row) and a naive 2-D matmul.

#![allow(dead_code)]

pub mod run;

use kiln_te::*;
use kiln_tir::{DataType, PrimExpr, Var};

/// `C = A + B` over `n`, split by 64 into `blockIdx.x` / `threadIdx.x`.
pub fn vadd() -> (Schedule, Vec<Tensor>) {
    let n = Var::size_var("n", DataType::int(32));
    let shape = [n.to_expr()];
    let a = placeholder(&shape, DataType::float(32), "A");
    let b = placeholder(&shape, DataType::float(32), "B");
    let c = compute(&shape, |i| a.at_vars(i) + b.at_vars(i), "C");
    let s = create_schedule(&[c.op().clone()]);
    let st = s.stage(&c);
    let (bx, tx) = st.split(&c.axis(0), 64).unwrap();
    st.bind(&bx, &thread_axis("blockIdx.x").unwrap()).unwrap();
    st.bind(&tx, &thread_axis("threadIdx.x").unwrap()).unwrap();
    (s, vec![a, b, c])
}

/// `R[i] = sum_k A[i, k]` for `A: [n, 128]`: one work-item per row, a serial loop over `k`.
pub fn rowsum() -> (Schedule, Vec<Tensor>) {
    let n = Var::size_var("n", DataType::int(32));
    let a = placeholder(&[n.to_expr(), PrimExpr::i32(128)], DataType::float(32), "A");
    let k = reduce_axis_n(128, "k");
    let r = compute(
        &[n.to_expr()],
        |i| sum(a.at(&[i[0].to_expr(), k.expr()]), std::slice::from_ref(&k)),
        "R",
    );
    let s = create_schedule(&[r.op().clone()]);
    let st = s.stage(&r);
    let (bx, tx) = st.split(&r.axis(0), 32).unwrap();
    st.bind(&bx, &thread_axis("blockIdx.x").unwrap()).unwrap();
    st.bind(&tx, &thread_axis("threadIdx.x").unwrap()).unwrap();
    (s, vec![a, r])
}

/// `C[i, j] = sum_k A[i, k] * B[k, j]` (64 x 64 x 64) on a 2-D grid of 8 x 8 tiles.
pub fn matmul() -> (Schedule, Vec<Tensor>) {
    let m = PrimExpr::i32(64);
    let f32t = DataType::float(32);
    let a = placeholder(&[m.clone(), m.clone()], f32t, "A");
    let b = placeholder(&[m.clone(), m.clone()], f32t, "B");
    let k = reduce_axis_n(64, "k");
    let c = compute(
        &[m.clone(), m.clone()],
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
    let (yo, xo, yi, xi) = st.tile(&c.axis(0), &c.axis(1), 8, 8).unwrap();
    st.bind(&yo, &thread_axis("blockIdx.y").unwrap()).unwrap();
    st.bind(&xo, &thread_axis("blockIdx.x").unwrap()).unwrap();
    st.bind(&yi, &thread_axis("threadIdx.y").unwrap()).unwrap();
    st.bind(&xi, &thread_axis("threadIdx.x").unwrap()).unwrap();
    (s, vec![a, b, c])
}

/// The matmul of [`matmul`] (`n` x `n` x `n`) tiled for shared memory: 8 x 8 threads per block
/// each compute one element; per step of 8 along `k` the block copies an 8 x 8 tile of `A`
/// and of `B` into `shared` memory (one element per thread) and reads them from there.
pub fn matmul_shared(n: i64) -> (Schedule, Vec<Tensor>) {
    let m = PrimExpr::i32(n);
    let f32t = DataType::float(32);
    let a = placeholder(&[m.clone(), m.clone()], f32t, "A");
    let b = placeholder(&[m.clone(), m.clone()], f32t, "B");
    let k = reduce_axis_n(n, "k");
    let c = compute(
        &[m.clone(), m.clone()],
        |i| {
            sum(
                a.at(&[i[0].to_expr(), k.expr()]) * b.at(&[k.expr(), i[1].to_expr()]),
                std::slice::from_ref(&k),
            )
        },
        "C",
    );
    let s = create_schedule(&[c.op().clone()]);
    let aa = s.cache_read(&a, "shared", &[c.op().clone()]).unwrap();
    let bb = s.cache_read(&b, "shared", &[c.op().clone()]).unwrap();
    let st = s.stage(&c);
    let (yo, xo, yi, xi) = st.tile(&c.axis(0), &c.axis(1), 8, 8).unwrap();
    let (ko, _ki) = st.split(&k, 8).unwrap();
    st.bind(&yo, &thread_axis("blockIdx.y").unwrap()).unwrap();
    st.bind(&xo, &thread_axis("blockIdx.x").unwrap()).unwrap();
    st.bind(&yi, &thread_axis("threadIdx.y").unwrap()).unwrap();
    st.bind(&xi, &thread_axis("threadIdx.x").unwrap()).unwrap();
    for t in [&aa, &bb] {
        let cs = s.stage(t);
        cs.compute_at(&st, &ko).unwrap();
        let leaves = cs.leaf_iter_vars();
        cs.bind(&leaves[0], &thread_axis("threadIdx.y").unwrap())
            .unwrap();
        cs.bind(&leaves[1], &thread_axis("threadIdx.x").unwrap())
            .unwrap();
    }
    (s, vec![a, b, c])
}

/// [`matmul_shared`] with the accumulation in a private register (`cache_write(C, "local")`
/// computed at each thread), the copy to `C` after the reduction.
pub fn matmul_shared_local(n: i64) -> (Schedule, Vec<Tensor>) {
    let m = PrimExpr::i32(n);
    let f32t = DataType::float(32);
    let a = placeholder(&[m.clone(), m.clone()], f32t, "A");
    let b = placeholder(&[m.clone(), m.clone()], f32t, "B");
    let k = reduce_axis_n(n, "k");
    let c = compute(
        &[m.clone(), m.clone()],
        |i| {
            sum(
                a.at(&[i[0].to_expr(), k.expr()]) * b.at(&[k.expr(), i[1].to_expr()]),
                std::slice::from_ref(&k),
            )
        },
        "C",
    );
    let s = create_schedule(&[c.op().clone()]);
    let aa = s.cache_read(&a, "shared", &[c.op().clone()]).unwrap();
    let bb = s.cache_read(&b, "shared", &[c.op().clone()]).unwrap();
    let cl = s.cache_write(&c, "local").unwrap();
    let st = s.stage(&c);
    let (yo, xo, yi, xi) = st.tile(&c.axis(0), &c.axis(1), 8, 8).unwrap();
    st.bind(&yo, &thread_axis("blockIdx.y").unwrap()).unwrap();
    st.bind(&xo, &thread_axis("blockIdx.x").unwrap()).unwrap();
    st.bind(&yi, &thread_axis("threadIdx.y").unwrap()).unwrap();
    st.bind(&xi, &thread_axis("threadIdx.x").unwrap()).unwrap();
    let ls = s.stage(&cl);
    ls.compute_at(&st, &xi).unwrap();
    let kl = cl.op().as_compute().unwrap().reduce_axis[0].clone();
    let (ko, _ki) = ls.split(&kl, 8).unwrap();
    for t in [&aa, &bb] {
        let cs = s.stage(t);
        cs.compute_at(&ls, &ko).unwrap();
        let leaves = cs.leaf_iter_vars();
        cs.bind(&leaves[0], &thread_axis("threadIdx.y").unwrap())
            .unwrap();
        cs.bind(&leaves[1], &thread_axis("threadIdx.x").unwrap())
            .unwrap();
    }
    (s, vec![a, b, c])
}
