//! Questions about [`DataType`]s that the IR asks all the time (is it an integer? what values fit?),
//! as an extension trait over `kiln_ffi::DataType`, plus the wrapping of integer values to a type.

use kiln_ffi::dtype::code;
use kiln_ffi::DataType;

/// Predicates and limits of a data type.
pub trait DataTypeExt: Copy {
    /// Signed integer (`int8`..`int64`, any lanes).
    fn is_int(self) -> bool;
    /// Unsigned integer (`uint1`..`uint64`, any lanes).
    fn is_uint(self) -> bool;
    /// Signed or unsigned integer.
    fn is_integer(self) -> bool {
        self.is_int() || self.is_uint()
    }
    /// IEEE float (`float16/32/64`).
    fn is_float(self) -> bool;
    /// `bfloat16`.
    fn is_bfloat(self) -> bool;
    /// Any floating-point type (IEEE or bfloat).
    fn is_floating(self) -> bool {
        self.is_float() || self.is_bfloat()
    }
    /// `bool`.
    fn is_bool(self) -> bool;
    /// A narrow type stored one code per byte (float8 variants, `float4_e2m1fn`, `int4`,
    /// `uint4`, `int2`, `uint2`): values are only loaded, stored and reinterpreted as `uint8`;
    /// conversions decode the code (kiln_topi's cast).
    fn is_byte_code(self) -> bool;
    /// Bits per lane in memory and in registers: 8 for byte-coded types, else `bits`.
    fn storage_bits(self) -> u32 {
        if self.is_byte_code() {
            8
        } else {
            self.bits_u32()
        }
    }
    /// `bits` as `u32`.
    fn bits_u32(self) -> u32;
    /// An opaque handle (pointer).
    fn is_handle(self) -> bool;
    /// `void` (the return type of functions that return nothing).
    fn is_void(self) -> bool;
    /// Integer, float or bool: a type that arithmetic and comparisons apply to.
    fn is_numeric(self) -> bool {
        self.is_integer() || self.is_floating() || self.is_bool()
    }
    /// One lane.
    fn is_scalar(self) -> bool;
    /// More than one lane.
    fn is_vector(self) -> bool {
        !self.is_scalar()
    }
    /// The type of one lane.
    fn element_of(self) -> DataType;
    /// The smallest value of an integer type (`i64::MIN` for 64-bit signed; 0 for unsigned).
    fn int_min(self) -> i64;
    /// The largest value of an integer type, capped at `i64::MAX` (for `uint64`).
    fn int_max(self) -> i64;
    /// Wraps an integer to the type's width, as the machine would (two's complement); unsigned
    /// values are kept as their bit pattern in an `i64`.
    fn wrap_int(self, v: i64) -> i64;
    /// True when `v` is representable in this integer (or bool) type.
    fn fits_int(self, v: i64) -> bool;
}

impl DataTypeExt for DataType {
    fn is_int(self) -> bool {
        self.code() == code::INT
    }
    fn is_uint(self) -> bool {
        self.code() == code::UINT
    }
    fn is_float(self) -> bool {
        self.code() == code::FLOAT
    }
    fn is_bfloat(self) -> bool {
        self.code() == code::BFLOAT
    }
    fn is_bool(self) -> bool {
        self.code() == code::BOOL
    }
    fn is_byte_code(self) -> bool {
        match self.code() {
            code::INT | code::UINT => matches!(self.bits(), 2 | 4),
            c => {
                (code::FLOAT8_E4M3FN..=code::FLOAT8_E8M0FNU).contains(&c)
                    || c == code::FLOAT4_E2M1FN
            }
        }
    }
    fn bits_u32(self) -> u32 {
        u32::from(self.bits())
    }
    fn is_handle(self) -> bool {
        self.code() == code::OPAQUE_HANDLE && !self.is_void()
    }
    fn is_void(self) -> bool {
        self.code() == code::OPAQUE_HANDLE && self.bits() == 0 && self.lanes() == 0
    }
    fn is_scalar(self) -> bool {
        self.lanes() <= 1
    }
    fn element_of(self) -> DataType {
        if self.is_void() {
            self
        } else {
            self.with_lanes(1)
        }
    }
    fn int_min(self) -> i64 {
        if self.is_bool() || self.is_uint() {
            0
        } else if self.bits() >= 64 {
            i64::MIN
        } else {
            -(1i64 << (self.bits() - 1))
        }
    }
    fn int_max(self) -> i64 {
        if self.is_bool() {
            1
        } else if self.is_uint() {
            if self.bits() >= 63 {
                i64::MAX
            } else {
                (1i64 << self.bits()) - 1
            }
        } else if self.bits() >= 64 {
            i64::MAX
        } else {
            (1i64 << (self.bits() - 1)) - 1
        }
    }
    fn wrap_int(self, v: i64) -> i64 {
        let bits = u32::from(self.bits());
        if self.is_bool() {
            return (v != 0) as i64;
        }
        if bits >= 64 || bits == 0 {
            return v;
        }
        let shift = 64 - bits;
        if self.is_uint() {
            ((v as u64) << shift >> shift) as i64
        } else {
            (v << shift) >> shift
        }
    }
    fn fits_int(self, v: i64) -> bool {
        if self.is_uint() && self.bits() >= 64 {
            // uint64 values above i64::MAX travel as negative bit patterns.
            return true;
        }
        v >= self.int_min() && v <= self.int_max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_wrapping() {
        let i8t = DataType::int(8);
        assert_eq!((i8t.int_min(), i8t.int_max()), (-128, 127));
        assert_eq!(i8t.wrap_int(130), -126);
        let u8t = DataType::uint(8);
        assert_eq!(u8t.wrap_int(-1), 255);
        assert!(!u8t.fits_int(256));
        assert_eq!(DataType::int(64).int_min(), i64::MIN);
        assert_eq!(DataType::bool().wrap_int(5), 1);
        assert!(DataType::float(32).with_lanes(4).is_vector());
        assert!(DataType::void().is_void() && !DataType::void().is_handle());
        assert!(DataType::handle().is_handle());
    }
}
