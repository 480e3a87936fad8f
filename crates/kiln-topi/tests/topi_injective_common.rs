//! Shared pieces of the `topi_injective*` and `topi_reduce*` tests (included with `#[path]`):
//! seeded random inputs, building through `driver::build` on `llvm -mcpu=native`, poisoned
//! outputs, results as `f64`, and row-major index helpers for the naive references.
#![allow(dead_code)]

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

/// The seed of this test: `KILN_TEST_SEED` or the clock, printed for replay.
pub fn seed(tag: &str) -> u64 {
    let s = std::env::var("KILN_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("{tag}: KILN_TEST_SEED={s}");
    s
}

/// A small deterministic generator.
pub struct Rng(u64);

impl Rng {
    /// From a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    /// `n` floats in [-1, 1).
    pub fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() % (1 << 24)) as f32 / (1 << 23) as f32 - 1.0)
            .collect()
    }
    /// `n` floats from a few multiples of 0.25 in [-1, 1] (many ties).
    pub fn coarse(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() % 9) as f32 * 0.25 - 1.0)
            .collect()
    }
    /// `n` integers in [lo, hi).
    pub fn ints(&mut self, n: usize, lo: i64, hi: i64) -> Vec<i64> {
        (0..n)
            .map(|_| lo + (self.next() % (hi - lo) as u64) as i64)
            .collect()
    }
}

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
    r.copy_from_bytes(&vec![0xFF; r.nbytes()]).unwrap();
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
pub fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str, seed: u64) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: lengths (KILN_TEST_SEED={seed})"
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * w.abs().max(1.0);
        assert!(ok, "{what}[{i}]: got {g}, want {w} (KILN_TEST_SEED={seed})");
    }
}

/// Row-major strides of a shape.
pub fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The row-major coordinates of linear index `lin` in `shape`.
pub fn unravel(mut lin: i64, shape: &[i64]) -> Vec<i64> {
    let mut out = vec![0i64; shape.len()];
    for d in (0..shape.len()).rev() {
        out[d] = lin % shape[d].max(1);
        lin /= shape[d].max(1);
    }
    out
}

/// The linear index of coordinates `idx` in `shape`.
pub fn ravel(idx: &[i64], shape: &[i64]) -> i64 {
    idx.iter().zip(strides(shape)).map(|(i, s)| i * s).sum()
}

/// The element count of a shape.
pub fn numel(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

/// The linear index into an operand of shape `s` (right-aligned, size-1 axes broadcast) of
/// output coordinates `idx`.
pub fn bcast_index(idx: &[i64], s: &[i64]) -> i64 {
    let off = idx.len() - s.len();
    let c: Vec<i64> = s
        .iter()
        .enumerate()
        .map(|(d, &n)| if n == 1 { 0 } else { idx[d + off] })
        .collect();
    ravel(&c, s)
}
