//! Control flow whose decisions are known at compile time, compiled in place:
//!
//! - `If` with a constant condition (an initializer, a `Constant`, a value folded from them, or
//!   a frozen input) becomes its taken branch, converted like the rest of the graph (fused and
//!   scheduled with its neighbours; the other branch costs nothing).
//! - `Loop` whose trip count is constant, or whose condition folds to a constant at every
//!   iteration, is unrolled: the body is converted once per iteration with the iteration
//!   number, condition and loop-carried values bound to its inputs; scan outputs are stacked
//!   on a new first axis.
//! - `Scan` (opset 9 on) is unrolled over its scan axis (sequences have static shapes): each
//!   iteration reads one slice of every scan input (in either direction, along any axis) and
//!   its scan outputs are stacked along their axes, in either direction.
//!
//! Subgraphs read the values of their enclosing scopes by name and may nest. A decision known
//! only at run time is refused with an error naming the input and, when it is computed from
//! graph inputs, which ones to freeze. Unrolling stops at [`MAX_UNROLL`] iterations.

use std::collections::{HashMap, HashSet};

use kiln_graph::ir::Expr;

use super::conv::slice_axis;
use super::{
    call, convert_nodes, norm_axis, reshape, scalar, shape_of, to_runtime, typed, CResult,
    ConvertFn, Ctx, Msg,
};
use crate::attr::AttrValue;
use crate::{Graph, Node};

/// How the error of a `Loop` whose condition stops folding while it is unrolled starts (the
/// program converter runs such a loop on the VM instead).
pub(super) const RUN_TIME_LOOP_CONDITION: &str = "the loop condition is known only at run time";

/// The most iterations a `Loop` or `Scan` is unrolled to.
pub const MAX_UNROLL: usize = 4096;

/// Subgraph attribute `attr` of `node`, checked against the enclosing scopes.
fn subgraph(ctx: &Ctx<'_>, node: &Node, attr: &str) -> CResult<Graph> {
    let g = match node.attr(attr) {
        Some(AttrValue::Graph(g)) => g,
        Some(other) => {
            return Err(Msg(format!(
                "attribute `{attr}` must be a GRAPH, got {}",
                other.type_name()
            )))
        }
        None => return Err(Msg(format!("attribute `{attr}` is missing"))),
    };
    let outer: HashSet<String> = ctx.names().cloned().collect();
    Graph::from_subgraph(g, &outer).map_err(|e| Msg(format!("{attr}: {e}")))
}

/// Converts `sub` (attribute `attr`) into `ctx` with its inputs bound to `inputs`, and returns
/// its outputs.
fn run_subgraph(ctx: &mut Ctx<'_>, attr: &str, sub: &Graph, inputs: &[Expr]) -> CResult<Vec<Expr>> {
    if sub.inputs.len() != inputs.len() {
        return Err(Msg(format!(
            "{attr} declares {} input(s), {} expected",
            sub.inputs.len(),
            inputs.len()
        )));
    }
    for (i, v) in sub.inputs.iter().zip(inputs) {
        ctx.bind(&i.name, v.clone());
    }
    for t in sub.initializers() {
        let e = typed(Expr::constant(to_runtime(t)?))?;
        ctx.bind(&t.name, e);
    }
    convert_nodes(ctx, &sub.nodes).map_err(|e| Msg(format!("{attr}: {e}")))?;
    sub.outputs
        .iter()
        .map(|o| ctx.value_of(&o.name))
        .collect::<CResult<Vec<_>>>()
}

/// `parts` stacked on a new axis `axis` (`reverse`: last part first).
pub(super) fn stack(mut parts: Vec<Expr>, axis: i64, reverse: bool) -> CResult<Expr> {
    if reverse {
        parts.reverse();
    }
    let parts = parts
        .into_iter()
        .map(|p| call("expand_dims", vec![p], &[("axis", axis.into())]))
        .collect::<CResult<Vec<_>>>()?;
    if parts.len() == 1 {
        return Ok(parts.into_iter().next().expect("one part"));
    }
    call("concatenate", parts, &[("axis", axis.into())])
}

/// The value of a constant boolean (or numeric) scalar expression, if it is constant.
fn const_flag(e: &Expr) -> Option<bool> {
    match e {
        Expr::Constant(c) => c.data.to_f64_vec().ok()?.first().map(|&v| v != 0.0),
        _ => None,
    }
}

/// Converts the subgraph `attr` of `node` (an If branch) into `ctx` and returns its outputs.
fn inline_subgraph(ctx: &mut Ctx<'_>, node: &Node, attr: &str) -> CResult<Vec<Expr>> {
    let sub = subgraph(ctx, node, attr)?;
    let outs = run_subgraph(ctx, attr, &sub, &[])?;
    if outs.len() != node.outputs.len() {
        return Err(Msg(format!(
            "{attr} has {} output(s) but the node has {}",
            outs.len(),
            node.outputs.len()
        )));
    }
    Ok(outs)
}

/// The branch attribute a constant If condition `cond` (one element) takes.
fn taken_attr(cond: &kiln_runtime::tensor::Tensor) -> CResult<&'static str> {
    let v = cond.to_f64_vec()?;
    match v.as_slice() {
        [c] if *c != 0.0 => Ok("then_branch"),
        [_] => Ok("else_branch"),
        _ => Err(Msg(format!(
            "the condition must hold one element, it holds {}",
            v.len()
        ))),
    }
}

fn if_op(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let cond = ctx.const_input(node, 0)?.ok_or_else(|| {
        ctx.not_constant_for(
            node,
            0,
            "Kiln compiles If by its taken branch, so the condition must be known at compile time",
        )
    })?;
    let attr = taken_attr(&cond)?;
    inline_subgraph(ctx, node, attr)
}

/// The nodes of the branch an If with a constant condition takes, then an Identity per output
/// (its initializers bound in `ctx`); `None` for an If decided at run time. A program converts
/// them in place of the If, so that the branch's nodes may compute at run time too.
pub(super) fn taken_branch(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Option<Vec<Node>>> {
    let Some(cond) = ctx.const_input(node, 0)? else {
        return Ok(None);
    };
    let attr = taken_attr(&cond)?;
    let sub = subgraph(ctx, node, attr)?;
    if !sub.inputs.is_empty() || sub.outputs.len() != node.outputs.len() {
        return Err(Msg(format!(
            "{attr} has {} input(s) and {} output(s); an If branch has none and the node's {}",
            sub.inputs.len(),
            sub.outputs.len(),
            node.outputs.len()
        )));
    }
    for t in sub.initializers() {
        let e = typed(Expr::constant(to_runtime(t)?))?;
        ctx.bind(&t.name, e);
    }
    let mut nodes = sub.nodes.clone();
    for (o, out) in sub.outputs.iter().zip(&node.outputs) {
        if out.is_empty() {
            continue;
        }
        nodes.push(Node {
            name: node.name.clone(),
            op_type: "Identity".into(),
            domain: String::new(),
            inputs: vec![o.name.clone()],
            outputs: vec![out.clone()],
            attributes: Vec::new(),
        });
    }
    Ok(Some(nodes))
}

fn loop_op(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let trip = match node.input(0) {
        None => None,
        Some(_) => {
            let t = ctx.const_input(node, 0)?.ok_or_else(|| {
                ctx.not_constant_for(
                    node,
                    0,
                    "Kiln unrolls Loop, so its trip count must be known at compile time",
                )
            })?;
            Some(t.to_f64_vec()?.first().copied().unwrap_or(0.0).max(0.0) as usize)
        }
    };
    let mut cond = match ctx.opt_input(node, 1)? {
        Some(c) => c,
        None => typed(Expr::constant(kiln_runtime::tensor::Tensor::from_f64s(
            &[1.0],
            &[],
            kiln_ffi::DataType::bool(),
            kiln_ffi::Device::cpu(0),
        )?))?,
    };
    let mut carried: Vec<Expr> = (2..node.inputs.len())
        .map(|i| ctx.input(node, i))
        .collect::<CResult<_>>()?;
    let body = subgraph(ctx, node, "body")?;
    let n_carried = carried.len();
    let n_scan = body
        .outputs
        .len()
        .checked_sub(1 + n_carried)
        .ok_or_else(|| {
            Msg(format!(
                "body has {} output(s), at least {} expected (condition and loop-carried values)",
                body.outputs.len(),
                1 + n_carried
            ))
        })?;
    let mut scans: Vec<Vec<Expr>> = vec![Vec::new(); n_scan];
    let limit = trip.unwrap_or(MAX_UNROLL + 1);
    let mut i = 0;
    while i < limit {
        match const_flag(&cond) {
            Some(true) => {}
            Some(false) => break,
            None if i == 0 => {
                return Err(ctx.not_constant_for(
                    node,
                    1,
                    "Kiln unrolls Loop, so its condition must be known at compile time",
                ))
            }
            None => {
                return Err(Msg(format!(
                    "{RUN_TIME_LOOP_CONDITION} (iteration {i}); Kiln unrolls Loop, so its \
                     condition must fold to a constant"
                )))
            }
        }
        if i == MAX_UNROLL {
            return Err(Msg(format!(
                "the loop runs past {MAX_UNROLL} iterations, the most Kiln unrolls"
            )));
        }
        let mut ins = vec![scalar(i as f64, kiln_ffi::DataType::int(64))?, cond.clone()];
        ins.extend(carried.iter().cloned());
        let outs = run_subgraph(ctx, "body", &body, &ins)?;
        cond = outs[0].clone();
        carried = outs[1..1 + n_carried].to_vec();
        for (k, s) in outs[1 + n_carried..].iter().enumerate() {
            scans[k].push(s.clone());
        }
        i += 1;
    }
    let mut result = carried;
    for parts in scans {
        if parts.is_empty() {
            return Err(Msg(
                "the loop runs no iteration, so its scan outputs have no known shape".into(),
            ));
        }
        result.push(stack(parts, 0, false)?);
    }
    Ok(result)
}

fn scan_op(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    if ctx.opset >= 9 {
        let inputs: Vec<Expr> = (0..node.inputs.len())
            .map(|i| ctx.input(node, i))
            .collect::<CResult<_>>()?;
        return scan(ctx, node, inputs);
    }
    // Opset 8: a leading batch axis on every value (the scan axis is 1); each batch item is
    // scanned on its own and the results are stacked again.
    if node.input(0).is_some() {
        return Err(Msg(
            "Scan-8 with `sequence_lens` (rows of different lengths) is not supported".into(),
        ));
    }
    let inputs: Vec<Expr> = (1..node.inputs.len())
        .map(|i| ctx.input(node, i))
        .collect::<CResult<_>>()?;
    let batch = inputs
        .first()
        .map(shape_of)
        .transpose()?
        .and_then(|s| s.first().copied())
        .unwrap_or(0);
    let mut per_item: Vec<Vec<Expr>> = Vec::new();
    for b in 0..batch {
        let items = inputs
            .iter()
            .map(|x| {
                let s = shape_of(x)?;
                reshape(slice_axis(x.clone(), 0, b, 1, 1)?, s[1..].to_vec())
            })
            .collect::<CResult<Vec<_>>>()?;
        per_item.push(scan(ctx, node, items)?);
    }
    let n = per_item.first().map(Vec::len).unwrap_or(0);
    (0..n)
        .map(|k| stack(per_item.iter().map(|r| r[k].clone()).collect(), 0, false))
        .collect()
}

/// Scan over `inputs` (states, then scan inputs) with the node's attributes.
fn scan(ctx: &mut Ctx<'_>, node: &Node, inputs: Vec<Expr>) -> CResult<Vec<Expr>> {
    let n_in = node.attr_i("num_scan_inputs", -1)?;
    let total = inputs.len();
    if n_in < 1 || n_in as usize > total {
        return Err(Msg(format!(
            "attribute `num_scan_inputs` = {n_in} must be in [1, {total}]"
        )));
    }
    let n_in = n_in as usize;
    let n_state = total - n_in;
    let mut state: Vec<Expr> = inputs[..n_state].to_vec();
    let scan_in: Vec<Expr> = inputs[n_state..].to_vec();
    let ints = |name: &str, n: usize| -> CResult<Vec<i64>> {
        let v = node.attr_ints(name, &vec![0; n])?;
        if v.len() != n {
            return Err(Msg(format!(
                "attribute `{name}` has {} value(s), {n} expected",
                v.len()
            )));
        }
        Ok(v)
    };
    let in_axes = ints("scan_input_axes", n_in)?;
    let in_dirs = if ctx.opset < 9 {
        ints("directions", n_in)?
    } else {
        ints("scan_input_directions", n_in)?
    };
    let body = subgraph(ctx, node, "body")?;
    let n_out = body.outputs.len().checked_sub(n_state).ok_or_else(|| {
        Msg(format!(
            "body has {} output(s), fewer than the {n_state} state value(s)",
            body.outputs.len()
        ))
    })?;
    let (out_axes, out_dirs) = if ctx.opset < 9 {
        (vec![0; n_out], vec![0; n_out])
    } else {
        (
            ints("scan_output_axes", n_out)?,
            ints("scan_output_directions", n_out)?,
        )
    };
    let mut len = None;
    let mut axes = Vec::new();
    for (x, &a) in scan_in.iter().zip(&in_axes) {
        let s = shape_of(x)?;
        let a = norm_axis(a, s.len())?;
        match len {
            None => len = Some(s[a]),
            Some(l) if l != s[a] => {
                return Err(Msg(format!(
                    "scan inputs disagree on the sequence length ({l} and {})",
                    s[a]
                )))
            }
            _ => {}
        }
        axes.push(a);
    }
    let len = len.unwrap_or(0) as usize;
    if len > MAX_UNROLL {
        return Err(Msg(format!(
            "the sequence has {len} steps, more than the {MAX_UNROLL} Kiln unrolls"
        )));
    }
    if len == 0 && n_out > 0 {
        return Err(Msg(
            "an empty sequence gives scan outputs of no known shape".into(),
        ));
    }
    let mut outs: Vec<Vec<Expr>> = vec![Vec::new(); n_out];
    for t in 0..len {
        let mut ins = state.clone();
        for ((x, &a), &d) in scan_in.iter().zip(&axes).zip(&in_dirs) {
            let at = if d != 0 { len - 1 - t } else { t } as i64;
            let mut s = shape_of(x)?;
            s.remove(a);
            ins.push(reshape(slice_axis(x.clone(), a as i64, at, 1, 1)?, s)?);
        }
        let res = run_subgraph(ctx, "body", &body, &ins)?;
        state = res[..n_state].to_vec();
        for (k, v) in res[n_state..].iter().enumerate() {
            outs[k].push(v.clone());
        }
    }
    let mut result = state;
    for ((parts, &a), &d) in outs.into_iter().zip(&out_axes).zip(&out_dirs) {
        let rank = shape_of(&parts[0])?.len() + 1;
        let a = norm_axis(a, rank)? as i64;
        result.push(stack(parts, a, d != 0)?);
    }
    Ok(result)
}

/// Registers If, Loop and Scan.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("If", if_op);
    t.insert("Loop", loop_op);
    t.insert("Scan", scan_op);
}
