//! Channel blocks of half a vector where the CPU's multiply-add units are half a vector wide
//! (`CpuDesc::fma_bits`) and whole vectors would pad the filters: a residual pair of 3x3
//! convolutions of 3 half blocks of channels, laid out and built for the host's vectors with
//! half-width multiply-add units, against naive loops (output NaN-poisoned first).

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
const H: usize = 9;
const W: usize = 11;

/// x -> conv 3x3 (pad 1) -> relu -> conv 3x3 (pad 1) -> + relu output: `c` channels.
fn network(c: usize, w1: &[f32], w2: &[f32]) -> IRModule {
    let pad = ("padding", AttrValue::Ints(vec![1, 1, 1, 1]));
    let x = Var::new("data", Type::f32(&[1, c as i64, H as i64, W as i64]));
    let ws = [c as i64, c as i64, 3, 3];
    let a = mk(
        "nn.conv2d",
        vec![x.expr(), Expr::const_f32(w1, &ws)],
        std::slice::from_ref(&pad),
    );
    let r = mk("nn.relu", vec![a], &[]);
    let b = mk(
        "nn.conv2d",
        vec![r.clone(), Expr::const_f32(w2, &ws)],
        &[pad],
    );
    let out = mk("add", vec![b, r], &[]);
    IRModule::from_main(Function::new(vec![x], out))
}

#[test]
fn half_vector_blocks_where_multiply_adds_are_half_a_vector_wide() {
    let host = Target::parse(TARGET).unwrap().cpu_desc();
    let lanes = host.f32_lanes();
    assert!(lanes >= 8, "x86-64 hosts with AVX or better: {host}");
    // Three half blocks: whole vectors would pad a third of the filters.
    let c = 3 * lanes as usize / 2;
    let (w1, w2) = (random(c * c * 9, 51), random(c * c * 9, 52));
    let mut whole = host.clone();
    whole.fma_bits = whole.vector_bits;
    let mut half = host.clone();
    half.fma_bits = half.vector_bits / 2;
    for (cpu, block) in [(&whole, lanes), (&half, lanes / 2)] {
        let ctx = PassContext::with_opt_level(3).with_cpu(cpu.clone());
        let (m, _) = optimize_with(&network(c, &w1, &w2), Vec::new(), &ctx).unwrap();
        let text = m.to_string();
        assert!(text.contains(&format!("OIHW{block}o")), "{block}: {text}");
        if block < lanes {
            assert!(text.contains(&format!("NCHW{block}c")), "{text}");
        }
    }

    let ctx = PassContext::with_opt_level(3).with_cpu(half.clone());
    let factory = build_for(&network(c, &w1, &w2), TARGET, &half, Vec::new(), &ctx).unwrap();
    let exec = load_executor(&factory, "half_blocks");
    let x = random(c * H * W, 53);
    let shape = vec![1, c as i64, H as i64, W as i64];
    let got = run(&exec, &[("data", x.clone(), shape.clone())], &[&shape]).remove(0);
    let r: Vec<f32> = conv2d_ref(&x, c, H, W, &w1, c, 3, 1)
        .into_iter()
        .map(|v| v.max(0.0))
        .collect();
    let want: Vec<f32> = conv2d_ref(&r, c, H, W, &w2, c, 3, 1)
        .iter()
        .zip(&r)
        .map(|(a, b)| a + b)
        .collect();
    kiln_testing::assert_allclose(
        &got,
        &want,
        kiln_testing::Tolerance::Scaled(1e-4),
        "residual 3x3 pair in half blocks",
    );
}
