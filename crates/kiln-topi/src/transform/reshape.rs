//! `reshape` with ONNX's `0` (copy the input dimension) and `-1` (infer) entries.

use super::util::{compute_tagged, const_shape, index_dtype, shape_exprs, value_error};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::{floordiv, floormod, PrimExpr, Var};

/// The output shape of reshaping `shape` to `newshape`: `0` copies the input dimension at the
/// same position (ONNX `allowzero = 0`), one `-1` takes what is left.
///
/// # Errors
/// A `ValueError` for two `-1`s, another negative entry, a `0` beyond the input's rank, or an
/// element count that does not match.
pub fn infer_reshape(shape: &[i64], newshape: &[i64]) -> Result<Vec<i64>> {
    let total: i64 = shape.iter().product();
    let mut out = Vec::with_capacity(newshape.len());
    let mut infer = None;
    for (k, &d) in newshape.iter().enumerate() {
        match d {
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
    let known: i64 = out.iter().product();
    if let Some(k) = infer {
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
pub fn reshape(x: &Tensor, newshape: &[i64]) -> Result<Tensor> {
    let shape = const_shape(x, "reshape")?;
    let out = infer_reshape(&shape, newshape)?;
    reshape_to(x, &shape, &out, "reshape")
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
            let lin = linear_index(&idx, out, dt);
            x.at(&unravel(lin, shape, dt))
        },
        name,
        tag::INJECTIVE,
    )
}
