//! `flatten` to two dimensions (ONNX `Flatten`).

use super::reshape::reshape_to;
use super::util::{const_shape, value_error};
use kiln_ffi::Result;
use kiln_te::Tensor;

/// `x` as a matrix: dimensions before `axis` make the rows, the rest the columns. `axis` is in
/// `[-rank, rank]` (ONNX; `0` gives one row).
///
/// # Errors
/// A `ValueError` for an axis out of range or a symbolic shape.
pub fn flatten(x: &Tensor, axis: i64) -> Result<Tensor> {
    let shape = const_shape(x, "flatten")?;
    let r = shape.len() as i64;
    if axis < -r || axis > r {
        return Err(value_error(
            "flatten",
            format!(
                "axis {axis} is out of range for rank {r} (valid: {}..={r})",
                -r
            ),
        ));
    }
    let a = if axis < 0 { axis + r } else { axis } as usize;
    let rows: i64 = shape[..a].iter().product();
    let cols: i64 = shape[a..].iter().product();
    reshape_to(x, &shape, &[rows, cols], "flatten")
}
