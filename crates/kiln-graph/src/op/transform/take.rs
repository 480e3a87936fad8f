//! `take(data, indices, axis=None, mode="clip")`: gather along `axis` (ONNX Gather); without
//! `axis` the data is flattened first.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one};
use crate::op::{normalize_axis, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_tir::DataTypeExt;
use kiln_topi::transform as tf;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let (ix, id) = ctx.tensor(1)?;
    if !id.is_integer() {
        return Err(ctx.err(format!(
            "argument `indices` must be an integer tensor, got {id}"
        )));
    }
    let mode = ctx.attrs.str("mode")?;
    if !["clip", "wrap", "fast"].contains(&mode.as_str()) {
        return Err(ctx.err(format!(
            "attribute `mode` = \"{mode}\" is not clip, wrap or fast"
        )));
    }
    let out = match ctx.attrs.opt_int("axis")? {
        None => ix.to_vec(),
        Some(a) => {
            let a = normalize_axis(a, s.len()).map_err(|m| ctx.err(m))?;
            let mut o = s[..a].to_vec();
            o.extend_from_slice(ix);
            o.extend_from_slice(&s[a + 1..]);
            o
        }
    };
    Ok(Type::tensor(&out, d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let axis = a.opt_int("axis")?.ok_or_else(|| {
        kiln_ffi::Error::value_error("take: only an explicit `axis` is supported")
    })?;
    one(tf::take(input("take", i, 0)?, input("take", i, 1)?, axis))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("take", &["data", "indices"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::optional("axis", AttrKind::Int),
                AttrSpec::new("mode", AttrKind::Str, "clip"),
            ])
            .compute(lower),
    );
}
