//! GELU in its exact (erf) form: `0.5 * x * (1 + erf(x / sqrt(2)))`.

use super::map;
use crate::transform::util::{constant, require_float};
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::{op, PrimExpr};

/// `0.5 * x * (1 + erf(x / sqrt(2)))` of a float expression.
pub fn gelu_expr(x: PrimExpr) -> PrimExpr {
    let t = x.dtype();
    constant(t, 0.5)
        * x.clone()
        * (constant(t, 1.0) + op::erf(x * constant(t, std::f64::consts::FRAC_1_SQRT_2)))
}

/// GELU (erf form) elementwise.
///
/// # Errors
/// A `TypeError` for non-float inputs.
pub fn gelu(x: &Tensor) -> Result<Tensor> {
    require_float(x, "gelu")?;
    map(x, "gelu", gelu_expr)
}
