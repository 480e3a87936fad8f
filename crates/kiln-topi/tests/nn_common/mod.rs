//! Shared pieces of the operator tests: build through `driver::build` for the host CPU, random
//! inputs from a printed seed (`KILN_TEST_SEED` replays it), outputs poisoned with NaN, and a
//! comparison against naive Rust loops written in each test.
#![allow(dead_code, unused_imports)]

pub mod conv;

use kiln_codegen::driver;
use kiln_codegen::target::Target;
use kiln_ffi::Any;
use kiln_runtime::tensor::Tensor as RtTensor;
use kiln_te::{create_schedule, placeholder, Tensor};
use kiln_testing::shape::numel;
use kiln_tir::{CpuDesc, DataType, PrimExpr};
use kiln_topi::schedule::{generic, ScheduleFn};

/// The native LLVM target.
pub const NATIVE: &str = "llvm -mcpu=native";

pub use kiln_testing::{assert_close, random, seed};

/// A float32 placeholder of `shape`.
pub fn input(shape: &[i64], name: &str) -> Tensor {
    let dims: Vec<PrimExpr> = shape.iter().map(|&d| PrimExpr::i32(d)).collect();
    placeholder(&dims, DataType::float(32), name)
}

/// The constant shape of `t`.
pub fn shape_of(t: &Tensor) -> Vec<i64> {
    t.shape().iter().map(|d| d.as_int().unwrap()).collect()
}

/// The targets the operator tests build for: the host, and where the host has AVX-512 also
/// the AVX2 level (`x86-64-v3`), so that schedules tiled for 16 registers of 8 floats run on
/// every machine that can run them.
pub fn targets() -> Vec<(String, CpuDesc)> {
    let native = Target::parse(NATIVE).unwrap();
    let mut out = vec![(NATIVE.to_string(), native.cpu_desc())];
    if native.has_avx512() {
        let v3 = "llvm -mcpu=x86-64-v3";
        out.push((v3.to_string(), Target::parse(v3).unwrap().cpu_desc()));
    }
    out
}

/// Schedules `out` with `sched` for the host, builds it, runs it on `data` (one vector per
/// input, in order) with a NaN-poisoned output and returns the output.
pub fn run(out: &Tensor, inputs: &[Tensor], data: &[Vec<f32>], sched: ScheduleFn) -> Vec<f32> {
    let (target, cpu) = targets().swap_remove(0);
    run_on(out, inputs, data, sched, &target, &cpu)
}

/// [`run`] for `target`, tiled for `cpu`.
pub fn run_on(
    out: &Tensor,
    inputs: &[Tensor],
    data: &[Vec<f32>],
    sched: ScheduleFn,
    target: &str,
    cpu: &CpuDesc,
) -> Vec<f32> {
    let s = create_schedule(&[out.op().clone()]);
    sched(&s, out, cpu).unwrap();
    let mut args: Vec<Tensor> = inputs.to_vec();
    args.push(out.clone());
    let module = driver::build(&s, &args, target, "op").unwrap();
    let f = module.function("op").unwrap();
    let mut vals: Vec<Any> = inputs
        .iter()
        .zip(data)
        .map(|(t, d)| RtTensor::from_slice(d, &shape_of(t)).unwrap().into())
        .collect();
    let oshape = shape_of(out);
    let o = RtTensor::from_slice(&kiln_testing::nan_vec(numel(&oshape)), &oshape).unwrap();
    vals.push(o.clone().into());
    f.call_any(&vals).unwrap();
    o.to_vec::<f32>().unwrap()
}

/// Runs `out` with the x86 schedule `sched` for each of [`targets`] and with the generic
/// fallback, checking all against `want`.
#[allow(clippy::too_many_arguments)] // a test helper: every argument is one piece of the case
pub fn check(
    what: &str,
    out: &Tensor,
    inputs: &[Tensor],
    data: &[Vec<f32>],
    sched: ScheduleFn,
    want: &[f32],
    tol: f32,
    seed: u64,
) {
    for (target, cpu) in targets() {
        let got = run_on(out, inputs, data, sched, &target, &cpu);
        assert_close(&got, want, tol, &format!("{what} (x86, {target})"), seed);
    }
    let got = run(out, inputs, data, generic::schedule_generic);
    assert_close(&got, want, tol, &format!("{what} (generic)"), seed);
}

/// Random data for every input of `inputs` (seeded `seed + i`).
pub fn random_inputs(inputs: &[Tensor], seed: u64) -> Vec<Vec<f32>> {
    inputs
        .iter()
        .enumerate()
        .map(|(i, t)| random(numel(&shape_of(t)), seed.wrapping_add(i as u64 * 7919)))
        .collect()
}

/// NCHW values `v` (shape `s`) in channel blocks of `b` (`[N, C/b, H, W, b]`).
pub fn to_blocks(v: &[f32], s: [i64; 4], b: i64) -> Vec<f32> {
    let [n, c, h, w] = s.map(|x| x as usize);
    let b = b as usize;
    let mut out = vec![0f32; v.len()];
    for i in 0..n {
        for ch in 0..c {
            for p in 0..h * w {
                out[((i * (c / b) + ch / b) * h * w + p) * b + ch % b] =
                    v[(i * c + ch) * h * w + p];
            }
        }
    }
    out
}
