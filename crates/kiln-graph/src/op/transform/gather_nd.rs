//! `gather_nd(data, indices, batch_dims=0)` (ONNX `GatherND`): the last axis of `indices`
//! holds index tuples into the axes of `data` after its first `batch_dims` axes (which
//! `indices` shares); the result has shape `indices.shape[..-1] ++ data.shape[batch_dims + k..]`.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, input, one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_runtime::tensor::Tensor;
use kiln_te::Tensor as TeTensor;
use kiln_tir::{CpuDesc, DataTypeExt};

/// The result shape, or a message naming what does not fit.
fn out_shape(d: &[i64], ix: &[i64], b: i64) -> std::result::Result<Vec<i64>, String> {
    let q = ix.len();
    if b < 0 || b as usize >= q.min(d.len()) {
        return Err(format!(
            "attribute `batch_dims` = {b} must be in [0, min(rank of data {}, rank of indices {q}))",
            d.len()
        ));
    }
    let b = b as usize;
    let k = ix[q - 1];
    if k < 1 || b + k as usize > d.len() {
        return Err(format!(
            "index tuples of length {k} (last axis of `indices`) after {b} batch axes do not fit data of rank {}",
            d.len()
        ));
    }
    if d[..b] != ix[..b] {
        return Err(format!(
            "the {b} batch axes of `data` {:?} and `indices` {:?} differ",
            &d[..b],
            &ix[..b]
        ));
    }
    // No index tuple is in range of data with an empty indexed axis.
    if d[b..b + k as usize].contains(&0) && ix[..q - 1].iter().all(|&n| n > 0) {
        return Err(format!(
            "cannot gather index tuples from data {d:?}, whose indexed axes {:?} are empty",
            &d[b..b + k as usize]
        ));
    }
    let mut s = ix[..q - 1].to_vec();
    s.extend_from_slice(&d[b + k as usize..]);
    Ok(s)
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = ctx.tensor(0)?;
    let (ix, it) = ctx.tensor(1)?;
    if !it.is_integer() {
        return Err(ctx.err(format!("argument `indices` must be integers, got {it}")));
    }
    if ix.is_empty() {
        return Err(ctx.err("argument `indices` must have rank 1 or more"));
    }
    let s = out_shape(d, ix, ctx.attrs.int("batch_dims")?).map_err(|m| ctx.err(m))?;
    Ok(Type::tensor(&s, dt))
}

/// The reference evaluator.
fn evaluate(args: &[Tensor], a: Attrs<'_>, ty: &Type) -> Result<Tensor> {
    let (d, ix) = (args[0].shape(), args[1].shape());
    let b = a.int("batch_dims")? as usize;
    let (q, k) = (ix.len(), ix[ix.len() - 1] as usize);
    let (vals, idx) = (eval::values(&args[0])?, eval::values(&args[1])?);
    let (ds, is) = (eval::strides(d), eval::strides(ix));
    let mut out = Vec::new();
    eval::for_each_index(ty.shape(), |o| {
        let mut src = o[..b].to_vec();
        let mut at = o[..q - 1].to_vec();
        at.push(0);
        for j in 0..k {
            at[q - 1] = j as i64;
            let n = d[b + j];
            let i = idx[eval::flat(&at, &is)] as i64;
            src.push(if i < 0 { i + n } else { i }.clamp(0, n - 1));
        }
        src.extend_from_slice(&o[q - 1..]);
        out.push(vals[eval::flat(&src, &ds)]);
    });
    eval::make(&out, ty)
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let x = |k| input("gather_nd", i, k);
    one(kiln_topi::transform::gather_nd(
        x(0)?,
        x(1)?,
        a.int("batch_dims")? as usize,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("gather_nd", &["data", "indices"], OpPattern::Injective, rel)
            .attrs(vec![AttrSpec::new("batch_dims", AttrKind::Int, 0)])
            .eval(evaluate)
            .compute(lower),
    );
}
