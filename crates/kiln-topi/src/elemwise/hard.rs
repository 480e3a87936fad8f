//! `hard_sigmoid` and `hard_swish` (ONNX `HardSigmoid`, `HardSwish`).

use super::map;
use crate::transform::util::{constant, require_float};
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::PrimExpr;

/// `max(0, min(1, alpha * x + beta))` of a float expression.
pub fn hard_sigmoid_expr(x: PrimExpr, alpha: f64, beta: f64) -> PrimExpr {
    let t = x.dtype();
    let lin = x * constant(t, alpha) + constant(t, beta);
    kiln_tir::max(kiln_tir::min(lin, constant(t, 1.0)), constant(t, 0.0))
}

/// `max(0, min(1, alpha * x + beta))` elementwise (ONNX defaults: alpha 0.2, beta 0.5).
///
/// # Errors
/// A `TypeError` for non-float inputs.
pub fn hard_sigmoid(x: &Tensor, alpha: f64, beta: f64) -> Result<Tensor> {
    require_float(x, "hard_sigmoid")?;
    map(x, "hard_sigmoid", |v| hard_sigmoid_expr(v, alpha, beta))
}

/// `x * hard_sigmoid(x, 1/6, 0.5)` elementwise (ONNX `HardSwish`).
///
/// # Errors
/// A `TypeError` for non-float inputs.
pub fn hard_swish(x: &Tensor) -> Result<Tensor> {
    require_float(x, "hard_swish")?;
    map(x, "hard_swish", |v| {
        v.clone() * hard_sigmoid_expr(v, 1.0 / 6.0, 0.5)
    })
}
