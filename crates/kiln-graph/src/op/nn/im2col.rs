//! `nn.im2col(data, pad_value, kernel_size, strides, padding, dilation, columns)`: the patches
//! of a 2-D convolution over NCHW `data` (padded with the one value of `pad_value`) as the rows of a `[N*OH*OW, columns]` matrix (zeros past
//! `C*KH*KW` columns), [`kiln_topi::nn::im2col`]. AlterOpLayout makes it for integer
//! convolutions run as `nn.dense_dot4` products.

use super::conv2d::{conv_attrs, topi_attrs};
use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one};
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn;

/// The kernel size attribute as `(kh, kw)`.
fn kernel(a: &Attrs<'_>) -> Result<(i64, i64)> {
    match a.ints("kernel_size")?.as_slice() {
        [kh, kw] => Ok((*kh, *kw)),
        k => Err(kiln_ffi::Error::type_error(format!(
            "attribute `kernel_size` needs 2 values, got {k:?}"
        ))),
    }
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = ctx.tensor_rank(0, 4)?;
    let (p, pt) = ctx.tensor(1)?;
    if p.iter().product::<i64>() != 1 || pt != dt {
        return Err(ctx.err(format!(
            "argument `pad_value` must hold one {dt} value, got {pt} {p:?}"
        )));
    }
    let (kh, kw) = kernel(&ctx.attrs)?;
    let a = topi_attrs(&ctx.attrs)?;
    let out = nn::conv2d::conv2d_out_shape(d, &[1, d[1], kh, kw], &a)
        .map_err(|e| ctx.err(e.to_string()))?;
    let columns = ctx.attrs.int("columns")?;
    if columns < d[1] * kh * kw {
        return Err(ctx.err(format!(
            "attribute `columns`={columns} is below the {} values of a patch",
            d[1] * kh * kw
        )));
    }
    Ok(Type::tensor(&[d[0] * out[2] * out[3], columns], dt))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(nn::im2col(
        input("nn.im2col", i, 0)?,
        input("nn.im2col", i, 1)?,
        kernel(a)?,
        &topi_attrs(a)?,
        a.int("columns")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    let mut attrs = conv_attrs();
    attrs.push(AttrSpec::new("columns", AttrKind::Int, 0i64));
    v.push(
        OpDef::new(
            "nn.im2col",
            &["data", "pad_value"],
            // Its own schedule (an NHWC copy, then vector runs), so fused with nothing.
            OpPattern::Opaque,
            rel,
        )
        .attrs(attrs)
        .compute(lower)
        .schedule(nn::schedule_im2col),
    );
}
