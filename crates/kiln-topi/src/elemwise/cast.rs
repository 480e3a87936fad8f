//! `cast(x, dtype)` (ONNX `Cast`, TVM's `topi.cast`).

use super::map;
use super::narrow_cast::{self, NarrowMode};
use crate::transform::util::constant;
use kiln_ffi::{DataType, Result};
use kiln_te::Tensor;
use kiln_tir::DataTypeExt;

/// `x` converted to `dtype` elementwise. Conversion to `bool` is `x != 0` (as numpy and ONNX);
/// float to integer truncates toward zero (C's conversion). Casting to the input's own dtype
/// still makes a new (copying) tensor. Narrow types (float8, float4, int4, int2) convert with
/// ONNX's default rules (saturating; see [`cast_with`]).
///
/// # Errors
/// A `TypeError` when `dtype` has lanes or is a handle.
pub fn cast(x: &Tensor, dtype: DataType) -> Result<Tensor> {
    cast_with(x, dtype, NarrowMode::default())
}

/// [`cast`] with ONNX's `saturate` and E8M0 `round_mode` for conversions to narrow floats.
///
/// # Errors
/// A `TypeError` when `dtype` has lanes or is a handle.
pub fn cast_with(x: &Tensor, dtype: DataType, mode: NarrowMode) -> Result<Tensor> {
    if dtype.lanes() != 1 || dtype.is_handle() {
        return Err(kiln_ffi::Error::type_error(format!(
            "cast: cannot cast `{}` to {dtype}",
            x.name()
        )));
    }
    map(x, "cast", |v| {
        if v.dtype() == dtype {
            kiln_tir::cast(dtype, v)
        } else if dtype.is_byte_code() {
            narrow_cast::encode(v, dtype, mode)
        } else if v.dtype().is_byte_code() {
            let f = narrow_cast::decode(v);
            if dtype.is_bool() {
                f.not_equal(constant(f.dtype(), 0.0))
            } else {
                kiln_tir::cast(dtype, f)
            }
        } else if dtype.is_bool() && !v.dtype().is_bool() {
            let z = constant(v.dtype(), 0.0);
            v.not_equal(z)
        } else {
            kiln_tir::cast(dtype, v)
        }
    })
}
