//! `concatenate` along an axis (ONNX `Concat`).

use super::util::{
    compute_tagged, const_shape, index_dtype, normalize_axis, shape_exprs, value_error,
};
use crate::tag;
use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::{PrimExpr, Var};

/// The tensors `xs` joined along `axis` (negative counts from the end); all must have one
/// rank, one dtype and equal sizes on the other axes.
///
/// # Errors
/// A `ValueError` for no inputs, an axis out of range, or mismatched shapes; a `TypeError`
/// for mixed dtypes.
pub fn concatenate(xs: &[Tensor], axis: i64) -> Result<Tensor> {
    let first = xs
        .first()
        .ok_or_else(|| value_error("concatenate", "no input tensors"))?;
    let s0 = const_shape(first, "concatenate")?;
    let a = normalize_axis(axis, s0.len(), "concatenate")?;
    let mut offsets = Vec::with_capacity(xs.len());
    let mut total = 0i64;
    for (k, x) in xs.iter().enumerate() {
        let s = const_shape(x, "concatenate")?;
        if x.dtype() != first.dtype() {
            return Err(Error::type_error(format!(
                "concatenate: input {k} (`{}`) is {}, input 0 is {}",
                x.name(),
                x.dtype(),
                first.dtype()
            )));
        }
        let mismatch = s.len() != s0.len()
            || s.iter()
                .zip(&s0)
                .enumerate()
                .any(|(d, (u, v))| d != a && u != v);
        if mismatch {
            return Err(value_error(
                "concatenate",
                format!(
                    "input {k} has shape {s:?}, incompatible with input 0's {s0:?} along axis {a}"
                ),
            ));
        }
        offsets.push(total);
        total += s[a];
    }
    let mut out = s0.clone();
    out[a] = total;
    let dt = index_dtype(first);
    let lens: Vec<i64> = xs
        .iter()
        .map(|x| const_shape(x, "concatenate").map(|s| s[a]))
        .collect::<Result<_>>()?;
    compute_tagged(
        &shape_exprs(&out, dt),
        |i: &[Var]| {
            // Input k's index along the axis, clamped into its range: every read is in
            // bounds, so the choice is a branch-free select that vectorizes (a branch per
            // element would not, and would hide which buffer each load reads).
            let idx_of = |k: usize| -> Vec<PrimExpr> {
                i.iter()
                    .enumerate()
                    .map(|(d, v)| {
                        if d == a {
                            let t = v.dtype();
                            let local = v.to_expr() - PrimExpr::const_int(t, offsets[k]);
                            kiln_tir::min(
                                kiln_tir::max(local, PrimExpr::const_int(t, 0)),
                                PrimExpr::const_int(t, lens[k] - 1),
                            )
                        } else {
                            v.to_expr()
                        }
                    })
                    .collect()
            };
            // The last input is the fallback; earlier ones are chosen from the back. Along
            // an outer axis the choice is the same for a whole row of vectors: a branch
            // (`if_then_else`, one load) that still vectorizes and that LLVM hoists out of
            // the row's loop.
            let outer = a + 1 < out.len();
            let last = xs.len() - 1;
            let mut e = xs[last].at(&idx_of(last));
            for k in (0..last).rev() {
                let bound = PrimExpr::const_int(i[a].dtype(), offsets[k + 1]);
                let cond = i[a].to_expr().lt(bound);
                let x = xs[k].at(&idx_of(k));
                e = if outer {
                    kiln_te::if_then_else(cond, x, e)
                } else {
                    kiln_tir::select(cond, x, e)
                };
            }
            e
        },
        "concatenate",
        tag::INJECTIVE,
    )
}
