//! `nn.batch_flatten(data)`: `[N, ...] -> [N, prod(...)]`; `flatten(data, axis=1)` (ONNX):
//! `[prod(dims[..axis]), prod(dims[axis..])]`.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::transform as tf;

fn batch_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    if s.is_empty() {
        return Err(ctx.err("argument `data` must have rank >= 1"));
    }
    Ok(Type::tensor(&[s[0], s[1..].iter().product()], d))
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let mut axis = ctx.attrs.int("axis")?;
    if axis < 0 {
        axis += s.len() as i64;
    }
    if axis < 0 || axis > s.len() as i64 {
        return Err(ctx.err(format!(
            "axis {} is out of range for rank {}",
            ctx.attrs.int("axis")?,
            s.len()
        )));
    }
    let (a, b) = s.split_at(axis as usize);
    Ok(Type::tensor(&[a.iter().product(), b.iter().product()], d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(tf::flatten(input("flatten", i, 0)?, a.int("axis")?))
}

/// The lowering (TOPI compute).
fn lower_batch(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let _ = a;
    one(tf::flatten(input("nn.batch_flatten", i, 0)?, 1))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "nn.batch_flatten",
            &["data"],
            OpPattern::Injective,
            batch_rel,
        )
        .eval(|a, _, ty| eval::same_data(a, ty))
        .view()
        .compute(lower_batch),
    );
    v.push(
        OpDef::new("flatten", &["data"], OpPattern::Injective, rel)
            .attrs(vec![AttrSpec::new("axis", AttrKind::Int, 1)])
            .eval(|a, _, ty| eval::same_data(a, ty))
            .view()
            .compute(lower),
    );
}
