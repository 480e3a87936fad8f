//! `nn.depth_to_space(data)`: channels moved into pixel blocks of `block_size` (one extent,
//! square blocks as ONNX `DepthToSpace` and TVM's op of that name have, or `[rows, columns]`:
//! the interleave of a transposed convolution's phases), `mode` `DCR` (input channel `(i * sw
//! + j) * C + c`) or `CRD` (`c * sh * sw + i * sw + j`), on NCHW data or, in `DCR`, on channel
//! blocks (`layout` `NCHW<b>c`, from `ConvertBlockedLayout`).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one};
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::transform::{self as tf, DepthToSpaceMode};

/// The `mode` attribute, checked.
fn mode(a: &Attrs<'_>) -> std::result::Result<DepthToSpaceMode, String> {
    match a.str("mode").map_err(|e| e.message().to_string())?.as_str() {
        "DCR" => Ok(DepthToSpaceMode::Dcr),
        "CRD" => Ok(DepthToSpaceMode::Crd),
        m => Err(format!("attribute `mode` = \"{m}\" is not DCR or CRD")),
    }
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d, block) = crate::op::nn::nchw_arg(ctx, 0, "layout")?;
    let m = mode(&ctx.attrs).map_err(|e| ctx.err(e))?;
    let (bh, bw) = crate::op::nn::attr_pair(&ctx.attrs, "block_size")?;
    if bh < 1 || bw < 1 || s[1] % (bh * bw) != 0 {
        return Err(ctx.err(format!(
            "{} channels do not split into pixel blocks of attribute `block_size` = {bh} x {bw}",
            s[1]
        )));
    }
    let c = s[1] / (bh * bw);
    if let Some(lanes) = block {
        if m != DepthToSpaceMode::Dcr || c % lanes != 0 {
            return Err(ctx.err(format!(
                "channel blocks of {lanes} need mode DCR and output channels ({c}) in whole blocks"
            )));
        }
    }
    Ok(Type::tensor(
        &crate::op::nn::in_blocks([s[0], c, s[2] * bh, s[3] * bw], block),
        d,
    ))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let m = mode(a).map_err(kiln_ffi::Error::value_error)?;
    let data = input("nn.depth_to_space", i, 0)?;
    one(tf::depth_to_space(
        data,
        crate::op::nn::attr_pair(a, "block_size")?,
        m,
        data.ndim() == 5,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("nn.depth_to_space", &["data"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::new("block_size", AttrKind::Ints, vec![1i64]),
                AttrSpec::new("mode", AttrKind::Str, "DCR"),
                AttrSpec::new("layout", AttrKind::Str, "NCHW"),
            ])
            .compute(lower),
    );
}
