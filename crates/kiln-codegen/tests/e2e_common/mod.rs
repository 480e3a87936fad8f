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

/// Runs `module`'s `mm` (C = A x B, A `[n, l]`, B `[l, m]`) on fresh inputs drawn from `seed`
/// into a poisoned output and checks it against the naive product; `what` names the failure.
pub fn check_matmul_module(
    module: &kiln_runtime::module::Module,
    (n, m, l): (i64, i64, i64),
    seed: u64,
    what: &str,
) {
    let av = random((n * l) as usize, seed);
    let bv = random((l * m) as usize, seed + 1);
    let out = poisoned(&[n, m]);
    module
        .function("mm")
        .unwrap()
        .invoke::<()>((tensor(&av, &[n, l]), tensor(&bv, &[l, m]), out.clone()))
        .unwrap();
    let want = matmul_ref(&av, &bv, n as usize, m as usize, l as usize);
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-4, what, seed);
}

/// Runs `module`'s `conv` (CHW data, OIHW weight, stride 1, `pad` on each side) on fresh
/// inputs drawn from `seed` into a poisoned output and checks it against the naive loop.
pub fn check_conv2d_module(
    module: &kiln_runtime::module::Module,
    dims: (i64, i64, i64, i64, i64, i64, i64),
    seed: u64,
    what: &str,
) {
    let (ci, h, w, co, kh, kw, _pad) = dims;
    let dv = random((ci * h * w) as usize, seed);
    let wv = random((co * ci * kh * kw) as usize, seed + 1);
    let out = poisoned(&[co, h, w]);
    module
        .function("conv")
        .unwrap()
        .invoke::<()>((
            tensor(&dv, &[ci, h, w]),
            tensor(&wv, &[co, ci, kh, kw]),
            out.clone(),
        ))
        .unwrap();
    let want = conv2d_ref(&dv, &wv, dims);
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-4, what, seed);
}
