//! `cumsum`: the running sum along an axis (ONNX `CumSum`).

use crate::transform::util::{compute_tagged, normalize_axis, tag};
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, Tensor};
use kiln_tir::PrimExpr;

/// The running sum of `x` along `axis` (negative counts from the end), in the dtype of `x`:
/// `out[i] = sum of x[i with i[axis] = j]` over `j <= i[axis]` (`j < i[axis]` when
/// `exclusive`; `j >= i[axis]`, resp. `j > i[axis]`, when `reverse`).
///
/// Each output point is a masked reduction over the whole axis (a data-parallel form with no
/// loop-carried state, which the tensor-expression lowering handles like any reduction): the
/// work is quadratic in the axis' extent.
///
/// # Errors
/// A `ValueError` for an axis out of range.
pub fn cumsum(x: &Tensor, axis: i64, exclusive: bool, reverse: bool) -> Result<Tensor> {
    let a = normalize_axis(axis, x.ndim(), "cumsum")?;
    let r = reduce_axis_n(x.shape()[a].clone(), "j");
    compute_tagged(
        x.shape(),
        |i| {
            let mut src: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let at = src[a].clone();
            src[a] = r.expr();
            let j = r.expr();
            let keep = match (exclusive, reverse) {
                (false, false) => j.le(at),
                (true, false) => j.lt(at),
                (false, true) => j.ge(at),
                (true, true) => j.gt(at),
            };
            kiln_te::sum_where(x.at(&src), &[r], Some(keep))
        },
        "cumsum",
        tag::COMM_REDUCE,
    )
}
