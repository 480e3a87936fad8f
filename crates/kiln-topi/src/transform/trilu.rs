//! `trilu(x, upper, k)` (ONNX `Trilu`): the upper or lower triangle of the last two axes.

use super::util::{compute_tagged, const_shape, constant, value_error, var_exprs};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::{select, PrimExpr};

/// `x` (rank >= 2) with the elements off the chosen triangle of its last two axes set to zero:
/// kept where `col - row >= k` for the upper triangle, `col - row <= k` for the lower one.
///
/// # Errors
/// A `ValueError` for rank < 2 or a symbolic shape.
pub fn trilu(x: &Tensor, upper: bool, k: i64) -> Result<Tensor> {
    let shape = const_shape(x, "trilu")?;
    let r = shape.len();
    if r < 2 {
        return Err(value_error(
            "trilu",
            format!("needs rank >= 2, got {shape:?}"),
        ));
    }
    let dims: Vec<PrimExpr> = shape.iter().map(|&d| PrimExpr::i32(d)).collect();
    // Beyond the matrix's size every k keeps all or nothing: clamp it into int32 range.
    let reach = shape[r - 1] + shape[r - 2];
    let k = k.clamp(-reach, reach);
    let xt = x.clone();
    compute_tagged(
        &dims,
        |i| {
            let idx = var_exprs(i);
            let diff = idx[r - 1].clone() - idx[r - 2].clone();
            let keep = if upper {
                diff.ge(PrimExpr::i32(k))
            } else {
                diff.le(PrimExpr::i32(k))
            };
            let v = xt.at(&idx);
            let zero = constant(v.dtype(), 0.0);
            select(keep, v, zero)
        },
        "trilu",
        tag::INJECTIVE,
    )
}
