//! Naive references for the convolution tests: the grouped NCHW convolution and the packing
//! of OIHW weights in blocks of filters.

use kiln_topi::nn::Conv2dAttrs;

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
