//! `squeeze(data, axis=None)`: removes the listed unit axes (all unit axes when unset).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, normalize_axis, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::transform as tf;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let axes: Vec<usize> = match ctx.attrs.opt_ints("axis")? {
        None => (0..s.len()).filter(|&i| s[i] == 1).collect(),
        Some(a) => {
            let mut v = Vec::new();
            for x in a {
                let i = normalize_axis(x, s.len()).map_err(|m| ctx.err(m))?;
                if s[i] != 1 {
                    return Err(ctx.err(format!("axis {x} has extent {}, not 1", s[i])));
                }
                v.push(i);
            }
            v
        }
    };
    let out: Vec<i64> = (0..s.len())
        .filter(|i| !axes.contains(i))
        .map(|i| s[i])
        .collect();
    Ok(Type::tensor(&out, d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(tf::squeeze(
        input("squeeze", i, 0)?,
        a.opt_ints("axis")?.as_deref(),
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("squeeze", &["data"], OpPattern::Injective, rel)
            .attrs(vec![AttrSpec::optional("axis", AttrKind::Ints)])
            .eval(|a, _, ty| eval::same_data(a, ty))
            .view()
            .compute(lower),
    );
}
