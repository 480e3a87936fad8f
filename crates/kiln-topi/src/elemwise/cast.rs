//! `cast(x, dtype)` (ONNX `Cast`, TVM's `topi.cast`).

use super::map;
use crate::transform::util::constant;
use kiln_ffi::{DataType, Result};
use kiln_te::Tensor;
use kiln_tir::DataTypeExt;

/// `x` converted to `dtype` elementwise. Conversion to `bool` is `x != 0` (as numpy and ONNX);
/// float to integer truncates toward zero (C's conversion). Casting to the input's own dtype
/// still makes a new (copying) tensor.
///
/// # Errors
/// A `TypeError` when `dtype` has lanes or is a handle.
pub fn cast(x: &Tensor, dtype: DataType) -> Result<Tensor> {
    if dtype.lanes() != 1 || dtype.is_handle() {
        return Err(kiln_ffi::Error::type_error(format!(
            "cast: cannot cast `{}` to {dtype}",
            x.name()
        )));
    }
    map(x, "cast", |v| {
        if dtype.is_bool() && !v.dtype().is_bool() {
            let z = constant(v.dtype(), 0.0);
            v.not_equal(z)
        } else {
            kiln_tir::cast(dtype, v)
        }
    })
}
