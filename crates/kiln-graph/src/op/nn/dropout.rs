//! `nn.dropout(data, rate=0.5)`: identity at inference. As in TVM it returns (output, mask);
//! `SimplifyInference` replaces `dropout(x).0` by `x`.

use crate::ir::Type;
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    ctx.tensor(0)?;
    let r = ctx.attrs.float("rate")?;
    if !(0.0..1.0).contains(&r) {
        return Err(ctx.err(format!("attribute `rate` must be in [0, 1), got {r}")));
    }
    Ok(Type::tuple(vec![ctx.args[0].clone(), ctx.args[0].clone()]))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("nn.dropout", &["data"], OpPattern::Opaque, rel)
            .attrs(vec![AttrSpec::new("rate", AttrKind::Float, 0.5)])
            .rewritten_by("SimplifyInference"),
    );
}
