//! 2-D convolution with a packed kernel: `OIHW{b}o` weights (`[O/b, C/groups, KH, KW, b]`,
//! made at compile time by `layout_transform`), data NCHW or in channel blocks (`NCHW{bi}c`,
//! `[N, C/bi, H, W, bi]`), output NCHW or in the kernel's blocks ([`PackedLayouts`]). The
//! product is computed in blocks of `b` output channels (`[N, O/b, OH, OW, b]`, tag
//! [`tag::CONV2D_NCHWC`]), so one vector of `b` weights meets one broadcast input value; for
//! an NCHW output an injective stage writes it back, and fused epilogues inline into that
//! stage (or into the blocked output itself). When groups pad their blocks, output tiles do not
//! line up with blocks, and the product is tagged [`tag::CONV2D_NCHWC_GROUP_PADDED`] (computed
//! whole before the unpack).

use super::conv2d::{conv2d_out_shape, Conv2dAttrs};
use super::pad::pad_nchw;
use super::{compute_tagged, consts, invalid, shape_nd};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, Tensor};
use kiln_tir::{floordiv, floormod, PrimExpr};

/// The layouts of a packed convolution's data and output (the graph's `data_layout` and
/// `out_layout`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PackedLayouts {
    /// `Some(bi)`: the data is `NCHW{bi}c` (`[N, C/bi, H, W, bi]`, one group only); `None`:
    /// NCHW.
    pub data_block: Option<i64>,
    /// Whether the output stays in the kernel's blocks (`NCHW{b}c`: the blocked product with
    /// no unpack; whole blocks only).
    pub out_blocked: bool,
    /// `Some(k)`: the input channels are summed `k` at a time, each pass a partial product
    /// ([`tag::CONV2D_NCHWC_PARTIAL`], `[C/k, N, O/b, OH, OW, b]`) that the blocked product adds
    /// up, so that a tile's weights of one pass stay in the L1 cache while the pass sweeps the
    /// output rows. Taken when `k` divides the channels, is a whole number of data blocks and
    /// the convolution has one group; else the channels are summed in one pass.
    pub channel_chunk: Option<i64>,
    /// Whether a 1x1 convolution over blocked data into a blocked output is computed over
    /// its flattened output positions ([`tag::CONV2D_NCHWC_FLAT`], `[N, O/b, OH*OW, b]`),
    /// so that a register tile may span several output rows. Taken for one group, no padding
    /// and one pass (no `channel_chunk`), at any stride; else the rows stay apart.
    pub flat_positions: bool,
}

/// Whether a packed weight of shape `ws` (`[O/b, 1, KH, KW, b]`) is a depthwise convolution's
/// in channel blocks: `o` output channels, one per group, in whole blocks of `b`, a block's
/// lanes the filters of `b` neighbouring channels ([`depthwise_nchwc`]), unlike other grouped
/// weights, whose groups are padded to whole blocks ([`packed_blocks`]).
pub fn is_blocked_depthwise(o: i64, groups: i64, ws: &[i64]) -> bool {
    groups == o && ws.len() == 5 && ws[1] == 1 && ws[4] > 0 && ws[0] * ws[4] == o
}

/// The number of kernel blocks of `b` filters for `o` output channels in `groups` groups: each
/// group's filters are padded up to whole blocks, so that a vector never spans two groups.
pub fn packed_blocks(o: i64, groups: i64, b: i64) -> i64 {
    let opg = o / groups.max(1);
    groups * ((opg + b - 1) / b)
}

/// `out[n, o, y, x] = sum_{c, ry, rx} pad(data)[n, g*C/G + c, y*sh + ry*dh, x*sw + rx*dw] *
/// weight[g*B + r/b, c, ry, rx, r % b]` with `g = o / (O/G)`, `r = o % (O/G)` and `B` the blocks
/// per group ([`packed_blocks`]): each group's filters padded up to whole blocks of `b` (zeros
/// beyond the group's `O/G`), `O` being `attrs.channels` (default: all packed filters). Without
/// groups this is the `OIHW{b}o` layout. The padding stage is named `pad_data`, the blocked
/// product `conv2d_nchwc`.
pub fn conv2d_packed(data: &Tensor, weight: &Tensor, attrs: &Conv2dAttrs) -> Result<Tensor> {
    conv2d_packed_in(data, weight, attrs, PackedLayouts::default())
}

/// [`conv2d_packed`] with data and output in the layouts of `layouts`: blocked data is read
/// as `data[n, c / bi, y, x, c % bi]` with the channel reduction split into its blocks and
/// the channels inside a block (outside the kernel taps, so the weights stream in order); a
/// blocked output is the product itself.
pub fn conv2d_packed_in(
    data: &Tensor,
    weight: &Tensor,
    attrs: &Conv2dAttrs,
    layouts: PackedLayouts,
) -> Result<Tensor> {
    const W: &str = "conv2d (packed kernel)";
    let ds = match layouts.data_block {
        None => shape_nd(data, 4, W)?,
        Some(bi) => {
            let d = shape_nd(data, 5, W)?;
            let depthwise = attrs.groups == d[1] * bi;
            if d[4] != bi || (attrs.groups != 1 && !depthwise) {
                return Err(invalid(
                    W,
                    format!(
                        "data blocks of {} (layout NCHW{bi}c) in {} groups: blocked data must \
                         match its layout and have one group or one per channel",
                        d[4], attrs.groups
                    ),
                ));
            }
            vec![d[0], d[1] * bi, d[2], d[3]]
        }
    };
    let ws = shape_nd(weight, 5, W)?;
    let b = ws[4];
    let groups = attrs.groups;
    let o = attrs.channels.unwrap_or(ws[0] * b);
    if is_blocked_depthwise(o, groups, &ws) {
        return depthwise_nchwc(data, weight, attrs, &ds, layouts);
    }
    if b < 1 || o < 1 || groups < 1 || o % groups != 0 || packed_blocks(o, groups, b) != ws[0] {
        return Err(invalid(
            W,
            format!(
                "{o} output channels in {groups} groups do not fit {} blocks of {b}",
                ws[0]
            ),
        ));
    }
    if layouts.out_blocked && o % b != 0 {
        return Err(invalid(
            W,
            format!("a blocked output needs whole blocks of {b}, not {o} channels"),
        ));
    }
    let oihw = [o, ws[1], ws[2], ws[3]];
    let out = conv2d_out_shape(&ds, &oihw, attrs)?;
    let opg = out[1] / groups;
    let bpg = ws[0] / groups;
    let (cpg, kh, kw) = (ws[1], ws[2], ws[3]);
    let (sh, sw) = attrs.strides;
    let (dh, dw) = attrs.dilation;
    let padded = pad_nchw(data, attrs.padding, 0.0, super::pad::PAD_STAGE)?;
    let chunk = layouts.channel_chunk.filter(|&k| {
        k > 0 && k < cpg && cpg % k == 0 && groups == 1 && k % layouts.data_block.unwrap_or(1) == 0
    });
    let ry = reduce_axis_n(kh, "ry");
    let rx = reduce_axis_n(kw, "rx");
    // The channels of one pass (all of them without a chunk): blocked data as (block,
    // channel in block), the latter innermost.
    let pass_channels = chunk.unwrap_or(cpg);
    let (rc, rci) = match layouts.data_block {
        None => (reduce_axis_n(pass_channels, "rc"), None),
        Some(bi) => (
            reduce_axis_n(pass_channels / bi, "rco"),
            Some((reduce_axis_n(bi, "rci"), bi)),
        ),
    };
    // The reduction in the order of the packed weights (`c`, then the taps): one stream.
    let mut red = vec![rc.clone()];
    red.extend(rci.iter().map(|(r, _)| r.clone()));
    red.extend([ry.clone(), rx.clone()]);
    // The product over the channels of one pass, the first of them `c0` (0 when `None`).
    let product =
        |c0: Option<PrimExpr>, n: PrimExpr, ob: PrimExpr, y: PrimExpr, x: PrimExpr, oi| {
            let (iy, ix) = (y * sh + ry.expr() * dh, x * sw + rx.expr() * dw);
            let (input, c): (PrimExpr, PrimExpr) = match &rci {
                None => {
                    let ch = if groups == 1 {
                        c0.map_or_else(|| rc.expr(), |c| c + rc.expr())
                    } else {
                        floordiv(&ob, bpg) * cpg + rc.expr()
                    };
                    (padded.at(&[n, ch.clone(), iy, ix]), ch)
                }
                Some((r, bi)) => {
                    let cb = c0.map_or_else(|| rc.expr(), |c| floordiv(&c, *bi) + rc.expr());
                    (
                        padded.at(&[n, cb.clone(), iy, ix, r.expr()]),
                        cb * *bi + r.expr(),
                    )
                }
            };
            let c = if groups == 1 { c } else { rc.expr() };
            sum(input * weight.at(&[ob, c, ry.expr(), rx.expr(), oi]), &red)
        };
    let tag = if groups > 1 && opg % b != 0 {
        tag::CONV2D_NCHWC_GROUP_PADDED
    } else {
        tag::CONV2D_NCHWC
    };
    let shape = [out[0], ws[0], out[2], out[3], b];
    let flat = layouts.flat_positions
        && (kh, kw) == (1, 1)
        && attrs.padding.is_zero()
        && groups == 1
        && chunk.is_none()
        && layouts.out_blocked;
    if let (true, Some(bi)) = (flat, layouts.data_block) {
        return flat_positions(data, weight, &shape, (cpg, bi), attrs.strides);
    }
    let blocked = match chunk {
        None => compute_tagged(
            &consts(&shape),
            |i| {
                let [n, ob, y, x, oi] = [0, 1, 2, 3, 4].map(|k| i[k].to_expr());
                product(None, n, ob, y, x, oi)
            },
            "conv2d_nchwc",
            tag,
        )?,
        Some(k) => {
            let mut pshape = vec![cpg / k];
            pshape.extend(shape);
            let partial = compute_tagged(
                &consts(&pshape),
                |i| {
                    let [p, n, ob, y, x, oi] = [0, 1, 2, 3, 4, 5].map(|j| i[j].to_expr());
                    product(Some(p * k), n, ob, y, x, oi)
                },
                "conv2d_nchwc_partial",
                tag::CONV2D_NCHWC_PARTIAL,
            )?;
            let rp = reduce_axis_n(cpg / k, "rp");
            compute_tagged(
                &consts(&shape),
                |i| {
                    let mut idx = vec![rp.expr()];
                    idx.extend(i.iter().map(|v| v.to_expr()));
                    sum(partial.at(&idx), std::slice::from_ref(&rp))
                },
                "conv2d_nchwc",
                tag,
            )?
        }
    };
    if layouts.out_blocked {
        return Ok(blocked);
    }
    compute_tagged(
        &consts(&out),
        |i| {
            let o = i[1].to_expr();
            let (ob, oi) = if groups == 1 || opg % b == 0 {
                (floordiv(&o, b), floormod(&o, b))
            } else {
                let r = floormod(&o, opg);
                (floordiv(&o, opg) * bpg + floordiv(&r, b), floormod(&r, b))
            };
            blocked.at(&[i[0].to_expr(), ob, i[2].to_expr(), i[3].to_expr(), oi])
        },
        "conv2d_unpack",
        tag::INJECTIVE,
    )
}

/// A depthwise convolution in channel blocks ([`is_blocked_depthwise`]) of blocked `data`
/// (`nchw` its NCHW shape) into a blocked output: `out[n, cb, y, x, v] = sum_{ry, rx}
/// pad(data)[n, cb, y*sh + ry*dh, x*sw + rx*dw, v] * weight[cb, 0, ry, rx, v]`, every tap one
/// vector multiply-add of `b` channels at any stride, tagged
/// [`tag::DEPTHWISE_CONV2D_NCHWC`].
fn depthwise_nchwc(
    data: &Tensor,
    weight: &Tensor,
    attrs: &Conv2dAttrs,
    nchw: &[i64],
    layouts: PackedLayouts,
) -> Result<Tensor> {
    const W: &str = "depthwise conv2d (channel blocks)";
    let ws = shape_nd(weight, 5, W)?;
    let b = ws[4];
    if layouts.data_block != Some(b) || !layouts.out_blocked {
        return Err(invalid(
            W,
            format!(
                "needs data and output in the kernel's blocks of {b}, got data {:?}, output {}",
                layouts.data_block,
                if layouts.out_blocked {
                    "blocked"
                } else {
                    "NCHW"
                }
            ),
        ));
    }
    let out = conv2d_out_shape(nchw, &[ws[0] * b, 1, ws[2], ws[3]], attrs)?;
    // Data in memory: the padding is not a stage of its own, its bounds checks inline into the
    // taps, which read the data in place (a tap's check is per column, the same for a block's
    // lanes). A padded copy of the input cost as much again as the product: MobileNetV2's
    // stride-2 96-channel layer at 112x112, 0.52 -> 0.24 ms (AVX-512 code, AMD EPYC family 25
    // model 17), the stride-1 layers 20-60% faster. Data computed by fused operators (a
    // channel shuffle, a residual add, a layout change) is computed once into the padded
    // stage instead of again at every tap.
    let in_memory = matches!(data.op().kind(), kiln_te::OpKind::Placeholder(_));
    let stage = if in_memory {
        "depthwise_pad"
    } else {
        super::pad::PAD_STAGE
    };
    let padded = pad_nchw(data, attrs.padding, 0.0, stage)?;
    let (sh, sw) = attrs.strides;
    let (dh, dw) = attrs.dilation;
    let ry = reduce_axis_n(ws[2], "ry");
    let rx = reduce_axis_n(ws[3], "rx");
    let weight = weight.clone();
    compute_tagged(
        &consts(&[out[0], ws[0], out[2], out[3], b]),
        |i| {
            let [n, cb, y, x, v] = [0, 1, 2, 3, 4].map(|k| i[k].to_expr());
            let input = padded.at(&[
                n,
                cb.clone(),
                y * sh + ry.expr() * dh,
                x * sw + rx.expr() * dw,
                v.clone(),
            ]);
            let w = weight.at(&[cb, PrimExpr::i32(0), ry.expr(), rx.expr(), v]);
            sum(input * w, &[ry.clone(), rx.clone()])
        },
        "depthwise_conv2d_nchwc",
        tag::DEPTHWISE_CONV2D_NCHWC,
    )
}

/// The name of the stage that copies a strided 1x1 convolution's input positions together
/// ([`flat_positions`]), which schedules compute before the product.
pub const SUBSAMPLE_STAGE: &str = "conv2d_subsample";

/// The blocked product of a 1x1 convolution over its flattened output positions
/// ([`PackedLayouts::flat_positions`]) of blocked `data` (`[N, C/bi, H, W, bi]`, `channels` C
/// in blocks of `bi`) and packed `weight` (`[O/b, C, 1, 1, b]`): `flat[n, ob, p, oi] = sum_c data[n, c / bi, p / OW * sh,
/// p % OW * sw, c % bi] * weight[ob, c, 0, 0, oi]`, then the blocked output `shape` (`[N, O/b,
/// OH, OW, b]`) reading it back by row and column (an injective stage, which its readers
/// inline). With a stride, the positions it reads are first copied together
/// ([`SUBSAMPLE_STAGE`], `[N, C/bi, OH, OW, bi]`): the product then reads a quarter of the
/// data's lines at stride 2, once, instead of every line again for each tile of filters.
fn flat_positions(
    data: &Tensor,
    weight: &Tensor,
    shape: &[i64; 5],
    (channels, bi): (i64, i64),
    (sh, sw): (i64, i64),
) -> Result<Tensor> {
    let (oh, ow) = (shape[2], shape[3]);
    let input = if (sh, sw) == (1, 1) {
        data.clone()
    } else {
        let d = data.clone();
        compute_tagged(
            &consts(&[shape[0], channels / bi, oh, ow, bi]),
            |i| {
                let [n, cb, y, x, ci] = [0, 1, 2, 3, 4].map(|k| i[k].to_expr());
                d.at(&[n, cb, y * sh, x * sw, ci])
            },
            SUBSAMPLE_STAGE,
            tag::INJECTIVE,
        )?
    };
    let rco = reduce_axis_n(channels / bi, "rco");
    let rci = reduce_axis_n(bi, "rci");
    let zero = || PrimExpr::i32(0);
    let positions = compute_tagged(
        &consts(&[shape[0], shape[1], oh * ow, shape[4]]),
        |i| {
            let [n, ob, p, oi] = [0, 1, 2, 3].map(|k| i[k].to_expr());
            let x = input.at(&[
                n,
                rco.expr(),
                floordiv(&p, ow),
                floormod(&p, ow),
                rci.expr(),
            ]);
            let c = rco.expr() * bi + rci.expr();
            let w = weight.at(&[ob, c, zero(), zero(), oi]);
            sum(x * w, &[rco.clone(), rci.clone()])
        },
        "conv2d_nchwc_flat",
        tag::CONV2D_NCHWC_FLAT,
    )?;
    compute_tagged(
        &consts(shape),
        |i| {
            let [n, ob, y, x, oi] = [0, 1, 2, 3, 4].map(|k| i[k].to_expr());
            positions.at(&[n, ob, y * ow + x, oi])
        },
        "conv2d_nchwc",
        tag::INJECTIVE,
    )
}
