//! `transpose` by a permutation of the axes.

use super::util::{compute_tagged, normalize_axis, value_error};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::PrimExpr;

/// `x` with its axes permuted: output axis `k` is input axis `perm[k]` (negative entries count
/// from the end); `None` reverses the axes (numpy's and ONNX's default).
///
/// # Errors
/// A `ValueError` when `perm` is not a permutation of the axes.
pub fn transpose(x: &Tensor, perm: Option<&[i64]>) -> Result<Tensor> {
    let n = x.ndim();
    let perm: Vec<usize> = match perm {
        None => (0..n).rev().collect(),
        Some(p) => {
            if p.len() != n {
                return Err(value_error(
                    "transpose",
                    format!(
                        "perm {p:?} has {} entries for a tensor of rank {n}",
                        p.len()
                    ),
                ));
            }
            let v = p
                .iter()
                .map(|&a| normalize_axis(a, n, "transpose"))
                .collect::<Result<Vec<_>>>()?;
            let mut seen = vec![false; n];
            for &a in &v {
                if std::mem::replace(&mut seen[a], true) {
                    return Err(value_error(
                        "transpose",
                        format!("perm {p:?} names axis {a} twice"),
                    ));
                }
            }
            v
        }
    };
    let shape: Vec<PrimExpr> = perm.iter().map(|&a| x.shape()[a].clone()).collect();
    compute_tagged(
        &shape,
        |i| {
            let mut idx = vec![PrimExpr::i32(0); n];
            for (k, &a) in perm.iter().enumerate() {
                idx[a] = i[k].to_expr();
            }
            x.at(&idx)
        },
        "transpose",
        tag::INJECTIVE,
    )
}
