//! Numpy broadcasting of shapes and the index map from an output point to an operand.

use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::{PrimExpr, Var};

fn show(shape: &[PrimExpr]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(", "))
}

/// The broadcast of two shapes (numpy rules). Symbolic dimensions broadcast when they are
/// the same expression or the other side is 1, or meet ([`crate::extent::meet`]).
///
/// # Errors
/// A `ValueError` naming the first incompatible dimension (counted from the right as numpy
/// does, and from the left of the result) and both shapes.
pub fn broadcast_shape(a: &[PrimExpr], b: &[PrimExpr]) -> Result<Vec<PrimExpr>> {
    let n = a.len().max(b.len());
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        // k-th dimension of the result, from the left.
        let da = (k + a.len()).checked_sub(n).map(|i| &a[i]);
        let db = (k + b.len()).checked_sub(n).map(|i| &b[i]);
        let d = match (da, db) {
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (Some(x), Some(y)) => {
                if x.is_const_int(1) {
                    y.clone()
                } else if y.is_const_int(1) {
                    x.clone()
                } else if let Some(d) = crate::extent::meet(x, y) {
                    d
                } else {
                    return Err(incompatible(a, b, k, n));
                }
            }
            (None, None) => unreachable!("k < max rank"),
        };
        out.push(d);
    }
    Ok(out)
}

fn incompatible(a: &[PrimExpr], b: &[PrimExpr], k: usize, n: usize) -> Error {
    Error::value_error(format!(
        "cannot broadcast shapes {} and {}: dimension {k} of the result (axis {} from the \
         right) is {} in one and {} in the other, and neither is 1",
        show(a),
        show(b),
        n - k,
        &a[k + a.len() - n],
        &b[k + b.len() - n]
    ))
}

/// The broadcast of several shapes (left to right).
///
/// # Errors
/// As [`broadcast_shape`].
pub fn broadcast_shapes(shapes: &[&[PrimExpr]]) -> Result<Vec<PrimExpr>> {
    let mut out: Vec<PrimExpr> = Vec::new();
    for s in shapes {
        out = broadcast_shape(&out, s)?;
    }
    Ok(out)
}

/// The indices into `t` of the output point `vars` of a broadcast result of rank
/// `vars.len()`: `t`'s dimensions align on the right, and size-1 dimensions of `t` read
/// index 0. `out_shape` is the broadcast result's shape.
pub fn broadcast_index(t: &Tensor, vars: &[Var], out_shape: &[PrimExpr]) -> Vec<PrimExpr> {
    let off = vars.len() - t.ndim();
    t.shape()
        .iter()
        .enumerate()
        .map(|(d, ext)| {
            let v = &vars[d + off];
            if ext.is_const_int(1) && !out_shape[d + off].is_const_int(1) {
                PrimExpr::const_int(v.dtype(), 0)
            } else {
                v.to_expr()
            }
        })
        .collect()
}
