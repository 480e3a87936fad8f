//! `cumsum(data, axis=0, exclusive=false, reverse=false)` (ONNX `CumSum` with a constant
//! axis): the running sum along `axis`, of the data's shape and dtype; `exclusive` leaves
//! out the element itself, `reverse` sums from the end.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, input, normalize_axis, one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::{Error, Result};
use kiln_runtime::tensor::Tensor;
use kiln_te::Tensor as TeTensor;
use kiln_tir::{CpuDesc, DataTypeExt};

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = ctx.tensor(0)?;
    if dt.is_bool() {
        return Err(ctx.err("argument `data` must be numbers, got bool"));
    }
    normalize_axis(ctx.attrs.int("axis")?, d.len()).map_err(|m| ctx.err(m))?;
    Ok(Type::tensor(d, dt))
}

/// The reference evaluator: a sequential scan along the axis.
fn evaluate(args: &[Tensor], a: Attrs<'_>, ty: &Type) -> Result<Tensor> {
    let d = args[0].shape();
    let axis = normalize_axis(a.int("axis")?, d.len()).map_err(Error::value_error)?;
    let (exclusive, reverse) = (a.bool("exclusive")?, a.bool("reverse")?);
    let vals = eval::values(&args[0])?;
    let st = eval::strides(d);
    let n = d[axis];
    let mut out = vec![0.0; vals.len()];
    let mut row = d.to_vec();
    row[axis] = 1;
    eval::for_each_index(&row, |start| {
        let mut acc = 0.0;
        let mut at = start.to_vec();
        for step in 0..n {
            at[axis] = if reverse { n - 1 - step } else { step };
            let f = eval::flat(&at, &st);
            if exclusive {
                out[f] = acc;
                acc += vals[f];
            } else {
                acc += vals[f];
                out[f] = acc;
            }
        }
    });
    eval::make(&out, ty)
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(kiln_topi::reduce::cumsum(
        input("cumsum", i, 0)?,
        a.int("axis")?,
        a.bool("exclusive")?,
        a.bool("reverse")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    // Opaque: a reduction (or, for long axes, several) whose output keeps the scanned axis, so
    // it fuses with nothing; its stages run in parallel over their points.
    v.push(
        OpDef::new("cumsum", &["data"], OpPattern::Opaque, rel)
            .attrs(vec![
                AttrSpec::new("axis", AttrKind::Int, 0),
                AttrSpec::new("exclusive", AttrKind::Bool, false),
                AttrSpec::new("reverse", AttrKind::Bool, false),
            ])
            .eval(evaluate)
            .compute(lower)
            .schedule(kiln_topi::schedule::generic::schedule_reduce_stages),
    );
}
