//! Spatial padding of NCHW (and channel-blocked NCHW[x]c) tensors (the padding stage convolutions read through; schedules
//! inline it).

use super::{compute_tagged, nchw_or_blocks_dims, plus};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::PrimExpr;

/// Padding of the two spatial dimensions: `[top, left, bottom, right]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Padding2d {
    /// Rows added above.
    pub top: i64,
    /// Columns added on the left.
    pub left: i64,
    /// Rows added below.
    pub bottom: i64,
    /// Columns added on the right.
    pub right: i64,
}

impl Padding2d {
    /// The same padding on all four sides.
    pub fn same(p: i64) -> Padding2d {
        Padding2d {
            top: p,
            left: p,
            bottom: p,
            right: p,
        }
    }

    /// From `[top, left, bottom, right]` (ONNX `pads` order for 2-D: begins then ends).
    pub fn from_array(p: [i64; 4]) -> Padding2d {
        Padding2d {
            top: p[0],
            left: p[1],
            bottom: p[2],
            right: p[3],
        }
    }

    /// Whether every side is zero.
    pub fn is_zero(&self) -> bool {
        *self == Padding2d::default()
    }

    /// Whether any side is negative.
    pub fn is_negative(&self) -> bool {
        self.top < 0 || self.left < 0 || self.bottom < 0 || self.right < 0
    }
}

/// The name of the padding stage of the convolutions and poolings, which schedules look for.
pub const PAD_STAGE: &str = "pad_data";

/// `data` (N, C, H, W, or channel blocks N, C/b, H, W, b) padded on H and W with `value`
/// (returns `data` itself when `pad` is zero). The op is tagged injective and named `name`.
pub fn pad_nchw(data: &Tensor, pad: Padding2d, value: f64, name: &str) -> Result<Tensor> {
    let mut shape = nchw_or_blocks_dims(data, "pad")?;
    if pad.is_zero() {
        return Ok(data.clone());
    }
    let (h, w) = (shape[2].clone(), shape[3].clone());
    shape[2] = plus(&h, pad.top + pad.bottom);
    shape[3] = plus(&w, pad.left + pad.right);
    let data = data.clone();
    compute_tagged(
        &shape,
        |i| {
            let y = i[2].to_expr() - pad.top;
            let x = i[3].to_expr() - pad.left;
            let inside = y
                .ge(0)
                .logical_and(y.lt(h.clone()))
                .logical_and(x.ge(0))
                .logical_and(x.lt(w.clone()));
            let mut idx: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            idx[2] = y;
            idx[3] = x;
            let v: PrimExpr = data.at(&idx);
            let fill = PrimExpr::const_float(v.dtype(), value);
            kiln_te::if_then_else(inside, v, fill)
        },
        name,
        tag::INJECTIVE,
    )
}
