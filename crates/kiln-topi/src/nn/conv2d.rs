//! 2-D convolution, NCHW data and OIHW weights: groups (depthwise included), any stride,
//! 4-sided padding and dilation.

use super::pad::{pad_nchw, Padding2d};
use super::{
    c, compute_tagged, consts, invalid, is_static, nchw_or_blocks_dims, shape_nd, window_out,
    window_out_expr,
};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, Tensor};
use kiln_tir::{floordiv, PrimExpr};

/// Attributes of [`conv2d`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dAttrs {
    /// `(stride_h, stride_w)`.
    pub strides: (i64, i64),
    /// Zero padding of H and W.
    pub padding: Padding2d,
    /// `(dilation_h, dilation_w)`.
    pub dilation: (i64, i64),
    /// Channel groups: `C` and `O` are both divided into `groups` blocks; `groups == C` is a
    /// depthwise convolution.
    pub groups: i64,
    /// The output channels when the kernel is packed with a padded last block
    /// ([`crate::nn::conv2d_packed`]); `None`: all of the packed kernel's filters.
    pub channels: Option<i64>,
}

impl Default for Conv2dAttrs {
    fn default() -> Conv2dAttrs {
        Conv2dAttrs {
            strides: (1, 1),
            padding: Padding2d::default(),
            dilation: (1, 1),
            groups: 1,
            channels: None,
        }
    }
}

/// The output shape `[N, O, OH, OW]` of [`conv2d`] for `data` `[N, C, H, W]` and `weight`
/// `[O, C / groups, KH, KW]`.
pub fn conv2d_out_shape(data: &[i64], weight: &[i64], a: &Conv2dAttrs) -> Result<[i64; 4]> {
    const W: &str = "conv2d";
    let (n, ch, h, w) = (data[0], data[1], data[2], data[3]);
    let (o, cpg, kh, kw) = (weight[0], weight[1], weight[2], weight[3]);
    if a.groups < 1 || ch % a.groups != 0 || o % a.groups != 0 {
        return Err(invalid(
            W,
            format!(
                "groups {} must divide channels {ch} and filters {o}",
                a.groups
            ),
        ));
    }
    if cpg != ch / a.groups {
        return Err(invalid(
            W,
            format!(
                "weight has {cpg} input channels per group, data {ch} / groups {} = {}",
                a.groups,
                ch / a.groups
            ),
        ));
    }
    if a.padding.is_negative() {
        return Err(invalid(W, format!("negative padding {:?}", a.padding)));
    }
    let p = a.padding;
    let oh = window_out(h, p.top + p.bottom, kh, a.strides.0, a.dilation.0, W)?;
    let ow = window_out(w, p.left + p.right, kw, a.strides.1, a.dilation.1, W)?;
    Ok([n, o, oh, ow])
}

/// [`conv2d_out_shape`] for `data` whose batch and spatial dimensions may be known only at run
/// time (the channels are static): the output's dimensions, expressions where so.
pub fn conv2d_out_dims(data: &Tensor, weight: &[i64], a: &Conv2dAttrs) -> Result<Vec<PrimExpr>> {
    const W: &str = "conv2d";
    let ds = nchw_or_blocks_dims(data, W)?;
    if ds.len() != 4 {
        return Err(invalid(W, format!("`{}` must have rank 4", data.name())));
    }
    let ch = ds[1]
        .as_int()
        .ok_or_else(|| invalid(W, "the input channels must be known at compile time"))?;
    // The static rules on stand-in spatial extents (the window itself), then the run-time
    // extents as expressions.
    let span = |k: i64, d: i64| d * (k - 1) + 1;
    let stand_in = [
        1,
        ch,
        span(weight[2], a.dilation.0),
        span(weight[3], a.dilation.1),
    ];
    conv2d_out_shape(&stand_in, weight, a)?;
    let p = a.padding;
    Ok(vec![
        ds[0].clone(),
        c(weight[0]),
        window_out_expr(
            &ds[2],
            p.top + p.bottom,
            weight[2],
            a.strides.0,
            a.dilation.0,
            W,
        )?,
        window_out_expr(
            &ds[3],
            p.left + p.right,
            weight[3],
            a.strides.1,
            a.dilation.1,
            W,
        )?,
    ])
}

/// Whether a convolution of `channels` input channels with these attributes is depthwise
/// (one input channel per group).
pub fn is_depthwise(channels: i64, a: &Conv2dAttrs) -> bool {
    a.groups > 1 && a.groups == channels
}

/// `out[n, o, y, x] = sum_{c, ry, rx} pad(data)[n, g*C/G + c, y*sh + ry*dh, x*sw + rx*dw] *
/// weight[o, c, ry, rx]` with `g = o / (O/G)`. The padding stage is named `pad_data`; the
/// output is tagged [`tag::CONV2D_NCHW`], or [`tag::DEPTHWISE_CONV2D_NCHW`] when depthwise
/// (then there is no channel reduction).
pub fn conv2d(data: &Tensor, weight: &Tensor, attrs: &Conv2dAttrs) -> Result<Tensor> {
    let ws = shape_nd(weight, 4, "conv2d")?;
    let out = conv2d_out_dims(data, &ws, attrs)?;
    let depthwise = is_depthwise(ws[1] * attrs.groups, attrs);
    if depthwise && attrs.strides.1 == 2 && attrs.dilation.1 == 1 && is_static(data) {
        let ds = shape_nd(data, 4, "conv2d")?;
        let out: Vec<i64> = out.iter().filter_map(|d| d.as_int()).collect();
        let out: [i64; 4] = out.try_into().expect("static dimensions");
        return depthwise_stride2(data, weight, attrs, &ds, &out);
    }
    let padded = pad_nchw(data, attrs.padding, 0.0, super::pad::PAD_STAGE)?;
    conv2d_over(&padded, weight, &ws, attrs, &out)
}

/// [`conv2d`] of `data` whose extents are known only at run time, its output's width computed
/// in whole vectors of `lanes` (the padding widened on the right by the zeros the extra
/// columns read) and then cut to the width: a schedule's vectors along the width never test
/// the end of a row inside the product, only when the cut result is stored.
pub fn conv2d_run_time(
    data: &Tensor,
    weight: &Tensor,
    attrs: &Conv2dAttrs,
    lanes: usize,
) -> Result<Tensor> {
    let ws = shape_nd(weight, 4, "conv2d")?;
    let out = conv2d_out_dims(data, &ws, attrs)?;
    let lanes = lanes.max(1) as i64;
    if lanes == 1 || out[3].as_int().is_some() {
        return conv2d(data, weight, attrs);
    }
    let mut wide = attrs.padding;
    wide.right += (lanes - 1) * attrs.strides.1;
    let padded = pad_nchw(data, wide, 0.0, super::pad::PAD_STAGE)?;
    let mut whole = out.clone();
    whole[3] = floordiv(out[3].clone() + (lanes - 1), lanes) * lanes;
    let full = conv2d_over(&padded, weight, &ws, attrs, &whole)?;
    let tag = full.op().tag().to_string();
    compute_tagged(
        &out,
        |i| full.at(&i.iter().map(|v| v.to_expr()).collect::<Vec<_>>()),
        "conv2d_cut",
        &tag,
    )
}

/// The convolution of `padded` (already padded) by `weight` (`ws` its shape) over an output
/// of extents `out`.
fn conv2d_over(
    padded: &Tensor,
    weight: &Tensor,
    ws: &[i64],
    attrs: &Conv2dAttrs,
    out: &[PrimExpr],
) -> Result<Tensor> {
    let (cpg, kh, kw) = (ws[1], ws[2], ws[3]);
    let opg = ws[0] / attrs.groups;
    let (sh, sw) = attrs.strides;
    let (dh, dw) = attrs.dilation;
    let ry = reduce_axis_n(kh, "ry");
    let rx = reduce_axis_n(kw, "rx");
    let weight = weight.clone();
    let depthwise = is_depthwise(cpg * attrs.groups, attrs);
    if depthwise {
        return compute_tagged(
            out,
            |i| {
                let (n, o, y, x) = (
                    i[0].to_expr(),
                    i[1].to_expr(),
                    i[2].to_expr(),
                    i[3].to_expr(),
                );
                let ch = floordiv(&o, opg);
                sum(
                    padded.at(&[n, ch, y * sh + ry.expr() * dh, x * sw + rx.expr() * dw])
                        * weight.at(&[o, kiln_tir::PrimExpr::i32(0), ry.expr(), rx.expr()]),
                    &[ry.clone(), rx.clone()],
                )
            },
            "depthwise_conv2d",
            tag::DEPTHWISE_CONV2D_NCHW,
        );
    }
    let rc = reduce_axis_n(cpg, "rc");
    compute_tagged(
        out,
        |i| {
            let (n, o, y, x) = (
                i[0].to_expr(),
                i[1].to_expr(),
                i[2].to_expr(),
                i[3].to_expr(),
            );
            let ch = if attrs.groups == 1 {
                rc.expr()
            } else {
                floordiv(&o, opg) * cpg + rc.expr()
            };
            sum(
                padded.at(&[n, ch, y * sh + ry.expr() * dh, x * sw + rx.expr() * dw])
                    * weight.at(&[o, rc.expr(), ry.expr(), rx.expr()]),
                &[rc.clone(), ry.clone(), rx.clone()],
            )
        },
        "conv2d",
        tag::CONV2D_NCHW,
    )
}

/// A depthwise convolution with horizontal stride 2: the padding stage (`pad_data`) also splits
/// every row into its even and odd columns (`[N, C, H', 2, ceil(W'/2)]`), so the columns a
/// row of outputs reads under one kernel tap are contiguous (`x + rx/2` in half `rx % 2`)
/// instead of every other one (which vectorizes only with gathers).
fn depthwise_stride2(
    data: &Tensor,
    weight: &Tensor,
    attrs: &Conv2dAttrs,
    ds: &[i64],
    out: &[i64; 4],
) -> Result<Tensor> {
    let [n, c, h, w] = [ds[0], ds[1], ds[2], ds[3]];
    let p = attrs.padding;
    let (hp, wp) = (h + p.top + p.bottom, w + p.left + p.right);
    let data = data.clone();
    let split = compute_tagged(
        &consts(&[n, c, hp, 2, (wp + 1) / 2]),
        |i| {
            let y = i[2].to_expr() - p.top;
            let x = i[4].to_expr() * 2 + i[3].to_expr() - p.left;
            let inside = y
                .ge(0)
                .logical_and(y.lt(h))
                .logical_and(x.ge(0))
                .logical_and(x.lt(w));
            let v = data.at(&[i[0].to_expr(), i[1].to_expr(), y, x]);
            let zero = kiln_tir::PrimExpr::const_float(v.dtype(), 0.0);
            kiln_te::if_then_else(inside, v, zero)
        },
        super::pad::PAD_STAGE,
        tag::INJECTIVE,
    )?;
    let (sh, dh) = (attrs.strides.0, attrs.dilation.0);
    let opg = out[1] / attrs.groups;
    let ry = reduce_axis_n(weight.shape()[2].as_int().unwrap_or(1), "ry");
    let rx = reduce_axis_n(weight.shape()[3].as_int().unwrap_or(1), "rx");
    let weight = weight.clone();
    compute_tagged(
        &consts(out),
        |i| {
            let (b, o, y, x) = (
                i[0].to_expr(),
                i[1].to_expr(),
                i[2].to_expr(),
                i[3].to_expr(),
            );
            let ch = floordiv(&o, opg);
            let r = rx.expr();
            sum(
                split.at(&[
                    b,
                    ch,
                    y * sh + ry.expr() * dh,
                    kiln_tir::floormod(&r, 2),
                    x + floordiv(&r, 2),
                ]) * weight.at(&[o, kiln_tir::PrimExpr::i32(0), ry.expr(), rx.expr()]),
                &[ry.clone(), rx.clone()],
            )
        },
        "depthwise_conv2d",
        tag::DEPTHWISE_CONV2D_NCHW,
    )
}
