//! Channel-blocked convolutions summed in passes over chunks of their input channels
//! (`PackedLayouts::channel_chunk`), built for the host CPU (and AVX2 code where the host has
//! AVX-512) and with the generic schedule, against naive loops on random inputs with
//! NaN-poisoned outputs: blocked and NCHW data and outputs, the output itself accumulating the
//! passes or an epilogue reading them, rows in several groups, a shorter last column tile,
//! stride 2 with padding, a batch of two; and the heuristics that choose the chunk and the rows
//! of a pass.

mod nn_common;

use kiln_codegen::target::Target;
use kiln_te::Tensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn::{self, Conv2dAttrs, Padding2d};
use kiln_topi::schedule::x86;
use kiln_topi::tag;
use nn_common::conv::check_conv_layouts;
use nn_common::*;

/// One case: NCHW data shape `ds`, OIHW weights `ws` packed in blocks of `b`, the data in
/// blocks of `bi` (or NCHW), the output blocked or NCHW, `chunk` input channels a pass, a ReLU
/// epilogue or none.
struct Case {
    what: &'static str,
    ds: [i64; 4],
    ws: [i64; 4],
    b: i64,
    bi: Option<i64>,
    out_blocked: bool,
    chunk: i64,
    relu: bool,
    attrs: Conv2dAttrs,
}

/// The blocked product under `out` (through an epilogue and the NCHW unpack).
fn product_of(out: &Tensor) -> kiln_te::Operation {
    let mut t = out.clone();
    loop {
        let op = t.op().clone();
        if op.tag() == tag::CONV2D_NCHWC {
            return op;
        }
        t = op.input_tensors()[0].clone();
    }
}

fn check_case(c: &Case, seed: u64) {
    let layouts = nn::PackedLayouts {
        data_block: c.bi,
        out_blocked: c.out_blocked,
        channel_chunk: Some(c.chunk),
        flat_positions: false,
    };
    let conv = check_conv_layouts(c.what, c.ds, c.ws, c.b, c.attrs, layouts, c.relu, seed);
    let passes = product_of(&conv)
        .input_tensors()
        .iter()
        .any(|t| t.op().tag() == tag::CONV2D_NCHWC_PARTIAL);
    let cpg = c.ws[1];
    let whole = c.chunk < cpg && cpg % c.chunk == 0 && c.chunk % c.bi.unwrap_or(1) == 0;
    assert_eq!(passes, whole, "{}: summed in passes", c.what);
}

#[test]
fn convolutions_summed_in_passes() {
    let seed = seed("conv2d_passes");
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
        let cases = [
            Case {
                what: "1x1, the blocked output accumulates 4 passes",
                ds: [1, 4 * b, 12, 28],
                ws: [4 * b, 4 * b, 1, 1],
                b,
                bi: Some(b),
                out_blocked: true,
                chunk: b,
                relu: false,
                attrs: base,
            },
            Case {
                what: "1x1, a ReLU reads the passes' product",
                ds: [2, 4 * b, 12, 28],
                ws: [4 * b, 4 * b, 1, 1],
                b,
                bi: Some(b),
                out_blocked: true,
                chunk: 2 * b,
                relu: true,
                attrs: base,
            },
            Case {
                what: "1x1 14 wide: a shorter last column tile",
                ds: [1, 2 * b, 14, 14],
                ws: [4 * b, 2 * b, 1, 1],
                b,
                bi: Some(b),
                out_blocked: true,
                chunk: b,
                relu: true,
                attrs: base,
            },
            Case {
                what: "3x3/2 padded, blocks in, NCHW out",
                ds: [1, 2 * b, 15, 13],
                ws: [2 * b, 2 * b, 3, 3],
                b,
                bi: Some(b),
                out_blocked: false,
                chunk: b,
                relu: true,
                attrs: s2,
            },
            Case {
                what: "NCHW data, 3 channels a pass",
                ds: [1, 6, 9, 11],
                ws: [b, 6, 3, 3],
                b,
                bi: None,
                out_blocked: false,
                chunk: 3,
                relu: false,
                attrs: pad1,
            },
            Case {
                what: "a chunk that does not divide the channels: one pass",
                ds: [1, 3 * b, 6, 7],
                ws: [b, 3 * b, 1, 1],
                b,
                bi: Some(b),
                out_blocked: true,
                chunk: 2 * b,
                relu: false,
                attrs: base,
            },
        ];
        for (i, c) in cases.iter().enumerate() {
            check_case(c, seed + 10 * k as u64 + i as u64);
        }
    }
}

fn cpu(mcpu: &str) -> CpuDesc {
    Target::parse(&format!("llvm -mcpu={mcpu}"))
        .unwrap()
        .cpu_desc()
}

#[test]
fn the_chunk_fits_a_tiles_weights_in_l1() {
    for mcpu in ["x86-64-v3", "x86-64-v4", "znver3", "sapphirerapids"] {
        let cpu = cpu(mcpu);
        let b = cpu.f32_lanes();
        let l1 = cpu.caches.l1d as i64;
        let key = format!("test:{mcpu}");
        let f32 = kiln_tir::DataType::float(32);
        for (width, blocks, channels, taps, stride) in [
            (14i64, 16i64, 1024i64, (1i64, 1i64), 1i64),
            (7, 32, 2048, (1, 1), 1),
            (28, 8, 128, (3, 3), 1),
            (56, 4, 256, (1, 1), 1),
        ] {
            let (tb, _) = x86::conv2d::register_tile(width, blocks, 1, (taps.1, stride), &cpu);
            let per_channel = tb * b * taps.0 * taps.1 * 4;
            let got = x86::conv2d::channel_chunk(
                &key, width, blocks, b, channels, taps, stride, b, f32, &cpu,
            );
            let what = format!("{mcpu}: {channels} channels, {blocks} blocks, {width} wide");
            if channels * per_channel <= l1 * 3 / 4 {
                assert_eq!(got, None, "{what}: the weights fit, one pass");
                continue;
            }
            let k = got.unwrap_or_else(|| panic!("{what}: no chunk"));
            assert!(
                k < channels && channels % k == 0 && k % b == 0,
                "{what}: {k}"
            );
            assert!(k * per_channel <= l1 * 3 / 4, "{what}: {k} overflows L1");
            // The most channels that fit: the next whole multiple does not.
            let next = (k + b..channels)
                .step_by(b as usize)
                .find(|n| channels % n == 0);
            assert!(
                next.is_none_or(|n| n * per_channel > l1 * 3 / 4),
                "{what}: {k} is not the largest chunk"
            );
        }
        // A small layer sums in one pass.
        assert_eq!(
            x86::conv2d::channel_chunk(&key, 14, 4, b, 2 * b, (1, 1), 1, b, f32, &cpu),
            None
        );
    }
}

#[test]
fn a_pass_sweeps_rows_whose_product_fits_in_l1() {
    let cpu = cpu("x86-64-v4");
    let l1 = cpu.caches.l1d as i64;
    for (height, row_bytes, tasks) in [
        (56i64, 14336i64, 1i64),
        (14, 3584, 4),
        (7, 1792, 8),
        (13, 100_000, 1),
    ] {
        let r = x86::conv2d::pass_rows(height, row_bytes, tasks, &cpu);
        assert!(height % r == 0, "{r} rows of {height}");
        assert!(
            r == 1 || r * row_bytes <= l1,
            "{r} rows of {row_bytes} bytes"
        );
        assert!(
            r == 1 || tasks * (height / r) >= 2,
            "{r} rows leave one task"
        );
        // No more rows would fit.
        let more = (r + 1..=height).find(|m| height % m == 0);
        assert!(
            more.is_none_or(|m| m * row_bytes > l1 || tasks * (height / m) < 2),
            "{height}: {r} rows, {more:?} fit"
        );
    }
}
