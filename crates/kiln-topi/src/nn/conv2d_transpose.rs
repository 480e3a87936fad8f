//! Transposed 2-D convolution (the gradient of [`super::conv2d`] with respect to its input),
//! NCHW data and IOHW weights: groups, stride, 4-sided padding, output padding, dilation.

use super::pad::Padding2d;
use super::{compute_tagged, consts, invalid, shape_nd};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, Tensor};
use kiln_tir::{floordiv, floormod, PrimExpr};

/// Attributes of [`conv2d_transpose`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dTransposeAttrs {
    /// `(stride_h, stride_w)`.
    pub strides: (i64, i64),
    /// Rows / columns removed from the full output on each side.
    pub padding: Padding2d,
    /// Extra rows / columns at the bottom / right (`< stride`).
    pub output_padding: (i64, i64),
    /// `(dilation_h, dilation_w)`.
    pub dilation: (i64, i64),
    /// Channel groups.
    pub groups: i64,
}

impl Default for Conv2dTransposeAttrs {
    fn default() -> Conv2dTransposeAttrs {
        Conv2dTransposeAttrs {
            strides: (1, 1),
            padding: Padding2d::default(),
            output_padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
        }
    }
}

/// The output shape `[N, O, OH, OW]`: `OH = (H-1)*sh - top - bottom + dh*(KH-1) + oph + 1`.
pub fn conv2d_transpose_out_shape(
    data: &[i64],
    weight: &[i64],
    a: &Conv2dTransposeAttrs,
) -> Result<[i64; 4]> {
    const W: &str = "conv2d_transpose";
    let g = a.groups;
    if g < 1 || data[1] % g != 0 || weight[0] != data[1] {
        return Err(invalid(
            W,
            format!("weight {weight:?} does not match data {data:?} with groups {g}"),
        ));
    }
    let (s, d, p, op) = (a.strides, a.dilation, a.padding, a.output_padding);
    if s.0 < 1 || s.1 < 1 || d.0 < 1 || d.1 < 1 || p.is_negative() || op.0 < 0 || op.1 < 0 {
        return Err(invalid(W, format!("bad attributes {a:?}")));
    }
    let oh = (data[2] - 1) * s.0 - p.top - p.bottom + d.0 * (weight[2] - 1) + op.0 + 1;
    let ow = (data[3] - 1) * s.1 - p.left - p.right + d.1 * (weight[3] - 1) + op.1 + 1;
    if oh < 1 || ow < 1 {
        return Err(invalid(W, format!("empty output {oh} x {ow}")));
    }
    Ok([data[0], weight[1] * g, oh, ow])
}

/// `out[n, o, y, x] = sum data[n, c, iy, ix] * weight[c, o % (O/G), ry, rx]` over the input
/// channels `c` of `o`'s group and the kernel taps with `y + top - ry*dh = iy*sh` (same for
/// x) inside the input. Tagged [`tag::CONV2D_TRANSPOSE_NCHW`].
pub fn conv2d_transpose(
    data: &Tensor,
    weight: &Tensor,
    attrs: &Conv2dTransposeAttrs,
) -> Result<Tensor> {
    let ds = shape_nd(data, 4, "conv2d_transpose")?;
    let ws = shape_nd(weight, 4, "conv2d_transpose")?;
    let out = conv2d_transpose_out_shape(&ds, &ws, attrs)?;
    let cig = ds[1] / attrs.groups;
    let cog = ws[1];
    let rc = reduce_axis_n(cig, "rc");
    let ry = reduce_axis_n(ws[2], "ry");
    let rx = reduce_axis_n(ws[3], "rx");
    let a = *attrs;
    let (d, w) = (data.clone(), weight.clone());
    compute_tagged(
        &consts(&out),
        |i| {
            let o = i[1].to_expr();
            let ch = floordiv(&o, cog) * cig + rc.expr();
            let ty = i[2].to_expr() + a.padding.top - ry.expr() * a.dilation.0;
            let tx = i[3].to_expr() + a.padding.left - rx.expr() * a.dilation.1;
            let (iy, ix) = (floordiv(&ty, a.strides.0), floordiv(&tx, a.strides.1));
            let valid = ty
                .ge(0)
                .logical_and(tx.ge(0))
                .logical_and(floormod(&ty, a.strides.0).equal(0))
                .logical_and(floormod(&tx, a.strides.1).equal(0))
                .logical_and(iy.lt(ds[2]))
                .logical_and(ix.lt(ds[3]));
            let v = d.at(&[i[0].to_expr(), ch.clone(), iy, ix])
                * w.at(&[ch, floormod(&o, cog), ry.expr(), rx.expr()]);
            let v = kiln_te::if_then_else(valid, v, PrimExpr::const_float(d.dtype(), 0.0));
            sum(v, &[rc.clone(), ry.clone(), rx.clone()])
        },
        "conv2d_transpose",
        tag::CONV2D_TRANSPOSE_NCHW,
    )
}
