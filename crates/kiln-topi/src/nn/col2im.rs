//! Col2Im with its image and block shapes known only at run time: the columns, viewed as
//! `[N, C, block..., windows...]`, summed back into the image.

use crate::tag;
use crate::transform::run_time::run_time_dims;
use crate::transform::util::compute_tagged;
use kiln_ffi::{Error, Result};
use kiln_te::{reduce_axis_n, sum, IterVar, Tensor};
use kiln_tir::{select, PrimExpr};

/// The image `[N, C, image...]` (its spatial extents bound from the result) of the sliding
/// blocks `cols` (`[N, C, block..., windows...]`, r spatial axes): image position `p` sums,
/// over the block offsets `k`, the column whose window starts at `p + pad - k * dilation`
/// when that is a multiple of the stride inside the windows.
///
/// # Errors
/// A `ValueError` when `cols` is not of rank `2 + 2r` or the attributes are not r long (pads
/// 2r).
pub fn col2im_run_time(
    cols: &Tensor,
    strides: &[i64],
    dilations: &[i64],
    pads: &[i64],
) -> Result<Tensor> {
    let r = strides.len();
    if r == 0 || cols.ndim() != 2 + 2 * r || dilations.len() != r || pads.len() != 2 * r {
        return Err(Error::value_error(format!(
            "col2im: columns of rank {} for {r} spatial axes",
            cols.ndim()
        )));
    }
    let s = cols.shape();
    let mut shape = vec![s[0].clone(), s[1].clone()];
    shape.extend(run_time_dims(r));
    let ks: Vec<IterVar> = (0..r)
        .map(|a| reduce_axis_n(s[2 + a].clone(), &format!("k{a}")))
        .collect();
    compute_tagged(
        &shape,
        |i| {
            let mut idx = vec![i[0].to_expr(), i[1].to_expr()];
            idx.extend(ks.iter().map(|k| k.expr()));
            let mut ok = PrimExpr::bool(true);
            for a in 0..r {
                let t = i[2 + a].to_expr() + pads[a] - ks[a].expr() * dilations[a];
                let w = kiln_tir::floordiv(t.clone(), strides[a]);
                let inside = t
                    .clone()
                    .ge(0)
                    .logical_and(kiln_tir::floormod(t, strides[a]).equal(0))
                    .logical_and(w.clone().lt(s[2 + r + a].clone()));
                ok = ok.logical_and(inside);
                let last = s[2 + r + a].clone() - 1;
                idx.push(kiln_tir::min(kiln_tir::max(w, 0), last));
            }
            let zero = PrimExpr::const_float(cols.dtype(), 0.0);
            sum(select(ok, cols.at(&idx), zero), &ks)
        },
        "col2im",
        tag::COMM_REDUCE,
    )
}
