//! Layout operators of `kiln_topi::transform` through `driver::build` on `llvm -mcpu=native`
//! under `schedule_injective`, against naive Rust references.

#[path = "topi_injective_common.rs"]
mod common;

use common::*;
use kiln_ffi::DataType;
use kiln_te::Tensor;
use kiln_topi::transform as tf;

/// Placeholders `X0`, `X1`, ... of `shapes` and random values for each.
fn inputs<S: AsRef<[i64]>>(shapes: &[S], rng: &mut Rng) -> (Vec<Tensor>, Vec<Vec<f32>>) {
    let xs = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| ph(s.as_ref(), f32t(), &format!("X{k}")))
        .collect();
    let vals = shapes.iter().map(|s| rng.f32s(numel(s.as_ref()))).collect();
    (xs, vals)
}

/// [`run1`] of several inputs.
fn run_many(xs: &[Tensor], y: &Tensor, vals: &[Vec<f32>], name: &str) -> Vec<f64> {
    let s = tf::create_injective_schedule(std::slice::from_ref(y), &cpu()).unwrap();
    let ins = vals
        .iter()
        .zip(xs)
        .map(|(v, x)| rt_f32(v, &shape_of(x)))
        .collect();
    run_with(&s, xs, std::slice::from_ref(y), ins, name).remove(0)
}

fn run1(x: &Tensor, y: &Tensor, xv: &[f32], name: &str) -> Vec<f64> {
    let s = tf::create_injective_schedule(std::slice::from_ref(y), &cpu()).unwrap();
    run_with(
        &s,
        std::slice::from_ref(x),
        std::slice::from_ref(y),
        vec![rt_f32(xv, &shape_of(x))],
        name,
    )
    .remove(0)
}

/// The reference of an injective op: output point -> input linear index.
fn gather_ref(xv: &[f32], out: &[i64], f: impl Fn(&[i64]) -> i64) -> Vec<f64> {
    (0..numel(out) as i64)
        .map(|l| xv[f(&unravel(l, out)) as usize] as f64)
        .collect()
}

#[test]
fn reshape_transpose_flatten_squeeze() {
    let seed = seed("layout");
    let mut rng = Rng::new(seed);
    let s = [2i64, 3, 4];
    let xv = rng.f32s(24);
    let x = ph(&s, f32t(), "X");
    let plain = |y: Tensor, out: &[i64], name: &str| {
        assert_eq!(shape_of(&y), out, "{name}");
        let got = run1(&x, &y, &xv, name);
        let want: Vec<f64> = xv.iter().map(|&v| v as f64).collect();
        assert_close(&got, &want, 0.0, name, seed);
    };
    plain(
        tf::reshape(&x, &[0, -1], false).unwrap(),
        &[2, 12],
        "reshape0-1",
    );
    plain(
        tf::reshape(&x, &[4, 0, 2], false).unwrap(),
        &[4, 3, 2],
        "reshape402",
    );
    plain(tf::reshape(&x, &[-1], false).unwrap(), &[24], "reshape-1");
    plain(tf::flatten(&x, 1).unwrap(), &[2, 12], "flatten1");
    plain(tf::flatten(&x, 0).unwrap(), &[1, 24], "flatten0");
    plain(tf::flatten(&x, -1).unwrap(), &[6, 4], "flatten-1");
    plain(
        tf::unsqueeze(&x, &[0, -1]).unwrap(),
        &[1, 2, 3, 4, 1],
        "unsqueeze",
    );
    plain(
        tf::expand_dims(&x, -1, 2).unwrap(),
        &[2, 3, 4, 1, 1],
        "expand_dims",
    );
    let x1 = ph(&[1, 3, 1, 2], f32t(), "X1");
    let y = tf::squeeze(&x1, None).unwrap();
    assert_eq!(shape_of(&y), vec![3, 2]);
    let y = tf::squeeze(&x1, Some(&[-2])).unwrap();
    assert_eq!(shape_of(&y), vec![1, 3, 2]);
    let xv1 = rng.f32s(6);
    let got = run1(&x1, &y, &xv1, "squeeze");
    assert_close(
        &got,
        &xv1.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        0.0,
        "squeeze",
        seed,
    );
    assert!(tf::squeeze(&x1, Some(&[1])).is_err());
    assert!(tf::reshape(&x, &[5, -1], false).is_err());
    assert!(tf::reshape(&x, &[-1, -1], false).is_err());
    assert!(tf::reshape(&x, &[7, 0], false).is_err());
    // allowzero: a 0 is an empty axis, which only an empty input can be reshaped to.
    assert!(tf::reshape(&x, &[24, 0], true).is_err());
    let e = ph(&[0, 3, 4], f32t(), "E");
    assert_eq!(
        shape_of(&tf::reshape(&e, &[3, 4, 0], true).unwrap()),
        [3, 4, 0]
    );
    assert_eq!(
        shape_of(&tf::reshape(&e, &[0, 4, 3], false).unwrap()),
        [0, 4, 3]
    );
    assert_eq!(shape_of(&tf::reshape(&e, &[6, -1], false).unwrap()), [6, 0]);
    assert!(tf::reshape(&e, &[0, -1], true).is_err());

    for perm in [None, Some(vec![1i64, 0, 2]), Some(vec![-1, 0, 1])] {
        let y = tf::transpose(&x, perm.as_deref()).unwrap();
        let p: Vec<usize> = match &perm {
            None => vec![2, 1, 0],
            Some(p) => p.iter().map(|&a| a.rem_euclid(3) as usize).collect(),
        };
        let out: Vec<i64> = p.iter().map(|&a| s[a]).collect();
        assert_eq!(shape_of(&y), out);
        let got = run1(&x, &y, &xv, "transpose");
        let want = gather_ref(&xv, &out, |o| {
            let mut idx = [0i64; 3];
            for k in 0..3 {
                idx[p[k]] = o[k];
            }
            ravel(&idx, &s)
        });
        assert_close(&got, &want, 0.0, &format!("transpose {perm:?}"), seed);
    }
    assert!(tf::transpose(&x, Some(&[0, 0, 1])).is_err());
}

#[test]
fn concatenate_along_the_innermost_axis() {
    // Offsets of whole vectors (one branch per vector) and ragged ones (masked loads).
    let seed = seed("concat_inner");
    let mut rng = Rng::new(seed);
    for widths in [[16i64, 32, 16], [5, 11, 24], [8, 40, 3]] {
        let shapes: Vec<[i64; 2]> = widths.iter().map(|&w| [3, w]).collect();
        let (xs, vals) = inputs(&shapes, &mut rng);
        let y = tf::concatenate(&xs, -1).unwrap();
        let total: i64 = widths.iter().sum();
        assert_eq!(shape_of(&y), [3, total]);
        let got = run_many(&xs, &y, &vals, "concat_inner");
        let mut want = Vec::new();
        for r in 0..3usize {
            for (k, &w) in widths.iter().enumerate() {
                let w = w as usize;
                want.extend(vals[k][r * w..(r + 1) * w].iter().map(|&v| v as f64));
            }
        }
        assert_close(&got, &want, 0.0, &format!("concat {widths:?}"), seed);
    }
}

#[test]
fn concatenate_and_split() {
    let seed = seed("concat");
    let mut rng = Rng::new(seed);
    let shapes = [[2i64, 1, 3], [2, 4, 3], [2, 2, 3]];
    let (xs, vals) = inputs(&shapes, &mut rng);
    for axis in [1i64, -2] {
        let y = tf::concatenate(&xs, axis).unwrap();
        let out = [2i64, 7, 3];
        assert_eq!(shape_of(&y), out);
        let got = run_many(&xs, &y, &vals, "concat");
        let want: Vec<f64> = (0..42)
            .map(|l| {
                let mut idx = unravel(l, &out);
                let mut k = 0;
                while idx[1] >= shapes[k][1] {
                    idx[1] -= shapes[k][1];
                    k += 1;
                }
                vals[k][ravel(&idx, &shapes[k]) as usize] as f64
            })
            .collect();
        assert_close(&got, &want, 0.0, "concat", seed);
    }
    assert!(tf::concatenate(&xs, 0).is_err());

    let x = ph(&[3, 7], f32t(), "X");
    let xv = rng.f32s(21);
    for (spec, sizes) in [
        (tf::SplitSpec::Indices(vec![2, 5]), vec![2i64, 3, 2]),
        (tf::SplitSpec::Sizes(vec![1, 0, 6]), vec![1, 0, 6]),
        (tf::SplitSpec::Sections(7), vec![1; 7]),
    ] {
        let outs = tf::split(&x, &spec, -1).unwrap();
        let nonempty: Vec<Tensor> = outs
            .iter()
            .filter(|t| shape_of(t)[1] > 0)
            .cloned()
            .collect();
        let s = tf::create_injective_schedule(&nonempty, &cpu()).unwrap();
        let got = run_with(
            &s,
            std::slice::from_ref(&x),
            &nonempty,
            vec![rt_f32(&xv, &[3, 7])],
            "split",
        );
        let mut off = 0;
        let mut g = got.iter();
        for &len in &sizes {
            if len > 0 {
                let want = gather_ref(&xv, &[3, len], |o| o[0] * 7 + o[1] + off);
                assert_close(
                    g.next().unwrap(),
                    &want,
                    0.0,
                    &format!("split {spec:?}"),
                    seed,
                );
            }
            off += len;
        }
    }
    assert!(tf::split(&x, &tf::SplitSpec::Sections(2), 1).is_err());
    assert!(tf::split(&x, &tf::SplitSpec::Sizes(vec![3, 3]), 1).is_err());
}

/// begin, end, steps, axes.
type SliceCase = (Vec<i64>, Vec<i64>, Vec<i64>, Option<Vec<i64>>);

fn slice_ref(n: i64, b: i64, e: i64, st: i64) -> Vec<i64> {
    // Python's range semantics after ONNX clamping.
    let fix = |v: i64| if v < 0 { v + n } else { v };
    let (mut s, mut en) = (fix(b), fix(e));
    let mut out = Vec::new();
    if st > 0 {
        s = s.clamp(0, n);
        en = en.clamp(0, n);
        while s < en {
            out.push(s);
            s += st;
        }
    } else {
        s = s.clamp(0, n - 1);
        en = en.clamp(-1, n - 1);
        while s > en {
            out.push(s);
            s += st;
        }
    }
    out
}

#[test]
fn strided_slice_onnx() {
    let seed = seed("slice");
    let mut rng = Rng::new(seed);
    let s = [5i64, 7];
    let x = ph(&s, f32t(), "X");
    let xv = rng.f32s(35);
    let cases: Vec<SliceCase> = vec![
        (vec![1, 0], vec![4, 7], vec![1, 2], None),
        (vec![-1, 6], vec![-6, 0], vec![-1, -2], None),
        (vec![0], vec![i64::MAX], vec![3], Some(vec![-1])),
        (
            vec![i64::MAX, -100],
            vec![i64::MIN, 100],
            vec![-2, 3],
            Some(vec![0, 1]),
        ),
        (vec![3], vec![1], vec![1], Some(vec![1])),
    ];
    for (b, e, st, axes) in cases {
        let y = tf::strided_slice(&x, &b, &e, Some(&st), axes.as_deref()).unwrap();
        let ax: Vec<usize> = axes
            .clone()
            .unwrap_or((0..b.len() as i64).collect())
            .iter()
            .map(|&a| a.rem_euclid(2) as usize)
            .collect();
        let mut sel: Vec<Vec<i64>> = (0..2).map(|d| (0..s[d]).collect()).collect();
        for (j, &a) in ax.iter().enumerate() {
            sel[a] = slice_ref(s[a], b[j], e[j], st[j]);
        }
        let out = [sel[0].len() as i64, sel[1].len() as i64];
        assert_eq!(shape_of(&y), out, "{b:?} {e:?} {st:?}");
        if numel(&out) == 0 {
            continue;
        }
        let got = run1(&x, &y, &xv, "slice");
        let want = gather_ref(&xv, &out, |o| {
            sel[0][o[0] as usize] * 7 + sel[1][o[1] as usize]
        });
        assert_close(&got, &want, 0.0, &format!("slice {b:?} {e:?} {st:?}"), seed);
    }
    assert!(tf::strided_slice(&x, &[0], &[1], Some(&[0]), None).is_err());
}

#[test]
fn pad_modes() {
    let seed = seed("pad");
    let mut rng = Rng::new(seed);
    let s = [3i64, 4];
    let x = ph(&s, f32t(), "X");
    let xv = rng.f32s(12);
    let reflect = |c: i64, n: i64| {
        let p = 2 * (n - 1);
        let m = c.rem_euclid(p);
        if m < n {
            m
        } else {
            p - m
        }
    };
    for (before, after) in [([1i64, 2], [2i64, 5]), ([0, -1], [1, 0])] {
        for mode in [
            tf::PadMode::Constant(1.5),
            tf::PadMode::Edge,
            tf::PadMode::Reflect,
            tf::PadMode::Wrap,
        ] {
            let y = tf::pad(&x, &before, &after, mode).unwrap();
            let out: Vec<i64> = (0..2).map(|d| s[d] + before[d] + after[d]).collect();
            assert_eq!(shape_of(&y), out);
            let got = run1(&x, &y, &xv, "pad");
            let want: Vec<f64> = (0..numel(&out) as i64)
                .map(|l| {
                    let o = unravel(l, &out);
                    let c: Vec<i64> = (0..2).map(|d| o[d] - before[d]).collect();
                    let inside = (0..2).all(|d| c[d] >= 0 && c[d] < s[d]);
                    let idx: Vec<i64> = match mode {
                        tf::PadMode::Constant(v) if !inside => return v,
                        tf::PadMode::Constant(_) => c,
                        tf::PadMode::Edge => (0..2).map(|d| c[d].clamp(0, s[d] - 1)).collect(),
                        tf::PadMode::Reflect => (0..2).map(|d| reflect(c[d], s[d])).collect(),
                        tf::PadMode::Wrap => (0..2).map(|d| c[d].rem_euclid(s[d])).collect(),
                    };
                    xv[ravel(&idx, &s) as usize] as f64
                })
                .collect();
            assert_close(
                &got,
                &want,
                0.0,
                &format!("pad {mode:?} {before:?} {after:?}"),
                seed,
            );
        }
    }
}

#[test]
fn take_gather_wraps_negative() {
    let seed = seed("take");
    let mut rng = Rng::new(seed);
    let s = [4i64, 5, 3];
    let x = ph(&s, f32t(), "X");
    let xv = rng.f32s(60);
    for axis in [1i64, -3, 2] {
        let a = axis.rem_euclid(3) as usize;
        let n = s[a];
        let ish = [2i64, 3];
        let iv = rng.ints(6, -n, n);
        let ind = ph(&ish, DataType::int(64), "I");
        let y = tf::take(&x, &ind, axis).unwrap();
        let mut out: Vec<i64> = s[..a].to_vec();
        out.extend(ish);
        out.extend(&s[a + 1..]);
        assert_eq!(shape_of(&y), out);
        let sch = tf::create_injective_schedule(std::slice::from_ref(&y), &cpu()).unwrap();
        let ins = vec![
            rt_f32(&xv, &s),
            kiln_runtime::tensor::Tensor::from_slice(&iv, &ish).unwrap(),
        ];
        let got = run_with(&sch, &[x.clone(), ind], &[y], ins, "take").remove(0);
        let want = gather_ref(&xv, &out, |o| {
            let k = iv[(o[a] * 3 + o[a + 1]) as usize];
            let k = if k < 0 { k + n } else { k };
            let mut idx: Vec<i64> = o[..a].to_vec();
            idx.push(k);
            idx.extend(&o[a + 2..]);
            ravel(&idx, &s)
        });
        assert_close(&got, &want, 0.0, &format!("take axis {axis}"), seed);
    }
}

#[test]
fn resize_nearest_and_linear() {
    let seed = seed("resize");
    let mut rng = Rng::new(seed);
    let s = [1i64, 2, 3, 5];
    let x = ph(&s, f32t(), "X");
    let xv = rng.f32s(30);
    let coord = |o: i64, n: i64, m: i64, mode: tf::CoordMode| -> f32 {
        let scale = m as f32 / n as f32;
        let of = o as f32;
        match mode {
            tf::CoordMode::HalfPixel => (of + 0.5) / scale - 0.5,
            tf::CoordMode::PytorchHalfPixel if m == 1 => 0.0,
            tf::CoordMode::PytorchHalfPixel => (of + 0.5) / scale - 0.5,
            tf::CoordMode::Asymmetric => of / scale,
            tf::CoordMode::AlignCorners if m == 1 => 0.0,
            tf::CoordMode::AlignCorners => of * (n - 1) as f32 / (m - 1) as f32,
        }
    };
    use tf::{CoordMode as C, NearestMode as N, ResizeMethod as M};
    let cases = [
        (M::Nearest(N::RoundPreferFloor), C::Asymmetric, (6, 10)),
        (M::Nearest(N::RoundPreferFloor), C::HalfPixel, (7, 3)),
        (M::Nearest(N::Floor), C::Asymmetric, (5, 9)),
        (M::Nearest(N::RoundPreferCeil), C::AlignCorners, (4, 11)),
        (M::Linear, C::HalfPixel, (6, 9)),
        (M::Linear, C::AlignCorners, (5, 8)),
        (M::Linear, C::Asymmetric, (2, 3)),
        (M::Linear, C::PytorchHalfPixel, (1, 7)),
    ];
    for (method, mode, (oh, ow)) in cases {
        let y = tf::resize2d(&x, (oh, ow), method, mode).unwrap();
        let out = [1, 2, oh, ow];
        let got = run1(&x, &y, &xv, "resize");
        let at = |c: i64, yy: i64, xx: i64| xv[ravel(&[0, c, yy, xx], &s) as usize];
        let want: Vec<f64> = (0..numel(&out) as i64)
            .map(|l| {
                let o = unravel(l, &out);
                let sy = coord(o[2], 3, oh, mode);
                let sx = coord(o[3], 5, ow, mode);
                match method {
                    M::Nearest(nm) => {
                        let r = |v: f32| match nm {
                            N::RoundPreferFloor => (v - 0.5).ceil(),
                            N::RoundPreferCeil => (v + 0.5).floor(),
                            N::Floor => v.floor(),
                            N::Ceil => v.ceil(),
                        } as i64;
                        at(o[1], r(sy).clamp(0, 2), r(sx).clamp(0, 4)) as f64
                    }
                    M::Linear => {
                        let (y0, x0) = (sy.floor(), sx.floor());
                        let (ly, lx) = (sy - y0, sx - x0);
                        let (y0, x0) = (y0 as i64, x0 as i64);
                        let (y1, x1) = ((y0 + 1).clamp(0, 2), (x0 + 1).clamp(0, 4));
                        let (y0, x0) = (y0.clamp(0, 2), x0.clamp(0, 4));
                        let top = at(o[1], y0, x0) * (1.0 - lx) + at(o[1], y0, x1) * lx;
                        let bot = at(o[1], y1, x0) * (1.0 - lx) + at(o[1], y1, x1) * lx;
                        (top * (1.0 - ly) + bot * ly) as f64
                    }
                }
            })
            .collect();
        assert_close(
            &got,
            &want,
            1e-5,
            &format!("resize {method:?} {mode:?} {oh}x{ow}"),
            seed,
        );
    }
}

#[test]
fn tile_repeats() {
    let seed = seed("tile");
    let mut rng = Rng::new(seed);
    let s = [2i64, 1, 3];
    let x = ph(&s, f32t(), "X");
    let xv = rng.f32s(6);
    let y = tf::tile(&x, &[2, 3, 1]).unwrap();
    let out = [4i64, 3, 3];
    assert_eq!(shape_of(&y), out);
    let got = run1(&x, &y, &xv, "tile");
    let want = gather_ref(&xv, &out, |o| ravel(&[o[0] % 2, 0, o[2]], &s));
    assert_close(&got, &want, 0.0, "tile", seed);
}

#[test]
fn depth_to_space_modes_and_channel_blocks() {
    let seed = seed("depth_to_space");
    let mut rng = Rng::new(seed);
    // DCR reads channel (i*sw + j)*C + c for output channel c at pixel offset (i, j) of an
    // sh x sw block; CRD reads c*sh*sw + i*sw + j.
    let channel =
        |mode: tf::DepthToSpaceMode, c: i64, i: i64, j: i64, (sh, sw): (i64, i64), per: i64| {
            match mode {
                tf::DepthToSpaceMode::Dcr => (i * sw + j) * per + c,
                tf::DepthToSpaceMode::Crd => c * sh * sw + i * sw + j,
            }
        };
    for (mode, (sh, sw), per) in [
        (tf::DepthToSpaceMode::Dcr, (2, 2), 3),
        (tf::DepthToSpaceMode::Crd, (2, 2), 3),
        (tf::DepthToSpaceMode::Dcr, (3, 3), 2),
        (tf::DepthToSpaceMode::Dcr, (1, 3), 2),
        (tf::DepthToSpaceMode::Crd, (2, 3), 2),
    ] {
        let shape = [2i64, per * sh * sw, 3, 5];
        let x = ph(&shape, f32t(), "X");
        let xv = rng.f32s(numel(&shape));
        let y = tf::depth_to_space(&x, (sh, sw), mode, false).unwrap();
        let out = [2i64, per, 3 * sh, 5 * sw];
        assert_eq!(shape_of(&y), out);
        let got = run1(&x, &y, &xv, "depth_to_space");
        let want = gather_ref(&xv, &out, |o| {
            let k = channel(mode, o[1], o[2] % sh, o[3] % sw, (sh, sw), per);
            ravel(&[o[0], k, o[2] / sh, o[3] / sw], &shape)
        });
        assert_close(&got, &want, 0.0, &format!("{mode:?} {sh}x{sw}"), seed);
    }
    // Channel blocks of 8 (DCR): 2 output blocks, 2x3 pixel offsets, so 12 input blocks.
    let (b, (sh, sw), per) = (8i64, (2i64, 3i64), 16i64);
    let shape = [1i64, per * sh * sw / b, 4, 3, b];
    let x = ph(&shape, f32t(), "X");
    let xv = rng.f32s(numel(&shape));
    let y = tf::depth_to_space(&x, (sh, sw), tf::DepthToSpaceMode::Dcr, true).unwrap();
    let out = [1i64, per / b, 4 * sh, 3 * sw, b];
    assert_eq!(shape_of(&y), out);
    let got = run1(&x, &y, &xv, "depth_to_space_blocks");
    let want = gather_ref(&xv, &out, |o| {
        let c = o[1] * b + o[4];
        let k = channel(
            tf::DepthToSpaceMode::Dcr,
            c,
            o[2] % sh,
            o[3] % sw,
            (sh, sw),
            per,
        );
        ravel(&[o[0], k / b, o[2] / sh, o[3] / sw, k % b], &shape)
    });
    assert_close(&got, &want, 0.0, "depth_to_space in blocks", seed);
    // CRD would split blocks, and channels must divide into sh*sw.
    assert!(tf::depth_to_space(&x, (sh, sw), tf::DepthToSpaceMode::Crd, true).is_err());
    let odd = ph(&[1, 6, 2, 2], f32t(), "X");
    assert!(tf::depth_to_space(&odd, (2, 2), tf::DepthToSpaceMode::Dcr, false).is_err());
    assert!(tf::depth_to_space(&odd, (1, 0), tf::DepthToSpaceMode::Dcr, false).is_err());
}

/// Rows of 20 columns on a CPU of 16 lanes, taken along the rows' axis by an index tensor (the
/// first pass of a linear Resize): each row keeps its own vectors (of 4 lanes) instead of a
/// vector over fused rows, which would load every lane's index and data on its own. Checked
/// against a naive gather, and the lowered code for vector loads of the indices.
#[test]
fn take_of_rows_by_an_index_tensor_keeps_the_rows_apart() {
    use kiln_tir::visitor::{post_order_visit, IrRef};
    let seed = seed("take_rows");
    let mut rng = Rng::new(seed);
    let (s, n) = ([1i64, 3, 10, 20], 16i64);
    let x = ph(&s, f32t(), "X");
    let ind = ph(&[n], DataType::int(64), "I");
    let y = tf::take(&x, &ind, 2).unwrap();
    let cpu = kiln_tir::CpuDesc::custom(512, 32);
    let sch = tf::create_injective_schedule(std::slice::from_ref(&y), &cpu).unwrap();
    let args = [x.clone(), ind.clone(), y.clone()];
    let lowered = kiln_codegen::driver::lower(&sch, &args, "take_rows", true).unwrap();
    let f = lowered.lookup("take_rows").unwrap();
    let (mut index_vectors, mut widest) = (0, 1);
    post_order_visit(f.body(), |node| {
        if let IrRef::Expr(e) = node {
            widest = widest.max(e.dtype().lanes());
            if let kiln_tir::ExprKind::BufferLoad { buffer, .. } = e.kind() {
                if buffer.name() == "I" && e.dtype().lanes() > 1 {
                    index_vectors += 1;
                }
            }
        }
    });
    assert_eq!(index_vectors, 0, "vector loads of the indices:\n{f}");
    assert_eq!(widest, 4, "rows of 20 in vectors of 4:\n{f}");
    let xv = rng.f32s(numel(&s));
    let iv = rng.ints(n as usize, 0, s[2]);
    let ins = vec![
        rt_f32(&xv, &s),
        kiln_runtime::tensor::Tensor::from_slice(&iv, &[n]).unwrap(),
    ];
    let out = [1i64, 3, n, 20];
    let got = run_with(&sch, &[x, ind], &[y], ins, "take_rows").remove(0);
    let want = gather_ref(&xv, &out, |o| {
        ravel(&[o[0], o[1], iv[o[2] as usize], o[3]], &s)
    });
    assert_close(&got, &want, 0.0, "take of rows", seed);
}
