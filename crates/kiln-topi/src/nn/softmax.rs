//! Softmax along one axis: `exp(x - max) / sum(exp(x - max))`.

use super::{compute_tagged, const_shape, consts, invalid};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{max, reduce_axis_n, sum, IterVar, Tensor};
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
/// of `exp(x - max)` (`{name}_expsum`), both of the input's shape without `axis`.
pub(crate) fn max_and_expsum(x: &Tensor, axis: usize, name: &str) -> Result<(Tensor, Tensor)> {
    let shape = const_shape(x, name)?;
    let mut reduced = shape.clone();
    reduced.remove(axis);
    let k1: IterVar = reduce_axis_n(shape[axis], "k1");
    let mx = compute_tagged(
        &consts(&reduced),
        |i| {
            max(
                x.at(&insert_at(i, axis, k1.expr())),
                std::slice::from_ref(&k1),
            )
        },
        &format!("{name}_maxelem"),
        tag::COMM_REDUCE,
    )?;
    let k2: IterVar = reduce_axis_n(shape[axis], "k2");
    let es = compute_tagged(
        &consts(&reduced),
        |i| {
            let v = x.at(&insert_at(i, axis, k2.expr())) - mx.at_vars(i);
            sum(kiln_tir::op::exp(v), std::slice::from_ref(&k2))
        },
        &format!("{name}_expsum"),
        tag::COMM_REDUCE,
    )?;
    Ok((mx, es))
}

/// Softmax of `x` along `axis` (negative counts from the end): [`softmax_in_lanes`] with
/// scalar row reductions.
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
    let shape = const_shape(x, "softmax")?;
    let axis = normalize_axis(axis, shape.len(), "softmax")?;
    let n = shape[axis];
    let mut reduced = shape.clone();
    reduced.remove(axis);
    let in_lanes = lanes > 1 && axis + 1 == shape.len() && n >= 2 * lanes;
    // A reduction of `f(j)` over the row, in lane partials when `in_lanes`.
    let reduce_row = |f: &dyn Fn(&[Var], PrimExpr) -> PrimExpr,
                      combine: fn(PrimExpr, &[IterVar]) -> PrimExpr,
                      name: &str|
     -> Result<Tensor> {
        if !in_lanes {
            let k = reduce_axis_n(n, "k");
            return compute_tagged(
                &consts(&reduced),
                |i| combine(f(i, k.expr()), std::slice::from_ref(&k)),
                name,
                tag::COMM_REDUCE,
            );
        }
        // Whole vectors in the partials; the last `n % lanes` elements join the final step.
        let full = n / lanes;
        let tail = n % lanes;
        let jo = reduce_axis_n(full, "jo");
        let mut part_shape = reduced.clone();
        part_shape.push(lanes);
        let part = compute_tagged(
            &consts(&part_shape),
            |i| {
                let (rest, l) = i.split_at(i.len() - 1);
                let j = jo.expr() * lanes + l[0].to_expr();
                combine(f(rest, j), std::slice::from_ref(&jo))
            },
            &format!("{name}_lanes"),
            tag::COMM_REDUCE,
        )?;
        let r = reduce_axis_n(lanes + tail, "r");
        compute_tagged(
            &consts(&reduced),
            |i| {
                let mut idx: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
                idx.push(kiln_tir::min(r.expr(), lanes - 1));
                let from_part = part.at(&idx);
                if tail == 0 {
                    return combine(from_part, std::slice::from_ref(&r));
                }
                // Both operands are in bounds (indices clamped); the select keeps one.
                let t = kiln_tir::max(r.expr() - lanes, 0);
                let from_tail = f(i, PrimExpr::i32(full * lanes) + t);
                let v = kiln_tir::op::if_then_else(r.expr().lt(lanes), from_part, from_tail);
                combine(v, std::slice::from_ref(&r))
            },
            name,
            tag::COMM_REDUCE,
        )
    };
    let xr = x.clone();
    let mx = reduce_row(
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
    let es = reduce_row(
        &|rest, j| er.at(&insert_at(rest, axis, j)),
        sum,
        "softmax_expsum",
    )?;
    compute_tagged(
        &consts(&shape),
        |i| e.at_vars(i) / es.at(&drop_at(i, axis)),
        "softmax",
        tag::SOFTMAX_OUTPUT,
    )
}

/// The name of softmax's `exp(x - max)` stage, which schedules keep (not inlined).
pub const EXP_STAGE: &str = "softmax_exp";
