//! `take` / gather along an axis (ONNX `Gather`, numpy `take`).

use super::util::{compute_tagged, normalize_axis, tag};
use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::{cast, select, DataTypeExt, PrimExpr};

/// `x` indexed along `axis` (negative counts from the end) by the integer tensor `indices`:
/// the result has shape `x.shape[..axis] ++ indices.shape ++ x.shape[axis+1..]`. Negative
/// indices count from the end (ONNX); indices still out of range are clamped into the axis
/// (TVM's `clip` mode) so that no read leaves the tensor.
///
/// # Errors
/// A `ValueError` for an axis out of range; a `TypeError` for non-integer indices.
pub fn take(x: &Tensor, indices: &Tensor, axis: i64) -> Result<Tensor> {
    let a = normalize_axis(axis, x.ndim(), "take")?;
    if !indices.dtype().is_integer() {
        return Err(Error::type_error(format!(
            "take: indices `{}` have dtype {}, an integer type is needed",
            indices.name(),
            indices.dtype()
        )));
    }
    let mut shape: Vec<PrimExpr> = x.shape()[..a].to_vec();
    shape.extend(indices.shape().iter().cloned());
    shape.extend(x.shape()[a + 1..].iter().cloned());
    let k = indices.ndim();
    let n = x.shape()[a].clone();
    compute_tagged(
        &shape,
        |i| {
            let iv: Vec<PrimExpr> = i[a..a + k].iter().map(|v| v.to_expr()).collect();
            let dt = n.dtype();
            let raw = cast(dt, indices.at(&iv));
            let wrapped = select(raw.lt(0), raw.clone() + n.clone(), raw);
            let clamped = kiln_tir::min(kiln_tir::max(wrapped, 0), n.clone() - 1);
            let mut idx: Vec<PrimExpr> = i[..a].iter().map(|v| v.to_expr()).collect();
            idx.push(clamped);
            idx.extend(i[a + k..].iter().map(|v| v.to_expr()));
            x.at(&idx)
        },
        "take",
        tag::INJECTIVE,
    )
}

/// `x` gathered element by element along `axis` (ONNX `GatherElements`, `torch.gather`): the
/// result has the shape of `indices`, and `out[i] = x[i with i[axis] = indices[i]]`. Negative
/// indices count from the end; indices still out of range are clamped into the axis.
///
/// # Errors
/// A `ValueError` for an axis out of range or ranks that differ; a `TypeError` for non-integer
/// indices.
pub fn gather_elements(x: &Tensor, indices: &Tensor, axis: i64) -> Result<Tensor> {
    let a = normalize_axis(axis, x.ndim(), "gather_elements")?;
    if !indices.dtype().is_integer() {
        return Err(Error::type_error(format!(
            "gather_elements: indices `{}` have dtype {}, an integer type is needed",
            indices.name(),
            indices.dtype()
        )));
    }
    if indices.ndim() != x.ndim() {
        return Err(Error::value_error(format!(
            "gather_elements: indices have rank {}, data rank {}",
            indices.ndim(),
            x.ndim()
        )));
    }
    let n = x.shape()[a].clone();
    compute_tagged(
        indices.shape(),
        |i| {
            let iv: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let dt = n.dtype();
            let raw = cast(dt, indices.at(&iv));
            let wrapped = select(raw.lt(0), raw.clone() + n.clone(), raw);
            let clamped = kiln_tir::min(kiln_tir::max(wrapped, 0), n.clone() - 1);
            let mut idx = iv;
            idx[a] = clamped;
            x.at(&idx)
        },
        "gather_elements",
        tag::INJECTIVE,
    )
}
