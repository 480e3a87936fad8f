//! Polynomial float32 expansions of `exp`, `erf`, `tanh` and `sigmoid` built from plain
//! arithmetic, so that vectorized loops stay vectorized: LLVM turns its `llvm.exp` / libm
//! `erff` on vectors into one scalar call per lane. Code generators use them for float32 (any
//! lane count); other types keep the exact functions.
//!
//! - `exp`: Cody-Waite range reduction `x = n ln2 + r`, a degree-6 polynomial for `e^r`, and
//!   `2^n` built in the exponent bits (or scaled by `vscalefps`, [`ExpParts`]); inputs clamped to `[-87.34, 88.38]` (results below
//!   `2^-126` come out about `1e-38`). About 1 ulp.
//! - `erf`: a rational approximation (odd degree-13 numerator, degree-8 denominator in `x^2`)
//!   on `x` clamped to `[-4, 4]`. Absolute error below 1e-7.
//! - `tanh(x) = 1 - 2 / (exp(2x) + 1)`, `sigmoid(x) = 1 / (1 + exp(-x))` over `tir.exp` calls,
//!   which code generators expand in turn (with the CPU's scaling instruction where it has one).
//! - `log`: exponent and mantissa split from the bits, mantissa in `[sqrt(1/2), sqrt(2))`, a
//!   degree-9 polynomial; `log(0) = -inf`, negative inputs and NaN give NaN, `+inf` stays.
//!   About 1 ulp for normal inputs.
//! - `pow(x, c)` for a constant, non-integer `c` (LRN's `0.75`): `exp(c * log(x))`.

use crate::expr::PrimExpr;
use crate::op;
use crate::DataTypeExt;
use kiln_ffi::DataType;

/// A float constant of `t` (broadcast when `t` is a vector).
fn c(t: DataType, v: f64) -> PrimExpr {
    let scalar = PrimExpr::const_float(t.with_lanes(1), v);
    if t.lanes() > 1 {
        PrimExpr::broadcast_raw(scalar, t.lanes() as i64)
    } else {
        scalar
    }
}

/// An int32 constant with the lanes of `t`.
fn ci(t: DataType, v: i64) -> PrimExpr {
    let scalar = PrimExpr::const_int(DataType::int(32), v);
    if t.lanes() > 1 {
        PrimExpr::broadcast_raw(scalar, t.lanes() as i64)
    } else {
        scalar
    }
}

/// Horner evaluation of `coeffs[0] * x^(n-1) + ... + coeffs[n-1]`.
fn horner(x: &PrimExpr, coeffs: &[f64]) -> PrimExpr {
    let t = x.dtype();
    let mut acc = c(t, coeffs[0]);
    for &k in &coeffs[1..] {
        acc = acc * x.clone() + c(t, k);
    }
    acc
}

/// Whether `t` is float32 (any lanes): the type these expansions are for.
pub fn is_f32(t: DataType) -> bool {
    t.is_floating() && t.bits() == 32
}

/// `e^x` for float32 `x`: [`exp_parts`] with `2^n` built in the exponent bits, `n` recovered
/// in integers (right under any floating-point flags).
pub fn exp(x: PrimExpr) -> PrimExpr {
    exp_with(x, false)
}

/// [`exp`], `n` recovered by a float subtraction when `float_n` ([`exp_parts`]).
pub fn exp_with(x: PrimExpr, float_n: bool) -> PrimExpr {
    let t = x.dtype();
    let parts = exp_parts(x, float_n);
    parts.poly * op::reinterpret(t, op::shift_left(parts.biased_bits, ci(t, 23)))
}

/// `e^x = poly * 2^n` for float32 `x` clamped to [`EXP_MIN`, `EXP_MAX`]; code generators
/// scale `poly` by `2^n` with an instruction where the CPU has one (AVX-512's `vscalefps`),
/// else as [`exp`] does.
pub struct ExpParts {
    /// `e^r` for the reduced argument `r = x - n ln2`, `|r| <= ln2 / 2`.
    pub poly: PrimExpr,
    /// `n = round(x / ln2)` as a float.
    pub n: PrimExpr,
    /// int32 whose low 8 bits hold `n + 127` (shifted left by 23, the float `2^n`).
    pub biased_bits: PrimExpr,
}

/// The parts of `e^x` ([`ExpParts`]).
///
/// `n = round(x / ln2)` comes from one multiply-add: adding `1.5 * 2^23 + 127` rounds `x
/// log2(e)` to an integer and leaves `n + 127` in the low mantissa bits, so those bits
/// shifted into the exponent field are `2^n`. `n` itself is the sum less the constant: with
/// `float_n`, one float subtraction (exact: both are floats an integer apart), which needs no
/// constant of its own, a register fewer in vector loops; else the bits less the constant's
/// bits and a conversion, for code generated with reassociation allowed (`-fast-math`), which
/// could fold the float subtraction into `x log2(e)` unrounded. `e^r` is `1 + r + c2 r^2 + ...
/// + c6 r^6` in one Horner chain ([`EXP_POLY`]).
pub fn exp_parts(x: PrimExpr, float_n: bool) -> ExpParts {
    let t = x.dtype();
    let x = crate::max(crate::min(x, c(t, EXP_MAX)), c(t, EXP_MIN));
    let it = DataType::int(32).with_lanes(t.lanes());
    let k = x.clone() * c(t, std::f64::consts::LOG2_E) + c(t, EXP_SHIFTER);
    let biased_bits = op::reinterpret(it, k.clone());
    let n = if float_n {
        k - c(t, EXP_SHIFTER)
    } else {
        crate::cast(t, biased_bits.clone() - ci(t, EXP_SHIFTER_BITS))
    };
    // r = x - n ln2, ln2 split in two so n * C1 is exact.
    let r = x - n.clone() * c(t, 0.693_359_375) - n.clone() * c(t, -2.121_944_400_546_905_8e-4);
    ExpParts {
        poly: horner(&r, &EXP_POLY),
        n,
        biased_bits,
    }
}

/// `e^r` on `[-ln2 / 2, ln2 / 2]`, highest power first: `1 + r` exactly and `c2..c6` fitted
/// to the least maximum relative error (3.1e-9, below float32's half ulp of 6e-8).
pub const EXP_POLY: [f64; 7] = [
    1.381_461_120_269_542_2e-3,
    8.368_710_256_117_568e-3,
    4.166_838_742_138_423_4e-2,
    1.666_652_068_574_494_3e-1,
    4.999_999_345_137_234_3e-1,
    1.0,
    1.0,
];

/// [`exp`]'s upper clamp: `e^x` just below float32's largest value.
const EXP_MAX: f64 = 88.376_262_664_794_9;

/// [`exp`]'s lower clamp, `ln(2^-126)`: `2^n` stays the smallest normal float (results down
/// there are about 1e-38, within any absolute tolerance of the true tiny value).
const EXP_MIN: f64 = -87.336_544_750_553_1;

/// `1.5 * 2^23 + 127`: added to `x log2(e)` (at most 127.5 in magnitude) it rounds it to an
/// integer `n` and holds `n + 127` in its low mantissa bits.
const EXP_SHIFTER: f64 = 12_583_039.0;

/// The bits of [`EXP_SHIFTER`] as a float32 (`0x4B40007F`): subtracted from the sum's bits,
/// they leave `n`.
const EXP_SHIFTER_BITS: i64 = 0x4B40_007F;

/// The input range of [`erf`]: inputs are clamped to `[-ERF_LIMIT, ERF_LIMIT]`.
pub const ERF_LIMIT: f64 = 4.0;

/// [`erf`]'s numerator `P` (`erf(x) ~ x P(x^2) / Q(x^2)`), highest power of `x^2` first.
pub const ERF_NUMERATOR: [f64; 7] = [
    -2.726_142_258_013_06e-10,
    2.770_681_424_959_02e-08,
    -2.101_024_020_825_08e-06,
    -5.692_506_394_623_46e-05,
    -7.349_906_303_268_55e-04,
    -2.954_599_808_540_25e-03,
    -1.609_603_332_624_15e-02,
];

/// [`erf`]'s denominator `Q`, highest power of `x^2` first.
pub const ERF_DENOMINATOR: [f64; 5] = [
    -1.456_607_184_649_96e-05,
    -2.133_740_552_789_05e-04,
    -1.682_826_974_382_03e-03,
    -7.373_329_167_204_68e-03,
    -1.426_473_905_141_89e-02,
];

/// `erf(x)` for float32 `x`.
pub fn erf(x: PrimExpr) -> PrimExpr {
    let t = x.dtype();
    let x = crate::max(crate::min(x, c(t, ERF_LIMIT)), c(t, -ERF_LIMIT));
    let x2 = x.clone() * x.clone();
    let p = horner(&x2, &ERF_NUMERATOR) * x;
    let q = horner(&x2, &ERF_DENOMINATOR);
    p / q
}

/// `tanh(x)` for float32 `x`.
pub fn tanh(x: PrimExpr) -> PrimExpr {
    let t = x.dtype();
    let x = crate::max(crate::min(x, c(t, 9.0)), c(t, -9.0));
    c(t, 1.0) - c(t, 2.0) / (op::exp(x * c(t, 2.0)) + c(t, 1.0))
}

/// `1 / (1 + e^-x)` for float32 `x`.
pub fn sigmoid(x: PrimExpr) -> PrimExpr {
    let t = x.dtype();
    c(t, 1.0) / (c(t, 1.0) + op::exp(-x))
}

/// `ln(x)` for float32 `x`.
pub fn log(x: PrimExpr) -> PrimExpr {
    let t = x.dtype();
    let it = DataType::int(32).with_lanes(t.lanes());
    let bits = op::reinterpret(it, x.clone());
    let e = op::bitwise_and(op::shift_right(bits.clone(), ci(t, 23)), ci(t, 0xff)) - ci(t, 126);
    // The mantissa as a float in [0.5, 1).
    let m = op::reinterpret(
        t,
        op::bitwise_or(
            op::bitwise_and(bits, ci(t, 0x807f_ffff)),
            ci(t, 0x3f00_0000),
        ),
    );
    let e = crate::cast(t, e);
    let small = m.lt(c(t, std::f64::consts::FRAC_1_SQRT_2));
    let e = crate::select(small.clone(), e.clone() - c(t, 1.0), e);
    let m = crate::select(small, m.clone() + m.clone() - c(t, 1.0), m - c(t, 1.0));
    let z = m.clone() * m.clone();
    let p = horner(
        &m,
        &[
            7.037_683_629_2e-2,
            -1.151_461_031_0e-1,
            1.167_699_874_0e-1,
            -1.242_014_084_6e-1,
            1.424_932_278_7e-1,
            -1.666_805_766_5e-1,
            2.000_071_476_5e-1,
            -2.499_999_399_3e-1,
            3.333_333_117_4e-1,
        ],
    ) * m.clone()
        * z.clone();
    let y = p + e.clone() * c(t, -2.121_944_400_546_905_8e-4) - z * c(t, 0.5);
    let r = m + y + e * c(t, 0.693_359_375);
    // Special inputs: 0 -> -inf, negative or NaN -> NaN, +inf -> +inf.
    let r = crate::select(x.clone().equal(c(t, 0.0)), c(t, f64::NEG_INFINITY), r);
    let r = crate::select(x.clone().lt(c(t, 0.0)), c(t, f64::NAN), r);
    let r = crate::select(x.clone().not_equal(x.clone()), x.clone(), r);
    crate::select(x.clone().equal(c(t, f64::INFINITY)), x, r)
}

/// The constant of `e` (a float literal or a broadcast of one).
fn constant_of(e: &PrimExpr) -> Option<f64> {
    match e.kind() {
        crate::expr::ExprKind::Broadcast { value, .. } => value.as_float(),
        _ => e.as_float(),
    }
}

/// `x^y` for float32 when `y` is a constant that is not an integer (so a negative `x` has no
/// real power either way): `exp(y * log(x))`. `None` for other exponents, which keep the exact
/// function (LLVM turns small integer powers into multiplications).
pub fn pow(x: PrimExpr, y: &PrimExpr) -> Option<PrimExpr> {
    let k = constant_of(y)?;
    if k.fract() == 0.0 || !k.is_finite() {
        return None;
    }
    let t = x.dtype();
    Some(op::exp(log(x) * c(t, k)))
}
