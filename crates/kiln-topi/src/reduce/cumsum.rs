//! `cumsum`: the running sum along an axis (ONNX `CumSum`).
//!
//! Tensor expressions have no loop-carried state, so the scan is written as reductions. Short
//! axes use one masked sum over the axis per point (`O(n^2)` per row). Longer ones are cut into
//! blocks of `t ~ sqrt(n)`: the running sum within each point's block, the total of every block,
//! the running sum of the block totals before each block, and their sum per point, which is
//! `O(n t)` per row.

use crate::tag;
use crate::transform::util::{compute_tagged, normalize_axis};
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, Tensor};
use kiln_tir::{floordiv, PrimExpr};

/// Axes up to this extent use the single masked sum.
pub const DIRECT_MAX: i64 = 32;

/// Whether position `j` takes part in the running sum at position `at`.
fn keeps(j: PrimExpr, at: PrimExpr, exclusive: bool, reverse: bool) -> PrimExpr {
    match (exclusive, reverse) {
        (false, false) => j.le(at),
        (true, false) => j.lt(at),
        (false, true) => j.ge(at),
        (true, true) => j.gt(at),
    }
}

/// The running sum of `x` along `axis` (negative counts from the end), in the dtype of `x`:
/// `out[i] = sum of x[i with i[axis] = j]` over `j <= i[axis]` (`j < i[axis]` when
/// `exclusive`; `j >= i[axis]`, resp. `j > i[axis]`, when `reverse`).
///
/// # Errors
/// A `ValueError` for an axis out of range.
pub fn cumsum(x: &Tensor, axis: i64, exclusive: bool, reverse: bool) -> Result<Tensor> {
    let a = normalize_axis(axis, x.ndim(), "cumsum")?;
    let n = x.shape()[a].clone();
    let Some(extent) = n.as_int().filter(|&e| e > DIRECT_MAX) else {
        let r = reduce_axis_n(n.clone(), "j");
        return compute_tagged(
            x.shape(),
            |i| {
                let mut src: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
                let keep = keeps(r.expr(), src[a].clone(), exclusive, reverse);
                src[a] = r.expr();
                kiln_te::sum_where(x.at(&src), &[r], Some(keep))
            },
            "cumsum",
            tag::COMM_REDUCE,
        );
    };
    let t = (extent as f64).sqrt().ceil() as i64;
    let blocks = (extent + t - 1) / t;
    let it = n.dtype();
    let c = |v: i64| PrimExpr::const_int(it, v);
    // x at `j` on the axis (clamped: the last block may be short, and the reductions' guards
    // skip those positions).
    let read = |p: &[PrimExpr], j: PrimExpr| {
        let mut src = p.to_vec();
        src[a] = kiln_tir::min(j, c(extent - 1));
        x.at(&src)
    };
    let r = reduce_axis_n(c(t), "t");
    let within = compute_tagged(
        x.shape(),
        |i| {
            let p: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let j = floordiv(p[a].clone(), c(t)) * c(t) + r.expr();
            let keep =
                keeps(j.clone(), p[a].clone(), exclusive, reverse).logical_and(j.lt(c(extent)));
            kiln_te::sum_where(read(&p, j), &[r], Some(keep))
        },
        "cumsum_block",
        tag::COMM_REDUCE,
    )?;
    let mut bshape = x.shape().to_vec();
    bshape[a] = c(blocks);
    let r = reduce_axis_n(c(t), "t");
    let totals = compute_tagged(
        &bshape,
        |i| {
            let p: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let j = p[a].clone() * c(t) + r.expr();
            let inside = j.lt(c(extent));
            kiln_te::sum_where(read(&p, j), &[r], Some(inside))
        },
        "cumsum_totals",
        tag::COMM_REDUCE,
    )?;
    let r = reduce_axis_n(c(blocks), "b");
    let carry = compute_tagged(
        &bshape,
        |i| {
            let mut p: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            // Whole blocks before (after, when reversed) this one.
            let keep = keeps(r.expr(), p[a].clone(), true, reverse);
            p[a] = r.expr();
            kiln_te::sum_where(totals.at(&p), &[r], Some(keep))
        },
        "cumsum_carry",
        tag::COMM_REDUCE,
    )?;
    compute_tagged(
        x.shape(),
        |i| {
            let p: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let mut b = p.clone();
            b[a] = floordiv(p[a].clone(), c(t));
            carry.at(&b) + within.at(&p)
        },
        "cumsum",
        tag::INJECTIVE,
    )
}
