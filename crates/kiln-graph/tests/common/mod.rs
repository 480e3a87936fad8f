//! What the graph build's end-to-end tests share.
#![allow(dead_code, unused_imports)]

use kiln_ffi::Device;
use kiln_graph::build::build;
use kiln_graph::ir::IRModule;
use kiln_runtime::module::{export_library, load_module, ExportOptions, Module};
use kiln_runtime::tensor::Tensor;

/// The target the end-to-end tests build for.
pub const TARGET: &str = "llvm -mcpu=native";

/// Builds `module`, exports the factory to one `.so`, loads it and makes an executor.
pub fn build_and_load(module: &IRModule, params: Vec<(String, Tensor)>, tag: &str) -> Module {
    let factory = build(module, TARGET, params).unwrap();
    load_executor(&factory, tag)
}

/// Exports the graph executor factory `factory` to one `.so`, loads it and makes an executor
/// on the CPU.
pub fn load_executor(factory: &Module, tag: &str) -> Module {
    assert_eq!(factory.kind(), "GraphExecutorFactory");
    let dir = std::env::temp_dir().join(format!("kiln_graph_build_{tag}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join("deploy.so");
    export_library(factory, &so, &ExportOptions::default()).unwrap();
    let loaded = load_module(&so).unwrap();
    // The loaded code stays mapped; the file is no longer needed.
    let _ = std::fs::remove_dir_all(&dir);
    loaded
        .function("default")
        .unwrap()
        .invoke((Device::cpu(0),))
        .unwrap()
}

/// Sets `inputs`, poisons the outputs (zero-copy NaN tensors of `out_shapes`), runs, and
/// returns the outputs.
pub fn run(
    exec: &Module,
    inputs: &[(&str, Vec<f32>, Vec<i64>)],
    out_shapes: &[&[i64]],
) -> Vec<Vec<f32>> {
    let f = |name: &str| exec.function(name).unwrap();
    for (name, data, shape) in inputs {
        let t = Tensor::from_slice(data, shape).unwrap();
        f("set_input").invoke::<()>((*name, t)).unwrap();
    }
    let mut outs = Vec::new();
    for (i, s) in out_shapes.iter().enumerate() {
        let n: i64 = s.iter().product();
        let t = Tensor::from_slice(&vec![f32::NAN; n as usize], s).unwrap();
        f("set_output_zero_copy")
            .invoke::<()>((i as i64, t.clone()))
            .unwrap();
        outs.push(t);
    }
    f("run").invoke::<()>(()).unwrap();
    let num: i64 = f("get_num_outputs").invoke(()).unwrap();
    assert_eq!(num as usize, out_shapes.len());
    outs.iter().map(|t| t.to_vec::<f32>().unwrap()).collect()
}

pub use kiln_testing::random;

/// A naive 2-D convolution of one image that keeps its size: `x` `[c, h, w]` by `wt`
/// `[o, c, k, k]`, stride 1, `pad` zeros on every side (`k = 2 pad + 1`), output `[o, h, w]`.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_ref(
    x: &[f32],
    c: usize,
    h: usize,
    w: usize,
    wt: &[f32],
    o: usize,
    k: usize,
    pad: usize,
) -> Vec<f32> {
    let mut out = vec![0.0; o * h * w];
    for oc in 0..o {
        for y in 0..h {
            for xx in 0..w {
                let mut acc = 0.0;
                for ic in 0..c {
                    for ky in 0..k {
                        for kx in 0..k {
                            let iy = y as i64 + ky as i64 - pad as i64;
                            let ix = xx as i64 + kx as i64 - pad as i64;
                            if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                                continue;
                            }
                            acc += x[(ic * h + iy as usize) * w + ix as usize]
                                * wt[((oc * c + ic) * k + ky) * k + kx];
                        }
                    }
                }
                out[(oc * h + y) * w + xx] = acc;
            }
        }
    }
    out
}
