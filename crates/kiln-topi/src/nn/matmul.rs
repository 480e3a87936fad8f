//! Matrix product with optional transposes and numpy batch broadcasting.

use super::{compute_tagged, invalid, product_dtype_of, read_as};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, Tensor};
use kiln_tir::PrimExpr;

/// Attributes of [`matmul`] and [`super::batch_matmul`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatmulAttrs {
    /// `a` is stored transposed (`[K, M]`).
    pub transpose_a: bool,
    /// `b` is stored transposed (`[N, K]`).
    pub transpose_b: bool,
}

/// `(rows, cols)` of an operand stored as `[r, c]`, swapped when `transposed`.
pub(crate) fn logical(r: i64, c: i64, transposed: bool) -> (i64, i64) {
    if transposed {
        (c, r)
    } else {
        (r, c)
    }
}

/// `(rows, cols)` of an operand of dimensions `r`, `c` (expressions), swapped when
/// `transposed`.
fn logical_expr(r: &PrimExpr, c: &PrimExpr, transposed: bool) -> (PrimExpr, PrimExpr) {
    if transposed {
        (c.clone(), r.clone())
    } else {
        (r.clone(), c.clone())
    }
}

/// The indices of logical element `(r, c)` of an operand, swapped when `transposed`.
pub(crate) fn index(r: PrimExpr, c: PrimExpr, transposed: bool) -> [PrimExpr; 2] {
    if transposed {
        [c, r]
    } else {
        [r, c]
    }
}

/// `out[..., m, n] = sum_k A[..., m, k] * B[..., k, n]` where `A` is `a` (`[..., M, K]`, or
/// `[..., K, M]` with `transpose_a`) and `B` is `b` (`[..., K, N]`, or `[..., N, K]` with
/// `transpose_b`); both have rank 2 or more and their leading (batch) dimensions broadcast as
/// in numpy; an integer `b` under float `a` is converted on each read
/// ([`super::product_dtype`]). Tagged [`tag::MATMUL`] for 2-D outputs, [`tag::BATCH_MATMUL`] otherwise.
pub fn matmul(a: &Tensor, b: &Tensor, attrs: &MatmulAttrs) -> Result<Tensor> {
    let (sa, sb) = (a.shape(), b.shape());
    let show = |s: &[PrimExpr]| {
        s.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if sa.len() < 2 || sb.len() < 2 {
        return Err(invalid(
            "matmul",
            format!(
                "operands need rank 2 or more, got [{}] and [{}]",
                show(sa),
                show(sb)
            ),
        ));
    }
    let (ra, rb) = (sa.len(), sb.len());
    let (m, k) = logical_expr(&sa[ra - 2], &sa[ra - 1], attrs.transpose_a);
    let (k2, n) = logical_expr(&sb[rb - 2], &sb[rb - 1], attrs.transpose_b);
    // Extents known at run time (size variables) meet ([`crate::extent::meet`]): the inner
    // dimensions, and batch dimensions unless one is 1.
    let Some(k) = crate::extent::meet(&k, &k2) else {
        return Err(invalid(
            "matmul",
            format!("inner dimensions differ: {k} and {k2}"),
        ));
    };
    let (ba, bb) = (&sa[..ra - 2], &sb[..rb - 2]);
    let nb = ba.len().max(bb.len());
    let mut batch: Vec<PrimExpr> = Vec::with_capacity(nb);
    for d in 0..nb {
        let da = (d + ba.len()).checked_sub(nb).map(|i| &ba[i]);
        let db = (d + bb.len()).checked_sub(nb).map(|i| &bb[i]);
        let one = |e: Option<&PrimExpr>| e.is_none_or(|e| e.is_const_int(1));
        let met = match (da, db) {
            (Some(x), _) if one(db) => Some(x.clone()),
            (_, Some(y)) if one(da) => Some(y.clone()),
            (Some(x), Some(y)) => crate::extent::meet(x, y),
            _ => None,
        };
        let Some(d) = met else {
            return Err(invalid(
                "matmul",
                format!(
                    "batch dimensions [{}] and [{}] do not broadcast (or meet at run time)",
                    show(ba),
                    show(bb)
                ),
            ));
        };
        batch.push(d);
    }
    let mut out = batch.clone();
    out.extend([m, n]);
    let dt = product_dtype_of(a, b, "matmul")?;
    let rk = reduce_axis_n(k, "k");
    let (a, b) = (a.clone(), b.clone());
    let attrs = *attrs;
    // The batch indices of an operand with batch dims `own`: broadcast ones read index 0.
    let batch_index = |own: &[PrimExpr], i: &[kiln_tir::Var]| -> Vec<PrimExpr> {
        let off = nb - own.len();
        own.iter()
            .enumerate()
            .map(|(d, e)| {
                if e.is_const_int(1) && !batch[off + d].is_const_int(1) {
                    PrimExpr::i32(0)
                } else {
                    i[off + d].to_expr()
                }
            })
            .collect()
    };
    let (name, t) = if nb == 0 {
        ("matmul", tag::MATMUL)
    } else {
        ("batch_matmul", tag::BATCH_MATMUL)
    };
    compute_tagged(
        &out,
        |i| {
            let mut ia = batch_index(ba, i);
            ia.extend(index(i[nb].to_expr(), rk.expr(), attrs.transpose_a));
            let mut ib = batch_index(bb, i);
            ib.extend(index(rk.expr(), i[nb + 1].to_expr(), attrs.transpose_b));
            sum(
                read_as(&a, &ia, dt) * read_as(&b, &ib, dt),
                std::slice::from_ref(&rk),
            )
        },
        name,
        t,
    )
}
