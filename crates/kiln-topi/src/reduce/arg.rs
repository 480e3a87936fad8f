//! `argmax` / `argmin`: the index of the extreme value, the first one on ties (numpy, ONNX
//! with `select_last_index = 0`), or the last one ([`arg_extreme`], ONNX's
//! `select_last_index = 1`).
//!
//! Two stages: the extreme value over the axis (`<name>_val`), then the smallest (largest)
//! index whose element equals it (the output, `int64`). With `axis = None` the index is into the
//! flattened (row-major) tensor, as numpy's.

use super::common::{input_indices, reduce_axes, reduced_shape};
use crate::tag;
use crate::transform::util::{compute_tagged, normalize_axis};
use kiln_ffi::{DataType, Result};
use kiln_te::{reduce_axis_n, IterVar, Tensor};
use kiln_tir::{cast, select, PrimExpr};

/// The index of the largest (`is_max`) or smallest element along `axis`, the last one on ties
/// when `last`, else the first.
///
/// # Errors
/// A `ValueError` for an axis out of range.
pub fn arg_extreme(
    x: &Tensor,
    axis: Option<i64>,
    keepdims: bool,
    is_max: bool,
    last: bool,
) -> Result<Tensor> {
    let name = if is_max { "argmax" } else { "argmin" };
    let axes = match axis {
        Some(a) => vec![normalize_axis(a, x.ndim(), name)?],
        None => reduce_axes(None, x.ndim(), name)?,
    };
    let ndim = x.ndim();
    let shape = reduced_shape(x.shape(), &axes, keepdims);
    let mk_axes = |p: &str| -> Vec<IterVar> {
        axes.iter()
            .enumerate()
            .map(|(k, &d)| reduce_axis_n(x.shape()[d].clone(), &format!("{p}{k}")))
            .collect()
    };
    let r1 = mk_axes("k");
    let rv1: Vec<PrimExpr> = r1.iter().map(IterVar::expr).collect();
    let val = compute_tagged(
        &shape,
        |i| {
            let v = x.at(&input_indices(ndim, &axes, keepdims, i, &rv1));
            if r1.is_empty() {
                v
            } else if is_max {
                kiln_te::max(v, &r1)
            } else {
                kiln_te::min(v, &r1)
            }
        },
        &format!("{name}_val"),
        tag::COMM_REDUCE,
    )?;
    let r2 = mk_axes("r");
    let rv2: Vec<PrimExpr> = r2.iter().map(IterVar::expr).collect();
    let i64t = DataType::int(64);
    // The row-major linear index of the reduced coordinates.
    let mut linear = PrimExpr::const_int(i64t, 0);
    for (k, &d) in axes.iter().enumerate() {
        let ext = cast(i64t, x.shape()[d].clone());
        linear = linear * ext + cast(i64t, rv2[k].clone());
    }
    compute_tagged(
        &shape,
        |i| {
            let v = x.at(&input_indices(ndim, &axes, keepdims, i, &rv2));
            let hit = v.equal(val.at_vars(i));
            let miss = if last { -1 } else { i64::MAX };
            let idx = select(hit, linear, PrimExpr::const_int(i64t, miss));
            if r2.is_empty() {
                PrimExpr::const_int(i64t, 0)
            } else if last {
                kiln_te::max(idx, &r2)
            } else {
                kiln_te::min(idx, &r2)
            }
        },
        name,
        tag::COMM_REDUCE_IDX,
    )
}

/// The index (`int64`) of the largest element along `axis` (`None`: of the flattened
/// tensor); the first one on ties. NaN inputs are not treated specially.
///
/// # Errors
/// A `ValueError` for an axis out of range.
pub fn argmax(x: &Tensor, axis: Option<i64>, keepdims: bool) -> Result<Tensor> {
    arg_extreme(x, axis, keepdims, true, false)
}

/// The index (`int64`) of the smallest element along `axis` (`None`: of the flattened
/// tensor); the first one on ties.
///
/// # Errors
/// A `ValueError` for an axis out of range.
pub fn argmin(x: &Tensor, axis: Option<i64>, keepdims: bool) -> Result<Tensor> {
    arg_extreme(x, axis, keepdims, false, false)
}
