//! `trilu(data, upper=true, k=0)` (ONNX `Trilu`): the upper or lower triangle of the last two
//! axes, the rest zero.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, input, one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_runtime::tensor::Tensor;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, _) = ctx.tensor(0)?;
    if s.len() < 2 {
        return Err(ctx.err(format!("argument `data` must have rank >= 2, got {s:?}")));
    }
    Ok(ctx.args[0].clone())
}

/// The reference evaluator.
fn evaluate(args: &[Tensor], a: Attrs<'_>, ty: &Type) -> Result<Tensor> {
    let (upper, k) = (a.bool("upper")?, a.int("k")?);
    let vals = eval::values(&args[0])?;
    let shape = ty.shape().to_vec();
    let r = shape.len();
    let mut out = Vec::with_capacity(vals.len());
    let mut flat = 0usize;
    eval::for_each_index(&shape, |idx| {
        let d = idx[r - 1] - idx[r - 2];
        let keep = if upper { d >= k } else { d <= k };
        out.push(if keep { vals[flat] } else { 0.0 });
        flat += 1;
    });
    eval::make(&out, ty)
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(kiln_topi::transform::trilu(
        input("trilu", i, 0)?,
        a.bool("upper")?,
        a.int("k")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("trilu", &["data"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::new("upper", AttrKind::Bool, true),
                AttrSpec::new("k", AttrKind::Int, 0),
            ])
            .eval(evaluate)
            .compute(lower),
    );
}
