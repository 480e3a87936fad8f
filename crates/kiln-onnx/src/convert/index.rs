//! Converters of the indexing, scattering, scanning and selection operators: GatherND,
//! ScatterElements/Scatter, ScatterND, CumSum, TopK, OneHot, BitShift, CenterCropPad, NonZero,
//! Compress, TensorScatter (Einsum lives in `einsum.rs`).
//!
//! Inputs that fix an output shape (TopK's `K`, OneHot's `depth`, CenterCropPad's `shape`)
//! must be compile-time constants (initializers, Constant nodes, folded values or frozen
//! inputs); a run-time input there is an error naming it. NonZero's and Compress's output shapes depend on data values:
//! they fold when those values are constant and are refused otherwise.

use std::collections::HashMap;

use kiln_graph::ir::Expr;
use kiln_runtime::vm::shape_expr::op;

use super::{call, constant, dtype_of, norm_axis, scalar, shape_of, CResult, ConvertFn, Ctx, Msg};
use crate::Node;

/// Input `i`, which fixes an output shape, as constant integers; an error naming it (and
/// saying it is a run-time input) otherwise.
fn shape_input(ctx: &Ctx<'_>, node: &Node, i: usize) -> CResult<Vec<i64>> {
    ctx.const_ints(node, i)?
        .ok_or_else(|| Msg(format!("input #{i} is required")))
}

/// GatherND.
fn gather_nd(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let (x, ix) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let b = node.attr_i("batch_dims", 0)?;
    Ok(vec![call(
        "gather_nd",
        vec![x, ix],
        &[("batch_dims", b.into())],
    )?])
}

/// ScatterElements (and the older Scatter, which has no reduction).
fn scatter_elements(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let args = vec![
        ctx.input(node, 0)?,
        ctx.input(node, 1)?,
        ctx.input(node, 2)?,
    ];
    let axis = node.attr_i("axis", 0)?;
    let red = node.attr_s("reduction", "none")?;
    Ok(vec![call(
        "scatter_elements",
        args,
        &[("axis", axis.into()), ("reduction", red.as_str().into())],
    )?])
}

/// ScatterND.
fn scatter_nd(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let args = vec![
        ctx.input(node, 0)?,
        ctx.input(node, 1)?,
        ctx.input(node, 2)?,
    ];
    let red = node.attr_s("reduction", "none")?;
    Ok(vec![call(
        "scatter_nd",
        args,
        &[("reduction", red.as_str().into())],
    )?])
}

/// CumSum. A constant axis gives one `cumsum`; so does a runtime axis on a 1-D input (its
/// only axis). Otherwise the axis is known only at run time: the scan along every axis is
/// computed and the one the axis names is selected (`where` on the axis value).
fn cumsum(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let rank = shape_of(&x)?.len() as i64;
    let attrs = |axis: i64| -> CResult<Expr> {
        call(
            "cumsum",
            vec![x.clone()],
            &[
                ("axis", axis.into()),
                ("exclusive", (node.attr_i("exclusive", 0)? != 0).into()),
                ("reverse", (node.attr_i("reverse", 0)? != 0).into()),
            ],
        )
    };
    if let Some(t) = ctx.const_input(node, 1)? {
        let v = t.to_f64_vec()?;
        let [axis] = v.as_slice() else {
            return Err(Msg(format!(
                "input #1 ('axis') must hold one value, got {}",
                v.len()
            )));
        };
        return Ok(vec![attrs(*axis as i64)?]);
    }
    if rank == 1 {
        return Ok(vec![attrs(0)?]);
    }
    let axis = ctx.input(node, 1)?;
    let (ashape, adt) = (shape_of(&axis)?, dtype_of(&axis)?);
    if ashape.iter().product::<i64>() != 1 {
        return Err(Msg(format!(
            "input #1 ('axis') must hold one value, got shape {ashape:?}"
        )));
    }
    let axis = call(
        "reshape",
        vec![axis],
        &[("newshape", Vec::<i64>::new().into())],
    )?;
    let mut out = attrs(rank - 1)?;
    for a in (0..rank - 1).rev() {
        let is = |v: i64| call("equal", vec![axis.clone(), scalar(v as f64, adt)?], &[]);
        let hit = call("logical_or", vec![is(a)?, is(a - rank)?], &[])?;
        out = call("where", vec![hit, attrs(a)?, out], &[])?;
    }
    Ok(vec![out])
}

/// TopK: the values and the `int64` indices.
fn topk(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let axis = node.attr_i("axis", -1)?;
    norm_axis(axis, xs.len())?;
    let k = if ctx.opset < 10 {
        node.attr_i("k", 0)?
    } else {
        let v = shape_input(ctx, node, 1)?;
        match v.as_slice() {
            [k] => *k,
            _ => {
                return Err(Msg(format!(
                    "input #1 ('K') must hold one value, got {v:?}"
                )))
            }
        }
    };
    let t = call(
        "topk",
        vec![x],
        &[
            ("k", k.into()),
            ("axis", axis.into()),
            ("largest", (node.attr_i("largest", 1)? != 0).into()),
        ],
    )?;
    Ok(vec![Expr::get_item(t.clone(), 0), Expr::get_item(t, 1)])
}

/// TopK whose K is known only at run time, or of a value shaped at run time: a kernel whose
/// results' extent along the axis is K, which a shape program reads (checked to be at most
/// the axis' extent).
pub(super) fn topk_run_time(
    ctx: &Ctx<'_>,
    node: &Node,
) -> CResult<Option<super::shaped::ShapedKernel>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    if ctx.opset < 10 || (!ctx.run_time_input(node, 1)? && !xs.contains(&-1)) {
        return Ok(None);
    }
    let a = norm_axis(node.attr_i("axis", -1)?, xs.len())?;
    let k = ctx.input(node, 1)?;
    if super::shaped::length(&k, "input #1 ('K')")? != 1 {
        return Err(Msg("input #1 ('K') must hold one value".into()));
    }
    // The input's dimensions, K on the axis (checked: K < n + 1).
    let mut code = Vec::new();
    for j in 0..xs.len() {
        if j == a {
            let (k, n) = ([op::VALUE, 1, 0], [op::DIM, 0, j as i64]);
            code.extend(
                k.iter()
                    .chain(&n)
                    .chain(&[op::PUSH, 1, op::ADD, op::LT, op::CHECK]),
            );
            code.extend(k.iter().chain(&[op::EMIT]));
        } else {
            code.extend([op::DIM, 0, j as i64, op::EMIT]);
        }
    }
    let px = kiln_graph::ir::Var::new("data", x.ty()?);
    let body = super::typed(call(
        "topk",
        vec![px.expr()],
        &[
            ("k", (-1i64).into()),
            ("axis", (a as i64).into()),
            ("largest", (node.attr_i("largest", 1)? != 0).into()),
        ],
    )?)?;
    let mut out = xs.clone();
    out[a] = -1;
    let dtype = dtype_of(&x)?;
    let mut kern = super::shaped::kernel(
        super::shaped::Shapes::Program {
            code,
            rank: xs.len(),
        },
        vec![x.clone(), k],
        vec![(x, px)],
        body,
        &[(0, None), (0, None)],
    )?;
    kern.results[0].ty = kiln_graph::ir::Type::tensor(&out, dtype);
    kern.results[1].ty = kiln_graph::ir::Type::tensor(&out, kiln_ffi::DataType::int(64));
    Ok(Some(kern))
}

/// OneHot as a comparison with a range: `where(indices[.., None, ..] == range(depth), on,
/// off)`, negative indices counted from `depth`; `values` = `[off, on]` may be a runtime input.
fn one_hot(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let ix = ctx.input(node, 0)?;
    let is = shape_of(&ix)?;
    let rank = is.len() + 1;
    let a = norm_axis(node.attr_i("axis", -1)?, rank)?;
    let v = shape_input(ctx, node, 1)?;
    let depth = match v.as_slice() {
        [d] if *d >= 1 => *d,
        _ => {
            return Err(Msg(format!(
                "input #1 ('depth') must be one positive value, got {v:?}"
            )))
        }
    };
    let values = ctx.input(node, 2)?;
    if shape_of(&values)?.iter().product::<i64>() != 2 {
        return Err("input #2 ('values') must hold two values [off, on]".into());
    }
    let i64t = kiln_ffi::DataType::int(64);
    let ix = call("cast", vec![ix], &[("dtype", "int64".into())])?;
    let neg = call("less", vec![ix.clone(), scalar(0.0, i64t)?], &[])?;
    let wrapped = call("add", vec![ix.clone(), scalar(depth as f64, i64t)?], &[])?;
    let ix = call("where", vec![neg, wrapped, ix], &[])?;
    let ix = call(
        "expand_dims",
        vec![ix],
        &[("axis", (a as i64).into()), ("num_newaxis", 1i64.into())],
    )?;
    let mut rshape = vec![1i64; rank];
    rshape[a] = depth;
    let range: Vec<f64> = (0..depth).map(|d| d as f64).collect();
    let hit = call("equal", vec![ix, constant(&range, &rshape, i64t)?], &[])?;
    let values = call("reshape", vec![values], &[("newshape", vec![2i64].into())])?;
    let pick = |k: i64| -> CResult<Expr> {
        let e = call(
            "strided_slice",
            vec![values.clone()],
            &[("begin", vec![k].into()), ("end", vec![k + 1].into())],
        )?;
        call(
            "reshape",
            vec![e],
            &[("newshape", Vec::<i64>::new().into())],
        )
    };
    Ok(vec![call("where", vec![hit, pick(1)?, pick(0)?], &[])?])
}

/// OneHot whose depth is known only at run time: one kernel (`dyn.one_hot`) whose depth is
/// its result's extent on `axis`, shaped by `vm.builtin.one_hot_shape`.
pub(super) fn one_hot_run_time(
    ctx: &Ctx<'_>,
    node: &Node,
) -> CResult<Option<super::shaped::ShapedKernel>> {
    if ctx.const_input(node, 1)?.is_some() {
        return Ok(None);
    }
    let ix = ctx.input(node, 0)?;
    let rank = shape_of(&ix)?.len() + 1;
    let a = norm_axis(node.attr_i("axis", -1)?, rank)?;
    let values = ctx.input(node, 2)?;
    if shape_of(&values)?.iter().product::<i64>() != 2 {
        return Err("input #2 ('values') must hold two values [off, on]".into());
    }
    let (pi, pv) = (
        kiln_graph::ir::Var::new("indices", ix.ty()?),
        kiln_graph::ir::Var::new("values", values.ty()?),
    );
    let two = call(
        "reshape",
        vec![pv.expr()],
        &[("newshape", vec![2i64].into())],
    )?;
    let body = call(
        "dyn.one_hot",
        vec![pi.expr(), two],
        &[("axis", (a as i64).into())],
    )?;
    let args = vec![ix.clone(), ctx.input(node, 1)?];
    Ok(Some(super::shaped::kernel(
        super::shaped::Shapes::Function {
            name: "one_hot_shape",
            ints: vec![a as i64],
            ranks: vec![rank],
        },
        args,
        vec![(ix, pi), (values, pv)],
        body,
        &[(0, None)],
    )?))
}

/// BitShift on unsigned integers.
fn bit_shift(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let (x, y) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let op = match node.attr_s("direction", "")?.as_str() {
        "LEFT" => "left_shift",
        "RIGHT" => "right_shift",
        d => {
            return Err(Msg(format!(
                "attribute `direction` must be LEFT or RIGHT, got `{d}`"
            )))
        }
    };
    Ok(vec![call(op, vec![x, y], &[])?])
}

/// CenterCropPad as one `nn.pad` whose negative widths crop: each axis is centred, the extra
/// element of an odd difference going after (as ONNX's reference).
fn center_crop_pad(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let axes: Vec<usize> = match node.opt_ints("axes")? {
        Some(v) => v
            .iter()
            .map(|&a| norm_axis(a, xs.len()))
            .collect::<CResult<_>>()?,
        None => (0..xs.len()).collect(),
    };
    let want = shape_input(ctx, node, 1)?;
    if want.len() != axes.len() {
        return Err(Msg(format!(
            "input #1 ('shape') has {} values for {} axes",
            want.len(),
            axes.len()
        )));
    }
    let mut widths = vec![0i64; 2 * xs.len()];
    for (&a, &n) in axes.iter().zip(&want) {
        if n < 0 {
            return Err(Msg(format!("input #1 ('shape') has a negative extent {n}")));
        }
        let d = n - xs[a];
        // Crop (d < 0) starts at floor(|d| / 2); pad (d > 0) puts floor(d / 2) before.
        let before = if d >= 0 { d / 2 } else { -((-d) / 2) };
        widths[2 * a] = before;
        widths[2 * a + 1] = d - before;
    }
    Ok(vec![call(
        "nn.pad",
        vec![x],
        &[("pad_width", widths.into())],
    )?])
}

/// CenterCropPad whose shape input is known only at run time (or of a value shaped at run
/// time): a kernel of run-time extents along `axes`, which a shape program reads from the
/// shape input.
pub(super) fn center_crop_pad_run_time(
    ctx: &Ctx<'_>,
    node: &Node,
) -> CResult<Option<super::shaped::ShapedKernel>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    if !ctx.run_time_input(node, 1)? && !xs.contains(&-1) {
        return Ok(None);
    }
    let axes: Vec<usize> = match node.opt_ints("axes")? {
        Some(v) => v
            .iter()
            .map(|&a| norm_axis(a, xs.len()))
            .collect::<CResult<_>>()?,
        None => (0..xs.len()).collect(),
    };
    let shape = ctx.input(node, 1)?;
    let n = super::shaped::length(&shape, "input #1 ('shape')")?;
    if n != axes.len() {
        return Err(Msg(format!(
            "input #1 ('shape') has {n} values for {} axes",
            axes.len()
        )));
    }
    // Each result dimension: the shape's value on `axes`, the input's elsewhere.
    let mut code = Vec::new();
    for j in 0..xs.len() {
        match axes.iter().position(|&a| a == j) {
            Some(k) => code.extend([op::VALUE, 1, k as i64, op::EMIT]),
            None => code.extend([op::DIM, 0, j as i64, op::EMIT]),
        }
    }
    let px = kiln_graph::ir::Var::new("data", x.ty()?);
    let axes_attr: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
    let body = call(
        "dyn.center_crop_pad",
        vec![px.expr()],
        &[("axes", axes_attr.into())],
    )?;
    Ok(Some(super::shaped::kernel(
        super::shaped::Shapes::Program {
            code,
            rank: xs.len(),
        },
        vec![x.clone(), shape],
        vec![(x, px)],
        body,
        &[(0, None)],
    )?))
}

/// TensorScatter (a KV-cache write): `update` lands in `past_cache` along `axis` at
/// `write_indices[b]` for each batch row `b` (wrapping around the axis in `circular` mode).
/// Composed as a gather: output position `s` of row `b` reads `update` at `s - write_indices[b]`
/// (modulo the axis in `circular` mode) where that falls inside the update, else the cache.
fn tensor_scatter(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let (past, update) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let (ps, us) = (shape_of(&past)?, shape_of(&update)?);
    let rank = ps.len();
    let axis = norm_axis(node.attr_i("axis", -2)?, rank)?;
    if rank < 2 || axis == 0 {
        return Err(Msg(format!(
            "attribute `axis` must name a sequence axis after the batch axis 0, got {axis} for rank {rank}"
        )));
    }
    let same_but_axis = us.len() == rank && (0..rank).all(|d| d == axis || us[d] == ps[d]);
    if !same_but_axis || us[axis] > ps[axis] {
        return Err(Msg(format!(
            "input #1 ('update') of shape {us:?} must match `past_cache` {ps:?} but on axis \
             {axis}, where it may not be longer"
        )));
    }
    let circular = match node.attr_s("mode", "linear")?.as_str() {
        "linear" => false,
        "circular" => true,
        m => {
            return Err(Msg(format!(
                "attribute `mode` must be linear or circular, got `{m}`"
            )))
        }
    };
    let i64t = kiln_ffi::DataType::int(64);
    let (seq, upd) = (ps[axis], us[axis]);
    // Row starts as [B, 1.., 1, 1..] and positions as [1.., S, 1..].
    let mut row_shape = vec![1i64; rank];
    row_shape[0] = ps[0];
    let start = match ctx.opt_input(node, 2)? {
        Some(w) => {
            let w = call("cast", vec![w], &[("dtype", "int64".into())])?;
            call("reshape", vec![w], &[("newshape", row_shape.into())])?
        }
        None => scalar(0.0, i64t)?,
    };
    let mut pos_shape = vec![1i64; rank];
    pos_shape[axis] = seq;
    let pos: Vec<f64> = (0..seq).map(|s| s as f64).collect();
    let mut rel = call(
        "subtract",
        vec![constant(&pos, &pos_shape, i64t)?, start],
        &[],
    )?;
    if circular {
        rel = call("floor_mod", vec![rel, scalar(seq as f64, i64t)?], &[])?;
    }
    let inside = call(
        "logical_and",
        vec![
            call("greater_equal", vec![rel.clone(), scalar(0.0, i64t)?], &[])?,
            call("less", vec![rel.clone(), scalar(upd as f64, i64t)?], &[])?,
        ],
        &[],
    )?;
    let idx = call("maximum", vec![rel, scalar(0.0, i64t)?], &[])?;
    let idx = call("minimum", vec![idx, scalar((upd - 1) as f64, i64t)?], &[])?;
    let idx = call("broadcast_to", vec![idx], &[("shape", ps.into())])?;
    let read = call(
        "gather_elements",
        vec![update, idx],
        &[("axis", (axis as i64).into())],
    )?;
    Ok(vec![call("where", vec![inside, read, past], &[])?])
}

/// ReverseSequence: each batch row's first `sequence_lens[b]` steps reversed along the time
/// axis, the rest kept: one `gather_elements` whose time index is `len - 1 - t` where
/// `t < len`, else `t` (`sequence_lens` may be a run-time input).
fn reverse_sequence(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let s = shape_of(&x)?;
    let time = node.attr_i("time_axis", 0)?;
    let batch = node.attr_i("batch_axis", 1)?;
    if s.len() < 2 || !matches!((time, batch), (0, 1) | (1, 0)) {
        return Err(Msg(format!(
            "time_axis {time} and batch_axis {batch} must be 0 and 1 (either way) of a tensor of \
             rank >= 2, got shape {s:?}"
        )));
    }
    let (t, b) = (s[time as usize], s[batch as usize]);
    let i64t = kiln_ffi::DataType::int(64);
    let lens = call(
        "cast",
        vec![ctx.input(node, 1)?],
        &[("dtype", "int64".into())],
    )?;
    if shape_of(&lens)? != [b] {
        return Err(Msg(format!(
            "sequence_lens must be [{b}] (one length per batch row), got {:?}",
            shape_of(&lens)?
        )));
    }
    // [T, B] or [B, T] views of the step index and the lengths, then the rest of the axes.
    let mut grid = vec![1i64; s.len()];
    grid[time as usize] = t;
    let steps: Vec<f64> = (0..t).map(|v| v as f64).collect();
    let step = constant(&steps, &grid, i64t)?;
    let mut lshape = vec![1i64; s.len()];
    lshape[batch as usize] = b;
    let lens = super::reshape(lens, lshape)?;
    let inside = call("less", vec![step.clone(), lens.clone()], &[])?;
    let flipped = call(
        "subtract",
        vec![
            call("subtract", vec![lens, scalar(1.0, i64t)?], &[])?,
            step.clone(),
        ],
        &[],
    )?;
    let idx = call("where", vec![inside, flipped, step], &[])?;
    let idx = call("broadcast_to", vec![idx], &[("shape", s.into())])?;
    Ok(vec![call(
        "gather_elements",
        vec![x, idx],
        &[("axis", time.into())],
    )?])
}

/// Registers this file's converters.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("ReverseSequence", reverse_sequence);
    t.insert("GatherND", gather_nd);
    t.insert("ScatterElements", scatter_elements);
    t.insert("Scatter", scatter_elements);
    t.insert("ScatterND", scatter_nd);
    t.insert("CumSum", cumsum);
    t.insert("TopK", topk);
    t.insert("OneHot", one_hot);
    t.insert("BitShift", bit_shift);
    t.insert("CenterCropPad", center_crop_pad);
    t.insert("TensorScatter", tensor_scatter);
    t.insert("Einsum", super::einsum::einsum);
}
