//! `nn.deformable_conv2d(data, offset, weight, mask)`: 2-D convolution with per-tap offsets
//! and a mask (ONNX `DeformConv`), NCHW data, OIHW weight; see
//! [`kiln_topi::nn::deformable_conv2d`]. `mask` may have unit dimensions (a constant 1 when
//! the model gives none).

use super::{attr_padding, attr_pair, padding4, pair};
use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::{CpuDesc, DataTypeExt};
use kiln_topi::nn;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = ctx.tensor_rank(0, 4)?;
    let (off, _) = ctx.tensor_rank(1, 4)?;
    let (w, _) = ctx.tensor_rank(2, 4)?;
    let (m, _) = ctx.tensor_rank(3, 4)?;
    if !dt.is_floating() {
        return Err(ctx.err(format!("argument `data` must be a float tensor, got {dt}")));
    }
    ctx.same_dtype(0, 1)?;
    ctx.same_dtype(0, 2)?;
    ctx.same_dtype(0, 3)?;
    let s = pair(ctx, "strides", 1)?;
    let dil = pair(ctx, "dilation", 1)?;
    let pad = padding4(ctx)?;
    let groups = ctx.attrs.int("groups")?;
    let og = ctx.attrs.int("offset_groups")?;
    if groups < 1 || d[1] % groups != 0 || w[1] * groups != d[1] || w[0] % groups != 0 {
        return Err(ctx.err(format!(
            "`groups`={groups} does not fit data {d:?} and weight {w:?} (weight must be \
             [O, C/groups, kh, kw] with O divisible by groups)"
        )));
    }
    if og < 1 || d[1] % og != 0 {
        return Err(ctx.err(format!(
            "`offset_groups`={og} must be >= 1 and divide the {} input channels",
            d[1]
        )));
    }
    let oh = (d[2] + pad[0] + pad[2] - dil[0] * (w[2] - 1) - 1) / s[0] + 1;
    let ow = (d[3] + pad[1] + pad[3] - dil[1] * (w[3] - 1) - 1) / s[1] + 1;
    let taps = w[2] * w[3];
    if off != [d[0], og * taps * 2, oh, ow] {
        return Err(ctx.err(format!(
            "argument `offset` must be [{}, {}, {oh}, {ow}], got {off:?}",
            d[0],
            og * taps * 2
        )));
    }
    let want = [d[0], og * taps, oh, ow];
    if m.iter().zip(&want).any(|(&g, &w)| g != 1 && g != w) {
        return Err(ctx.err(format!(
            "argument `mask` must be {want:?} (or 1 where it broadcasts), got {m:?}"
        )));
    }
    Ok(Type::tensor(&[d[0], w[0], oh, ow], dt))
}

fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let attrs = nn::Conv2dAttrs {
        strides: attr_pair(a, "strides")?,
        padding: attr_padding(a)?,
        dilation: attr_pair(a, "dilation")?,
        groups: a.int("groups")?,
        channels: None,
    };
    let x = |k| input("nn.deformable_conv2d", i, k);
    one(nn::deformable_conv2d(
        x(0)?,
        x(2)?,
        x(1)?,
        x(3)?,
        &attrs,
        a.int("offset_groups")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "nn.deformable_conv2d",
            &["data", "offset", "weight", "mask"],
            OpPattern::OutEWiseFusable,
            rel,
        )
        .attrs(vec![
            AttrSpec::new("strides", AttrKind::Ints, [1, 1]),
            AttrSpec::new("padding", AttrKind::Ints, [0, 0, 0, 0]),
            AttrSpec::new("dilation", AttrKind::Ints, [1, 1]),
            AttrSpec::new("groups", AttrKind::Int, 1),
            AttrSpec::new("offset_groups", AttrKind::Int, 1),
        ])
        .compute(lower)
        .schedule(nn::schedule_deformable_conv2d),
    );
}
