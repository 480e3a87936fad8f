//! `clip(x, lo, hi)` (ONNX `Clip`, TVM's `topi.clip`).

use super::map;
use crate::transform::util::constant;
use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::DataTypeExt;

/// `min(max(x, lo), hi)` elementwise; bounds are given as `f64` and converted to the input's
/// dtype (so integer tensors clip at truncated bounds, and bounds beyond the dtype's range,
/// such as the infinite defaults, leave that side unclipped).
///
/// # Errors
/// A `ValueError` when `lo > hi`.
pub fn clip(x: &Tensor, lo: f64, hi: f64) -> Result<Tensor> {
    if lo > hi {
        return Err(Error::value_error(format!(
            "clip: lower bound {lo} is above upper bound {hi}"
        )));
    }
    map(x, "clip", |v| {
        let t = v.dtype();
        let (lo, hi) = if t.is_integer() {
            let (min, max) = (t.int_min() as f64, t.int_max() as f64);
            (lo.clamp(min, max), hi.clamp(min, max))
        } else {
            (lo, hi)
        };
        kiln_tir::min(kiln_tir::max(v, constant(t, lo)), constant(t, hi))
    })
}
