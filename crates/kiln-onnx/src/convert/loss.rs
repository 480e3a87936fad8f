//! Loss converters: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (reduction
//! none/sum/mean, per-class weights, ignore_index, N-D inputs, the log_prob output), composed
//! from gather_elements, take, where and reductions.

use std::collections::HashMap;

use kiln_graph::ir::Expr;

use super::{call, dtype_of, scalar, shape_of, CResult, ConvertFn, Ctx, Msg};
use crate::Node;

/// How the per-element losses are reduced.
#[derive(Clone, Copy, PartialEq)]
enum Reduction {
    None,
    Sum,
    Mean,
}

impl Reduction {
    fn of(node: &Node) -> CResult<Reduction> {
        match node.attr_s("reduction", "mean")?.as_str() {
            "none" => Ok(Reduction::None),
            "sum" => Ok(Reduction::Sum),
            "mean" => Ok(Reduction::Mean),
            other => Err(Msg(format!(
                "attribute reduction=\"{other}\" is not none, sum or mean"
            ))),
        }
    }
}

/// The sum of every element of `x` (a scalar).
fn total(x: Expr) -> CResult<Expr> {
    let axes: Vec<i64> = (0..shape_of(&x)?.len() as i64).collect();
    call(
        "sum",
        vec![x],
        &[("axis", axes.into()), ("keepdims", false.into())],
    )
}

/// The negative log-likelihood of `target` ([N, d...], class indices) under the
/// log-probabilities `x` ([N, C, d...]): `-x[n, target[n, d...], d...] * weight[target]`,
/// 0 where the target is `ignore_index`, then reduced; `mean` divides by the summed weights
/// of the targets counted.
fn nll(ctx: &Ctx<'_>, node: &Node, x: Expr, reduction: Reduction) -> CResult<Expr> {
    let target = ctx.input(node, 1)?;
    let (xs, ts) = (shape_of(&x)?, shape_of(&target)?);
    let td = dtype_of(&target)?;
    if xs.len() < 2 || ts.len() + 1 != xs.len() || ts[0] != xs[0] || ts[1..] != xs[2..] {
        return Err(Msg(format!(
            "input #1 (target) must have the shape [N, d...] of input #0 {xs:?} without its \
             class axis, got {ts:?}"
        )));
    }
    use kiln_ffi::dtype::code;
    if td.code() != code::INT && td.code() != code::UINT {
        return Err(Msg(format!(
            "input #1 (target) must hold integer class indices, got {td}"
        )));
    }
    let d = dtype_of(&x)?;
    let valid = match node.opt_i("ignore_index")? {
        Some(ii) => Some(call(
            "not_equal",
            vec![target.clone(), scalar(ii as f64, td)?],
            &[],
        )?),
        None => None,
    };
    // Ignored targets may be out of range: read class 0 there, the loss is zeroed anyway.
    let safe = match &valid {
        Some(v) => call("where", vec![v.clone(), target, scalar(0.0, td)?], &[])?,
        None => target,
    };
    let index = call("expand_dims", vec![safe.clone()], &[("axis", 1i64.into())])?;
    let picked = call("gather_elements", vec![x, index], &[("axis", 1i64.into())])?;
    let picked = call("squeeze", vec![picked], &[("axis", vec![1i64].into())])?;
    let mut loss = call("negative", vec![picked], &[])?;
    let mut weight = match ctx.opt_input(node, 2)? {
        Some(w) => {
            let ws = shape_of(&w)?;
            if ws != [xs[1]] {
                return Err(Msg(format!(
                    "input #2 (weight) must have one value per class [{}], got {ws:?}",
                    xs[1]
                )));
            }
            let wt = call(
                "take",
                vec![w, safe],
                &[("axis", 0i64.into()), ("mode", "clip".into())],
            )?;
            loss = call("multiply", vec![loss, wt.clone()], &[])?;
            Some(wt)
        }
        None => None,
    };
    if let Some(v) = &valid {
        let zero = scalar(0.0, d)?;
        loss = call("where", vec![v.clone(), loss, zero.clone()], &[])?;
        weight = Some(match weight {
            Some(w) => call("where", vec![v.clone(), w, zero], &[])?,
            None => call(
                "cast",
                vec![v.clone()],
                &[("dtype", d.to_string().as_str().into())],
            )?,
        });
    }
    match (reduction, weight) {
        (Reduction::None, _) => Ok(loss),
        (Reduction::Sum, _) => total(loss),
        (Reduction::Mean, Some(w)) => call("divide", vec![total(loss)?, total(w)?], &[]),
        (Reduction::Mean, None) => {
            let axes: Vec<i64> = (0..ts.len() as i64).collect();
            call(
                "mean",
                vec![loss],
                &[("axis", axes.into()), ("keepdims", false.into())],
            )
        }
    }
}

/// NegativeLogLikelihoodLoss: input #0 holds log-probabilities.
fn nll_loss(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    Ok(vec![nll(ctx, node, x, Reduction::of(node)?)?])
}

/// SoftmaxCrossEntropyLoss: the NLL of the log-softmax over the class axis, which is also
/// the optional `log_prob` output.
fn softmax_cross_entropy(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    if shape_of(&x)?.len() < 2 {
        return Err("input #0 (scores) must be [N, C, d...]".into());
    }
    let log_prob = call("nn.log_softmax", vec![x], &[("axis", 1i64.into())])?;
    let loss = nll(ctx, node, log_prob.clone(), Reduction::of(node)?)?;
    Ok(vec![loss, log_prob])
}

/// Registers this file's converters.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("NegativeLogLikelihoodLoss", nll_loss);
    t.insert("SoftmaxCrossEntropyLoss", softmax_cross_entropy);
}
