//! `reshape` with ONNX's `0` (copy the input dimension, or an empty axis with `allowzero`) and
//! `-1` (infer) entries.

use super::util::{compute_tagged, const_shape, index_dtype, shape_exprs, value_error};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::{floordiv, floormod, PrimExpr, Var};
use std::ops::Range;

/// The output shape of reshaping `shape` to `newshape`: `0` copies the input dimension at the
/// same position (ONNX `allowzero = 0`) or, with `allowzero`, is an axis of extent 0; one `-1`
/// takes what is left.
///
/// # Errors
/// A `ValueError` for two `-1`s, another negative entry, a `0` beyond the input's rank (without
/// `allowzero`), a `-1` beside a `0` with `allowzero` (ONNX leaves it undefined), or an element
/// count that does not match.
pub fn infer_reshape(shape: &[i64], newshape: &[i64], allowzero: bool) -> Result<Vec<i64>> {
    let total: i64 = shape.iter().product();
    let mut out = Vec::with_capacity(newshape.len());
    let mut infer = None;
    for (k, &d) in newshape.iter().enumerate() {
        match d {
            0 if allowzero => out.push(0),
            0 => out.push(*shape.get(k).ok_or_else(|| {
                value_error(
                    "reshape",
                    format!("entry {k} of {newshape:?} is 0 but the input {shape:?} has no dimension {k}"),
                )
            })?),
            -1 => {
                if infer.replace(k).is_some() {
                    return Err(value_error("reshape", format!("{newshape:?} has more than one -1")));
                }
                out.push(1);
            }
            d if d < 0 => {
                return Err(value_error("reshape", format!("{newshape:?} has the negative entry {d}")))
            }
            d => out.push(d),
        }
    }
    let known = out
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| value_error("reshape", format!("{newshape:?} has too many elements")))?;
    if let Some(k) = infer {
        if allowzero && newshape.contains(&0) {
            return Err(value_error(
                "reshape",
                format!("{newshape:?} has both a -1 and a 0, which allowzero=1 does not allow"),
            ));
        }
        if known == 0 || total % known != 0 {
            return Err(value_error(
                "reshape",
                format!("cannot infer the -1 of {newshape:?} for input shape {shape:?} ({total} elements)"),
            ));
        }
        out[k] = total / known;
    } else if known != total {
        return Err(value_error(
            "reshape",
            format!("cannot reshape {shape:?} ({total} elements) to {out:?} ({known} elements)"),
        ));
    }
    Ok(out)
}

/// The row-major linear index of `idx` in `shape`.
pub(crate) fn linear_index(idx: &[PrimExpr], shape: &[i64], dt: kiln_ffi::DataType) -> PrimExpr {
    let mut lin = PrimExpr::const_int(dt, 0);
    for (i, &d) in idx.iter().zip(shape) {
        lin = lin * PrimExpr::const_int(dt, d) + i.clone();
    }
    lin
}

/// The indices in `shape` of the row-major linear index `lin`.
pub(crate) fn unravel(lin: PrimExpr, shape: &[i64], dt: kiln_ffi::DataType) -> Vec<PrimExpr> {
    let mut out = vec![PrimExpr::const_int(dt, 0); shape.len()];
    let mut rest = lin;
    for k in (0..shape.len()).rev() {
        let d = PrimExpr::const_int(dt, shape[k]);
        if k == 0 {
            out[k] = rest.clone();
        } else {
            out[k] = floormod(rest.clone(), d.clone());
            rest = floordiv(rest, d);
        }
    }
    out
}

/// `x` with shape `newshape` (see [`infer_reshape`]), elements in row-major order.
///
/// # Errors
/// As [`infer_reshape`], and a `ValueError` for symbolic input shapes.
pub fn reshape(x: &Tensor, newshape: &[i64], allowzero: bool) -> Result<Tensor> {
    let shape = const_shape(x, "reshape")?;
    let out = infer_reshape(&shape, newshape, allowzero)?;
    reshape_to(x, &shape, &out, "reshape")
}

/// The groups of consecutive axes of `shape` and `out` (same element count) whose sizes have
/// equal products, in order: `[1, 136, 28, 28]` and `[1, 4, 34, 784]` give `[1] ~ [1]`,
/// `[136] ~ [4, 34]` and `[28, 28] ~ [784]`, as `(range of shape, range of out)`.
fn axis_groups(shape: &[i64], out: &[i64]) -> Option<Vec<(Range<usize>, Range<usize>)>> {
    let (mut i, mut j) = (0, 0);
    let mut groups = Vec::new();
    while i < shape.len() || j < out.len() {
        let (si, sj) = (i, j);
        let (mut pi, mut pj) = (1i64, 1i64);
        if i < shape.len() {
            pi *= shape[i];
            i += 1;
        }
        if j < out.len() {
            pj *= out[j];
            j += 1;
        }
        while pi != pj {
            if pi < pj && i < shape.len() {
                pi = pi.checked_mul(shape[i])?;
                i += 1;
            } else if pj < pi && j < out.len() {
                pj = pj.checked_mul(out[j])?;
                j += 1;
            } else {
                return None;
            }
        }
        groups.push((si..i, sj..j));
    }
    Some(groups)
}

/// The input indices (in `shape`) of output indices `idx` (in `out`) of a row-major reshape:
/// per group of axes with equal sizes (see [`axis_groups`]) the group's output indices are
/// linearized and unravelled into its input axes, so axes that keep their size map one to one
/// and a reshape that regroups leading axes leaves the trailing ones' index arithmetic alone
/// (a channel shuffle divides once per row, not once per element).
fn reshape_indices(
    idx: &[PrimExpr],
    shape: &[i64],
    out: &[i64],
    dt: kiln_ffi::DataType,
) -> Vec<PrimExpr> {
    let Some(groups) = axis_groups(shape, out) else {
        return unravel(linear_index(idx, out, dt), shape, dt);
    };
    let mut result = Vec::with_capacity(shape.len());
    for (gi, gj) in groups {
        if gi.is_empty() {
            continue;
        }
        let lin = linear_index(&idx[gj.clone()], &out[gj], dt);
        result.extend(unravel(lin, &shape[gi], dt));
    }
    result
}

/// `x` (of static `shape`) seen with shape `out` (same element count), named `name`.
pub(crate) fn reshape_to(x: &Tensor, shape: &[i64], out: &[i64], name: &str) -> Result<Tensor> {
    let dt = index_dtype(x);
    compute_tagged(
        &shape_exprs(out, dt),
        |i: &[Var]| {
            if shape == out {
                return x.at_vars(i);
            }
            let idx: Vec<PrimExpr> = i.iter().map(Var::to_expr).collect();
            x.at(&reshape_indices(&idx, shape, out, dt))
        },
        name,
        tag::INJECTIVE,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_groups_pair_axes_of_equal_size() {
        let g = axis_groups(&[1, 136, 28, 28], &[1, 4, 34, 784]).unwrap();
        assert_eq!(g, vec![(0..1, 0..1), (1..2, 1..3), (2..4, 3..4)]);
        let g = axis_groups(&[6], &[6, 1]).unwrap();
        assert_eq!(g, vec![(0..1, 0..1), (1..1, 1..2)]);
        let g = axis_groups(&[2, 1, 3], &[6]).unwrap();
        assert_eq!(g, vec![(0..3, 0..1)]);
        let g = axis_groups(&[4, 6], &[3, 8]).unwrap();
        assert_eq!(g, vec![(0..2, 0..2)]);
    }
}
