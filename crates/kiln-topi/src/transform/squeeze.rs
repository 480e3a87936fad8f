//! `squeeze`, `unsqueeze` and `expand_dims`: removing or inserting size-1 axes.

use super::reshape::reshape_to;
use super::util::{compute_tagged, const_shape, normalize_axis, value_error};
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::{PrimExpr, Var};

/// `x` without the size-1 axes `axes` (negative entries count from the end); `None` removes
/// every size-1 axis.
///
/// # Errors
/// A `ValueError` when a named axis is out of range or not of size 1.
pub fn squeeze(x: &Tensor, axes: Option<&[i64]>) -> Result<Tensor> {
    let shape = const_shape(x, "squeeze")?;
    let drop: Vec<usize> = match axes {
        None => (0..shape.len()).filter(|&d| shape[d] == 1).collect(),
        Some(a) => {
            let mut v = Vec::new();
            for &ax in a {
                let d = normalize_axis(ax, shape.len(), "squeeze")?;
                if shape[d] != 1 {
                    return Err(value_error(
                        "squeeze",
                        format!("axis {ax} of shape {shape:?} has size {}, not 1", shape[d]),
                    ));
                }
                v.push(d);
            }
            v
        }
    };
    let out: Vec<i64> = (0..shape.len())
        .filter(|d| !drop.contains(d))
        .map(|d| shape[d])
        .collect();
    reshape_to(x, &shape, &out, "squeeze")
}

/// `x` with size-1 axes inserted at `axes`, which index the OUTPUT (ONNX `Unsqueeze`;
/// negative entries count from the end of the output).
///
/// # Errors
/// A `ValueError` for an axis out of range or repeated.
pub fn unsqueeze(x: &Tensor, axes: &[i64]) -> Result<Tensor> {
    let shape = const_shape(x, "unsqueeze")?;
    let rank = shape.len() + axes.len();
    let mut ins = vec![false; rank];
    for &a in axes {
        let d = normalize_axis(a, rank, "unsqueeze")?;
        if std::mem::replace(&mut ins[d], true) {
            return Err(value_error(
                "unsqueeze",
                format!("axis {a} given twice in {axes:?}"),
            ));
        }
    }
    let mut it = shape.iter();
    let out: Vec<i64> = ins
        .iter()
        .map(|&new| {
            if new {
                1
            } else {
                *it.next().expect("ranks add up")
            }
        })
        .collect();
    reshape_to(x, &shape, &out, "unsqueeze")
}

/// `x` with `num_newaxis` size-1 axes inserted before input axis `axis` (TVM's
/// `expand_dims`; `axis` in `[-rank-1, rank]`, negative counting from the end).
///
/// # Errors
/// A `ValueError` for an axis out of range.
pub fn expand_dims(x: &Tensor, axis: i64, num_newaxis: usize) -> Result<Tensor> {
    if !crate::nn::is_static(x) {
        // Extents known only at run time: the new axes dropped from each index.
        let a = normalize_axis(axis, x.ndim() + 1, "expand_dims")?;
        let mut out: Vec<PrimExpr> = x.shape().to_vec();
        for _ in 0..num_newaxis {
            out.insert(a, PrimExpr::i32(1));
        }
        return compute_tagged(
            &out,
            |i: &[Var]| {
                let idx: Vec<PrimExpr> = i
                    .iter()
                    .enumerate()
                    .filter(|(d, _)| *d < a || *d >= a + num_newaxis)
                    .map(|(_, v)| v.to_expr())
                    .collect();
                x.at(&idx)
            },
            "expand_dims",
            crate::tag::INJECTIVE,
        );
    }
    let shape = const_shape(x, "expand_dims")?;
    let a = normalize_axis(axis, shape.len() + 1, "expand_dims")?;
    let mut out = shape.clone();
    for _ in 0..num_newaxis {
        out.insert(a, 1);
    }
    reshape_to(x, &shape, &out, "expand_dims")
}
