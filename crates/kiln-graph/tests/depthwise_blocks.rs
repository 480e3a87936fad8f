//! Depthwise convolutions in channel blocks: a 3x3 convolution, ReLU, then a depthwise 3x3
//! convolution (of the ReLU's output, or of a sum computed by an add fused into it) and a
//! residual add, laid out for the host's vectors (the depthwise one reads and writes the blocks
//! its producer writes, no layout change between them) and built, against naive loops (output
//! NaN-poisoned first).
mod common;
use common::{conv2d_ref, load_executor, random, run};

use kiln_codegen::target::Target;
use kiln_graph::build::{build_for, optimize_with};
use kiln_graph::ir::{AttrValue, Expr, Function, IRModule, Type, Var};
use kiln_graph::op::mk;
use kiln_graph::transform::PassContext;

// Links the registrations of kiln-graph.
const _: fn() -> *const () = kiln_graph::link_globals;

const TARGET: &str = "llvm -mcpu=native";
const H: usize = 10;
const W: usize = 13;

/// x -> conv 3x3 -> relu (r) -> depthwise 3x3 (`groups` = `c`) of r (or, with `of_sum`, of
/// r + r: a residual add before it, as in ConvNeXt blocks) -> + r, padding 1.
fn network(c: usize, w1: &[f32], wd: &[f32], of_sum: bool) -> IRModule {
    let pad = ("padding", AttrValue::Ints(vec![1, 1, 1, 1]));
    let x = Var::new("data", Type::f32(&[1, c as i64, H as i64, W as i64]));
    let c = c as i64;
    let a = mk(
        "nn.conv2d",
        vec![x.expr(), Expr::const_f32(w1, &[c, c, 3, 3])],
        std::slice::from_ref(&pad),
    );
    let r = mk("nn.relu", vec![a], &[]);
    let input = if of_sum {
        mk("add", vec![r.clone(), r.clone()], &[])
    } else {
        r.clone()
    };
    let d = mk(
        "nn.conv2d",
        vec![input, Expr::const_f32(wd, &[c, 1, 3, 3])],
        &[pad, ("groups", AttrValue::Int(c))],
    );
    IRModule::from_main(Function::new(vec![x], mk("add", vec![d, r], &[])))
}

/// A naive depthwise 3x3 convolution of `x` `[c, h, w]` by `wt` `[c, 1, 3, 3]`, padding 1.
fn depthwise_ref(x: &[f32], c: usize, wt: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; c * H * W];
    for ch in 0..c {
        let plane = &x[ch * H * W..(ch + 1) * H * W];
        out[ch * H * W..(ch + 1) * H * W].copy_from_slice(&conv2d_ref(
            plane,
            1,
            H,
            W,
            &wt[ch * 9..ch * 9 + 9],
            1,
            3,
            1,
        ));
    }
    out
}

#[test]
fn depthwise_convolutions_compute_in_channel_blocks() {
    let host = Target::parse(TARGET).unwrap().cpu_desc();
    let lanes = host.f32_lanes() as usize;
    assert!(lanes >= 8, "x86-64 hosts with AVX or better: {host}");
    let c = 2 * lanes;
    let (w1, wd) = (random(c * c * 9, 61), random(c * 9, 62));
    let ctx = PassContext::with_opt_level(3).with_cpu(host.clone());
    let (m, _) = optimize_with(&network(c, &w1, &wd, false), Vec::new(), &ctx).unwrap();
    let text = m.to_string();
    let dw = text
        .lines()
        .find(|l| l.contains("nn.conv2d") && l.contains(&format!("groups={c}")))
        .unwrap_or_else(|| panic!("no depthwise convolution in {text}"));
    let blocks = format!("NCHW{lanes}c");
    assert!(
        dw.contains(&format!("data_layout=\"{blocks}\""))
            && dw.contains(&format!("out_layout=\"{blocks}\"")),
        "the depthwise convolution reads and writes blocks: {dw}"
    );
    // Back to NCHW once, for the result.
    assert_eq!(text.matches("dst_layout=\"NCHW\"").count(), 1, "{text}");

    let x = random(c * H * W, 63);
    let shape = vec![1, c as i64, H as i64, W as i64];
    let r: Vec<f32> = conv2d_ref(&x, c, H, W, &w1, c, 3, 1)
        .into_iter()
        .map(|v| v.max(0.0))
        .collect();
    for of_sum in [false, true] {
        let m = network(c, &w1, &wd, of_sum);
        let factory = build_for(&m, TARGET, &host, Vec::new(), &ctx).unwrap();
        let exec = load_executor(&factory, "depthwise_blocks");
        let got = run(&exec, &[("data", x.clone(), shape.clone())], &[&shape]).remove(0);
        let scale = if of_sum { 2.0 } else { 1.0 };
        let input: Vec<f32> = r.iter().map(|v| scale * v).collect();
        let want: Vec<f32> = depthwise_ref(&input, c, &wd)
            .iter()
            .zip(&r)
            .map(|(a, b)| a + b)
            .collect();
        kiln_testing::assert_allclose(
            &got,
            &want,
            kiln_testing::Tolerance::Scaled(1e-4),
            &format!("3x3 then depthwise 3x3 in blocks (of a sum: {of_sum})"),
        );
    }
}
