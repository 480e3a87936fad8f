//! Batched matrix product.

use super::matmul::{index, logical, MatmulAttrs};
use super::{compute_tagged, consts, invalid, shape_nd};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, Tensor};
use kiln_tir::PrimExpr;

/// `out[b, m, n] = sum_k A[b, m, k] * B[b, k, n]` for 3-D `a` and `b` (transposes as in
/// [`super::matmul`], on the last two dimensions). A batch of 1 on either side broadcasts.
/// Tagged [`tag::BATCH_MATMUL`].
pub fn batch_matmul(a: &Tensor, b: &Tensor, attrs: &MatmulAttrs) -> Result<Tensor> {
    let sa = shape_nd(a, 3, "batch_matmul")?;
    let sb = shape_nd(b, 3, "batch_matmul")?;
    let (m, k) = logical(sa[1], sa[2], attrs.transpose_a);
    let (k2, n) = logical(sb[1], sb[2], attrs.transpose_b);
    if k != k2 {
        return Err(invalid(
            "batch_matmul",
            format!("inner dimensions differ: {k} and {k2}"),
        ));
    }
    if sa[0] != sb[0] && sa[0] != 1 && sb[0] != 1 {
        return Err(invalid(
            "batch_matmul",
            format!("batches {} and {} do not broadcast", sa[0], sb[0]),
        ));
    }
    let batch = sa[0].max(sb[0]);
    let rk = reduce_axis_n(k, "k");
    let (ta, tb) = (a.clone(), b.clone());
    let attrs = *attrs;
    let (one_a, one_b) = (sa[0] == 1, sb[0] == 1);
    compute_tagged(
        &consts(&[batch, m, n]),
        |i| {
            let bi = |one: bool| {
                if one {
                    PrimExpr::i32(0)
                } else {
                    i[0].to_expr()
                }
            };
            let [ar, ac] = index(i[1].to_expr(), rk.expr(), attrs.transpose_a);
            let [br, bc] = index(rk.expr(), i[2].to_expr(), attrs.transpose_b);
            sum(
                ta.at(&[bi(one_a), ar, ac]) * tb.at(&[bi(one_b), br, bc]),
                std::slice::from_ref(&rk),
            )
        },
        "batch_matmul",
        tag::BATCH_MATMUL,
    )
}
