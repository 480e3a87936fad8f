//! `nn.global_avg_pool2d(data)` and `nn.global_max_pool2d(data)`: NCHW -> `[N, C, 1, 1]`, or
//! channel blocks (`layout` `NCHW{b}c`) -> `[N, C/b, 1, 1, b]`.

use super::{in_blocks, nchw_arg};
use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one, AttrKind, AttrSpec, ComputeFn, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn;
use kiln_topi::schedule::x86;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt, block) = nchw_arg(ctx, 0, "layout")?;
    Ok(Type::tensor(&in_blocks([d[0], d[1], 1, 1], block), dt))
}

/// The lowering of `nn.global_avg_pool2d` (TOPI compute).
fn lower_avg(i: &[TeTensor], _: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<TeTensor>> {
    let x = input("nn.global_avg_pool2d", i, 0)?;
    one(nn::global_avg_pool2d(x, cpu.lanes(x.dtype())))
}

/// The lowering of `nn.global_max_pool2d` (TOPI compute).
fn lower_max(i: &[TeTensor], _: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<TeTensor>> {
    let x = input("nn.global_max_pool2d", i, 0)?;
    one(nn::global_max_pool2d(x, cpu.lanes(x.dtype())))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    let ops: [(&'static str, ComputeFn); 2] = [
        ("nn.global_avg_pool2d", lower_avg),
        ("nn.global_max_pool2d", lower_max),
    ];
    for (name, lower) in ops {
        v.push(
            OpDef::new(name, &["data"], OpPattern::OutEWiseFusable, rel)
                .attrs(vec![AttrSpec::new("layout", AttrKind::Str, "NCHW")])
                .compute(lower)
                .schedule(x86::schedule_pool),
        );
    }
}
