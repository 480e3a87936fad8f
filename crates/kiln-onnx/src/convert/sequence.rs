//! Sequences known at compile time: a sequence value is a tuple of tensors, so SequenceEmpty,
//! SequenceConstruct, SequenceInsert, SequenceErase, SequenceAt, SequenceLength,
//! ConcatFromSequence and SplitToSequence become tuple constructions and projections (and the
//! concatenation or split of their tensors); positions must be compile-time constants. A
//! sequence crossing the graph's inputs or outputs (a run-time list) is not supported.

use std::collections::HashMap;

use kiln_graph::ir::Expr;

use super::control::stack;
use super::conv::slice_axis;
use super::{call, const_i64, norm_axis, reshape, shape_of, typed, CResult, ConvertFn, Ctx, Msg};
use crate::Node;

/// The tensors of sequence `e`.
fn items(e: &Expr) -> CResult<Vec<Expr>> {
    if let Expr::Tuple(t) = e {
        return Ok(t.fields.to_vec());
    }
    let ty = e.ty()?;
    let n = ty
        .as_tuple()
        .map(|f| f.len())
        .ok_or_else(|| Msg(format!("expected a sequence, got a value of type {ty}")))?;
    (0..n)
        .map(|i| typed(Expr::get_item(e.clone(), i)))
        .collect()
}

/// A sequence of `items`.
fn sequence(items: Vec<Expr>) -> CResult<Expr> {
    typed(Expr::tuple(items))
}

/// Position input `i` of `node`, a compile-time constant, or `None` when absent.
fn const_position(ctx: &Ctx<'_>, node: &Node, i: usize) -> CResult<Option<i64>> {
    if node.input(i).is_none() {
        return Ok(None);
    }
    let t = ctx.const_input(node, i)?.ok_or_else(|| {
        ctx.not_constant_for(node, i, "Kiln resolves sequence positions at compile time")
    })?;
    let v = t.to_f64_vec()?;
    let p = v
        .first()
        .ok_or_else(|| Msg(format!("input #{i} (the position) is empty")))?;
    Ok(Some(*p as i64))
}

/// Position input `i` of `node` normalized for a sequence of `len` (`end`: one past the last
/// is allowed, for insertion), or `default` when absent.
fn position(
    ctx: &Ctx<'_>,
    node: &Node,
    i: usize,
    len: usize,
    end: bool,
    default: usize,
) -> CResult<usize> {
    let Some(p) = const_position(ctx, node, i)? else {
        return Ok(default);
    };
    let n = len as i64 + i64::from(end);
    let at = if p < 0 { p + len as i64 } else { p };
    if at < 0 || at >= n {
        return Err(Msg(format!(
            "position {p} is out of range for a sequence of {len} tensor(s)"
        )));
    }
    Ok(at as usize)
}

fn construct(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let parts = (0..node.inputs.len())
        .map(|i| ctx.input(node, i))
        .collect::<CResult<Vec<_>>>()?;
    Ok(vec![sequence(parts)?])
}

fn empty(_: &mut Ctx<'_>, _: &Node) -> CResult<Vec<Expr>> {
    Ok(vec![sequence(Vec::new())?])
}

fn insert(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let mut seq = items(&ctx.input(node, 0)?)?;
    let t = ctx.input(node, 1)?;
    let at = position(ctx, node, 2, seq.len(), true, seq.len())?;
    seq.insert(at, t);
    Ok(vec![sequence(seq)?])
}

fn erase(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let mut seq = items(&ctx.input(node, 0)?)?;
    if seq.is_empty() {
        return Err("cannot erase from an empty sequence".into());
    }
    let at = position(ctx, node, 1, seq.len(), false, seq.len() - 1)?;
    seq.remove(at);
    Ok(vec![sequence(seq)?])
}

fn at(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let seq = items(&ctx.input(node, 0)?)?;
    if node.input(1).is_none() {
        return Err("input #1 (the position) is required".into());
    }
    let at = position(ctx, node, 1, seq.len(), false, 0)?;
    Ok(vec![seq[at].clone()])
}

fn length(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let n = items(&ctx.input(node, 0)?)?.len() as i64;
    Ok(vec![reshape(const_i64(&[n])?, Vec::<i64>::new())?])
}

fn concat_from_sequence(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let seq = items(&ctx.input(node, 0)?)?;
    let first = seq.first().ok_or("cannot concatenate an empty sequence")?;
    let rank = shape_of(first)?.len();
    let new_axis = node.attr_i("new_axis", 0)? != 0;
    let axis = node.attr_i("axis", 0)?;
    let axis = norm_axis(axis, rank + usize::from(new_axis))? as i64;
    if new_axis {
        return Ok(vec![stack(seq, axis, false)?]);
    }
    if seq.len() == 1 {
        return Ok(seq);
    }
    Ok(vec![call("concatenate", seq, &[("axis", axis.into())])?])
}

fn split_to_sequence(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let s = shape_of(&x)?;
    let axis = norm_axis(node.attr_i("axis", 0)?, s.len())?;
    let n = s[axis];
    let sizes: Vec<i64> = match ctx.const_ints(node, 1)? {
        None => vec![1; n as usize],
        Some(v) if shape_of(&ctx.input(node, 1)?)?.is_empty() => {
            let chunk = v[0];
            if chunk < 1 {
                return Err(Msg(format!("the split size {chunk} must be positive")));
            }
            (0..n)
                .step_by(chunk as usize)
                .map(|b| chunk.min(n - b))
                .collect()
        }
        Some(v) => v,
    };
    // Sizes of 0 are allowed: they make empty tensors.
    if sizes.iter().any(|&k| k < 0) || sizes.iter().sum::<i64>() != n {
        return Err(Msg(format!(
            "split sizes {sizes:?} do not cover the {n} entries of axis {axis}"
        )));
    }
    let squeeze = node.input(1).is_none() && node.attr_i("keepdims", 1)? == 0;
    let mut parts = Vec::with_capacity(sizes.len());
    let mut begin = 0;
    for &k in &sizes {
        let mut part = slice_axis(x.clone(), axis as i64, begin, k, 1)?;
        if squeeze {
            let mut shape = s.clone();
            shape.remove(axis);
            part = reshape(part, shape)?;
        }
        parts.push(part);
        begin += k;
    }
    Ok(vec![sequence(parts)?])
}

/// SplitToSequence by sizes known only at run time (a 1-D input of known length): a Split into
/// that many pieces, which a program computes with run-time extents, and the sequence of them;
/// `None` otherwise.
pub(super) fn split_to_sequence_expand(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<Vec<Node>>> {
    if !ctx.run_time_input(node, 1)? {
        return Ok(None);
    }
    let split = ctx.input(node, 1)?;
    let [n] = shape_of(&split)?[..] else {
        return Err(ctx.not_constant_for(
            node,
            1,
            "a split size given as a scalar decides the sequence's length",
        ));
    };
    let out = super::shaped::first_output(node)?;
    let parts: Vec<String> = (0..n.max(0)).map(|k| format!("{out}::part{k}")).collect();
    let plain = |op: &str, inputs: Vec<String>, outputs: Vec<String>, attributes| {
        super::shaped::step_node(node, op, "", inputs, outputs, attributes)
    };
    let axis = (
        "axis".to_string(),
        crate::attr::AttrValue::Int(node.attr_i("axis", 0)?),
    );
    Ok(Some(vec![
        plain(
            "Split",
            node.inputs[..2].to_vec(),
            parts.clone(),
            vec![axis],
        ),
        plain("SequenceConstruct", parts, vec![out.clone()], Vec::new()),
    ]))
}

/// ConcatFromSequence of a sequence holding values shaped at run time: each item named, then
/// one Concat (after an Unsqueeze of each item for `new_axis`), which a program computes with
/// run-time extents; `None` for a sequence of static shapes.
pub(super) fn concat_from_sequence_expand(
    ctx: &mut Ctx<'_>,
    node: &Node,
) -> CResult<Option<Vec<Node>>> {
    let seq = items(&ctx.input(node, 0)?)?;
    if !seq.iter().any(super::shaped::run_time_shaped) {
        return Ok(None);
    }
    let rank = shape_of(&seq[0])?.len();
    let new_axis = node.attr_i("new_axis", 0)? != 0;
    let axis = norm_axis(node.attr_i("axis", 0)?, rank + usize::from(new_axis))? as i64;
    let out = super::shaped::first_output(node)?;
    let plain = |op: &str, inputs: Vec<String>, output: String, attributes| {
        super::shaped::step_node(node, op, "", inputs, vec![output], attributes)
    };
    let axes = format!("{out}::axes");
    ctx.bind(&axes, const_i64(&[axis])?);
    let mut nodes = Vec::new();
    let mut names = Vec::with_capacity(seq.len());
    for (k, item) in seq.into_iter().enumerate() {
        let name = format!("{out}::item{k}");
        ctx.bind(&name, item);
        if new_axis {
            let lifted = format!("{out}::lifted{k}");
            let inputs = vec![name, axes.clone()];
            nodes.push(plain("Unsqueeze", inputs, lifted.clone(), Vec::new()));
            names.push(lifted);
        } else {
            names.push(name);
        }
    }
    let attr = vec![("axis".to_string(), crate::attr::AttrValue::Int(axis))];
    nodes.push(plain("Concat", names, out.clone(), attr));
    Ok(Some(nodes))
}

/// Registers the sequence operators.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("SequenceConstruct", construct);
    t.insert("SequenceEmpty", empty);
    t.insert("SequenceInsert", insert);
    t.insert("SequenceErase", erase);
    t.insert("SequenceAt", at);
    t.insert("SequenceLength", length);
    t.insert("ConcatFromSequence", concat_from_sequence);
    t.insert("SplitToSequence", split_to_sequence);
}
