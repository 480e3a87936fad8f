//! Element codes of the narrow types (float8 variants, float4 E2M1, int4/uint4, int2/uint2) and
//! their conversions to and from `f32`, with ONNX's `Cast` semantics.
//!
//! Storage: one element per byte, the code in the low bits and the high bits zero (ml_dtypes'
//! layout; see [`crate::dtype`]). Conversions from `f32` round to nearest, ties to even, as if
//! the exponent range were unbounded, then handle overflow: with `saturate` a finite value (or an
//! infinity) beyond the largest finite value becomes that value; without it, it becomes infinity
//! where the format has one (E5M2) and NaN otherwise. NaN stays NaN. E2M1 has neither infinity
//! nor NaN: it always saturates and NaN becomes `0x8` (negative zero), as ONNX's reference does.
//! The integers truncate toward zero and keep the low bits (two's complement wrap-around).
//! E8M0 follows ONNX's `round_mode` (see [`E8m0Round`]).

use crate::dtype::{code, DataType};

/// A narrow floating-point format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NarrowFloat {
    /// `float8_e4m3fn`: bias 7, no infinity, NaN `S.1111.111`, largest 448.
    E4M3FN,
    /// `float8_e4m3fnuz`: bias 8, no infinity or negative zero, NaN `0x80`, largest 240.
    E4M3FNUZ,
    /// `float8_e5m2`: bias 15, IEEE infinities and NaNs, largest 57344.
    E5M2,
    /// `float8_e5m2fnuz`: bias 16, no infinity or negative zero, NaN `0x80`, largest 57344.
    E5M2FNUZ,
    /// `float8_e8m0fnu`: unsigned `2^(e-127)`, NaN `0xff`, no zero.
    E8M0FNU,
    /// `float4_e2m1fn`: bias 1, no infinity or NaN, largest 6.
    E2M1FN,
}

/// How ONNX rounds a value to E8M0 (the `round_mode` attribute of `Cast`, default `up`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum E8m0Round {
    /// Up to the next power of two when any mantissa bit is set.
    Up,
    /// Down: drop the mantissa.
    Down,
    /// To nearest; a tie goes up except for the smallest exponent field, 0.
    Nearest,
}

impl E8m0Round {
    /// Parses ONNX's `round_mode` value (`up`, `down`, `nearest`).
    pub fn parse(s: &str) -> Option<E8m0Round> {
        match s {
            "up" => Some(E8m0Round::Up),
            "down" => Some(E8m0Round::Down),
            "nearest" => Some(E8m0Round::Nearest),
            _ => None,
        }
    }
}

impl NarrowFloat {
    /// Every format.
    pub const ALL: [NarrowFloat; 6] = [
        NarrowFloat::E4M3FN,
        NarrowFloat::E4M3FNUZ,
        NarrowFloat::E5M2,
        NarrowFloat::E5M2FNUZ,
        NarrowFloat::E8M0FNU,
        NarrowFloat::E2M1FN,
    ];

    /// The format of a dtype, if it is one.
    pub fn of(dtype: DataType) -> Option<NarrowFloat> {
        NarrowFloat::ALL.into_iter().find(|f| {
            let d = f.dtype();
            d.code() == dtype.code() && d.bits() == dtype.bits()
        })
    }

    /// The scalar dtype.
    pub fn dtype(self) -> DataType {
        let (c, bits) = match self {
            NarrowFloat::E4M3FN => (code::FLOAT8_E4M3FN, 8),
            NarrowFloat::E4M3FNUZ => (code::FLOAT8_E4M3FNUZ, 8),
            NarrowFloat::E5M2 => (code::FLOAT8_E5M2, 8),
            NarrowFloat::E5M2FNUZ => (code::FLOAT8_E5M2FNUZ, 8),
            NarrowFloat::E8M0FNU => (code::FLOAT8_E8M0FNU, 8),
            NarrowFloat::E2M1FN => (code::FLOAT4_E2M1FN, 4),
        };
        DataType::new(c, bits, 1)
    }

    /// (exponent bits, mantissa bits, exponent bias); all but E8M0 also have a sign bit on top.
    pub fn layout(self) -> (u32, u32, i32) {
        match self {
            NarrowFloat::E4M3FN => (4, 3, 7),
            NarrowFloat::E4M3FNUZ => (4, 3, 8),
            NarrowFloat::E5M2 => (5, 2, 15),
            NarrowFloat::E5M2FNUZ => (5, 2, 16),
            NarrowFloat::E8M0FNU => (8, 0, 127),
            NarrowFloat::E2M1FN => (2, 1, 1),
        }
    }

    /// Whether `0x80` is the only NaN and there is no negative zero.
    fn unsigned_zero(self) -> bool {
        matches!(self, NarrowFloat::E4M3FNUZ | NarrowFloat::E5M2FNUZ)
    }

    /// The largest finite value.
    pub fn max(self) -> f32 {
        match self {
            NarrowFloat::E4M3FN => 448.0,
            NarrowFloat::E4M3FNUZ => 240.0,
            NarrowFloat::E5M2 | NarrowFloat::E5M2FNUZ => 57344.0,
            NarrowFloat::E8M0FNU => f32::from_bits(0x7f00_0000), // 2^127
            NarrowFloat::E2M1FN => 6.0,
        }
    }

    /// The value of code `c` (exact; the bits above the format's width are ignored).
    pub fn to_f32(self, c: u8) -> f32 {
        let (e_bits, m_bits, bias) = self.layout();
        if self == NarrowFloat::E8M0FNU {
            return if c == 0xff {
                f32::NAN
            } else {
                pow2(c as i32 - bias)
            };
        }
        let width = 1 + e_bits + m_bits;
        let c = c & ((1u16 << width) - 1) as u8;
        let sign_bit = 1u8 << (width - 1);
        let mag = c & !sign_bit;
        let nan = match self {
            NarrowFloat::E4M3FN => mag == 0x7f,
            NarrowFloat::E5M2 => mag > 0x7c,
            NarrowFloat::E4M3FNUZ | NarrowFloat::E5M2FNUZ => c == 0x80,
            _ => false,
        };
        if nan {
            return f32::NAN;
        }
        let sign = if c & sign_bit != 0 { -1.0 } else { 1.0 };
        if self == NarrowFloat::E5M2 && mag == 0x7c {
            return sign * f32::INFINITY;
        }
        let e = (mag >> m_bits) as i32;
        let m = (mag & ((1 << m_bits) - 1)) as f32;
        let frac = pow2(-(m_bits as i32));
        let v = if e == 0 {
            m * frac * pow2(1 - bias)
        } else {
            (1.0 + m * frac) * pow2(e - bias)
        };
        sign * v
    }

    /// The code of `x` with ONNX's `Cast` rules (module docs); E8M0 rounds `up`.
    pub fn from_f32(self, x: f32, saturate: bool) -> u8 {
        if self == NarrowFloat::E8M0FNU {
            return e8m0_from_f32(x, saturate, E8m0Round::Up);
        }
        let (e_bits, m_bits, bias) = self.layout();
        let width = 1 + e_bits + m_bits;
        let sign_bit = 1u8 << (width - 1);
        let sign = if x.is_sign_negative() { sign_bit } else { 0 };
        let nan = match self {
            NarrowFloat::E4M3FN => sign | 0x7f,
            NarrowFloat::E5M2 => sign | 0x7e,
            NarrowFloat::E2M1FN => 0x8,
            _ => 0x80,
        };
        if x.is_nan() {
            return nan;
        }
        let max = self.max() as f64;
        let mut a = (x as f64).abs();
        if saturate || self == NarrowFloat::E2M1FN {
            a = a.min(max);
        }
        // The spacing of representable values around `a` with an unbounded exponent range.
        let min_exp = 1 - bias;
        let exp = if a == 0.0 {
            min_exp
        } else {
            (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(min_exp)
        };
        let quantum = pow2_f64(exp - m_bits as i32);
        let r = if a.is_infinite() {
            a
        } else {
            (a / quantum).round_ties_even() * quantum
        };
        if r > max {
            return match self {
                NarrowFloat::E5M2 => sign | 0x7c,
                _ => nan,
            };
        }
        if r == 0.0 {
            return if self.unsigned_zero() { 0 } else { sign };
        }
        // `r` is representable: split it into exponent field and mantissa.
        let e = ((r.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        let mag = if e < min_exp {
            (r / pow2_f64(min_exp - m_bits as i32)) as u8
        } else {
            let m = ((r / pow2_f64(e) - 1.0) * pow2_f64(m_bits as i32)) as u8;
            (((e + bias) as u8) << m_bits) | m
        };
        sign | mag
    }
}

/// The E8M0 code of `x` with ONNX's rule: the float32 exponent field, rounded per `round`
/// (the sign is ignored; NaN and infinities are NaN; with `saturate` nothing rounds up to NaN).
pub fn e8m0_from_f32(x: f32, saturate: bool, round: E8m0Round) -> u8 {
    let bits = x.to_bits();
    let exp = (bits >> 23) & 0xff;
    if exp == 0xff {
        return 0xff;
    }
    let up = match round {
        E8m0Round::Down => false,
        E8m0Round::Up => bits & 0x7f_ffff != 0,
        E8m0Round::Nearest => {
            let guard = bits & 0x40_0000 != 0;
            let rest = bits & 0x3f_ffff != 0;
            guard && (rest || exp > 0)
        }
    };
    let up = up && !(saturate && exp == 0xfe);
    (exp + up as u32) as u8
}

/// A narrow integer type: `int4`, `uint4`, `int2` or `uint2`, as (bits, signed).
pub fn narrow_int(dtype: DataType) -> Option<(u32, bool)> {
    match (dtype.code(), dtype.bits()) {
        (code::INT, b @ (2 | 4)) => Some((b as u32, true)),
        (code::UINT, b @ (2 | 4)) => Some((b as u32, false)),
        _ => None,
    }
}

/// The value of the narrow integer code `c` of `bits` bits (sign-extended when `signed`).
pub fn int_to_f32(c: u8, bits: u32, signed: bool) -> f32 {
    let v = (c & ((1u16 << bits) - 1) as u8) as i32;
    if signed && v >= 1 << (bits - 1) {
        (v - (1 << bits)) as f32
    } else {
        v as f32
    }
}

/// The narrow integer code of `x`: truncated toward zero, low `bits` bits of the exact integer
/// kept (two's complement); NaN and infinities are 0, as in ml_dtypes.
pub fn int_from_f32(x: f32, bits: u32) -> u8 {
    if !x.is_finite() {
        return 0;
    }
    (x as f64).trunc().rem_euclid((1u32 << bits) as f64) as u8
}

/// `2^e` as `f32` for `e` in `-149..=127`.
fn pow2(e: i32) -> f32 {
    pow2_f64(e) as f32
}

/// `2^e` as `f64` for `e` in `-1022..=1023`.
fn pow2_f64(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of a code read straight from the format's bit layout: an independent decoder.
    fn spec_value(f: NarrowFloat, c: u8) -> Option<f64> {
        let (eb, mb, bias) = match f {
            NarrowFloat::E4M3FN => (4, 3, 7),
            NarrowFloat::E4M3FNUZ => (4, 3, 8),
            NarrowFloat::E5M2 => (5, 2, 15),
            NarrowFloat::E5M2FNUZ => (5, 2, 16),
            NarrowFloat::E8M0FNU => return (c != 255).then(|| 2f64.powi(c as i32 - 127)),
            NarrowFloat::E2M1FN => (2, 1, 1),
        };
        let s = (c >> (eb + mb)) & 1;
        let e = ((c >> mb) & ((1 << eb) - 1)) as i32;
        let m = (c & ((1 << mb) - 1)) as f64;
        let fnuz = matches!(f, NarrowFloat::E4M3FNUZ | NarrowFloat::E5M2FNUZ);
        if fnuz && s == 1 && e == 0 && m == 0.0 {
            return None;
        }
        if f == NarrowFloat::E4M3FN && e == 15 && m == 7.0 {
            return None;
        }
        if f == NarrowFloat::E5M2 && e == 31 {
            return (m == 0.0).then_some(if s == 1 {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            });
        }
        let mag = if e == 0 {
            m / (1 << mb) as f64 * 2f64.powi(1 - bias)
        } else {
            (1.0 + m / (1 << mb) as f64) * 2f64.powi(e - bias)
        };
        Some(if s == 1 { -mag } else { mag })
    }

    fn codes(f: NarrowFloat) -> std::ops::Range<u16> {
        0..if f == NarrowFloat::E2M1FN { 16 } else { 256 }
    }

    #[test]
    fn every_code_decodes_as_its_bit_layout_says() {
        for f in NarrowFloat::ALL {
            for c in codes(f) {
                let got = f.to_f32(c as u8);
                match spec_value(f, c as u8) {
                    None => assert!(got.is_nan(), "{f:?} {c:#x}: {got}"),
                    Some(v) => {
                        assert_eq!(got as f64, v, "{f:?} {c:#x}");
                        assert_eq!(got.is_sign_negative(), v.is_sign_negative(), "{c:#x}");
                    }
                }
            }
            let max = codes(f)
                .filter_map(|c| spec_value(f, c as u8))
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max);
            assert_eq!(f.max() as f64, max, "{f:?}");
        }
    }

    #[test]
    fn every_finite_code_round_trips() {
        for f in NarrowFloat::ALL {
            for c in codes(f) {
                let c = c as u8;
                let v = f.to_f32(c);
                // E8M0's smallest code, 2^-127, is a float32 subnormal, which ONNX's `up`
                // rounding moves to the next code.
                if v.is_nan() || (f == NarrowFloat::E8M0FNU && c == 0) {
                    continue;
                }
                assert_eq!(f.from_f32(v, false), c, "{f:?} {c:#x} = {v}");
                if v.is_finite() {
                    assert_eq!(f.from_f32(v, true), c, "{f:?} {c:#x} = {v}");
                }
            }
        }
    }

    /// The nearest code by brute force over every code (ties to the even code), with the ONNX
    /// overflow rules: an independent reference for `from_f32`.
    fn nearest(f: NarrowFloat, x: f32, saturate: bool) -> Option<f64> {
        if x.is_nan() {
            // E2M1 has no NaN: ONNX's reference gives negative zero.
            return (f == NarrowFloat::E2M1FN).then_some(-0.0);
        }
        let max = f.max() as f64;
        let mut a = x as f64;
        if saturate || f == NarrowFloat::E2M1FN {
            a = a.clamp(-max, max);
        }
        // Overflow: beyond max + half a step past it (the unbounded-exponent rounding point).
        let step = max - f.to_f32(f.from_f32(f.max(), true) - 1) as f64;
        let limit = max + step / 2.0;
        let last_even = f.from_f32(f.max(), true) & 1 == 0;
        if a.abs() > limit || (a.abs() == limit && !last_even) {
            return (f == NarrowFloat::E5M2).then_some(a.signum() * f64::INFINITY);
        }
        let mut best: Option<(f64, u8)> = None;
        for c in codes(f) {
            let c = c as u8;
            let Some(v) = spec_value(f, c) else { continue };
            if !v.is_finite() {
                continue;
            }
            let d = (v - a).abs();
            let better = match best {
                None => true,
                Some((b, bc)) => {
                    let bd = (b - a).abs();
                    d < bd || (d == bd && c & 1 == 0 && bc & 1 == 1)
                }
            };
            if better {
                best = Some((v, c));
            }
        }
        best.map(|(v, _)| v)
    }

    #[test]
    fn encoding_is_round_to_nearest_even_with_onnx_overflow_rules() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut samples: Vec<f32> = vec![
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e-30,
            -1e-30,
            464.0,
            470.0,
            -480.0,
            61440.0,
            1e9,
            5.0,
            -7.0,
        ];
        for _ in 0..20000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Magnitudes from 2^-20 to 2^17, either sign.
            let e = (seed % 38) as i32 - 20;
            let m = ((seed >> 8) % 4096) as f32 / 4096.0;
            let s = if seed >> 40 & 1 == 1 { -1.0 } else { 1.0 };
            samples.push(s * (1.0 + m) * 2f32.powi(e));
        }
        for f in NarrowFloat::ALL {
            if f == NarrowFloat::E8M0FNU {
                continue;
            }
            for &x in &samples {
                for saturate in [true, false] {
                    let got = f.to_f32(f.from_f32(x, saturate));
                    match nearest(f, x, saturate) {
                        None => assert!(got.is_nan(), "{f:?} {x} sat={saturate}: {got}"),
                        Some(v) => assert_eq!(got as f64, v, "{f:?} {x} sat={saturate}"),
                    }
                }
            }
        }
    }

    #[test]
    fn e8m0_rounding_modes() {
        for c in 1..=254u32 {
            let p = f32::from_bits(c << 23); // 2^(c-127), exactly code c
            let above = f32::from_bits((c << 23) | 1);
            let half = f32::from_bits((c << 23) | 0x40_0000);
            let beyond_half = f32::from_bits((c << 23) | 0x40_0001);
            for x in [p, -p] {
                for r in [E8m0Round::Up, E8m0Round::Down, E8m0Round::Nearest] {
                    assert_eq!(e8m0_from_f32(x, true, r) as u32, c);
                }
            }
            let cap = |n: u32, sat: bool| if sat && n == 255 { 254 } else { n };
            for sat in [true, false] {
                let f = |x, r| e8m0_from_f32(x, sat, r) as u32;
                assert_eq!(f(above, E8m0Round::Up), cap(c + 1, sat));
                assert_eq!(f(above, E8m0Round::Down), c);
                assert_eq!(f(above, E8m0Round::Nearest), c);
                assert_eq!(f(half, E8m0Round::Nearest), cap(c + 1, sat));
                assert_eq!(f(beyond_half, E8m0Round::Nearest), cap(c + 1, sat));
            }
        }
        assert_eq!(e8m0_from_f32(f32::NAN, true, E8m0Round::Up), 255);
        assert_eq!(e8m0_from_f32(f32::INFINITY, true, E8m0Round::Up), 255);
        assert_eq!(e8m0_from_f32(0.0, true, E8m0Round::Up), 0);
        assert_eq!(E8m0Round::parse("nearest"), Some(E8m0Round::Nearest));
        assert_eq!(E8m0Round::parse("odd"), None);
    }

    #[test]
    fn narrow_integers_decode_and_wrap() {
        for (bits, signed) in [(4, true), (4, false), (2, true), (2, false)] {
            let n = 1i64 << bits;
            for c in 0..n as u8 {
                let v = int_to_f32(c, bits, signed) as i64;
                let want = if signed && c as i64 >= n / 2 {
                    c as i64 - n
                } else {
                    c as i64
                };
                assert_eq!(v, want);
                assert_eq!(int_from_f32(v as f32, bits), c);
            }
            for x in [-9.7f32, -2.5, 0.9, 13.2, 100.0] {
                let t = x.trunc() as i64;
                assert_eq!(int_from_f32(x, bits) as i64, t.rem_euclid(n), "{x}");
            }
            assert_eq!(int_from_f32(f32::NAN, bits), 0);
            assert_eq!(int_from_f32(f32::INFINITY, bits), 0);
            // 2^40 + 2^20 has zero low bits; -(2^31) + 16*k too.
            assert_eq!(int_from_f32(1.0995128e12, bits), 0);
            assert_eq!(int_from_f32(-3e9, bits), 0);
        }
        assert_eq!(narrow_int("int4".parse().unwrap()), Some((4, true)));
        assert_eq!(narrow_int("uint2".parse().unwrap()), Some((2, false)));
        assert_eq!(narrow_int("int8".parse().unwrap()), None);
    }

    #[test]
    fn formats_of_dtypes() {
        for f in NarrowFloat::ALL {
            assert_eq!(NarrowFloat::of(f.dtype()), Some(f));
        }
        assert_eq!(NarrowFloat::of(DataType::float(32)), None);
    }
}
