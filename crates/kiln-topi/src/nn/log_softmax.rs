//! Log-softmax along one axis: `x - max - log(sum(exp(x - max)))`.

use super::compute_tagged;
use super::softmax::{drop_at, max_and_expsum, normalize_axis};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;

/// Log-softmax of `x` along `axis`; stages as in [`super::softmax`] (`log_softmax_maxelem`,
/// `log_softmax_expsum`), output tagged [`tag::SOFTMAX_OUTPUT`]; extents may be known only
/// at run time.
pub fn log_softmax(x: &Tensor, axis: i64) -> Result<Tensor> {
    let axis = normalize_axis(axis, x.ndim(), "log_softmax")?;
    let (mx, es) = max_and_expsum(x, axis, "log_softmax", 1)?;
    compute_tagged(
        x.shape(),
        |i| {
            let rest = drop_at(i, axis);
            x.at_vars(i) - mx.at(&rest) - kiln_tir::op::log(es.at(&rest))
        },
        "log_softmax",
        tag::SOFTMAX_OUTPUT,
    )
}
