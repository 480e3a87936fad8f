//! `strided_slice(data, begin, end, strides=None, axes=None)`: numpy slicing with steps
//! (negative steps walk backwards; bounds clamp as in numpy / ONNX Slice).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, normalize_axis, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::{Error, Result};
use kiln_runtime::tensor::Tensor;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::transform as tf;

/// The extent of `begin:end:step` over an axis of extent `n` (numpy's rule).
pub fn slice_extent(n: i64, begin: i64, end: i64, step: i64) -> i64 {
    let norm = |x: i64, lo: i64, hi: i64| {
        let x = if x < 0 { x + n } else { x };
        x.clamp(lo, hi)
    };
    if step > 0 {
        let (b, e) = (norm(begin, 0, n), norm(end, 0, n));
        if e > b {
            (e - b + step - 1) / step
        } else {
            0
        }
    } else {
        let (b, e) = (norm(begin, -1, n - 1), norm(end, -1, n - 1));
        if b > e {
            (b - e + (-step) - 1) / (-step)
        } else {
            0
        }
    }
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let begin = ctx.attrs.ints("begin")?;
    let end = ctx.attrs.ints("end")?;
    let axes: Vec<usize> = match ctx.attrs.opt_ints("axes")? {
        Some(a) => a
            .iter()
            .map(|&x| normalize_axis(x, s.len()))
            .collect::<std::result::Result<_, _>>()
            .map_err(|m| ctx.err(m))?,
        None => (0..begin.len()).collect(),
    };
    let strides = ctx
        .attrs
        .opt_ints("strides")?
        .unwrap_or_else(|| vec![1; axes.len()]);
    if begin.len() != axes.len()
        || end.len() != axes.len()
        || strides.len() != axes.len()
        || axes.len() > s.len()
    {
        return Err(ctx.err(format!(
            "begin {begin:?}, end {end:?}, strides {strides:?} and axes {axes:?} must have one length <= rank {}",
            s.len()
        )));
    }
    let mut out = s.to_vec();
    for (k, &ax) in axes.iter().enumerate() {
        if strides[k] == 0 {
            return Err(ctx.err(format!("stride 0 on axis {ax}")));
        }
        out[ax] = slice_extent(s[ax], begin[k], end[k], strides[k]);
    }
    Ok(Type::tensor(&out, d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(tf::strided_slice(
        input("strided_slice", i, 0)?,
        &a.ints("begin")?,
        &a.ints("end")?,
        a.opt_ints("strides")?.as_deref(),
        a.opt_ints("axes")?.as_deref(),
    ))
}

/// The reference evaluator: the elements `begin + k * stride` along each listed axis.
fn evaluate(args: &[Tensor], a: Attrs<'_>, ty: &Type) -> Result<Tensor> {
    let d = &args[0];
    let rank = d.ndim();
    let begin = a.ints("begin")?;
    let axes: Vec<usize> = match a.opt_ints("axes")? {
        Some(v) => v
            .iter()
            .map(|&x| normalize_axis(x, rank))
            .collect::<std::result::Result<_, _>>()
            .map_err(Error::value_error)?,
        None => (0..begin.len()).collect(),
    };
    let steps = a
        .opt_ints("strides")?
        .unwrap_or_else(|| vec![1; axes.len()]);
    let mut b = vec![0i64; rank];
    let mut s = vec![1i64; rank];
    for (k, &ax) in axes.iter().enumerate() {
        let n = d.shape()[ax];
        let x = if begin[k] < 0 { begin[k] + n } else { begin[k] };
        let step = steps.get(k).copied().unwrap_or(1);
        b[ax] = if step > 0 {
            x.clamp(0, n)
        } else {
            x.clamp(-1, n - 1)
        };
        s[ax] = step;
    }
    let vals = eval::values(d)?;
    let st = eval::strides(d.shape());
    let mut out = Vec::new();
    eval::for_each_index(ty.shape(), |o| {
        let src: Vec<i64> = (0..rank).map(|i| b[i] + o[i] * s[i]).collect();
        out.push(vals[eval::flat(&src, &st)]);
    });
    eval::make(&out, ty)
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("strided_slice", &["data"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::new("begin", AttrKind::Ints, Vec::<i64>::new()),
                AttrSpec::new("end", AttrKind::Ints, Vec::<i64>::new()),
                AttrSpec::optional("strides", AttrKind::Ints),
                AttrSpec::optional("axes", AttrKind::Ints),
            ])
            .compute(lower)
            .eval(evaluate),
    );
}
