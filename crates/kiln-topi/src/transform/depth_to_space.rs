//! `depth_to_space`: channels moved into `s x s` pixel blocks (ONNX `DepthToSpace`, the pixel
//! shuffle of an upsampling transposed convolution), on NCHW data or on channel blocks.

use super::util::{compute_tagged, const_shape, index_dtype, shape_exprs, value_error};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::{floordiv, floormod, PrimExpr, Var};

/// How input channels map to output channels and pixel offsets `(i, j)` in the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DepthToSpaceMode {
    /// Depth-column-row: input channel `(i * s + j) * C + c` (ONNX's default).
    Dcr,
    /// Column-row-depth: input channel `c * s * s + i * s + j`.
    Crd,
}

/// `x` (`[N, C*s*s, H, W]`) with its channels moved into `s x s` blocks of pixels: `out[n, c,
/// y, x] = x[n, ch(c, y % s, x % s), y / s, x / s]` of shape `[N, C, H*s, W*s]`, `ch` after
/// `mode`. With `blocked`, `x` is in channel blocks (`[N, C*s*s/b, H, W, b]`, DCR only) and so
/// is the result (`[N, C/b, H*s, W*s, b]`): each output block is a whole input block, so the
/// innermost axis stays contiguous.
///
/// # Errors
/// A `ValueError` for a rank other than 4 (5 blocked), a block size below 1, channels that are
/// not a multiple of `s * s` (of whole blocks when blocked) or CRD on blocks.
pub fn depth_to_space(x: &Tensor, s: i64, mode: DepthToSpaceMode, blocked: bool) -> Result<Tensor> {
    const OP: &str = "depth_to_space";
    let shape = const_shape(x, OP)?;
    let rank = if blocked { 5 } else { 4 };
    if shape.len() != rank || s < 1 {
        return Err(value_error(
            OP,
            format!("needs a rank-{rank} input and a block size >= 1, got {shape:?} and {s}"),
        ));
    }
    // Channels in units of what the innermost index leaves whole: blocks or single channels.
    let units = shape[1];
    if units % (s * s) != 0 || (blocked && mode == DepthToSpaceMode::Crd) {
        return Err(value_error(
            OP,
            format!(
                "input {shape:?} does not split into {s}x{s} pixel blocks ({mode:?}{})",
                if blocked { ", channel blocks" } else { "" }
            ),
        ));
    }
    let per = units / (s * s);
    let mut out = shape.clone();
    out[1] = per;
    out[2] *= s;
    out[3] *= s;
    compute_tagged(
        &shape_exprs(&out, index_dtype(x)),
        |i: &[Var]| {
            let (y, xx) = (i[2].to_expr(), i[3].to_expr());
            let (di, dj) = (floormod(y.clone(), s), floormod(xx.clone(), s));
            let c = i[1].to_expr();
            let ch = match mode {
                DepthToSpaceMode::Dcr => (di * s + dj) * per + c,
                DepthToSpaceMode::Crd => c * (s * s) + di * s + dj,
            };
            let mut idx: Vec<PrimExpr> = vec![i[0].to_expr(), ch, floordiv(y, s), floordiv(xx, s)];
            idx.extend(i[4..].iter().map(|v| v.to_expr()));
            x.at(&idx)
        },
        OP,
        tag::INJECTIVE,
    )
}
