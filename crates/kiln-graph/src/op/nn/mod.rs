//! Neural-network operators (`nn.*`), NCHW / OIHW layouts.

pub mod batch_matmul;
pub mod batch_norm;
pub mod bias_add;
pub mod conv2d;
pub mod conv2d_transpose;
pub mod deformable_conv2d;
pub mod dense;
pub mod dense_dot4;
pub mod dropout;
pub mod global_pool2d;
pub mod im2col;
pub mod layer_norm;
pub mod matmul;
pub mod pool2d;
pub mod recurrent;
pub mod softmax;

use super::{OpDef, RelCtx};
use crate::ir::attrs::Attrs;
use kiln_ffi::{Error, Result};
use kiln_topi::nn::Padding2d;

/// The definitions of this family.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    conv2d::defs(v);
    conv2d_transpose::defs(v);
    deformable_conv2d::defs(v);
    dense::defs(v);
    dense_dot4::defs(v);
    im2col::defs(v);
    matmul::defs(v);
    batch_matmul::defs(v);
    pool2d::defs(v);
    global_pool2d::defs(v);
    softmax::defs(v);
    layer_norm::defs(v);
    batch_norm::defs(v);
    dropout::defs(v);
    bias_add::defs(v);
    recurrent::defs(v);
}

/// A 2-D attribute (`strides`, `dilation`, ...): one value for both axes or two, all >= `min`.
pub(crate) fn pair(ctx: &RelCtx<'_>, name: &str, min: i64) -> Result<[i64; 2]> {
    let v = ctx.attrs.ints(name)?;
    let p = match v.as_slice() {
        [a] => [*a, *a],
        [a, b] => [*a, *b],
        _ => {
            return Err(ctx.err(format!(
                "attribute `{name}` must have 1 or 2 values, got {v:?}"
            )))
        }
    };
    if p.iter().any(|&x| x < min) {
        return Err(ctx.err(format!("attribute `{name}` must be >= {min}, got {v:?}")));
    }
    Ok(p)
}

/// 2-D padding as (top, left, bottom, right) from 1, 2 or 4 values (TVM's rule), all >= 0.
pub(crate) fn padding4(ctx: &RelCtx<'_>) -> Result<[i64; 4]> {
    let v = ctx.attrs.ints("padding")?;
    let p = match v.as_slice() {
        [a] => [*a; 4],
        [h, w] => [*h, *w, *h, *w],
        [t, l, b, r] => [*t, *l, *b, *r],
        _ => {
            return Err(ctx.err(format!(
                "attribute `padding` must have 1, 2 or 4 values, got {v:?}"
            )))
        }
    };
    if p.iter().any(|&x| x < 0) {
        return Err(ctx.err(format!("attribute `padding` must be >= 0, got {v:?}")));
    }
    Ok(p)
}

/// Checks the layout attributes against the only supported ones.
pub(crate) fn check_layout(ctx: &RelCtx<'_>, name: &str, want: &str) -> Result<()> {
    let got = ctx.attrs.str(name)?;
    if got != want {
        return Err(ctx.err(format!("attribute `{name}` = \"{got}\" is not supported (only \"{want}\"; AlterOpLayout will add others)")));
    }
    Ok(())
}

/// The channel block of an activation layout: `Some(None)` for `NCHW`, `Some(Some(b))` for
/// `NCHW{b}c` (`[N, C/b, H, W, b]`, the layout `ConvertBlockedLayout` keeps between
/// convolutions), `None` for anything else.
pub fn channel_block(layout: &str) -> Option<Option<i64>> {
    block_of(layout, "NCHW", 'c')
}

/// The block of a layout `primal` or `{primal}{b}{axis}` (`OIHW16o`, `NCHW8c`): `Some(None)`
/// for `primal` alone, `Some(Some(b))` with a block of `b >= 1`, `None` for anything else.
pub(crate) fn block_of(layout: &str, primal: &str, axis: char) -> Option<Option<i64>> {
    if layout == primal {
        return Some(None);
    }
    let b = layout
        .strip_prefix(primal)?
        .strip_suffix(axis)?
        .parse::<i64>()
        .ok()?;
    (b >= 1).then_some(Some(b))
}

/// Argument `i` of a call as logical NCHW, its layout named by attribute `name` (`NCHW` or
/// `NCHW{b}c`): the `[N, C, H, W]` extents, the dtype and the channel block.
pub(crate) fn nchw_arg(
    ctx: &RelCtx<'_>,
    i: usize,
    name: &str,
) -> Result<(Vec<i64>, kiln_tir::DataType, Option<i64>)> {
    let layout = ctx.attrs.str(name)?;
    match channel_block(&layout) {
        Some(None) => {
            let (d, dt) = ctx.tensor_rank(i, 4)?;
            Ok((d.to_vec(), dt, None))
        }
        Some(Some(b)) => {
            let (d, dt) = ctx.tensor_rank(i, 5)?;
            if d[4] != b {
                return Err(ctx.err(format!(
                    "argument `{}` has blocks of {} but attribute `{name}` is {layout}",
                    ctx.arg_name(i),
                    d[4]
                )));
            }
            Ok((vec![d[0], d[1] * b, d[2], d[3]], dt, Some(b)))
        }
        None => Err(ctx.err(format!(
            "attribute `{name}` = \"{layout}\" is not supported (NCHW or NCHW<b>c)"
        ))),
    }
}

/// The shape of a logical NCHW result `[n, c, h, w]` in channel blocks of `block` (when
/// some): `[n, c/b, h, w, b]`.
pub(crate) fn in_blocks(shape: [i64; 4], block: Option<i64>) -> Vec<i64> {
    match block {
        None => shape.to_vec(),
        Some(b) => vec![shape[0], shape[1] / b, shape[2], shape[3], b],
    }
}

/// A 2-D attribute of a call as TOPI takes it: `(h, w)` from 1 or 2 values.
pub(crate) fn attr_pair(a: &Attrs<'_>, name: &str) -> Result<(i64, i64)> {
    let v = a.ints(name)?;
    match v.as_slice() {
        [x] => Ok((*x, *x)),
        [h, w] => Ok((*h, *w)),
        _ => Err(Error::value_error(format!(
            "`{name}` needs 1 or 2 values, got {v:?}"
        ))),
    }
}

/// The `padding` attribute of a call as TOPI takes it (1, 2 or 4 values, TVM's rule).
pub(crate) fn attr_padding(a: &Attrs<'_>) -> Result<Padding2d> {
    let v = a.ints("padding")?;
    match v.as_slice() {
        [p] => Ok(Padding2d::same(*p)),
        [h, w] => Ok(Padding2d::from_array([*h, *w, *h, *w])),
        [t, l, b, r] => Ok(Padding2d::from_array([*t, *l, *b, *r])),
        _ => Err(Error::value_error(format!(
            "`padding` needs 1, 2 or 4 values, got {v:?}"
        ))),
    }
}
