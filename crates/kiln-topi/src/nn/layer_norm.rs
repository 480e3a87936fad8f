//! Layer normalization over some axes: `(x - mean) / sqrt(var + eps) * gamma + beta`.

use super::row_reduce::reduce_row;
use super::softmax::normalize_axis;
use super::{compute_tagged, const_shape, invalid};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, IterVar, Tensor};
use kiln_tir::{PrimExpr, Var};

/// Attributes of [`layer_norm`].
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNormAttrs {
    /// The normalized axes (negative count from the end), e.g. `[-1]`.
    pub axes: Vec<i64>,
    /// Added to the variance.
    pub epsilon: f64,
}

impl Default for LayerNormAttrs {
    fn default() -> LayerNormAttrs {
        LayerNormAttrs {
            axes: vec![-1],
            epsilon: 1e-5,
        }
    }
}

/// The full index of `x` from the kept indices `keep` and the reduced ones `red`.
fn merge(ndim: usize, axes: &[usize], keep: &[Var], red: &[IterVar]) -> Vec<PrimExpr> {
    let (mut ki, mut ri) = (0, 0);
    (0..ndim)
        .map(|d| {
            if axes.contains(&d) {
                ri += 1;
                red[ri - 1].expr()
            } else {
                ki += 1;
                keep[ki - 1].to_expr()
            }
        })
        .collect()
}

/// Layer norm of `x` over `attrs.axes` with optional `gamma` and `beta` of the normalized
/// axes' shape (e.g. `[C]` for the last axis of `[N, C]`). Stages `layer_norm_mean` and
/// `layer_norm_var` (biased variance) reduce (each term pre-scaled by `1/n`, as a reduction
/// must be the whole body); the output is tagged
/// [`tag::LAYER_NORM_OUTPUT`].
pub fn layer_norm(
    x: &Tensor,
    gamma: Option<&Tensor>,
    beta: Option<&Tensor>,
    attrs: &LayerNormAttrs,
) -> Result<Tensor> {
    layer_norm_in_lanes(x, gamma, beta, attrs, 1)
}

/// [`layer_norm`] whose mean and variance over the last axis alone reduce in partials of
/// `lanes` ([`super::row_reduce`]: `layer_norm_mean_lanes`, `layer_norm_var_lanes`), so
/// schedules accumulate them in vectors (rows of 64 took 119 ns each as two scalar chains).
pub fn layer_norm_in_lanes(
    x: &Tensor,
    gamma: Option<&Tensor>,
    beta: Option<&Tensor>,
    attrs: &LayerNormAttrs,
    lanes: i64,
) -> Result<Tensor> {
    const W: &str = "layer_norm";
    let shape: Vec<PrimExpr> = x.shape().to_vec();
    let ndim = shape.len();
    let mut axes = attrs
        .axes
        .iter()
        .map(|&a| normalize_axis(a, ndim, W))
        .collect::<Result<Vec<_>>>()?;
    axes.sort_unstable();
    axes.dedup();
    if axes.is_empty() {
        return Err(invalid(W, "no axes"));
    }
    // The normalized extents are static; the others may be known only at run time.
    let norm_shape: Vec<i64> = axes
        .iter()
        .map(|&a| {
            shape[a].as_int().ok_or_else(|| {
                invalid(
                    W,
                    format!(
                        "normalized axis {a} has extent {}, known only at run time",
                        shape[a]
                    ),
                )
            })
        })
        .collect::<Result<_>>()?;
    for t in [gamma, beta].into_iter().flatten() {
        let s = const_shape(t, W)?;
        if s != norm_shape {
            return Err(invalid(
                W,
                format!("`{}` has shape {s:?}, want {norm_shape:?}", t.name()),
            ));
        }
    }
    let kept: Vec<PrimExpr> = (0..ndim)
        .filter(|d| !axes.contains(d))
        .map(|d| shape[d].clone())
        .collect();
    let count: i64 = norm_shape.iter().product();
    let inv_n = PrimExpr::const_float(x.dtype(), 1.0 / count as f64);
    let red = |tag_: &str| -> Vec<IterVar> {
        norm_shape
            .iter()
            .enumerate()
            .map(|(j, &e)| reduce_axis_n(e, &format!("{tag_}{j}")))
            .collect()
    };
    let (mean, var) = if axes == [ndim - 1] {
        let n = norm_shape[0];
        let row = |rest: &[Var], j: PrimExpr| {
            let mut idx: Vec<PrimExpr> = rest.iter().map(|v| v.to_expr()).collect();
            idx.push(j);
            idx
        };
        let scale = inv_n.clone();
        let mean = reduce_row(
            &kept,
            &PrimExpr::i32(n),
            lanes,
            &|rest, j| x.at(&row(rest, j)) * scale.clone(),
            sum,
            "layer_norm_mean",
        )?;
        let var = reduce_row(
            &kept,
            &PrimExpr::i32(n),
            lanes,
            &|rest, j| {
                let d = x.at(&row(rest, j)) - mean.at_vars(rest);
                d.clone() * d * inv_n.clone()
            },
            sum,
            "layer_norm_var",
        )?;
        (mean, var)
    } else {
        let r1 = red("k");
        let mean = compute_tagged(
            &kept,
            |i| sum(x.at(&merge(ndim, &axes, i, &r1)) * inv_n.clone(), &r1),
            "layer_norm_mean",
            tag::COMM_REDUCE,
        )?;
        let r2 = red("v");
        let var = compute_tagged(
            &kept,
            |i| {
                let d = x.at(&merge(ndim, &axes, i, &r2)) - mean.at_vars(i);
                sum(d.clone() * d * inv_n.clone(), &r2)
            },
            "layer_norm_var",
            tag::COMM_REDUCE,
        )?;
        (mean, var)
    };
    let eps = PrimExpr::const_float(x.dtype(), attrs.epsilon);
    compute_tagged(
        &shape,
        |i| {
            let keep: Vec<PrimExpr> = (0..ndim)
                .filter(|d| !axes.contains(d))
                .map(|d| i[d].to_expr())
                .collect();
            let norm: Vec<PrimExpr> = axes.iter().map(|&d| i[d].to_expr()).collect();
            let mut v = (x.at_vars(i) - mean.at(&keep)) * kiln_tir::op::rsqrt(var.at(&keep) + eps);
            if let Some(g) = gamma {
                v = v * g.at(&norm);
            }
            if let Some(b) = beta {
                v = v + b.at(&norm);
            }
            v
        },
        "layer_norm",
        tag::LAYER_NORM_OUTPUT,
    )
}
