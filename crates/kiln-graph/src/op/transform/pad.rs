//! `nn.pad(data, pad_width, pad_value=0, pad_mode="constant")`; `pad_width` is flat:
//! `[before_0, after_0, before_1, after_1, ...]` (negative values crop).

use crate::ir::Type;
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let w = ctx.attrs.ints("pad_width")?;
    if w.len() != 2 * s.len() {
        return Err(ctx.err(format!(
            "attribute `pad_width` needs {} values (before/after per axis), got {}",
            2 * s.len(),
            w.len()
        )));
    }
    let mode = ctx.attrs.str("pad_mode")?;
    if !["constant", "edge", "reflect"].contains(&mode.as_str()) {
        return Err(ctx.err(format!(
            "attribute `pad_mode` = \"{mode}\" is not one of constant, edge, reflect"
        )));
    }
    let out: Vec<i64> = s
        .iter()
        .enumerate()
        .map(|(i, &x)| x + w[2 * i] + w[2 * i + 1])
        .collect();
    if out.iter().any(|&x| x < 0) {
        return Err(ctx.err(format!("padding {w:?} makes {s:?} negative")));
    }
    Ok(Type::tensor(&out, d))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("nn.pad", &["data"], OpPattern::Injective, rel).attrs(vec![
            AttrSpec::new("pad_width", AttrKind::Ints, Vec::<i64>::new()),
            AttrSpec::new("pad_value", AttrKind::Float, 0.0),
            AttrSpec::new("pad_mode", AttrKind::Str, "constant"),
        ]),
    );
}
