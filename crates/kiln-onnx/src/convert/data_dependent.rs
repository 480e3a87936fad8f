//! Operators whose output shapes depend on input values: `NonZero`, `Unique`,
//! `NonMaxSuppression`, `Compress`. Their semantics live once, in `kiln_runtime::vm::data_dependent`:
//! with constant inputs the converters fold through those functions; with run-time inputs
//! [`run_time`] describes the VM builtin call that computes them (the program converter emits
//! it), whose outputs have dimensions known only at run time (-1).

use std::collections::HashMap;

use kiln_graph::ir::{Expr, Type};
use kiln_runtime::tensor::Tensor as RtTensor;
use kiln_runtime::vm::data_dependent as dd;

use super::{dtype_of, scalar, shape_of, typed, CResult, ConvertFn, Ctx, Msg};
use crate::Node;

/// A VM builtin call computing a node: the builtin, its tensor arguments, its integer
/// arguments, and the types of its outputs (-1 where known at run time).
pub(super) struct RunTime {
    /// The builtin's name (`vm.builtin.<func>`).
    pub func: &'static str,
    /// The tensor arguments.
    pub args: Vec<Expr>,
    /// The integer arguments after them.
    pub ints: Vec<i64>,
    /// The output types.
    pub outputs: Vec<Type>,
}

fn folded(t: RtTensor) -> CResult<Expr> {
    typed(Expr::constant(t))
}

/// Whether every present input of `node` among `inputs` (all when `None`) is a constant.
fn all_constant(ctx: &Ctx<'_>, node: &Node, inputs: Option<&[usize]>) -> CResult<bool> {
    for i in 0..node.inputs.len() {
        let counts = inputs.is_none_or(|s| s.contains(&i));
        if counts && ctx.run_time_input(node, i)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Compress: with a constant condition, a `take` of the selected positions (along `axis`, or
/// of the flattened input without one); with a run-time one, the VM's builtin ([`run_time`]).
fn compress(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let Some(cond) = ctx.const_input(node, 1)? else {
        return Err(ctx.not_constant(node, 1));
    };
    let xs = shape_of(&x)?;
    let (x, axis) = match node.opt_i("axis")? {
        Some(a) => (x, super::norm_axis(a, xs.len())?),
        None => (super::reshape(x, vec![xs.iter().product::<i64>()])?, 0),
    };
    let extent = shape_of(&x)?[axis] as usize;
    let keep = dd::selected_positions(&cond, extent)?;
    Ok(vec![super::call(
        "take",
        vec![x, super::const_i64(&keep)?],
        &[("axis", (axis as i64).into())],
    )?])
}

fn non_zero(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let Some(t) = ctx.const_input(node, 0)? else {
        return Err(ctx.not_constant(node, 0));
    };
    Ok(vec![folded(dd::non_zero(&t)?)?])
}

/// Unique's `axis` (None: flattened) and `sorted`.
fn unique_attrs(node: &Node) -> CResult<(Option<i64>, bool)> {
    Ok((node.opt_i("axis")?, node.attr_i("sorted", 1)? != 0))
}

fn unique(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let Some(t) = ctx.const_input(node, 0)? else {
        return Err(ctx.not_constant(node, 0));
    };
    let (axis, sorted) = unique_attrs(node)?;
    dd::unique(&t, axis, sorted)?
        .into_iter()
        .map(folded)
        .collect()
}

/// NonMaxSuppression's optional scalar inputs with their defaults: max boxes per class (0),
/// IoU threshold (0), score threshold (none).
fn nms_scalars(ctx: &Ctx<'_>, node: &Node) -> CResult<(i64, f64, Option<f64>)> {
    let one = |i: usize| -> CResult<Option<f64>> {
        match ctx.const_input(node, i)? {
            Some(t) => Ok(t.to_f64_vec()?.first().copied()),
            None => Ok(None),
        }
    };
    Ok((
        one(2)?.unwrap_or(0.0) as i64,
        one(3)?.unwrap_or(0.0),
        one(4)?,
    ))
}

fn non_max_suppression(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    for i in 0..node.inputs.len() {
        if ctx.run_time_input(node, i)? {
            return Err(ctx.not_constant(node, i));
        }
    }
    let boxes = ctx.const_input(node, 0)?.ok_or("input #0 is required")?;
    let scores = ctx.const_input(node, 1)?.ok_or("input #1 is required")?;
    let (max, iou, score) = nms_scalars(ctx, node)?;
    let center = node.attr_i("center_point_box", 0)? != 0;
    Ok(vec![folded(dd::non_max_suppression(
        &boxes, &scores, max, iou, score, center,
    )?)?])
}

/// The builtin call computing `node` at run time, when it is one of these operators and an
/// input is not constant.
pub(super) fn run_time(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<RunTime>> {
    // The inputs whose values decide the output's shape.
    let deciding: Option<&[usize]> = match node.op_type.as_str() {
        "Compress" => Some(&[1]),
        _ => None,
    };
    if !node.domain.is_empty() || all_constant(ctx, node, deciding)? {
        return Ok(None);
    }
    let i64_t = kiln_ffi::DataType::int(64);
    let call = match node.op_type.as_str() {
        "NonZero" => {
            let x = ctx.input(node, 0)?;
            let rank = shape_of(&x)?.len() as i64;
            RunTime {
                func: "non_zero",
                args: vec![x],
                ints: Vec::new(),
                outputs: vec![Type::tensor(&[rank, -1], i64_t)],
            }
        }
        "Unique" => {
            let x = ctx.input(node, 0)?;
            let (shape, dtype) = (shape_of(&x)?, dtype_of(&x)?);
            let (axis, sorted) = unique_attrs(node)?;
            let (y, len) = match axis {
                None => (vec![-1], shape.iter().product::<i64>()),
                Some(a) => {
                    let a = super::norm_axis(a, shape.len())?;
                    let mut y = shape.clone();
                    y[a] = -1;
                    (y, shape[a])
                }
            };
            RunTime {
                func: "unique",
                args: vec![x],
                ints: vec![axis.is_some() as i64, axis.unwrap_or(0), sorted as i64],
                outputs: vec![
                    Type::tensor(&y, dtype),
                    Type::tensor(&[-1], i64_t),
                    Type::tensor(&[len], i64_t),
                    Type::tensor(&[-1], i64_t),
                ],
            }
        }
        "NonMaxSuppression" => {
            let opt = |i: usize, default: f64, dtype| -> CResult<Expr> {
                match ctx.opt_input(node, i)? {
                    Some(e) => Ok(e),
                    None => scalar(default, dtype),
                }
            };
            let f32_t = kiln_ffi::DataType::float(32);
            RunTime {
                func: "non_max_suppression",
                args: vec![
                    ctx.input(node, 0)?,
                    ctx.input(node, 1)?,
                    opt(2, 0.0, i64_t)?,
                    opt(3, 0.0, f32_t)?,
                    opt(4, 0.0, f32_t)?,
                ],
                ints: vec![
                    node.input(4).is_some() as i64,
                    node.attr_i("center_point_box", 0)?,
                ],
                outputs: vec![Type::tensor(&[-1, 3], i64_t)],
            }
        }
        "Compress" => {
            let x = ctx.input(node, 0)?;
            let (shape, dtype) = (shape_of(&x)?, dtype_of(&x)?);
            let axis = node.opt_i("axis")?;
            let out = match axis {
                None => vec![-1],
                Some(a) => {
                    let a = super::norm_axis(a, shape.len())?;
                    let mut s = shape.clone();
                    s[a] = -1;
                    s
                }
            };
            RunTime {
                func: "compress",
                args: vec![x, ctx.input(node, 1)?],
                ints: vec![axis.is_some() as i64, axis.unwrap_or(0)],
                outputs: vec![Type::tensor(&out, dtype)],
            }
        }
        _ => return Ok(None),
    };
    if node.outputs.len() > call.outputs.len() {
        return Err(Msg(format!(
            "the node declares {} outputs, {} has {}",
            node.outputs.len(),
            node.op_type,
            call.outputs.len()
        )));
    }
    Ok(Some(call))
}

/// Registers NonZero, Unique, NonMaxSuppression and Compress.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("NonZero", non_zero);
    t.insert("Unique", unique);
    t.insert("NonMaxSuppression", non_max_suppression);
    t.insert("Compress", compress);
}
