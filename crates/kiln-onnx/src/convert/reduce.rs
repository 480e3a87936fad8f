//! Reduction converters: ReduceMean/Sum/Max/Min/Prod (axes by attribute before opset 18 -- 13
//! for ReduceSum -- by input from it on; keepdims; noop_with_empty_axes) and ArgMax/ArgMin.

use std::collections::HashMap;

use kiln_graph::ir::Expr;

use super::{call, CResult, ConvertFn, Ctx};
use crate::Node;

fn reduce(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let (op, since) = match node.op_type.as_str() {
        "ReduceMean" => ("mean", 18),
        "ReduceSum" => ("sum", 13),
        "ReduceMax" => ("max", 18),
        "ReduceMin" => ("min", 18),
        _ => ("prod", 18),
    };
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
    if let Some(a) = axes {
        attrs.push(("axis", a.into()));
    }
    Ok(vec![call(op, vec![x], &attrs)?])
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
    ] {
        t.insert(op, reduce);
    }
    t.insert("ArgMax", arg_reduce);
    t.insert("ArgMin", arg_reduce);
}
