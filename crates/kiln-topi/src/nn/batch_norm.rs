//! Batch normalization, inference form: `(x - mean[c]) / sqrt(var[c] + eps) * gamma[c] +
//! beta[c]` along the channel axis.

use super::softmax::normalize_axis;
use super::{compute_tagged, const_shape, consts, invalid};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::PrimExpr;

/// Attributes of [`batch_norm_inference`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormAttrs {
    /// The channel axis (1 for NCHW).
    pub axis: i64,
    /// Added to the variance.
    pub epsilon: f64,
}

impl Default for BatchNormAttrs {
    fn default() -> BatchNormAttrs {
        BatchNormAttrs {
            axis: 1,
            epsilon: 1e-5,
        }
    }
}

/// Batch norm with stored statistics; `gamma`, `beta`, `mean` and `var` are 1-D of the channel
/// count. Injective (tagged [`tag::BROADCAST`]).
pub fn batch_norm_inference(
    x: &Tensor,
    gamma: &Tensor,
    beta: &Tensor,
    mean: &Tensor,
    var: &Tensor,
    attrs: &BatchNormAttrs,
) -> Result<Tensor> {
    const W: &str = "batch_norm";
    let shape = const_shape(x, W)?;
    let axis = normalize_axis(attrs.axis, shape.len(), W)?;
    for t in [gamma, beta, mean, var] {
        if const_shape(t, W)? != [shape[axis]] {
            return Err(invalid(
                W,
                format!("`{}` must have shape [{}]", t.name(), shape[axis]),
            ));
        }
    }
    let eps = PrimExpr::const_float(x.dtype(), attrs.epsilon);
    compute_tagged(
        &consts(&shape),
        |i| {
            let ch = [i[axis].to_expr()];
            (x.at_vars(i) - mean.at(&ch)) * kiln_tir::op::rsqrt(var.at(&ch) + eps) * gamma.at(&ch)
                + beta.at(&ch)
        },
        "batch_norm",
        tag::BROADCAST,
    )
}
