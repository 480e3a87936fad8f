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
