//! `topk(data, k, axis=-1, largest=true)` (ONNX `TopK` with a constant `k`): a tuple of the
//! `k` largest (or smallest) elements along `axis`, best first, and their `int64` indices;
//! equal elements come in the order of their indices. Both have the data's shape with the
//! axis cut to `k`. (ONNX's `sorted = 0` allows any order; this order is one of them.) A `k`
//! of -1 is known only at run time (ONNX `TopK` with a run-time `K`): the kernel binds it from
//! the results it is given.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, normalize_axis, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::{DataType, Result};
use kiln_te::Tensor as TeTensor;
use kiln_tir::{CpuDesc, DataTypeExt};

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = ctx.tensor(0)?;
    if dt.is_bool() {
        return Err(ctx.err("argument `data` must be numbers, got bool"));
    }
    let axis = normalize_axis(ctx.attrs.int("axis")?, d.len()).map_err(|m| ctx.err(m))?;
    let k = ctx.attrs.int("k")?;
    if k < -1 || (k >= 0 && d[axis] >= 0 && k > d[axis]) {
        return Err(ctx.err(format!(
            "attribute `k` = {k} must be in [0, {}] (the extent of axis {axis}), or -1",
            d[axis]
        )));
    }
    let mut s = d.to_vec();
    s[axis] = k.max(-1);
    Ok(Type::tuple(vec![
        Type::tensor(&s, dt),
        Type::tensor(&s, DataType::int(64)),
    ]))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    kiln_topi::reduce::topk(
        input("topk", i, 0)?,
        a.int("k")?,
        a.int("axis")?,
        a.bool("largest")?,
    )
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    // Opaque: ranks, a selection and a gather in three stages (see the TOPI compute).
    v.push(
        OpDef::new("topk", &["data"], OpPattern::Opaque, rel)
            .attrs(vec![
                AttrSpec::new("k", AttrKind::Int, 1),
                AttrSpec::new("axis", AttrKind::Int, -1),
                AttrSpec::new("largest", AttrKind::Bool, true),
            ])
            .compute(lower),
    );
}
