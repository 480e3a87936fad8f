//! `nn.matmul(a, b)`: numpy-style matrix product (`[..., M, K] x [..., K, N]`, batch dimensions
//! broadcast; `transpose_a` / `transpose_b` swap the last two axes first); an integer `b` under
//! float `a` is converted on each read (weight-only quantization).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{broadcast_shapes, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::{DataType, Result};
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn;
use kiln_topi::schedule::x86;

/// Shared with batch_matmul: `(batch, m, k)` / `(batch, k, n)` shapes, broadcast batch, in
/// dtype `dt`.
pub(crate) fn matmul_shape(ctx: &RelCtx<'_>, ta: bool, tb: bool, dt: DataType) -> Result<Type> {
    let (a, _) = ctx.tensor(0)?;
    let (b, _) = ctx.tensor(1)?;
    if a.len() < 2 || b.len() < 2 {
        return Err(ctx.err(format!(
            "arguments must have rank >= 2, got {} and {}",
            ctx.args[0], ctx.args[1]
        )));
    }
    let (ra, rb) = (a.len(), b.len());
    let (m, ka) = if ta {
        (a[ra - 1], a[ra - 2])
    } else {
        (a[ra - 2], a[ra - 1])
    };
    let (kb, n) = if tb {
        (b[rb - 1], b[rb - 2])
    } else {
        (b[rb - 2], b[rb - 1])
    };
    // A dimension known only at run time (-1) meets the other (the kernel checks them).
    if ka != kb && ka >= 0 && kb >= 0 {
        return Err(ctx.err(format!(
            "reduction dimensions differ: `{}` has {ka}, `{}` has {kb} ({} x {})",
            ctx.arg_name(0),
            ctx.arg_name(1),
            ctx.args[0],
            ctx.args[1]
        )));
    }
    let mut s = broadcast_shapes(&a[..ra - 2], &b[..rb - 2])
        .map_err(|e| ctx.err(format!("batch dimensions: {e}")))?;
    s.push(m);
    s.push(n);
    Ok(Type::tensor(&s, dt))
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    matmul_shape(
        ctx,
        ctx.attrs.bool("transpose_a")?,
        ctx.attrs.bool("transpose_b")?,
        ctx.product_dtype(0, 1)?,
    )
}

/// The TOPI attributes of a `nn.matmul` / `nn.batch_matmul` call.
pub(crate) fn topi_attrs(a: &Attrs<'_>) -> Result<nn::MatmulAttrs> {
    Ok(nn::MatmulAttrs {
        transpose_a: a.bool("transpose_a")?,
        transpose_b: a.bool("transpose_b")?,
    })
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<TeTensor>> {
    let x = |k| input("nn.matmul", i, k);
    let attrs = topi_attrs(a)?;
    let (xa, xb) = (x(0)?, x(1)?);
    // Two runtime matrices: B packed at run time for the packed matrix kernel.
    let static_shapes = [xa, xb]
        .iter()
        .all(|t| t.shape().iter().all(|d| d.is_const()));
    if static_shapes
        && xa.ndim() == 2
        && xb.ndim() == 2
        && !attrs.transpose_a
        && xb.dtype() == kiln_ffi::DataType::float(32)
    {
        let sb = xb.shape();
        let n = if attrs.transpose_b { &sb[0] } else { &sb[1] }
            .as_int()
            .unwrap_or(0);
        if let Some(bn) = x86::dense::column_block(n, cpu.lanes(xb.dtype())) {
            let src = if attrs.transpose_b { "NK" } else { "KN" };
            let packed = kiln_topi::transform::layout_transform(xb, src, &format!("NK{bn}n"))?;
            return one(nn::dense_packed(xa, &packed, Some(n), None));
        }
    }
    one(nn::matmul(xa, xb, &attrs))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("nn.matmul", &["a", "b"], OpPattern::OutEWiseFusable, rel)
            .attrs(vec![
                AttrSpec::new("transpose_a", AttrKind::Bool, false),
                AttrSpec::new("transpose_b", AttrKind::Bool, false),
            ])
            .compute(lower)
            .schedule(x86::schedule_dense),
    );
}
