//! `nn.softmax(data, axis=-1)` and `nn.log_softmax(data, axis=-1)` (opaque for fusion, as in
//! TVM: their schedules are hand-written).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{
    input, normalize_axis, one, AttrKind, AttrSpec, ComputeFn, OpDef, OpPattern, RelCtx,
};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn;
use kiln_topi::schedule::x86;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, _) = ctx.tensor(0)?;
    normalize_axis(ctx.attrs.int("axis")?, s.len()).map_err(|m| ctx.err(m))?;
    Ok(ctx.args[0].clone())
}

/// The lowering of `nn.softmax` (TOPI compute).
fn lower_softmax(i: &[TeTensor], a: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<TeTensor>> {
    let x = input("nn.softmax", i, 0)?;
    let lanes = cpu.lanes(x.dtype());
    one(nn::softmax::softmax_in_lanes(x, a.int("axis")?, lanes))
}

/// The lowering of `nn.log_softmax` (TOPI compute).
fn lower_log_softmax(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(nn::log_softmax(
        input("nn.log_softmax", i, 0)?,
        a.int("axis")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    let ops: [(&'static str, ComputeFn); 2] = [
        ("nn.softmax", lower_softmax),
        ("nn.log_softmax", lower_log_softmax),
    ];
    for (name, lower) in ops {
        v.push(
            OpDef::new(name, &["data"], OpPattern::Opaque, rel)
                .attrs(vec![AttrSpec::new("axis", AttrKind::Int, -1)])
                .compute(lower)
                .schedule(x86::schedule_softmax),
        );
    }
}
