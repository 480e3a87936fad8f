//! The float32 polynomial `exp`, `erf`, `tanh` and `sigmoid` of `kiln_tir::fast_math`, compiled
//! by LLVM in vectorized and scalar loops for every x86-64 level the host runs (with and
//! without FMA, 128- to 512-bit vectors), against Rust's f64 functions on a dense grid that
//! covers the clamping limits, plus random points from several seeds; outputs poisoned with
//! NaN first. The erf bound is derived from the approximation's error and a forward error
//! analysis of its float32 evaluation, so it holds whatever the instruction selection.

mod e2e_common;

use e2e_common::*;
use kiln_codegen::driver;
use kiln_codegen::target::Target;
use kiln_te::{compute, create_schedule, placeholder};
use kiln_tir::{fast_math, op, PrimExpr};

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

/// The targets the expansions are checked on: every x86-64 level the host runs (no FMA at v2;
/// AVX2 and FMA at v3; AVX-512 at v4) and the host itself, so contraction into FMA and every
/// vector width are covered on any machine.
fn targets() -> Vec<String> {
    let host = Target::host();
    let mut out = vec!["llvm -mcpu=x86-64-v2".to_string()];
    if host.has_avx2() && host.has_fma() {
        out.push("llvm -mcpu=x86-64-v3".to_string());
    }
    if host.has_avx512() {
        out.push("llvm -mcpu=x86-64-v4".to_string());
    }
    out.push("llvm -mcpu=native".to_string());
    out
}

/// Seeds of the random points: `KILN_TEST_SEED` (one), else 8 from the clock.
fn seeds(name: &str) -> Vec<u64> {
    let first = seed(name);
    if std::env::var("KILN_TEST_SEED").is_ok() {
        return vec![first];
    }
    (0..8)
        .map(|k| first.wrapping_add(k * 0x9e37_79b9))
        .collect()
}

fn check(
    name: &str,
    f: fn(PrimExpr) -> PrimExpr,
    reference: fn(f64) -> f64,
    lo: f32,
    hi: f32,
    tol: impl Fn(f64, f64) -> f64,
) {
    check_on(&targets(), name, f, reference, lo, hi, tol);
}

/// [`check`] on the given targets.
fn check_on(
    targets: &[String],
    name: &str,
    f: fn(PrimExpr) -> PrimExpr,
    reference: fn(f64) -> f64,
    lo: f32,
    hi: f32,
    tol: impl Fn(f64, f64) -> f64,
) {
    let n = 4096i64;
    let x = placeholder(&[c(n)], f32t(), "x");
    let y = compute(&[c(n)], |i| f(x.at(&[i[0].to_expr()])), "y");
    for target in targets {
        // Scalars, and vectors of 8, 16 and 32 lanes (one register of either width, or two:
        // an instruction of one width is applied in pieces).
        for lanes in [1, 8, 16, 32] {
            let vectorize = lanes > 1;
            let s = create_schedule(&[y.op().clone()]);
            if vectorize {
                let (_o, inner) = s.stage(&y).split(&y.axis(0), lanes).unwrap();
                s.stage(&y).vectorize(&inner).unwrap();
            }
            let m = driver::build(&s, &[x.clone(), y.clone()], target, name).unwrap();
            let func = m.function(name).unwrap();
            for seed in seeds(name) {
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
                    let bound = tol(xv as f64, want);
                    assert!(
                        err <= bound,
                        "{name}({xv}) = {g}, want {want} (error {err:e} > bound {bound:e}, \
                         element {k}, {target}, {lanes} lanes, seed {seed})"
                    );
                }
            }
        }
    }
}

/// The unit roundoff of float32.
const U: f64 = f32::EPSILON as f64 / 2.0;

/// `gamma_k = k u / (1 - k u)`, the bound on `k` float32 roundings (Higham, 3.1).
fn gamma(k: usize) -> f64 {
    k as f64 * U / (1.0 - k as f64 * U)
}

/// Horner's rule on `coeffs` (highest power first) at `z`, and the sum of the terms'
/// magnitudes `sum |a_i| |z|^i`, both in f64.
fn horner_and_magnitude(coeffs: &[f64], z: f64) -> (f64, f64) {
    let (mut p, mut m) = (0.0f64, 0.0f64);
    for &a in coeffs {
        p = p * z + a;
        m = m * z.abs() + a.abs();
    }
    (p, m)
}

/// The rational approximation `x P(x^2) / Q(x^2)` of `erf` with its float32 coefficients,
/// evaluated exactly (in f64): what the generated code computes without rounding.
fn erf_rational(x: f64) -> f64 {
    let x = x.clamp(-fast_math::ERF_LIMIT, fast_math::ERF_LIMIT);
    let f32s = |c: &[f64]| c.iter().map(|&v| v as f32 as f64).collect::<Vec<_>>();
    let (p, _) = horner_and_magnitude(&f32s(&fast_math::ERF_NUMERATOR), x * x);
    let (q, _) = horner_and_magnitude(&f32s(&fast_math::ERF_DENOMINATOR), x * x);
    x * p / q
}

/// A bound on the error of the float32 evaluation of [`erf_rational`] at `x`, from the forward
/// error analysis of Horner's rule (Higham, 5.1), valid with or without FMA contraction and
/// for any vector width: `x^2` carries one rounding; a degree-`d` Horner evaluation at a
/// perturbed point is within `(gamma_2d + d u) sum |a_i| |z|^i` (the coefficients' own float32
/// rounding is in [`erf_rational`]); `x P` adds one rounding, and the quotient of two values
/// with relative errors `e_p`, `e_q` is within `e_p + e_q + u` to first order (the second
/// order, `~1e-12` here, is covered by a 1% margin).
fn erf_evaluation_bound(x: f64) -> f64 {
    let x = x.clamp(-fast_math::ERF_LIMIT, fast_math::ERF_LIMIT);
    let z = x * x;
    let (p, mp) = horner_and_magnitude(&fast_math::ERF_NUMERATOR, z);
    let (q, mq) = horner_and_magnitude(&fast_math::ERF_DENOMINATOR, z);
    let (dp, dq) = (
        fast_math::ERF_NUMERATOR.len() - 1,
        fast_math::ERF_DENOMINATOR.len() - 1,
    );
    let ep = ((gamma(2 * dp) + dp as f64 * U) * mp / p.abs()) + U;
    let eq = (gamma(2 * dq) + dq as f64 * U) * mq / q.abs();
    let y = (x * p / q).abs();
    1.01 * y * (ep + eq + U)
}

/// The largest error of the exact rational approximation against `erf` on a dense grid of
/// `[-6, 6]`, which must be within the documented 1e-7.
fn erf_approximation_error() -> f64 {
    let worst = (0..=120_000)
        .map(|k| -6.0 + 12.0 * k as f64 / 120_000.0)
        .map(|x| (erf_rational(x) - erf_ref(x)).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1e-7, "erf approximation error {worst:e}");
    worst
}

#[test]
fn fast_exp_is_accurate() {
    check("exp", op::exp, f64::exp, -87.0, 88.0, |_, w| {
        3e-7 * w + 1e-37
    });
    check(
        "exp_far",
        op::exp,
        |x| {
            let lim = (88.376_262_664_794_9_f64 as f32) as f64;
            x.clamp(-lim, lim).exp()
        },
        -100.0,
        100.0,
        |_, w| 3e-7 * w + 1e-37,
    );
}

/// Under `-fast-math` (reassociation allowed), `exp` recovers `n` in integers: a float
/// `(x log2(e) + S) - S` could be folded into `x log2(e)` unrounded, an error up to 40%. The
/// bound allows the few ulps that reassociating the reduction and polynomial costs.
#[test]
fn fast_exp_is_accurate_under_fast_math() {
    let targets = ["llvm -mcpu=native -fast-math".to_string()];
    check_on(
        &targets,
        "exp_fm",
        op::exp,
        f64::exp,
        -87.0,
        88.0,
        |_, w| 1e-6 * w + 1e-37,
    );
}

#[test]
fn fast_erf_tanh_sigmoid_are_accurate() {
    let approx = erf_approximation_error();
    // The approximation's error, the evaluation's rounding, and the output's own rounding.
    check("erf", op::erf, erf_ref, -6.0, 6.0, |x, w| {
        approx + erf_evaluation_bound(x) + U * w.abs()
    });
    check("tanh", op::tanh, f64::tanh, -20.0, 20.0, |_, _| 3e-7);
    check(
        "sigmoid",
        op::sigmoid,
        |x| 1.0 / (1.0 + (-x).exp()),
        -30.0,
        30.0,
        |_, _| 3e-7,
    );
}

#[test]
fn erf_bound_is_tight_enough_to_catch_errors() {
    // The derived bound stays small (a few float32 ulps near 1), so a wrong coefficient or a
    // dropped term is still caught.
    let approx = erf_approximation_error();
    let worst = (0..=6000)
        .map(|k| -6.0 + 12.0 * k as f64 / 6000.0)
        .map(|x| approx + erf_evaluation_bound(x))
        .fold(0.0, f64::max);
    assert!(worst < 3e-6, "erf bound {worst:e}");
    // A perturbed coefficient leaves it.
    let mut p = fast_math::ERF_NUMERATOR;
    p[3] *= 1.0 + 1e-2;
    let x = 1.0f64;
    let (pp, _) = horner_and_magnitude(&p, x * x);
    let (q, _) = horner_and_magnitude(&fast_math::ERF_DENOMINATOR, x * x);
    assert!((x * pp / q - erf_ref(x)).abs() > approx + erf_evaluation_bound(x));
}

#[test]
fn fast_log_and_constant_pow_are_accurate() {
    check("log", op::log, f64::ln, 1e-6, 1e4, |_, w| {
        3e-7 * w.abs().max(1.0)
    });
    check("log_small", op::log, f64::ln, 1e-30, 1e-3, |_, w| {
        3e-7 * w.abs()
    });
    check(
        "pow075",
        |x| op::pow(x, 0.75),
        |x| x.powf(0.75),
        0.0,
        1e3,
        |_, w| 1e-6 * w + 1e-30,
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
