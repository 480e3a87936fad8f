//! Log-softmax along one axis: `x - max - log(sum(exp(x - max)))`.

use super::softmax::{drop_at, max_and_expsum, normalize_axis};
use super::{compute_tagged, const_shape, consts};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;

/// Log-softmax of `x` along `axis`; stages as in [`super::softmax`] (`log_softmax_maxelem`,
/// `log_softmax_expsum`), output tagged [`tag::SOFTMAX_OUTPUT`].
pub fn log_softmax(x: &Tensor, axis: i64) -> Result<Tensor> {
    let shape = const_shape(x, "log_softmax")?;
    let axis = normalize_axis(axis, shape.len(), "log_softmax")?;
    let (mx, es) = max_and_expsum(x, axis, "log_softmax")?;
    compute_tagged(
        &consts(&shape),
        |i| {
            let rest = drop_at(i, axis);
            x.at_vars(i) - mx.at(&rest) - kiln_tir::op::log(es.at(&rest))
        },
        "log_softmax",
        tag::SOFTMAX_OUTPUT,
    )
}
