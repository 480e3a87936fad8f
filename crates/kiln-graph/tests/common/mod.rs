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
    assert_eq!(factory.kind(), "GraphExecutorFactory");
    let dir = std::env::temp_dir().join(format!("kiln_graph_build_{tag}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join("deploy.so");
    export_library(&factory, &so, &ExportOptions::default()).unwrap();
    let loaded = load_module(&so).unwrap();
    // The loaded code stays mapped; the file is no longer needed.
    let _ = std::fs::remove_dir_all(&dir);
    loaded
        .function("default")
        .unwrap()
        .invoke((Device::cpu(0),))
        .unwrap()
}

pub use kiln_testing::random;
