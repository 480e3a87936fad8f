//! Reductions of `kiln_topi::reduce` through `driver::build` on `llvm -mcpu=native` (default
//! and `schedule_reduce` schedules), against naive Rust references: axis lists, negative
//! axes, keepdims, all axes, argmax/argmin ties.

#[path = "topi_injective_common.rs"]
mod common;

use common::*;
use kiln_te::{create_schedule, Tensor};
use kiln_topi::reduce as rd;

/// An accumulation step of a reference.
type Fold = fn(f64, f64) -> f64;

type Red = fn(&Tensor, Option<&[i64]>, bool) -> kiln_ffi::Result<Tensor>;

/// Folds `xv` (shape `s`) over `axes` with `f` from `init`.
fn reduce_ref(
    xv: &[f32],
    s: &[i64],
    axes: &[usize],
    keep: bool,
    init: f64,
    f: fn(f64, f64) -> f64,
) -> (Vec<i64>, Vec<f64>) {
    let full: Vec<i64> = (0..s.len())
        .map(|d| if axes.contains(&d) { 1 } else { s[d] })
        .collect();
    let mut acc = vec![init; numel(&full)];
    for (l, &v) in xv.iter().enumerate() {
        let mut idx = unravel(l as i64, s);
        for &a in axes {
            idx[a] = 0;
        }
        let o = ravel(&idx, &full) as usize;
        acc[o] = f(acc[o], v as f64);
    }
    let out: Vec<i64> = if keep {
        full
    } else {
        (0..s.len())
            .filter(|d| !axes.contains(d))
            .map(|d| s[d])
            .collect()
    };
    (out, acc)
}

#[test]
fn reductions_over_axis_lists() {
    let seed = seed("reduce");
    let mut rng = Rng::new(seed);
    let s = [3i64, 4, 5];
    let xv: Vec<f32> = rng.f32s(60).iter().map(|v| v * 0.5 + 1.0).collect();
    let ops: Vec<(&str, Red, f64, Fold)> = vec![
        ("sum", rd::sum, 0.0, |a, b| a + b),
        ("max", rd::max, f64::MIN, f64::max),
        ("min", rd::min, f64::MAX, f64::min),
        ("prod", rd::prod, 1.0, |a, b| a * b),
        ("mean", rd::mean, 0.0, |a, b| a + b),
    ];
    let axis_cases: Vec<Option<Vec<i64>>> = vec![
        Some(vec![1]),
        Some(vec![-1, 0]),
        Some(vec![-2]),
        None,
        Some(vec![]),
    ];
    for (name, op, init, f) in &ops {
        for axes in &axis_cases {
            for keep in [false, true] {
                for scheduled in [false, true] {
                    let x = ph(&s, f32t(), "X");
                    let y = op(&x, axes.as_deref(), keep).unwrap();
                    let ax: Vec<usize> = match axes {
                        None => vec![0, 1, 2],
                        Some(a) => a.iter().map(|&v| v.rem_euclid(3) as usize).collect(),
                    };
                    let (out, mut want) = reduce_ref(&xv, &s, &ax, keep, *init, *f);
                    if *name == "mean" {
                        let cnt: i64 = ax.iter().map(|&a| s[a]).product();
                        want.iter_mut().for_each(|v| *v /= cnt as f64);
                    }
                    assert_eq!(shape_of(&y), out, "{name} {axes:?} {keep}");
                    let sch = create_schedule(&[y.op().clone()]);
                    if scheduled {
                        rd::schedule_reduce(&sch, &y).unwrap();
                    }
                    let got = run_with(&sch, &[x], &[y], vec![rt_f32(&xv, &s)], name).remove(0);
                    assert_close(
                        &got,
                        &want,
                        1e-5,
                        &format!("{name} {axes:?} keep={keep} sched={scheduled}"),
                        seed,
                    );
                }
            }
        }
    }
    let x = ph(&s, f32t(), "X");
    assert!(rd::sum(&x, Some(&[3]), false).is_err());
    assert!(rd::sum(&x, Some(&[1, -2]), false).is_err());
}

#[test]
fn argmax_argmin_first_on_ties() {
    let seed = seed("argmax");
    let mut rng = Rng::new(seed);
    let s = [3i64, 6, 4];
    // Coarse values: many ties, and one row forced constant.
    let mut xv = rng.coarse(72);
    for v in xv.iter_mut().take(24) {
        *v = 0.5;
    }
    for (is_max, op) in [
        (
            true,
            rd::argmax as fn(&Tensor, Option<i64>, bool) -> kiln_ffi::Result<Tensor>,
        ),
        (false, rd::argmin),
    ] {
        for axis in [Some(1i64), Some(-1), Some(0), None] {
            for keep in [false, true] {
                for scheduled in [false, true] {
                    let x = ph(&s, f32t(), "X");
                    let y = op(&x, axis, keep).unwrap();
                    assert_eq!(y.dtype(), kiln_ffi::DataType::int(64));
                    let ax: Vec<usize> = match axis {
                        Some(a) => vec![a.rem_euclid(3) as usize],
                        None => vec![0, 1, 2],
                    };
                    let full: Vec<i64> = (0..3)
                        .map(|d| if ax.contains(&d) { 1 } else { s[d] })
                        .collect();
                    let mut best: Vec<(f32, i64)> = vec![(f32::NAN, -1); numel(&full)];
                    for (l, &v) in xv.iter().enumerate() {
                        let idx = unravel(l as i64, &s);
                        let mut o = idx.clone();
                        let mut k = 0i64;
                        for &a in &ax {
                            k = k * s[a] + idx[a];
                            o[a] = 0;
                        }
                        let b = &mut best[ravel(&o, &full) as usize];
                        let better = b.1 < 0 || if is_max { v > b.0 } else { v < b.0 };
                        if better {
                            *b = (v, k);
                        }
                    }
                    let want: Vec<f64> = best.iter().map(|b| b.1 as f64).collect();
                    let out: Vec<i64> = if keep {
                        full.clone()
                    } else {
                        (0..3).filter(|d| !ax.contains(d)).map(|d| s[d]).collect()
                    };
                    assert_eq!(shape_of(&y), out);
                    let sch = create_schedule(&[y.op().clone()]);
                    if scheduled {
                        rd::schedule_reduce(&sch, &y).unwrap();
                    }
                    let got = run_with(&sch, &[x], &[y], vec![rt_f32(&xv, &s)], "arg").remove(0);
                    assert_close(
                        &got,
                        &want,
                        0.0,
                        &format!("arg max={is_max} {axis:?} keep={keep} sched={scheduled}"),
                        seed,
                    );
                }
            }
        }
    }
    assert!(rd::argmax(&ph(&s, f32t(), "X"), Some(3), false).is_err());
}
