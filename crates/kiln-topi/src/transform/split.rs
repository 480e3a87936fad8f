//! `split` into several outputs along an axis (ONNX `Split`, numpy `split`).

use super::util::{
    compute_tagged, const_shape, index_dtype, normalize_axis, shape_exprs, value_error,
};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::{PrimExpr, Var};

/// How to split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitSpec {
    /// `n` equal parts (the axis must divide evenly, as numpy).
    Sections(usize),
    /// Cut before each of these increasing indices (numpy's `indices_or_sections` list):
    /// `[2, 5]` on 7 gives parts of 2, 3 and 2.
    Indices(Vec<i64>),
    /// Parts of these sizes, which must add up to the axis (ONNX's `split` input).
    Sizes(Vec<i64>),
}

/// `x` cut along `axis` (negative counts from the end) into the parts `spec` describes; one
/// tensor per part, each its own compute (`split_0`, `split_1`, ...).
///
/// # Errors
/// A `ValueError` for an axis out of range, uneven sections, indices out of order or out of
/// range, or sizes that do not add up.
pub fn split(x: &Tensor, spec: &SplitSpec, axis: i64) -> Result<Vec<Tensor>> {
    let shape = const_shape(x, "split")?;
    let a = normalize_axis(axis, shape.len(), "split")?;
    let n = shape[a];
    let sizes: Vec<i64> = match spec {
        SplitSpec::Sections(0) => return Err(value_error("split", "0 sections")),
        SplitSpec::Sections(k) => {
            let k = *k as i64;
            if n % k != 0 {
                return Err(value_error(
                    "split",
                    format!("axis {a} of size {n} does not split into {k} equal sections"),
                ));
            }
            vec![n / k; k as usize]
        }
        SplitSpec::Indices(idx) => {
            let mut prev = 0;
            let mut v = Vec::with_capacity(idx.len() + 1);
            for &i in idx {
                if i < prev || i > n {
                    return Err(value_error(
                        "split",
                        format!("indices {idx:?} must increase within 0..={n}"),
                    ));
                }
                v.push(i - prev);
                prev = i;
            }
            v.push(n - prev);
            v
        }
        SplitSpec::Sizes(s) => {
            if s.iter().any(|&d| d < 0) || s.iter().sum::<i64>() != n {
                return Err(value_error(
                    "split",
                    format!("sizes {s:?} must be non-negative and add up to {n} (axis {a})"),
                ));
            }
            s.clone()
        }
    };
    let dt = index_dtype(x);
    let mut outs = Vec::with_capacity(sizes.len());
    let mut begin = 0i64;
    for (k, &len) in sizes.iter().enumerate() {
        let mut oshape = shape.clone();
        oshape[a] = len;
        let off = begin;
        outs.push(compute_tagged(
            &shape_exprs(&oshape, dt),
            |i: &[Var]| {
                let idx: Vec<PrimExpr> = i
                    .iter()
                    .enumerate()
                    .map(|(d, v)| {
                        if d == a {
                            v.to_expr() + PrimExpr::const_int(v.dtype(), off)
                        } else {
                            v.to_expr()
                        }
                    })
                    .collect();
                x.at(&idx)
            },
            &format!("split_{k}"),
            tag::INJECTIVE,
        )?);
        begin += len;
    }
    Ok(outs)
}
