//! `cast(data, dtype="float32")`: elementwise conversion.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::{DataType, Error, Result};
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;

/// Parses a dtype name (`float32`, `int64`, `bool`, ...).
pub fn parse_dtype(s: &str) -> Result<DataType> {
    s.parse::<DataType>()
        .map_err(|_| Error::value_error(format!("unknown dtype `{s}`")))
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, _) = ctx.tensor(0)?;
    let d = parse_dtype(&ctx.attrs.str("dtype")?).map_err(|e| ctx.err(e.message()))?;
    Ok(Type::tensor(s, d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let d: DataType = a
        .str("dtype")?
        .parse()
        .map_err(|_| Error::value_error("cast: bad dtype"))?;
    one(kiln_topi::elemwise::cast(input("cast", i, 0)?, d))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("cast", &["data"], OpPattern::ElemWise, rel)
            .attrs(vec![AttrSpec::new("dtype", AttrKind::Str, "float32")])
            .eval(|a, _, ty| eval::same_data(a, ty))
            .compute(lower),
    );
}
