//! `clip(data, a_min, a_max)`: elementwise clamp (attributes `a_min`, `a_max`).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    ctx.tensor(0)?;
    let (lo, hi) = (ctx.attrs.float("a_min")?, ctx.attrs.float("a_max")?);
    if lo > hi {
        return Err(ctx.err(format!("a_min ({lo}) is greater than a_max ({hi})")));
    }
    Ok(ctx.args[0].clone())
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(kiln_topi::elemwise::clip(
        input("clip", i, 0)?,
        a.float("a_min")?,
        a.float("a_max")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("clip", &["data"], OpPattern::ElemWise, rel)
            .attrs(vec![
                AttrSpec::new("a_min", AttrKind::Float, f64::NEG_INFINITY),
                AttrSpec::new("a_max", AttrKind::Float, f64::INFINITY),
            ])
            .eval(|a, attrs, ty| {
                let (lo, hi) = (attrs.float("a_min")?, attrs.float("a_max")?);
                eval::unary(a, ty, |x| x.clamp(lo, hi))
            })
            .compute(lower),
    );
}
