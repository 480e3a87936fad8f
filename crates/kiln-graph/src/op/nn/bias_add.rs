//! `nn.bias_add(data, bias, axis=1)`: adds a 1-D bias along `axis`; `CanonicalizeOps` turns it
//! into `add(data, expand_dims(bias))`.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, input, normalize_axis, one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, _) = ctx.tensor(0)?;
    let (b, _) = ctx.tensor(1)?;
    ctx.same_dtype(0, 1)?;
    let axis = normalize_axis(ctx.attrs.int("axis")?, s.len()).map_err(|m| ctx.err(m))?;
    if b != [s[axis]] {
        return Err(ctx.err(format!(
            "argument `bias` must have shape [{}] (data axis {axis}), got {}",
            s[axis], ctx.args[1]
        )));
    }
    Ok(ctx.args[0].clone())
}

/// The lowering: `bias` `[C]` reshaped to broadcast along `axis` of `data` and added.
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let (data, bias) = (input("nn.bias_add", i, 0)?, input("nn.bias_add", i, 1)?);
    let nd = data.ndim();
    let ax = normalize_axis(a.int("axis")?, nd).map_err(kiln_ffi::Error::value_error)?;
    let c = bias.shape()[0]
        .as_int()
        .ok_or_else(|| kiln_ffi::Error::value_error("nn.bias_add: symbolic bias"))?;
    let mut shape = vec![c];
    shape.extend(std::iter::repeat_n(1, nd - ax - 1));
    let b = if shape.len() == 1 {
        bias.clone()
    } else {
        kiln_topi::transform::reshape(bias, &shape, true)?
    };
    one(kiln_topi::broadcast::add(data, &b))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("nn.bias_add", &["data", "bias"], OpPattern::Broadcast, rel)
            .attrs(vec![AttrSpec::new("axis", AttrKind::Int, 1)])
            .eval(|a, attrs, ty| {
                let nd = a[0].ndim();
                let axis =
                    normalize_axis(attrs.int("axis")?, nd).map_err(kiln_ffi::Error::value_error)?;
                let mut shape = vec![1i64; nd - axis];
                shape[0] = a[1].shape()[0];
                let b = a[1].view(&shape, a[1].dtype())?;
                eval::broadcast(&[a[0].clone(), b], ty, |x| x[0] + x[1])
            })
            .compute(lower),
    );
}
