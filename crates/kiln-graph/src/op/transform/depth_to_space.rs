//! `nn.depth_to_space(data)`: channels moved into `block_size x block_size` pixel blocks
//! (ONNX `DepthToSpace`; TVM's op of that name), `mode` `DCR` (input channel `(i * s + j) * C +
//! c`) or `CRD` (`c * s * s + i * s + j`), on NCHW data or, in `DCR`, on channel blocks
//! (`layout` `NCHW<b>c`, from `ConvertBlockedLayout`).

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
    let b = ctx.attrs.int("block_size")?;
    if b < 1 || s[1] % (b * b) != 0 {
        return Err(ctx.err(format!(
            "{} channels do not split into attribute `block_size` = {b} squared",
            s[1]
        )));
    }
    let c = s[1] / (b * b);
    if let Some(lanes) = block {
        if m != DepthToSpaceMode::Dcr || c % lanes != 0 {
            return Err(ctx.err(format!(
                "channel blocks of {lanes} need mode DCR and output channels ({c}) in whole blocks"
            )));
        }
    }
    Ok(Type::tensor(
        &crate::op::nn::in_blocks([s[0], c, s[2] * b, s[3] * b], block),
        d,
    ))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let m = mode(a).map_err(kiln_ffi::Error::value_error)?;
    let data = input("nn.depth_to_space", i, 0)?;
    one(tf::depth_to_space(
        data,
        a.int("block_size")?,
        m,
        data.ndim() == 5,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("nn.depth_to_space", &["data"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::new("block_size", AttrKind::Int, 1i64),
                AttrSpec::new("mode", AttrKind::Str, "DCR"),
                AttrSpec::new("layout", AttrKind::Str, "NCHW"),
            ])
            .compute(lower),
    );
}
