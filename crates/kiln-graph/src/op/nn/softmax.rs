//! `nn.softmax(data, axis=-1)` and `nn.log_softmax(data, axis=-1)` (opaque for fusion, as in
//! TVM: their schedules are hand-written).

use crate::ir::Type;
use crate::op::{normalize_axis, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, _) = ctx.tensor(0)?;
    normalize_axis(ctx.attrs.int("axis")?, s.len()).map_err(|m| ctx.err(m))?;
    Ok(ctx.args[0].clone())
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    for name in ["nn.softmax", "nn.log_softmax"] {
        v.push(
            OpDef::new(name, &["data"], OpPattern::Opaque, rel).attrs(vec![AttrSpec::new(
                "axis",
                AttrKind::Int,
                -1,
            )]),
        );
    }
}
