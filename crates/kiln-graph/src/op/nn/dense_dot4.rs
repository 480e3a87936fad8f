//! `nn.dense_dot4(data, weight, units)`: `uint8` data `[M, K]` by an `int8` weight packed four
//! bytes per int32 (`[ceil(N/b), K/4, b]`, [`kiln_topi::nn::pack_dot4_weight`]) to `int32`
//! `[M, N]` with four-byte dot products (VNNI's `vpdpbusd`). AlterOpLayout makes it from
//! integer matrix products on CPUs whose description has the instruction.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one};
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::{DataType, Result};
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn;
use kiln_topi::schedule::x86;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = ctx.tensor_rank(0, 2)?;
    let (w, wt) = ctx.tensor_rank(1, 3)?;
    if dt != DataType::uint(8) || wt != DataType::int(32) {
        return Err(ctx.err(format!(
            "`data` must be uint8 and the packed `weight` int32, got {dt} and {wt}"
        )));
    }
    let units = ctx.attrs.int("units")?;
    let (nb, kq, b) = (w[0], w[1], w[2]);
    if d[1] != 4 * kq || b < 1 || units < 1 || (units + b - 1) / b != nb {
        return Err(ctx.err(format!(
            "`data` {d:?} and packed `weight` {w:?} do not make a product of {units} units"
        )));
    }
    Ok(Type::tensor(&[d[0], units], DataType::int(32)))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let (data, weight) = (input("nn.dense_dot4", i, 0)?, input("nn.dense_dot4", i, 1)?);
    one(nn::dense_dot4(data, weight, a.int("units")?))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "nn.dense_dot4",
            &["data", "weight"],
            OpPattern::OutEWiseFusable,
            rel,
        )
        .attrs(vec![AttrSpec::new("units", AttrKind::Int, 0i64)])
        .compute(lower)
        .schedule(x86::schedule_dense),
    );
}
