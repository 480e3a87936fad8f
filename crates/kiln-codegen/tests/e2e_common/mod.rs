//! Shared pieces of the end-to-end tests: the real pipeline (TE schedule -> `driver::lower` ->
//! LLVM -> load), random inputs from a printed seed, poisoned outputs, naive reference loops.
#![allow(dead_code)]

use kiln_ffi::DataType;
use kiln_runtime::tensor::Tensor as RtTensor;
use kiln_te::*;
use kiln_tir::{PrimExpr, Var};

/// The seed of this test process: `KILN_TEST_SEED` or the clock (printed so a failure can be
/// replayed).
pub fn seed(tag: &str) -> u64 {
    let s = std::env::var("KILN_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("{tag}: KILN_TEST_SEED={s}");
    s
}

/// `n` pseudo-random floats in [-1, 1) from `seed`.
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32) / ((1u64 << 23) as f32) - 1.0
        })
        .collect()
}

/// A float32 runtime tensor of `shape` holding `data`.
pub fn tensor(data: &[f32], shape: &[i64]) -> RtTensor {
    RtTensor::from_slice(data, shape).unwrap()
}

/// A float32 runtime tensor of `shape` full of NaN (outputs start poisoned).
pub fn poisoned(shape: &[i64]) -> RtTensor {
    let n: i64 = shape.iter().product();
    tensor(&vec![f32::NAN; n as usize], shape)
}

/// Asserts `got` matches `want` within `tol` (relative above magnitude 1), naming the seed.
pub fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str, seed: u64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        assert!(
            err <= tol * w.abs().max(1.0),
            "{what}[{i}]: got {g}, want {w} (KILN_TEST_SEED={seed})"
        );
    }
}

/// The native LLVM target string.
pub const NATIVE: &str = "llvm -mcpu=native";

/// The targets every numeric test runs on: LLVM for the host CPU and C source through `cc`.
pub const TARGETS: [&str; 2] = [NATIVE, "c"];

/// Every target paired with every item of `items`, target-major.
pub fn targets_by<T: Copy, const N: usize>(items: [T; N]) -> Vec<(&'static str, T)> {
    TARGETS
        .iter()
        .flat_map(|t| items.iter().map(move |i| (*t, *i)))
        .collect()
}

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

/// The naive matmul of row-major `a` (n x l) and `b` (l x m).
pub fn matmul_ref(a: &[f32], b: &[f32], n: usize, m: usize, l: usize) -> Vec<f32> {
    let mut want = vec![0f32; n * m];
    for i in 0..n {
        for j in 0..m {
            let mut acc = 0f32;
            for k in 0..l {
                acc += a[i * l + k] * b[k * m + j];
            }
            want[i * m + j] = acc;
        }
    }
    want
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

/// `C[n, m] = A[n, m] * B[m] + 1` with symbolic `n`, rows split by 4 (parallel outer,
/// unrolled inner): (A, B, C, schedule).
pub fn broadcast(m: i64) -> (Tensor, Tensor, Tensor, Schedule) {
    let n = Var::size_var("n", DataType::int(32));
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
    (a, b, cc, s)
}

/// A 2-D convolution (CHW data, OIHW weights, stride 1) with zero padding `pad` computed
/// through an inlined padding stage; rows split by 4 with the outer part parallel:
/// (data, weight, conv, schedule).
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

/// The naive convolution matching [`conv2d`]; `dims` = (ci, h, w, co, kh, kw, pad).
pub fn conv2d_ref(dv: &[f32], wv: &[f32], dims: (i64, i64, i64, i64, i64, i64, i64)) -> Vec<f32> {
    let (ci, h, w, co, kh, kw, pad) = dims;
    let mut want = vec![0f32; (co * h * w) as usize];
    for f in 0..co {
        for y in 0..h {
            for x in 0..w {
                let mut acc = 0f32;
                for r in 0..ci {
                    for dy in 0..kh {
                        for dx in 0..kw {
                            let (iy, ix) = (y + dy - pad, x + dx - pad);
                            if iy >= 0 && iy < h && ix >= 0 && ix < w {
                                acc += dv[((r * h + iy) * w + ix) as usize]
                                    * wv[(((f * ci + r) * kh + dy) * kw + dx) as usize];
                            }
                        }
                    }
                }
                want[((f * h + y) * w + x) as usize] = acc;
            }
        }
    }
    want
}

/// Row softmax of an `n` x `m` input in four stages (max, exp, sum, divide), the first three
/// computed at the output's rows, rows in parallel: (X, Y, schedule).
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

/// The naive row softmax.
pub fn softmax_ref(xv: &[f32], n: usize, m: usize) -> Vec<f32> {
    let mut want = vec![0f32; n * m];
    for i in 0..n {
        let row = &xv[i * m..(i + 1) * m];
        let mx = row.iter().cloned().fold(f32::MIN, f32::max);
        let ex: Vec<f32> = row.iter().map(|v| (v - mx).exp()).collect();
        let tot: f32 = ex.iter().sum();
        for j in 0..m {
            want[i * m + j] = ex[j] / tot;
        }
    }
    want
}
