//! Shared pieces of the graph executor tests: the test graph (`mlp_graph.json`), a library
//! module whose kernels are Rust closures (the same kernels as `kernels.c`), a numpy-free
//! reference, random data and tensors poisoned with NaN.
#![allow(dead_code)]

use kiln_ffi::{AnyView, Error, Function, Result};
use kiln_runtime::module::{Module, ModuleNode};
use kiln_runtime::tensor::Tensor;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// x[4,8], w[16,8], b[16], r[4,16] -> (relu(x w^T + b) + r) split in two column halves; the
/// second half goes through `relu1d` with flatten_data. Storage ids are shared between entries.
pub const MLP_GRAPH: &str = include_str!("mlp_graph.json");
/// The kernels of the graph in C (`__tvm_ffi_<name>`).
pub const KERNELS_C: &str = include_str!("kernels.c");
/// Names of the kernels.
pub const KERNEL_NAMES: [&str; 6] = ["dense", "relu", "relu1d", "add", "split2", "fail"];

/// Shapes of the MLP inputs, in input order.
pub const MLP_INPUTS: [(&str, &[i64]); 4] = [
    ("x", &[4, 8]),
    ("w", &[16, 8]),
    ("b", &[16]),
    ("r", &[4, 16]),
];

fn tensors(name: &str, args: &[AnyView<'_>], n: usize) -> Result<Vec<Tensor>> {
    if args.len() != n {
        return Err(Error::value_error(format!(
            "{name}: expected {n} tensors, got {} arguments",
            args.len()
        )));
    }
    args.iter().map(|a| a.try_as::<Tensor>()).collect()
}

type Kernel = fn(&[AnyView<'_>]) -> Result<()>;

fn kernel(name: &str) -> Option<Kernel> {
    Some(match name {
        "dense" => |a| {
            let t = tensors("dense", a, 4)?;
            let (m, k, n) = (t[0].shape()[0], t[0].shape()[1], t[1].shape()[0]);
            if t[3].shape() != [m, n] || t[1].shape() != [n, k] {
                return Err(Error::value_error("dense: shapes do not fit"));
            }
            let (x, w, b) = (
                t[0].to_vec::<f32>()?,
                t[1].to_vec::<f32>()?,
                t[2].to_vec::<f32>()?,
            );
            let (m, k, n) = (m as usize, k as usize, n as usize);
            let mut o = vec![0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    o[i * n + j] = b[j] + (0..k).map(|q| x[i * k + q] * w[j * k + q]).sum::<f32>();
                }
            }
            t[3].copy_from_slice(&o)
        },
        "relu" => |a| {
            let t = tensors("relu", a, 2)?;
            let v: Vec<f32> = t[0].to_vec::<f32>()?.iter().map(|x| x.max(0.0)).collect();
            t[1].copy_from_bytes(bytemuck(&v))
        },
        "relu1d" => |a| {
            let t = tensors("relu1d", a, 2)?;
            if t[0].ndim() != 1 || t[1].ndim() != 1 {
                return Err(Error::value_error(
                    "relu1d: expected 1-D tensors (flatten_data)",
                ));
            }
            let v: Vec<f32> = t[0].to_vec::<f32>()?.iter().map(|x| x.max(0.0)).collect();
            t[1].copy_from_slice(&v)
        },
        "add" => |a| {
            let t = tensors("add", a, 3)?;
            let (x, y) = (t[0].to_vec::<f32>()?, t[1].to_vec::<f32>()?);
            let v: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
            t[2].copy_from_bytes(bytemuck(&v))
        },
        "split2" => |a| {
            let t = tensors("split2", a, 3)?;
            let (m, w) = (t[0].shape()[0] as usize, t[0].shape()[1] as usize);
            let h = w / 2;
            let v = t[0].to_vec::<f32>()?;
            let lo: Vec<f32> = (0..m).flat_map(|i| v[i * w..i * w + h].to_vec()).collect();
            let hi: Vec<f32> = (0..m)
                .flat_map(|i| v[i * w + h..i * w + w].to_vec())
                .collect();
            t[1].copy_from_slice(&lo)?;
            t[2].copy_from_slice(&hi)
        },
        "fail" => |_| Err(Error::value_error("fail: this kernel always fails")),
        _ => return None,
    })
}

fn bytemuck(v: &[f32]) -> &[u8] {
    // SAFETY: f32s are readable as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// A library whose kernels are Rust closures; counts calls.
pub struct FakeLib {
    pub calls: Arc<AtomicUsize>,
}

impl ModuleNode for FakeLib {
    fn kind(&self) -> &str {
        "kiln_test.kernels"
    }
    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        let Some(k) = kernel(name) else {
            return Ok(None);
        };
        let calls = self.calls.clone();
        Ok(Some(Function::from_packed(move |args| {
            calls.fetch_add(1, Ordering::Relaxed);
            k(args)?;
            Ok(kiln_ffi::Any::none())
        })))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A [`FakeLib`] module and its call counter.
pub fn fake_lib() -> (Module, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    (
        Module::new(FakeLib {
            calls: calls.clone(),
        }),
        calls,
    )
}

/// Random f32s in [-1, 1), differently seeded on every call.
pub fn random(n: usize) -> Vec<f32> {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    kiln_testing::random(
        n,
        kiln_testing::rng::fresh_seed() ^ call.wrapping_mul(0x9E37_79B9),
    )
}

/// Random inputs of the MLP, as tensors, in input order.
pub fn mlp_inputs() -> Vec<Tensor> {
    MLP_INPUTS
        .iter()
        .map(|(_, shape)| {
            let n = shape.iter().product::<i64>() as usize;
            Tensor::from_slice(&random(n), shape).unwrap()
        })
        .collect()
}

/// The MLP computed directly: (first half, relu of the second half), each [4, 8].
pub fn mlp_reference(inputs: &[Tensor]) -> (Vec<f32>, Vec<f32>) {
    let v: Vec<Vec<f32>> = inputs.iter().map(|t| t.to_vec::<f32>().unwrap()).collect();
    let (x, w, b, r) = (&v[0], &v[1], &v[2], &v[3]);
    let mut lo = vec![0f32; 32];
    let mut hi = vec![0f32; 32];
    for i in 0..4 {
        for j in 0..16 {
            let d = b[j] + (0..8).map(|k| x[i * 8 + k] * w[j * 8 + k]).sum::<f32>();
            let h = d.max(0.0) + r[i * 16 + j];
            if j < 8 {
                lo[i * 8 + j] = h;
            } else {
                hi[i * 8 + j - 8] = h.max(0.0);
            }
        }
    }
    (lo, hi)
}

/// Asserts two f32 slices agree to a relative 1e-5 (`|got - want| <= 1e-5 * (1 + |want|)`).
pub fn assert_close(got: &[f32], want: &[f32]) {
    let tol = kiln_testing::Tolerance::Numpy {
        rtol: 1e-5,
        atol: 1e-5,
    };
    kiln_testing::assert_allclose(got, want, tol, "item");
}

/// A tensor of `shape` full of NaN.
pub fn poisoned(shape: &[i64]) -> Tensor {
    Tensor::from_slice(
        &kiln_testing::nan_vec(kiln_testing::shape::numel(shape)),
        shape,
    )
    .unwrap()
}
