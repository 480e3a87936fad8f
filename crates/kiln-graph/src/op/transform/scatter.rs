//! The scatter operators, with attribute `reduction` (`none`, `add`, `mul`, `max`, `min`):
//!
//! - `scatter_elements(data, indices, updates, axis=0)` (ONNX `ScatterElements`, `Scatter`):
//!   `updates[u]` goes to `data[u with u[axis] = indices[u]]`;
//! - `scatter_nd(data, indices, updates)` (ONNX `ScatterND`): `updates[m]` goes to the slice
//!   `data[indices[m]]` (the last axis of `indices` holds coordinates into the data's first
//!   axes).
//!
//! The output has the data's shape and dtype. Updates apply in row-major order: with a
//! reduction every update combines with what is there; without one the last write wins.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, input, normalize_axis, one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::{Error, Result};
use kiln_runtime::tensor::Tensor;
use kiln_te::Tensor as TeTensor;
use kiln_tir::{CpuDesc, DataTypeExt};
use kiln_topi::schedule::generic::schedule_reduce_stages;
use kiln_topi::transform::{self as tf, ScatterReduction};

fn reduction(a: &Attrs<'_>) -> Result<ScatterReduction> {
    ScatterReduction::parse(&a.str("reduction")?)
}

/// Checks what both operators share: integer indices, updates of the data's dtype and the
/// reduction's name; returns the data's shape and dtype.
fn common<'a>(ctx: &'a RelCtx<'_>) -> Result<(&'a [i64], kiln_ffi::DataType)> {
    let (d, dt) = ctx.tensor(0)?;
    let it = ctx.tensor(1)?.1;
    if !it.is_integer() {
        return Err(ctx.err(format!("argument `indices` must be integers, got {it}")));
    }
    ctx.same_dtype(0, 2)?;
    reduction(&ctx.attrs).map_err(|e| ctx.err(e.message()))?;
    Ok((d, dt))
}

fn elements_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = common(ctx)?;
    let (ix, u) = (ctx.tensor(1)?.0, ctx.tensor(2)?.0);
    if ix != u {
        return Err(ctx.err(format!(
            "arguments `indices` {ix:?} and `updates` {u:?} must have one shape"
        )));
    }
    if ix.len() != d.len() || ix.iter().zip(d).any(|(i, n)| i > n) {
        return Err(ctx.err(format!(
            "argument `indices` {ix:?} must have the rank of `data` {d:?} and no larger extents"
        )));
    }
    normalize_axis(ctx.attrs.int("axis")?, d.len()).map_err(|m| ctx.err(m))?;
    Ok(Type::tensor(d, dt))
}

fn nd_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = common(ctx)?;
    let (ix, u) = (ctx.tensor(1)?.0, ctx.tensor(2)?.0);
    let k = ix.last().copied().unwrap_or(0);
    if ix.is_empty() || k < 1 || k as usize > d.len() {
        return Err(ctx.err(format!(
            "the last axis of `indices` {ix:?} must hold 1 to {} coordinates (the rank of `data`)",
            d.len()
        )));
    }
    let mut want = ix[..ix.len() - 1].to_vec();
    want.extend_from_slice(&d[k as usize..]);
    if u != want.as_slice() {
        return Err(ctx.err(format!(
            "argument `updates` has shape {u:?}, expected {want:?} (indices.shape[..-1] ++ data.shape[{k}..])"
        )));
    }
    Ok(Type::tensor(d, dt))
}

/// `v` combined into `acc` under `r`.
fn combine(r: ScatterReduction, acc: f64, v: f64) -> f64 {
    match r {
        ScatterReduction::None => v,
        ScatterReduction::Add => acc + v,
        ScatterReduction::Mul => acc * v,
        ScatterReduction::Max => acc.max(v),
        ScatterReduction::Min => acc.min(v),
    }
}

/// A coordinate read from `indices`, negative ones counted from the end of an axis of `n`.
fn coordinate(i: f64, n: i64) -> Result<i64> {
    let i = i as i64;
    let w = if i < 0 { i + n } else { i };
    if !(0..n).contains(&w) {
        return Err(Error::value_error(format!(
            "index {i} is out of range for an axis of extent {n}"
        )));
    }
    Ok(w)
}

/// The reference evaluator of `scatter_elements`.
fn eval_elements(args: &[Tensor], a: Attrs<'_>, ty: &Type) -> Result<Tensor> {
    let d = args[0].shape();
    let axis = normalize_axis(a.int("axis")?, d.len()).map_err(Error::value_error)?;
    let r = reduction(&a)?;
    let mut out = eval::values(&args[0])?;
    let (ix, up) = (eval::values(&args[1])?, eval::values(&args[2])?);
    let st = eval::strides(d);
    let mut k = 0usize;
    let mut res = Ok(());
    eval::for_each_index(args[1].shape(), |u| {
        let mut t = u.to_vec();
        match coordinate(ix[k], d[axis]) {
            Ok(c) => t[axis] = c,
            Err(e) => res = Err(e),
        }
        let f = eval::flat(&t, &st);
        out[f] = combine(r, out[f], up[k]);
        k += 1;
    });
    res?;
    eval::make(&out, ty)
}

/// The reference evaluator of `scatter_nd`.
fn eval_nd(args: &[Tensor], a: Attrs<'_>, ty: &Type) -> Result<Tensor> {
    let (d, ishape) = (args[0].shape(), args[1].shape());
    let k = ishape[ishape.len() - 1] as usize;
    let r = reduction(&a)?;
    let mut out = eval::values(&args[0])?;
    let (ix, up) = (eval::values(&args[1])?, eval::values(&args[2])?);
    let slice: usize = d[k..].iter().product::<i64>() as usize;
    let st = eval::strides(d);
    for (m, tuple) in ix.chunks(k).enumerate() {
        let mut base = 0usize;
        for (j, &c) in tuple.iter().enumerate() {
            base += coordinate(c, d[j])? as usize * st[j] as usize;
        }
        for s in 0..slice {
            out[base + s] = combine(r, out[base + s], up[m * slice + s]);
        }
    }
    eval::make(&out, ty)
}

fn lower_elements(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let x = |k| input("scatter_elements", i, k);
    one(tf::scatter_elements(
        x(0)?,
        x(1)?,
        x(2)?,
        a.int("axis")?,
        reduction(a)?,
    ))
}

fn lower_nd(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let x = |k| input("scatter_nd", i, k);
    one(tf::scatter_nd(x(0)?, x(1)?, x(2)?, reduction(a)?))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    let args: &[&str] = &["data", "indices", "updates"];
    let red = || AttrSpec::new("reduction", AttrKind::Str, "none");
    // Opaque: each output point reduces over update positions (two stages, see the TOPI
    // compute), which the injective schedule of a fused group could not take; the generic
    // reduction schedule runs both stages in parallel over their points.
    v.push(
        OpDef::new("scatter_elements", args, OpPattern::Opaque, elements_rel)
            .attrs(vec![AttrSpec::new("axis", AttrKind::Int, 0), red()])
            .eval(eval_elements)
            .compute(lower_elements)
            .schedule(schedule_reduce_stages),
    );
    v.push(
        OpDef::new("scatter_nd", args, OpPattern::Opaque, nd_rel)
            .attrs(vec![red()])
            .eval(eval_nd)
            .compute(lower_nd)
            .schedule(schedule_reduce_stages),
    );
}
