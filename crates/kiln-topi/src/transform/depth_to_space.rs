//! `depth_to_space`: channels moved into `sh x sw` pixel blocks (ONNX `DepthToSpace` with
//! square ones; the interleave of a transposed convolution's output phases), on NCHW data or
//! on channel blocks.

use super::util::{compute_tagged, const_shape, index_dtype, shape_exprs, value_error};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::{floordiv, floormod, PrimExpr, Var};

/// How input channels map to output channels and pixel offsets `(i, j)` in the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DepthToSpaceMode {
    /// Depth-column-row: input channel `(i * sw + j) * C + c` (ONNX's default).
    Dcr,
    /// Column-row-depth: input channel `c * sh * sw + i * sw + j`.
    Crd,
}

/// `x` (`[N, C*sh*sw, H, W]`) with its channels moved into blocks of `(sh, sw)` = `block`
/// pixels: `out[n, c, y, x] = x[n, ch(c, y % sh, x % sw), y / sh, x / sw]` of shape `[N, C,
/// H*sh, W*sw]`, `ch` after `mode`. With `blocked`, `x` is in channel blocks (`[N,
/// C*sh*sw/b, H, W, b]`, DCR only) and so is the result (`[N, C/b, H*sh, W*sw, b]`): each
/// output block is a whole input block, so the innermost axis stays contiguous.
///
/// # Errors
/// A `ValueError` for a rank other than 4 (5 blocked), a block extent below 1, channels that
/// are not a multiple of `sh * sw` (of whole blocks when blocked) or CRD on blocks.
pub fn depth_to_space(
    x: &Tensor,
    block: (i64, i64),
    mode: DepthToSpaceMode,
    blocked: bool,
) -> Result<Tensor> {
    const OP: &str = "depth_to_space";
    let shape = const_shape(x, OP)?;
    let rank = if blocked { 5 } else { 4 };
    let (sh, sw) = block;
    if shape.len() != rank || sh < 1 || sw < 1 {
        return Err(value_error(
            OP,
            format!(
                "needs a rank-{rank} input and block extents >= 1, got {shape:?} and {block:?}"
            ),
        ));
    }
    // Channels in units of what the innermost index leaves whole: blocks or single channels.
    let units = shape[1];
    if units % (sh * sw) != 0 || (blocked && mode == DepthToSpaceMode::Crd) {
        return Err(value_error(
            OP,
            format!(
                "input {shape:?} does not split into {sh}x{sw} pixel blocks ({mode:?}{})",
                if blocked { ", channel blocks" } else { "" }
            ),
        ));
    }
    let per = units / (sh * sw);
    let mut out = shape.clone();
    out[1] = per;
    out[2] *= sh;
    out[3] *= sw;
    compute_tagged(
        &shape_exprs(&out, index_dtype(x)),
        |i: &[Var]| {
            let (y, xx) = (i[2].to_expr(), i[3].to_expr());
            let (di, dj) = (floormod(y.clone(), sh), floormod(xx.clone(), sw));
            let c = i[1].to_expr();
            let ch = match mode {
                DepthToSpaceMode::Dcr => (di * sw + dj) * per + c,
                DepthToSpaceMode::Crd => c * (sh * sw) + di * sw + dj,
            };
            let mut idx: Vec<PrimExpr> =
                vec![i[0].to_expr(), ch, floordiv(y, sh), floordiv(xx, sw)];
            idx.extend(i[4..].iter().map(|v| v.to_expr()));
            x.at(&idx)
        },
        OP,
        tag::INJECTIVE,
    )
}
