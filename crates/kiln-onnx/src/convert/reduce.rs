//! Reduction converters: ReduceMean/Sum/Max/Min/Prod (axes by attribute before opset 18 -- 13
//! for ReduceSum -- by input from it on; keepdims; noop_with_empty_axes), the reductions made
//! of them (ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp) and
//! ArgMax/ArgMin. A reduction whose `axes` input is known only at run time is one kernel with
//! run-time extents ([`run_time_axes`]).

use std::collections::HashMap;

use kiln_graph::ir::Expr;

use kiln_graph::ir::{Type, Var};

use super::shaped::{Kernel, Result_, ShapedKernel, Shapes, Source};
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

/// The opset from which a reduction takes its axes as an input: 18 (13 for ReduceSum).
fn axes_input_since(op_type: &str) -> i64 {
    if op_type == "ReduceSum" {
        13
    } else {
        18
    }
}

/// `x` mapped by a reduction's map `f` (before or after it).
fn map(f: Option<&str>, x: Expr) -> CResult<Expr> {
    match f {
        Some("square") => call("multiply", vec![x.clone(), x], &[]),
        Some(f) => call(f, vec![x], &[]),
        None => Ok(x),
    }
}

/// A reduction whose `axes` input is known only at run time, or whose input is shaped at run
/// time: one kernel for every axes value
/// (`dyn.reduce` reads the reduced axes from its result's shape), the shapes from
/// `vm.builtin.reduce_shape`, a view without the reduced axes unless `keepdims`.
pub(super) fn run_time_axes(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    let x = ctx.input(node, 0)?;
    let by_input = ctx.opset >= axes_input_since(&node.op_type);
    let run_time_axes = by_input && ctx.run_time_input(node, 1)?;
    if !run_time_axes && !super::shaped::run_time_shaped(&x) {
        return Ok(None);
    }
    // Constant axes (of an input shaped at run time) go to the shape function as a tensor.
    let axes = match (by_input, node.input(1).is_some()) {
        (true, true) => ctx.input(node, 1)?,
        (true, false) => super::const_i64(&[])?,
        (false, _) => super::const_i64(&node.opt_ints("axes")?.unwrap_or_default())?,
    };
    let rank = super::shape_of(&x)?.len();
    let n_axes = super::shaped::length(&axes, "input #1 (axes)")?;
    let noop = node.attr_i("noop_with_empty_axes", 0)? != 0;
    let keep = node.attr_i("keepdims", 1)? != 0;
    let out_rank = match (keep, n_axes, noop) {
        (true, _, _) | (false, 0, true) => rank,
        (false, 0, false) => 0,
        (false, n, _) => rank.saturating_sub(n),
    };
    // Log-sum-exp is one reducer of the kernel (its maximum shifts the exponentials).
    let (reducer, pre, post) = match parts(&node.op_type) {
        _ if node.op_type == "ReduceLogSumExp" => ("log_sum_exp", None, None),
        parts => parts,
    };
    let dtype = super::dtype_of(&x)?;
    let p = Var::new("p0", x.ty()?);
    let r = call(
        "dyn.reduce",
        vec![map(pre, p.expr())?],
        &[("reducer", reducer.into())],
    )?;
    let body = map(post, r)?;
    let dims = result_dims(&x, &axes, keep, noop, out_rank)?;
    Ok(Some(ShapedKernel {
        shapes: Shapes::Function {
            name: "reduce_shape",
            ints: vec![noop as i64],
            ranks: vec![rank, out_rank],
        },
        shape_args: vec![x.clone(), axes],
        shape_inputs: Vec::new(),
        kernel: Some(Kernel {
            inputs: vec![x],
            params: vec![p],
            body,
        }),
        results: vec![Result_ {
            source: Source::Kernel(0),
            view: (!keep).then_some(1),
            ty: Type::tensor(&dims, dtype),
        }],
    }))
}

/// The result's dimensions: with constant `axes`, the input's (1 or dropped where reduced;
/// -1 where the input's is known only at run time); -1 each with axes known at run time.
fn result_dims(
    x: &Expr,
    axes: &Expr,
    keep: bool,
    noop: bool,
    out_rank: usize,
) -> CResult<Vec<i64>> {
    let Some(t) = axes.as_constant() else {
        return Ok(vec![-1; out_rank]);
    };
    let xs = super::shape_of(x)?;
    let mut reduced = vec![false; xs.len()];
    let values = t.to_f64_vec()?;
    if values.is_empty() {
        reduced.fill(!noop);
    }
    for v in values {
        match super::norm_axis(v as i64, xs.len()) {
            Ok(a) => reduced[a] = true,
            // Refused when the node runs, naming the axis.
            Err(_) => return Ok(vec![-1; out_rank]),
        }
    }
    Ok(xs
        .iter()
        .zip(&reduced)
        .filter_map(|(&d, &r)| match (r, keep) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect())
}

fn reduce(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let (op, pre, post) = parts(&node.op_type);
    let since = axes_input_since(&node.op_type);
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
    let r = call(op, vec![map(pre, x)?], &attrs)?;
    Ok(vec![map(post, r)?])
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

/// The ONNX reductions over an axis list.
pub(super) const REDUCTIONS: [&str; 10] = [
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
];

/// Registers this file's converters.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    for op in REDUCTIONS {
        t.insert(op, reduce);
    }
    t.insert("ArgMax", arg_reduce);
    t.insert("ArgMin", arg_reduce);
}
