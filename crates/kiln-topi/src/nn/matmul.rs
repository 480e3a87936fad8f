//! 2-D matrix product with optional transposes.

use super::{compute_tagged, consts, invalid, shape_nd, tag};
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

/// `out[m, n] = sum_k A[m, k] * B[k, n]` where `A` is `a` (`[M, K]`, or `[K, M]` with
/// `transpose_a`) and `B` is `b` (`[K, N]`, or `[N, K]` with `transpose_b`). Tagged
/// [`tag::MATMUL`].
pub fn matmul(a: &Tensor, b: &Tensor, attrs: &MatmulAttrs) -> Result<Tensor> {
    let sa = shape_nd(a, 2, "matmul")?;
    let sb = shape_nd(b, 2, "matmul")?;
    let (m, k) = logical(sa[0], sa[1], attrs.transpose_a);
    let (k2, n) = logical(sb[0], sb[1], attrs.transpose_b);
    if k != k2 {
        return Err(invalid(
            "matmul",
            format!("inner dimensions differ: {k} and {k2}"),
        ));
    }
    let rk = reduce_axis_n(k, "k");
    let (a, b) = (a.clone(), b.clone());
    let attrs = *attrs;
    compute_tagged(
        &consts(&[m, n]),
        |i| {
            let av = a.at(&index(i[0].to_expr(), rk.expr(), attrs.transpose_a));
            let bv = b.at(&index(rk.expr(), i[1].to_expr(), attrs.transpose_b));
            sum(av * bv, std::slice::from_ref(&rk))
        },
        "matmul",
        tag::MATMUL,
    )
}
