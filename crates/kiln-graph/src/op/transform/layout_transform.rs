//! `layout_transform(data, src_layout, dst_layout)`: the same tensor in another layout (TVM's
//! op of that name), e.g. convolution weights `OIHW` -> `OIHW16o`. `AlterOpLayout` inserts it on
//! weights, and `FoldConstant` evaluates it at compile time.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::transform as tf;
use kiln_topi::transform::layout::{in_padding, layout_transform_shape, map_index, Layout};

fn layouts(attrs: crate::ir::Attrs<'_>) -> Result<(Layout, Layout)> {
    Ok((
        Layout::parse(&attrs.str("src_layout")?)?,
        Layout::parse(&attrs.str("dst_layout")?)?,
    ))
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let (src, dst) = layouts(ctx.attrs).map_err(|e| ctx.err(e.message()))?;
    let shape = layout_transform_shape(s, &src, &dst).map_err(|e| ctx.err(e.message()))?;
    Ok(Type::tensor(&shape, d))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(tf::layout_transform(
        input("layout_transform", i, 0)?,
        &a.str("src_layout")?,
        &a.str("dst_layout")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("layout_transform", &["data"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::new("src_layout", AttrKind::Str, ""),
                AttrSpec::new("dst_layout", AttrKind::Str, ""),
            ])
            .eval(|a, attrs, ty| {
                let (src, dst) = layouts(attrs)?;
                let s = a[0].shape().to_vec();
                let strides = kiln_runtime::tensor::layout::compact_strides(&s);
                let vals = eval::values(&a[0])?;
                let extents = src.primal_extents(&s)?;
                let mut out = Vec::with_capacity(vals.len());
                eval::for_each_index(ty.shape(), |idx| {
                    let pad = in_padding(
                        idx,
                        &dst,
                        &extents,
                        |o, b, i| o * b + i,
                        |c, e| *c >= e,
                        |p, q| p || q,
                    );
                    if pad == Some(true) {
                        out.push(0.0);
                        return;
                    }
                    let src_idx =
                        map_index(idx, &src, &dst, |o, b, i| o * b + i, |c, b| (c / b, c % b));
                    let flat: i64 = src_idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
                    out.push(vals[flat as usize]);
                });
                eval::make(&out, ty)
            })
            .compute(lower),
    );
}

#[cfg(test)]
mod tests {
    use crate::ir::{Expr, Type};
    use crate::op::{attr, mk};
    use crate::transform::fold_constant::try_fold;
    use crate::transform::infer_type::infer_expr;

    #[test]
    fn infers_and_folds_a_kernel_packing() {
        let vals: Vec<f32> = (0..32 * 2).map(|v| v as f32).collect();
        let w = Expr::const_f32(&vals, &[32, 2, 1, 1]);
        let e = mk(
            "layout_transform",
            vec![w],
            &[
                ("src_layout", attr("OIHW")),
                ("dst_layout", attr("OIHW16o")),
            ],
        );
        assert_eq!(
            infer_expr(&e).unwrap().ty().unwrap(),
            Type::f32(&[2, 2, 1, 1, 16])
        );
        let folded = try_fold(&e).unwrap().expect("folds");
        let t = folded.as_constant().unwrap().to_f64_vec().unwrap();
        // packed[ob, i, 0, 0, oi] = w[ob * 16 + oi, i]
        for ob in 0..2 {
            for i in 0..2 {
                for oi in 0..16 {
                    let got = t[((ob * 2 + i) * 16 + oi) as usize];
                    assert_eq!(got, ((ob * 16 + oi) * 2 + i) as f64);
                }
            }
        }
        // 20 filters pad up to two blocks of 16; the padding is zero.
        let padded = mk(
            "layout_transform",
            vec![Expr::const_f32(&vals[..20], &[20, 1, 1, 1])],
            &[
                ("src_layout", attr("OIHW")),
                ("dst_layout", attr("OIHW16o")),
            ],
        );
        let t = try_fold(&padded).unwrap().expect("folds");
        let t = t.as_constant().unwrap();
        assert_eq!(t.shape(), &[2, 1, 1, 1, 16]);
        let v = t.to_f64_vec().unwrap();
        assert_eq!(v[16 + 3], 19.0);
        assert!(v[16 + 4..].iter().all(|&x| x == 0.0));
        let bad = mk(
            "layout_transform",
            vec![Expr::const_f32(&vals[..20], &[20, 1, 1, 1])],
            &[
                ("src_layout", attr("OIHW")),
                ("dst_layout", attr("NCHW16c")),
            ],
        );
        let err = infer_expr(&bad).unwrap_err();
        assert!(err.message().contains("same axes"), "{err}");
    }
}
