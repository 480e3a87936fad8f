//! `broadcast_to` (numpy) and `expand` (ONNX `Expand`, bidirectional).

use super::shape::{broadcast_index, broadcast_shape};
use crate::tag;
use crate::transform::util::{compute_tagged, index_dtype, shape_exprs};
use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::PrimExpr;

fn stretch(x: &Tensor, shape: &[PrimExpr], name: &str) -> Result<Tensor> {
    compute_tagged(
        shape,
        |i| x.at(&broadcast_index(x, i, shape)),
        name,
        tag::BROADCAST,
    )
}

/// `x` stretched to exactly `shape` (numpy `broadcast_to`): `x`'s shape must broadcast to it
/// without changing it.
///
/// # Errors
/// A `ValueError` when `x` does not broadcast to `shape`.
pub fn broadcast_to(x: &Tensor, shape: &[i64]) -> Result<Tensor> {
    let target = shape_exprs(shape, index_dtype(x));
    let b = broadcast_shape(x.shape(), &target).map_err(|e| e.context("in `broadcast_to`"))?;
    let same =
        b.len() == target.len() && b.iter().zip(&target).all(|(u, v)| u.as_int() == v.as_int());
    if !same {
        return Err(Error::value_error(format!(
            "broadcast_to: `{}` of shape {:?} cannot be broadcast to {shape:?}",
            x.name(),
            x.shape().iter().map(|d| d.to_string()).collect::<Vec<_>>()
        )));
    }
    stretch(x, &target, "broadcast_to")
}

/// `x` broadcast with `shape` in both directions (ONNX `Expand`): the result's shape is the
/// broadcast of `x`'s shape and `shape`, so `shape` may hold 1 where `x` is larger.
///
/// # Errors
/// A `ValueError` when the shapes do not broadcast.
pub fn expand(x: &Tensor, shape: &[i64]) -> Result<Tensor> {
    let target = shape_exprs(shape, index_dtype(x));
    let b = broadcast_shape(x.shape(), &target).map_err(|e| e.context("in `expand`"))?;
    stretch(x, &b, "expand")
}
