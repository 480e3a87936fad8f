//! Rust element types of tensors ([`Element`]) and conversion of any numeric dtype to `f64`.

use half::{bf16, f16};
use kiln_ffi::dtype::code;
use kiln_ffi::narrow::{int_from_f32, int_to_f32, narrow_int, NarrowFloat};
use kiln_ffi::{DataType, Error, Result};

/// A Rust type that is the element of tensors of one dtype (`f32` for `float32`, `half::f16`
/// for `float16`, `half::bf16` for `bfloat16`, `bool` for `bool`, ...).
///
/// # Safety
/// `DTYPE` must have the size of `Self`, and every byte pattern that [`Element::valid_bytes`]
/// accepts must be a valid `Self`.
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The tensor dtype whose elements are `Self`.
    const DTYPE: DataType;

    /// True when `bytes` hold only valid values of `Self` (always, except for `bool`).
    fn valid_bytes(_bytes: &[u8]) -> bool {
        true
    }
}

macro_rules! element {
    ($($t:ty => $dtype:expr),* $(,)?) => {$(
        // SAFETY: each dtype has the size of the type and every bit pattern is a valid value.
        unsafe impl Element for $t {
            const DTYPE: DataType = $dtype;
        }
    )*};
}

element!(
    i8 => DataType::int(8),
    i16 => DataType::int(16),
    i32 => DataType::int(32),
    i64 => DataType::int(64),
    u8 => DataType::uint(8),
    u16 => DataType::uint(16),
    u32 => DataType::uint(32),
    u64 => DataType::uint(64),
    f32 => DataType::float(32),
    f64 => DataType::float(64),
    f16 => DataType::float(16),
    bf16 => DataType::bfloat16(),
);

// SAFETY: DLPack's bool is one byte; only 0 and 1 are accepted as valid (checked).
unsafe impl Element for bool {
    const DTYPE: DataType = DataType::bool();

    fn valid_bytes(bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| b <= 1)
    }
}

/// Converts packed elements of `dtype` (all lanes, in order) to `f64`: ints, uints, bools,
/// float16/32/64, bfloat16 and the narrow types of [`kiln_ffi::narrow`] (one byte per element).
/// Other dtypes are a `TypeError`.
pub fn to_f64(bytes: &[u8], dtype: DataType) -> Result<Vec<f64>> {
    if let Some(f) = NarrowFloat::of(dtype) {
        return Ok(bytes.iter().map(|c| f.to_f32(*c) as f64).collect());
    }
    if let Some((bits, signed)) = narrow_int(dtype) {
        return Ok(bytes
            .iter()
            .map(|c| int_to_f32(*c, bits, signed) as f64)
            .collect());
    }
    macro_rules! conv {
        ($t:ty, $f:expr) => {{
            let n = std::mem::size_of::<$t>();
            Ok(bytes
                .chunks_exact(n)
                .map(|c| {
                    let v = <$t>::from_le_bytes(c.try_into().expect("chunk has the type's size"));
                    #[allow(clippy::redundant_closure_call)]
                    ($f)(v)
                })
                .collect())
        }};
    }
    match (dtype.code(), dtype.bits()) {
        (code::INT, 8) => conv!(i8, |v| v as f64),
        (code::INT, 16) => conv!(i16, |v| v as f64),
        (code::INT, 32) => conv!(i32, |v| v as f64),
        (code::INT, 64) => conv!(i64, |v| v as f64),
        (code::UINT, 8) | (code::BOOL, 8) => conv!(u8, |v| v as f64),
        (code::UINT, 16) => conv!(u16, |v| v as f64),
        (code::UINT, 32) => conv!(u32, |v| v as f64),
        (code::UINT, 64) => conv!(u64, |v| v as f64),
        (code::FLOAT, 16) => conv!(u16, |v| f16::from_bits(v).to_f64()),
        (code::BFLOAT, 16) => conv!(u16, |v| bf16::from_bits(v).to_f64()),
        (code::FLOAT, 32) => conv!(f32, |v| v as f64),
        (code::FLOAT, 64) => conv!(f64, |v| v),
        _ => Err(Error::type_error(format!(
            "cannot convert elements of `{dtype}` to float64"
        ))),
    }
}

/// Converts `values` to packed little-endian elements of `dtype` (the inverse of [`to_f64`]):
/// floats round to nearest, ints truncate toward zero and saturate, bools are `v != 0`; the
/// narrow types follow ONNX's saturating `Cast` from the value rounded to `f32`.
pub fn from_f64(values: &[f64], dtype: DataType) -> Result<Vec<u8>> {
    if let Some(f) = NarrowFloat::of(dtype) {
        return Ok(values.iter().map(|v| f.from_f32(*v as f32, true)).collect());
    }
    if let Some((bits, _)) = narrow_int(dtype) {
        return Ok(values
            .iter()
            .map(|v| int_from_f32(*v as f32, bits))
            .collect());
    }
    let mut out = Vec::with_capacity(values.len() * dtype.bytes().max(1));
    macro_rules! put {
        ($f:expr) => {{
            for &v in values {
                #[allow(clippy::redundant_closure_call)]
                out.extend_from_slice(&($f)(v).to_le_bytes());
            }
            Ok(out)
        }};
    }
    match (dtype.code(), dtype.bits()) {
        (code::INT, 8) => put!(|v: f64| v as i8),
        (code::INT, 16) => put!(|v: f64| v as i16),
        (code::INT, 32) => put!(|v: f64| v as i32),
        (code::INT, 64) => put!(|v: f64| v as i64),
        (code::UINT, 8) => put!(|v: f64| v as u8),
        (code::UINT, 16) => put!(|v: f64| v as u16),
        (code::UINT, 32) => put!(|v: f64| v as u32),
        (code::UINT, 64) => put!(|v: f64| v as u64),
        (code::BOOL, 8) => put!(|v: f64| (v != 0.0) as u8),
        (code::FLOAT, 16) => put!(|v: f64| f16::from_f64(v).to_bits()),
        (code::BFLOAT, 16) => put!(|v: f64| bf16::from_f64(v).to_bits()),
        (code::FLOAT, 32) => put!(|v: f64| v as f32),
        (code::FLOAT, 64) => put!(|v: f64| v),
        _ => Err(Error::type_error(format!(
            "cannot convert float64 values to `{dtype}`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_dtypes() {
        assert_eq!(<f32 as Element>::DTYPE.to_string(), "float32");
        assert_eq!(<f16 as Element>::DTYPE.to_string(), "float16");
        assert_eq!(<bf16 as Element>::DTYPE.to_string(), "bfloat16");
        assert_eq!(<bool as Element>::DTYPE.to_string(), "bool");
        assert_eq!(<u64 as Element>::DTYPE.bytes(), 8);
        assert!(!bool::valid_bytes(&[0, 1, 2]));
    }

    #[test]
    fn f64_round_trip_through_every_dtype() {
        let values = [0.0, 1.0, -2.0, 3.5, 100.0];
        for (dt, exact) in [
            ("float16", true),
            ("bfloat16", true),
            ("float32", true),
            ("float64", true),
            ("int8", false),
            ("int64", false),
        ] {
            let dtype: DataType = dt.parse().unwrap();
            let back = to_f64(&from_f64(&values, dtype).unwrap(), dtype).unwrap();
            if exact {
                assert_eq!(back, values, "{dt}");
            } else {
                assert_eq!(back, [0.0, 1.0, -2.0, 3.0, 100.0], "{dt}");
            }
        }
        let u8s = from_f64(&[-1.0, 300.0], DataType::uint(8)).unwrap();
        assert_eq!(u8s, [0, 255]);
        assert!(to_f64(&[0; 8], DataType::handle()).is_err());
        let e4m3: DataType = "float8_e4m3fn".parse().unwrap();
        let codes = from_f64(&[1.0, -2.5, 1000.0, f64::NAN], e4m3).unwrap();
        let back = to_f64(&codes, e4m3).unwrap();
        assert_eq!(back[..3], [1.0, -2.5, 448.0]);
        assert!(back[3].is_nan());
        let i4: DataType = "int4".parse().unwrap();
        assert_eq!(from_f64(&[-8.0, 7.0, 9.0], i4).unwrap(), [8, 7, 9]);
        assert_eq!(to_f64(&[8, 7, 9], i4).unwrap(), [-8.0, 7.0, -7.0]);
    }
}
