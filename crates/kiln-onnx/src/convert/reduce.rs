//! Reduction converters: ReduceMean/Sum/Max/Min/Prod (axes by attribute before opset 18 -- 13
//! for ReduceSum -- by input from it on; keepdims; noop_with_empty_axes), the reductions made
//! of them (ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp) and
//! ArgMax/ArgMin.

use std::collections::HashMap;

use kiln_graph::ir::Expr;

use super::{call, CResult, ConvertFn, Ctx};
use crate::Node;

/// The graph reduction, a map applied before it and one applied after, of an ONNX reduction.
fn parts(op_type: &str) -> (&'static str, Option<&'static str>, Option<&'static str>) {
    match op_type {
        "ReduceMean" => ("mean", None, None),
        "ReduceSum" => ("sum", None, None),
        "ReduceMax" => ("max", None, None),
        "ReduceMin" => ("min", None, None),
        "ReduceProd" => ("prod", None, None),
        "ReduceL1" => ("sum", Some("abs"), None),
        "ReduceL2" => ("sum", Some("square"), Some("sqrt")),
        "ReduceSumSquare" => ("sum", Some("square"), None),
        "ReduceLogSum" => ("sum", None, Some("log")),
        _ => ("sum", Some("exp"), Some("log")),
    }
}

fn reduce(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let (op, pre, post) = parts(&node.op_type);
    // Axes became an input at opset 18 (13 for ReduceSum).
    let since = if node.op_type == "ReduceSum" { 13 } else { 18 };
    let keep = node.attr_i("keepdims", 1)? != 0;
    let axes = ctx.axes(node, "axes", since, 1)?;
    let axes = match axes {
        Some(a) if a.is_empty() => None,
        a => a,
    };
    if axes.is_none() && node.attr_i("noop_with_empty_axes", 0)? != 0 {
        return Ok(vec![x]);
    }
    let mut attrs = vec![("keepdims", keep.into())];
    if let Some(a) = &axes {
        attrs.push(("axis", a.clone().into()));
    }
    if node.op_type == "ReduceLogSumExp" {
        // log(sum(exp(x - m))) + m with m the maximum, so large inputs do not overflow.
        let mut keep_attrs = vec![("keepdims", true.into())];
        if let Some(a) = &axes {
            keep_attrs.push(("axis", a.clone().into()));
        }
        let m = call("max", vec![x.clone()], &keep_attrs)?;
        let e = call("exp", vec![call("subtract", vec![x, m.clone()], &[])?], &[])?;
        let l = call("log", vec![call("sum", vec![e], &keep_attrs)?], &[])?;
        let r = call("add", vec![l, m], &[])?;
        if keep {
            return Ok(vec![r]);
        }
        let shape: Vec<i64> = super::shape_of(&call(op, vec![r.clone()], &attrs)?)?;
        return Ok(vec![call(
            "reshape",
            vec![r],
            &[("newshape", shape.into())],
        )?]);
    }
    let x = match pre {
        Some("square") => call("multiply", vec![x.clone(), x], &[])?,
        Some(f) => call(f, vec![x], &[])?,
        None => x,
    };
    let r = call(op, vec![x], &attrs)?;
    Ok(vec![match post {
        Some(f) => call(f, vec![r], &[])?,
        None => r,
    }])
}

fn arg_reduce(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let axis = node.attr_i("axis", 0)?;
    let keep = node.attr_i("keepdims", 1)? != 0;
    let op = if node.op_type == "ArgMax" {
        "argmax"
    } else {
        "argmin"
    };
    Ok(vec![call(
        op,
        vec![x],
        &[
            ("axis", vec![axis].into()),
            ("keepdims", keep.into()),
            (
                "select_last_index",
                (node.attr_i("select_last_index", 0)? != 0).into(),
            ),
        ],
    )?])
}

/// Registers this file's converters.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    for op in [
        "ReduceMean",
        "ReduceSum",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ReduceSumSquare",
        "ReduceLogSum",
        "ReduceLogSumExp",
    ] {
        t.insert(op, reduce);
    }
    t.insert("ArgMax", arg_reduce);
    t.insert("ArgMin", arg_reduce);
}
