//! Kernels through the `c` target (issue 4's acceptance list): matmul under three schedules
//! (naive; tiled + vectorized + parallel with ragged edges; cache_write + compute_at), a 2-D
//! convolution with inlined padding (`if_then_else`), and softmax (max and sum reductions,
//! `exp`, compute_at, parallel rows), against naive Rust loops, outputs poisoned with NaN.

use kiln_codegen::{build_c, Target};
use kiln_ffi::DataType;
use kiln_runtime::module::Module;
use kiln_runtime::tensor::Tensor as Nd;
use kiln_te::*;
use kiln_tir::transform::lower_pipeline;
use kiln_tir::{op, IRModule, PrimExpr};

fn f32t() -> DataType {
    DataType::float(32)
}

fn c(v: i64) -> PrimExpr {
    PrimExpr::i32(v)
}

fn build(s: &Schedule, args: &[Tensor], name: &str) -> Module {
    let f = lower(s, args, name).unwrap();
    let m = lower_pipeline()
        .apply(IRModule::from_func(name, f))
        .unwrap();
    build_c(&m, &Target::parse("c").unwrap()).unwrap_or_else(|e| panic!("{e}\n{m}"))
}

fn rand_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn nd(data: &[f32], shape: &[i64]) -> Nd {
    Nd::from_slice(data, shape).unwrap()
}

fn nan(shape: &[i64]) -> Nd {
    let n: i64 = shape.iter().product();
    nd(&vec![f32::NAN; n as usize], shape)
}

fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
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

fn check_matmul(mm: &Matmul, s: &Schedule, (n, m, l): (i64, i64, i64), seed: u64) -> String {
    let module = build(s, &[mm.a.clone(), mm.b.clone(), mm.c.clone()], "mm");
    let av = rand_f32((n * l) as usize, seed);
    let bv = rand_f32((l * m) as usize, seed + 1);
    let mut want = vec![0f32; (n * m) as usize];
    for i in 0..n as usize {
        for j in 0..m as usize {
            want[i * m as usize + j] = (0..l as usize)
                .map(|k| av[i * l as usize + k] * bv[k * m as usize + j])
                .sum();
        }
    }
    let out = nan(&[n, m]);
    module
        .function("mm")
        .unwrap()
        .invoke::<()>((nd(&av, &[n, l]), nd(&bv, &[l, m]), out.clone()))
        .unwrap();
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-4, "mm");
    module.inspect_source("c").unwrap()
}

#[test]
fn matmul_naive() {
    let dims = (6, 5, 7);
    let mm = matmul(dims.0, dims.1, dims.2);
    let s = create_schedule(&[mm.c.op().clone()]);
    check_matmul(&mm, &s, dims, 10);
}

#[test]
fn matmul_tiled_vectorized_parallel_with_ragged_edges() {
    let dims = (19, 21, 13);
    let mm = matmul(dims.0, dims.1, dims.2);
    let s = create_schedule(&[mm.c.op().clone()]);
    let st = s.stage(&mm.c);
    let (xo, yo, xi, yi) = st.tile(&mm.c.axis(0), &mm.c.axis(1), 8, 8).unwrap();
    let (ko, ki) = st.split(&mm.k, 4).unwrap();
    st.reorder(&[xo.clone(), yo.clone(), ko, xi, ki, yi.clone()])
        .unwrap();
    let fused = st.fuse(&xo, &yo).unwrap();
    st.parallel(&fused).unwrap();
    st.vectorize(&yi).unwrap();
    let src = check_matmul(&mm, &s, dims, 20);
    assert!(src.contains("__TVMBackendParallelLaunch"), "{src}");
}

#[test]
fn matmul_cache_write_compute_at() {
    let dims = (16, 24, 10);
    let mm = matmul(dims.0, dims.1, dims.2);
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
    let src = check_matmul(&mm, &s, dims, 30);
    assert!(src.contains("__attribute__((aligned(64)))"), "{src}");
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
    let (rc, ry, rx) = (
        reduce_axis_n(ci, "rc"),
        reduce_axis_n(kh, "ry"),
        reduce_axis_n(kw, "rx"),
    );
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
    let module = build(&s, &[data, weight, conv], "conv");
    let dv = rand_f32((ci * h * w) as usize, 40);
    let wv = rand_f32((co * ci * kh * kw) as usize, 41);
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
    let out = nan(&[co, h, w]);
    module
        .function("conv")
        .unwrap()
        .invoke::<()>((
            nd(&dv, &[ci, h, w]),
            nd(&wv, &[co, ci, kh, kw]),
            out.clone(),
        ))
        .unwrap();
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-4, "conv");
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
    let module = build(&s, &[x, y], "softmax");
    let xv = rand_f32((n * m) as usize, 50);
    let mut want = vec![0f32; (n * m) as usize];
    for i in 0..n as usize {
        let row = &xv[i * m as usize..(i + 1) * m as usize];
        let mxv = row.iter().cloned().fold(f32::MIN, f32::max);
        let ex: Vec<f32> = row.iter().map(|v| (v - mxv).exp()).collect();
        let tot: f32 = ex.iter().sum();
        for j in 0..m as usize {
            want[i * m as usize + j] = ex[j] / tot;
        }
    }
    let out = nan(&[n, m]);
    module
        .function("softmax")
        .unwrap()
        .invoke::<()>((nd(&xv, &[n, m]), out.clone()))
        .unwrap();
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-5, "softmax");
}
