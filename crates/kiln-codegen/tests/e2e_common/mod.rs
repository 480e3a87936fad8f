//! Shared pieces of the end-to-end tests: the real pipeline (TE schedule -> `driver::lower` ->
//! LLVM -> load), with `kiln-testing`'s seeded random inputs, poisoned outputs and naive
//! reference loops.
#![allow(dead_code, unused_imports)]

use kiln_runtime::tensor::Tensor as RtTensor;

pub use kiln_testing::reference::{
    conv2d_chw as conv2d_ref, matmul as matmul_ref, softmax_rows as softmax_ref,
};
pub use kiln_testing::{assert_close, random, seed};

/// The TE workloads kiln-te's numeric tests check in its reference interpreter.
#[path = "../../../kiln-te/tests/support/workloads.rs"]
mod workloads;
pub use workloads::*;

/// A float32 runtime tensor of `shape` holding `data`.
pub fn tensor(data: &[f32], shape: &[i64]) -> RtTensor {
    RtTensor::from_slice(data, shape).unwrap()
}

/// A float32 runtime tensor of `shape` full of NaN (outputs start poisoned).
pub fn poisoned(shape: &[i64]) -> RtTensor {
    tensor(
        &kiln_testing::nan_vec(kiln_testing::shape::numel(shape)),
        shape,
    )
}

/// The native LLVM target string.
pub const NATIVE: &str = "llvm -mcpu=native";

/// The targets every numeric test runs on: LLVM for the host CPU and C source through `cc`.
pub const TARGETS: [&str; 2] = [NATIVE, "c"];

/// Every target paired with every item of `items`, target-major.
pub fn targets_by<T: Copy, const N: usize>(items: [T; N]) -> Vec<(&'static str, T)> {
    TARGETS
        .iter()
        .flat_map(|t| items.iter().map(move |i| (*t, *i)))
        .collect()
}
