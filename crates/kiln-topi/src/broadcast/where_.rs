//! `where(cond, x, y)` with three-way broadcasting (ONNX `Where`, numpy `where`).

use super::shape::{broadcast_index, broadcast_shapes};
use crate::tag;
use crate::transform::util::{compute_tagged, constant};
use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::DataTypeExt;

/// `cond ? x : y` elementwise over the broadcast shape of all three. `cond` may be bool or a
/// number (true when non-zero); `x` and `y` must have one dtype.
///
/// # Errors
/// A `ValueError` when the shapes do not broadcast, a `TypeError` when `x` and `y` differ in
/// dtype.
pub fn where_(cond: &Tensor, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    if x.dtype() != y.dtype() {
        return Err(Error::type_error(format!(
            "where: `{}` is {} and `{}` is {}; both values need one dtype",
            x.name(),
            x.dtype(),
            y.name(),
            y.dtype()
        )));
    }
    let shape = broadcast_shapes(&[cond.shape(), x.shape(), y.shape()])
        .map_err(|e| e.context("in `where`"))?;
    compute_tagged(
        &shape,
        |i| {
            let c = cond.at(&broadcast_index(cond, i, &shape));
            let c = if c.dtype().is_bool() {
                c
            } else {
                let z = constant(c.dtype(), 0.0);
                c.not_equal(z)
            };
            kiln_tir::select(
                c,
                x.at(&broadcast_index(x, i, &shape)),
                y.at(&broadcast_index(y, i, &shape)),
            )
        },
        "where",
        tag::BROADCAST,
    )
}
