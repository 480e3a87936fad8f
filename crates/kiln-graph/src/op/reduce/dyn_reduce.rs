//! `dyn.reduce(data, reducer)`: a reduction whose reduced axes are known only at run time
//! (ONNX reductions with a run-time `axes` input). The result keeps `data`'s rank with every
//! dimension known at run time (-1): the caller allocates it, 1 on the reduced axes, and the
//! kernel reads the axes from that shape (see `kiln_topi::reduce::reduce_to_shape`).
//! `reducer`: `sum`, `mean`, `max`, `min`, `prod` or `log_sum_exp`.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_topi::reduce::{reduce_to_shape, Reducer};

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, dtype) = ctx.tensor(0)?;
    Reducer::parse(&ctx.attrs.str("reducer")?).map_err(|e| ctx.err(e.message()))?;
    // An axis of extent 1 stays 1 whichever axes are reduced.
    let out: Vec<i64> = s.iter().map(|&d| if d == 1 { 1 } else { -1 }).collect();
    Ok(Type::tensor(&out, dtype))
}

fn lower(i: &[TeTensor], a: &Attrs<'_>) -> Result<Vec<TeTensor>> {
    let x = input("dyn.reduce", i, 0)?;
    let reducer = Reducer::parse(&a.str("reducer")?)?;
    // The output's extents, bound from the tensor the caller passes.
    let out = kiln_topi::transform::run_time::run_time_dims(x.ndim());
    one(reduce_to_shape(x, &out, reducer))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("dyn.reduce", &["data"], OpPattern::Opaque, rel)
            .attrs(vec![AttrSpec::new("reducer", AttrKind::Str, "sum")])
            .compute(|i, a, _| lower(i, a))
            .schedule(kiln_topi::schedule::schedule_run_time),
    );
}
