//! `sum / mean / max / min / prod / argmax / argmin (data, axis=None, keepdims=False,
//! exclude=False)`: one relation for the family. `axis` unset reduces every axis; `exclude`
//! reduces the axes *not* listed. argmax / argmin return `int64` indices (ONNX's).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, input, normalize_axis, one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::{DataType, Result};
use kiln_runtime::tensor::Tensor;
use kiln_te::Tensor as TeTensor;
use kiln_topi::reduce;

/// The reduced axes (sorted, unique) of a reduction call on a tensor of rank `ndim`.
pub fn reduced_axes(
    attrs: crate::ir::Attrs<'_>,
    ndim: usize,
) -> std::result::Result<Vec<usize>, String> {
    let axes = attrs.opt_ints("axis").map_err(|e| e.message())?;
    let exclude = attrs.bool("exclude").unwrap_or(false);
    let mut listed = match axes {
        None => (0..ndim).collect::<Vec<_>>(),
        Some(a) => a
            .iter()
            .map(|&x| normalize_axis(x, ndim))
            .collect::<std::result::Result<Vec<_>, _>>()?,
    };
    listed.sort();
    listed.dedup();
    if exclude {
        Ok((0..ndim).filter(|i| !listed.contains(i)).collect())
    } else {
        Ok(listed)
    }
}

fn out_shape(ctx: &RelCtx<'_>) -> Result<Vec<i64>> {
    let (s, _) = ctx.tensor(0)?;
    let axes = reduced_axes(ctx.attrs, s.len()).map_err(|m| ctx.err(m))?;
    let keep = ctx.attrs.bool("keepdims")?;
    Ok(s.iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keep) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(d),
        })
        .collect())
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    Ok(Type::tensor(&out_shape(ctx)?, ctx.tensor(0)?.1))
}

/// Indices are int64, as ONNX prescribes and the TOPI kernels write.
fn arg_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    Ok(Type::tensor(&out_shape(ctx)?, DataType::int(64)))
}

/// Reference reduction: folds each output element's group with `f` then `fin(acc, count)`.
fn reduce_eval(
    a: &[Tensor],
    attrs: crate::ir::Attrs<'_>,
    ty: &Type,
    init: f64,
    f: fn(f64, f64) -> f64,
    fin: fn(f64, usize) -> f64,
) -> Result<Tensor> {
    let shape = a[0].shape().to_vec();
    let axes = reduced_axes(attrs, shape.len()).map_err(kiln_ffi::Error::value_error)?;
    let vals = eval::values(&a[0])?;
    let n_out: i64 = ty.shape().iter().product();
    let mut acc = vec![init; n_out as usize];
    let mut cnt = vec![0usize; n_out as usize];
    let mut flat = 0usize;
    eval::for_each_index(&shape, |idx| {
        let mut o = 0usize;
        for (i, &d) in shape.iter().enumerate() {
            if !axes.contains(&i) {
                o = o * d as usize + idx[i] as usize;
            }
        }
        acc[o] = f(acc[o], vals[flat]);
        cnt[o] += 1;
        flat += 1;
    });
    let out: Vec<f64> = acc.iter().zip(&cnt).map(|(&x, &c)| fin(x, c)).collect();
    eval::make(&out, ty)
}

fn attrs() -> Vec<AttrSpec> {
    vec![
        AttrSpec::optional("axis", AttrKind::Ints),
        AttrSpec::new("keepdims", AttrKind::Bool, false),
        AttrSpec::new("exclude", AttrKind::Bool, false),
    ]
}

/// A TOPI reduction over the call's reduced axes.
type TopiReduce = fn(&TeTensor, Option<&[i64]>, bool) -> Result<TeTensor>;

/// The lowering of the reduction `op` by `f`.
fn lower_with(op: &str, i: &[TeTensor], a: &Attrs<'_>, f: TopiReduce) -> Result<Vec<TeTensor>> {
    let x = input(op, i, 0)?;
    let axes: Vec<i64> = reduced_axes(*a, x.ndim())
        .map_err(kiln_ffi::Error::value_error)?
        .into_iter()
        .map(|d| d as i64)
        .collect();
    one(f(x, Some(&axes), a.bool("keepdims")?))
}

/// The lowering of `argmax` / `argmin` (`max`: which) over the first listed axis.
fn lower_arg(op: &str, i: &[TeTensor], a: &Attrs<'_>, max: bool) -> Result<Vec<TeTensor>> {
    let x = input(op, i, 0)?;
    let axis = a.opt_ints("axis")?.and_then(|v| v.first().copied());
    let keep = a.bool("keepdims")?;
    one(reduce::arg_extreme(
        x,
        axis,
        keep,
        max,
        a.bool("select_last_index")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    let mk = |name, rel| OpDef::new(name, &["data"], OpPattern::CommReduce, rel).attrs(attrs());
    v.push(
        mk("sum", rel)
            .eval(|a, at, ty| reduce_eval(a, at, ty, 0.0, |x, y| x + y, |x, _| x))
            .compute(|i, a, _| lower_with("sum", i, a, reduce::sum)),
    );
    v.push(
        mk("mean", rel)
            .eval(|a, at, ty| reduce_eval(a, at, ty, 0.0, |x, y| x + y, |x, c| x / c as f64))
            .compute(|i, a, _| lower_with("mean", i, a, reduce::mean)),
    );
    v.push(
        mk("max", rel)
            .eval(|a, at, ty| reduce_eval(a, at, ty, f64::NEG_INFINITY, f64::max, |x, _| x))
            .compute(|i, a, _| lower_with("max", i, a, reduce::max)),
    );
    v.push(
        mk("min", rel)
            .eval(|a, at, ty| reduce_eval(a, at, ty, f64::INFINITY, f64::min, |x, _| x))
            .compute(|i, a, _| lower_with("min", i, a, reduce::min)),
    );
    v.push(
        mk("prod", rel)
            .eval(|a, at, ty| reduce_eval(a, at, ty, 1.0, |x, y| x * y, |x, _| x))
            .compute(|i, a, _| lower_with("prod", i, a, reduce::prod)),
    );
    let mk_arg = |name| {
        let mut at = attrs();
        at.push(AttrSpec::new("select_last_index", AttrKind::Bool, false));
        OpDef::new(name, &["data"], OpPattern::CommReduce, arg_rel).attrs(at)
    };
    v.push(mk_arg("argmax").compute(|i, a, _| lower_arg("argmax", i, a, true)));
    v.push(mk_arg("argmin").compute(|i, a, _| lower_arg("argmin", i, a, false)));
}
