//! `nn.batch_matmul(x, y)`: `[B, M, K] x [B, N, K]^T -> [B, M, N]` (TVM's default
//! `transpose_b = true`); a batch of 1 broadcasts.

use super::matmul::matmul_shape;
use crate::ir::Type;
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    ctx.tensor_rank(0, 3)?;
    ctx.tensor_rank(1, 3)?;
    matmul_shape(
        ctx,
        ctx.attrs.bool("transpose_a")?,
        ctx.attrs.bool("transpose_b")?,
    )
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
        ]),
    );
}
