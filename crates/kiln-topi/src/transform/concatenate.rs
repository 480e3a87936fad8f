//! `concatenate` along an axis (ONNX `Concat`).

use super::util::{compute_tagged, index_dtype, normalize_axis, value_error};
use crate::tag;
use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::{cast, PrimExpr, Var};

/// The tensors `xs` joined along `axis` (negative counts from the end); all must have one
/// rank, one dtype and equal sizes on the other axes (extents known only at run time
/// allowed).
///
/// # Errors
/// A `ValueError` for no inputs, an axis out of range, or mismatched shapes; a `TypeError`
/// for mixed dtypes.
pub fn concatenate(xs: &[Tensor], axis: i64) -> Result<Tensor> {
    let first = xs
        .first()
        .ok_or_else(|| value_error("concatenate", "no input tensors"))?;
    let s0 = first.shape();
    let a = normalize_axis(axis, s0.len(), "concatenate")?;
    let dt = index_dtype(first);
    // Extents may be known only at run time: the other axes then meet
    // ([`crate::extent::meet`]), and the offsets along `axis` are expressions.
    let add = |x: &PrimExpr, y: &PrimExpr| match (x.as_int(), y.as_int()) {
        (Some(u), Some(v)) => PrimExpr::const_int(dt, u + v),
        _ => x.clone() + y.clone(),
    };
    let mut out: Vec<PrimExpr> = s0.to_vec();
    let mut offsets = Vec::with_capacity(xs.len());
    let mut total = PrimExpr::const_int(dt, 0);
    for (k, x) in xs.iter().enumerate() {
        let s = x.shape();
        if x.dtype() != first.dtype() {
            return Err(Error::type_error(format!(
                "concatenate: input {k} (`{}`) is {}, input 0 is {}",
                x.name(),
                x.dtype(),
                first.dtype()
            )));
        }
        let show = |s: &[PrimExpr]| {
            let d: Vec<String> = s.iter().map(|e| e.to_string()).collect();
            format!("[{}]", d.join(", "))
        };
        let mismatch = || {
            value_error(
                "concatenate",
                format!(
                    "input {k} has shape {}, incompatible with input 0's {} along axis {a}",
                    show(s),
                    show(s0)
                ),
            )
        };
        if s.len() != s0.len() {
            return Err(mismatch());
        }
        for d in (0..s.len()).filter(|&d| d != a) {
            out[d] = crate::extent::meet(&out[d], &s[d]).ok_or_else(mismatch)?;
        }
        offsets.push(total.clone());
        total = add(&total, &s[a]);
    }
    out[a] = total;
    compute_tagged(
        &out,
        |i: &[Var]| {
            // Input k's index along the axis (read only where k is chosen: no clamp).
            let idx_of = |k: usize| -> Vec<PrimExpr> {
                i.iter()
                    .enumerate()
                    .map(|(d, v)| {
                        if d == a {
                            v.to_expr() - cast(v.dtype(), offsets[k].clone())
                        } else {
                            v.to_expr()
                        }
                    })
                    .collect()
            };
            // The last input is the fallback; earlier ones are chosen from the back with
            // `if_then_else`, which reads the chosen input only. Along an outer axis the
            // choice is one branch for a whole row of vectors, which LLVM hoists out of the
            // row's loop; vectorized along the axis itself, one branch per vector at offsets
            // of whole vectors, masked loads otherwise (VectorizeLoop).
            let last = xs.len() - 1;
            let mut e = xs[last].at(&idx_of(last));
            for k in (0..last).rev() {
                let bound = cast(i[a].dtype(), offsets[k + 1].clone());
                let cond = i[a].to_expr().lt(bound);
                e = kiln_te::if_then_else(cond, xs[k].at(&idx_of(k)), e);
            }
            e
        },
        "concatenate",
        tag::INJECTIVE,
    )
}
