//! Small reference evaluators (through `f64`) that `FoldConstant` uses for elementwise,
//! broadcast and data-movement ops on constants. They favour clarity over speed: constants
//! folded at compile time are weights, a few megabytes at most.

use crate::ir::Type;
use kiln_ffi::{Device, Error, Result};
use kiln_runtime::tensor::Tensor;

/// Values of `t` as `f64`.
pub fn values(t: &Tensor) -> Result<Vec<f64>> {
    t.to_f64_vec()
}

/// A CPU tensor of type `ty` from values.
pub fn make(values: &[f64], ty: &Type) -> Result<Tensor> {
    let (shape, dtype) = ty
        .as_tensor()
        .ok_or_else(|| Error::type_error("evaluator: tuple results are not supported"))?;
    Tensor::from_f64s(values, shape, dtype, Device::cpu(0))
}

/// Applies `f` to each element.
pub fn unary(args: &[Tensor], ty: &Type, f: impl Fn(f64) -> f64) -> Result<Tensor> {
    let v: Vec<f64> = values(&args[0])?.into_iter().map(f).collect();
    make(&v, ty)
}

/// The flat index in a tensor of `shape` read by output index `out` under broadcasting.
fn broadcast_index(out: &[i64], shape: &[i64]) -> usize {
    let off = out.len() - shape.len();
    let mut idx = 0usize;
    for (i, &d) in shape.iter().enumerate() {
        let o = if d == 1 { 0 } else { out[off + i] };
        idx = idx * d as usize + o as usize;
    }
    idx
}

/// Iterates over every multi-index of `shape` in row-major order.
pub fn for_each_index(shape: &[i64], mut f: impl FnMut(&[i64])) {
    let n: i64 = shape.iter().product();
    let mut idx = vec![0i64; shape.len()];
    for _ in 0..n {
        f(&idx);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Applies `f` elementwise with numpy broadcasting over any number of arguments.
pub fn broadcast(args: &[Tensor], ty: &Type, f: impl Fn(&[f64]) -> f64) -> Result<Tensor> {
    let vals: Vec<Vec<f64>> = args.iter().map(values).collect::<Result<_>>()?;
    let out_shape = ty.shape().to_vec();
    let mut out = Vec::new();
    let mut buf = vec![0.0; args.len()];
    for_each_index(&out_shape, |idx| {
        for (k, a) in args.iter().enumerate() {
            buf[k] = vals[k][broadcast_index(idx, a.shape())];
        }
        out.push(f(&buf));
    });
    make(&out, ty)
}

/// The same data under the result type's shape (reshape, squeeze, expand_dims, flatten).
pub fn same_data(args: &[Tensor], ty: &Type) -> Result<Tensor> {
    make(&values(&args[0])?, ty)
}

/// Row-major strides of `shape`.
pub fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The flat position of multi-index `idx` under row-major `strides`.
pub fn flat(idx: &[i64], strides: &[i64]) -> usize {
    idx.iter().zip(strides).map(|(i, s)| i * s).sum::<i64>() as usize
}
