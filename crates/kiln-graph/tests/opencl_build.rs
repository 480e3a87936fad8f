//! The graph build for the `opencl` target: hand-built graphs -> `build(.., "opencl")` -> one
//! exported `.so` (host code importing one OpenCL module) -> `load_module` ->
//! `["default"](opencl(0))` -> graph executor with params and intermediates on the device. Inputs
//! come from host tensors, outputs are poisoned with NaN on the device before each run, and
//! results are checked against naive Rust loops on fresh random inputs. Without an OpenCL device
//! the running tests print why and pass after checking what the build made.

mod common;

use kiln_ffi::device::device_type::OPENCL;
use kiln_ffi::Device;
use kiln_graph::build::build;
use kiln_graph::build::lower::ScheduleFamily;
use kiln_graph::ir::{AttrValue, Expr, Function, IRModule, Type, Var};
use kiln_graph::op::mk;
use kiln_runtime::module::{export_library, load_module, ExportOptions, Module};
use kiln_runtime::tensor::Tensor;
use kiln_testing::random;

// Links the registrations of kiln-graph (the `graph.build` global).
const _: fn() -> *const () = kiln_graph::link_globals;

fn cl0() -> Option<Device> {
    let dev = Device::new(OPENCL, 0);
    if kiln_runtime::device::device_exists(dev) {
        Some(dev)
    } else {
        eprintln!("skipped running: no OpenCL device (scripts/setup.sh installs PoCL)");
        None
    }
}

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    kiln_testing::assert_allclose(got, want, kiln_testing::Tolerance::Scaled(1e-4), what);
}

/// A library exported by [`export`]; its folder is removed when it goes out of scope (a
/// loaded library stays mapped).
struct Exported {
    dir: std::path::PathBuf,
}

impl Exported {
    fn path(&self) -> std::path::PathBuf {
        self.dir.join("deploy.so")
    }
}

impl Drop for Exported {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `factory` exported as `deploy.so` in a folder of this test process named for `tag`.
fn export(factory: &Module, tag: &str) -> Exported {
    let dir = std::env::temp_dir().join(format!("kiln_opencl_build_{tag}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = Exported { dir };
    export_library(factory, lib.path(), &ExportOptions::default()).unwrap();
    lib
}

/// The executor of the exported library `lib`, created on `dev`.
fn executor(lib: &Exported, dev: Device) -> Module {
    load_module(lib.path())
        .unwrap()
        .function("default")
        .unwrap()
        .invoke((dev,))
        .unwrap()
}

/// Builds `module` for `target`, checks that the host library imports one OpenCL module with a
/// kernel for every function, exports and loads it; the executor on `dev` when there is one.
fn build_for_opencl(
    module: &IRModule,
    params: Vec<(String, Tensor)>,
    target: &str,
    tag: &str,
) -> (Module, Option<Module>) {
    let factory = build(module, target, params).unwrap();
    let host = &factory.imports()[0];
    let device = host.imports();
    assert_eq!(device.len(), 1, "one device module");
    assert_eq!(device[0].kind(), "opencl");
    let kernels = device[0].function_names();
    for f in host.function_names() {
        assert!(
            kernels
                .iter()
                .any(|k| k.starts_with(&format!("{f}_kernel"))),
            "`{f}` launches no kernel: {kernels:?}"
        );
    }
    let so = export(&factory, tag);
    let Some(dev) = cl0() else {
        return (device[0].clone(), None);
    };
    (device[0].clone(), Some(executor(&so, dev)))
}

/// Sets the inputs from host tensors, poisons the outputs on the device, runs and reads the
/// outputs back.
fn run(exec: &Module, inputs: &[(&str, &[f32], &[i64])], n_out: usize) -> Vec<Vec<f32>> {
    let f = |name: &str| exec.function(name).unwrap();
    for (name, data, shape) in inputs {
        let t = Tensor::from_slice(data, shape).unwrap();
        f("set_input").invoke::<()>((*name, t)).unwrap();
    }
    for i in 0..n_out {
        let t: Tensor = f("get_output").invoke((i as i64,)).unwrap();
        assert_eq!(
            t.device().device_type(),
            OPENCL,
            "outputs live on the device"
        );
        let n: i64 = t.shape().iter().product();
        t.copy_from_slice(&vec![f32::NAN; n as usize]).unwrap();
    }
    f("run").invoke::<()>(()).unwrap();
    (0..n_out)
        .map(|i| {
            let t: Tensor = f("get_output").invoke((i as i64,)).unwrap();
            t.to_device(Device::cpu(0))
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        })
        .collect()
}

fn softmax_ref(x: &[f32]) -> Vec<f32> {
    let m = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = x.iter().map(|v| (v - m).exp()).collect();
    let s: f32 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

#[test]
fn conv_relu_pool_dense_softmax_on_the_device() {
    let (c, h, o, units) = (3usize, 8usize, 4usize, 10usize);
    let (xd, wd, bd) = (random(c * h * h, 31), random(o * c * 9, 32), random(o, 33));
    let w2d = random(units * o * 16, 34);
    let x = Var::new("data", Type::f32(&[1, c as i64, h as i64, h as i64]));
    let w2 = Var::new("w2", Type::f32(&[units as i64, (o * 16) as i64]));
    let conv = mk(
        "nn.conv2d",
        vec![x.expr(), Expr::const_f32(&wd, &[o as i64, c as i64, 3, 3])],
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
    let d = mk(
        "nn.dense",
        vec![mk("flatten", vec![p], &[]), w2.expr()],
        &[],
    );
    let sm = mk("nn.softmax", vec![d], &[]);
    let module = IRModule::from_main(Function::new(vec![x, w2], sm));
    let w2t = Tensor::from_slice(&w2d, &[units as i64, (o * 16) as i64]).unwrap();
    let (device, exec) = build_for_opencl(&module, vec![("w2".into(), w2t)], "opencl", "net");
    // conv2d + bias + relu is one kernel: the convolution is a private value of each thread.
    let src = device.inspect_source("cl").unwrap();
    let conv_kernels = device
        .function_names()
        .into_iter()
        .filter(|k| k.starts_with("fused_nn_conv2d_add_nn_relu_kernel"))
        .count();
    assert_eq!(conv_kernels, 1, "{src}");
    let Some(exec) = exec else { return };
    let got = run(
        &exec,
        &[("data", &xd, &[1, c as i64, h as i64, h as i64])],
        1,
    );

    let mut y = vec![0.0f32; o * h * h];
    for oc in 0..o {
        for yy in 0..h {
            for xx in 0..h {
                let mut acc = bd[oc];
                for ic in 0..c {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (iy, ix) = (yy + ky, xx + kx);
                            if iy < 1 || ix < 1 || iy > h || ix > h {
                                continue;
                            }
                            acc += xd[(ic * h + iy - 1) * h + ix - 1]
                                * wd[((oc * c + ic) * 3 + ky) * 3 + kx];
                        }
                    }
                }
                y[(oc * h + yy) * h + xx] = acc.max(0.0);
            }
        }
    }
    let hp = h / 2;
    let mut pooled = vec![f32::NEG_INFINITY; o * hp * hp];
    for ch in 0..o {
        for yy in 0..hp {
            for xx in 0..hp {
                for (dy, dx) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    let v = y[(ch * h + 2 * yy + dy) * h + 2 * xx + dx];
                    let out = &mut pooled[(ch * hp + yy) * hp + xx];
                    *out = out.max(v);
                }
            }
        }
    }
    let logits: Vec<f32> = (0..units)
        .map(|u| {
            pooled
                .iter()
                .enumerate()
                .map(|(i, v)| v * w2d[u * o * 16 + i])
                .sum()
        })
        .collect();
    assert_close(&got[0], &softmax_ref(&logits), "network on opencl");
}

#[test]
fn reductions_two_outputs_and_a_scalar_intermediate() {
    let xd = random(24, 41);
    let x = Var::new("x", Type::f32(&[3, 8]));
    let m = mk(
        "mean",
        vec![mk("nn.relu", vec![x.expr()], &[])],
        &[("axis", ints(&[1])), ("keepdims", AttrValue::Bool(true))],
    );
    let s1 = mk(
        "nn.softmax",
        vec![mk("subtract", vec![x.expr(), m], &[])],
        &[],
    );
    // A reduction to a scalar, read by an elementwise output.
    let total = mk("sum", vec![x.expr()], &[]);
    let s2 = mk("multiply", vec![x.expr(), total], &[]);
    let module = IRModule::from_main(Function::new(vec![x], Expr::tuple(vec![s1, s2])));
    let target = "opencl -max_num_threads=16";
    let (device, exec) = build_for_opencl(&module, vec![], target, "reduce");
    let src = device.inspect_source("cl").unwrap();
    assert!(src.contains("* 16) + ((int)get_local_id(0))"), "{src}");
    let Some(exec) = exec else { return };
    let got = run(&exec, &[("x", &xd, &[3, 8])], 2);
    let mut want1 = Vec::new();
    for row in xd.chunks(8) {
        let mean = row.iter().map(|v| v.max(0.0)).sum::<f32>() / 8.0;
        let centered: Vec<f32> = row.iter().map(|v| v - mean).collect();
        want1.extend(softmax_ref(&centered));
    }
    assert_close(&got[0], &want1, "mean/subtract/softmax");
    let sum: f32 = xd.iter().sum();
    let want2: Vec<f32> = xd.iter().map(|v| v * sum).collect();
    assert_close(&got[1], &want2, "x * sum(x)");
}

#[test]
fn layer_norm_and_matmul_on_the_device() {
    let (n, d) = (5usize, 12usize);
    let (xd, gd, bd, wd) = (
        random(n * d, 51),
        random(d, 52),
        random(d, 53),
        random(d * d, 54),
    );
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
    let out = mk("tanh", vec![mm], &[]);
    let module = IRModule::from_main(Function::new(vec![x], out));
    let (_, exec) = build_for_opencl(&module, vec![], "opencl", "ln");
    let Some(exec) = exec else { return };
    let got = run(&exec, &[("x", &xd, &[n as i64, d as i64])], 1);
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
            want.push(y.tanh());
        }
    }
    assert_close(&got[0], &want, "layer_norm/matmul/tanh");
}

fn det3(m: &[f32]) -> f32 {
    m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6])
        + m[2] * (m[3] * m[7] - m[4] * m[6])
}

/// `exp(det(tanh(x_i)) * y_i)` for the 3x3 matrices `x_i` of `xd`.
fn tanh_det_exp(xd: &[f32], yd: &[f32]) -> Vec<f32> {
    xd.chunks(9)
        .zip(yd)
        .map(|(m, b)| {
            let t: Vec<f32> = m.iter().map(|v| v.tanh()).collect();
            (det3(&t) * b).exp()
        })
        .collect()
}

#[test]
fn operators_without_a_device_schedule_run_on_the_host() {
    // tanh (device) -> det (host: a hand-written loop nest) -> multiply, exp (device).
    let (xd, yd) = (random(18, 71), random(2, 72));
    let x = Var::new("x", Type::f32(&[2, 3, 3]));
    let y = Var::new("y", Type::f32(&[2]));
    let det = mk("det", vec![mk("tanh", vec![x.expr()], &[])], &[]);
    let out = mk("exp", vec![mk("multiply", vec![det, y.expr()], &[])], &[]);
    let module = IRModule::from_main(Function::new(vec![x, y], out));
    let factory = build(&module, "opencl", vec![]).unwrap();
    let json: String = factory
        .function("get_graph_json")
        .unwrap()
        .invoke(())
        .unwrap();
    let graph = kiln_runtime::graph_executor::graph_json::Graph::parse(&json).unwrap();
    let devs = graph.device_types.clone().expect("device_index is written");
    assert!(devs.contains(&1) && devs.contains(&OPENCL), "{devs:?}");
    let copies = graph
        .nodes
        .iter()
        .filter(|n| n.param.as_ref().is_some_and(|p| p.func_name == "__copy"))
        .count();
    assert!(copies >= 2, "copies to the host and back: {json}");
    let det_node = graph
        .nodes
        .iter()
        .position(|n| n.name.contains("det"))
        .expect("a det node");
    let det_entry = graph.node_row_ptr[det_node];
    assert_eq!(devs[det_entry], 1, "det runs on the host: {json}");
    for (nid, n) in graph.nodes.iter().enumerate() {
        let is_copy = n.param.as_ref().is_some_and(|p| p.func_name == "__copy");
        if n.is_input() || is_copy {
            continue;
        }
        let at = devs[graph.node_row_ptr[nid]];
        for e in &n.inputs {
            assert_eq!(
                devs[graph.entry_of(e)],
                at,
                "node {:?} reads an entry of another device",
                n.name
            );
        }
    }
    for (eid_a, &sa) in graph.storage_ids.iter().enumerate() {
        for (eid_b, &sb) in graph.storage_ids.iter().enumerate() {
            if sa == sb {
                assert_eq!(devs[eid_a], devs[eid_b], "storage {sa} on two devices");
            }
        }
    }
    // The library: host code with the det function compiled for the CPU, no kernel for it.
    let host = &factory.imports()[0];
    let kernels = host.imports()[0].function_names();
    assert!(
        !kernels.iter().any(|k| k.contains("det")),
        "det has no kernel: {kernels:?}"
    );
    let so = export(&factory, "det");
    let Some(dev) = cl0() else { return };
    let exec = executor(&so, dev);
    let want = tanh_det_exp(&xd, &yd);
    let got = run(&exec, &[("x", &xd, &[2, 3, 3]), ("y", &yd, &[2])], 1);
    assert_close(&got[0], &want, "tanh/det/multiply/exp");
    // Fresh inputs through the same executor.
    let (xd, yd) = (random(18, 73), random(2, 74));
    let want = tanh_det_exp(&xd, &yd);
    let got = run(&exec, &[("x", &xd, &[2, 3, 3]), ("y", &yd, &[2])], 1);
    assert_close(&got[0], &want, "tanh/det/multiply/exp, second run");
    // Giving the CPU explicitly is the same.
    let exec = load_module(so.path())
        .unwrap()
        .function("default")
        .unwrap()
        .invoke((dev, Device::cpu(0)))
        .unwrap();
    let got = run(&exec, &[("x", &xd, &[2, 3, 3]), ("y", &yd, &[2])], 1);
    assert_close(&got[0], &want, "with the CPU given");
    // Lowering det for the device directly is still an error naming it.
    let cg =
        kiln_graph::build::graph_codegen(&kiln_graph::build::optimize(&module).unwrap()).unwrap();
    let (name, f) = cg
        .functions
        .iter()
        .find(|(n, _)| n.contains("det"))
        .unwrap();
    let cpu = kiln_codegen::target::Target::parse("opencl")
        .unwrap()
        .cpu_desc();
    let e = kiln_graph::build::lower::lower_primitive(f, name, "opencl", &cpu)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("operator `det`") && e.contains("has no device schedule"),
        "{e}"
    );
    // The CPU build of the same graph is fine.
    build(&module, "llvm", vec![]).unwrap();
}

#[test]
fn a_graph_only_on_the_host_copies_its_outputs_to_the_device() {
    let xd = random(18, 77);
    let x = Var::new("x", Type::f32(&[2, 3, 3]));
    let module = IRModule::from_main(Function::new(
        vec![x.clone()],
        mk("det", vec![x.expr()], &[]),
    ));
    let factory = build(&module, "opencl", vec![]).unwrap();
    let so = export(&factory, "det3");
    let Some(dev) = cl0() else { return };
    let exec = executor(&so, dev);
    let want: Vec<f32> = xd.chunks(9).map(det3).collect();
    let got = run(&exec, &[("x", &xd, &[2, 3, 3])], 1);
    assert_close(&got[0], &want, "det alone");
}

#[test]
fn inputs_read_only_on_the_host_are_placed_there() {
    // det reads `x` directly: `x` is a host entry, and the only copy brings det's result to
    // the device for the multiply.
    let (xd, yd) = (random(18, 75), random(2, 76));
    let x = Var::new("x", Type::f32(&[2, 3, 3]));
    let y = Var::new("y", Type::f32(&[2]));
    let det = mk("det", vec![x.expr()], &[]);
    let out = mk("multiply", vec![det, y.expr()], &[]);
    let module = IRModule::from_main(Function::new(vec![x, y], out));
    let factory = build(&module, "opencl", vec![]).unwrap();
    let json: String = factory
        .function("get_graph_json")
        .unwrap()
        .invoke(())
        .unwrap();
    let graph = kiln_runtime::graph_executor::graph_json::Graph::parse(&json).unwrap();
    let devs = graph.device_types.clone().expect("device_index is written");
    let entry = |name: &str| {
        let nid = graph.nodes.iter().position(|n| n.name == name).unwrap();
        devs[graph.node_row_ptr[nid]]
    };
    assert_eq!(entry("x"), 1, "{json}");
    assert_eq!(entry("y"), OPENCL, "{json}");
    let copies = graph
        .nodes
        .iter()
        .filter(|n| n.param.as_ref().is_some_and(|p| p.func_name == "__copy"))
        .count();
    assert_eq!(copies, 1, "{json}");
    let so = export(&factory, "det2");
    let Some(dev) = cl0() else { return };
    let exec = executor(&so, dev);
    let want: Vec<f32> = xd.chunks(9).zip(&yd).map(|(m, b)| det3(m) * b).collect();
    let got = run(&exec, &[("x", &xd, &[2, 3, 3]), ("y", &yd, &[2])], 1);
    assert_close(&got[0], &want, "det/multiply");
}

#[test]
fn scalar_outputs_run_in_one_thread() {
    let xd = random(20, 61);
    let x = Var::new("x", Type::f32(&[4, 5]));
    let total = mk("sum", vec![mk("exp", vec![x.expr()], &[])], &[]);
    let peak = mk("max", vec![x.expr()], &[]);
    let module = IRModule::from_main(Function::new(
        vec![x],
        Expr::tuple(vec![
            total,
            mk("sqrt", vec![mk("abs", vec![peak], &[])], &[]),
        ]),
    ));
    let (_, exec) = build_for_opencl(&module, vec![], "opencl", "scalar");
    let Some(exec) = exec else { return };
    let got = run(&exec, &[("x", &xd, &[4, 5])], 2);
    let want: f32 = xd.iter().map(|v| v.exp()).sum();
    assert_close(&got[0], &[want], "sum(exp(x))");
    let peak = xd.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    assert_close(&got[1], &[peak.abs().sqrt()], "sqrt(|max(x)|)");
}

#[test]
fn the_schedule_family_follows_the_target() {
    assert_eq!(
        ScheduleFamily::parse("opencl").unwrap(),
        ScheduleFamily::Gpu { num_threads: 256 }
    );
    assert_eq!(
        ScheduleFamily::parse("cuda -max_num_threads=1024").unwrap(),
        ScheduleFamily::Gpu { num_threads: 1024 }
    );
    assert_eq!(
        ScheduleFamily::parse("llvm -mtriple=aarch64-linux-gnu").unwrap(),
        ScheduleFamily::Cpu
    );
    assert_eq!(ScheduleFamily::parse("c").unwrap(), ScheduleFamily::Cpu);
    if cfg!(target_arch = "x86_64") {
        assert_eq!(ScheduleFamily::parse("llvm").unwrap(), ScheduleFamily::X86);
    }
    assert!(ScheduleFamily::parse("opencl").unwrap().is_device());
    for (bad, why) in [
        ("opencl -max_num_threads=-4", "must be a positive integer"),
        ("opencl -mcpu=native", "unknown flag `-mcpu`"),
        ("vulkan", "unknown target kind `vulkan`"),
    ] {
        let e = ScheduleFamily::parse(bad).unwrap_err().to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
    // Through the build too, and a device target is never one of several variants.
    let x = Var::new("x", Type::f32(&[4]));
    let module = IRModule::from_main(Function::new(
        vec![x.clone()],
        mk("exp", vec![x.expr()], &[]),
    ));
    let e = build(&module, "opencl -foo=1", vec![])
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown flag `-foo`"), "{e}");
    let ctx = kiln_graph::transform::PassContext::with_opt_level(3);
    let e = kiln_graph::build::build_targets(&module, &["opencl", "llvm"], vec![], &ctx)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be one of several code variants"), "{e}");
}

#[test]
fn a_graph_of_constants_builds_an_empty_host_library() {
    let a = random(6, 71);
    let x = Var::new("x", Type::f32(&[2, 3]));
    let folded = mk("exp", vec![Expr::const_f32(&a, &[2, 3])], &[]);
    let module = IRModule::from_main(Function::new(vec![x], folded));
    let factory = build(&module, "opencl", vec![]).unwrap();
    assert!(
        factory.imports()[0].imports().is_empty(),
        "no kernels to import"
    );
    let Some(dev) = cl0() else { return };
    let exec: Module = factory.function("default").unwrap().invoke((dev,)).unwrap();
    // The output is the folded constant's own storage (a param on the device), so it is not
    // poisoned here: the run must leave it as loaded.
    let f = |name: &str| exec.function(name).unwrap();
    let x = Tensor::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    f("set_input").invoke::<()>(("x", x)).unwrap();
    f("run").invoke::<()>(()).unwrap();
    let out: Tensor = f("get_output").invoke((0i64,)).unwrap();
    assert_eq!(out.device().device_type(), OPENCL);
    let got = [out
        .to_device(Device::cpu(0))
        .unwrap()
        .to_vec::<f32>()
        .unwrap()];
    let want: Vec<f32> = a.iter().map(|v| v.exp()).collect();
    assert_close(&got[0], &want, "exp of a constant");
}
