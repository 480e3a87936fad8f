//! Numerics: lowered schedules run in the reference interpreter against naive Rust loops on
//! random inputs.

mod support;

use kiln_te::*;
use kiln_testing::{random, reference};
use kiln_tir::{op, DataType, PrimExpr, PrimFunc, Range, Var};
use support::assert_close;
use support::eval::{run, NdArray};

fn f32t() -> DataType {
    DataType::float(32)
}

fn c(v: i64) -> PrimExpr {
    PrimExpr::i32(v)
}

fn out(f: &PrimFunc, args: Vec<NdArray>, which: usize) -> Vec<f32> {
    let res = run(f, args).unwrap_or_else(|e| panic!("{e}\n{f}"));
    res[which].to_f32()
}

#[test]
fn elementwise_with_broadcasting_and_symbolic_rows() {
    let n = Var::size_var("n", DataType::int(32));
    let m = 7;
    let a = placeholder(&[n.to_expr(), c(m)], f32t(), "A");
    let b = placeholder(&[c(m)], f32t(), "B");
    let cc = compute(
        &[n.to_expr(), c(m)],
        |i| a.at_vars(i) * b.at(&[i[1].to_expr()]) + 1.0,
        "C",
    );
    let s = create_schedule(&[cc.op().clone()]);
    let st = s.stage(&cc);
    let (xo, xi) = st.split(&cc.axis(0), 4).unwrap();
    st.parallel(&xo).unwrap();
    st.unroll(&xi).unwrap();
    let f = lower(&s, &[a, b, cc], "bcast").unwrap();
    let rows = 6;
    let av = random(rows * m as usize, 1);
    let bv = random(m as usize, 2);
    let want: Vec<f32> = (0..rows * m as usize)
        .map(|k| av[k] * bv[k % m as usize] + 1.0)
        .collect();
    let got = out(
        &f,
        vec![
            NdArray::f32(&[rows as i64, m], &av),
            NdArray::f32(&[m], &bv),
            NdArray::zeros(&[rows as i64, m]),
        ],
        2,
    );
    assert_close(&got, &want, 1e-6);
}

#[test]
fn sum_over_an_axis() {
    let (n, m) = (5, 9);
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
    let f = lower(&s, &[a, b], "rowsum").unwrap();
    let av = random((n * m) as usize, 3);
    let want: Vec<f32> = (0..n as usize)
        .map(|i| av[i * m as usize..(i + 1) * m as usize].iter().sum())
        .collect();
    let got = out(
        &f,
        vec![NdArray::f32(&[n, m], &av), NdArray::zeros(&[n])],
        1,
    );
    assert_close(&got, &want, 1e-5);
}

struct Matmul {
    a: Tensor,
    b: Tensor,
    c: Tensor,
    k: IterVar,
}

fn matmul(n: i64, m: i64, l: i64) -> Matmul {
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
    Matmul { a, b, c: cc, k }
}

fn check_matmul(mm: &Matmul, f: &PrimFunc, n: i64, m: i64, l: i64, seed: u64) {
    let av = random((n * l) as usize, seed);
    let bv = random((l * m) as usize, seed + 1);
    let want = reference::matmul(&av, &bv, n as usize, m as usize, l as usize);
    let _ = mm;
    let got = out(
        f,
        vec![
            NdArray::f32(&[n, l], &av),
            NdArray::f32(&[l, m], &bv),
            NdArray::zeros(&[n, m]),
        ],
        2,
    );
    assert_close(&got, &want, 1e-4);
}

#[test]
fn matmul_naive() {
    let (n, m, l) = (6, 5, 7);
    let mm = matmul(n, m, l);
    let s = create_schedule(&[mm.c.op().clone()]);
    let f = lower(&s, &[mm.a.clone(), mm.b.clone(), mm.c.clone()], "mm").unwrap();
    check_matmul(&mm, &f, n, m, l, 10);
}

#[test]
fn matmul_tiled_vectorized_parallel_with_ragged_edges() {
    let (n, m, l) = (19, 21, 13);
    let mm = matmul(n, m, l);
    let s = create_schedule(&[mm.c.op().clone()]);
    let st = s.stage(&mm.c);
    let (xo, yo, xi, yi) = st.tile(&mm.c.axis(0), &mm.c.axis(1), 8, 8).unwrap();
    let (ko, ki) = st.split(&mm.k, 4).unwrap();
    st.reorder(&[xo.clone(), yo.clone(), ko, xi, ki, yi.clone()])
        .unwrap();
    let fused = st.fuse(&xo, &yo).unwrap();
    st.parallel(&fused).unwrap();
    st.vectorize(&yi).unwrap();
    let f = lower(&s, &[mm.a.clone(), mm.b.clone(), mm.c.clone()], "mm").unwrap();
    let text = f.to_string();
    assert!(text.contains("T.parallel"), "{text}");
    assert!(text.contains("T.vectorized"), "{text}");
    assert!(text.contains("T.likely"), "{text}");
    check_matmul(&mm, &f, n, m, l, 20);
}

#[test]
fn matmul_cache_write_compute_at() {
    let (n, m, l) = (16, 24, 10);
    let mm = matmul(n, m, l);
    let s = create_schedule(&[mm.c.op().clone()]);
    let cl = s.cache_write(&mm.c, "local").unwrap();
    let st = s.stage(&mm.c);
    let (xo, yo, _xi, yi) = st.tile(&mm.c.axis(0), &mm.c.axis(1), 8, 8).unwrap();
    st.vectorize(&yi).unwrap();
    st.parallel(&xo).unwrap();
    let lst = s.stage(&cl);
    lst.compute_at(&st, &yo).unwrap();
    let ax = lst.leaf_iter_vars();
    let (ko, ki) = lst.split(&mm.k, 2).unwrap();
    lst.reorder(&[ko, ki, ax[0].clone(), ax[1].clone()])
        .unwrap();
    lst.vectorize(&ax[1]).unwrap();
    let f = lower(&s, &[mm.a.clone(), mm.b.clone(), mm.c.clone()], "mm").unwrap();
    let text = f.to_string();
    assert!(text.contains("C.local = T.decl_buffer((8, 8)"), "{text}");
    check_matmul(&mm, &f, n, m, l, 30);
}

#[test]
fn conv2d_with_inlined_padding() {
    let (h, w, ci, co, kh, kw, pad) = (6i64, 5i64, 2i64, 3i64, 3i64, 3i64, 1i64);
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
    let (yo, yi) = s.stage(&conv).split(&conv.axis(1), 4).unwrap();
    s.stage(&conv).parallel(&yo).unwrap();
    let _ = yi;
    let f = lower(&s, &[data.clone(), weight.clone(), conv.clone()], "conv").unwrap();
    let text = f.to_string();
    assert!(!text.contains("pad["), "padding is inlined:\n{text}");
    let dv = random((ci * h * w) as usize, 40);
    let wv = random((co * ci * kh * kw) as usize, 41);
    let want = reference::conv2d_chw(&dv, &wv, (ci, h, w, co, kh, kw, pad));
    let got = out(
        &f,
        vec![
            NdArray::f32(&[ci, h, w], &dv),
            NdArray::f32(&[co, ci, kh, kw], &wv),
            NdArray::zeros(&[co, h, w]),
        ],
        2,
    );
    assert_close(&got, &want, 1e-4);
}

#[test]
fn softmax_in_four_stages() {
    let (n, m) = (4i64, 11i64);
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
        |i| op::exp(x.at_vars(i) - mx.at(&[i[0].to_expr()])),
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
    let f = lower(&s, &[x.clone(), y.clone()], "softmax").unwrap();
    let text = f.to_string();
    assert!(text.contains("exp = T.decl_buffer((1, 11)"), "{text}");
    let xv = random((n * m) as usize, 50);
    let want = reference::softmax_rows(&xv, n as usize, m as usize);
    let got = out(
        &f,
        vec![NdArray::f32(&[n, m], &xv), NdArray::zeros(&[n, m])],
        1,
    );
    assert_close(&got, &want, 1e-5);
}

#[test]
fn cache_read_into_local_and_general_reducer() {
    let (n, m) = (6i64, 8i64);
    let a = placeholder(&[c(n), c(m)], f32t(), "A");
    let k = reduce_axis_n(m, "k");
    // Sum of squares through a general combiner: x + y with identity 0.
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
    let f = lower(&s, &[a.clone(), b.clone()], "sumsq").unwrap();
    let text = f.to_string();
    assert!(text.contains("A.local = T.decl_buffer((1, 8)"), "{text}");
    let av = random((n * m) as usize, 60);
    let want: Vec<f32> = (0..n as usize)
        .map(|i| {
            av[i * m as usize..(i + 1) * m as usize]
                .iter()
                .map(|v| v * v)
                .sum()
        })
        .collect();
    let got = out(
        &f,
        vec![NdArray::f32(&[n, m], &av), NdArray::zeros(&[n])],
        1,
    );
    assert_close(&got, &want, 1e-5);
}
