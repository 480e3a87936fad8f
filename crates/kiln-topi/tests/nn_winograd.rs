//! Winograd F(2x2, 3x3) convolutions over channel blocks against a naive direct convolution:
//! planes of odd and even sizes (a last tile half outside), padding 1 and 0, several blocks of
//! input and output channels, for each x86 target the host runs and the generic schedule.

mod nn_common;

use kiln_topi::nn::conv2d_winograd::{
    conv2d_winograd_nchwc, schedule_conv2d_winograd, transform_weights,
};
use nn_common::*;

/// Direct 3x3 convolution of NCHW `d` with OIHW `w`, padding `p` on every side.
fn direct(d: &[f32], [n, c, h, wd]: [i64; 4], w: &[f32], k: i64, p: i64) -> (Vec<f32>, [i64; 4]) {
    let (oh, ow) = (h + 2 * p - 2, wd + 2 * p - 2);
    let mut out = vec![0f32; (n * k * oh * ow) as usize];
    for b in 0..n {
        for o in 0..k {
            for y in 0..oh {
                for x in 0..ow {
                    let mut acc = 0f64;
                    for ch in 0..c {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (iy, ix) = (y + ky - p, x + kx - p);
                                if iy >= 0 && iy < h && ix >= 0 && ix < wd {
                                    let dv = d[(((b * c + ch) * h + iy) * wd + ix) as usize];
                                    let wv = w[(((o * c + ch) * 3 + ky) * 3 + kx) as usize];
                                    acc += dv as f64 * wv as f64;
                                }
                            }
                        }
                    }
                    out[(((b * k + o) * oh + y) * ow + x) as usize] = acc as f32;
                }
            }
        }
    }
    (out, [n, k, oh, ow])
}

#[test]
fn winograd_matches_the_direct_convolution() {
    let seed = seed("conv2d_winograd");
    let b = 16;
    // The products in blocks of tiles, and (128 -> 128) of all tiles at once.
    let cases = [
        (32, 16, 7, 7, 1),
        (16, 32, 8, 6, 1),
        (16, 16, 9, 5, 0),
        (128, 128, 6, 5, 1),
    ];
    for (k, (c, o, h, w, p)) in cases.into_iter().enumerate() {
        let ds = [1, c, h, w];
        let d = random((c * h * w) as usize, seed + k as u64);
        let wt = random((o * c * 9) as usize, seed + 100 + k as u64);
        let (want, os) = direct(&d, ds, &wt, o, p);
        let u = transform_weights(&wt, o as usize, c as usize);
        let data = input(&[1, c / b, h, w, b], "data");
        let ut = input(&[16, c, o], "u");
        let out = conv2d_winograd_nchwc(&data, &ut, (p, p), (os[2], os[3])).unwrap();
        check(
            &format!("winograd {c} -> {o}, {h}x{w}, padding {p}"),
            &out,
            &[data, ut],
            &[to_blocks(&d, ds, b), u],
            schedule_conv2d_winograd,
            &to_blocks(&want, os, b),
            2e-4,
            seed,
        );
    }
}
