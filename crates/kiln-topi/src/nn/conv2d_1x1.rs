//! 1x1 convolutions with stride 1 and no padding as a product over flattened spatial positions:
//! `gemm[n, o, f] = sum_c data[n, g*C/G + c, f / W, f % W] * weight[o, c, 0, 0]` (`g` the group
//! of `o`), so the input rows are
//! read as contiguous vectors and the output (with its fused epilogue) is written row by row,
//! vectorized. Chosen where whole output rows make up whole vectors ([`spatial_rows`]): the
//! early, wide layers of CNNs, whose few input channels leave little work per output for a
//! channel-blocked kernel ([`super::conv2d_packed`]) to hide its write-back.

use super::conv2d::{conv2d_out_shape, Conv2dAttrs};
use super::{compute_tagged, consts, invalid, shape_nd, tag};
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, Tensor};
use kiln_tir::{floordiv, floormod, CpuDesc};

/// The number of output rows per tile for an `h x w` output on `cpu`: the fewest rows making
/// whole float32 vectors that divide `h`, as long as a tile is at most a quarter of the vector
/// registers (8 vectors on AVX-512, 4 on AVX2); `None` when there is none. (Whole 14x14 planes
/// as 13 vectors, the last partial, measured 1.3-1.6x slower than the channel-blocked kernel on
/// shufflenet's layers.)
pub fn spatial_rows(h: i64, w: i64, cpu: &CpuDesc) -> Option<i64> {
    let lanes = cpu.f32_lanes();
    let max_vectors = (cpu.vector_registers as i64 / 4).max(1);
    (1..=h)
        .filter(|r| h % r == 0 && (r * w) % lanes == 0)
        .find(|r| r * w / lanes <= max_vectors)
}

/// The most input channels (per group) for which [`conv2d_1x1`] is chosen: a tile's panel of
/// input rows (`C x 7 vectors`) must stay in the L1 cache while every channel tile reads it.
/// Measured on resnet50's layers: 1.6-2.4x faster than the channel-blocked kernel at 64 input
/// channels, 1.1-1.8x slower from 128 on. Grouped convolutions (shufflenet's 68 or 34 channels
/// per group) qualify up to 96, where the blocked kernel would pad every group's filters.
pub const MAX_CHANNELS: i64 = 64;

/// [`MAX_CHANNELS`] for grouped convolutions.
pub const MAX_GROUP_CHANNELS: i64 = 96;

/// Whether [`conv2d_1x1`] computes this convolution (`data` `[N, C, H, W]`, OIHW `weight`) on
/// `cpu`.
pub fn applies(data: &[i64], weight: &[i64], a: &Conv2dAttrs, cpu: &CpuDesc) -> bool {
    data.len() == 4
        && weight.len() == 4
        && weight[1]
            <= if a.groups > 1 {
                MAX_GROUP_CHANNELS
            } else {
                MAX_CHANNELS
            }
        && weight[2] == 1
        && weight[3] == 1
        && a.strides == (1, 1)
        && a.padding.is_zero()
        && a.groups >= 1
        && weight[0] % a.groups == 0
        && data[1] == weight[1] * a.groups
        && (a.groups == 1 || weight[0] / a.groups != 1)
        && spatial_rows(data[2], data[3], cpu).is_some()
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
