//! conv2d (grouped, depthwise, strided, dilated, asymmetric padding, with a fused epilogue)
//! and conv2d_transpose, built for the host CPU against naive loops.

mod nn_common;

use kiln_te::Tensor;
use kiln_topi::nn::{self, Conv2dAttrs, Conv2dTransposeAttrs, Padding2d};
use kiln_topi::schedule::x86;
use nn_common::conv::{check_conv_layouts, conv_ref};
use nn_common::*;

fn check_conv(what: &str, ds: [i64; 4], ws: [i64; 4], a: Conv2dAttrs, seed: u64) {
    check_conv_with(what, ds, ws, a, seed, nn::conv2d);
}

/// A convolution compute on OIHW weights.
type ConvFn = fn(&Tensor, &Tensor, &Conv2dAttrs) -> kiln_ffi::Result<Tensor>;

/// Builds `compute` for `ds` x `ws`, runs it under the x86 schedule on fresh inputs and
/// compares with [`conv_ref`].
fn check_conv_with(
    what: &str,
    ds: [i64; 4],
    ws: [i64; 4],
    a: Conv2dAttrs,
    seed: u64,
    compute: ConvFn,
) {
    let data = input(&ds, "data");
    let weight = input(&ws, "weight");
    let out = compute(&data, &weight, &a).unwrap();
    let inputs = [data, weight];
    let vals = random_inputs(&inputs, seed);
    let (want, oshape) = conv_ref(&vals[0], ds, &vals[1], ws, &a);
    assert_eq!(shape_of(&out), oshape.to_vec(), "{what}: shape");
    check(
        what,
        &out,
        &inputs,
        &vals,
        x86::schedule_conv2d_nchw,
        &want,
        1e-4,
        seed,
    );
}

#[test]
fn conv2d_generic_shapes() {
    let seed = seed("conv2d_generic");
    let base = Conv2dAttrs::default();
    check_conv(
        "3x3 pad1",
        [1, 3, 9, 9],
        [8, 3, 3, 3],
        Conv2dAttrs {
            padding: Padding2d::same(1),
            ..base
        },
        seed,
    );
    check_conv("1x1 odd", [2, 5, 7, 11], [6, 5, 1, 1], base, seed + 1);
    check_conv(
        "stride2 asym pad",
        [1, 4, 10, 13],
        [4, 4, 3, 3],
        Conv2dAttrs {
            strides: (2, 2),
            padding: Padding2d::from_array([0, 1, 2, 1]),
            ..base
        },
        seed + 2,
    );
    check_conv(
        "dilation2",
        [1, 3, 12, 16],
        [5, 3, 3, 3],
        Conv2dAttrs {
            dilation: (2, 2),
            padding: Padding2d::same(2),
            ..base
        },
        seed + 3,
    );
    check_conv(
        "rect kernel, stride (1,2), dilation (2,1)",
        [1, 2, 9, 17],
        [3, 2, 2, 3],
        Conv2dAttrs {
            strides: (1, 2),
            dilation: (2, 1),
            padding: Padding2d::from_array([1, 0, 0, 2]),
            ..base
        },
        seed + 4,
    );
}

#[test]
fn conv2d_groups_and_depthwise() {
    let seed = seed("conv2d_groups");
    let base = Conv2dAttrs::default();
    check_conv(
        "groups 2",
        [1, 6, 8, 8],
        [4, 3, 3, 3],
        Conv2dAttrs {
            groups: 2,
            padding: Padding2d::same(1),
            ..base
        },
        seed,
    );
    check_conv(
        "depthwise 3x3 stride2",
        [1, 8, 11, 11],
        [8, 1, 3, 3],
        Conv2dAttrs {
            groups: 8,
            strides: (2, 2),
            padding: Padding2d::same(1),
            ..base
        },
        seed + 1,
    );
    check_conv(
        "depthwise stride (1,2), 2x5 kernel, asymmetric padding, multiplier 2",
        [1, 3, 7, 14],
        [6, 1, 2, 5],
        Conv2dAttrs {
            groups: 3,
            strides: (1, 2),
            padding: Padding2d::from_array([1, 2, 0, 1]),
            ..base
        },
        seed + 3,
    );
    // Rows of two to four vectors and a partial one (28 and 60 columns: 3.5 vectors of AVX2
    // and of AVX-512), computed as one vector a row.
    for (k, width) in [28i64, 60].into_iter().enumerate() {
        check_conv(
            &format!("depthwise 3x3, rows of {width}"),
            [1, 4, 5, width],
            [4, 1, 3, 3],
            Conv2dAttrs {
                groups: 4,
                padding: Padding2d::same(1),
                ..base
            },
            seed + 4 + k as u64,
        );
    }
    // Rows of whole vectors or of one vector at most accumulate several rows a tile (14 rows
    // of 16 columns; 12 rows of 14, a 7x7 kernel).
    for (k, (h, w, kk)) in [(14i64, 16i64, 3i64), (12, 14, 7)].into_iter().enumerate() {
        check_conv(
            &format!("depthwise {kk}x{kk}, {h} rows of {w}"),
            [1, 4, h, w],
            [4, 1, kk, kk],
            Conv2dAttrs {
                groups: 4,
                padding: Padding2d::same(kk / 2),
                ..base
            },
            seed + 6 + k as u64,
        );
    }
    check_conv(
        "depthwise multiplier 2, dilation 2",
        [2, 3, 10, 16],
        [6, 1, 3, 3],
        Conv2dAttrs {
            groups: 3,
            dilation: (2, 2),
            padding: Padding2d::from_array([2, 1, 2, 3]),
            ..base
        },
        seed + 2,
    );
}

#[test]
fn conv2d_with_fused_bias_relu() {
    let seed = seed("conv2d_epilogue");
    let (ds, ws) = ([1, 4, 8, 16], [8, 4, 3, 3]);
    let a = Conv2dAttrs {
        padding: Padding2d::same(1),
        ..Conv2dAttrs::default()
    };
    let data = input(&ds, "data");
    let weight = input(&ws, "weight");
    let bias = input(&[8], "bias");
    let conv = nn::conv2d(&data, &weight, &a).unwrap();
    let b = bias.clone();
    let out: Tensor = kiln_te::compute(
        conv.shape(),
        |i| kiln_tir::max(conv.at_vars(i) + b.at(&[i[1].to_expr()]), 0.0),
        "bias_relu",
    );
    let inputs = [data, weight, bias];
    let vals = random_inputs(&inputs, seed);
    let (conv_want, oshape) = conv_ref(&vals[0], ds, &vals[1], ws, &a);
    let plane = (oshape[2] * oshape[3]) as usize;
    let want: Vec<f32> = conv_want
        .iter()
        .enumerate()
        .map(|(k, v)| (v + vals[2][(k / plane) % 8]).max(0.0))
        .collect();
    check(
        "conv+bias+relu",
        &out,
        &inputs,
        &vals,
        x86::schedule_conv2d_nchw,
        &want,
        1e-4,
        seed,
    );
}

/// Naive transposed convolution: every input element scatters `w` into the output.
fn conv_t_ref(
    d: &[f32],
    ds: [i64; 4],
    w: &[f32],
    ws: [i64; 4],
    a: &Conv2dTransposeAttrs,
) -> (Vec<f32>, [i64; 4]) {
    let [n, c, h, wd] = ds;
    let [_, cog, kh, kw] = ws;
    let p = a.padding;
    let (sh, sw) = a.strides;
    let (dh, dw) = a.dilation;
    let oh = (h - 1) * sh - p.top - p.bottom + dh * (kh - 1) + a.output_padding.0 + 1;
    let ow = (wd - 1) * sw - p.left - p.right + dw * (kw - 1) + a.output_padding.1 + 1;
    let o = cog * a.groups;
    let cig = c / a.groups;
    let mut out = vec![0f32; (n * o * oh * ow) as usize];
    for b in 0..n {
        for ch in 0..c {
            let g = ch / cig;
            for y in 0..h {
                for x in 0..wd {
                    let v = d[(((b * c + ch) * h + y) * wd + x) as usize];
                    for oc in 0..cog {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let oy = y * sh + ky * dh - p.top;
                                let ox = x * sw + kx * dw - p.left;
                                if oy >= 0 && oy < oh && ox >= 0 && ox < ow {
                                    let f = g * cog + oc;
                                    out[(((b * o + f) * oh + oy) * ow + ox) as usize] +=
                                        v * w[(((ch * cog + oc) * kh + ky) * kw + kx) as usize];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    (out, [n, o, oh, ow])
}

#[test]
fn conv2d_transpose_shapes() {
    let seed = seed("conv2d_transpose");
    let base = Conv2dTransposeAttrs::default();
    let cases = [
        (
            "stride2 pad1 outpad1",
            [1, 4, 5, 5],
            [4, 3, 3, 3],
            Conv2dTransposeAttrs {
                strides: (2, 2),
                padding: Padding2d::same(1),
                output_padding: (1, 1),
                ..base
            },
        ),
        ("stride1", [1, 3, 6, 7], [3, 5, 3, 2], base),
        (
            "groups 2, dilation 2, asym",
            [2, 4, 4, 6],
            [4, 2, 3, 3],
            Conv2dTransposeAttrs {
                groups: 2,
                dilation: (2, 2),
                strides: (2, 1),
                padding: Padding2d::from_array([1, 0, 2, 1]),
                ..base
            },
        ),
    ];
    for (k, (what, ds, ws, a)) in cases.into_iter().enumerate() {
        let data = input(&ds, "data");
        let weight = input(&ws, "weight");
        let out = nn::conv2d_transpose(&data, &weight, &a).unwrap();
        let inputs = [data, weight];
        let vals = random_inputs(&inputs, seed + k as u64);
        let (want, oshape) = conv_t_ref(&vals[0], ds, &vals[1], ws, &a);
        assert_eq!(shape_of(&out), oshape.to_vec(), "{what}: shape");
        check(
            what,
            &out,
            &inputs,
            &vals,
            x86::schedule_conv2d_nchw,
            &want,
            1e-4,
            seed,
        );
    }
}

#[test]
fn conv2d_rejects_bad_shapes() {
    let data = input(&[1, 4, 5, 5], "data");
    let weight = input(&[4, 3, 3, 3], "weight");
    assert!(nn::conv2d(&data, &weight, &Conv2dAttrs::default()).is_err());
    let weight = input(&[4, 4, 7, 7], "weight");
    assert!(nn::conv2d(&data, &weight, &Conv2dAttrs::default()).is_err());
}

fn check_conv_packed(what: &str, ds: [i64; 4], ws: [i64; 4], b: i64, a: Conv2dAttrs, seed: u64) {
    check_conv_layouts(
        what,
        ds,
        ws,
        b,
        a,
        nn::PackedLayouts::default(),
        false,
        seed,
    );
}

#[test]
fn conv2d_packed_kernel_shapes() {
    let seed = seed("conv2d_packed");
    let base = Conv2dAttrs::default();
    let pad1 = Conv2dAttrs {
        padding: Padding2d::same(1),
        ..base
    };
    check_conv_packed(
        "3x3 pad1 odd width",
        [1, 5, 9, 13],
        [32, 5, 3, 3],
        16,
        pad1,
        seed,
    );
    check_conv_packed("1x1", [2, 24, 7, 7], [16, 24, 1, 1], 16, base, seed + 1);
    check_conv_packed(
        "3x3, 55 wide: a shorter last column tile",
        [1, 4, 3, 55],
        [16, 4, 3, 3],
        16,
        pad1,
        seed + 6,
    );
    check_conv_packed(
        "padded last block",
        [1, 6, 5, 9],
        [40, 6, 3, 3],
        16,
        pad1,
        seed + 4,
    );
    check_conv_packed(
        "7 wide, 2 blocks a tile",
        [1, 8, 7, 7],
        [64, 8, 1, 1],
        16,
        base,
        seed + 5,
    );
    check_conv_packed(
        "stride 2, block 8",
        [1, 3, 17, 17],
        [8, 3, 7, 7],
        8,
        Conv2dAttrs {
            strides: (2, 2),
            padding: Padding2d::same(3),
            ..base
        },
        seed + 2,
    );
    check_conv_packed(
        "grouped, dilated",
        [1, 8, 10, 10],
        [32, 4, 3, 3],
        16,
        Conv2dAttrs {
            groups: 2,
            dilation: (2, 2),
            padding: Padding2d::from_array([2, 1, 2, 3]),
            ..base
        },
        seed + 3,
    );
    assert!(
        nn::conv2d_packed(
            &input(&[1, 16, 4, 4], "d"),
            &input(&[2, 4, 3, 3, 8], "w"),
            &Conv2dAttrs { groups: 4, ..base }
        )
        .is_err(),
        "a block spanning two groups is refused"
    );
}

/// A packed convolution reading data in channel blocks of `bi` (when some) and writing its
/// output in the kernel's blocks of `b` (when `out_blocked`), against the naive NCHW loops.
#[allow(clippy::too_many_arguments)] // one case: shapes, blocks and attributes
fn check_conv_blocked(
    what: &str,
    ds: [i64; 4],
    ws: [i64; 4],
    b: i64,
    bi: Option<i64>,
    out_blocked: bool,
    a: Conv2dAttrs,
    seed: u64,
) {
    let layouts = nn::PackedLayouts {
        data_block: bi,
        out_blocked,
        ..Default::default()
    };
    check_conv_layouts(what, ds, ws, b, a, layouts, false, seed);
}

#[test]
fn conv2d_in_channel_blocks() {
    let seed = seed("conv2d_blocked");
    let base = Conv2dAttrs::default();
    let pad1 = Conv2dAttrs {
        padding: Padding2d::same(1),
        ..base
    };
    let s2 = Conv2dAttrs {
        strides: (2, 2),
        ..pad1
    };
    for (k, b) in [16i64, 8].into_iter().enumerate() {
        let seed = seed + 10 * k as u64;
        check_conv_blocked(
            "3x3 blocks in and out",
            [1, 2 * b, 7, 9],
            [2 * b, 2 * b, 3, 3],
            b,
            Some(b),
            true,
            pad1,
            seed,
        );
        check_conv_blocked(
            "3x3/2 blocks in, NCHW out",
            [1, b, 11, 10],
            [2 * b, b, 3, 3],
            b,
            Some(b),
            false,
            s2,
            seed + 1,
        );
        check_conv_blocked(
            "3-channel stem, blocks out",
            [1, 3, 13, 13],
            [b, 3, 3, 3],
            b,
            None,
            true,
            s2,
            seed + 2,
        );
        check_conv_blocked(
            "1x1 blocks in and out, 4 blocks",
            [2, 3 * b, 5, 6],
            [4 * b, 3 * b, 1, 1],
            b,
            Some(b),
            true,
            base,
            seed + 3,
        );
    }
    let bad = nn::conv2d_packed_in(
        &input(&[1, 2, 4, 4, 8], "d"),
        &input(&[1, 16, 3, 3, 16], "w"),
        &base,
        nn::PackedLayouts {
            data_block: Some(16),
            out_blocked: true,
            ..Default::default()
        },
    );
    assert!(
        bad.is_err(),
        "data blocks that do not match the layout are refused"
    );
}

#[test]
fn depthwise_in_channel_blocks() {
    // Every tap a vector of b channels by their filters' vector, the padding checked in place
    // (no padded copy): kernels 3, 5 and 7, strides 1 and 2, dilation, asymmetric padding,
    // rows narrower and wider than a register tile, a ReLU epilogue.
    let seed = seed("depthwise_blocked");
    let dw = |s: i64, d: i64, p: [i64; 4], groups: i64| Conv2dAttrs {
        strides: (s, s),
        dilation: (d, d),
        padding: Padding2d::from_array(p),
        groups,
        ..Conv2dAttrs::default()
    };
    for (i, b) in [8i64, 16].into_iter().enumerate() {
        let c = 2 * b;
        let cases = [
            ("3x3", [1, c, 9, 13], 3, dw(1, 1, [1, 1, 1, 1], c), true),
            ("3x3/2", [1, c, 12, 23], 3, dw(2, 1, [1, 1, 1, 1], c), false),
            ("5x5", [2, c, 7, 6], 5, dw(1, 1, [2, 2, 2, 2], c), false),
            (
                "7x7/2 dilated",
                [1, c, 15, 17],
                7,
                dw(2, 2, [3, 2, 4, 5], c),
                true,
            ),
            (
                "3x3 unpadded",
                [1, c, 5, 30],
                3,
                dw(1, 1, [0, 0, 0, 0], c),
                false,
            ),
        ];
        for (k, (what, ds, kk, a, relu)) in cases.into_iter().enumerate() {
            let layouts = nn::PackedLayouts {
                data_block: Some(b),
                out_blocked: true,
                ..Default::default()
            };
            let conv = check_conv_layouts(
                &format!("depthwise {what}, blocks of {b}"),
                ds,
                [c, 1, kk, kk],
                b,
                a,
                layouts,
                relu,
                seed + 10 * i as u64 + k as u64,
            );
            assert_eq!(conv.op().tag(), kiln_topi::tag::DEPTHWISE_CONV2D_NCHWC);
        }
    }
    // Data in memory is read in place (the padding checked at each tap); data computed by a
    // fused operator is computed once into a padded stage, not again at every tap.
    let w = input(&[2, 1, 3, 3, 8], "w");
    let a = Conv2dAttrs {
        padding: Padding2d::same(1),
        groups: 16,
        ..Conv2dAttrs::default()
    };
    let layouts = nn::PackedLayouts {
        data_block: Some(8),
        out_blocked: true,
        ..Default::default()
    };
    let x = input(&[1, 2, 6, 7, 8], "x");
    let relu = kiln_te::compute(x.shape(), |i| kiln_tir::max(x.at_vars(i), 0.0), "relu");
    let padded_stage = |data: &Tensor| {
        let conv = nn::conv2d_packed_in(data, &w, &a, layouts).unwrap();
        conv.op()
            .input_tensors()
            .iter()
            .any(|t| t.op().name() == kiln_topi::nn::pad::PAD_STAGE)
    };
    assert!(!padded_stage(&x), "data in memory is read in place");
    assert!(padded_stage(&relu), "computed data is padded once");
    // The blocked depthwise product reads and writes blocks only.
    let bad = nn::conv2d_packed_in(
        &input(&[1, 16, 6, 6], "d"),
        &input(&[2, 1, 3, 3, 8], "w"),
        &Conv2dAttrs {
            groups: 16,
            ..Conv2dAttrs::default()
        },
        nn::PackedLayouts::default(),
    );
    assert!(bad.is_err(), "NCHW data for a blocked depthwise kernel");
}

#[test]
fn conv2d_1x1_over_flattened_rows() {
    let seed = seed("conv2d_1x1");
    let base = Conv2dAttrs::default();
    // The last two have groups: each output channel reads its group's input channels.
    let cases = [
        ([1i64, 8, 6, 8], [4i64, 8, 1, 1], 1i64),
        ([2, 5, 4, 28], [6, 5, 1, 1], 1),
        ([1, 3, 2, 56], [16, 3, 1, 1], 1),
        ([1, 12, 6, 8], [20, 3, 1, 1], 4),
        ([1, 8, 4, 28], [6, 4, 1, 1], 2),
        // Planes of 256 positions and more: chosen on every CPU; 272 positions end in a
        // shorter tile.
        ([1, 8, 16, 17], [12, 8, 1, 1], 1),
        ([1, 12, 16, 20], [20, 3, 1, 1], 4),
    ];
    // Small planes depend on the CPU's register tiles.
    for mcpu in ["x86-64-v3", "x86-64-v4"] {
        let cpu = kiln_codegen::target::Target::parse(&format!("llvm -mcpu={mcpu}"))
            .unwrap()
            .cpu_desc();
        for (ds, ws, groups) in &cases[5..] {
            let a = Conv2dAttrs {
                groups: *groups,
                ..base
            };
            assert!(
                nn::conv2d_1x1::applies(ds, ws, &a, &cpu),
                "{ds:?} on {mcpu}"
            );
        }
        // Under 256 positions: on AVX2, the flattened tile of 4 x 3 vectors holds more
        // accumulators than the channel-blocked tile of 2 blocks x 4 columns; with 16 lanes
        // the channel-blocked kernel always.
        let small = nn::conv2d_1x1::applies(&[1, 512, 14, 14], &[256, 512, 1, 1], &base, &cpu);
        assert_eq!(small, mcpu == "x86-64-v3", "14x14 on {mcpu}");
        // Large planes: spatially while a tile's input panel fits in half of L1 (64 input
        // channels), else channel blocks (256 channels at 56x56).
        let few = nn::conv2d_1x1::applies(&[1, 64, 56, 56], &[256, 64, 1, 1], &base, &cpu);
        let many = nn::conv2d_1x1::applies(&[1, 256, 56, 56], &[64, 256, 1, 1], &base, &cpu);
        assert!(
            few && !many,
            "56x56 on {mcpu}: 64 channels {few}, 256 channels {many}"
        );
        // Groups of filters that are not whole vectors (shufflenet's 34 a group): spatially on
        // large planes even where the input panel does not fit in L1 (the channel-blocked
        // kernel would pad every group's filters), here with an L1 too small for any panel.
        let mut small_l1 = cpu.clone();
        small_l1.caches.l1d = 1024;
        let grouped = Conv2dAttrs { groups: 4, ..base };
        let padded =
            nn::conv2d_1x1::applies(&[1, 136, 28, 28], &[136, 34, 1, 1], &grouped, &small_l1);
        let whole =
            nn::conv2d_1x1::applies(&[1, 128, 28, 28], &[128, 32, 1, 1], &grouped, &small_l1);
        assert!(
            padded && !whole,
            "grouped 28x28 on {mcpu}: 34 filters a group {padded}, 32 {whole}"
        );
        let narrow = nn::conv2d_1x1::applies(&[1, 64, 8, 4], &[64, 64, 1, 1], &base, &cpu);
        assert_eq!(narrow, mcpu == "x86-64-v3", "a 4-column row on {mcpu}");
        let strided = Conv2dAttrs {
            strides: (2, 2),
            ..base
        };
        assert!(!nn::conv2d_1x1::applies(
            &[1, 8, 32, 32],
            &[4, 8, 1, 1],
            &strided,
            &cpu
        ));
    }
    for (target, cpu) in targets() {
        for (case, (ds, ws, groups)) in cases.into_iter().enumerate() {
            let a = Conv2dAttrs { groups, ..base };
            if !nn::conv2d_1x1::applies(&ds, &ws, &a, &cpu) {
                continue;
            }
            let what = format!("1x1 spatial {ds:?} groups {groups} on {target}");
            let data = input(&ds, "data");
            let weight = input(&ws, "weight");
            let out = nn::conv2d_1x1(&data, &weight, &a, &cpu).unwrap();
            let inputs = [data, weight];
            let vals = random_inputs(&inputs, seed + case as u64);
            let (want, _) = conv_ref(&vals[0], ds, &vals[1], ws, &a);
            let got = run_on(
                &out,
                &inputs,
                &vals,
                x86::schedule_conv2d_nchw,
                &target,
                &cpu,
            );
            assert_close(&got, &want, 1e-4, &what, seed);
        }
    }
}

/// The register tiles of the packed convolution follow the CPU's registers: about half of them
/// accumulate with several kernel taps; with one tap, the tile that fits the registers with
/// the fewest loads per multiply-add (several blocks of a few columns where blocks divide),
/// or a short row whole in one block where several blocks would split it unevenly; kernels of
/// several taps spread the accumulators over blocks where that loads less.
#[test]
fn conv2d_register_tiles_follow_the_cpu() {
    use kiln_topi::schedule::x86::conv2d::register_tile;
    let cpu = |mcpu: &str| {
        kiln_codegen::target::Target::parse(&format!("llvm -mcpu={mcpu}"))
            .unwrap()
            .cpu_desc()
    };
    let (avx2, avx512) = (cpu("x86-64-v3"), cpu("x86-64-v4"));
    // (width, blocks, vectors per block, kernel width, stride) -> (blocks, columns) per tile.
    let cases = [
        ((7, 64, 1, 3, 1), (1, 7), (2, 7)),
        // Two blocks of half the columns load fewer inputs per multiply-add.
        ((56, 8, 1, 3, 1), (2, 4), (2, 8)),
        ((55, 8, 1, 3, 1), (1, 8), (1, 14)),
        // Two blocks of 3 columns would be fewer accumulators than one block of 7.
        ((27, 4, 1, 3, 1), (1, 7), (1, 14)),
        ((112, 8, 1, 7, 1), (1, 8), (2, 8)),
        ((13, 125, 1, 1, 1), (1, 13), (1, 13)),
        // A row of 7 is one block's whole row on AVX2 (two blocks would take 4 + 3 columns);
        // a row of 14 in 34 blocks is still split, 4 + 4 + 4 + 2 (a whole row is 14
        // accumulators).
        ((7, 256, 1, 1, 1), (1, 7), (4, 4)),
        ((14, 34, 1, 1, 1), (2, 4), (2, 7)),
        ((12, 2, 1, 1, 1), (2, 4), (2, 6)),
        ((56, 8, 1, 1, 1), (2, 4), (4, 4)),
        ((14, 3, 1, 1, 1), (3, 3), (3, 7)),
        ((13, 2, 2, 3, 1), (1, 4), (1, 7)),
        // Stride 2 shares fewer broadcasts between taps: several blocks of fewer columns.
        ((80, 4, 1, 3, 2), (2, 4), (4, 4)),
        ((7, 64, 1, 3, 2), (1, 7), (2, 7)),
    ];
    for ((w, blocks, v, kw, stride), want2, want512) in cases {
        let (t2, t512) = (
            register_tile(w, blocks, v, (kw, stride), &avx2),
            register_tile(w, blocks, v, (kw, stride), &avx512),
        );
        assert_eq!(
            t2, want2,
            "AVX2, width {w}, {blocks} blocks of {v} vectors, kw {kw}"
        );
        assert_eq!(
            t512, want512,
            "AVX-512, width {w}, {blocks} blocks, kw {kw}"
        );
        for (t, cpu) in [(t2, &avx2), (t512, &avx512)] {
            assert!(
                t.0 * t.1 * v < cpu.vector_registers as i64,
                "{t:?} leaves registers"
            );
            // One tap over several blocks: every column's broadcast stays live too.
            if kw == 1 && t.0 > 1 {
                let live = t.0 * t.1 * v + t.1 + t.0 * v;
                assert!(live <= cpu.vector_registers as i64, "{t:?}: {live} live");
            }
        }
    }
}
