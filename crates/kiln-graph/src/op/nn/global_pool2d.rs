//! `nn.global_avg_pool2d(data)` and `nn.global_max_pool2d(data)`: NCHW -> `[N, C, 1, 1]`.

use super::check_layout;
use crate::ir::Type;
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    check_layout(ctx, "layout", "NCHW")?;
    let (d, dt) = ctx.tensor_rank(0, 4)?;
    Ok(Type::tensor(&[d[0], d[1], 1, 1], dt))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    for name in ["nn.global_avg_pool2d", "nn.global_max_pool2d"] {
        v.push(
            OpDef::new(name, &["data"], OpPattern::OutEWiseFusable, rel)
                .attrs(vec![AttrSpec::new("layout", AttrKind::Str, "NCHW")]),
        );
    }
}
