//! `nn.dense(data, weight)`: `data [..., K] x weight [N, K]^T -> [..., N]`; the weight may be
//! packed `[ceil(N/b), K, b]` (AlterOpLayout), `units` then giving `N`. An integer weight under
//! float data is converted on each read (weight-only quantization, `KeepQuantizedWeights`).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one};
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn;
use kiln_topi::schedule::x86;

/// The weight's `[N, K]`, whether plain or packed `[ceil(N/b), K, b]` (`N` = `units`).
fn weight_nk(ctx: &RelCtx<'_>) -> Result<[i64; 2]> {
    let (w, _) = ctx.tensor(1)?;
    match *w {
        [n, k] => Ok([n, k]),
        [nb, k, b] => {
            let n = ctx.attrs.opt_int("units")?.unwrap_or(nb * b);
            if b < 1 || (n + b - 1) / b != nb {
                return Err(ctx.err(format!(
                    "packed `weight` [{nb}, {k}, {b}] does not hold `units`={n}"
                )));
            }
            Ok([n, k])
        }
        _ => Err(ctx.err(format!(
            "argument `weight` must be [units, in_features] or packed [blocks, in_features, block], got {w:?}"
        ))),
    }
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, _) = ctx.tensor(0)?;
    let w = weight_nk(ctx)?;
    let dt = ctx.product_dtype(0, 1)?;
    if d.is_empty() {
        return Err(ctx.err("argument `data` must have rank >= 1"));
    }
    let k = d[d.len() - 1];
    if w[1] != k {
        return Err(ctx.err(format!(
            "argument `weight` has reduction dimension {} but `data` has {k} (weight is [units, in_features])",
            w[1]
        )));
    }
    if let Some(u) = ctx.attrs.opt_int("units")? {
        if u != w[0] {
            return Err(ctx.err(format!(
                "attribute `units`={u} but `weight` has {} rows",
                w[0]
            )));
        }
    }
    let mut s = d.to_vec();
    *s.last_mut().unwrap() = w[0];
    Ok(Type::tensor(&s, dt))
}

/// The lowering: the packed-weight compute for an `NK{b}n` weight, else the plain one.
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let (data, weight) = (input("nn.dense", i, 0)?, input("nn.dense", i, 1)?);
    if weight.ndim() == 3 {
        one(nn::dense_packed(
            data,
            weight,
            a.opt_int("units")?,
            i.get(2),
        ))
    } else {
        one(nn::dense(data, weight, i.get(2)))
    }
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "nn.dense",
            &["data", "weight"],
            OpPattern::OutEWiseFusable,
            rel,
        )
        .attrs(vec![AttrSpec::optional("units", AttrKind::Int)])
        .compute(lower)
        .schedule(x86::schedule_dense),
    );
}
