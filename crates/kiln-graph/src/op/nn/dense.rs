//! `nn.dense(data, weight)`: `data [..., K] x weight [N, K]^T -> [..., N]`.

use crate::ir::Type;
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = ctx.tensor(0)?;
    let (w, _) = ctx.tensor_rank(1, 2)?;
    ctx.same_dtype(0, 1)?;
    if d.is_empty() {
        return Err(ctx.err("argument `data` must have rank >= 1"));
    }
    let k = d[d.len() - 1];
    if w[1] != k {
        return Err(ctx.err(format!(
            "argument `weight` has reduction dimension {} but `data` has {k} (weight is [units, in_features])",
            w[1]
        )));
    }
    if let Some(u) = ctx.attrs.opt_int("units")? {
        if u != w[0] {
            return Err(ctx.err(format!(
                "attribute `units`={u} but `weight` has {} rows",
                w[0]
            )));
        }
    }
    let mut s = d.to_vec();
    *s.last_mut().unwrap() = w[0];
    Ok(Type::tensor(&s, dt))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "nn.dense",
            &["data", "weight"],
            OpPattern::OutEWiseFusable,
            rel,
        )
        .attrs(vec![AttrSpec::optional("units", AttrKind::Int)]),
    );
}
