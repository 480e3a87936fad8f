//! `gather_elements(data, indices, axis=0)` (ONNX `GatherElements`): `out[i] = data[i with
//! i[axis] = indices[i]]`, the shape of `indices`.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, input, normalize_axis, one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::{Error, Result};
use kiln_runtime::tensor::Tensor;
use kiln_te::Tensor as TeTensor;
use kiln_tir::{CpuDesc, DataTypeExt};

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = ctx.tensor(0)?;
    let (ix, it) = ctx.tensor(1)?;
    if !it.is_integer() {
        return Err(ctx.err(format!("argument `indices` must be integers, got {it}")));
    }
    if ix.len() != d.len() {
        return Err(ctx.err(format!(
            "argument `indices` has rank {} but `data` has rank {}",
            ix.len(),
            d.len()
        )));
    }
    let axis = normalize_axis(ctx.attrs.int("axis")?, d.len()).map_err(|m| ctx.err(m))?;
    // No index is in range of an empty axis (clipping has nothing to clip to).
    if d[axis] == 0 && ix.iter().all(|&k| k > 0) {
        return Err(ctx.err(format!(
            "cannot gather {ix:?} indices from the empty axis {axis} of data {d:?}"
        )));
    }
    Ok(Type::tensor(ix, dt))
}

/// The reference evaluator.
fn evaluate(args: &[Tensor], a: Attrs<'_>, ty: &Type) -> Result<Tensor> {
    let (d, ix) = (&args[0], eval::values(&args[1])?);
    let axis = normalize_axis(a.int("axis")?, d.ndim()).map_err(Error::value_error)?;
    let vals = eval::values(d)?;
    let n = d.shape()[axis];
    let st = eval::strides(d.shape());
    let mut out = Vec::with_capacity(ix.len());
    let mut flat = 0usize;
    eval::for_each_index(ty.shape(), |o| {
        let i = ix[flat] as i64;
        let i = if i < 0 { i + n } else { i }.clamp(0, n - 1);
        let mut src = o.to_vec();
        src[axis] = i;
        out.push(vals[eval::flat(&src, &st)]);
        flat += 1;
    });
    eval::make(&out, ty)
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let x = |k| input("gather_elements", i, k);
    one(kiln_topi::transform::gather_elements(
        x(0)?,
        x(1)?,
        a.int("axis")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "gather_elements",
            &["data", "indices"],
            OpPattern::Injective,
            rel,
        )
        .attrs(vec![AttrSpec::new("axis", AttrKind::Int, 0)])
        .eval(evaluate)
        .compute(lower),
    );
}
