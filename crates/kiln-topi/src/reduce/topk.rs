//! `topk`: the `k` largest (or smallest) elements along an axis and their indices (ONNX
//! `TopK`).

use crate::tag;
use crate::transform::util::{compute_tagged, normalize_axis};
use kiln_ffi::{DataType, Error, Result};
use kiln_te::{comm_reduce, reduce_axis_n, Tensor};
use kiln_tir::{cast, DataTypeExt, PrimExpr};

/// The largest `k` for which [`topk`] selects slot by slot (beyond it, by ranks).
pub const SELECT_MAX_K: i64 = 16;

/// The `k` largest (`largest`, else smallest) elements of `x` along `axis`, in order (best
/// first; equal elements in the order of their indices, as ONNX says), and their `int64`
/// indices along the axis: two tensors of the shape of `x` with the axis cut to `k`.
///
/// Two data-parallel forms, both without a sort; NaNs are not ordered specially:
/// - for `k <= SELECT_MAX_K` and `2k` below the axis' extent `n`, slot by slot: slot `j` is
///   the best element after slot `j - 1` in the order (value, then index), two reductions over
///   the row per slot, so `O(k n)` work per row;
/// - otherwise by ranks: the rank of every element in its row (how many come before it: a count
///   over the row), then for each slot the index whose rank it is, so `O(n^2)` work per row.
///
/// A negative `k` is one known only at run time: the result's extent along the axis is bound
/// from the result tensors (by ranks).
///
/// # Errors
/// A `ValueError` for an axis out of range or `k` larger than the axis.
pub fn topk(x: &Tensor, k: i64, axis: i64, largest: bool) -> Result<Vec<Tensor>> {
    let a = normalize_axis(axis, x.ndim(), "topk")?;
    let n = x.shape()[a].clone();
    if k < 0 {
        let k = kiln_tir::Var::size_var("k", DataType::int(32)).to_expr();
        let indices = by_rank(x, a, k, largest)?;
        return Ok(vec![values_at(x, a, &indices)?, indices]);
    }
    let Some(extent) = n.as_int().filter(|&n| (0..=n).contains(&k)) else {
        return Err(Error::value_error(format!(
            "topk: k = {k} must be in [0, {n}] (the extent of axis {a}, which must be static)"
        )));
    };
    let indices = if k <= SELECT_MAX_K && 2 * k < extent {
        by_selection(x, a, k, largest)?
    } else {
        by_rank(x, a, PrimExpr::const_int(n.dtype(), k), largest)?
    };
    Ok(vec![values_at(x, a, &indices)?, indices])
}

/// The elements of `x` at `indices` along axis `a`.
fn values_at(x: &Tensor, a: usize, indices: &Tensor) -> Result<Tensor> {
    let i64t = DataType::int(64);
    let n = x.shape()[a].clone();
    compute_tagged(
        indices.shape(),
        |i| {
            let mut at: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let idx = indices.at(&at);
            at[a] = cast(n.dtype(), kiln_tir::min(idx, cast(i64t, n.clone()) - 1));
            x.at(&at)
        },
        "topk_values",
        tag::INJECTIVE,
    )
}

/// The point of `x` in row `row` (all axes but `a`) at `r` on axis `a`.
fn point(row: &[PrimExpr], a: usize, r: PrimExpr) -> Vec<PrimExpr> {
    let mut p = row.to_vec();
    p.insert(a, r);
    p
}

/// The indices of the `k` best elements per row, one slot after the other.
fn by_selection(x: &Tensor, a: usize, k: i64, largest: bool) -> Result<Tensor> {
    let i64t = DataType::int(64);
    let n = x.shape()[a].clone();
    let mut rows = x.shape().to_vec();
    rows.remove(a);
    let t = x.dtype();
    let worst = match (largest, t.is_floating()) {
        (true, true) => PrimExpr::const_float(t, f64::NEG_INFINITY),
        (false, true) => PrimExpr::const_float(t, f64::INFINITY),
        (true, false) => kiln_te::min_value(t),
        (false, false) => kiln_te::max_value(t),
    };
    let mut slots: Vec<(Tensor, Tensor)> = Vec::new();
    for j in 0..k {
        // Whether the element at `r` comes after the previous slot's (value, index).
        let after = |row: &[PrimExpr], r: &PrimExpr| -> PrimExpr {
            let Some((pv, pi)) = slots.last() else {
                return PrimExpr::bool(true);
            };
            let (v, pv) = (x.at(&point(row, a, r.clone())), pv.at(row));
            let worse = if largest {
                v.lt(pv.clone())
            } else {
                v.gt(pv.clone())
            };
            worse.logical_or(
                v.equal(pv)
                    .logical_and(cast(i64t, r.clone()).gt(pi.at(row))),
            )
        };
        let r = reduce_axis_n(n.clone(), "r");
        let value = compute_tagged(
            &rows,
            |row| {
                let row: Vec<PrimExpr> = row.iter().map(|v| v.to_expr()).collect();
                let v = x.at(&point(&row, a, r.expr()));
                let best = move |p: &PrimExpr, q: &PrimExpr| {
                    if largest {
                        kiln_tir::max(p, q)
                    } else {
                        kiln_tir::min(p, q)
                    }
                };
                comm_reduce(
                    best,
                    worst.clone(),
                    v,
                    std::slice::from_ref(&r),
                    Some(after(&row, &r.expr())),
                )
            },
            &format!("topk_value{j}"),
            tag::COMM_REDUCE,
        )?;
        let s = reduce_axis_n(n.clone(), "s");
        let index = compute_tagged(
            &rows,
            |row| {
                let row: Vec<PrimExpr> = row.iter().map(|v| v.to_expr()).collect();
                let hit = after(&row, &s.expr())
                    .logical_and(x.at(&point(&row, a, s.expr())).equal(value.at(&row)));
                let none = cast(i64t, n.clone());
                let idx = cast(i64t, s.expr());
                comm_reduce(
                    |p, q| kiln_tir::min(p, q),
                    none,
                    idx,
                    std::slice::from_ref(&s),
                    Some(hit),
                )
            },
            &format!("topk_index{j}"),
            tag::COMM_REDUCE_IDX,
        )?;
        slots.push((value, index));
    }
    let mut shape = x.shape().to_vec();
    shape[a] = PrimExpr::const_int(n.dtype(), k);
    compute_tagged(
        &shape,
        |i| {
            let mut row: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let slot = row.remove(a);
            let mut out = PrimExpr::const_int(i64t, 0);
            for (j, (_, index)) in slots.iter().enumerate().rev() {
                out = kiln_tir::select(slot.equal(j as i64), index.at(&row), out);
            }
            out
        },
        "topk_indices",
        tag::INJECTIVE,
    )
}

/// The indices of the `k` best elements per row (`k` an expression: known at run time or
/// not), through the rank of every element.
fn by_rank(x: &Tensor, a: usize, k: PrimExpr, largest: bool) -> Result<Tensor> {
    let n = x.shape()[a].clone();
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
    shape[a] = k;
    let r = reduce_axis_n(n.clone(), "r");
    compute_tagged(
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
    )
}
