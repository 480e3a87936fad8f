//! Integer convolutions and matrix products end to end (what ONNX ConvInteger, MatMulInteger
//! and the QLinear ops lower to): `int8`/`uint8` operands cast to `int32`, zero points
//! subtracted, then `nn.conv2d` (direct, 1x1, grouped, depthwise; also on the raw `int8`
//! operands with `out_dtype="int32"`), `nn.dense` and batched `nn.matmul` in `int32`, built
//! through LLVM for the host CPU and checked exactly against naive `i64` loops.

mod common;
use kiln_testing::rng::random_ints;

use kiln_ffi::{DataType, Device};

// Links the registrations of kiln-graph (the `graph.build` global).
const _: fn() -> *const () = kiln_graph::link_globals;
use kiln_graph::build::build;
use kiln_graph::ir::{AttrValue, Expr, Function, IRModule, Type, Var};
use kiln_graph::op::mk;
use kiln_runtime::module::{export_library, load_module, ExportOptions, Module};
use kiln_runtime::tensor::Tensor;

const TARGET: &str = "llvm -mcpu=native";

fn i8s(v: &[i64]) -> Vec<i8> {
    v.iter().map(|&x| x as i8).collect()
}

fn u8s(v: &[i64]) -> Vec<u8> {
    v.iter().map(|&x| x as u8).collect()
}

fn int32(e: Expr) -> Expr {
    mk(
        "cast",
        vec![e],
        &[("dtype", AttrValue::Str("int32".into()))],
    )
}

/// `int32(e) - zp`.
fn centered(e: Expr, zp: i32) -> Expr {
    let zp = Expr::constant(Tensor::from_slice(&[zp], &[]).unwrap());
    mk("subtract", vec![int32(e), zp], &[])
}

fn const_i8(v: &[i64], shape: &[i64]) -> Expr {
    Expr::constant(Tensor::from_slice(&i8s(v), shape).unwrap())
}

/// A naive grouped NCHW convolution of centered values (`[C, H, W]` data, batch of one).
#[allow(clippy::too_many_arguments)]
fn conv_ref(
    x: &[i64],
    (c, h, w): (usize, usize, usize),
    wt: &[i64],
    (o, k): (usize, usize),
    groups: usize,
    pad: usize,
    stride: usize,
) -> Vec<i64> {
    let (oh, ow) = (
        (h + 2 * pad - k) / stride + 1,
        (w + 2 * pad - k) / stride + 1,
    );
    let (cpg, opg) = (c / groups, o / groups);
    let mut out = vec![0; o * oh * ow];
    for oc in 0..o {
        for y in 0..oh {
            for xx in 0..ow {
                let mut acc = 0;
                for ic in 0..cpg {
                    let ch = (oc / opg) * cpg + ic;
                    for ky in 0..k {
                        for kx in 0..k {
                            let iy = (y * stride + ky) as i64 - pad as i64;
                            let ix = (xx * stride + kx) as i64 - pad as i64;
                            if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                                continue;
                            }
                            acc += x[(ch * h + iy as usize) * w + ix as usize]
                                * wt[((oc * cpg + ic) * k + ky) * k + kx];
                        }
                    }
                }
                out[(oc * oh + y) * ow + xx] = acc;
            }
        }
    }
    out
}

/// Builds `module` for the host, loads it and runs it on `inputs`; the `int32` outputs.
fn build_run(
    module: &IRModule,
    inputs: Vec<(&str, Tensor)>,
    outputs: usize,
    tag: &str,
) -> Vec<Vec<i32>> {
    let factory = build(module, TARGET, vec![]).unwrap();
    let dir = std::env::temp_dir().join(format!("kiln_integer_{tag}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join("deploy.so");
    export_library(&factory, &so, &ExportOptions::default()).unwrap();
    let loaded = load_module(&so).unwrap();
    let exec: Module = loaded
        .function("default")
        .unwrap()
        .invoke((Device::cpu(0),))
        .unwrap();
    for (name, t) in inputs {
        exec.function("set_input")
            .unwrap()
            .invoke::<()>((name, t))
            .unwrap();
    }
    exec.function("run").unwrap().invoke::<()>(()).unwrap();
    let outs = (0..outputs)
        .map(|i| {
            let t: Tensor = exec
                .function("get_output")
                .unwrap()
                .invoke((i as i64,))
                .unwrap();
            assert_eq!(t.dtype(), DataType::int(32));
            t.to_vec::<i32>().unwrap()
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    outs
}

fn assert_exact(got: &[i32], want: &[i64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(*g as i64, *w, "{what}[{i}]");
    }
}

#[test]
fn int32_convolutions_are_exact() {
    let (c, h, w) = (16usize, 11usize, 11usize);
    let xzp = 3;
    let xd = random_ints(c * h * w, 1, -128, 127);
    let xc: Vec<i64> = xd.iter().map(|v| v - xzp).collect();
    // (filters, kernel, groups, padding, stride): direct, 1x1 strided, grouped, depthwise.
    let cases = [
        (24usize, 3usize, 1usize, 1usize, 1usize),
        (32, 1, 1, 0, 2),
        (8, 3, 4, 1, 2),
        (16, 3, 16, 1, 1),
    ];
    let x = Var::new(
        "x",
        Type::tensor(&[1, c as i64, h as i64, w as i64], DataType::int(8)),
    );
    let mut outs = Vec::new();
    let mut weights = Vec::new();
    for (i, &(o, k, g, p, s)) in cases.iter().enumerate() {
        let wd = random_ints(o * (c / g) * k * k, 10 + i as u64, -128, 127);
        let shape = [o as i64, (c / g) as i64, k as i64, k as i64];
        let ints = |v: Vec<i64>| AttrValue::Ints(v);
        let attrs = [
            ("padding", ints(vec![p as i64; 4])),
            ("strides", ints(vec![s as i64; 2])),
            ("groups", AttrValue::Int(g as i64)),
        ];
        outs.push(mk(
            "nn.conv2d",
            vec![centered(x.expr(), xzp as i32), int32(const_i8(&wd, &shape))],
            &attrs,
        ));
        // The same convolution of the raw int8 operands summed in `out_dtype`.
        let mut widen = attrs.to_vec();
        widen.push(("out_dtype", AttrValue::Str("int32".into())));
        outs.push(mk(
            "nn.conv2d",
            vec![x.expr(), const_i8(&wd, &shape)],
            &widen,
        ));
        weights.push(wd);
    }
    let module = IRModule::from_main(Function::new(vec![x], Expr::tuple(outs)));
    let xt = Tensor::from_slice(&i8s(&xd), &[1, c as i64, h as i64, w as i64]).unwrap();
    let got = build_run(&module, vec![("x", xt)], 2 * cases.len(), "conv");
    for (i, &(o, k, g, p, s)) in cases.iter().enumerate() {
        let want = conv_ref(&xc, (c, h, w), &weights[i], (o, k), g, p, s);
        assert_exact(&got[2 * i], &want, &format!("conv case {i}"));
        let want = conv_ref(&xd, (c, h, w), &weights[i], (o, k), g, p, s);
        assert_exact(&got[2 * i + 1], &want, &format!("out_dtype conv case {i}"));
    }
}

#[test]
fn int32_dense_and_batched_matmul_are_exact() {
    let (m, k, n) = (37usize, 64usize, 48usize);
    let ad = random_ints(m * k, 2, 0, 255);
    let wd = random_ints(n * k, 3, -128, 127);
    let (b, bm, bk, bn) = (3usize, 5usize, 40usize, 7usize);
    let pd = random_ints(b * bm * bk, 4, -128, 127);
    let qd = random_ints(b * bk * bn, 5, -128, 127);

    let a = Var::new("a", Type::tensor(&[m as i64, k as i64], DataType::uint(8)));
    let p = Var::new(
        "p",
        Type::tensor(&[b as i64, bm as i64, bk as i64], DataType::int(8)),
    );
    let dense = mk(
        "nn.dense",
        vec![
            centered(a.expr(), 128),
            int32(const_i8(&wd, &[n as i64, k as i64])),
        ],
        &[],
    );
    let bmm = mk(
        "nn.matmul",
        vec![
            centered(p.expr(), -5),
            int32(const_i8(&qd, &[b as i64, bk as i64, bn as i64])),
        ],
        &[],
    );
    let module = IRModule::from_main(Function::new(vec![a, p], Expr::tuple(vec![dense, bmm])));
    let at = Tensor::from_slice(&u8s(&ad), &[m as i64, k as i64]).unwrap();
    let pt = Tensor::from_slice(&i8s(&pd), &[b as i64, bm as i64, bk as i64]).unwrap();
    let got = build_run(&module, vec![("a", at), ("p", pt)], 2, "matmul");

    let mut want = vec![0i64; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k).map(|l| (ad[i * k + l] - 128) * wd[j * k + l]).sum();
        }
    }
    assert_exact(&got[0], &want, "dense");
    let mut want = vec![0i64; b * bm * bn];
    for z in 0..b {
        for i in 0..bm {
            for j in 0..bn {
                want[(z * bm + i) * bn + j] = (0..bk)
                    .map(|l| (pd[(z * bm + i) * bk + l] + 5) * qd[(z * bk + l) * bn + j])
                    .sum();
            }
        }
    }
    assert_exact(&got[1], &want, "batched matmul");
}
