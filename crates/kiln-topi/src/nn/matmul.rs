//! Matrix product with optional transposes and numpy batch broadcasting.

use super::{compute_tagged, consts, invalid, product_dtype_of, read_as};
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
    let sa = super::const_shape(a, "matmul")?;
    let sb = super::const_shape(b, "matmul")?;
    if sa.len() < 2 || sb.len() < 2 {
        return Err(invalid(
            "matmul",
            format!("operands need rank 2 or more, got {sa:?} and {sb:?}"),
        ));
    }
    let (ra, rb) = (sa.len(), sb.len());
    let (m, k) = logical(sa[ra - 2], sa[ra - 1], attrs.transpose_a);
    let (k2, n) = logical(sb[rb - 2], sb[rb - 1], attrs.transpose_b);
    if k != k2 {
        return Err(invalid(
            "matmul",
            format!("inner dimensions differ: {k} and {k2}"),
        ));
    }
    let (ba, bb) = (&sa[..ra - 2], &sb[..rb - 2]);
    let nb = ba.len().max(bb.len());
    let mut batch = Vec::with_capacity(nb);
    for d in 0..nb {
        let da = (d + ba.len()).checked_sub(nb).map_or(1, |i| ba[i]);
        let db = (d + bb.len()).checked_sub(nb).map_or(1, |i| bb[i]);
        if da != db && da != 1 && db != 1 {
            return Err(invalid(
                "matmul",
                format!("batch dimensions {ba:?} and {bb:?} do not broadcast"),
            ));
        }
        batch.push(da.max(db));
    }
    let mut out = batch.clone();
    out.extend([m, n]);
    let dt = product_dtype_of(a, b, "matmul")?;
    let rk = reduce_axis_n(k, "k");
    let (a, b) = (a.clone(), b.clone());
    let attrs = *attrs;
    // The batch indices of an operand with batch dims `own`: broadcast ones read index 0.
    let batch_index = |own: &[i64], i: &[kiln_tir::Var]| -> Vec<PrimExpr> {
        let off = nb - own.len();
        own.iter()
            .enumerate()
            .map(|(d, &e)| {
                if e == 1 && batch[off + d] != 1 {
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
        &consts(&out),
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
