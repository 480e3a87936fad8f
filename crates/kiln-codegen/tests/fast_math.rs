//! The float32 polynomial `exp`, `erf`, `tanh` and `sigmoid` of `kiln_tir::fast_math`, compiled
//! by LLVM in vectorized and scalar loops, against Rust's f64 functions on a dense grid that
//! covers the clamping limits, plus random points; outputs poisoned with NaN first.

mod e2e_common;

use e2e_common::*;
use kiln_codegen::driver;
use kiln_te::{compute, create_schedule, placeholder};
use kiln_tir::{op, PrimExpr};

/// erf by its Taylor series (|x| < 3) or the asymptotic complement (beyond), in f64.
fn erf_ref(x: f64) -> f64 {
    if x.abs() < 3.0 {
        let mut term = x;
        let mut sum = x;
        for n in 1..200 {
            term *= -x * x / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc(x) ~ exp(-x^2) / (x sqrt(pi)) * (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6))
        let (a, x2) = (x.abs(), x * x);
        let erfc = (-x2).exp() / (a * std::f64::consts::PI.sqrt())
            * (1.0 - 0.5 / x2 + 0.75 / (x2 * x2) - 1.875 / (x2 * x2 * x2));
        (1.0 - erfc).copysign(x)
    }
}

fn check(
    name: &str,
    f: fn(PrimExpr) -> PrimExpr,
    reference: fn(f64) -> f64,
    lo: f32,
    hi: f32,
    tol: impl Fn(f64) -> f64,
) {
    let seed = seed(name);
    let n = 4096i64;
    let x = placeholder(&[c(n)], f32t(), "x");
    let y = compute(&[c(n)], |i| f(x.at(&[i[0].to_expr()])), "y");
    for vectorize in [true, false] {
        let s = create_schedule(&[y.op().clone()]);
        if vectorize {
            let (_o, inner) = s.stage(&y).split(&y.axis(0), 16).unwrap();
            s.stage(&y).vectorize(&inner).unwrap();
        }
        let m = driver::build(&s, &[x.clone(), y.clone()], "llvm -mcpu=native", name).unwrap();
        let func = m.function(name).unwrap();
        let mut xs: Vec<f32> = (0..n / 2)
            .map(|k| lo + (hi - lo) * k as f32 / (n / 2 - 1) as f32)
            .collect();
        xs.extend(
            random((n / 2) as usize, seed)
                .iter()
                .map(|r| lo + r.abs().min(1.0) * (hi - lo)),
        );
        let out = poisoned(&[n]);
        func.invoke::<()>((tensor(&xs, &[n]), out.clone())).unwrap();
        let got = out.to_vec::<f32>().unwrap();
        for (k, (&xv, &g)) in xs.iter().zip(&got).enumerate() {
            let want = reference(xv as f64);
            let err = (g as f64 - want).abs();
            assert!(
                err <= tol(want),
                "{name}({xv}) = {g}, want {want} (error {err:e}, element {k}, vectorized \
                 {vectorize}, seed {seed})"
            );
        }
    }
}

#[test]
fn fast_exp_is_accurate() {
    check("exp", op::exp, f64::exp, -87.0, 88.0, |w| 3e-7 * w + 1e-37);
    check(
        "exp_far",
        op::exp,
        |x| {
            let lim = (88.376_262_664_794_9_f64 as f32) as f64;
            x.clamp(-lim, lim).exp()
        },
        -100.0,
        100.0,
        |w| 3e-7 * w + 1e-37,
    );
}

#[test]
fn fast_erf_tanh_sigmoid_are_accurate() {
    check("erf", op::erf, erf_ref, -6.0, 6.0, |_| 3e-7);
    check("tanh", op::tanh, f64::tanh, -20.0, 20.0, |_| 3e-7);
    check(
        "sigmoid",
        op::sigmoid,
        |x| 1.0 / (1.0 + (-x).exp()),
        -30.0,
        30.0,
        |_| 3e-7,
    );
}

#[test]
fn fast_log_and_constant_pow_are_accurate() {
    check("log", op::log, f64::ln, 1e-6, 1e4, |w| {
        3e-7 * w.abs().max(1.0)
    });
    check("log_small", op::log, f64::ln, 1e-30, 1e-3, |w| {
        3e-7 * w.abs()
    });
    check(
        "pow075",
        |x| op::pow(x, 0.75),
        |x| x.powf(0.75),
        0.0,
        1e3,
        |w| 1e-6 * w + 1e-30,
    );
}

#[test]
fn fast_log_special_inputs() {
    let n = 16i64;
    let x = placeholder(&[c(n)], f32t(), "x");
    let y = compute(&[c(n)], |i| op::log(x.at(&[i[0].to_expr()])), "y");
    let s = create_schedule(&[y.op().clone()]);
    let (_o, inner) = s.stage(&y).split(&y.axis(0), 16).unwrap();
    s.stage(&y).vectorize(&inner).unwrap();
    let m = driver::build(&s, &[x.clone(), y.clone()], "llvm -mcpu=native", "logs").unwrap();
    let mut xs = vec![0.0f32, -1.0, f32::INFINITY, f32::NAN, 1.0, 2.0];
    xs.resize(n as usize, 1.0);
    let out = poisoned(&[n]);
    m.function("logs")
        .unwrap()
        .invoke::<()>((tensor(&xs, &[n]), out.clone()))
        .unwrap();
    let got = out.to_vec::<f32>().unwrap();
    assert_eq!(got[0], f32::NEG_INFINITY);
    assert!(got[1].is_nan() && got[3].is_nan(), "{got:?}");
    assert_eq!(got[2], f32::INFINITY);
    assert_eq!(got[4], 0.0);
    assert!((got[5] - std::f32::consts::LN_2).abs() < 1e-7);
}
