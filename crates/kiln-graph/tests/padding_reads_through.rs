//! A convolution that pads its input takes in the injective calls before it (a channel
//! shuffle's reshape, transpose and reshape): its padding stage reads through them. Built end to
//! end (graph build -> one `.so` -> graph executor), outputs poisoned with NaN, checked against
//! naive loops.

mod common;
use common::{build_and_load, conv2d_ref, random, run};

// Links the registrations of kiln-graph (the `graph.build` global).
const _: fn() -> *const () = kiln_graph::link_globals;
use kiln_graph::build::{graph_codegen, optimize};
use kiln_graph::ir::{AttrValue, Expr, Function, IRModule, Type, Var};
use kiln_graph::op::mk;

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

/// `relu(x)`, its channels shuffled in `g` groups (`[N, g, C/g, H, W]` transposed to
/// `[N, C/g, g, H, W]`), then a 3x3 convolution of `groups` groups with padding 1 and a bias.
fn shuffle_then_conv(x: &Var, shape: [i64; 4], g: i64, w: Expr, b: Expr, groups: i64) -> Expr {
    let [n, c, h, wd] = shape;
    let r = mk("nn.relu", vec![x.expr()], &[]);
    let r1 = mk(
        "reshape",
        vec![r],
        &[("newshape", ints(&[n, g, c / g, h, wd]))],
    );
    let t = mk("transpose", vec![r1], &[("axes", ints(&[0, 2, 1, 3, 4]))]);
    let r2 = mk("reshape", vec![t], &[("newshape", ints(&[n, c, h, wd]))]);
    let conv = mk(
        "nn.conv2d",
        vec![r2, w],
        &[
            ("padding", ints(&[1, 1, 1, 1])),
            ("groups", AttrValue::Int(groups)),
        ],
    );
    mk("nn.bias_add", vec![conv, b], &[])
}

/// The reference: relu, the shuffle, then each group's 3x3 convolution (padding 1).
fn reference(
    xd: &[f32],
    [c, h, w]: [usize; 3],
    g: usize,
    wd: &[f32],
    o: usize,
    groups: usize,
) -> Vec<f32> {
    let (cpg, plane) = (c / g, h * w);
    // Shuffled channel `j * g + i` is input channel `i * cpg + j`.
    let mut shuffled = vec![0.0f32; c * plane];
    for ch in 0..c {
        let src = (ch % g) * cpg + ch / g;
        for (d, s) in shuffled[ch * plane..(ch + 1) * plane]
            .iter_mut()
            .zip(&xd[src * plane..(src + 1) * plane])
        {
            *d = s.max(0.0);
        }
    }
    let (icg, ocg) = (c / groups, o / groups);
    let mut out = Vec::with_capacity(o * plane);
    for grp in 0..groups {
        let x = &shuffled[grp * icg * plane..(grp + 1) * icg * plane];
        let wt = &wd[grp * ocg * icg * 9..(grp + 1) * ocg * icg * 9];
        out.extend(conv2d_ref(x, icg, h, w, wt, ocg, 3, 1));
    }
    out
}

#[test]
fn a_channel_shuffle_is_read_through_by_the_padding_of_the_convolution_after_it() {
    // (channels, shuffle groups, convolution groups, output channels): a depthwise layer as a
    // shufflenet has it, and a dense 3x3 convolution; odd rows and columns.
    for (case, (c, g, groups, o)) in [(12usize, 3usize, 12usize, 12usize), (8, 4, 1, 5)]
        .into_iter()
        .enumerate()
    {
        let (h, w) = (7usize, 9usize);
        let seed = 40 + case as u64 * 3;
        let xd = random(c * h * w, seed);
        let wd = random(o * (c / groups) * 9, seed + 1);
        let bd = random(o, seed + 2);
        let shape = [1, c as i64, h as i64, w as i64];
        let x = Var::new("x", Type::f32(&shape));
        let wt = Expr::const_f32(&wd, &[o as i64, (c / groups) as i64, 3, 3]);
        let out = shuffle_then_conv(
            &x,
            shape,
            g as i64,
            wt,
            Expr::const_f32(&bd, &[o as i64]),
            groups as i64,
        );
        let module = IRModule::from_main(Function::new(vec![x], out));

        let cg = graph_codegen(&optimize(&module).unwrap()).unwrap();
        let names: Vec<&str> = cg.functions.iter().map(|(n, _)| n.as_str()).collect();
        assert!(
            names.iter().all(|n| !n.ends_with("reshape")),
            "the shuffle is not a function of its own: {names:?}"
        );

        let exec = build_and_load(&module, vec![], &format!("shuffle_conv{case}"));
        let oshape = [1, o as i64, h as i64, w as i64];
        let got = run(&exec, &[("x", xd.clone(), shape.to_vec())], &[&oshape]).remove(0);
        let mut want = reference(&xd, [c, h, w], g, &wd, o, groups);
        for (i, v) in want.iter_mut().enumerate() {
            *v += bd[i / (h * w)];
        }
        kiln_testing::assert_allclose(
            &got,
            &want,
            kiln_testing::Tolerance::Scaled(1e-4),
            &format!("shuffle -> 3x3 convolution of {groups} groups"),
        );
    }
}

/// A convolution without padding reads its input in its inner loops: the shuffle stays a
/// function of its own.
#[test]
fn an_unpadded_convolution_leaves_the_shuffle_alone() {
    let shape = [1i64, 8, 5, 5];
    let x = Var::new("x", Type::f32(&shape));
    let r1 = mk(
        "reshape",
        vec![x.expr()],
        &[("newshape", ints(&[1, 2, 4, 5, 5]))],
    );
    let t = mk("transpose", vec![r1], &[("axes", ints(&[0, 2, 1, 3, 4]))]);
    let r2 = mk("reshape", vec![t], &[("newshape", ints(&shape))]);
    let w = Expr::const_f32(&random(8 * 8, 9), &[8, 8, 1, 1]);
    let conv = mk("nn.conv2d", vec![r2, w], &[]);
    let module = IRModule::from_main(Function::new(vec![x], conv));
    let cg = graph_codegen(&optimize(&module).unwrap()).unwrap();
    let names: Vec<&str> = cg.functions.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.iter().any(|n| n.ends_with("reshape")),
        "a function of the shuffle alone: {names:?}"
    );
}
