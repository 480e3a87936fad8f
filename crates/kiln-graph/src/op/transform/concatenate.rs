//! `concatenate(x0, x1, ..., axis=0)`: joins tensors along `axis` (variadic arguments rather
//! than Relay's tuple argument, which keeps fusion simple).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::one;
use crate::op::{eval, normalize_axis, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::{Error, Result};
use kiln_runtime::tensor::Tensor;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::transform as tf;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s0, d0) = ctx.tensor(0)?;
    let axis = normalize_axis(ctx.attrs.int("axis")?, s0.len()).map_err(|m| ctx.err(m))?;
    let mut out = s0.to_vec();
    for i in 1..ctx.args.len() {
        let (s, _) = ctx.tensor(i)?;
        ctx.same_dtype(0, i)?;
        // Extents known only at run time (-1) meet any other (the kernel checks them).
        let same = s.len() == s0.len()
            && s.iter()
                .zip(&out)
                .enumerate()
                .all(|(k, (&a, &b))| k == axis || a == b || a == -1 || b == -1);
        if !same {
            return Err(ctx.err(format!(
                "argument #{i} {} does not match argument #0 {} outside axis {axis}",
                ctx.args[i], ctx.args[0]
            )));
        }
        for (k, (o, &d)) in out.iter_mut().zip(s).enumerate() {
            *o = if k == axis {
                if *o < 0 || d < 0 {
                    -1
                } else {
                    *o + d
                }
            } else if *o < 0 {
                d
            } else {
                *o
            };
        }
    }
    Ok(Type::tensor(&out, d0))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(tf::concatenate(i, a.int("axis")?))
}

/// The reference evaluator: the arguments' values placed one after another along `axis`.
fn evaluate(args: &[Tensor], a: Attrs<'_>, ty: &Type) -> Result<Tensor> {
    let out_shape = ty.shape().to_vec();
    let axis = normalize_axis(a.int("axis")?, out_shape.len()).map_err(Error::value_error)?;
    let ost = eval::strides(&out_shape);
    let mut out = vec![0.0; out_shape.iter().product::<i64>() as usize];
    let mut off = 0i64;
    for t in args {
        let v = eval::values(t)?;
        let st = eval::strides(t.shape());
        eval::for_each_index(t.shape(), |idx| {
            let mut o = idx.to_vec();
            o[axis] += off;
            out[eval::flat(&o, &ost)] = v[eval::flat(idx, &st)];
        });
        off += t.shape()[axis];
    }
    eval::make(&out, ty)
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("concatenate", &["data"], OpPattern::Injective, rel)
            .variadic()
            .attrs(vec![AttrSpec::new("axis", AttrKind::Int, 0)])
            .compute(lower)
            .eval(evaluate),
    );
}
