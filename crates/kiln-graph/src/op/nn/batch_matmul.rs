//! `nn.batch_matmul(x, y)`: `[B, M, K] x [B, N, K]^T -> [B, M, N]` (TVM's default
//! `transpose_b = true`); a batch of 1 broadcasts.

use super::matmul::matmul_shape;
use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one};
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn;
use kiln_topi::schedule::x86;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    ctx.tensor_rank(0, 3)?;
    ctx.tensor_rank(1, 3)?;
    matmul_shape(
        ctx,
        ctx.attrs.bool("transpose_a")?,
        ctx.attrs.bool("transpose_b")?,
        ctx.same_dtype(0, 1)?,
    )
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let x = |k| input("nn.batch_matmul", i, k);
    one(nn::batch_matmul(
        x(0)?,
        x(1)?,
        &super::matmul::topi_attrs(a)?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "nn.batch_matmul",
            &["x", "y"],
            OpPattern::OutEWiseFusable,
            rel,
        )
        .attrs(vec![
            AttrSpec::new("transpose_a", AttrKind::Bool, false),
            AttrSpec::new("transpose_b", AttrKind::Bool, true),
        ])
        .compute(lower)
        .schedule(x86::schedule_dense),
    );
}
