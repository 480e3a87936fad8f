//! Reductions whose reduced axes are known only at run time (ONNX reductions with a run-time
//! `axes` input): the kernel keeps the input's rank and learns the axes from its output's
//! shape, which the caller allocates. An output dimension equal to the input's keeps that
//! axis; any other (1) reduces it; an axis of extent 1 reads the same either way. So one
//! kernel serves every axes value, with extents bound when it is called.

use crate::tag;
use crate::transform::util::compute_tagged;
use kiln_ffi::{Error, Result};
use kiln_te::{reduce_axis_n, IterVar, Tensor};
use kiln_tir::{select, DataTypeExt, PrimExpr, Var};

/// What a reduction to a run-time shape computes per output element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reducer {
    /// The sum.
    Sum,
    /// The sum divided by the number of reduced elements (integers truncate toward zero).
    Mean,
    /// The maximum.
    Max,
    /// The minimum.
    Min,
    /// The product.
    Prod,
    /// `log(sum(exp(x - m))) + m` with `m` the maximum (no overflow for large inputs).
    LogSumExp,
}

impl Reducer {
    /// The reducer named `name` (`sum`, `mean`, `max`, `min`, `prod`, `log_sum_exp`).
    pub fn parse(name: &str) -> Result<Reducer> {
        Ok(match name {
            "sum" => Reducer::Sum,
            "mean" => Reducer::Mean,
            "max" => Reducer::Max,
            "min" => Reducer::Min,
            "prod" => Reducer::Prod,
            "log_sum_exp" => Reducer::LogSumExp,
            _ => {
                return Err(Error::value_error(format!(
                    "reduce_to_shape: unknown reducer {name:?} (sum, mean, max, min, prod, \
                     log_sum_exp)"
                )))
            }
        })
    }
}

/// One reduction stage of `x` to `out` (one dimension per input axis) by `reducer`, reading
/// `x` at each output point plus the reduction offsets; `extra(point, value)` adjusts the
/// value read (a shift by the maximum for log-sum-exp).
fn stage(
    x: &Tensor,
    out: &[PrimExpr],
    name: &str,
    extra: &dyn Fn(&[Var], PrimExpr) -> PrimExpr,
    reducer: fn(PrimExpr, &[IterVar]) -> PrimExpr,
) -> Result<Tensor> {
    let raxes: Vec<IterVar> = x
        .shape()
        .iter()
        .zip(out)
        .enumerate()
        .map(|(j, (d, o))| {
            let extent = select(
                o.clone().equal(d.clone()),
                PrimExpr::const_int(d.dtype(), 1),
                d.clone(),
            );
            reduce_axis_n(extent, &format!("k{j}"))
        })
        .collect();
    compute_tagged(
        out,
        |i| {
            let idx: Vec<PrimExpr> = i
                .iter()
                .zip(&raxes)
                .map(|(v, k)| v.to_expr() + k.expr())
                .collect();
            reducer(extra(i, x.at(&idx)), &raxes)
        },
        name,
        tag::COMM_REDUCE,
    )
}

/// `x` reduced to the shape `out` (same rank as `x`; see the module docs) by `reducer`.
///
/// # Errors
/// A `ValueError` when `out`'s rank is not `x`'s; a `TypeError` for the mean of bools.
pub fn reduce_to_shape(x: &Tensor, out: &[PrimExpr], reducer: Reducer) -> Result<Tensor> {
    if out.len() != x.ndim() {
        return Err(Error::value_error(format!(
            "reduce_to_shape: the output has rank {}, the input {}",
            out.len(),
            x.ndim()
        )));
    }
    let keep = |_: &[Var], v: PrimExpr| v;
    match reducer {
        Reducer::Sum => stage(x, out, "dyn_sum", &keep, kiln_te::sum),
        Reducer::Max => stage(x, out, "dyn_max", &keep, kiln_te::max),
        Reducer::Min => stage(x, out, "dyn_min", &keep, kiln_te::min),
        Reducer::Prod => stage(x, out, "dyn_prod", &keep, kiln_te::prod),
        Reducer::Mean => {
            if x.dtype().is_bool() {
                return Err(Error::type_error("mean: bool tensors have no mean"));
            }
            let s = stage(x, out, "dyn_mean_sum", &keep, kiln_te::sum)?;
            // The number of reduced elements: the input's elements over the output's.
            let count = x
                .shape()
                .iter()
                .zip(out)
                .map(|(d, o)| {
                    select(
                        o.clone().equal(d.clone()),
                        PrimExpr::const_int(d.dtype(), 1),
                        d.clone(),
                    )
                })
                .reduce(|a, b| a * b)
                .unwrap_or_else(|| PrimExpr::i32(1));
            let count = kiln_tir::max(count, PrimExpr::i32(1));
            let t = s.dtype();
            compute_tagged(
                s.shape(),
                |i| {
                    if t.is_floating() {
                        s.at_vars(i) / kiln_tir::cast(t, count)
                    } else {
                        kiln_tir::truncdiv(s.at_vars(i), kiln_tir::cast(t, count))
                    }
                },
                "dyn_mean",
                tag::ELEMWISE,
            )
        }
        Reducer::LogSumExp => {
            let m = stage(x, out, "dyn_lse_max", &keep, kiln_te::max)?;
            let shifted = |i: &[Var], v: PrimExpr| {
                let at: Vec<PrimExpr> = i.iter().map(Var::to_expr).collect();
                kiln_tir::op::exp(v - m.at(&at))
            };
            let s = stage(x, out, "dyn_lse_sum", &shifted, kiln_te::sum)?;
            compute_tagged(
                s.shape(),
                |i| kiln_tir::op::log(s.at_vars(i)) + m.at_vars(i),
                "dyn_log_sum_exp",
                tag::ELEMWISE,
            )
        }
    }
}
