//! `reshape(data, newshape)`: `0` copies the input extent at that position, one `-1` is
//! inferred (ONNX / TVM rules).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::transform as tf;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let ns = ctx.attrs.ints("newshape")?;
    let total: i64 = s.iter().product();
    let mut out = Vec::with_capacity(ns.len());
    let mut infer = None;
    for (i, &x) in ns.iter().enumerate() {
        match x {
            0 => out.push(*s.get(i).ok_or_else(|| {
                ctx.err(format!("newshape {ns:?}: 0 at {i} has no input extent"))
            })?),
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            x if x > 0 => out.push(x),
            _ => return Err(ctx.err(format!("newshape {ns:?} has an invalid value {x}"))),
        }
    }
    let known = out
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| ctx.err(format!("newshape {ns:?} has too many elements")))?;
    if let Some(i) = infer {
        if known == 0 || total % known != 0 {
            return Err(ctx.err(format!("cannot reshape {s:?} ({total} elements) to {ns:?}")));
        }
        out[i] = total / known;
    } else if known != total {
        return Err(ctx.err(format!(
            "cannot reshape {s:?} ({total} elements) to {ns:?} ({known} elements)"
        )));
    }
    Ok(Type::tensor(&out, d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(tf::reshape(input("reshape", i, 0)?, &a.ints("newshape")?))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("reshape", &["data"], OpPattern::Injective, rel)
            .attrs(vec![AttrSpec::new(
                "newshape",
                AttrKind::Ints,
                Vec::<i64>::new(),
            )])
            .eval(|a, _, ty| eval::same_data(a, ty))
            .view()
            .compute(lower),
    );
}
