//! `topk`: the `k` largest (or smallest) elements along an axis and their indices (ONNX
//! `TopK`).

use crate::transform::util::{compute_tagged, normalize_axis, tag};
use kiln_ffi::{DataType, Error, Result};
use kiln_te::{comm_reduce, reduce_axis_n, Tensor};
use kiln_tir::{cast, PrimExpr};

/// The `k` largest (`largest`, else smallest) elements of `x` along `axis`, in order (best
/// first; equal elements in the order of their indices, as ONNX says), and their `int64`
/// indices along the axis: two tensors of the shape of `x` with the axis cut to `k`.
///
/// Three stages, all data-parallel: the rank of every element in its row (how many elements
/// come before it: a count over the row), then for each output slot the index whose rank it is
/// (a reduction over the row), then the value at that index. The work is quadratic in the
/// axis' extent, with no sort; NaNs are not ordered specially.
///
/// # Errors
/// A `ValueError` for an axis out of range or `k` larger than the axis (or negative).
pub fn topk(x: &Tensor, k: i64, axis: i64, largest: bool) -> Result<Vec<Tensor>> {
    let a = normalize_axis(axis, x.ndim(), "topk")?;
    let n = x.shape()[a].clone();
    if k < 0 || n.as_int().is_none_or(|n| k > n) {
        return Err(Error::value_error(format!(
            "topk: k = {k} must be in [0, {n}] (the extent of axis {a})"
        )));
    }
    let i64t = DataType::int(64);
    let j = reduce_axis_n(n.clone(), "j");
    let rank = compute_tagged(
        x.shape(),
        |i| {
            let here: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let mut there = here.clone();
            there[a] = j.expr();
            let (xt, xh) = (x.at(&there), x.at(&here));
            let better = if largest {
                xt.gt(xh.clone())
            } else {
                xt.lt(xh.clone())
            };
            let before = better.logical_or(xt.equal(xh).logical_and(j.expr().lt(here[a].clone())));
            let one = PrimExpr::const_int(i64t, 1);
            kiln_te::sum_where(one, &[j], Some(before))
        },
        "topk_rank",
        tag::COMM_REDUCE,
    )?;
    let mut shape = x.shape().to_vec();
    shape[a] = PrimExpr::const_int(n.dtype(), k);
    let r = reduce_axis_n(n.clone(), "r");
    let indices = compute_tagged(
        &shape,
        |i| {
            let mut at: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let slot = cast(i64t, at[a].clone());
            at[a] = r.expr();
            let is_slot = rank.at(&at).equal(slot);
            let none = cast(i64t, n.clone());
            let idx = cast(i64t, r.expr());
            comm_reduce(|p, q| kiln_tir::min(p, q), none, idx, &[r], Some(is_slot))
        },
        "topk_indices",
        tag::COMM_REDUCE_IDX,
    )?;
    let values = compute_tagged(
        &shape,
        |i| {
            let mut at: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let idx = indices.at(&at);
            at[a] = cast(n.dtype(), kiln_tir::min(idx, cast(i64t, n.clone()) - 1));
            x.at(&at)
        },
        "topk_values",
        tag::INJECTIVE,
    )?;
    Ok(vec![values, indices])
}
