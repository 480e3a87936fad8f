//! `nn.max_pool2d(data)` and `nn.avg_pool2d(data)`: windowed pooling over NCHW, or channel
//! blocks with `layout` `NCHW{b}c` (pool_size, strides, padding, dilation, ceil_mode; avg:
//! count_include_pad).

use super::{attr_padding, attr_pair};
use super::{in_blocks, nchw_arg, padding4, pair};
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
    let (d, dt, block) = nchw_arg(ctx, 0, "layout")?;
    let k = pair(ctx, "pool_size", 1)?;
    let s = pair(ctx, "strides", 1)?;
    let dil = pair(ctx, "dilation", 1)?;
    let p = padding4(ctx)?;
    let ceil = ctx.attrs.bool("ceil_mode")?;
    let mut out = [0i64; 2];
    for i in 0..2 {
        if d[2 + i] < 0 {
            // Known only at run time: so is the output's extent.
            out[i] = -1;
            continue;
        }
        let eff = dil[i] * (k[i] - 1) + 1;
        let n = d[2 + i] + p[i] + p[i + 2] - eff;
        if n < 0 {
            return Err(ctx.err(format!(
                "pool window {} is larger than the padded input {}",
                eff,
                d[2 + i] + p[i] + p[i + 2]
            )));
        }
        out[i] = if ceil {
            (n + s[i] - 1) / s[i] + 1
        } else {
            n / s[i] + 1
        };
        // As in TVM/ONNX: the last window must start inside the input or the left padding.
        if ceil && (out[i] - 1) * s[i] >= d[2 + i] + p[i] {
            out[i] -= 1;
        }
    }
    Ok(Type::tensor(
        &in_blocks([d[0], d[1], out[0], out[1]], block),
        dt,
    ))
}

fn attrs(avg: bool) -> Vec<AttrSpec> {
    let mut v = vec![
        AttrSpec::new("pool_size", AttrKind::Ints, [1, 1]),
        AttrSpec::new("strides", AttrKind::Ints, [1, 1]),
        AttrSpec::new("padding", AttrKind::Ints, [0, 0, 0, 0]),
        AttrSpec::new("dilation", AttrKind::Ints, [1, 1]),
        AttrSpec::new("ceil_mode", AttrKind::Bool, false),
        AttrSpec::new("layout", AttrKind::Str, "NCHW"),
    ];
    if avg {
        v.push(AttrSpec::new("count_include_pad", AttrKind::Bool, false));
    }
    v
}

/// The TOPI attributes of a pooling call (`count_include_pad` for average pooling only).
fn topi_attrs(a: &Attrs<'_>, avg: bool) -> Result<nn::Pool2dAttrs> {
    Ok(nn::Pool2dAttrs {
        pool_size: attr_pair(a, "pool_size")?,
        strides: attr_pair(a, "strides")?,
        dilation: attr_pair(a, "dilation")?,
        padding: attr_padding(a)?,
        ceil_mode: a.bool("ceil_mode")?,
        count_include_pad: avg && a.bool("count_include_pad")?,
    })
}

/// The lowering of `nn.max_pool2d` (TOPI compute).
fn lower_max(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(nn::max_pool2d(
        input("nn.max_pool2d", i, 0)?,
        &topi_attrs(a, false)?,
    ))
}

/// The lowering of `nn.avg_pool2d` (TOPI compute).
fn lower_avg(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(nn::avg_pool2d(
        input("nn.avg_pool2d", i, 0)?,
        &topi_attrs(a, true)?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("nn.max_pool2d", &["data"], OpPattern::OutEWiseFusable, rel)
            .attrs(attrs(false))
            .compute(lower_max)
            .schedule(x86::schedule_pool),
    );
    v.push(
        OpDef::new("nn.avg_pool2d", &["data"], OpPattern::OutEWiseFusable, rel)
            .attrs(attrs(true))
            .compute(lower_avg)
            .schedule(x86::schedule_pool),
    );
}
