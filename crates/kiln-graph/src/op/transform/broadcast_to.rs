//! `broadcast_to(data, shape)`: numpy broadcasting to a given shape (ONNX Expand).

use crate::ir::Type;
use crate::op::{broadcast_shapes, eval, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let target = ctx.attrs.ints("shape")?;
    let out = broadcast_shapes(s, &target).map_err(|m| ctx.err(m))?;
    if out != target {
        return Err(ctx.err(format!("cannot broadcast {s:?} to {target:?}")));
    }
    Ok(Type::tensor(&out, d))
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
            .eval(|a, _, ty| eval::broadcast(a, ty, |x| x[0])),
    );
}
