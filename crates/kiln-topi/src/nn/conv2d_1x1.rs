//! 1x1 convolutions with stride 1 and no padding as a product over flattened spatial positions:
//! `gemm[n, o, f] = sum_c data[n, g*C/G + c, f / W, f % W] * weight[o, c, 0, 0]` (`g` the group
//! of `o`), so the input rows are
//! read as contiguous vectors and the output (with its fused epilogue) is written row by row,
//! vectorized. Chosen for large planes and where its register tile beats the channel-blocked
//! kernel's ([`super::conv2d_packed`]; see [`applies`]).

use super::conv2d::{conv2d_out_shape, Conv2dAttrs};
use super::{compute_tagged, consts, invalid, shape_nd};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, Tensor};
use kiln_tir::{floordiv, floormod, CpuDesc};

/// The fewest positions for which [`conv2d_1x1`] is chosen over the channel-blocked kernel
/// whatever the register tiles: from 16 x 16 planes on, contiguous rows of positions beat
/// reading `W` columns of every input plane per tile (measured on resnet50's and squeezenet's
/// 56x56 and 28x28 layers, AVX2: 1.05-1.4x faster).
pub const MIN_POSITIONS: i64 = 256;

/// From this many float32 lanes per register on, planes under [`MIN_POSITIONS`] take the
/// channel-blocked kernel whatever the register tiles, unless groups would pad its blocks:
/// measured on AVX-512 (AMD Zen 4, `kiln tune`), it won on most such 1x1 layers of inception
/// v1, resnet50, squeezenet and shufflenet (13x13, 7x7, 6x6 and 14x14 planes; squeezenet's
/// 512 -> 1000 classifier 2.22 -> 1.68 ms), where the tile comparison below chose the spatial
/// one; shufflenet's groups of 34 and 68 filters, padded to blocks of 16, ran 1.2-1.8x faster
/// spatially. The comparison stays for narrower vectors, where it was measured (AVX2). From
/// this many lanes on, blocked 1x1 layers also keep their row-by-row register tiles rather
/// than tiles over flattened positions ([`crate::schedule::x86::conv2d_flat::applies`]).
pub const WIDE_LANES: i64 = 16;

/// The most input channels per group for which [`conv2d_1x1`] is chosen for a grouped
/// convolution (shufflenet's 68 or 34 channels per group qualify; the blocked kernel would pad
/// every group's filters).
pub const MAX_GROUP_CHANNELS: i64 = 96;

/// Whether [`conv2d_1x1`] computes this convolution (`data` `[N, C, H, W]`, OIHW `weight`) on
/// `cpu`: a 1x1 kernel, stride 1, no padding, and either groups of filters that are not whole
/// vectors on planes of at least [`MIN_POSITIONS`] or on CPUs with at least [`WIDE_LANES`]
/// float32 lanes, or a plane of at least [`MIN_POSITIONS`] whose tile's input panel fits in L1
/// (`spatial_panel_fits`), or, on CPUs with fewer lanes, a register tile
/// ([`crate::schedule::x86::conv2d::spatial_tile`]) with more accumulators than the
/// channel-blocked kernel's ([`crate::schedule::x86::conv2d::register_tile`]). Tuning records
/// decide instead where they have the layer (knob `spatial`, [`crate::tuning`]).
pub fn applies(data: &[i64], weight: &[i64], a: &Conv2dAttrs, cpu: &CpuDesc) -> bool {
    use crate::schedule::x86::conv2d::{register_tile, spatial_tile};
    let shape_ok = data.len() == 4
        && weight.len() == 4
        && (a.groups == 1 || weight[1] <= MAX_GROUP_CHANNELS)
        && weight[2] == 1
        && weight[3] == 1
        && a.strides == (1, 1)
        && a.padding.is_zero()
        && a.groups >= 1
        && weight[0] % a.groups == 0
        && data[1] == weight[1] * a.groups
        && (a.groups == 1 || weight[0] / a.groups != 1);
    if !shape_ok {
        return false;
    }
    // Tuning records may choose either kernel for this layer.
    let key = crate::tuning::workload_key("conv2d_1x1", &[data, weight, &[a.groups]]);
    if let Some(v) = crate::tuning::knob(&key, "spatial", &[0, 1]) {
        return v != 0;
    }
    let (h, w, o) = (data[2], data[3], weight[0]);
    let lanes = cpu.f32_lanes();
    // Groups whose filters are not whole blocks of lanes would pad every group's blocks in the
    // channel-blocked kernel and unpack the product afterwards.
    let padded_groups = a.groups > 1 && (o / a.groups) % lanes != 0;
    if h * w >= MIN_POSITIONS {
        return padded_groups || spatial_panel_fits(weight[1], o / a.groups, h * w, cpu);
    }
    if lanes >= WIDE_LANES {
        return padded_groups;
    }
    let (tb, cols) = register_tile(w, (o + lanes - 1) / lanes, 1, (1, 1), cpu);
    let (rows, positions) = spatial_tile(o, h * w, cpu);
    rows * positions / lanes > tb * cols
}

/// Whether the input panel of a spatial register tile (`channels` of a group, each over the
/// tile's positions: [`crate::schedule::x86::conv2d::spatial_tile`] for `rows` filters a group
/// and `positions` in the plane), which every row tile of filters reads again, fits in half of
/// the L1 data cache. Past it the channel-blocked kernel wins on large planes: resnet50's
/// 256 -> 64 and 256 -> 128 layers at 56x56, NCHW data, 1.22-1.37x faster blocked with AVX-512
/// and 1.66-1.69x with AVX2 code (`kiln tune` on an Intel Xeon), its 512-channel 28x28 layers
/// level or up to 1.11x; the 64- and 128-channel ones stayed spatial.
fn spatial_panel_fits(channels: i64, rows: i64, positions: i64, cpu: &CpuDesc) -> bool {
    let (_, tile) = crate::schedule::x86::conv2d::spatial_tile(rows, positions, cpu);
    channels * tile * 4 <= cpu.caches.l1d as i64 / 2
}

/// The convolution as a spatial product (tag [`tag::CONV2D_1X1_SPATIAL`], named
/// `conv2d_1x1_gemm`, shape `[N, O, H*W]`) and an injective stage giving it NCHW shape.
pub fn conv2d_1x1(
    data: &Tensor,
    weight: &Tensor,
    attrs: &Conv2dAttrs,
    cpu: &CpuDesc,
) -> Result<Tensor> {
    const WHAT: &str = "conv2d (1x1 spatial)";
    let ds = shape_nd(data, 4, WHAT)?;
    let ws = shape_nd(weight, 4, WHAT)?;
    if !applies(&ds, &ws, attrs, cpu) {
        return Err(invalid(WHAT, format!("does not apply to {ds:?} x {ws:?}")));
    }
    let out = conv2d_out_shape(&ds, &ws, attrs)?;
    let w = ds[3];
    let (cpg, opg) = (ws[1], out[1] / attrs.groups);
    let grouped = attrs.groups > 1;
    let rc = reduce_axis_n(ws[1], "rc");
    let (d, wt) = (data.clone(), weight.clone());
    let zero = || kiln_tir::PrimExpr::i32(0);
    let gemm = compute_tagged(
        &consts(&[out[0], out[1], out[2] * out[3]]),
        |i| {
            let f = i[2].to_expr();
            let ch = if grouped {
                floordiv(i[1].to_expr(), opg) * cpg + rc.expr()
            } else {
                rc.expr()
            };
            sum(
                d.at(&[i[0].to_expr(), ch, floordiv(&f, w), floormod(&f, w)])
                    * wt.at(&[i[1].to_expr(), rc.expr(), zero(), zero()]),
                std::slice::from_ref(&rc),
            )
        },
        "conv2d_1x1_gemm",
        tag::CONV2D_1X1_SPATIAL,
    )?;
    compute_tagged(
        &consts(&out),
        |i| {
            gemm.at(&[
                i[0].to_expr(),
                i[1].to_expr(),
                i[2].to_expr() * w + i[3].to_expr(),
            ])
        },
        "conv2d_1x1_unflatten",
        tag::INJECTIVE,
    )
}
