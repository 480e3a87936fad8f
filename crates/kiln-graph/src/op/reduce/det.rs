//! `det(data)` (ONNX `Det`): the determinant of each square matrix over the last two axes of
//! a float tensor `[..., n, n]`, giving `[...]`.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, input, one, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_runtime::tensor::Tensor;
use kiln_te::Tensor as TeTensor;
use kiln_tir::{CpuDesc, DataTypeExt};

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = ctx.tensor(0)?;
    if !dt.is_floating() {
        return Err(ctx.err(format!("argument `data` must be a float tensor, got {dt}")));
    }
    let r = d.len();
    if r < 2 || d[r - 1] != d[r - 2] {
        return Err(ctx.err(format!(
            "argument `data` must be [..., n, n] (square matrices), got {d:?}"
        )));
    }
    Ok(Type::tensor(&d[..r - 2], dt))
}

/// The determinant of the row-major `n x n` matrix `m` (LU with partial pivoting, in f64).
fn det_of(m: &[f64], n: usize) -> f64 {
    let mut a = m.to_vec();
    let mut det = 1.0;
    for k in 0..n {
        let p = (k..n)
            .max_by(|&i, &j| a[i * n + k].abs().total_cmp(&a[j * n + k].abs()))
            .unwrap_or(k);
        if p != k {
            for j in 0..n {
                a.swap(k * n + j, p * n + j);
            }
            det = -det;
        }
        let pivot = a[k * n + k];
        det *= pivot;
        if pivot == 0.0 {
            continue;
        }
        for i in k + 1..n {
            let f = a[i * n + k] / pivot;
            for j in k + 1..n {
                a[i * n + j] -= f * a[k * n + j];
            }
        }
    }
    det
}

/// The reference evaluator.
fn evaluate(args: &[Tensor], _: Attrs<'_>, ty: &Type) -> Result<Tensor> {
    let d = args[0].shape();
    let n = d[d.len() - 1] as usize;
    let count = d[..d.len() - 2].iter().product::<i64>() as usize;
    let vals = eval::values(&args[0])?;
    let out: Vec<f64> = (0..count)
        .map(|m| det_of(&vals[m * n * n..(m + 1) * n * n], n))
        .collect();
    eval::make(&out, ty)
}

fn lower(i: &[TeTensor], _: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    one(kiln_topi::linalg::det(input("det", i, 0)?))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    // Opaque: a sequential elimination per matrix (an extern kernel).
    v.push(
        OpDef::new("det", &["data"], OpPattern::Opaque, rel)
            .eval(evaluate)
            .compute(lower),
    );
}
