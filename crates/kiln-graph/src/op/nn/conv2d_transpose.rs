//! `nn.conv2d_transpose(data, weight)`: transposed 2-D convolution, NCHW data, IOHW weight
//! (`[in_channels, out_channels / groups, kh, kw]`, TVM's convention).

use super::{attr_padding, attr_pair};
use super::{check_layout, padding4, pair};
use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one};
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn;
use kiln_topi::schedule::x86;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    check_layout(ctx, "data_layout", "NCHW")?;
    check_layout(ctx, "kernel_layout", "IOHW")?;
    let (d, dt) = ctx.tensor_rank(0, 4)?;
    let (w, _) = ctx.tensor_rank(1, 4)?;
    ctx.same_dtype(0, 1)?;
    let s = pair(ctx, "strides", 1)?;
    let dil = pair(ctx, "dilation", 1)?;
    let op = pair(ctx, "output_padding", 0)?;
    let pad = padding4(ctx)?;
    let groups = ctx.attrs.int("groups")?;
    if groups < 1 || d[1] % groups != 0 {
        return Err(ctx.err(format!(
            "attribute `groups`={groups} must be >= 1 and divide the {} input channels",
            d[1]
        )));
    }
    if w[0] != d[1] {
        return Err(ctx.err(format!(
            "argument `weight` has {} input channels but `data` has {}",
            w[0], d[1]
        )));
    }
    if op[0] >= s[0] && op[0] >= dil[0] || op[1] >= s[1] && op[1] >= dil[1] {
        return Err(ctx.err(format!(
            "attribute `output_padding`={op:?} must be smaller than strides or dilation"
        )));
    }
    let oh = (d[2] - 1) * s[0] - pad[0] - pad[2] + dil[0] * (w[2] - 1) + op[0] + 1;
    let ow = (d[3] - 1) * s[1] - pad[1] - pad[3] + dil[1] * (w[3] - 1) + op[1] + 1;
    if oh <= 0 || ow <= 0 {
        return Err(ctx.err(format!("the output would be empty ({oh}x{ow})")));
    }
    Ok(Type::tensor(&[d[0], w[1] * groups, oh, ow], dt))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let attrs = nn::Conv2dTransposeAttrs {
        strides: attr_pair(a, "strides")?,
        padding: attr_padding(a)?,
        output_padding: attr_pair(a, "output_padding")?,
        dilation: attr_pair(a, "dilation")?,
        groups: a.int("groups")?,
    };
    let x = |k| input("nn.conv2d_transpose", i, k);
    one(nn::conv2d_transpose(x(0)?, x(1)?, &attrs))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "nn.conv2d_transpose",
            &["data", "weight"],
            OpPattern::OutEWiseFusable,
            rel,
        )
        .attrs(vec![
            AttrSpec::new("strides", AttrKind::Ints, [1, 1]),
            AttrSpec::new("padding", AttrKind::Ints, [0, 0, 0, 0]),
            AttrSpec::new("dilation", AttrKind::Ints, [1, 1]),
            AttrSpec::new("output_padding", AttrKind::Ints, [0, 0]),
            AttrSpec::new("groups", AttrKind::Int, 1),
            AttrSpec::new("data_layout", AttrKind::Str, "NCHW"),
            AttrSpec::new("kernel_layout", AttrKind::Str, "IOHW"),
        ])
        .compute(lower)
        .schedule(x86::schedule_conv2d_nchw),
    );
}
