//! Group-wise normalization converters: GroupNormalization (opset 18: scale and bias per
//! group; opset 21: per channel, stash_type) and MeanVarianceNormalization, composed from
//! reductions and arithmetic.

use std::collections::HashMap;

use kiln_graph::ir::Expr;

use super::nn::Stash;
use super::{call, dtype_of, reshape, scalar, shape_of, CResult, ConvertFn, Ctx, Msg};
use crate::Node;

/// GroupNormalization: the channels of `[N, C, spatial...]` split into `num_groups` groups,
/// each (n, group) normalized over its channels and positions, then `scale * y + bias` with
/// one value per group (opset 18) or per channel (opset 21). Statistics are computed in
/// float32 for narrower floats (`stash_type`).
fn group_norm(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    if xs.len() < 3 {
        return Err(Msg(format!(
            "input #0 (X) must be [N, C, spatial...], got {xs:?}"
        )));
    }
    let groups = node
        .opt_i("num_groups")?
        .ok_or_else(|| Msg::from(node.missing_attr("num_groups")))?;
    if groups <= 0 || xs[1] % groups != 0 {
        return Err(Msg(format!(
            "attribute num_groups={groups} must be positive and divide the {} channels",
            xs[1]
        )));
    }
    let stash_type = node.attr_i("stash_type", 1)?;
    if stash_type != 1 {
        return Err(Msg(format!(
            "attribute stash_type={stash_type} is not supported (only 1, float32)"
        )));
    }
    let eps = node.attr_f("epsilon", 1e-5)? as f64;
    let per_group = ctx.opset < 21;
    let params = [(1, "scale"), (2, "bias")].map(|(i, name)| -> CResult<Expr> {
        let p = ctx.input(node, i)?;
        let want = if per_group { groups } else { xs[1] };
        let ps = shape_of(&p)?;
        if ps != [want] {
            return Err(Msg(format!(
                "input #{i} ({name}) must have {want} values (one per {}), got {ps:?}",
                if per_group { "group" } else { "channel" }
            )));
        }
        Ok(p)
    });
    let [scale, bias] = params;
    let (scale, bias) = (scale?, bias?);

    let st = Stash::of(dtype_of(&x)?);
    let x = st.widen(x)?;
    let rest = xs[1] / groups * xs[2..].iter().product::<i64>();
    let view = reshape(x, vec![xs[0], groups, rest])?;
    let keep = [("axis", vec![2i64].into()), ("keepdims", true.into())];
    let mean = call("mean", vec![view.clone()], &keep)?;
    let centered = call("subtract", vec![view, mean], &[])?;
    let sq = call("multiply", vec![centered.clone(), centered.clone()], &[])?;
    let var = call("mean", vec![sq], &keep)?;
    let eps = scalar(eps, st.compute_dtype())?;
    let inv = call("rsqrt", vec![call("add", vec![var, eps], &[])?], &[])?;
    let y = call("multiply", vec![centered, inv], &[])?;
    let (y, shape) = if per_group {
        let g = |p: Expr| reshape(st.widen(p)?, vec![groups, 1]);
        let y = call("multiply", vec![y, g(scale)?], &[])?;
        let y = call("add", vec![y, g(bias)?], &[])?;
        (st.restore(y)?, xs.clone())
    } else {
        let mut per_channel = vec![xs[1]];
        per_channel.extend(std::iter::repeat_n(1, xs.len() - 2));
        let c = |p: Expr| reshape(p, per_channel.clone());
        let y = reshape(st.restore(y)?, xs.clone())?;
        let y = call("multiply", vec![y, c(scale)?], &[])?;
        (call("add", vec![y, c(bias)?], &[])?, xs.clone())
    };
    Ok(vec![reshape(y, shape)?])
}

/// MeanVarianceNormalization: `(X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9)` over `axes`
/// (default `[0, 2, 3]`), as ONNX's function body defines it.
fn mean_variance_norm(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let rank = shape_of(&x)?.len();
    let axes = node.attr_ints("axes", &[0, 2, 3])?;
    for &a in &axes {
        super::norm_axis(a, rank).map_err(|_| {
            Msg(format!(
                "attribute axes={axes:?} does not fit an input of rank {rank}"
            ))
        })?;
    }
    let d = dtype_of(&x)?;
    let keep = [("axis", axes.into()), ("keepdims", true.into())];
    let mean = call("mean", vec![x.clone()], &keep)?;
    let sq = call("multiply", vec![x.clone(), x.clone()], &[])?;
    let mean_sq = call("mean", vec![sq], &keep)?;
    let var = call(
        "subtract",
        vec![
            mean_sq,
            call("multiply", vec![mean.clone(), mean.clone()], &[])?,
        ],
        &[],
    )?;
    let std = call(
        "add",
        vec![call("sqrt", vec![var], &[])?, scalar(1e-9, d)?],
        &[],
    )?;
    let centered = call("subtract", vec![x, mean], &[])?;
    Ok(vec![call("divide", vec![centered, std], &[])?])
}

/// Registers this file's converters.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("GroupNormalization", group_norm);
    t.insert("MeanVarianceNormalization", mean_variance_norm);
}
