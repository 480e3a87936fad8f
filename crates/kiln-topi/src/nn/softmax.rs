//! Softmax along one axis: `exp(x - max) / sum(exp(x - max))`.

use super::row_reduce::{reduce_row, Combiner};
use super::{compute_tagged, const_shape, consts, invalid};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{max, sum, Tensor};
use kiln_tir::{PrimExpr, Var};

/// `axis` made non-negative and checked against `ndim`.
pub fn normalize_axis(axis: i64, ndim: usize, what: &str) -> Result<usize> {
    let a = if axis < 0 { axis + ndim as i64 } else { axis };
    if a < 0 || a >= ndim as i64 {
        return Err(invalid(
            what,
            format!("axis {axis} out of range for {ndim}-D input"),
        ));
    }
    Ok(a as usize)
}

/// `vars` (the indices without `axis`) with `k` inserted at `axis`.
pub(crate) fn insert_at(vars: &[Var], axis: usize, k: PrimExpr) -> Vec<PrimExpr> {
    let mut idx: Vec<PrimExpr> = vars.iter().map(|v| v.to_expr()).collect();
    idx.insert(axis, k);
    idx
}

/// `vars` without the entry at `axis`.
pub(crate) fn drop_at(vars: &[Var], axis: usize) -> Vec<PrimExpr> {
    vars.iter()
        .enumerate()
        .filter(|(d, _)| *d != axis)
        .map(|(_, v)| v.to_expr())
        .collect()
}

/// The stages both softmaxes share: the maximum along `axis` (`{name}_maxelem`) and the sum
/// of `exp(x - max)` (`{name}_expsum`), both of the input's shape without `axis`; along the
/// last axis in partials of `lanes` ([`reduce_row`]; extents known only at run time allowed).
pub(crate) fn max_and_expsum(
    x: &Tensor,
    axis: usize,
    name: &str,
    lanes: i64,
) -> Result<(Tensor, Tensor)> {
    let shape = x.shape().to_vec();
    let mut reduced = shape.clone();
    reduced.remove(axis);
    let lanes = if axis + 1 == shape.len() { lanes } else { 1 };
    let n = shape[axis].clone();
    let xr = x.clone();
    let mx = reduce_row(
        &reduced,
        &n,
        lanes,
        &|rest, j| xr.at(&insert_at(rest, axis, j)),
        max,
        &format!("{name}_maxelem"),
    )?;
    let mr = mx.clone();
    let es = reduce_row(
        &reduced,
        &n,
        lanes,
        &|rest, j| kiln_tir::op::exp(xr.at(&insert_at(rest, axis, j)) - mr.at_vars(rest)),
        sum,
        &format!("{name}_expsum"),
    )?;
    Ok((mx, es))
}

/// Softmax of `x` along `axis` (negative counts from the end): [`softmax_in_lanes`] with
/// scalar row reductions. Extents known only at run time are allowed (plain reductions).
pub fn softmax(x: &Tensor, axis: i64) -> Result<Tensor> {
    softmax_in_lanes(x, axis, 1)
}

/// Softmax of `x` along `axis`: the maximum along `axis` (`softmax_maxelem`), `exp(x - max)`
/// (`softmax_exp`, kept as a stage so the exponential is computed once per element, in
/// vectors), its sum (`softmax_expsum`) and the output `exp / sum` (tagged
/// [`tag::SOFTMAX_OUTPUT`]). When `axis` is the last and holds at least two vectors of `lanes`
/// elements, the maximum and the sum first reduce each of `lanes` interleaved partial rows over
/// the row's whole vectors (`softmax_maxelem_lanes`, `softmax_expsum_lanes`: element `j` goes
/// to lane `j % lanes`), so that schedules accumulate them in vectors; the lanes and the last
/// `n % lanes` elements are then reduced to one value.
pub fn softmax_in_lanes(x: &Tensor, axis: i64, lanes: i64) -> Result<Tensor> {
    if !super::is_static(x) {
        // Extents known at run time: the maximum and the sum as plain reductions.
        let axis = normalize_axis(axis, x.ndim(), "softmax")?;
        let (mx, es) = max_and_expsum(x, axis, "softmax", lanes)?;
        return compute_tagged(
            x.shape(),
            |i| {
                let rest = drop_at(i, axis);
                kiln_tir::op::exp(x.at_vars(i) - mx.at(&rest)) / es.at(&rest)
            },
            "softmax",
            tag::SOFTMAX_OUTPUT,
        );
    }
    let shape = const_shape(x, "softmax")?;
    let axis = normalize_axis(axis, shape.len(), "softmax")?;
    let n = shape[axis];
    let mut reduced = shape.clone();
    reduced.remove(axis);
    // Lane partials only along the last axis (they interleave the row's elements).
    let lanes = if axis + 1 == shape.len() { lanes } else { 1 };
    let along_axis = |f: &dyn Fn(&[Var], PrimExpr) -> PrimExpr, combine: Combiner, name: &str| {
        reduce_row(
            &consts(&reduced),
            &PrimExpr::i32(n),
            lanes,
            f,
            combine,
            name,
        )
    };
    let xr = x.clone();
    let mx = along_axis(
        &|rest, j| xr.at(&insert_at(rest, axis, j)),
        max,
        "softmax_maxelem",
    )?;
    let e = compute_tagged(
        &consts(&shape),
        |i| kiln_tir::op::exp(x.at_vars(i) - mx.at(&drop_at(i, axis))),
        EXP_STAGE,
        tag::ELEMWISE,
    )?;
    let er = e.clone();
    let es = along_axis(
        &|rest, j| er.at(&insert_at(rest, axis, j)),
        sum,
        "softmax_expsum",
    )?;
    // One division a row, then products (a vector division costs several multiplies).
    let one = PrimExpr::const_float(x.dtype(), 1.0);
    compute_tagged(
        &consts(&shape),
        |i| e.at_vars(i) * (one.clone() / es.at(&drop_at(i, axis))),
        "softmax",
        tag::SOFTMAX_OUTPUT,
    )
}

/// The name of softmax's `exp(x - max)` stage, which schedules keep (not inlined).
pub const EXP_STAGE: &str = "softmax_exp";
