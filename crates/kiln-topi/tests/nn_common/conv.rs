//! Naive references for the convolution tests: the grouped NCHW convolution and the packing
//! of OIHW weights in blocks of filters.

use super::{check, input, random_inputs, shape_of, to_blocks};
use kiln_te::Tensor;
use kiln_topi::nn::{self, Conv2dAttrs};
use kiln_topi::schedule::x86;

/// Naive grouped convolution of NCHW `d` (shape `ds`) and OIHW `w` (shape `ws`).
pub fn conv_ref(
    d: &[f32],
    ds: [i64; 4],
    w: &[f32],
    ws: [i64; 4],
    a: &Conv2dAttrs,
) -> (Vec<f32>, [i64; 4]) {
    let [n, c, h, wd] = ds;
    let [o, cpg, kh, kw] = ws;
    let p = a.padding;
    let (sh, sw) = a.strides;
    let (dh, dw) = a.dilation;
    let oh = (h + p.top + p.bottom - dh * (kh - 1) - 1) / sh + 1;
    let ow = (wd + p.left + p.right - dw * (kw - 1) - 1) / sw + 1;
    let opg = o / a.groups;
    let mut out = vec![0f32; (n * o * oh * ow) as usize];
    for b in 0..n {
        for f in 0..o {
            let g = f / opg;
            for y in 0..oh {
                for x in 0..ow {
                    let mut acc = 0f32;
                    for r in 0..cpg {
                        let ch = g * cpg + r;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = y * sh - p.top + ky * dh;
                                let ix = x * sw - p.left + kx * dw;
                                if iy >= 0 && iy < h && ix >= 0 && ix < wd {
                                    acc += d[(((b * c + ch) * h + iy) * wd + ix) as usize]
                                        * w[(((f * cpg + r) * kh + ky) * kw + kx) as usize];
                                }
                            }
                        }
                    }
                    out[(((b * o + f) * oh + y) * ow + x) as usize] = acc;
                }
            }
        }
    }
    (out, [n, o, oh, ow])
}

/// OIHW weights `w` (shape `ws`) packed in blocks of `b` filters, each of the `groups` groups
/// padded with zero filters up to whole blocks.
pub fn pack_oihw(w: &[f32], ws: [i64; 4], groups: i64, b: i64) -> Vec<f32> {
    let [o, i, kh, kw] = ws;
    let inner = (i * kh * kw) as usize;
    let (opg, b) = ((o / groups) as usize, b as usize);
    let bpg = opg.div_ceil(b);
    let mut out = vec![0f32; groups as usize * bpg * inner * b];
    for f in 0..o as usize {
        let (g, r) = (f / opg, f % opg);
        let ob = g * bpg + r / b;
        for k in 0..inner {
            out[(ob * inner + k) * b + r % b] = w[f * inner + k];
        }
    }
    out
}

/// A convolution of NCHW data `ds` by OIHW weights `ws` packed in blocks of `b` filters (each
/// group padded to whole blocks), data and output in `layouts`, with a ReLU epilogue when
/// `relu`, against the naive NCHW loops (the x86 schedule for each target and the generic
/// one). Returns the convolution (before the epilogue).
#[allow(clippy::too_many_arguments)] // one case: shapes, blocks, layouts and attributes
pub fn check_conv_layouts(
    what: &str,
    ds: [i64; 4],
    ws: [i64; 4],
    b: i64,
    a: Conv2dAttrs,
    layouts: nn::PackedLayouts,
    relu: bool,
    seed: u64,
) -> Tensor {
    let dshape: Vec<i64> = match layouts.data_block {
        Some(bi) => vec![ds[0], ds[1] / bi, ds[2], ds[3], bi],
        None => ds.to_vec(),
    };
    let data = input(&dshape, "data");
    let weight = input(&ws, "weight");
    // A depthwise kernel in channel blocks holds b channels' filters a block (packed as one
    // group); other grouped kernels pad each group to whole blocks.
    let depthwise = a.groups == ds[1] && a.groups == ws[0] && ws[1] == 1 && ws[0] % b == 0;
    let pack_groups = if depthwise { 1 } else { a.groups };
    let blocks = nn::conv2d_packed::packed_blocks(ws[0], pack_groups, b);
    let packed = input(&[blocks, ws[1], ws[2], ws[3], b], "weight_packed");
    let a = Conv2dAttrs {
        channels: Some(ws[0]),
        ..a
    };
    let conv = nn::conv2d_packed_in(&data, &packed, &a, layouts).unwrap();
    let vals = random_inputs(&[input(&ds, "d"), weight], seed);
    let (mut want, oshape) = conv_ref(&vals[0], ds, &vals[1], ws, &a);
    if relu {
        want.iter_mut().for_each(|v| *v = v.max(0.0));
    }
    let (want, oshape) = if layouts.out_blocked {
        let s = vec![oshape[0], oshape[1] / b, oshape[2], oshape[3], b];
        (to_blocks(&want, oshape, b), s)
    } else {
        (want, oshape.to_vec())
    };
    assert_eq!(shape_of(&conv), oshape, "{what}: shape");
    let out = if relu {
        kiln_te::compute(
            conv.shape(),
            |i| kiln_tir::max(conv.at_vars(i), 0.0),
            "relu",
        )
    } else {
        conv.clone()
    };
    let dvals = match layouts.data_block {
        Some(bi) => to_blocks(&vals[0], ds, bi),
        None => vals[0].clone(),
    };
    let pvals = vec![dvals, pack_oihw(&vals[1], ws, pack_groups, b)];
    check(
        what,
        &out,
        &[data, packed],
        &pvals,
        x86::schedule_conv2d_nchw,
        &want,
        1e-4,
        seed,
    );
    conv
}
