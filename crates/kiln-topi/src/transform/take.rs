//! `take` / gather along an axis (ONNX `Gather`, numpy `take`).

use super::util::{compute_tagged, normalize_axis};
use crate::tag;
use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::{cast, select, DataTypeExt, PrimExpr};

/// An index read from a tensor, in the type of the extent `n`, with negative values counted
/// from the end (ONNX); ONNX leaves indices outside `[-n, n)` undefined.
pub fn wrap_index(raw: PrimExpr, n: &PrimExpr) -> PrimExpr {
    let raw = cast(n.dtype(), raw);
    select(raw.lt(0), raw.clone() + n.clone(), raw)
}

/// [`wrap_index`] clamped into `[0, n)` (TVM's `clip` mode), so that no read leaves the
/// tensor whatever the index.
pub fn clamp_index(raw: PrimExpr, n: &PrimExpr) -> PrimExpr {
    kiln_tir::min(kiln_tir::max(wrap_index(raw, n), 0), n.clone() - 1)
}

fn require_int_indices(op: &str, indices: &Tensor) -> Result<()> {
    if indices.dtype().is_integer() {
        return Ok(());
    }
    Err(Error::type_error(format!(
        "{op}: indices `{}` have dtype {}, an integer type is needed",
        indices.name(),
        indices.dtype()
    )))
}

/// `x` indexed along `axis` (negative counts from the end) by the integer tensor `indices`:
/// the result has shape `x.shape[..axis] ++ indices.shape ++ x.shape[axis+1..]`. Negative
/// indices count from the end (ONNX); indices still out of range are clamped into the axis
/// (TVM's `clip` mode) so that no read leaves the tensor.
///
/// # Errors
/// A `ValueError` for an axis out of range; a `TypeError` for non-integer indices.
pub fn take(x: &Tensor, indices: &Tensor, axis: i64) -> Result<Tensor> {
    let a = normalize_axis(axis, x.ndim(), "take")?;
    require_int_indices("take", indices)?;
    let mut shape: Vec<PrimExpr> = x.shape()[..a].to_vec();
    shape.extend(indices.shape().iter().cloned());
    shape.extend(x.shape()[a + 1..].iter().cloned());
    let k = indices.ndim();
    let n = x.shape()[a].clone();
    compute_tagged(
        &shape,
        |i| {
            let iv: Vec<PrimExpr> = i[a..a + k].iter().map(|v| v.to_expr()).collect();
            let mut idx: Vec<PrimExpr> = i[..a].iter().map(|v| v.to_expr()).collect();
            idx.push(clamp_index(indices.at(&iv), &n));
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
    require_int_indices("gather_elements", indices)?;
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
            let clamped = clamp_index(indices.at(&iv), &n);
            let mut idx = iv;
            idx[a] = clamped;
            x.at(&idx)
        },
        "gather_elements",
        tag::INJECTIVE,
    )
}

/// `x` gathered by index tuples (ONNX `GatherND`): the last axis of `indices` (of static
/// length `k`) holds coordinates into the `k` axes of `x` after its first `batch_dims` axes,
/// which `indices` shares. The result has shape
/// `indices.shape[..-1] ++ x.shape[batch_dims + k..]`. Negative coordinates count from the
/// end; coordinates still out of range are clamped into the axis.
///
/// # Errors
/// A `ValueError` when `batch_dims + k` exceeds the rank of `x`, `batch_dims` is not below
/// the rank of `indices`, or the last axis of `indices` is symbolic; a `TypeError` for
/// non-integer indices.
pub fn gather_nd(x: &Tensor, indices: &Tensor, batch_dims: usize) -> Result<Tensor> {
    require_int_indices("gather_nd", indices)?;
    let q = indices.ndim();
    if q == 0 || batch_dims >= q {
        return Err(Error::value_error(format!(
            "gather_nd: indices of rank {q} leave no index tuples after {batch_dims} batch axes"
        )));
    }
    let k = indices.shape()[q - 1].as_int().ok_or_else(|| {
        Error::value_error("gather_nd: the last axis of the indices must have a static length")
    })? as usize;
    if batch_dims + k > x.ndim() {
        return Err(Error::value_error(format!(
            "gather_nd: {batch_dims} batch axes and index tuples of {k} exceed the data's rank {}",
            x.ndim()
        )));
    }
    let mut shape: Vec<PrimExpr> = indices.shape()[..q - 1].to_vec();
    shape.extend(x.shape()[batch_dims + k..].iter().cloned());
    compute_tagged(
        &shape,
        |i| {
            let iv: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let mut idx: Vec<PrimExpr> = iv[..batch_dims].to_vec();
            for j in 0..k {
                let mut at = iv[..q - 1].to_vec();
                at.push(PrimExpr::const_int(
                    indices.shape()[q - 1].dtype(),
                    j as i64,
                ));
                idx.push(clamp_index(indices.at(&at), &x.shape()[batch_dims + j]));
            }
            idx.extend(iv[q - 1..].iter().cloned());
            x.at(&idx)
        },
        "gather_nd",
        tag::INJECTIVE,
    )
}
