//! `nn.layer_norm(data, gamma, beta)`: normalization over `axis` (default -1) with epsilon;
//! gamma and beta are 1-D of the axis extent.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one};
use crate::op::{normalize_axis, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn;
use kiln_topi::schedule::x86;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, _) = ctx.tensor(0)?;
    let axis = normalize_axis(ctx.attrs.int("axis")?, s.len()).map_err(|m| ctx.err(m))?;
    for i in 1..3 {
        let (p, _) = ctx.tensor(i)?;
        ctx.same_dtype(0, i)?;
        if p != [s[axis]] {
            return Err(ctx.err(format!(
                "argument `{}` must have shape [{}] (data axis {axis}), got {}",
                ctx.arg_name(i),
                s[axis],
                ctx.args[i]
            )));
        }
    }
    if ctx.attrs.float("epsilon")? < 0.0 {
        return Err(ctx.err("attribute `epsilon` must be >= 0"));
    }
    Ok(ctx.args[0].clone())
}

/// The lowering (TOPI compute; gamma and beta optional).
fn lower(i: &[TeTensor], a: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<TeTensor>> {
    let attrs = nn::LayerNormAttrs {
        axes: vec![a.int("axis")?],
        epsilon: a.float("epsilon")?,
    };
    let x = input("nn.layer_norm", i, 0)?;
    let lanes = cpu.lanes(x.dtype());
    one(nn::layer_norm_in_lanes(
        x,
        i.get(1),
        i.get(2),
        &attrs,
        lanes,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "nn.layer_norm",
            &["data", "gamma", "beta"],
            OpPattern::Opaque,
            rel,
        )
        .attrs(vec![
            AttrSpec::new("axis", AttrKind::Int, -1),
            AttrSpec::new("epsilon", AttrKind::Float, 1e-5),
            AttrSpec::new("center", AttrKind::Bool, true),
            AttrSpec::new("scale", AttrKind::Bool, true),
        ])
        .compute(lower)
        .schedule(x86::schedule_layer_norm),
    );
}
