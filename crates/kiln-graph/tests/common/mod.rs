//! What the graph build's end-to-end tests share.
#![allow(dead_code)]

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
    assert_eq!(factory.kind(), "GraphExecutorFactory");
    let dir = std::env::temp_dir().join(format!("kiln_graph_build_{tag}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join("deploy.so");
    export_library(&factory, &so, &ExportOptions::default()).unwrap();
    let loaded = load_module(&so).unwrap();
    loaded
        .function("default")
        .unwrap()
        .invoke((Device::cpu(0),))
        .unwrap()
}

/// `n` pseudo-random floats in [-1, 1) from `seed`.
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32) / ((1u64 << 23) as f32) - 1.0
        })
        .collect()
}
