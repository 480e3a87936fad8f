//! max/avg pooling (padding, ceil mode, count_include_pad, dilation), global pooling,
//! softmax / log-softmax on several axes, layer norm and batch norm, built for the host CPU
//! against naive loops.

mod nn_common;

use kiln_topi::nn::{self, BatchNormAttrs, LayerNormAttrs, Padding2d, Pool2dAttrs};
use kiln_topi::schedule::{generic, x86};
use nn_common::*;

/// Naive pooling; windows follow the same output-size rule as ONNX / PyTorch.
fn pool_ref(d: &[f32], ds: [i64; 4], a: &Pool2dAttrs, is_max: bool) -> (Vec<f32>, [i64; 4]) {
    let [n, c, h, w] = ds;
    let p = a.padding;
    let (kh, kw) = a.pool_size;
    let (sh, sw) = a.strides;
    let (dh, dw) = a.dilation;
    let size = |inp: i64, lo: i64, hi: i64, k: i64, s: i64, dl: i64| {
        let span = dl * (k - 1) + 1;
        let num = inp + lo + hi - span;
        if a.ceil_mode {
            let mut o = (num + s - 1) / s + 1;
            if (o - 1) * s >= inp + lo {
                o -= 1;
            }
            o
        } else {
            num / s + 1
        }
    };
    let oh = size(h, p.top, p.bottom, kh, sh, dh);
    let ow = size(w, p.left, p.right, kw, sw, dw);
    let mut out = Vec::new();
    for b in 0..n {
        for ch in 0..c {
            for y in 0..oh {
                for x in 0..ow {
                    let (mut best, mut total, mut inside, mut padded) = (f32::MIN, 0f32, 0, 0);
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let iy = y * sh - p.top + ky * dh;
                            let ix = x * sw - p.left + kx * dw;
                            if iy < h + p.bottom && ix < w + p.right {
                                padded += 1;
                            }
                            if iy >= 0 && iy < h && ix >= 0 && ix < w {
                                let v = d[(((b * c + ch) * h + iy) * w + ix) as usize];
                                best = best.max(v);
                                total += v;
                                inside += 1;
                            }
                        }
                    }
                    let count = if a.count_include_pad { padded } else { inside };
                    out.push(if is_max {
                        best
                    } else {
                        total / count.max(1) as f32
                    });
                }
            }
        }
    }
    (out, [n, c, oh, ow])
}

#[test]
fn max_and_avg_pool2d() {
    let seed = seed("pool2d");
    let mut cases = vec![
        ("2x2 s2", [1, 3, 8, 8], Pool2dAttrs::new(2, 2)),
        (
            "3x3 s2 pad1 odd",
            [2, 2, 9, 11],
            Pool2dAttrs {
                padding: Padding2d::same(1),
                ..Pool2dAttrs::new(3, 2)
            },
        ),
        (
            "3x3 s2 ceil",
            [1, 4, 10, 7],
            Pool2dAttrs {
                ceil_mode: true,
                ..Pool2dAttrs::new(3, 2)
            },
        ),
        (
            "3x3 s1 asym pad include",
            [1, 2, 6, 17],
            Pool2dAttrs {
                padding: Padding2d::from_array([1, 0, 2, 1]),
                count_include_pad: true,
                ..Pool2dAttrs::new(3, 1)
            },
        ),
        (
            "2x2 s2 pad ceil include",
            [1, 1, 7, 7],
            Pool2dAttrs {
                padding: Padding2d::same(1),
                ceil_mode: true,
                count_include_pad: true,
                ..Pool2dAttrs::new(2, 2)
            },
        ),
        (
            "2x3 dilation2",
            [1, 2, 9, 12],
            Pool2dAttrs {
                dilation: (2, 2),
                pool_size: (2, 3),
                ..Pool2dAttrs::new(2, 1)
            },
        ),
    ];
    cases[5].2.padding = Padding2d::from_array([1, 2, 0, 1]);
    for (k, (what, ds, a)) in cases.into_iter().enumerate() {
        for is_max in [true, false] {
            let data = input(&ds, "data");
            let out = if is_max {
                nn::max_pool2d(&data, &a)
            } else {
                nn::avg_pool2d(&data, &a)
            }
            .unwrap();
            let inputs = [data];
            let vals = random_inputs(&inputs, seed + k as u64);
            let (want, oshape) = pool_ref(&vals[0], ds, &a, is_max);
            let what = format!("{} {what}", if is_max { "max" } else { "avg" });
            assert_eq!(shape_of(&out), oshape.to_vec(), "{what}: shape");
            check(
                &what,
                &out,
                &inputs,
                &vals,
                x86::schedule_pool,
                &want,
                1e-5,
                seed,
            );
        }
    }
}

#[test]
fn global_pools() {
    let seed = seed("global_pool2d");
    let shapes = [[1i64, 8, 7, 7], [2, 3, 5, 16], [1, 4, 13, 13], [1, 2, 3, 3]];
    for (k, ds) in shapes.into_iter().enumerate() {
        let data = input(&ds, "data");
        let inputs = [data.clone()];
        let vals = random_inputs(&inputs, seed + k as u64);
        let plane = (ds[2] * ds[3]) as usize;
        let planes: Vec<&[f32]> = vals[0].chunks(plane).collect();
        let want_max: Vec<f32> = planes
            .iter()
            .map(|p| p.iter().cloned().fold(f32::MIN, f32::max))
            .collect();
        let want_avg: Vec<f32> = planes
            .iter()
            .map(|p| p.iter().sum::<f32>() / plane as f32)
            .collect();
        // Planes reduced by scalar chains and in lane partials of 8 and 16 (whole vectors
        // and a tail; fewer than two vectors reduce directly).
        for lanes in [1, 8, 16] {
            let what = |op: &str| format!("global {op} in vectors of {lanes}");
            let mx = nn::global_max_pool2d(&data, lanes).unwrap();
            check(
                &what("max"),
                &mx,
                &inputs,
                &vals,
                x86::schedule_pool,
                &want_max,
                1e-5,
                seed,
            );
            let avg = nn::global_avg_pool2d(&data, lanes).unwrap();
            check(
                &what("avg"),
                &avg,
                &inputs,
                &vals,
                x86::schedule_pool,
                &want_avg,
                1e-5,
                seed,
            );
        }
    }
}

/// Naive (log-)softmax of `x` (shape `shape`) along `axis`.
fn softmax_ref(x: &[f32], shape: &[i64], axis: usize, log: bool) -> Vec<f32> {
    let outer: i64 = shape[..axis].iter().product();
    let len = shape[axis] as usize;
    let inner: i64 = shape[axis + 1..].iter().product();
    let mut out = vec![0f32; x.len()];
    for o in 0..outer as usize {
        for i in 0..inner as usize {
            let idx = |k: usize| (o * len + k) * inner as usize + i;
            let mx = (0..len).map(|k| x[idx(k)]).fold(f32::MIN, f32::max);
            let total: f32 = (0..len).map(|k| (x[idx(k)] - mx).exp()).sum();
            for k in 0..len {
                out[idx(k)] = if log {
                    x[idx(k)] - mx - total.ln()
                } else {
                    (x[idx(k)] - mx).exp() / total
                };
            }
        }
    }
    out
}

#[test]
fn softmax_and_log_softmax_axes() {
    let seed = seed("softmax");
    // Rows of 640 and 169 reduce in CHAINS vectors of partials (169: folded with the row's
    // remaining whole vectors, then a tail).
    let cases: [(&[i64], i64); 6] = [
        (&[4, 10], -1),
        (&[3, 33], 1),
        (&[2, 640], -1),
        (&[2, 169], -1),
        (&[2, 5, 6], 1),
        (&[2, 3, 17], 2),
    ];
    for (k, (shape, axis)) in cases.into_iter().enumerate() {
        let x = input(shape, "x");
        let inputs = [x.clone()];
        let vals = random_inputs(&inputs, seed + k as u64);
        let a = if axis < 0 {
            (axis + shape.len() as i64) as usize
        } else {
            axis as usize
        };
        let rows = |what: String, out: &kiln_te::Tensor, log: bool| {
            let want = softmax_ref(&vals[0], shape, a, log);
            let schedule = x86::schedule_softmax;
            check(&what, out, &inputs, &vals, schedule, &want, 1e-5, seed);
        };
        for lanes in [1, 8, 16] {
            let sm = nn::softmax::softmax_in_lanes(&x, axis, lanes).unwrap();
            rows(
                format!("softmax {shape:?} axis {axis} in lanes of {lanes}"),
                &sm,
                false,
            );
        }
        let ls = nn::log_softmax(&x, axis).unwrap();
        rows(format!("log_softmax {shape:?} axis {axis}"), &ls, true);
    }
}

/// The assembly of the softmax `out`, scheduled for and built with `target`.
fn assembly(out: &kiln_te::Tensor, inputs: &[kiln_te::Tensor], target: &str) -> String {
    let cpu = kiln_codegen::target::Target::parse(target)
        .unwrap()
        .cpu_desc();
    let s = kiln_te::create_schedule(&[out.op().clone()]);
    x86::schedule_softmax(&s, out, &cpu).unwrap();
    let mut args = inputs.to_vec();
    args.push(out.clone());
    let m = kiln_codegen::driver::build(&s, &args, target, "sm").unwrap();
    m.inspect_source("asm").unwrap()
}

#[test]
fn softmax_rows_prefetch_the_next_row_within_l1() {
    // Rows of 640 float32 (2.5 KiB) ask for the next row; rows of 6625 (26 KiB, more than a
    // quarter of any L1) and of 64 (256 bytes) do not. (The numbers of these kernels are
    // checked in `softmax_and_log_softmax_axes`, whose rows of 640 prefetch.)
    for target in ["llvm -mcpu=x86-64-v3", "llvm -mcpu=x86-64-v4"] {
        for (n, want) in [(640i64, true), (6625, false), (64, false)] {
            let x = input(&[4, n], "x");
            let sm = nn::softmax::softmax_in_lanes(&x, -1, 8).unwrap();
            let asm = assembly(&sm, &[x], target);
            assert_eq!(asm.contains("prefetcht0"), want, "rows of {n} for {target}");
        }
    }
}

#[test]
fn layer_norm_trailing_axes() {
    let seed = seed("layer_norm");
    // (shape, axes, with gamma/beta)
    // Rows of 64 and 37 reduce in lane partials of 8 and 16 (37: two vectors and a tail).
    let cases: [(&[i64], &[i64], bool); 6] = [
        (&[4, 32], &[-1], true),
        (&[2, 200], &[-1], true),
        (&[2, 3, 7], &[1, 2], true),
        (&[5, 9], &[1], false),
        (&[3, 64], &[-1], true),
        (&[2, 2, 37], &[-1], false),
    ];
    let runs = cases
        .into_iter()
        .flat_map(|c| [1i64, 8, 16].map(move |lanes| (c, lanes)));
    for (k, ((shape, axes, affine), lanes)) in runs.enumerate() {
        let nd = shape.len();
        let first = (axes[0] + if axes[0] < 0 { nd as i64 } else { 0 }) as usize;
        let norm = &shape[first..];
        let x = input(shape, "x");
        let gamma = input(norm, "gamma");
        let beta = input(norm, "beta");
        let attrs = LayerNormAttrs {
            axes: axes.to_vec(),
            epsilon: 1e-5,
        };
        let out = if affine {
            nn::layer_norm_in_lanes(&x, Some(&gamma), Some(&beta), &attrs, lanes)
        } else {
            nn::layer_norm_in_lanes(&x, None, None, &attrs, lanes)
        }
        .unwrap();
        let inputs = if affine {
            vec![x, gamma, beta]
        } else {
            vec![x]
        };
        let vals = random_inputs(&inputs, seed + k as u64);
        let row: usize = norm.iter().product::<i64>() as usize;
        let mut want = Vec::new();
        for r in vals[0].chunks(row) {
            let mean = r.iter().map(|v| *v as f64).sum::<f64>() / row as f64;
            let var = r.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / row as f64;
            for (j, v) in r.iter().enumerate() {
                let mut y = (*v as f64 - mean) / (var + 1e-5).sqrt();
                if affine {
                    y = y * vals[1][j] as f64 + vals[2][j] as f64;
                }
                want.push(y as f32);
            }
        }
        check(
            &format!("layer_norm {shape:?} {axes:?} in lanes of {lanes}"),
            &out,
            &inputs,
            &vals,
            x86::schedule_layer_norm,
            &want,
            1e-4,
            seed,
        );
    }
}

#[test]
fn batch_norm_inference_nchw() {
    let seed = seed("batch_norm");
    let shape = [2i64, 5, 3, 7];
    let x = input(&shape, "x");
    let params: Vec<_> = ["gamma", "beta", "mean", "var"]
        .iter()
        .map(|n| input(&[5], n))
        .collect();
    let out = nn::batch_norm_inference(
        &x,
        &params[0],
        &params[1],
        &params[2],
        &params[3],
        &BatchNormAttrs::default(),
    )
    .unwrap();
    let mut inputs = vec![x];
    inputs.extend(params);
    let mut vals = random_inputs(&inputs, seed);
    vals[4] = vals[4].iter().map(|v| v.abs() + 0.1).collect();
    let plane = 21;
    let want: Vec<f32> = vals[0]
        .iter()
        .enumerate()
        .map(|(k, v)| {
            let c = (k / plane) % 5;
            (v - vals[3][c]) / (vals[4][c] + 1e-5).sqrt() * vals[1][c] + vals[2][c]
        })
        .collect();
    check(
        "batch_norm",
        &out,
        &inputs,
        &vals,
        generic::schedule_injective,
        &want,
        1e-4,
        seed,
    );
}

#[test]
fn pools_over_channel_blocks() {
    let seed = seed("pool2d_blocked");
    let ds = [1i64, 32, 11, 12];
    let b = 16;
    let bshape = [ds[0], ds[1] / b, ds[2], ds[3], b];
    let a = nn::Pool2dAttrs {
        padding: nn::Padding2d::same(1),
        ..nn::Pool2dAttrs::new(3, 2)
    };
    for (k, is_max) in [true, false].into_iter().enumerate() {
        let data = input(&bshape, "data");
        let out = if is_max {
            nn::max_pool2d(&data, &a)
        } else {
            nn::avg_pool2d(&data, &a)
        }
        .unwrap();
        let vals = random_inputs(&[input(&ds, "d")], seed + k as u64);
        let (want, oshape) = pool_ref(&vals[0], ds, &a, is_max);
        assert_eq!(
            shape_of(&out),
            vec![oshape[0], oshape[1] / b, oshape[2], oshape[3], b]
        );
        check(
            if is_max { "blocked max" } else { "blocked avg" },
            &out,
            &[data],
            &[to_blocks(&vals[0], ds, b)],
            x86::schedule_pool,
            &to_blocks(&want, oshape, b),
            1e-5,
            seed,
        );
    }
    let data = input(&bshape, "data");
    let vals = random_inputs(&[input(&ds, "d")], seed + 5);
    let plane = (ds[2] * ds[3]) as usize;
    let want: Vec<f32> = vals[0]
        .chunks(plane)
        .map(|p| p.iter().sum::<f32>() / plane as f32)
        .collect();
    check(
        "blocked global avg",
        &nn::global_avg_pool2d(&data, 16).unwrap(),
        &[data],
        &[to_blocks(&vals[0], ds, b)],
        x86::schedule_pool,
        &to_blocks(&want, [ds[0], ds[1], 1, 1], b),
        1e-5,
        seed,
    );
}

#[test]
fn softmax_rows_scale_exponentials_and_halve_partials_in_vectors() {
    // AVX-512 scales the exponentials by 2^n with vscalefps, AVX2 in the exponent bits; on
    // both, a row's vector of partial maxima is halved in vector operations, so the scalar
    // chain of the row's final maximum holds two partials (rows of 640 have no tail). (The
    // numbers are checked in `softmax_and_log_softmax_axes`.)
    for (target, lanes, scalef) in [
        ("llvm -mcpu=x86-64-v3", 8, false),
        ("llvm -mcpu=x86-64-v4", 16, true),
    ] {
        let x = input(&[4, 640], "x");
        let sm = nn::softmax::softmax_in_lanes(&x, -1, lanes).unwrap();
        let asm = assembly(&sm, &[x], target);
        assert_eq!(asm.contains("vscalefps"), scalef, "{target}");
        let scalar_max = asm.matches("vmaxss").count();
        assert!(scalar_max <= 2, "{target}: {scalar_max} scalar maxima");
    }
}
