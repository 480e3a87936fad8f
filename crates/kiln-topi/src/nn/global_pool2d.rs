//! Global max and average pooling over H and W, NCHW (output `[N, C, 1, 1]`) or channel
//! blocks (`[N, C/b, H, W, b]` -> `[N, C/b, 1, 1, b]`).

use super::{compute_tagged, nchw_or_blocks_dims};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{max, reduce_axis_n, sum, Tensor};
use kiln_tir::{floordiv, floormod, PrimExpr};

/// The dimensions of the data (4-D, or 5-D channel blocks; any may be known only at run
/// time) and of the pooled output.
fn shapes(data: &Tensor, name: &str) -> Result<(Vec<PrimExpr>, Vec<PrimExpr>)> {
    let ds = nchw_or_blocks_dims(data, name)?;
    let one = PrimExpr::i32(1);
    let mut out = vec![ds[0].clone(), ds[1].clone(), one.clone(), one];
    out.extend_from_slice(&ds[4..]);
    Ok((ds, out))
}

/// The plane reduction: NCHW planes of known size as one row of `H*W` contiguous elements
/// reduced in lane partials ([`super::row_reduce`]; a scalar chain of 169 adds per channel
/// waits on each add), blocked data over its rows and columns with the channels as vectors.
fn reduce_hw(data: &Tensor, is_max: bool, name: &str, lanes: i64) -> Result<Tensor> {
    let (ds, out) = shapes(data, name)?;
    let combine: super::row_reduce::Combiner = if is_max { max } else { sum };
    if let (4, Some(w), Some(h)) = (ds.len(), ds[3].as_int(), ds[2].as_int()) {
        let d = data.clone();
        return super::row_reduce::reduce_row_tagged(
            &out,
            &PrimExpr::i32(h * w),
            lanes,
            &|i, j| {
                d.at(&[
                    i[0].to_expr(),
                    i[1].to_expr(),
                    floordiv(j.clone(), w),
                    floormod(j, w),
                ])
            },
            combine,
            name,
            tag::GLOBAL_POOL2D,
        );
    }
    let ry = reduce_axis_n(ds[2].clone(), "ry");
    let rx = reduce_axis_n(ds[3].clone(), "rx");
    let d = data.clone();
    compute_tagged(
        &out,
        |i| {
            let mut idx = vec![i[0].to_expr(), i[1].to_expr(), ry.expr(), rx.expr()];
            idx.extend(i.get(4).map(|v| v.to_expr()));
            let v = d.at(&idx);
            combine(v, &[ry.clone(), rx.clone()])
        },
        name,
        tag::GLOBAL_POOL2D,
    )
}

/// The largest element of each `(n, c)` plane, NCHW planes reduced in vectors of `lanes`.
/// Tagged [`tag::GLOBAL_POOL2D`].
pub fn global_max_pool2d(data: &Tensor, lanes: i64) -> Result<Tensor> {
    reduce_hw(data, true, "global_max_pool2d", lanes)
}

/// The mean of each `(n, c)` plane: a sum stage (`global_avg_pool2d_sum`, tagged
/// [`tag::GLOBAL_POOL2D`]; NCHW planes summed in vectors of `lanes`) and a scaling output
/// (tagged [`tag::ELEMWISE`]).
pub fn global_avg_pool2d(data: &Tensor, lanes: i64) -> Result<Tensor> {
    let (ds, out) = shapes(data, "global_avg_pool2d")?;
    let total = reduce_hw(data, false, "global_avg_pool2d_sum", lanes)?;
    let scale = match (ds[2].as_int(), ds[3].as_int()) {
        (Some(h), Some(w)) => PrimExpr::const_float(data.dtype(), 1.0 / (h * w) as f64),
        _ => {
            let one = PrimExpr::const_float(data.dtype(), 1.0);
            one / kiln_tir::cast(data.dtype(), ds[2].clone() * ds[3].clone())
        }
    };
    compute_tagged(
        &out,
        |i| total.at_vars(i) * scale.clone(),
        "global_avg_pool2d",
        tag::ELEMWISE,
    )
}
