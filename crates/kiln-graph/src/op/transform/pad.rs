//! `nn.pad(data, pad_width, pad_value=0, pad_mode="constant")`; `pad_width` is flat:
//! `[before_0, after_0, before_1, after_1, ...]` (negative values crop).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one};
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::transform as tf;

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
    if !["constant", "edge", "reflect", "wrap"].contains(&mode.as_str()) {
        return Err(ctx.err(format!(
            "attribute `pad_mode` = \"{mode}\" is not one of constant, edge, reflect, wrap"
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

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let w = a.ints("pad_width")?;
    let before: Vec<i64> = w.iter().step_by(2).copied().collect();
    let after: Vec<i64> = w.iter().skip(1).step_by(2).copied().collect();
    let mode = match a.str("pad_mode")?.as_str() {
        "edge" => tf::PadMode::Edge,
        "reflect" => tf::PadMode::Reflect,
        "wrap" => tf::PadMode::Wrap,
        _ => tf::PadMode::Constant(a.float("pad_value")?),
    };
    one(tf::pad(input("nn.pad", i, 0)?, &before, &after, mode))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("nn.pad", &["data"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::new("pad_width", AttrKind::Ints, Vec::<i64>::new()),
                AttrSpec::new("pad_value", AttrKind::Float, 0.0),
                AttrSpec::new("pad_mode", AttrKind::Str, "constant"),
            ])
            .compute(lower),
    );
}
