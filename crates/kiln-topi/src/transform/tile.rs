//! `tile`: repeat a tensor along each axis (ONNX `Tile`).

use super::util::{compute_tagged, const_shape, index_dtype, shape_exprs, value_error};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::{floormod, PrimExpr, Var};

/// `x` repeated `reps[d]` times along each axis `d` (one entry per axis, each >= 0).
///
/// # Errors
/// A `ValueError` for a wrong number of repeats or a negative one.
pub fn tile(x: &Tensor, reps: &[i64]) -> Result<Tensor> {
    let shape = const_shape(x, "tile")?;
    if reps.len() != shape.len() || reps.iter().any(|&r| r < 0) {
        return Err(value_error(
            "tile",
            format!("repeats {reps:?} must be non-negative, one per axis of {shape:?}"),
        ));
    }
    let out: Vec<i64> = shape.iter().zip(reps).map(|(s, r)| s * r).collect();
    compute_tagged(
        &shape_exprs(&out, index_dtype(x)),
        |i: &[Var]| {
            let idx: Vec<PrimExpr> = i
                .iter()
                .zip(&shape)
                .zip(reps)
                .map(|((v, &s), &r)| {
                    if r == 1 || s == 1 && r == 0 {
                        v.to_expr()
                    } else if s == 1 {
                        PrimExpr::const_int(v.dtype(), 0)
                    } else {
                        floormod(v.to_expr(), s)
                    }
                })
                .collect();
            x.at(&idx)
        },
        "tile",
        tag::INJECTIVE,
    )
}
