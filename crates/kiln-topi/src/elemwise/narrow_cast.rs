//! Conversions to and from the byte-coded narrow types (float8 variants, `float4_e2m1fn`,
//! `int4`, `uint4`, `int2`, `uint2`) as TIR integer bit manipulation on the code byte.
//!
//! The rules are those of `kiln_ffi::narrow` (ONNX's `Cast`), which is also the
//! reference the tests compare with: round to nearest even, `saturate`, each format's NaN and
//! infinity codes, E8M0's `round_mode`, integers truncated and wrapped. A conversion between two
//! other types goes through `float32` (ONNX specifies narrow-to-narrow casts that way); only
//! integer sources to narrow integers wrap directly. Everything works on the float32 bits, so
//! NaN handling does not depend on floating-point comparisons (which fast-math may assume away).

use kiln_ffi::narrow::{narrow_int, E8m0Round, NarrowFloat};
use kiln_ffi::DataType;
use kiln_tir::{cast, max, min, op, select, DataTypeExt, PrimExpr};

/// How a conversion to a narrow float handles overflow and (for E8M0) rounding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NarrowMode {
    /// Clamp values beyond the largest finite value (ONNX `saturate`, default true).
    pub saturate: bool,
    /// E8M0 rounding (ONNX `round_mode`, default `up`).
    pub round: E8m0Round,
}

impl Default for NarrowMode {
    fn default() -> Self {
        NarrowMode {
            saturate: true,
            round: E8m0Round::Up,
        }
    }
}

fn u32t() -> DataType {
    DataType::uint(32)
}

fn u32c(v: u32) -> PrimExpr {
    PrimExpr::const_int(u32t(), v as i64)
}

fn f32t() -> DataType {
    DataType::float(32)
}

/// The code byte of `v` (a byte-coded value) as `uint32`.
fn code_of(v: PrimExpr) -> PrimExpr {
    cast(u32t(), op::reinterpret(DataType::uint(8), v))
}

/// The value of `v` (of a byte-coded narrow type) as `float32`.
pub fn decode(v: PrimExpr) -> PrimExpr {
    let t = v.dtype();
    let c = code_of(v);
    if let Some((bits, signed)) = narrow_int(t) {
        let v = cast(f32t(), cast(DataType::int(32), c.clone()));
        if !signed {
            return v;
        }
        // Two's complement: codes from 2^(bits-1) up stand for code - 2^bits.
        let wrap = select(
            c.ge(u32c(1 << (bits - 1))),
            PrimExpr::const_float(f32t(), (1u32 << bits) as f64),
            PrimExpr::const_float(f32t(), 0.0),
        );
        return v - wrap;
    }
    let f = NarrowFloat::of(t).expect("decode: a byte-coded dtype");
    let nan = op::reinterpret(f32t(), u32c(0x7fc0_0000));
    if f == NarrowFloat::E8M0FNU {
        // 2^(c-127): the exponent field, except 2^-127, a float32 subnormal.
        let bits = select(
            c.equal(0),
            u32c(0x0040_0000),
            op::shift_left(c.clone(), u32c(23)),
        );
        return select(c.equal(255), nan, op::reinterpret(f32t(), bits));
    }
    let (e_bits, m_bits, bias) = f.layout();
    let width = 1 + e_bits + m_bits;
    let sign = op::shift_left(op::shift_right(c.clone(), u32c(width - 1)), u32c(31));
    let mag = op::bitwise_and(c.clone(), u32c((1 << (width - 1)) - 1));
    let e = op::shift_right(mag.clone(), u32c(m_bits));
    let m = op::bitwise_and(mag.clone(), u32c((1 << m_bits) - 1));
    let normal = op::bitwise_or(
        op::shift_left(e.clone() + (127 - bias) as i64, u32c(23)),
        op::shift_left(m.clone(), u32c(23 - m_bits)),
    );
    // Subnormals: m units of 2^(1-bias-m), exact in float32.
    let unit = 2f64.powi(1 - bias - m_bits as i32);
    let sub = op::reinterpret(u32t(), cast(f32t(), m) * unit);
    let bits = op::bitwise_or(sign, select(e.equal(0), sub, normal));
    let value = op::reinterpret(f32t(), bits);
    match f {
        NarrowFloat::E4M3FN => select(mag.equal(0x7f), nan, value),
        NarrowFloat::E5M2 => {
            let inf = op::reinterpret(
                f32t(),
                op::bitwise_or(
                    op::shift_left(op::shift_right(c.clone(), u32c(7)), u32c(31)),
                    u32c(0x7f80_0000),
                ),
            );
            select(mag.gt(0x7c), nan, select(mag.equal(0x7c), inf, value))
        }
        NarrowFloat::E4M3FNUZ | NarrowFloat::E5M2FNUZ => select(c.equal(0x80), nan, value),
        _ => value,
    }
}

/// `x` (of any numeric type) converted to the byte-coded narrow type `to`.
pub fn encode(x: PrimExpr, to: DataType, mode: NarrowMode) -> PrimExpr {
    let code = if let Some((bits, _)) = narrow_int(to) {
        let mask = (1i64 << bits) - 1;
        if x.dtype().is_integer() || x.dtype().is_bool() {
            cast(u32t(), op::bitwise_and(cast(DataType::int(64), x), mask))
        } else {
            // Truncate below 2^31 in magnitude; larger floats (and NaN, infinities) are
            // multiples of 2^8, whose low bits are zero.
            let f = to_f32(x);
            let abs_bits = op::bitwise_and(op::reinterpret(u32t(), f.clone()), u32c(0x7fff_ffff));
            let t = op::bitwise_and(cast(DataType::int(32), f), mask);
            select(abs_bits.lt(u32c(0x4f00_0000)), cast(u32t(), t), u32c(0))
        }
    } else {
        let f = NarrowFloat::of(to).expect("encode: a byte-coded dtype");
        encode_float(to_f32(x), f, mode)
    };
    op::reinterpret(to, cast(DataType::uint(8), code))
}

fn to_f32(x: PrimExpr) -> PrimExpr {
    if x.dtype().is_byte_code() {
        decode(x)
    } else if x.dtype() == f32t() {
        x
    } else {
        cast(f32t(), x)
    }
}

/// The code (as `uint32`) of the float32 `x` in format `f`.
fn encode_float(x: PrimExpr, f: NarrowFloat, mode: NarrowMode) -> PrimExpr {
    let bits = op::reinterpret(u32t(), x);
    let abs = op::bitwise_and(bits.clone(), u32c(0x7fff_ffff));
    let is_nan = abs.gt(u32c(0x7f80_0000));
    if f == NarrowFloat::E8M0FNU {
        let exp = op::shift_right(abs.clone(), u32c(23));
        let frac = op::bitwise_and(bits, u32c(0x7f_ffff));
        let up = match mode.round {
            E8m0Round::Down => u32c(0),
            E8m0Round::Up => cast(u32t(), frac.not_equal(0)),
            E8m0Round::Nearest => {
                let guard = op::bitwise_and(frac.clone(), u32c(0x40_0000)).not_equal(0);
                let rest = op::bitwise_and(frac, u32c(0x3f_ffff)).not_equal(0);
                cast(u32t(), guard.logical_and(rest.logical_or(exp.gt(0))))
            }
        };
        let up = if mode.saturate {
            select(exp.equal(254), u32c(0), up)
        } else {
            up
        };
        return select(exp.equal(255), u32c(255), exp + up);
    }
    let (e_bits, m_bits, bias) = f.layout();
    let width = 1 + e_bits + m_bits;
    let sign = op::shift_left(op::shift_right(bits, u32c(31)), u32c(width - 1));
    let saturate = mode.saturate || f == NarrowFloat::E2M1FN;
    let a = if saturate {
        min(abs.clone(), u32c(f.max().to_bits()))
    } else {
        abs.clone()
    };
    let exp = op::shift_right(a.clone(), u32c(23));
    // Normal results: round the float32 bits to m mantissa bits (a carry moves the exponent).
    let shift = 23 - m_bits;
    let odd = op::bitwise_and(op::shift_right(a.clone(), u32c(shift)), u32c(1));
    let r = a.clone() + ((1i64 << (shift - 1)) - 1) + odd;
    let normal = op::shift_right(r, u32c(shift)) - (((127 - bias) as i64) << m_bits);
    // Subnormal results: the value in units of 2^(1-bias-m), rounded to nearest even.
    let man = op::bitwise_or(op::bitwise_and(a.clone(), u32c(0x7f_ffff)), u32c(0x80_0000));
    let s = max(
        min(
            u32c((151 - bias - m_bits as i32) as u32) - min(exp.clone(), u32c(150)),
            u32c(31),
        ),
        u32c(1),
    );
    let q = op::shift_right(man.clone(), s.clone());
    let rem = op::bitwise_and(man, op::shift_left(u32c(1), s.clone()) - 1);
    let half = op::shift_left(u32c(1), s - 1);
    let up = rem.gt(half.clone()).logical_or(
        rem.equal(half)
            .logical_and(op::bitwise_and(q.clone(), u32c(1)).equal(1)),
    );
    let sub = q + cast(u32t(), up);
    let code = select(exp.ge(u32c((128 - bias) as u32)), normal, sub);
    let max_code = u32c(f.from_f32(f.max(), true) as u32);
    let (nan, overflow) = match f {
        NarrowFloat::E4M3FN => (
            op::bitwise_or(sign.clone(), u32c(0x7f)),
            op::bitwise_or(sign.clone(), u32c(0x7f)),
        ),
        NarrowFloat::E5M2 => (
            op::bitwise_or(sign.clone(), u32c(0x7e)),
            op::bitwise_or(sign.clone(), u32c(0x7c)),
        ),
        NarrowFloat::E2M1FN => (u32c(0x8), u32c(0x8)),
        _ => (u32c(0x80), u32c(0x80)),
    };
    let signed = if matches!(f, NarrowFloat::E4M3FNUZ | NarrowFloat::E5M2FNUZ) {
        select(code.equal(0), u32c(0), op::bitwise_or(sign, code.clone()))
    } else {
        op::bitwise_or(sign, code.clone())
    };
    let finite = if saturate {
        signed
    } else {
        select(code.gt(max_code), overflow, signed)
    };
    select(is_nan, nan, finite)
}
