//! 1x1 channel-blocked convolutions computed over flattened output positions
//! (`PackedLayouts::flat_positions`), built for the host CPU (and AVX2 code where the host has
//! AVX-512) and with the generic schedule, against naive loops on random inputs with
//! NaN-poisoned outputs: strides 1 and 2, planes whose positions leave a shorter last register
//! tile (7x7: 49 positions, 5x9: 45), tiles spanning rows, a batch of two, a ReLU epilogue,
//! block counts that take tiles of 1, 2 and 3 blocks and a shorter last tile of blocks, an
//! epilogue unpacking the product to NCHW; the layouts that keep rows apart; and the tile and
//! the choice of the flat product per CPU.

mod nn_common;

use kiln_codegen::target::Target;
use kiln_te::Tensor;
use kiln_tir::DataType;
use kiln_topi::nn::{self, Conv2dAttrs, Padding2d};
use kiln_topi::schedule::find_tagged;
use kiln_topi::schedule::x86::conv2d_flat::{applies, flat_tile};
use kiln_topi::tag;
use nn_common::conv::check_conv_layouts;

/// One case: what it covers, NCHW data, OIHW weights, attributes, a ReLU epilogue.
type Case = (&'static str, [i64; 4], [i64; 4], Conv2dAttrs, bool);

/// Whether the product under `out` (through the blocked read-back) is the flat one.
fn is_flat(out: &Tensor) -> bool {
    find_tagged(out, &[tag::CONV2D_NCHWC_FLAT]).is_some()
}

#[test]
fn flat_1x1_convolutions_match_naive_loops() {
    let seed = kiln_testing::rng::seed("conv2d_flat");
    let base = Conv2dAttrs::default();
    for b in [8i64, 16] {
        let s2 = Conv2dAttrs {
            strides: (2, 2),
            ..base
        };
        // (what, NCHW data, OIHW weights, attributes, relu)
        let cases: [Case; 7] = [
            (
                "7x7, 49 positions: a last tile of one",
                [1, 2 * b, 7, 7],
                [4 * b, 2 * b, 1, 1],
                base,
                true,
            ),
            (
                "5x9, tiles across rows, one block",
                [1, b, 5, 9],
                [b, b, 1, 1],
                base,
                false,
            ),
            (
                "14x14, a batch of two",
                [2, 2 * b, 14, 14],
                [2 * b, 2 * b, 1, 1],
                base,
                true,
            ),
            (
                "3 blocks of filters",
                [1, 4 * b, 6, 6],
                [3 * b, 4 * b, 1, 1],
                base,
                true,
            ),
            (
                "one row of 11",
                [1, b, 1, 11],
                [2 * b, b, 1, 1],
                base,
                false,
            ),
            (
                "stride 2, 9x7 -> 5x4",
                [1, b, 9, 7],
                [2 * b, b, 1, 1],
                s2,
                true,
            ),
            (
                "13 blocks: a last tile of one block",
                [1, 2 * b, 5, 5],
                [13 * b, 2 * b, 1, 1],
                base,
                true,
            ),
        ];
        for (i, (what, ds, ws, a, relu)) in cases.into_iter().enumerate() {
            let layouts = nn::PackedLayouts {
                data_block: Some(b),
                out_blocked: true,
                channel_chunk: None,
                flat_positions: true,
            };
            let what = format!("{what} (blocks of {b})");
            let seed = seed + i as u64;
            let conv = check_conv_layouts(&what, ds, ws, b, a, layouts, relu, seed);
            assert!(is_flat(&conv), "{what}: computed over flat positions");
        }
    }
}

#[test]
fn layouts_the_flat_product_does_not_cover_keep_rows_apart() {
    let seed = kiln_testing::rng::seed("conv2d_flat_not");
    let b = 8;
    let padded = Conv2dAttrs {
        padding: Padding2d::same(1),
        ..Default::default()
    };
    // (what, data, weights, attrs, data blocked, output blocked)
    let cases = [
        ("3x3 padded", [1, b, 6, 6], [b, b, 3, 3], padded, true, true),
        (
            "NCHW data",
            [1, b, 6, 6],
            [b, b, 1, 1],
            Conv2dAttrs::default(),
            false,
            true,
        ),
        (
            "NCHW output",
            [1, b, 6, 6],
            [b, b, 1, 1],
            Conv2dAttrs::default(),
            true,
            false,
        ),
    ];
    for (i, (what, ds, ws, a, blocked_in, out_blocked)) in cases.into_iter().enumerate() {
        let layouts = nn::PackedLayouts {
            data_block: blocked_in.then_some(b),
            out_blocked,
            channel_chunk: None,
            flat_positions: true,
        };
        let conv = check_conv_layouts(what, ds, ws, b, a, layouts, true, seed + i as u64);
        assert!(!is_flat(&conv), "{what}: rows kept apart");
    }
}

#[test]
fn flat_tiles_and_where_they_apply() {
    let avx2 = Target::parse("llvm -mcpu=x86-64-v3").unwrap().cpu_desc();
    let avx512 = Target::parse("llvm -mcpu=x86-64-v4").unwrap().cpu_desc();
    // AVX2 (16 registers, 12 accumulators): 2 blocks x 6 positions, 3 x 4 where 3 divide.
    assert_eq!(flat_tile(64, 49, 1, &avx2), (2, 6));
    assert_eq!(flat_tile(3, 49, 1, &avx2), (3, 4));
    assert_eq!(flat_tile(1, 49, 1, &avx2), (1, 12));
    // 125 blocks (1000 classes): only one block divides; 3 x 4 with a last tile of 2.
    assert_eq!(flat_tile(125, 169, 1, &avx2), (3, 4));
    assert_eq!(flat_tile(5, 169, 1, &avx2), (1, 12));
    // Fewer positions than the tile holds: all of them.
    assert_eq!(flat_tile(2, 4, 1, &avx2), (2, 4));
    // AVX-512 (32 registers, 24 accumulators): 4 blocks x 6 positions.
    assert_eq!(flat_tile(32, 196, 1, &avx512), (4, 6));
    let f32t = DataType::float(32);
    let one = Conv2dAttrs::default();
    let w = [64, 256, 1, 1, 8];
    assert!(applies(&w, &one, f32t, &avx2));
    assert!(
        !applies(&w, &one, f32t, &avx512),
        "16 lanes keep the row tiles"
    );
    let s2 = Conv2dAttrs {
        strides: (2, 2),
        ..one
    };
    assert!(applies(&w, &s2, f32t, &avx2), "stride 2");
    assert!(applies(&w, &s2, f32t, &avx512), "stride 2 with 16 lanes");
    let g2 = Conv2dAttrs { groups: 2, ..one };
    assert!(!applies(&w, &g2, f32t, &avx2), "groups");
    assert!(!applies(&[64, 256, 3, 3, 8], &one, f32t, &avx2), "3x3");
    assert!(!applies(&w, &s2, DataType::int(32), &avx2), "int32 sums");
}

/// A flat product whose epilogue unpacks it to NCHW (a fused layout transform after a
/// SiLU-like `x * max(x, 0)`): the output written by rows of channels, against the naive NCHW
/// convolution.
#[test]
fn flat_products_unpacked_to_nchw_match_naive_loops() {
    use nn_common::conv::{conv_ref, pack_oihw};
    use nn_common::{check, input, random_inputs, to_blocks};
    let seed = kiln_testing::rng::seed("conv2d_flat_nchw");
    for (i, (b, ds, ws)) in [
        (8i64, [1i64, 16, 10, 10], [16i64, 16, 1, 1]),
        (8, [2, 8, 7, 5], [24, 8, 1, 1]),
        (16, [1, 32, 6, 9], [32, 32, 1, 1]),
    ]
    .into_iter()
    .enumerate()
    {
        let seed = seed + i as u64;
        let a = Conv2dAttrs {
            channels: Some(ws[0]),
            ..Default::default()
        };
        let data = input(&[ds[0], ds[1] / b, ds[2], ds[3], b], "data");
        let packed = input(&[ws[0] / b, ws[1], 1, 1, b], "weight_packed");
        let layouts = nn::PackedLayouts {
            data_block: Some(b),
            out_blocked: true,
            channel_chunk: None,
            flat_positions: true,
        };
        let conv = nn::conv2d_packed_in(&data, &packed, &a, layouts).unwrap();
        assert!(is_flat(&conv));
        let vals = random_inputs(&[input(&ds, "d"), input(&ws, "w")], seed);
        let (want, os) = conv_ref(&vals[0], ds, &vals[1], ws, &a);
        let want: Vec<f32> = want.iter().map(|v| v * v.max(0.0)).collect();
        let out = kiln_te::compute(
            &os.map(kiln_tir::PrimExpr::i32),
            |i| {
                let o = i[1].to_expr();
                let v = conv.at(&[
                    i[0].to_expr(),
                    kiln_tir::floordiv(&o, b),
                    i[2].to_expr(),
                    i[3].to_expr(),
                    kiln_tir::floormod(&o, b),
                ]);
                v.clone() * kiln_tir::max(v, 0.0)
            },
            "silu_unpack",
        );
        let pvals = vec![to_blocks(&vals[0], ds, b), pack_oihw(&vals[1], ws, 1, b)];
        let what = format!("{ds:?} x {ws:?} in blocks of {b}, unpacked");
        let sched = kiln_topi::schedule::x86::schedule_conv2d_nchw;
        check(
            &what,
            &out,
            &[data, packed],
            &pvals,
            sched,
            &want,
            1e-4,
            seed,
        );
    }
}
