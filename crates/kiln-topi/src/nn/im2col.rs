//! The patches of a 2-D convolution as the rows of a matrix (im2col), so that an integer
//! convolution runs as a matrix product ([`super::dense_dot4`], VNNI) as onnxruntime's
//! quantized convolutions do. The data is first transposed to NHWC, so that each patch row is
//! `KH*KW` runs of `C` consecutive bytes (vector copies).

use super::conv2d::{conv2d_out_shape, Conv2dAttrs};
use super::{compute_tagged, consts, invalid, shape_nd};
use crate::schedule::{extent, inline_injective};
use crate::tag;
use kiln_ffi::{Any, Map, Result};
use kiln_te::tensor::compute_axes;
use kiln_te::{compute_op, Schedule, Tensor};
use kiln_tir::{floordiv, floormod, CpuDesc, PrimExpr, Var};

/// The name of the NHWC copy of the data that the patches read.
const NHWC: &str = "im2col_nhwc";
/// The attribute of the patches' operation that holds the output width.
const OUT_WIDTH: &str = "out_width";

/// `out[(n*OH + y)*OW + x, (ky*KW + kx)*C + c] = pad(data)[n, c, y*sh + ky*dh, x*sw + kx*dw]`
/// for NCHW `data` and a `kh x kw` kernel (one group), padded with the one value of `pad_value`
/// (a tensor of `data`'s dtype with one element: an integer convolution pads with its zero
/// point, which may be known only at run time), with `columns` columns (at least `C*KH*KW`;
/// zeros past it, so a product can read whole groups of four). Column `q` is tap
/// `q / C` (row-major over the kernel) of channel `q % C`.
pub fn im2col(
    data: &Tensor,
    pad_value: &Tensor,
    (kh, kw): (i64, i64),
    attrs: &Conv2dAttrs,
    columns: i64,
) -> Result<Tensor> {
    const W: &str = "im2col";
    let ds = shape_nd(data, 4, W)?;
    let (n, c, h, w) = (ds[0], ds[1], ds[2], ds[3]);
    let k = c * kh * kw;
    if attrs.groups != 1 || columns < k || kh < 1 || kw < 1 {
        return Err(invalid(
            W,
            format!(
                "{columns} columns for {c} channels of a {kh}x{kw} kernel in {} groups",
                attrs.groups
            ),
        ));
    }
    let ps = super::const_shape(pad_value, W)?;
    if ps.iter().product::<i64>() != 1 || pad_value.dtype() != data.dtype() {
        return Err(invalid(
            W,
            format!(
                "the padding value must be one {} value, got {} {ps:?}",
                data.dtype(),
                pad_value.dtype()
            ),
        ));
    }
    let out = conv2d_out_shape(&ds, &[1, c, kh, kw], attrs)?;
    let (oh, ow) = (out[2], out[3]);
    let (sh, sw) = attrs.strides;
    let (dh, dw) = attrs.dilation;
    let (pt, pl) = (attrs.padding.top, attrs.padding.left);
    let fill = pad_value.at(&vec![PrimExpr::i32(0); ps.len()]);
    let d = data.clone();
    let nhwc = compute_tagged(
        &consts(&[n, h, w, c]),
        |i| {
            d.at(&[
                i[0].to_expr(),
                i[3].to_expr(),
                i[1].to_expr(),
                i[2].to_expr(),
            ])
        },
        NHWC,
        tag::INJECTIVE,
    )?;
    let axis = compute_axes(&consts(&[n * oh * ow, columns]));
    let i: Vec<Var> = axis.iter().map(|iv| iv.var().clone()).collect();
    let value = {
        let (r, q) = (i[0].to_expr(), i[1].to_expr());
        let x = floormod(&r, ow);
        let y = floormod(floordiv(&r, ow), oh);
        let b = floordiv(&r, oh * ow);
        let ch = floormod(&q, c);
        let tap = floordiv(&q, c);
        let kx = floormod(&tap, kw);
        let ky = floordiv(&tap, kw);
        let iy = y * sh + ky * dh - pt;
        let ix = x * sw + kx * dw - pl;
        let in_image = iy
            .ge(0)
            .logical_and(iy.lt(h))
            .logical_and(ix.ge(0))
            .logical_and(ix.lt(w));
        let in_patch = q.lt(k);
        let v = nhwc.at(&[b, iy, ix, ch]);
        let zero = PrimExpr::const_int(v.dtype(), 0);
        let pixel = kiln_te::if_then_else(in_image, v, fill.clone());
        kiln_te::if_then_else(in_patch, pixel, zero)
    };
    // The schedule splits rows by the output width, which it reads from here.
    let attrs = Map::new([(Any::from(OUT_WIDTH), Any::from(ow))]);
    let op = compute_op("im2col", tag::INJECTIVE, attrs, axis, vec![value])?;
    Ok(op.output(0))
}

/// Schedules [`im2col`] (`out`) on `cpu`: the NHWC copy (producers inlined into it) computed
/// first, its rows in parallel; the patches with rows split by `OW` (so row indices need no
/// division in the inner loops), columns split by `C` into taps and channels, channels in
/// vectors where they fill one, output rows in parallel.
pub fn schedule_im2col(s: &Schedule, out: &Tensor, cpu: &CpuDesc) -> Result<()> {
    let Some(nhwc) = out
        .op()
        .input_tensors()
        .into_iter()
        .find(|t| t.op().name() == NHWC)
    else {
        return crate::schedule::generic::schedule_injective(s, out, cpu);
    };
    inline_injective(s, out, &[nhwc.op().clone()])?;
    let st = s.stage(&nhwc);
    let rows = st.fuse(&nhwc.axis(0), &nhwc.axis(1))?;
    st.parallel(&rows)?;
    let c = extent(&nhwc, 3);
    let lanes = cpu.lanes(out.dtype());
    let os = s.stage(out);
    let ow = out
        .op()
        .attrs()
        .get(OUT_WIDTH)
        .and_then(|v| v.try_as::<i64>().ok())
        .unwrap_or(1);
    let (ro, x) = os.split(&out.axis(0), ow)?;
    let (tap, ch) = os.split(&out.axis(1), c)?;
    os.reorder(&[ro.clone(), x, tap, ch.clone()])?;
    os.parallel(&ro)?;
    if c % lanes == 0 || (c >= 16 && c % 16 == 0) {
        let (_, vi) = os.split(&ch, c.min(lanes))?;
        os.vectorize(&vi)?;
    }
    Ok(())
}
