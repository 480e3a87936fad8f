//! `reshape(data, newshape, allowzero)`: `0` copies the input extent at that position (an
//! extent of 0 with `allowzero`), one `-1` is inferred (ONNX / TVM rules, in
//! [`kiln_topi::transform::infer_reshape`]).

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
    let out = tf::infer_reshape(
        s,
        &ctx.attrs.ints("newshape")?,
        ctx.attrs.bool("allowzero")?,
    )
    .map_err(|e| {
        // The type error names the op itself.
        let m = e.message();
        ctx.err(m.strip_prefix("reshape: ").unwrap_or(&m))
    })?;
    Ok(Type::tensor(&out, d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(tf::reshape(
        input("reshape", i, 0)?,
        &a.ints("newshape")?,
        a.bool("allowzero")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("reshape", &["data"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::new("newshape", AttrKind::Ints, Vec::<i64>::new()),
                AttrSpec::new("allowzero", AttrKind::Bool, false),
            ])
            .eval(|a, _, ty| eval::same_data(a, ty))
            .view()
            .compute(lower),
    );
}
