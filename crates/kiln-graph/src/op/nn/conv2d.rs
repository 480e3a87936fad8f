//! `nn.conv2d(data, weight)`: 2-D convolution, NCHW data, OIHW weight; groups (depthwise when
//! groups == channels), strides, padding (top, left, bottom, right), dilation. With a packed
//! `OIHW{b}o` kernel (AlterOpLayout) the data may be in channel blocks (`data_layout`
//! `NCHW{bi}c`) and the output stay in the kernel's (`out_layout` `NCHW{b}c`), as
//! ConvertBlockedLayout arranges; so may a depthwise convolution's, its `OIHW{b}o` kernel
//! `[C/b, 1, KH, KW, b]` holding `b` channels' filters a block.

use super::{attr_padding, attr_pair};
use super::{channel_block, in_blocks, nchw_arg, padding4, pair};
use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one};
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn;
use kiln_topi::nn::conv2d_packed::packed_blocks;
use kiln_topi::nn::conv2d_winograd as winograd;
use kiln_topi::schedule::x86;

/// The conv2d attribute schema (shared with conv2d_transpose's layout attributes).
pub(crate) fn conv_attrs() -> Vec<AttrSpec> {
    vec![
        AttrSpec::new("strides", AttrKind::Ints, [1, 1]),
        AttrSpec::new("padding", AttrKind::Ints, [0, 0, 0, 0]),
        AttrSpec::new("dilation", AttrKind::Ints, [1, 1]),
        AttrSpec::new("groups", AttrKind::Int, 1),
        AttrSpec::optional("channels", AttrKind::Int),
        AttrSpec::optional("kernel_size", AttrKind::Ints),
        AttrSpec::new("data_layout", AttrKind::Str, "NCHW"),
        AttrSpec::new("kernel_layout", AttrKind::Str, "OIHW"),
        AttrSpec::new("out_layout", AttrKind::Str, ""),
        AttrSpec::new("out_dtype", AttrKind::Str, ""),
    ]
}

/// The channel block of a call's `out_layout` (`""`: the data's logical NCHW).
fn out_block(a: &Attrs<'_>) -> Result<Option<i64>> {
    let layout = a.str("out_layout")?;
    if layout.is_empty() {
        return Ok(None);
    }
    channel_block(&layout).ok_or_else(|| {
        kiln_ffi::Error::type_error(format!(
            "attribute `out_layout` = \"{layout}\" is not supported (NCHW or NCHW<b>c)"
        ))
    })
}

/// The output extent of a convolution window along one axis (or an error when empty); -1
/// (known only at run time) when `size` is.
pub(crate) fn conv_out(
    ctx: &RelCtx<'_>,
    axis: &str,
    size: i64,
    pad: i64,
    k: i64,
    dil: i64,
    s: i64,
) -> Result<i64> {
    if size < 0 {
        // Known only at run time: so is the output's extent.
        return Ok(-1);
    }
    let eff = dil * (k - 1) + 1;
    let n = size + pad - eff;
    if n < 0 {
        return Err(ctx.err(format!(
            "the {axis} window (kernel {k}, dilation {dil}) is larger than the padded input ({})",
            size + pad
        )));
    }
    Ok(n / s + 1)
}

/// Whether a convolution of `groups` groups over `channels` input channels by an OIHW weight
/// of shape `w` is depthwise: one input and one output channel per group (the convolution
/// that may compute in channel blocks with a kernel of `b` channels' filters a block).
pub(crate) fn is_depthwise(groups: i64, channels: i64, w: &[i64]) -> bool {
    groups == channels && groups == w[0] && w[1] == 1
}

/// The `OIHW` block size of a kernel layout: `Some(None)` for `OIHW`, `Some(Some(b))` for
/// `OIHW{b}o`, `None` for anything else.
pub fn kernel_block(layout: &str) -> Option<Option<i64>> {
    super::block_of(layout, "OIHW", 'o')
}

/// The weight's shape as `[O, I, KH, KW]` whether it is `OIHW` or packed `OIHW{b}o`
/// (`[G * ceil(O/G/b), I, KH, KW, b]`: each group's filters padded to whole blocks, `O` from
/// the `channels` attribute).
fn oihw_weight_shape(ctx: &RelCtx<'_>) -> Result<Vec<i64>> {
    let layout = ctx.attrs.str("kernel_layout")?;
    if layout == winograd::KERNEL_LAYOUT {
        let (w, _) = ctx.tensor_rank(1, 3)?;
        if w[0] != 16 {
            return Err(ctx.err(format!(
                "argument `weight` of kernel_layout {layout} must be [16, C, K], got {w:?}"
            )));
        }
        return Ok(vec![w[2], w[1], 3, 3]);
    }
    match kernel_block(&layout) {
        Some(None) => Ok(ctx.tensor_rank(1, 4)?.0.to_vec()),
        Some(Some(b)) => {
            let (w, _) = ctx.tensor_rank(1, 5)?;
            if w[4] != b {
                return Err(ctx.err(format!(
                    "argument `weight` has inner block {} but kernel_layout is {layout}",
                    w[4]
                )));
            }
            let o = ctx.attrs.opt_int("channels")?.unwrap_or(w[0] * b);
            let groups = ctx.attrs.int("groups")?.max(1);
            let depthwise = nn::conv2d_packed::is_blocked_depthwise(o, groups, w);
            if o % groups != 0 || (packed_blocks(o, groups, b) != w[0] && !depthwise) {
                return Err(ctx.err(format!(
                    "attribute `channels`={o} in {groups} groups does not fit a packed weight of {} blocks of {b}",
                    w[0]
                )));
            }
            Ok(vec![o, w[1], w[2], w[3]])
        }
        None => Err(ctx.err(format!(
            "attribute `kernel_layout` = \"{layout}\" is not supported (OIHW or OIHW<b>o)"
        ))),
    }
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt, data_block) = nchw_arg(ctx, 0, "data_layout")?;
    let w = oihw_weight_shape(ctx)?;
    let out_block = out_block(&ctx.attrs).map_err(|e| ctx.err(e.message()))?;
    let layout = ctx.attrs.str("kernel_layout")?;
    // Winograd weights take data and output in blocks of any size dividing the channels.
    let kernel_block = if layout == winograd::KERNEL_LAYOUT {
        data_block.or(out_block)
    } else {
        kernel_block(&layout).flatten()
    };
    let groups = ctx.attrs.int("groups")?;
    let depthwise = is_depthwise(groups, d[1], &w);
    if data_block.is_some() && (kernel_block.is_none() || (groups != 1 && !depthwise)) {
        return Err(ctx.err(
            "blocked data (`data_layout` NCHW<b>c) needs a packed kernel and one group (or one \
             per channel)",
        ));
    }
    if let Some(b) = out_block {
        if kernel_block != Some(b) || w[0] % b != 0 {
            return Err(ctx.err(format!(
                "`out_layout` NCHW{b}c needs an OIHW{b}o kernel and whole blocks of {b} \
                 output channels, not {} ({})",
                w[0],
                ctx.attrs.str("kernel_layout")?
            )));
        }
    }
    ctx.same_dtype(0, 1)?;
    let strides = pair(ctx, "strides", 1)?;
    let dil = pair(ctx, "dilation", 1)?;
    let pad = padding4(ctx)?;
    if groups < 1 {
        return Err(ctx.err(format!("attribute `groups` must be >= 1, got {groups}")));
    }
    if d[1] != w[1] * groups {
        return Err(ctx.err(format!(
            "argument `weight` has {} input channels per group but `data` has {} channels and groups={groups} (expects {} per group)",
            w[1], d[1], d[1] / groups
        )));
    }
    if w[0] % groups != 0 {
        return Err(ctx.err(format!(
            "argument `weight` has {} output channels, not divisible by groups={groups}",
            w[0]
        )));
    }
    if let Some(c) = ctx.attrs.opt_int("channels")? {
        if c != w[0] {
            return Err(ctx.err(format!(
                "attribute `channels`={c} but `weight` has {} output channels",
                w[0]
            )));
        }
    }
    if let Some(k) = ctx.attrs.opt_ints("kernel_size")? {
        if k.as_slice() != &w[2..] {
            return Err(ctx.err(format!(
                "attribute `kernel_size`={k:?} but `weight` has kernel {:?}",
                &w[2..]
            )));
        }
    }
    let oh = conv_out(
        ctx,
        "height",
        d[2],
        pad[0] + pad[2],
        w[2],
        dil[0],
        strides[0],
    )?;
    let ow = conv_out(
        ctx,
        "width",
        d[3],
        pad[1] + pad[3],
        w[3],
        dil[1],
        strides[1],
    )?;
    let out_dtype = ctx.attrs.str("out_dtype")?;
    let dt = if out_dtype.is_empty() {
        dt
    } else {
        crate::op::tensor::cast::parse_dtype(&out_dtype)?
    };
    Ok(Type::tensor(
        &in_blocks([d[0], w[0], oh, ow], out_block),
        dt,
    ))
}

/// The TOPI attributes of a `nn.conv2d` call (also what AlterOpLayout asks TOPI about).
pub fn topi_attrs(a: &Attrs<'_>) -> Result<nn::Conv2dAttrs> {
    Ok(nn::Conv2dAttrs {
        strides: attr_pair(a, "strides")?,
        padding: attr_padding(a)?,
        dilation: attr_pair(a, "dilation")?,
        groups: a.int("groups")?,
        channels: a.opt_int("channels")?,
    })
}

/// The lowering: the packed-kernel compute for an `OIHW{b}o` weight, the flattened-row compute
/// for 1x1 convolutions it suits on `cpu`, else the direct NCHW compute. With an `out_dtype`
/// other than the operands' type, both operands are first cast to it, so that the sums
/// accumulate in it (`int8` operands, `int32` sums).
fn lower(i: &[TeTensor], attrs: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<TeTensor>> {
    let a = topi_attrs(attrs)?;
    let (mut data, mut weight) = (input("nn.conv2d", i, 0)?, input("nn.conv2d", i, 1)?);
    let out_dtype = attrs.str("out_dtype")?;
    let widened;
    if !out_dtype.is_empty() {
        let d = crate::op::tensor::cast::parse_dtype(&out_dtype)?;
        if d != data.dtype() {
            widened = [
                kiln_topi::elemwise::cast(data, d)?,
                kiln_topi::elemwise::cast(weight, d)?,
            ];
            (data, weight) = (&widened[0], &widened[1]);
        }
    }
    if attrs.str("kernel_layout")? == winograd::KERNEL_LAYOUT {
        return lower_winograd(data, weight, attrs, &a, cpu);
    }
    if weight.ndim() == 5 {
        let data_layout = attrs.str("data_layout")?;
        let data_block = channel_block(&data_layout).flatten();
        let out_blocked = out_block(attrs)?.is_some();
        let flat = out_blocked
            && data_block.is_some()
            && nn::is_static(weight)
            && x86::conv2d_flat::applies(
                &nn::const_shape(weight, "nn.conv2d")?,
                &a,
                data.dtype(),
                cpu,
            );
        let layouts = nn::PackedLayouts {
            data_block,
            out_blocked,
            channel_chunk: if flat {
                None
            } else {
                channel_chunk(data, weight, data_block, &a, cpu)?
            },
            flat_positions: flat,
        };
        return one(nn::conv2d_packed_in(data, weight, &a, layouts));
    }
    if !nn::is_static(data) {
        // Extents known only at run time: the direct compute over them, its width in whole
        // vectors of the target's lanes.
        return one(nn::conv2d_run_time(
            data,
            weight,
            &a,
            cpu.lanes(data.dtype()).max(1) as usize,
        ));
    }
    let ds = nn::const_shape(data, "nn.conv2d")?;
    let ws = nn::const_shape(weight, "nn.conv2d")?;
    if nn::conv2d_1x1::applies(&ds, &ws, &a, cpu) {
        one(nn::conv2d_1x1(data, weight, &a, cpu))
    } else {
        one(nn::conv2d(data, weight, &a))
    }
}

/// The input channels a pass of the packed convolution of `data` by `weight` sums
/// ([`x86::conv2d::channel_chunk`]), `None` for one pass (and for grouped or run-time shapes).
fn channel_chunk(
    data: &TeTensor,
    weight: &TeTensor,
    data_block: Option<i64>,
    a: &nn::Conv2dAttrs,
    cpu: &CpuDesc,
) -> Result<Option<i64>> {
    if a.groups != 1 || !nn::is_static(data) {
        return Ok(None);
    }
    let ds = nn::const_shape(data, "nn.conv2d")?;
    let ws = nn::const_shape(weight, "nn.conv2d")?;
    let nchw = match data_block {
        Some(bi) if ds.len() == 5 => vec![ds[0], ds[1] * bi, ds[2], ds[3]],
        _ => ds.clone(),
    };
    let oihw = [ws[0] * ws[4], ws[1], ws[2], ws[3]];
    let out = nn::conv2d::conv2d_out_shape(&nchw, &oihw, a)?;
    let p = a.padding;
    let padded = [
        nchw[0],
        nchw[1],
        nchw[2] + p.top + p.bottom,
        nchw[3] + p.left + p.right,
    ];
    let key = x86::conv2d::nchwc_key(&[out[0], ws[0], out[2], out[3], ws[4]], &padded, &ws);
    Ok(x86::conv2d::channel_chunk(
        &key,
        out[3],
        ws[0],
        ws[4],
        ws[1],
        (ws[2], ws[3]),
        a.strides.1,
        data_block.unwrap_or(1),
        data.dtype(),
        cpu,
    ))
}

/// The Winograd lowering (`kernel_layout` [`winograd::KERNEL_LAYOUT`]): NCHW data is viewed
/// in blocks of the CPU's lanes first, and an NCHW output is unpacked from the blocked one.
fn lower_winograd(
    data: &TeTensor,
    weight: &TeTensor,
    attrs: &Attrs<'_>,
    a: &nn::Conv2dAttrs,
    cpu: &CpuDesc,
) -> Result<Vec<TeTensor>> {
    let blocked_in = channel_block(&attrs.str("data_layout")?).flatten();
    let ws = nn::const_shape(weight, "nn.conv2d")?;
    let (c, k) = (ws[1], ws[2]);
    let b = blocked_in.unwrap_or_else(|| cpu.f32_lanes());
    if b < 1 || c % b != 0 || k % b != 0 {
        return Err(kiln_ffi::Error::value_error(format!(
            "nn.conv2d: Winograd weights of {c} -> {k} channels need whole blocks of {b}"
        )));
    }
    let viewed;
    let data = match blocked_in {
        Some(_) => data,
        None => {
            viewed =
                kiln_topi::transform::layout::layout_transform(data, "NCHW", &format!("NCHW{b}c"))?;
            &viewed
        }
    };
    let ds = nn::const_shape(data, "nn.conv2d")?;
    let nchw = [ds[0], ds[1] * ds[4], ds[2], ds[3]];
    let out = nn::conv2d::conv2d_out_shape(&nchw, &[k, c, 3, 3], a)?;
    let y = winograd::conv2d_winograd_nchwc(
        data,
        weight,
        (a.padding.top, a.padding.left),
        (out[2], out[3]),
    )?;
    if out_block(attrs)?.is_some() {
        return one(Ok(y));
    }
    one(kiln_topi::transform::layout::layout_transform(
        &y,
        &format!("NCHW{b}c"),
        "NCHW",
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "nn.conv2d",
            &["data", "weight"],
            OpPattern::OutEWiseFusable,
            rel,
        )
        .attrs(conv_attrs())
        .compute(lower)
        .schedule(x86::schedule_conv2d_nchw),
    );
}
