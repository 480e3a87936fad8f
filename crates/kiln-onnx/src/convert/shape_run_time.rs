//! Shape operators whose shape inputs (or data) are known only at run time: views (Reshape,
//! Squeeze, Unsqueeze by a run-time shape or axes), kernels with run-time extents
//! (ConstantOfShape, Range, Slice, Split, Tile, Expand, Pad) and Shape of a value shaped at run
//! time; each a [`ShapedKernel`] whose shapes a VM builtin or a shape program computes.

use kiln_graph::ir::{Expr, Type, Var};
use kiln_runtime::vm::shape_expr::op;

use super::shape::shape_range;
use super::shaped::{kernel, Result_, ShapedKernel, Shapes, Source};
use super::{call, const_i64, dtype_of, graph_dtype, norm_axis, shape_of, CResult, Ctx, Msg};
use crate::Node;

/// The length of the 1-D input `i` of `node`, known at compile time.
fn length(ctx: &Ctx<'_>, node: &Node, i: usize) -> CResult<usize> {
    super::shaped::length(&ctx.input(node, i)?, &format!("input #{i}"))
}

/// A shape operator with a run-time shape input (Reshape, Squeeze, Unsqueeze: views;
/// ConstantOfShape, Range, Slice: kernels with run-time extents), when one is.
pub(super) fn run_time_shaped(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    let run_time = |i: usize| ctx.run_time_input(node, i);
    match node.op_type.as_str() {
        "ConstantOfShape" if run_time(0)? => {
            let (value, dtype) = match node.opt_tensor("value")? {
                Some(t) => (
                    t.to_f64_vec().first().copied().unwrap_or(0.0),
                    graph_dtype(t.dtype()),
                ),
                None => (0.0, kiln_ffi::DataType::float(32)),
            };
            let rank = length(ctx, node, 0)?;
            let body = call(
                "dyn.full",
                Vec::new(),
                &[
                    ("rank", (rank as i64).into()),
                    ("value", value.into()),
                    ("dtype", dtype.to_string().as_str().into()),
                ],
            )?;
            Ok(Some(kernel(
                Shapes::Given,
                vec![ctx.input(node, 0)?],
                Vec::new(),
                body,
                &[(0, None)],
            )?))
        }
        "Range" if run_time(0)? || run_time(1)? || run_time(2)? => {
            let (start, limit, delta) = (
                ctx.input(node, 0)?,
                ctx.input(node, 1)?,
                ctx.input(node, 2)?,
            );
            let (ps, pd) = (
                Var::new("start", start.ty()?),
                Var::new("delta", delta.ty()?),
            );
            let body = call("dyn.range", vec![ps.expr(), pd.expr()], &[])?;
            let k = kernel(
                Shapes::function("range_shape", vec![1]),
                vec![start.clone(), limit, delta.clone()],
                vec![(start, ps), (delta, pd)],
                body,
                &[(0, None)],
            )?;
            Ok(Some(k))
        }
        "Slice"
            if ctx.opset >= 10
                && (super::shaped::run_time_shaped(&ctx.input(node, 0)?)
                    || (1..5)
                        .map(run_time)
                        .collect::<CResult<Vec<_>>>()?
                        .contains(&true)) =>
        {
            let x = ctx.input(node, 0)?;
            let rank = shape_of(&x)?.len();
            let n = length(ctx, node, 1)?;
            let axes = match ctx.opt_input(node, 3)? {
                Some(a) => a,
                None => const_i64(&(0..n as i64).collect::<Vec<_>>())?,
            };
            let steps = match ctx.opt_input(node, 4)? {
                Some(s) => s,
                None => const_i64(&vec![1; n])?,
            };
            let i64_t = kiln_ffi::DataType::int(64);
            let px = Var::new("data", x.ty()?);
            let pb = Var::new("begin", Type::tensor(&[rank as i64], i64_t));
            let pt = Var::new("step", Type::tensor(&[rank as i64], i64_t));
            let body = call(
                "dyn.strided_slice",
                vec![px.expr(), pb.expr(), pt.expr()],
                &[],
            )?;
            // The shape function's begin and step are the kernel's inputs too: registers
            // written by the call, read through variables of these types.
            let mut k = kernel(
                Shapes::function("slice_shape", vec![rank, rank, rank]),
                vec![
                    x.clone(),
                    ctx.input(node, 1)?,
                    ctx.input(node, 2)?,
                    axes,
                    steps,
                ],
                vec![(x, px)],
                body,
                &[(0, None)],
            )?;
            k.shape_inputs = vec![(1, pb), (2, pt)];
            Ok(Some(k))
        }
        "Expand"
            if ctx.opset >= 8
                && (run_time(1)? || super::shaped::run_time_shaped(&ctx.input(node, 0)?)) =>
        {
            let x = ctx.input(node, 0)?;
            let rx = shape_of(&x)?.len();
            let l = length(ctx, node, 1)?;
            let r = rx.max(l);
            let px = Var::new("data", x.ty()?);
            let body = call(
                "dyn.broadcast_to",
                vec![px.expr()],
                &[("rank", (r as i64).into())],
            )?;
            Ok(Some(kernel(
                Shapes::Program {
                    code: expand_program(rx, l),
                    rank: r,
                },
                vec![x.clone(), ctx.input(node, 1)?],
                vec![(x, px)],
                body,
                &[(0, None)],
            )?))
        }
        "Tile" if run_time(1)? => {
            let x = ctx.input(node, 0)?;
            let px = Var::new("data", x.ty()?);
            let body = call("dyn.tile", vec![px.expr()], &[])?;
            let rank = shape_of(&x)?.len();
            let args = vec![x.clone(), ctx.input(node, 1)?];
            Ok(Some(kernel(
                Shapes::function("tile_shape", vec![rank]),
                args,
                vec![(x, px)],
                body,
                &[(0, None)],
            )?))
        }
        // (Sizes as an input before opset 13: SplitToSequence's run-time form.)
        "Split" if run_time(1)? || super::shaped::run_time_shaped(&ctx.input(node, 0)?) => {
            // One kernel, a slice per piece: begin and step of each from the shape function.
            let x = ctx.input(node, 0)?;
            let xs = shape_of(&x)?;
            let rank = xs.len();
            let axis = norm_axis(node.attr_i("axis", 0)?, rank)?;
            let pieces = node.outputs.len();
            // The sizes: a run-time input, or known at compile time (given, or equal pieces of
            // an axis whose extent is known).
            let sizes = if run_time(1)? {
                None
            } else {
                let given = if ctx.opset < 13 {
                    node.opt_ints("split")?
                } else {
                    ctx.const_ints(node, 1)?
                };
                match given {
                    Some(v) => Some(v),
                    None if xs[axis] >= 0 => {
                        let (n, k) = (xs[axis], pieces as i64);
                        let chunk = (n + k - 1) / k;
                        Some((0..k).map(|i| chunk.min(n - i * chunk).max(0)).collect())
                    }
                    None => return Ok(None),
                }
            };
            let split = match &sizes {
                Some(v) => super::const_i64(v)?,
                None => ctx.input(node, 1)?,
            };
            if length_of(&split)? != pieces {
                return Err(Msg(format!(
                    "input #1 (split) holds {} sizes for {pieces} outputs",
                    length_of(&split)?
                )));
            }
            let i64_t = kiln_ffi::DataType::int(64);
            let px = Var::new("data", x.ty()?);
            let mut shape_inputs = Vec::new();
            let mut slices = Vec::new();
            for k in 0..pieces {
                let pb = Var::new(&format!("begin{k}"), Type::tensor(&[rank as i64], i64_t));
                let pt = Var::new(&format!("step{k}"), Type::tensor(&[rank as i64], i64_t));
                slices.push(call(
                    "dyn.strided_slice",
                    vec![px.expr(), pb.expr(), pt.expr()],
                    &[],
                )?);
                shape_inputs.push((3 * k + 1, pb));
                shape_inputs.push((3 * k + 2, pt));
            }
            let body = if pieces == 1 {
                slices.remove(0)
            } else {
                super::typed(Expr::tuple(slices))?
            };
            let results: Vec<(usize, Option<usize>)> = (0..pieces).map(|k| (3 * k, None)).collect();
            let mut k = kernel(
                Shapes::Function {
                    name: "split_shapes",
                    ints: vec![axis as i64],
                    ranks: vec![rank; 3 * pieces],
                },
                vec![x.clone(), split],
                vec![(x, px)],
                body,
                &results,
            )?;
            // Each piece: the data's extents, its size along the axis (-1 where not known).
            let dtype = dtype_of(&k.kernel.as_ref().expect("a kernel").inputs[0])?;
            for (j, r) in k.results.iter_mut().enumerate() {
                let mut dims = xs.clone();
                dims[axis] = sizes.as_ref().map_or(-1, |v| v[j]);
                r.ty = Type::tensor(&dims, dtype);
            }
            k.shape_inputs = shape_inputs;
            Ok(Some(k))
        }
        "Reshape" | "Squeeze" | "Unsqueeze" => run_time_view(ctx, node),
        _ => Ok(None),
    }
}

/// The length of `e`, a 1-D tensor of known length.
fn length_of(e: &Expr) -> CResult<usize> {
    super::shaped::length(e, "input #1 (split)")
}

/// The shape program of Expand (`kiln_runtime::vm::shape_expr`) over its data (rank `rx`) and
/// shape (length `l`): each result dimension is the shape's value where the data's is 1, else
/// the data's, which the value must be 1 or equal to (checked).
fn expand_program(rx: usize, l: usize) -> Vec<i64> {
    let r = rx.max(l);
    let mut code = Vec::new();
    for j in 0..r {
        let x: Vec<i64> = match (j + rx).checked_sub(r) {
            Some(k) => vec![op::DIM, 0, k as i64],
            None => vec![op::PUSH, 1],
        };
        let v: Vec<i64> = match (j + l).checked_sub(r) {
            Some(k) => vec![op::VALUE, 1, k as i64],
            None => vec![op::PUSH, 1],
        };
        let one = [op::PUSH, 1];
        // Check: v == 1 or v == x or x == 1.
        let (eq, or) = ([op::EQ], [op::EQ, op::MAX]);
        for part in [&v[..], &one, &eq, &v, &x, &or, &x, &one, &or, &[op::CHECK]] {
            code.extend_from_slice(part);
        }
        // select(x == 1, v, x).
        for part in [&x[..], &one, &eq, &v, &x, &[op::SELECT, op::EMIT]] {
            code.extend_from_slice(part);
        }
    }
    code
}

/// Reshape, Squeeze or Unsqueeze whose shape or axes input is known only at run time: a view
/// of the input (no copy) under the shape `vm.builtin.reshape_shape` / `squeeze_shape` /
/// `unsqueeze_shape` computes from it; the result's rank is the length of that input (Reshape),
/// the input's rank less it (Squeeze, which then needs at least one axis) or more (Unsqueeze).
fn run_time_view(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    let since = if node.op_type == "Reshape" { 5 } else { 13 };
    let data_run_time = super::shaped::run_time_shaped(&ctx.input(node, 0)?);
    let no_axes = node.input(1).is_none() && (ctx.opset >= 13 || node.opt_ints("axes")?.is_none());
    if node.op_type == "Squeeze" && data_run_time && no_axes {
        return squeeze_known_ones(ctx, node).map(Some);
    }
    if ctx.opset < since
        || node.input(1).is_none()
        || (ctx.const_input(node, 1)?.is_some() && !data_run_time)
    {
        return Ok(None);
    }
    let x = ctx.input(node, 0)?;
    let arg = ctx.input(node, 1)?;
    let rank = shape_of(&x)?.len();
    // A scalar axis (onnxruntime takes one) counts as one.
    let n = match shape_of(&arg)?.as_slice() {
        [] => 1,
        _ => super::shaped::length(&arg, "input #1")?,
    };
    let (func, ints, out_rank) = match node.op_type.as_str() {
        "Reshape" => ("reshape_shape", vec![node.attr_i("allowzero", 0)?], n),
        "Squeeze" if n == 0 => {
            return Err(Msg(
                "the axes input is empty at compile time: the result's rank would depend on \
                 the data"
                    .into(),
            ))
        }
        "Squeeze" => ("squeeze_shape", Vec::new(), rank.saturating_sub(n)),
        _ => ("unsqueeze_shape", Vec::new(), rank + n),
    };
    let dtype = dtype_of(&x)?;
    let known = match ctx.const_input(node, 1)? {
        Some(arg) => {
            let arg: Vec<i64> = arg.to_f64_vec()?.into_iter().map(|v| v as i64).collect();
            view_dims(
                &node.op_type,
                &shape_of(&x)?,
                &arg,
                ints.first() == Some(&1),
            )
        }
        None => vec![-1; out_rank],
    };
    Ok(Some(ShapedKernel {
        shapes: Shapes::Function {
            name: func,
            ints,
            ranks: vec![out_rank],
        },
        shape_args: vec![x.clone(), arg],
        shape_inputs: Vec::new(),
        kernel: None,
        results: vec![Result_ {
            source: Source::Value(x),
            view: Some(0),
            ty: Type::tensor(&known, dtype),
        }],
    }))
}

/// Squeeze without axes of a value shaped at run time: the dimensions known to be 1 go; one
/// known only at run time stays, and must not come out 1 (the result's rank would depend on
/// it), which the view's shape program checks.
fn squeeze_known_ones(ctx: &Ctx<'_>, node: &Node) -> CResult<ShapedKernel> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let mut code = Vec::new();
    let mut dims = Vec::new();
    for (j, &d) in xs.iter().enumerate() {
        if d == 1 {
            continue;
        }
        if d < 0 {
            code.extend([
                op::DIM,
                0,
                j as i64,
                op::PUSH,
                1,
                op::EQ,
                op::PUSH,
                0,
                op::EQ,
            ]);
            code.push(op::CHECK);
        }
        code.extend([op::DIM, 0, j as i64, op::EMIT]);
        dims.push(d);
    }
    Ok(ShapedKernel {
        shapes: Shapes::Program {
            code,
            rank: dims.len(),
        },
        shape_args: vec![x.clone()],
        shape_inputs: Vec::new(),
        kernel: None,
        results: vec![Result_ {
            source: Source::Value(x.clone()),
            view: Some(0),
            ty: Type::tensor(&dims, dtype_of(&x)?),
        }],
    })
}

/// The dimensions of a view of `x` (dimensions -1 where known at run time) known at compile
/// time from a constant shape or axes `arg` (-1 where the run-time shape function decides;
/// that function checks the input against `arg`): Reshape's positive entries and the copies
/// of its zeros (without `allowzero`), Squeeze's kept dimensions, Unsqueeze's new ones and
/// the input's.
fn view_dims(op: &str, x: &[i64], arg: &[i64], allowzero: bool) -> Vec<i64> {
    let rank = x.len() as i64;
    match op {
        "Reshape" => arg
            .iter()
            .enumerate()
            .map(|(j, &d)| match d {
                0 if !allowzero => x.get(j).copied().unwrap_or(-1),
                d if d >= 0 => d,
                _ => -1,
            })
            .collect(),
        "Squeeze" => {
            let axes: Vec<i64> = arg
                .iter()
                .map(|&a| if a < 0 { a + rank } else { a })
                .collect();
            (0..rank)
                .filter(|j| !axes.contains(j))
                .map(|j| x[j as usize])
                .collect()
        }
        _ => {
            let out = rank + arg.len() as i64;
            let axes: Vec<i64> = arg
                .iter()
                .map(|&a| if a < 0 { a + out } else { a })
                .collect();
            let mut rest = x.iter();
            (0..out)
                .map(|j| {
                    if axes.contains(&j) {
                        1
                    } else {
                        rest.next().copied().unwrap_or(-1)
                    }
                })
                .collect()
        }
    }
}

/// Pad whose pads (or constant value) are known only at run time, or of a value shaped at run
/// time: a kernel of run-time extents along the padded axes (a shape program adds the pads'
/// values to the input's dimensions); the axes must be constant.
pub(super) fn pad_run_time(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    if ctx.opset < 11 || node.input(1).is_none() {
        return Ok(None);
    }
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let run_time = |i: usize| ctx.run_time_input(node, i);
    if !(run_time(1)? || run_time(2)? || xs.contains(&-1)) {
        return Ok(None);
    }
    if run_time(3)? {
        return pad_run_time_axes(ctx, node).map(Some);
    }
    let axes: Vec<usize> = match ctx.const_ints(node, 3)? {
        Some(a) => a
            .iter()
            .map(|&a| norm_axis(a, xs.len()))
            .collect::<CResult<_>>()?,
        None => (0..xs.len()).collect(),
    };
    if let Some(a) = axes
        .iter()
        .enumerate()
        .find_map(|(k, a)| axes[..k].contains(a).then_some(a))
    {
        return Err(Msg(format!("input #3 (axes) names axis {a} twice")));
    }
    let pads = ctx.input(node, 1)?;
    if length(ctx, node, 1)? != 2 * axes.len() {
        return Err(Msg(format!(
            "input #1 (pads) must hold 2 values per padded axis ({} axes)",
            axes.len()
        )));
    }
    let dtype = dtype_of(&x)?;
    // A constant value stays in the kernel (a scalar); a run-time one is its input.
    let (value, run_time_value) = match ctx.const_input(node, 2)? {
        Some(t) => (
            super::scalar(t.to_f64_vec()?.first().copied().unwrap_or(0.0), dtype)?,
            None,
        ),
        None => match ctx.opt_input(node, 2)? {
            Some(v) => {
                let pv = Var::new("value", v.ty()?);
                (pv.expr(), Some((v, pv)))
            }
            None => (super::scalar(0.0, dtype)?, None),
        },
    };
    // Each padded dimension: the input's plus the widths before and after.
    let na = axes.len() as i64;
    let mut code = Vec::new();
    for j in 0..xs.len() {
        code.extend([op::DIM, 0, j as i64]);
        if let Some(k) = axes.iter().position(|&a| a == j) {
            let (before, after) = (k as i64, k as i64 + na);
            code.extend([op::VALUE, 1, before, op::ADD, op::VALUE, 1, after, op::ADD]);
        }
        code.push(op::EMIT);
    }
    let (px, pp) = (Var::new("data", x.ty()?), Var::new("pads", pads.ty()?));
    let axes_attr: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
    let mode = node.attr_s("mode", "constant")?;
    let body = call(
        "dyn.pad",
        vec![px.expr(), pp.expr(), value],
        &[("axes", axes_attr.into()), ("mode", mode.as_str().into())],
    )?;
    let mut inputs = vec![(x.clone(), px), (pads.clone(), pp)];
    inputs.extend(run_time_value);
    Ok(Some(kernel(
        Shapes::Program {
            code,
            rank: xs.len(),
        },
        vec![x, pads],
        inputs,
        body,
        &[(0, None)],
    )?))
}

/// Pad whose axes are known only at run time: every dimension is the input's plus the widths
/// of the values naming its axis; the shape program checks that each value names an axis and
/// none twice.
fn pad_run_time_axes(ctx: &Ctx<'_>, node: &Node) -> CResult<ShapedKernel> {
    let x = ctx.input(node, 0)?;
    let (pads, axes) = (ctx.input(node, 1)?, ctx.input(node, 3)?);
    let rank = shape_of(&x)?.len() as i64;
    let na = length(ctx, node, 3)? as i64;
    if length(ctx, node, 1)? as i64 != 2 * na {
        return Err(Msg(format!(
            "input #1 (pads) must hold 2 values per value of input #3 (axes, {na})"
        )));
    }
    let dtype = dtype_of(&x)?;
    let value = match ctx.opt_input(node, 2)? {
        Some(v) => v,
        None => super::scalar(0.0, dtype)?,
    };
    // Shape arguments: 0 the data, 1 the pads, 2 the axes. `norm(k)`: axes[k] counted from 0.
    let norm = |k: i64| {
        vec![
            op::VALUE,
            2,
            k,
            op::VALUE,
            2,
            k,
            op::PUSH,
            0,
            op::LT,
            op::PUSH,
            rank,
            op::PUSH,
            0,
            op::SELECT,
            op::ADD,
        ]
    };
    let mut code = Vec::new();
    for k in 0..na {
        code.extend([op::VALUE, 2, k, op::PUSH, rank, op::LT, op::CHECK]);
        code.extend([op::PUSH, -rank - 1, op::VALUE, 2, k, op::LT, op::CHECK]);
        for l in 0..k {
            code.extend(norm(k));
            code.extend(norm(l));
            code.extend([op::EQ, op::PUSH, 0, op::EQ, op::CHECK]);
        }
    }
    for j in 0..rank {
        code.extend([op::DIM, 0, j]);
        for k in 0..na {
            code.extend(norm(k));
            code.extend([op::PUSH, j, op::EQ]);
            code.extend([op::VALUE, 1, k, op::VALUE, 1, k + na, op::ADD, op::PUSH, 0]);
            code.extend([op::SELECT, op::ADD]);
        }
        code.push(op::EMIT);
    }
    let vars: Vec<Var> = ["data", "pads", "value", "axes"]
        .iter()
        .zip([&x, &pads, &value, &axes])
        .map(|(n, e)| Ok(Var::new(n, e.ty()?)))
        .collect::<CResult<_>>()?;
    let mode = node.attr_s("mode", "constant")?;
    let body = call(
        "dyn.pad_axes",
        vars.iter().map(Var::expr).collect(),
        &[("mode", mode.as_str().into())],
    )?;
    let mut inputs = vec![
        (x.clone(), vars[0].clone()),
        (pads.clone(), vars[1].clone()),
    ];
    inputs.push((value, vars[2].clone()));
    inputs.push((axes.clone(), vars[3].clone()));
    kernel(
        Shapes::Program {
            code,
            rank: rank as usize,
        },
        vec![x, pads, axes],
        inputs,
        body,
        &[(0, None)],
    )
}

/// Shape of a value with dimensions known only at run time: a shape program reading them
/// (the program's result is the node's output).
pub(super) fn shape_run_time(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    if !xs.contains(&-1) {
        return Ok(None);
    }
    let range = shape_range(node, &xs)?;
    let n = range.len();
    // `dim 0 j; emit` per dimension (`kiln_runtime::vm::shape_expr`).
    let code: Vec<i64> = range
        .flat_map(|j| [op::DIM, 0, j as i64, op::EMIT])
        .collect();
    Ok(Some(ShapedKernel {
        shapes: Shapes::Program { code, rank: n },
        shape_args: vec![x],
        shape_inputs: Vec::new(),
        kernel: None,
        results: vec![Result_ {
            source: Source::Shape(0),
            view: None,
            ty: Type::tensor(&[n as i64], kiln_ffi::DataType::int(64)),
        }],
    }))
}
