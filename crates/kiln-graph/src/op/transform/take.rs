//! `take(data, indices, axis=None, mode="clip")`: gather along `axis` (ONNX Gather); without
//! `axis` the data is flattened first.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, normalize_axis, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::{Error, Result};
use kiln_runtime::tensor::Tensor;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_tir::DataTypeExt;
use kiln_topi::transform as tf;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let (ix, id) = ctx.tensor(1)?;
    if !id.is_integer() {
        return Err(ctx.err(format!(
            "argument `indices` must be an integer tensor, got {id}"
        )));
    }
    let mode = ctx.attrs.str("mode")?;
    if !["clip", "wrap", "fast"].contains(&mode.as_str()) {
        return Err(ctx.err(format!(
            "attribute `mode` = \"{mode}\" is not clip, wrap or fast"
        )));
    }
    let (out, n) = match ctx.attrs.opt_int("axis")? {
        None => (ix.to_vec(), s.iter().product::<i64>()),
        Some(a) => {
            let a = normalize_axis(a, s.len()).map_err(|m| ctx.err(m))?;
            let mut o = s[..a].to_vec();
            o.extend_from_slice(ix);
            o.extend_from_slice(&s[a + 1..]);
            (o, s[a])
        }
    };
    // No index is in range of an empty axis (clipping has nothing to clip to).
    if n == 0 && ix.iter().all(|&k| k > 0) {
        return Err(ctx.err(format!(
            "cannot take {ix:?} indices from an empty axis of data {s:?}"
        )));
    }
    Ok(Type::tensor(&out, d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let axis = a.opt_int("axis")?.ok_or_else(|| {
        kiln_ffi::Error::value_error("take: only an explicit `axis` is supported")
    })?;
    one(tf::take(input("take", i, 0)?, input("take", i, 1)?, axis))
}

/// The reference evaluator: `data` indexed along `axis` by `indices` (clipped, negative
/// indices counting from the end).
fn evaluate(args: &[Tensor], a: Attrs<'_>, ty: &Type) -> Result<Tensor> {
    let (d, ix) = (&args[0], eval::values(&args[1])?);
    let axis = a
        .opt_int("axis")?
        .ok_or_else(|| Error::value_error("take: only an explicit `axis` is evaluated"))?;
    let axis = normalize_axis(axis, d.ndim()).map_err(Error::value_error)?;
    let vals = eval::values(d)?;
    let n = d.shape()[axis];
    let (st, ist) = (eval::strides(d.shape()), eval::strides(args[1].shape()));
    let ir = args[1].ndim();
    let mut out = Vec::new();
    eval::for_each_index(ty.shape(), |o| {
        let i = ix[eval::flat(&o[axis..axis + ir], &ist)] as i64;
        let i = if i < 0 { i + n } else { i }.clamp(0, n - 1);
        let mut src = o[..axis].to_vec();
        src.push(i);
        src.extend_from_slice(&o[axis + ir..]);
        out.push(vals[eval::flat(&src, &st)]);
    });
    eval::make(&out, ty)
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("take", &["data", "indices"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::optional("axis", AttrKind::Int),
                AttrSpec::new("mode", AttrKind::Str, "clip"),
            ])
            .compute(lower)
            .eval(evaluate),
    );
}
