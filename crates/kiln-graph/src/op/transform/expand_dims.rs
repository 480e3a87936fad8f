//! `expand_dims(data, axis, num_newaxis=1)`: inserts unit axes at `axis` (in `[-ndim-1, ndim]`).

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
    let axis = normalize_axis(ctx.attrs.int("axis")?, s.len() + 1).map_err(|m| ctx.err(m))?;
    let n = ctx.attrs.int("num_newaxis")?;
    if n < 0 {
        return Err(ctx.err(format!("attribute `num_newaxis` must be >= 0, got {n}")));
    }
    let mut out = s[..axis].to_vec();
    out.extend(std::iter::repeat_n(1, n as usize));
    out.extend_from_slice(&s[axis..]);
    Ok(Type::tensor(&out, d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(tf::expand_dims(
        input("expand_dims", i, 0)?,
        a.int("axis")?,
        a.int("num_newaxis")? as usize,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("expand_dims", &["data"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::new("axis", AttrKind::Int, 0),
                AttrSpec::new("num_newaxis", AttrKind::Int, 1),
            ])
            .eval(|a, _, ty| eval::same_data(a, ty))
            .view()
            .compute(lower),
    );
}
