//! `nn.batch_norm(data, gamma, beta, moving_mean, moving_var)`: inference-mode batch norm over
//! `axis` (default 1). As in TVM it returns a 3-tuple (output, mean, var); `SimplifyInference`
//! turns `batch_norm(...).0` into a multiply and an add.

use crate::ir::Type;
use crate::op::{normalize_axis, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, dt) = ctx.tensor(0)?;
    let axis = normalize_axis(ctx.attrs.int("axis")?, s.len()).map_err(|m| ctx.err(m))?;
    let c = s[axis];
    for i in 1..5 {
        let (p, _) = ctx.tensor(i)?;
        ctx.same_dtype(0, i)?;
        if p != [c] {
            return Err(ctx.err(format!(
                "argument `{}` must have shape [{c}] (data axis {axis}), got {}",
                ctx.arg_name(i),
                ctx.args[i]
            )));
        }
    }
    let v = Type::tensor(&[c], dt);
    Ok(Type::tuple(vec![ctx.args[0].clone(), v.clone(), v]))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "nn.batch_norm",
            &["data", "gamma", "beta", "moving_mean", "moving_var"],
            OpPattern::Opaque,
            rel,
        )
        .attrs(vec![
            AttrSpec::new("axis", AttrKind::Int, 1),
            AttrSpec::new("epsilon", AttrKind::Float, 1e-5),
            AttrSpec::new("center", AttrKind::Bool, true),
            AttrSpec::new("scale", AttrKind::Bool, true),
        ])
        .rewritten_by("SimplifyInference"),
    );
}
