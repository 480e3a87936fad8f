//! `where(condition, x, y)`: elementwise select with broadcasting over all three.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{broadcast_shapes, eval, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_tir::DataTypeExt;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (c, cd) = ctx.tensor(0)?;
    if !cd.is_bool() {
        return Err(ctx.err(format!("argument `condition` must be bool, got {cd}")));
    }
    let (x, _) = ctx.tensor(1)?;
    let (y, _) = ctx.tensor(2)?;
    let d = ctx.same_dtype(1, 2)?;
    let s = broadcast_shapes(x, y).map_err(|m| ctx.err(m))?;
    let s = broadcast_shapes(c, &s).map_err(|m| ctx.err(m))?;
    Ok(Type::tensor(&s, d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let _ = a;
    let x = |k| input("where", i, k);
    one(kiln_topi::broadcast::where_(x(0)?, x(1)?, x(2)?))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("where", &["condition", "x", "y"], OpPattern::Broadcast, rel)
            .eval(|a, _, ty| eval::broadcast(a, ty, |v| if v[0] != 0.0 { v[1] } else { v[2] }))
            .compute(lower),
    );
}
