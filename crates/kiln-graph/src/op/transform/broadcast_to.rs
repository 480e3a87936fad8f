//! `broadcast_to(data, shape)`: numpy broadcasting to a given shape (ONNX Expand).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{broadcast_shapes, eval, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let target = ctx.attrs.ints("shape")?;
    let out = broadcast_shapes(s, &target).map_err(|m| ctx.err(m))?;
    if out != target {
        return Err(ctx.err(format!("cannot broadcast {s:?} to {target:?}")));
    }
    Ok(Type::tensor(&out, d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(kiln_topi::broadcast::broadcast_to(
        input("broadcast_to", i, 0)?,
        &a.ints("shape")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("broadcast_to", &["data"], OpPattern::Broadcast, rel)
            .attrs(vec![AttrSpec::new(
                "shape",
                AttrKind::Ints,
                Vec::<i64>::new(),
            )])
            .eval(|a, _, ty| eval::broadcast(a, ty, |x| x[0]))
            .compute(lower),
    );
}
