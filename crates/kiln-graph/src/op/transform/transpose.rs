//! `transpose(data, axes=None)`: permutes axes (reverses them when unset).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, normalize_axis, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::transform as tf;

/// The permutation of a transpose call on a tensor of rank `ndim`.
pub fn perm(attrs: crate::ir::Attrs<'_>, ndim: usize) -> std::result::Result<Vec<usize>, String> {
    let p: Vec<usize> = match attrs.opt_ints("axes").map_err(|e| e.message())? {
        None => (0..ndim).rev().collect(),
        Some(a) => a
            .iter()
            .map(|&x| normalize_axis(x, ndim))
            .collect::<std::result::Result<_, _>>()?,
    };
    let mut seen = p.clone();
    seen.sort();
    if seen != (0..ndim).collect::<Vec<_>>() {
        return Err(format!("axes {p:?} are not a permutation of 0..{ndim}"));
    }
    Ok(p)
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let p = perm(ctx.attrs, s.len()).map_err(|m| ctx.err(m))?;
    Ok(Type::tensor(
        &p.iter().map(|&i| s[i]).collect::<Vec<_>>(),
        d,
    ))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(tf::transpose(
        input("transpose", i, 0)?,
        a.opt_ints("axes")?.as_deref(),
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("transpose", &["data"], OpPattern::Injective, rel)
            .attrs(vec![AttrSpec::optional("axes", AttrKind::Ints)])
            .eval(|a, attrs, ty| {
                let s = a[0].shape().to_vec();
                let p = perm(attrs, s.len()).map_err(kiln_ffi::Error::value_error)?;
                let vals = eval::values(&a[0])?;
                let strides = kiln_runtime::tensor::layout::compact_strides(&s);
                let mut out = Vec::with_capacity(vals.len());
                eval::for_each_index(ty.shape(), |idx| {
                    let src: i64 = idx
                        .iter()
                        .enumerate()
                        .map(|(k, &i)| i * strides[p[k]])
                        .sum();
                    out.push(vals[src as usize]);
                });
                eval::make(&out, ty)
            })
            .compute(lower),
    );
}
