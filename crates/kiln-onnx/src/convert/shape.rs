//! Data-movement and shape converters: Reshape, Transpose, Flatten, Squeeze/Unsqueeze (axes by
//! attribute before opset 13, by input from it on), Concat, Split, Slice, Pad, Gather, Expand,
//! Tile, DepthToSpace/SpaceToDepth, and the shape computations folded at compile time: Shape, Size,
//! ConstantOfShape, Range. Their forms for shape inputs known only at run time are in
//! [`super::shape_run_time`].

use std::collections::HashMap;

use kiln_graph::ir::Expr;
use kiln_graph::op::broadcast_shapes;

use super::{
    call, const_i64, constant, dtype_of, graph_dtype, norm_axis, scalar, shape_of, CResult,
    ConvertFn, Ctx, Msg,
};
use crate::Node;

fn reshape(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let target = if ctx.opset < 5 {
        node.attr_ints("shape", &[])?
    } else {
        ctx.const_ints(node, 1)?
            .ok_or_else(|| Msg::from("the shape input is required"))?
    };
    let allowzero = node.attr_i("allowzero", 0)? != 0;
    // Resolve 0 (copy) here so the graph's reshape gets an explicit shape; with allowzero a 0
    // is an empty axis, which the graph's reshape keeps under its own `allowzero`.
    let newshape: Vec<i64> = target
        .iter()
        .enumerate()
        .map(|(i, &d)| match d {
            0 if !allowzero => xs
                .get(i)
                .copied()
                .ok_or_else(|| Msg(format!("shape {target:?}: 0 at {i} has no input extent"))),
            d => Ok(d),
        })
        .collect::<CResult<_>>()?;
    Ok(vec![call(
        "reshape",
        vec![x],
        &[
            ("newshape", newshape.into()),
            ("allowzero", allowzero.into()),
        ],
    )?])
}

fn transpose(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let n = shape_of(&x)?.len() as i64;
    let perm = node.attr_ints("perm", &(0..n).rev().collect::<Vec<_>>())?;
    Ok(vec![call("transpose", vec![x], &[("axes", perm.into())])?])
}

fn flatten(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let axis = node.attr_i("axis", 1)?;
    Ok(vec![call("flatten", vec![x], &[("axis", axis.into())])?])
}

fn squeeze(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let axes = ctx.axes(node, "axes", 13, 1)?;
    let attrs: Vec<(&str, _)> = match axes {
        Some(a) => vec![("axis", a.into())],
        None => vec![],
    };
    Ok(vec![call("squeeze", vec![x], &attrs)?])
}

fn unsqueeze(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let axes = ctx
        .axes(node, "axes", 13, 1)?
        .ok_or_else(|| Msg::from("axes are required"))?;
    let rank = xs.len() + axes.len();
    let mut norm: Vec<usize> = axes
        .iter()
        .map(|&a| norm_axis(a, rank))
        .collect::<CResult<_>>()?;
    norm.sort();
    let mut out = Vec::with_capacity(rank);
    let mut src = xs.iter();
    for i in 0..rank {
        if norm.contains(&i) {
            out.push(1);
        } else {
            out.push(
                *src.next()
                    .ok_or_else(|| Msg(format!("bad axes {axes:?}")))?,
            );
        }
    }
    Ok(vec![call("reshape", vec![x], &[("newshape", out.into())])?])
}

fn concat(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let args = (0..node.inputs.len())
        .filter(|&i| node.input(i).is_some())
        .map(|i| ctx.input(node, i))
        .collect::<CResult<Vec<_>>>()?;
    // Before opset 4 the axis may be left out, meaning 1.
    let axis = node.attr_i("axis", if ctx.opset < 4 { 1 } else { 0 })?;
    Ok(vec![call("concatenate", args, &[("axis", axis.into())])?])
}

fn split(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let axis = norm_axis(node.attr_i("axis", 0)?, xs.len())?;
    let parts = if ctx.opset < 13 {
        node.opt_ints("split")?
    } else {
        ctx.const_ints(node, 1)?
    };
    let n_out = node.outputs.len() as i64;
    let attr = match parts {
        Some(p) => {
            let mut acc = 0;
            let mut idx = Vec::new();
            for s in &p[..p.len().saturating_sub(1)] {
                acc += s;
                idx.push(acc);
            }
            ("indices", idx.into())
        }
        None => {
            let n = xs[axis];
            if n % n_out == 0 {
                ("sections", n_out.into())
            } else {
                // Opset 18 num_outputs with an uneven split: ceil-sized pieces, last smaller.
                let chunk = (n + n_out - 1) / n_out;
                (
                    "indices",
                    (1..n_out).map(|i| i * chunk).collect::<Vec<_>>().into(),
                )
            }
        }
    };
    if x.as_constant().is_some() {
        // A constant (a shape being computed): one slice per piece, each folded to a
        // constant, so that values computed from the pieces stay compile-time constants.
        let n = xs[axis];
        let bounds: Vec<i64> = match &attr.1 {
            kiln_graph::ir::AttrValue::Ints(idx) => idx.clone(),
            _ => (1..n_out).map(|i| i * (n / n_out)).collect(),
        };
        let mut starts = vec![0];
        starts.extend(bounds.iter().copied());
        let mut ends = bounds;
        ends.push(n);
        return starts
            .iter()
            .zip(&ends)
            .map(|(&b, &e)| super::conv::slice_axis(x.clone(), axis as i64, b, e - b, 1))
            .collect();
    }
    let s = call("split", vec![x], &[attr, ("axis", (axis as i64).into())])?;
    Ok((0..node.outputs.len())
        .map(|i| Expr::get_item(s.clone(), i))
        .collect())
}

fn slice(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let (starts, ends, axes, steps) = if ctx.opset < 10 {
        (
            node.attr_ints("starts", &[])?,
            node.attr_ints("ends", &[])?,
            node.opt_ints("axes")?,
            None,
        )
    } else {
        let req = |i| {
            ctx.const_ints(node, i)?
                .ok_or_else(|| Msg(format!("input #{i} is required")))
        };
        (
            req(1)?,
            req(2)?,
            ctx.const_ints(node, 3)?,
            ctx.const_ints(node, 4)?,
        )
    };
    let axes: Vec<i64> = match axes {
        Some(a) => a
            .iter()
            .map(|&a| norm_axis(a, xs.len()).map(|a| a as i64))
            .collect::<CResult<_>>()?,
        None => (0..starts.len() as i64).collect(),
    };
    let steps = steps.unwrap_or_else(|| vec![1; axes.len()]);
    // Clamp the INT64_MAX / INT64_MIN sentinels to the extents (same meaning, small numbers).
    let clamp = |v: &[i64]| -> Vec<i64> {
        v.iter()
            .zip(&axes)
            .map(|(&x, &a)| {
                let n = xs[a as usize];
                x.clamp(-n - 1, n)
            })
            .collect()
    };
    Ok(vec![call(
        "strided_slice",
        vec![x],
        &[
            ("begin", clamp(&starts).into()),
            ("end", clamp(&ends).into()),
            ("strides", steps.into()),
            ("axes", axes.into()),
        ],
    )?])
}

fn pad(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let rank = shape_of(&x)?.len();
    let (pads, value) = if ctx.opset < 11 {
        // Opset 1 names the attribute `paddings`.
        let pads = match node.attr_ints("pads", &[])? {
            p if p.is_empty() && ctx.opset < 2 => node.attr_ints("paddings", &[])?,
            p => p,
        };
        (pads, node.attr_f("value", 0.0)? as f64)
    } else {
        let p = ctx
            .const_ints(node, 1)?
            .ok_or_else(|| Msg::from("the pads input is required"))?;
        let v = ctx
            .const_floats(node, 2)?
            .and_then(|v| v.first().copied())
            .unwrap_or(0.0);
        (p, v)
    };
    let axes: Vec<usize> = match ctx.const_ints(node, 3)? {
        Some(a) => a
            .iter()
            .map(|&a| norm_axis(a, rank))
            .collect::<CResult<_>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(Msg(format!(
            "pads {pads:?} must have 2 values per padded axis ({} axes)",
            axes.len()
        )));
    }
    let mut width = vec![0i64; 2 * rank];
    for (k, &a) in axes.iter().enumerate() {
        width[2 * a] = pads[k];
        width[2 * a + 1] = pads[axes.len() + k];
    }
    let mode = node.attr_s("mode", "constant")?;
    Ok(vec![call(
        "nn.pad",
        vec![x],
        &[
            ("pad_width", width.into()),
            ("pad_value", value.into()),
            ("pad_mode", mode.as_str().into()),
        ],
    )?])
}

fn gather(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let axis = norm_axis(node.attr_i("axis", 0)?, xs.len())?;
    let n = xs[axis];
    let (ix, mode) = match ctx.const_input(node, 1)? {
        Some(t) => {
            // Constant indices: normalize negatives so the fast/clip modes are exact.
            let v: Vec<f64> = t
                .to_f64_vec()?
                .into_iter()
                .map(|i| if i < 0.0 { i + n as f64 } else { i })
                .collect();
            (constant(&v, t.shape(), t.dtype())?, "clip")
        }
        None => (ctx.input(node, 1)?, "wrap"),
    };
    Ok(vec![call(
        "take",
        vec![x, ix],
        &[("axis", (axis as i64).into()), ("mode", mode.into())],
    )?])
}

fn expand(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let target = ctx
        .const_ints(node, 1)?
        .ok_or_else(|| Msg::from("the shape input is required"))?;
    let out = broadcast_shapes(&shape_of(&x)?, &target)?;
    Ok(vec![call(
        "broadcast_to",
        vec![x],
        &[("shape", out.into())],
    )?])
}

/// The dimensions of `xs` that Shape (with its `start` and `end`) gives, as a range.
pub(super) fn shape_range(node: &Node, xs: &[i64]) -> CResult<std::ops::Range<usize>> {
    let r = xs.len() as i64;
    let norm = |v: i64| if v < 0 { (v + r).max(0) } else { v.min(r) } as usize;
    let start = norm(node.attr_i("start", 0)?);
    let end = norm(node.attr_i("end", r)?);
    Ok(start..end.max(start))
}

fn shape(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let xs = shape_of(&ctx.input(node, 0)?)?;
    Ok(vec![const_i64(&xs[shape_range(node, &xs)?])?])
}

fn size(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let xs = shape_of(&ctx.input(node, 0)?)?;
    if xs.contains(&-1) {
        return Err(Msg(format!(
            "the input's shape {xs:?} is known only at run time"
        )));
    }
    let n: i64 = xs.iter().product();
    Ok(vec![constant(
        &[n as f64],
        &[],
        kiln_ffi::DataType::int(64),
    )?])
}

fn constant_of_shape(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let s = ctx
        .const_ints(node, 0)?
        .ok_or_else(|| Msg::from("the shape input is required"))?;
    let (v, d) = match node.opt_tensor("value")? {
        Some(t) => (
            t.to_f64_vec().first().copied().unwrap_or(0.0),
            graph_dtype(t.dtype()),
        ),
        None => (0.0, kiln_ffi::DataType::float(32)),
    };
    if s.iter().any(|&x| x < 0) {
        return Err(Msg(format!(
            "input #0 (the shape) {s:?} has a negative extent"
        )));
    }
    let n = s
        .iter()
        .try_fold(1usize, |acc, &x| acc.checked_mul(x as usize))
        .unwrap_or(usize::MAX);
    if n <= super::fold::FOLD_LIMIT {
        return Ok(vec![constant(&vec![v; n], &s, d)?]);
    }
    // A large fill stays a broadcast, computed at run time (its size is checked when typed).
    Ok(vec![call(
        "broadcast_to",
        vec![super::scalar(v, d)?],
        &[("shape", s.into())],
    )?])
}

fn range(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let get = |i: usize| -> CResult<f64> {
        ctx.const_floats(node, i)?
            .and_then(|v| v.first().copied())
            .ok_or_else(|| Msg(format!("input #{i} must be a constant scalar")))
    };
    let (start, limit, delta) = (get(0)?, get(1)?, get(2)?);
    if delta == 0.0 {
        return Err("delta is 0".into());
    }
    let n = ((limit - start) / delta).ceil().max(0.0);
    // The values are materialized at compile time: a bounded count.
    const MAX_RANGE: f64 = (1u64 << 28) as f64;
    if !n.is_finite() || n > MAX_RANGE {
        return Err(Msg(format!(
            "Range({start}, {limit}, {delta}) has {n} elements, more than Kiln materializes \
             at compile time ({MAX_RANGE})"
        )));
    }
    let n = n as usize;
    let v: Vec<f64> = (0..n).map(|i| start + i as f64 * delta).collect();
    let d = dtype_of(&ctx.input(node, 0)?)?;
    Ok(vec![constant(&v, &[n as i64], d)?])
}

/// Tile as broadcast: `[d0, d1..]` viewed as `[1, d0, 1, d1..]`, broadcast to
/// `[r0, d0, r1, d1..]`, then merged to `[r0 * d0, r1 * d1..]`.
fn tile(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let reps = ctx
        .const_ints(node, 1)?
        .ok_or_else(|| Msg::from("the repeats input is required"))?;
    if reps.len() != xs.len() {
        return Err(Msg(format!(
            "repeats {reps:?} must have rank {} values",
            xs.len()
        )));
    }
    let view: Vec<i64> = xs.iter().flat_map(|&d| [1, d]).collect();
    let wide: Vec<i64> = xs.iter().zip(&reps).flat_map(|(&d, &r)| [r, d]).collect();
    let out = xs
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| d.checked_mul(r).filter(|_| r >= 0))
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| {
            Msg(format!(
                "repeats {reps:?} of input {xs:?} are negative or too large"
            ))
        })?;
    let v = call("reshape", vec![x], &[("newshape", view.into())])?;
    let b = call("broadcast_to", vec![v], &[("shape", wide.into())])?;
    Ok(vec![call("reshape", vec![b], &[("newshape", out.into())])?])
}

/// DepthToSpace (`nn.depth_to_space`, DCR and CRD modes) and SpaceToDepth (reshape-transpose-
/// reshape).
fn depth_space(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let s = shape_of(&x)?;
    if s.len() != 4 {
        return Err(Msg(format!("expects a 4-D input, got {s:?}")));
    }
    let b = node.attr_i("blocksize", 0)?;
    if b < 1 {
        return Err("attribute blocksize must be >= 1".into());
    }
    let (n, c, h, w) = (s[0], s[1], s[2], s[3]);
    if node.op_type == "DepthToSpace" {
        let mode = node.attr_s("mode", "DCR")?;
        if c % (b * b) != 0 || (mode != "DCR" && mode != "CRD") {
            return Err(Msg(format!(
                "{c} channels, blocksize {b} and mode {mode:?}: needs channels divisible by \
                 blocksize squared and mode DCR or CRD"
            )));
        }
        return Ok(vec![call(
            "nn.depth_to_space",
            vec![x],
            &[("block_size", b.into()), ("mode", mode.as_str().into())],
        )?]);
    }
    let view = vec![n, c, h / b, b, w / b, b];
    let v = call("reshape", vec![x], &[("newshape", view.into())])?;
    let perm = vec![0i64, 3, 5, 1, 2, 4];
    let t = call("transpose", vec![v], &[("axes", perm.into())])?;
    let out = vec![n, c * b * b, h / b, w / b];
    Ok(vec![call("reshape", vec![t], &[("newshape", out.into())])?])
}

/// GatherElements.
fn gather_elements(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let (x, ix) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let axis = node.attr_i("axis", 0)?;
    Ok(vec![call(
        "gather_elements",
        vec![x, ix],
        &[("axis", axis.into())],
    )?])
}

/// Trilu: `k` from its optional second input (a compile-time constant).
fn trilu(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let upper = node.attr_i("upper", 1)? != 0;
    let k = match node.input(1) {
        None => 0,
        Some(_) => match ctx.const_input(node, 1)? {
            Some(t) => t
                .to_f64_vec()?
                .first()
                .map(|&v| v as i64)
                .ok_or_else(|| Msg::from("input #1 ('k') is empty"))?,
            // k known at run time (the output's shape does not depend on it): the triangle
            // as a mask, `col - row` of each element compared with k, elementwise.
            None => return Ok(vec![trilu_run_time_k(ctx.input(node, 1)?, x, upper)?]),
        },
    };
    Ok(vec![call(
        "trilu",
        vec![x],
        &[("upper", upper.into()), ("k", k.into())],
    )?])
}

/// Trilu of `x` with `k` a run-time scalar: `where(col - row >= k, x, 0)` (upper) or `<= k`
/// (lower) over the last two axes.
fn trilu_run_time_k(k: Expr, x: Expr, upper: bool) -> CResult<Expr> {
    let xs = shape_of(&x)?;
    if xs.len() < 2 {
        return Err(Msg(format!("input #0 must have rank >= 2, got {xs:?}")));
    }
    if shape_of(&k)?.iter().product::<i64>() != 1 {
        return Err(Msg(format!(
            "input #1 ('k') must hold one value, it has shape {:?}",
            shape_of(&k)?
        )));
    }
    let (rows, cols) = (xs[xs.len() - 2], xs[xs.len() - 1]);
    let diff: Vec<i64> = (0..rows)
        .flat_map(|i| (0..cols).map(move |j| j - i))
        .collect();
    let diff = super::reshape(const_i64(&diff)?, vec![rows, cols])?;
    let k = super::reshape(k, Vec::<i64>::new())?;
    let keep = call(
        if upper { "greater_equal" } else { "less_equal" },
        vec![diff, k],
        &[],
    )?;
    let zero = scalar(0.0, dtype_of(&x)?)?;
    call("where", vec![keep, x, zero], &[])
}

/// Registers this file's converters.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("Reshape", reshape);
    t.insert("Transpose", transpose);
    t.insert("Flatten", flatten);
    t.insert("Squeeze", squeeze);
    t.insert("Unsqueeze", unsqueeze);
    t.insert("Concat", concat);
    t.insert("Split", split);
    t.insert("Slice", slice);
    t.insert("Pad", pad);
    t.insert("Gather", gather);
    t.insert("Expand", expand);
    t.insert("Shape", shape);
    t.insert("Size", size);
    t.insert("ConstantOfShape", constant_of_shape);
    t.insert("Range", range);
    t.insert("Tile", tile);
    t.insert("DepthToSpace", depth_space);
    t.insert("SpaceToDepth", depth_space);
    t.insert("Trilu", trilu);
    t.insert("GatherElements", gather_elements);
}
