//! Shared pieces of the `topi_injective*` and `topi_reduce*` tests (included with `#[path]`):
//! seeded random inputs, building through `driver::build` on `llvm -mcpu=native`, poisoned
//! outputs, results as `f64`, and row-major index helpers for the naive references.
#![allow(dead_code, unused_imports)]

use kiln_codegen::driver;
use kiln_ffi::{Any, DataType, Device};
use kiln_runtime::tensor::Tensor as RtTensor;
use kiln_te::{create_schedule, placeholder, Schedule, Tensor};
use kiln_tir::PrimExpr;

/// The native LLVM target.
pub const NATIVE: &str = "llvm -mcpu=native";

/// The description of the native target's CPU, which the schedules tile for.
pub fn cpu() -> kiln_tir::CpuDesc {
    kiln_codegen::target::Target::parse(NATIVE)
        .unwrap()
        .cpu_desc()
}

pub use kiln_testing::rng::Lcg as Rng;
pub use kiln_testing::seed;
pub use kiln_testing::shape::{bcast_index, numel, ravel, strides, unravel};

/// float32.
pub fn f32t() -> DataType {
    DataType::float(32)
}

/// A placeholder of a static shape.
pub fn ph(shape: &[i64], dtype: DataType, name: &str) -> Tensor {
    let s: Vec<PrimExpr> = shape.iter().map(|&d| PrimExpr::i32(d)).collect();
    placeholder(&s, dtype, name)
}

/// The static shape of a TE tensor.
pub fn shape_of(t: &Tensor) -> Vec<i64> {
    t.shape()
        .iter()
        .map(|e| e.as_int().expect("static shape"))
        .collect()
}

/// A float32 runtime tensor.
pub fn rt_f32(data: &[f32], shape: &[i64]) -> RtTensor {
    RtTensor::from_slice(data, shape).unwrap()
}

/// An output tensor of `t`'s shape and dtype with every byte 0xFF (NaN for floats, -1 for
/// signed integers, an invalid value for bools).
pub fn poisoned(t: &Tensor) -> RtTensor {
    let shape = shape_of(t);
    let r = RtTensor::empty(&shape, t.dtype(), Device::cpu(0)).unwrap();
    r.copy_from_bytes(&kiln_testing::poison::poison_bytes(r.nbytes()))
        .unwrap();
    r
}

/// Builds `s` over `ins ++ outs` on the native target, runs it on `inputs` with poisoned
/// outputs, and returns each output as `f64`s (bools read as 0/1; any other byte fails).
pub fn run_with(
    s: &Schedule,
    ins: &[Tensor],
    outs: &[Tensor],
    inputs: Vec<RtTensor>,
    name: &str,
) -> Vec<Vec<f64>> {
    let args: Vec<Tensor> = ins.iter().chain(outs).cloned().collect();
    let m =
        driver::build(s, &args, NATIVE, name).unwrap_or_else(|e| panic!("building {name}: {e}"));
    let f = m.function(name).unwrap();
    let out_rt: Vec<RtTensor> = outs.iter().map(poisoned).collect();
    let mut call: Vec<Any> = inputs.into_iter().map(Any::from).collect();
    call.extend(out_rt.iter().cloned().map(Any::from));
    f.call_any(&call)
        .unwrap_or_else(|e| panic!("running {name}: {e}"));
    out_rt
        .iter()
        .map(|r| {
            if r.dtype() == DataType::bool() {
                r.to_bytes()
                    .unwrap()
                    .iter()
                    .map(|&b| {
                        assert!(b <= 1, "{name}: bool output byte {b} (not written?)");
                        b as f64
                    })
                    .collect()
            } else {
                r.to_f64_vec().unwrap()
            }
        })
        .collect()
}

/// [`run_with`] under the default schedule (every stage at the root).
pub fn run_default(
    ins: &[Tensor],
    outs: &[Tensor],
    inputs: Vec<RtTensor>,
    name: &str,
) -> Vec<Vec<f64>> {
    let s = create_schedule(&outs.iter().map(|t| t.op().clone()).collect::<Vec<_>>());
    run_with(&s, ins, outs, inputs, name)
}

/// Asserts `got` matches `want` within `tol` (relative above magnitude 1); NaN never matches.
pub use kiln_testing::assert_close;
