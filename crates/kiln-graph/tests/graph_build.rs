//! End to end through the graph build: hand-built graph modules -> `build` -> one exported
//! `.so` -> `load_module` -> `["default"](cpu)` -> graph executor, with random inputs, outputs
//! poisoned with NaN before the run, and results checked against naive Rust loops.

mod common;
use common::{build_and_load, conv2d_ref, random, run, TARGET};

use kiln_ffi::Device;

// Links the registrations of kiln-graph (the `graph.build` global).
const _: fn() -> *const () = kiln_graph::link_globals;
use kiln_graph::build::{graph_codegen, optimize};
use kiln_graph::ir::{AttrValue, Expr, Function, IRModule, Type, Var};
use kiln_graph::op::mk;
use kiln_runtime::graph_executor::Graph;
use kiln_runtime::module::Module;
use kiln_runtime::tensor::Tensor;

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    kiln_testing::assert_allclose(got, want, kiln_testing::Tolerance::Scaled(1e-4), what);
}

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

// ---- naive references ----

fn maxpool2_ref(x: &[f32], c: usize, h: usize, w: usize) -> Vec<f32> {
    let (oh, ow) = (h / 2, w / 2);
    let mut out = vec![f32::NEG_INFINITY; c * oh * ow];
    for ch in 0..c {
        for y in 0..oh {
            for xx in 0..ow {
                let mut m = f32::NEG_INFINITY;
                for dy in 0..2 {
                    for dx in 0..2 {
                        m = m.max(x[(ch * h + 2 * y + dy) * w + 2 * xx + dx]);
                    }
                }
                out[(ch * oh + y) * ow + xx] = m;
            }
        }
    }
    out
}

fn softmax_ref(x: &[f32]) -> Vec<f32> {
    let m = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = x.iter().map(|v| (v - m).exp()).collect();
    let s: f32 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

#[test]
fn conv_pool_dense_softmax_network() {
    let (c, h, w, o, k, units) = (3usize, 8usize, 8usize, 4usize, 3usize, 10usize);
    let xd = random(c * h * w, 1);
    let wd = random(o * c * k * k, 2);
    let bd = random(o, 3);
    let w2d = random(units * o * 16, 4);
    let b2d = random(units, 5);

    let x = Var::new("data", Type::f32(&[1, c as i64, h as i64, w as i64]));
    let w2 = Var::new("w2", Type::f32(&[units as i64, (o * 16) as i64]));
    let conv = mk(
        "nn.conv2d",
        vec![
            x.expr(),
            Expr::const_f32(&wd, &[o as i64, c as i64, k as i64, k as i64]),
        ],
        &[("padding", ints(&[1, 1, 1, 1]))],
    );
    let b = mk(
        "nn.bias_add",
        vec![conv, Expr::const_f32(&bd, &[o as i64])],
        &[],
    );
    let r = mk("nn.relu", vec![b], &[]);
    let p = mk(
        "nn.max_pool2d",
        vec![r],
        &[("pool_size", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
    );
    let fl = mk("flatten", vec![p], &[]);
    let d = mk("nn.dense", vec![fl, w2.expr()], &[]);
    let db = mk("add", vec![d, Expr::const_f32(&b2d, &[units as i64])], &[]);
    let sm = mk("nn.softmax", vec![db], &[]);
    let module = IRModule::from_main(Function::new(vec![x, w2], sm));

    // The lowered names follow TVM's scheme (at -O3 CanonicalizeOps has made the bias an add).
    let cg = graph_codegen(&optimize(&module).unwrap()).unwrap();
    let names: Vec<&str> = cg.functions.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"fused_nn_conv2d_add_nn_relu"), "{names:?}");
    assert!(names.contains(&"fused_nn_softmax"), "{names:?}");
    assert!(cg.graph_json.contains("\"list_shape\""));
    assert!(cg.graph_json.contains("\"storage_id\": [\"list_int\""));

    let w2t = Tensor::from_slice(&w2d, &[units as i64, (o * 16) as i64]).unwrap();
    let exec = build_and_load(&module, vec![("w2".into(), w2t)], "net");
    let got = run(
        &exec,
        &[("data", xd.clone(), vec![1, c as i64, h as i64, w as i64])],
        &[&[1, units as i64]],
    );

    let mut y = conv2d_ref(&xd, c, h, w, &wd, o, k, 1);
    for oc in 0..o {
        for v in &mut y[oc * h * w..(oc + 1) * h * w] {
            *v = (*v + bd[oc]).max(0.0);
        }
    }
    let pooled = maxpool2_ref(&y, o, h, w);
    let mut logits = vec![0.0f32; units];
    for (u, l) in logits.iter_mut().enumerate() {
        *l = b2d[u]
            + pooled
                .iter()
                .enumerate()
                .map(|(i, v)| v * w2d[u * o * 16 + i])
                .sum::<f32>();
    }
    assert_close(&got[0], &softmax_ref(&logits), "network");
}

#[test]
fn elementwise_diamond() {
    let xd = random(16, 7);
    let x = Var::new("x", Type::f32(&[2, 8]));
    let a = mk("nn.relu", vec![x.expr()], &[]);
    let b = mk("multiply", vec![a.clone(), Expr::scalar_f32(2.0)], &[]);
    let c = mk("add", vec![a, x.expr()], &[]);
    let d = mk("subtract", vec![b, c], &[]);
    let out = mk("tanh", vec![d], &[]);
    let module = IRModule::from_main(Function::new(vec![x], out));
    let exec = build_and_load(&module, vec![], "diamond");
    let got = run(&exec, &[("x", xd.clone(), vec![2, 8])], &[&[2, 8]]);
    let want: Vec<f32> = xd
        .iter()
        .map(|&v| {
            let a = v.max(0.0);
            (a * 2.0 - (a + v)).tanh()
        })
        .collect();
    assert_close(&got[0], &want, "diamond");
}

#[test]
fn reshape_transpose_chain_with_two_outputs() {
    let xd = random(24, 11);
    let x = Var::new("x", Type::f32(&[2, 3, 4]));
    let r1 = mk("reshape", vec![x.expr()], &[("newshape", ints(&[6, 4]))]);
    let t1 = mk("transpose", vec![r1], &[]);
    let r2 = mk("reshape", vec![t1], &[("newshape", ints(&[4, 3, 2]))]);
    let t2 = mk("transpose", vec![r2], &[("axes", ints(&[2, 0, 1]))]);
    let s = mk("sigmoid", vec![x.expr()], &[]);
    let module = IRModule::from_main(Function::new(vec![x], Expr::tuple(vec![t2, s])));
    let exec = build_and_load(&module, vec![], "layout");
    let got = run(
        &exec,
        &[("x", xd.clone(), vec![2, 3, 4])],
        &[&[2, 4, 3], &[2, 3, 4]],
    );
    // r1[i][j] = x[i*4 + j] (6x4); t1[j][i] (4x6); r2 flat = t1 flat as 4x3x2;
    // t2[c][a][b] = r2[a][b][c].
    let mut t1 = [0.0f32; 24];
    for i in 0..6 {
        for j in 0..4 {
            t1[j * 6 + i] = xd[i * 4 + j];
        }
    }
    let mut t2 = [0.0f32; 24];
    for a in 0..4 {
        for b in 0..3 {
            for c in 0..2 {
                t2[(c * 4 + a) * 3 + b] = t1[(a * 3 + b) * 2 + c];
            }
        }
    }
    assert_close(&got[0], &t2, "reshape/transpose chain");
    let sig: Vec<f32> = xd.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
    assert_close(&got[1], &sig, "sigmoid");
}

#[test]
fn storage_is_reused_and_identical_functions_compile_once() {
    let xd = random(32, 13);
    let x = Var::new("x", Type::f32(&[4, 8]));
    let mut e = x.expr();
    for _ in 0..4 {
        e = mk("nn.softmax", vec![e], &[]);
    }
    let module = IRModule::from_main(Function::new(vec![x], e));
    let cg = graph_codegen(&optimize(&module).unwrap()).unwrap();
    assert_eq!(cg.functions.len(), 1, "one softmax function for four calls");
    let graph = Graph::parse(&cg.graph_json).unwrap();
    let ops: Vec<usize> = (0..graph.nodes.len())
        .filter(|&n| !graph.nodes[n].is_input())
        .map(|n| graph.node_row_ptr[n])
        .collect();
    assert_eq!(ops.len(), 4);
    let sid = |e: usize| graph.storage_ids[e];
    assert_eq!(sid(ops[0]), sid(ops[2]), "{:?}", graph.storage_ids);
    assert_ne!(sid(ops[0]), sid(ops[1]));
    for &e in &ops {
        assert_ne!(sid(e), sid(0), "the input is never reused");
    }
    for &e in &ops[..3] {
        assert_ne!(sid(e), sid(ops[3]), "the output is never reused");
    }

    let exec = build_and_load(&module, vec![], "storage");
    let got = run(&exec, &[("x", xd.clone(), vec![4, 8])], &[&[4, 8]]);
    let mut want = xd.clone();
    for _ in 0..4 {
        want = want.chunks(8).flat_map(softmax_ref).collect();
    }
    assert_close(&got[0], &want, "softmax chain");
}

#[test]
fn the_global_builds_a_factory() {
    let x = Var::new("x", Type::f32(&[4]));
    let module = IRModule::from_main(Function::new(
        vec![x.clone()],
        mk("exp", vec![x.expr()], &[]),
    ));
    let g = kiln_ffi::registry::get("graph.build").expect("registered");
    let factory: Module = g.invoke((module, TARGET, kiln_ffi::Any::none())).unwrap();
    assert_eq!(factory.kind(), "GraphExecutorFactory");
    let exec: Module = factory
        .function("default")
        .unwrap()
        .invoke((Device::cpu(0),))
        .unwrap();
    let got = run(&exec, &[("x", vec![0.0, 1.0, -1.0, 2.0], vec![4])], &[&[4]]);
    let want: Vec<f32> = [0.0f32, 1.0, -1.0, 2.0].iter().map(|v| v.exp()).collect();
    assert_close(&got[0], &want, "exp");
}

#[test]
fn reductions_and_same_op_functions_of_other_shapes() {
    let xd = random(24, 17);
    let x = Var::new("x", Type::f32(&[3, 8]));
    let a = mk("nn.relu", vec![x.expr()], &[]);
    let m = mk(
        "mean",
        vec![a],
        &[("axis", ints(&[1])), ("keepdims", AttrValue::Bool(true))],
    );
    let b = mk("subtract", vec![x.expr(), m], &[]);
    let s1 = mk("nn.softmax", vec![b], &[]);
    let mx = mk("max", vec![x.expr()], &[("axis", ints(&[0]))]);
    let s2 = mk("nn.softmax", vec![mx], &[]);
    let module = IRModule::from_main(Function::new(vec![x], Expr::tuple(vec![s1, s2])));
    let cg = graph_codegen(&optimize(&module).unwrap()).unwrap();
    let names: Vec<&str> = cg.functions.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"fused_nn_softmax"), "{names:?}");
    assert!(names.contains(&"fused_nn_softmax_1"), "{names:?}");
    let exec = build_and_load(&module, vec![], "reduce");
    let got = run(&exec, &[("x", xd.clone(), vec![3, 8])], &[&[3, 8], &[8]]);
    let mut want1 = Vec::new();
    for row in xd.chunks(8) {
        let mean = row.iter().map(|v| v.max(0.0)).sum::<f32>() / 8.0;
        let centered: Vec<f32> = row.iter().map(|v| v - mean).collect();
        want1.extend(softmax_ref(&centered));
    }
    assert_close(&got[0], &want1, "mean/subtract/softmax");
    let cols: Vec<f32> = (0..8)
        .map(|j| {
            (0..3)
                .map(|i| xd[i * 8 + j])
                .fold(f32::NEG_INFINITY, f32::max)
        })
        .collect();
    assert_close(&got[1], &softmax_ref(&cols), "max/softmax");
}

#[test]
fn layer_norm_matmul_gelu() {
    let (n, d) = (4usize, 8usize);
    let xd = random(n * d, 19);
    let gd = random(d, 20);
    let bd = random(d, 21);
    let wd = random(d * d, 22);
    let x = Var::new("x", Type::f32(&[n as i64, d as i64]));
    let ln = mk(
        "nn.layer_norm",
        vec![
            x.expr(),
            Expr::const_f32(&gd, &[d as i64]),
            Expr::const_f32(&bd, &[d as i64]),
        ],
        &[],
    );
    let mm = mk(
        "nn.matmul",
        vec![ln, Expr::const_f32(&wd, &[d as i64, d as i64])],
        &[],
    );
    let out = mk("nn.gelu", vec![mm], &[]);
    let module = IRModule::from_main(Function::new(vec![x], out));
    let exec = build_and_load(&module, vec![], "ln");
    let got = run(
        &exec,
        &[("x", xd.clone(), vec![n as i64, d as i64])],
        &[&[n as i64, d as i64]],
    );
    let mut want = Vec::new();
    for row in xd.chunks(d) {
        let mean = row.iter().sum::<f32>() / d as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
        let normed: Vec<f32> = row
            .iter()
            .enumerate()
            .map(|(j, v)| (v - mean) / (var + 1e-5).sqrt() * gd[j] + bd[j])
            .collect();
        for c in 0..d {
            let y: f32 = (0..d).map(|k| normed[k] * wd[k * d + c]).sum();
            let erf =
                kiln_graph::op::tensor::unary::erf(y as f64 / std::f64::consts::SQRT_2) as f32;
            want.push(0.5 * y * (1.0 + erf));
        }
    }
    assert_close(&got[0], &want, "layer_norm/matmul/gelu");
}

#[test]
fn unfused_calls_are_wrapped_and_constant_names_avoid_inputs() {
    let xd = random(6, 23);
    let cd = random(6, 24);
    let x = Var::new("p0", Type::f32(&[2, 3]));
    let a = mk("add", vec![x.expr(), Expr::const_f32(&cd, &[2, 3])], &[]);
    let r = mk("nn.relu", vec![a], &[]);
    let module = IRModule::from_main(Function::new(vec![x], r));
    // No FuseOps: every operator call becomes its own function.
    let cg = graph_codegen(&module).unwrap();
    let names: Vec<&str> = cg.functions.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["fused_add", "fused_nn_relu"]);
    assert_eq!(cg.params.len(), 1);
    assert_eq!(cg.params[0].0, "p1", "`p0` is the input's name");
    let lib = kiln_graph::build::build_lib(&cg, TARGET).unwrap();
    let factory = kiln_runtime::graph_executor::GraphExecutorFactory::create(
        &cg.graph_json,
        &lib,
        cg.params.clone(),
        "default",
    )
    .unwrap();
    let exec: Module = factory
        .function("default")
        .unwrap()
        .invoke((Device::cpu(0),))
        .unwrap();
    let got = run(&exec, &[("p0", xd.clone(), vec![2, 3])], &[&[2, 3]]);
    let want: Vec<f32> = xd.iter().zip(&cd).map(|(a, b)| (a + b).max(0.0)).collect();
    assert_close(&got[0], &want, "unfused add/relu");
}

#[test]
fn concatenate_and_split() {
    let xd = random(12, 29);
    let yd = random(8, 30);
    let x = Var::new("x", Type::f32(&[2, 6]));
    let y = Var::new("y", Type::f32(&[2, 4]));
    let ex = mk("exp", vec![x.expr()], &[]);
    let cat = mk(
        "concatenate",
        vec![ex, y.expr()],
        &[("axis", AttrValue::Int(1))],
    );
    let parts = mk(
        "split",
        vec![cat],
        &[("sections", AttrValue::Int(2)), ("axis", AttrValue::Int(1))],
    );
    let a = mk("nn.relu", vec![Expr::get_item(parts.clone(), 0)], &[]);
    let b = mk("negative", vec![Expr::get_item(parts, 1)], &[]);
    let module = IRModule::from_main(Function::new(vec![x, y], Expr::tuple(vec![a, b])));
    let exec = build_and_load(&module, vec![], "concat");
    let got = run(
        &exec,
        &[("x", xd.clone(), vec![2, 6]), ("y", yd.clone(), vec![2, 4])],
        &[&[2, 5], &[2, 5]],
    );
    let mut cat = Vec::new();
    for r in 0..2 {
        cat.extend(xd[r * 6..r * 6 + 6].iter().map(|v| v.exp()));
        cat.extend_from_slice(&yd[r * 4..r * 4 + 4]);
    }
    let mut want_a = Vec::new();
    let mut want_b = Vec::new();
    for r in 0..2 {
        want_a.extend(cat[r * 10..r * 10 + 5].iter().map(|v| v.max(0.0)));
        want_b.extend(cat[r * 10 + 5..r * 10 + 10].iter().map(|v| -v));
    }
    assert_close(&got[0], &want_a, "concat/split/relu");
    assert_close(&got[1], &want_b, "concat/split/negative");
}

#[test]
fn depthwise_strided_conv_clip_avg_pools() {
    let (c, h) = (4usize, 6usize);
    let xd = random(c * h * h, 31);
    let wd = random(c * 9, 32);
    let x = Var::new("x", Type::f32(&[1, c as i64, h as i64, h as i64]));
    let conv = mk(
        "nn.conv2d",
        vec![x.expr(), Expr::const_f32(&wd, &[c as i64, 1, 3, 3])],
        &[
            ("strides", ints(&[2, 2])),
            ("padding", ints(&[1, 1, 1, 1])),
            ("groups", AttrValue::Int(c as i64)),
        ],
    );
    let cl = mk(
        "clip",
        vec![conv],
        &[
            ("a_min", AttrValue::Float(0.0)),
            ("a_max", AttrValue::Float(0.5)),
        ],
    );
    let ap = mk(
        "nn.avg_pool2d",
        vec![cl],
        &[
            ("pool_size", ints(&[3, 3])),
            ("padding", ints(&[1, 1, 1, 1])),
        ],
    );
    let gp = mk("nn.global_avg_pool2d", vec![ap], &[]);
    let module = IRModule::from_main(Function::new(vec![x], gp));
    let exec = build_and_load(&module, vec![], "depthwise");
    let got = run(
        &exec,
        &[("x", xd.clone(), vec![1, c as i64, h as i64, h as i64])],
        &[&[1, c as i64, 1, 1]],
    );
    let o = 3usize; // (6 + 2 - 3) / 2 + 1
    let mut want = Vec::new();
    for ch in 0..c {
        let mut conv = vec![0.0f32; o * o];
        for y in 0..o {
            for xx in 0..o {
                let mut acc = 0.0;
                for ky in 0..3 {
                    for kx in 0..3 {
                        let iy = (2 * y + ky) as i64 - 1;
                        let ix = (2 * xx + kx) as i64 - 1;
                        if iy >= 0 && ix >= 0 && iy < h as i64 && ix < h as i64 {
                            acc += xd[(ch * h + iy as usize) * h + ix as usize]
                                * wd[ch * 9 + ky * 3 + kx];
                        }
                    }
                }
                conv[y * o + xx] = acc.clamp(0.0, 0.5);
            }
        }
        let mut total = 0.0;
        for y in 0..o as i64 {
            for xx in 0..o as i64 {
                let (mut s, mut n) = (0.0, 0.0);
                for dy in -1..=1 {
                    for dx in -1..=1 {
                        let (iy, ix) = (y + dy, xx + dx);
                        if iy >= 0 && ix >= 0 && iy < o as i64 && ix < o as i64 {
                            s += conv[iy as usize * o + ix as usize];
                            n += 1.0;
                        }
                    }
                }
                total += s / n;
            }
        }
        want.push(total / (o * o) as f32);
    }
    assert_close(&got[0], &want, "depthwise/clip/avg_pool/global_avg_pool");
}

#[test]
fn long_fused_names_are_truncated_like_tvm() {
    let xd = random(8, 37);
    let x = Var::new("x", Type::f32(&[8]));
    let mut e = x.expr();
    for _ in 0..12 {
        e = mk("nn.relu", vec![mk("negative", vec![e], &[])], &[]);
    }
    let module = IRModule::from_main(Function::new(vec![x], e));
    let cg = graph_codegen(&optimize(&module).unwrap()).unwrap();
    assert_eq!(cg.functions.len(), 1);
    let name = &cg.functions[0].0;
    assert!(
        name.starts_with("fused_negative_nn_relu_negative"),
        "{name}"
    );
    assert!(name.len() < 110 && name.ends_with('_'), "{name}");
    let exec = build_and_load(&module, vec![], "long");
    let got = run(&exec, &[("x", xd.clone(), vec![8])], &[&[8]]);
    // relu(-relu(-x)) = relu(min(x, 0)) = 0 after the first two pairs.
    assert_close(&got[0], &[0.0; 8], "negative/relu chain");
}

#[test]
fn conv2d_transpose_stride_two() {
    let (ci, co, h) = (2usize, 3usize, 3usize);
    let xd = random(ci * h * h, 41);
    let wd = random(ci * co * 4, 42);
    let x = Var::new("x", Type::f32(&[1, ci as i64, h as i64, h as i64]));
    let y = mk(
        "nn.conv2d_transpose",
        vec![
            x.expr(),
            Expr::const_f32(&wd, &[ci as i64, co as i64, 2, 2]),
        ],
        &[("strides", ints(&[2, 2]))],
    );
    let module = IRModule::from_main(Function::new(vec![x], y));
    let exec = build_and_load(&module, vec![], "convt");
    let oh = 2 * h;
    let got = run(
        &exec,
        &[("x", xd.clone(), vec![1, ci as i64, h as i64, h as i64])],
        &[&[1, co as i64, oh as i64, oh as i64]],
    );
    let mut want = vec![0.0f32; co * oh * oh];
    for i in 0..ci {
        for o in 0..co {
            for yy in 0..h {
                for xx in 0..h {
                    for ky in 0..2 {
                        for kx in 0..2 {
                            want[(o * oh + 2 * yy + ky) * oh + 2 * xx + kx] +=
                                xd[(i * h + yy) * h + xx] * wd[((i * co + o) * 2 + ky) * 2 + kx];
                        }
                    }
                }
            }
        }
    }
    assert_close(&got[0], &want, "conv2d_transpose");
}

/// `x` (`c` planes of `h x w`) plus `b[ch]` per channel, then `max(., 0)` when `relu`.
fn bias_relu(x: &mut [f32], b: &[f32], hw: usize, relu: bool) {
    for (ch, plane) in x.chunks_mut(hw).enumerate() {
        for v in plane {
            *v += b[ch];
            if relu {
                *v = v.max(0.0);
            }
        }
    }
}

/// A residual CNN whose activations stay in channel blocks between its layers
/// (ConvertBlockedLayout): a 3-channel stem (NCHW in, blocks out), a 3x3 layer with a
/// residual add, max pooling over blocks, a 1x1 layer scaled per channel, a channel concat of
/// blocks, a 3x3 layer of 24 filters (not whole blocks with 16 lanes: its data goes back to
/// NCHW) and a global average pool; a second output (a sigmoid of blocks) reads NCHW back; a
/// third splits the blocks in halves and upsamples one (nearest).
#[test]
fn residual_network_in_channel_blocks() {
    let (h, c, o4) = (12usize, 32usize, 24usize);
    let (hw, ph) = (h * h, h / 2);
    let xd = random(3 * hw, 61);
    let w1 = random(c * 3 * 9, 62);
    let b1 = random(c, 63);
    let w2 = random(c * c * 9, 64);
    let b2 = random(c, 65);
    let w3 = random(c * c, 66);
    let s3 = random(c, 67);
    let w4 = random(o4 * 2 * c * 9, 68);
    let (ci, oi, o4i) = (c as i64, h as i64, o4 as i64);
    let x = Var::new("x", Type::f32(&[1, 3, oi, oi]));
    let conv = |d: Expr, w: &[f32], shape: [i64; 4], pad: i64| {
        mk(
            "nn.conv2d",
            vec![d, Expr::const_f32(w, &shape)],
            &[("padding", ints(&[pad; 4]))],
        )
    };
    let per_channel = |v: &[f32]| Expr::const_f32(v, &[v.len() as i64, 1, 1]);
    let s = conv(x.expr(), &w1, [ci, 3, 3, 3], 1);
    let s = mk(
        "nn.relu",
        vec![mk("add", vec![s, per_channel(&b1)], &[])],
        &[],
    );
    let t = conv(s.clone(), &w2, [ci, ci, 3, 3], 1);
    let t = mk(
        "add",
        vec![mk("add", vec![t, per_channel(&b2)], &[]), s],
        &[],
    );
    let t = mk("nn.relu", vec![t], &[]);
    let p = mk(
        "nn.max_pool2d",
        vec![t.clone()],
        &[("pool_size", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
    );
    let q = conv(p.clone(), &w3, [ci, ci, 1, 1], 0);
    let q = mk("multiply", vec![q, per_channel(&s3)], &[]);
    let cat = mk("concatenate", vec![p, q], &[("axis", AttrValue::Int(1))]);
    let r = conv(cat, &w4, [o4i, 2 * ci, 3, 3], 1);
    let g = mk("nn.global_avg_pool2d", vec![r], &[]);
    let sig = mk("sigmoid", vec![t.clone()], &[]);
    // The second half of the channels (a split of blocks), upsampled twice (nearest).
    let halves = mk(
        "split",
        vec![t],
        &[("sections", AttrValue::Int(2)), ("axis", AttrValue::Int(1))],
    );
    let up = mk(
        "image.resize2d",
        vec![Expr::get_item(halves, 1)],
        &[
            ("size", ints(&[2 * oi, 2 * oi])),
            ("method", AttrValue::Str("nearest_neighbor".into())),
            (
                "coordinate_transformation_mode",
                AttrValue::Str("asymmetric".into()),
            ),
            ("rounding_method", AttrValue::Str("floor".into())),
        ],
    );
    let up = mk("nn.relu", vec![up], &[]);
    let module = IRModule::from_main(Function::new(vec![x], Expr::tuple(vec![g, sig, up])));
    let text = optimize(&module).unwrap().to_string();
    assert!(text.contains("out_layout=\"NCHW"), "{text}");
    let exec = build_and_load(&module, vec![], "blocked");
    let got = run(
        &exec,
        &[("x", xd.clone(), vec![1, 3, oi, oi])],
        &[
            &[1, o4i, 1, 1],
            &[1, ci, oi, oi],
            &[1, ci / 2, 2 * oi, 2 * oi],
        ],
    );

    let mut s = conv2d_ref(&xd, 3, h, h, &w1, c, 3, 1);
    bias_relu(&mut s, &b1, hw, true);
    let mut t = conv2d_ref(&s, c, h, h, &w2, c, 3, 1);
    for (v, r) in t.iter_mut().zip(&s) {
        *v += r;
    }
    bias_relu(&mut t, &b2, hw, true);
    let p = maxpool2_ref(&t, c, h, h);
    let mut q = conv2d_ref(&p, c, ph, ph, &w3, c, 1, 0);
    for (ch, plane) in q.chunks_mut(ph * ph).enumerate() {
        plane.iter_mut().for_each(|v| *v *= s3[ch]);
    }
    let cat: Vec<f32> = p.iter().chain(&q).cloned().collect();
    let r = conv2d_ref(&cat, 2 * c, ph, ph, &w4, o4, 3, 1);
    let g: Vec<f32> = r
        .chunks(ph * ph)
        .map(|plane| plane.iter().sum::<f32>() / (ph * ph) as f32)
        .collect();
    let sig: Vec<f32> = t.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
    assert_close(&got[0], &g, "pooled output");
    assert_close(&got[1], &sig, "sigmoid of the residual block");
    let mut up = Vec::with_capacity(c / 2 * 4 * hw);
    for plane in t[c / 2 * hw..].chunks(hw) {
        for y in 0..2 * h {
            for x in 0..2 * h {
                up.push(plane[(y / 2) * h + x / 2].max(0.0));
            }
        }
    }
    assert_close(&got[2], &up, "upsampled half of the channels");
}
