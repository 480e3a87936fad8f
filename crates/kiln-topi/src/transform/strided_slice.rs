//! `strided_slice` with ONNX `Slice` semantics: per-axis begin, end and step (negative
//! steps walk backwards), negative positions count from the end, out-of-range positions
//! clamp.

use super::util::{
    compute_tagged, const_shape, index_dtype, normalize_axis, shape_exprs, value_error,
};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::{PrimExpr, Var};

/// The clamped `(start, length)` of slicing a dimension of size `n` from `begin` to `end`
/// (exclusive) by `step` as ONNX `Slice` does.
///
/// # Errors
/// A `ValueError` for a zero step.
pub fn slice_params(n: i64, begin: i64, end: i64, step: i64) -> Result<(i64, i64)> {
    if step == 0 {
        return Err(value_error("strided_slice", "a step is 0"));
    }
    let fix = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (mut s, mut e) = (fix(begin), fix(end));
    if step > 0 {
        s = s.clamp(0, n);
        e = e.clamp(0, n);
    } else {
        s = s.clamp(0, (n - 1).max(0));
        e = e.clamp(-1, n - 1);
    }
    let len = if step > 0 {
        ((e - s) + step - 1).div_euclid(step)
    } else {
        ((s - e) + (-step) - 1).div_euclid(-step)
    };
    Ok((s, len.max(0)))
}

/// The slice of `x` with `begin[k]..end[k]` by `steps[k]` (default 1) on axis `axes[k]`
/// (default `k`; negative counts from the end); axes not named are kept whole.
///
/// # Errors
/// A `ValueError` when the lists' lengths differ, an axis is out of range or repeated, or a
/// step is 0.
pub fn strided_slice(
    x: &Tensor,
    begin: &[i64],
    end: &[i64],
    steps: Option<&[i64]>,
    axes: Option<&[i64]>,
) -> Result<Tensor> {
    let shape = const_shape(x, "strided_slice")?;
    let k = begin.len();
    let lens_ok =
        end.len() == k && steps.iter().all(|s| s.len() == k) && axes.iter().all(|a| a.len() == k);
    if !lens_ok {
        return Err(value_error(
            "strided_slice",
            "begin, end, steps and axes must have one length",
        ));
    }
    let mut start = vec![0i64; shape.len()];
    let mut stride = vec![1i64; shape.len()];
    let mut out = shape.clone();
    let mut seen = vec![false; shape.len()];
    for j in 0..k {
        let a = match axes {
            Some(ax) => normalize_axis(ax[j], shape.len(), "strided_slice")?,
            None if j < shape.len() => j,
            None => {
                return Err(value_error(
                    "strided_slice",
                    format!("{k} begins for a tensor of rank {}", shape.len()),
                ))
            }
        };
        if std::mem::replace(&mut seen[a], true) {
            return Err(value_error(
                "strided_slice",
                format!("axis {a} given twice"),
            ));
        }
        let st = steps.map_or(1, |s| s[j]);
        let (s, len) = slice_params(shape[a], begin[j], end[j], st)?;
        start[a] = s;
        stride[a] = st;
        out[a] = len;
    }
    let dt = index_dtype(x);
    compute_tagged(
        &shape_exprs(&out, dt),
        |i: &[Var]| {
            let idx: Vec<PrimExpr> = i
                .iter()
                .enumerate()
                .map(|(d, v)| {
                    let t = v.dtype();
                    v.to_expr() * PrimExpr::const_int(t, stride[d])
                        + PrimExpr::const_int(t, start[d])
                })
                .collect();
            x.at(&idx)
        },
        "strided_slice",
        tag::INJECTIVE,
    )
}
