//! Data types (`DLDataType`) and their text form (`"float32"`, `"int8x16"`, `"bool"`, ...).
//!
//! Sub-byte types (`int4`, `uint4`, `int2`, `uint2`, `float4_e2m1fn`) are stored one element
//! per byte in Kiln's tensors, as ml_dtypes keeps them: the code in the low bits, the high bits
//! zero. [`DataType::bytes`] is therefore 1 for them; only ONNX's `TensorProto` packs them.

use crate::abi::DLDataType;
use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// DLPack type codes.
pub mod code {
    /// Signed integer.
    pub const INT: u8 = 0;
    /// Unsigned integer.
    pub const UINT: u8 = 1;
    /// IEEE float.
    pub const FLOAT: u8 = 2;
    /// Opaque handle (a pointer).
    pub const OPAQUE_HANDLE: u8 = 3;
    /// bfloat16.
    pub const BFLOAT: u8 = 4;
    /// Complex float.
    pub const COMPLEX: u8 = 5;
    /// Boolean.
    pub const BOOL: u8 = 6;
    /// 8-bit float, 4 exponent bits (bias 7), 3 mantissa bits, no infinity, NaN `S.1111.111`.
    pub const FLOAT8_E4M3FN: u8 = 10;
    /// 8-bit float, 4 exponent bits (bias 8), 3 mantissa bits, no infinity, no negative zero,
    /// NaN `0x80`.
    pub const FLOAT8_E4M3FNUZ: u8 = 11;
    /// 8-bit IEEE-like float, 5 exponent bits (bias 15), 2 mantissa bits, with infinities.
    pub const FLOAT8_E5M2: u8 = 12;
    /// 8-bit float, 5 exponent bits (bias 16), 2 mantissa bits, no infinity, no negative zero,
    /// NaN `0x80`.
    pub const FLOAT8_E5M2FNUZ: u8 = 13;
    /// 8-bit unsigned power of two `2^(e-127)`, NaN `0xff`, no zero.
    pub const FLOAT8_E8M0FNU: u8 = 14;
    /// 4-bit float, 2 exponent bits (bias 1), 1 mantissa bit, no infinity or NaN.
    pub const FLOAT4_E2M1FN: u8 = 17;
}

/// The DLPack 1.1 narrow float codes and their names (`float8_e4m3fn`...), as ml_dtypes and
/// TVM spell them; the name carries the width.
const NARROW_FLOATS: [(u8, &str, u8); 6] = [
    (code::FLOAT8_E4M3FN, "float8_e4m3fn", 8),
    (code::FLOAT8_E4M3FNUZ, "float8_e4m3fnuz", 8),
    (code::FLOAT8_E5M2, "float8_e5m2", 8),
    (code::FLOAT8_E5M2FNUZ, "float8_e5m2fnuz", 8),
    (code::FLOAT8_E8M0FNU, "float8_e8m0fnu", 8),
    (code::FLOAT4_E2M1FN, "float4_e2m1fn", 4),
];

/// A scalar or vector element type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct DataType(pub DLDataType);

impl DataType {
    /// Makes a type from code, bits and lanes.
    pub const fn new(code: u8, bits: u8, lanes: u16) -> Self {
        DataType(DLDataType { code, bits, lanes })
    }
    /// A scalar signed integer of `bits` bits.
    pub const fn int(bits: u8) -> Self {
        Self::new(code::INT, bits, 1)
    }
    /// A scalar unsigned integer of `bits` bits.
    pub const fn uint(bits: u8) -> Self {
        Self::new(code::UINT, bits, 1)
    }
    /// A scalar float of `bits` bits.
    pub const fn float(bits: u8) -> Self {
        Self::new(code::FLOAT, bits, 1)
    }
    /// Scalar bfloat16.
    pub const fn bfloat16() -> Self {
        Self::new(code::BFLOAT, 16, 1)
    }
    /// Scalar boolean (`bool`, 8 bits).
    pub const fn bool() -> Self {
        Self::new(code::BOOL, 8, 1)
    }
    /// An opaque handle (64-bit pointer).
    pub const fn handle() -> Self {
        Self::new(code::OPAQUE_HANDLE, 64, 1)
    }
    /// `void`: the type of expressions without a value (a handle with 0 bits and 0 lanes).
    pub const fn void() -> Self {
        Self::new(code::OPAQUE_HANDLE, 0, 0)
    }
    /// The type code ([`code`]).
    pub fn code(self) -> u8 {
        self.0.code
    }
    /// Bits per lane.
    pub fn bits(self) -> u8 {
        self.0.bits
    }
    /// Number of lanes.
    pub fn lanes(self) -> u16 {
        self.0.lanes
    }
    /// The same element type with `lanes` lanes.
    pub fn with_lanes(self, lanes: u16) -> Self {
        Self::new(self.0.code, self.0.bits, lanes)
    }
    /// Bytes per element (all lanes), rounded up.
    pub fn bytes(self) -> usize {
        (self.0.bits as usize * self.0.lanes as usize).div_ceil(8)
    }
}

impl From<DLDataType> for DataType {
    fn from(d: DLDataType) -> Self {
        DataType(d)
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.code == code::OPAQUE_HANDLE && d.bits == 0 && d.lanes == 0 {
            return f.write_str("void");
        }
        match d.code {
            code::INT => write!(f, "int{}", d.bits)?,
            code::UINT => write!(f, "uint{}", d.bits)?,
            code::FLOAT => write!(f, "float{}", d.bits)?,
            code::BFLOAT => write!(f, "bfloat{}", d.bits)?,
            code::COMPLEX => write!(f, "complex{}", d.bits)?,
            code::BOOL => f.write_str("bool")?,
            c if NARROW_FLOATS.iter().any(|n| n.0 == c && n.2 == d.bits) => {
                let name = NARROW_FLOATS.iter().find(|n| n.0 == c).map(|n| n.1);
                f.write_str(name.unwrap_or_default())?
            }
            code::OPAQUE_HANDLE => {
                f.write_str("handle")?;
                if d.bits != 64 {
                    write!(f, "{}", d.bits)?;
                }
            }
            other => write!(f, "custom[{other}]{}", d.bits)?,
        }
        if d.lanes != 1 {
            write!(f, "x{}", d.lanes)?;
        }
        Ok(())
    }
}

impl fmt::Debug for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DataType({self})")
    }
}

impl FromStr for DataType {
    type Err = Error;

    /// Parses `int8`..`int64`, `uint*`, `float16/32/64`, `bfloat16`, `bool`, `handle`, `void`,
    /// the narrow floats (`float8_e4m3fn`, `float8_e4m3fnuz`, `float8_e5m2`, `float8_e5m2fnuz`,
    /// `float8_e8m0fnu`, `float4_e2m1fn`),
    /// with an optional `xN` lane suffix; `int`, `uint` and `float` mean 32 bits.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::value_error(format!("cannot parse data type `{s}`"));
        if s == "void" {
            return Ok(DataType::void());
        }
        let (base, lanes) = match s.rfind('x') {
            Some(pos)
                if pos > 0
                    && s[pos + 1..].chars().all(|c| c.is_ascii_digit())
                    && pos + 1 < s.len() =>
            {
                let lanes: u16 = s[pos + 1..].parse().map_err(|_| bad())?;
                if lanes == 0 {
                    return Err(bad());
                }
                (&s[..pos], lanes)
            }
            _ => (s, 1),
        };
        if base == "bool" {
            return Ok(DataType::new(code::BOOL, 8, lanes));
        }
        if let Some((code, _, bits)) = NARROW_FLOATS.iter().find(|n| n.1 == base) {
            return Ok(DataType::new(*code, *bits, lanes));
        }
        let prefixes: [(&str, u8, u8); 6] = [
            ("bfloat", code::BFLOAT, 16),
            ("complex", code::COMPLEX, 64),
            ("handle", code::OPAQUE_HANDLE, 64),
            ("float", code::FLOAT, 32),
            ("uint", code::UINT, 32),
            ("int", code::INT, 32),
        ];
        for (prefix, code, default_bits) in prefixes {
            if let Some(rest) = base.strip_prefix(prefix) {
                let bits = if rest.is_empty() {
                    default_bits
                } else {
                    rest.parse::<u8>().map_err(|_| bad())?
                };
                if bits == 0 {
                    return Err(bad());
                }
                return Ok(DataType::new(code, bits, lanes));
            }
        }
        Err(bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_round_trip() {
        for s in [
            "int8",
            "int32",
            "uint1",
            "float16",
            "float32x4",
            "bfloat16",
            "bool",
            "handle",
            "void",
            "int64x16",
            "int4",
            "uint2",
            "float8_e4m3fn",
            "float8_e4m3fnuz",
            "float8_e5m2",
            "float8_e5m2fnuz",
            "float8_e8m0fnu",
            "float4_e2m1fn",
            "float8_e5m2x4",
        ] {
            let t: DataType = s.parse().unwrap();
            assert_eq!(t.to_string(), s);
        }
        assert_eq!("float".parse::<DataType>().unwrap(), DataType::float(32));
        assert_eq!("float32x4".parse::<DataType>().unwrap().bytes(), 16);
        let e4m3: DataType = "float8_e4m3fn".parse().unwrap();
        assert_eq!((e4m3.code(), e4m3.bits(), e4m3.bytes()), (10, 8, 1));
        let e2m1: DataType = "float4_e2m1fn".parse().unwrap();
        assert_eq!((e2m1.code(), e2m1.bits(), e2m1.bytes()), (17, 4, 1));
        assert_eq!("int4".parse::<DataType>().unwrap().bytes(), 1);
        for bad in ["", "foo", "int", "float32x", "float32x0", "int999"] {
            if bad == "int" {
                continue;
            }
            assert!(bad.parse::<DataType>().is_err(), "{bad} should not parse");
        }
    }
}
