//! Pooling converters: MaxPool, AveragePool and LpPool over any number of spatial axes
//! (kernel, strides, dilations, pads, auto_pad, ceil_mode, count_include_pad), and the global
//! pools; MaxUnpool, which scatters pooled values back to the positions MaxPool's indices
//! name.
//!
//! Kiln's graph pools over two axes; the other ranks reduce to that. A 1-D pooling is a 2-D
//! one of a single row. Pooling windows are boxes, so an N-D pooling (N >= 3) is
//! separable: pool the last two axes (the leading ones folded into the channels), then pool
//! the remaining leading axes with the pooled trailing extents folded into one axis of unit
//! kernel. A maximum of maxima is the maximum; for averages the divisor of a box (the number of
//! elements it holds in the input, or in the padded input with `count_include_pad`) is the
//! product of its per-axis counts, so an average of averages is the average.

use std::collections::HashMap;

use kiln_graph::ir::Expr;

use super::conv::{drop_row, pads, slice_axis, spatial_attrs, unit_row};
use super::{call, constant, dtype_of, reshape, scalar, shape_of, CResult, ConvertFn, Ctx, Msg};

/// MaxUnpool: zeros of the unpooled shape (`output_shape` when given, else
/// `(in - 1) * stride + kernel - pad_begin - pad_end` per spatial axis) with `X`'s values
/// written at the flat positions `I` holds (MaxPool's `Indices`, row-major over the whole
/// output).
fn max_unpool(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let indices = ctx.input(node, 1)?;
    let xs = shape_of(&x)?;
    if xs.len() < 3 || shape_of(&indices)? != xs {
        return Err(Msg(format!(
            "X {xs:?} must be [N, C, spatial...] and I of the same shape, got I {:?}",
            shape_of(&indices)?
        )));
    }
    let n = xs.len() - 2;
    let kernel = node.attr_ints("kernel_shape", &[])?;
    if kernel.len() != n || kernel.iter().any(|&k| k < 1) {
        return Err(Msg(format!(
            "attribute kernel_shape {kernel:?} must hold {n} positive values"
        )));
    }
    let strides = node.attr_ints("strides", &vec![1; n])?;
    let pads = node.attr_ints("pads", &vec![0; 2 * n])?;
    if strides.len() != n || pads.len() != 2 * n || strides.iter().any(|&s| s < 1) {
        return Err(Msg(format!(
            "attributes strides {strides:?} and pads {pads:?} must hold {n} positive and {}              values",
            2 * n
        )));
    }
    let out: Vec<i64> = match node.inputs.get(2).filter(|name| !name.is_empty()) {
        Some(_) => ctx
            .const_ints(node, 2)?
            .ok_or_else(|| Msg::from("input #2 (output_shape) must be a constant"))?,
        None => {
            let mut out = xs[..2].to_vec();
            for a in 0..n {
                out.push((xs[a + 2] - 1) * strides[a] + kernel[a] - pads[a] - pads[n + a]);
            }
            out
        }
    };
    if out.len() != xs.len() || out[..2] != xs[..2] || out.iter().any(|&d| d < 1) {
        return Err(Msg(format!(
            "the output shape {out:?} must be positive and keep X's batch and channels {:?}",
            &xs[..2]
        )));
    }
    let total = out
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Msg(format!("the output shape {out:?} is too large")))?;
    let zeros = call(
        "broadcast_to",
        vec![scalar(0.0, dtype_of(&x)?)?],
        &[("shape", vec![total].into())],
    )?;
    let flat = call(
        "scatter_elements",
        vec![zeros, reshape(indices, vec![-1])?, reshape(x, vec![-1])?],
        &[("axis", 0i64.into()), ("reduction", "none".into())],
    )?;
    Ok(vec![reshape(flat, out)?])
}
use crate::Node;

/// One pooling's window over `k` spatial axes.
#[derive(Clone, Debug)]
struct Window {
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    /// `[begin..., end...]`.
    pads: Vec<i64>,
    ceil_mode: bool,
}

impl Window {
    /// The window over the spatial axes `range` (a sub-box).
    fn axes(&self, range: std::ops::Range<usize>) -> Window {
        let k = self.kernel.len();
        let mut pads = self.pads[range.clone()].to_vec();
        pads.extend(range.clone().map(|i| self.pads[k + i]));
        Window {
            kernel: self.kernel[range.clone()].to_vec(),
            strides: self.strides[range.clone()].to_vec(),
            dilations: self.dilations[range].to_vec(),
            pads,
            ceil_mode: self.ceil_mode,
        }
    }

    /// The window with an extra spatial axis of kernel 1 (pooling nothing) at position `at`:
    /// last for the leading axes of an N-D pooling, first for a 1-D pooling over its input
    /// viewed as one row ([`unit_row`]).
    fn with_unit_axis(&self, at: usize) -> Window {
        let k = self.kernel.len();
        let unit = |v: &[i64], one: i64| {
            let mut v = v.to_vec();
            v.insert(at, one);
            v
        };
        Window {
            kernel: unit(&self.kernel, 1),
            strides: unit(&self.strides, 1),
            dilations: unit(&self.dilations, 1),
            pads: [unit(&self.pads[..k], 0), unit(&self.pads[k..], 0)].concat(),
            ceil_mode: self.ceil_mode,
        }
    }
}

/// `op` (`nn.max_pool2d` or `nn.avg_pool2d`) of `x` `[N, C, S...]` over its spatial axes.
fn pool_nd(
    x: Expr,
    op: &str,
    w: &Window,
    extra: &[(&str, kiln_graph::ir::AttrValue)],
) -> CResult<Expr> {
    let xs = shape_of(&x)?;
    let k = xs.len() - 2;
    match k {
        1 => {
            let y = pool_nd(unit_row(x)?, op, &w.with_unit_axis(0), extra)?;
            drop_row(y)
        }
        2 => {
            let mut attrs = vec![
                ("pool_size", w.kernel.clone().into()),
                ("strides", w.strides.clone().into()),
                ("padding", w.pads.clone().into()),
                ("dilation", w.dilations.clone().into()),
                ("ceil_mode", w.ceil_mode.into()),
            ];
            attrs.extend(extra.iter().cloned());
            call(op, vec![x], &attrs)
        }
        _ => {
            // The last two axes, the leading spatial axes folded into the channels.
            let lead: i64 = xs[2..xs.len() - 2].iter().product();
            let folded = reshape(x, vec![xs[0], xs[1] * lead, xs[k], xs[k + 1]])?;
            let inner = pool_nd(folded, op, &w.axes(k - 2..k), extra)?;
            let hw = shape_of(&inner)?[2..].to_vec();
            // Then the leading axes, the pooled trailing extents as one axis of kernel 1.
            let mut s = xs[..xs.len() - 2].to_vec();
            s.push(hw[0] * hw[1]);
            let outer = pool_nd(
                reshape(inner, s)?,
                op,
                &w.axes(0..k - 2).with_unit_axis(k - 2),
                extra,
            )?;
            let mut out = shape_of(&outer)?;
            out.pop();
            out.extend_from_slice(&hw);
            reshape(outer, out)
        }
    }
}

/// The window of a pooling node over input `xs`, checked.
fn window(node: &Node, xs: &[i64]) -> CResult<Window> {
    if xs.len() < 3 {
        return Err(Msg(format!(
            "input `X` {xs:?} must be [N, C, spatial...] with at least one spatial axis"
        )));
    }
    let kernel = node
        .opt_ints("kernel_shape")?
        .ok_or_else(|| Msg::from(node.missing_attr("kernel_shape")))?;
    if kernel.len() != xs.len() - 2 {
        return Err(Msg(format!(
            "attribute `kernel_shape` {kernel:?} must hold one value per spatial axis of input \
             {xs:?}"
        )));
    }
    let (strides, dilations) = spatial_attrs(node, &kernel)?;
    let pads = pads(node, &xs[2..], &kernel, &strides, &dilations)?;
    if pads.iter().any(|&p| p < 0) {
        return Err(Msg(format!(
            "attribute `pads` {pads:?} must not be negative"
        )));
    }
    Ok(Window {
        kernel,
        strides,
        dilations,
        pads,
        ceil_mode: node.attr_i("ceil_mode", 0)? != 0,
    })
}

fn pool(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let w = window(node, &shape_of(&x)?)?;
    let y = if node.op_type == "MaxPool" {
        let y = pool_nd(x.clone(), "nn.max_pool2d", &w, &[])?;
        if node.outputs.iter().skip(1).any(|o| !o.is_empty()) {
            let order = node.attr_i("storage_order", 0)?;
            let idx = max_pool_indices(&x, &y, &w, order)?;
            return Ok(vec![y, idx]);
        }
        y
    } else {
        let cip = node.attr_i("count_include_pad", 0)? != 0;
        pool_nd(x, "nn.avg_pool2d", &w, &[("count_include_pad", cip.into())])?
    };
    Ok(vec![y])
}

/// MaxPool's Indices output (2-D): for each window, the flat index (row-major, or
/// column-major within each image for `storage_order` 1; padding not counted) of its first
/// maximum. Each tap of the window is a strided slice of the input and of a constant image of
/// indices, both padded (with -inf and -1); taps are visited last to first, each replacing the
/// index where its value equals the pooled maximum, so the first tap holding it wins.
fn max_pool_indices(x: &Expr, y: &Expr, w: &Window, order: i64) -> CResult<Expr> {
    let s = shape_of(x)?;
    if s.len() != 4 || w.kernel.len() != 2 {
        return Err("the Indices output of MaxPool is supported for 2-D pooling".into());
    }
    let (n, c, h, wd) = (s[0], s[1], s[2], s[3]);
    let ys = shape_of(y)?;
    let (oh, ow) = (ys[2], ys[3]);
    let mut idx = Vec::with_capacity((n * c * h * wd) as usize);
    for b in 0..n * c {
        for r in 0..h {
            for q in 0..wd {
                let within = if order == 1 { q * h + r } else { r * wd + q };
                idx.push((b * h * wd + within) as f64);
            }
        }
    }
    let i64t = kiln_ffi::DataType::int(64);
    let index_image = constant(&idx, &s, i64t)?;
    let (pt, pl, pb, pr) = (w.pads[0], w.pads[1], w.pads[2], w.pads[3]);
    // Enough padding at the end for every window (ceil mode may reach past it).
    let need_h = (oh - 1) * w.strides[0] + (w.kernel[0] - 1) * w.dilations[0] + 1;
    let need_w = (ow - 1) * w.strides[1] + (w.kernel[1] - 1) * w.dilations[1] + 1;
    let (pb, pr) = (pb.max(need_h - h - pt), pr.max(need_w - wd - pl));
    let pad = |e: Expr, v: f64| {
        call(
            "nn.pad",
            vec![e],
            &[
                ("pad_width", vec![0i64, 0, 0, 0, pt, pb, pl, pr].into()),
                ("pad_value", v.into()),
            ],
        )
    };
    let xp = pad(x.clone(), f64::NEG_INFINITY)?;
    let ip = pad(index_image, -1.0)?;
    let tap = |e: &Expr, i: i64, j: i64| -> CResult<Expr> {
        let e = slice_axis(e.clone(), 2, i * w.dilations[0], oh, w.strides[0])?;
        slice_axis(e, 3, j * w.dilations[1], ow, w.strides[1])
    };
    let mut out: Option<Expr> = None;
    for i in (0..w.kernel[0]).rev() {
        for j in (0..w.kernel[1]).rev() {
            let at = tap(&ip, i, j)?;
            out = Some(match out {
                None => at,
                Some(prev) => {
                    let hit = call("equal", vec![tap(&xp, i, j)?, y.clone()], &[])?;
                    call("where", vec![hit, at, prev], &[])?
                }
            });
        }
    }
    Ok(out.expect("a window has taps"))
}

/// LpPool: `(sum |x|^p)^(1/p)` over each window, the sum as an average including the padding
/// (zeros, which add nothing) times the window size.
fn lp_pool(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let w = window(node, &shape_of(&x)?)?;
    if w.ceil_mode {
        // Windows hanging over the padded input would be divided by a clipped size.
        return Err("attribute `ceil_mode` = 1 of LpPool is not supported".into());
    }
    let (p, dt) = (lp_order(node)?, dtype_of(&x)?);
    let powered = lp_power(x, p)?;
    let avg = pool_nd(
        powered,
        "nn.avg_pool2d",
        &w,
        &[("count_include_pad", true.into())],
    )?;
    let size: i64 = w.kernel.iter().product();
    let sum = call("multiply", vec![avg, scalar(size as f64, dt)?], &[])?;
    Ok(vec![lp_root(sum, p)?])
}

/// The `p` attribute of LpPool and GlobalLpPool (default 2), checked.
fn lp_order(node: &Node) -> CResult<i64> {
    let p = node.attr_i("p", 2)?;
    if p < 1 {
        return Err(Msg(format!("attribute `p` {p} must be positive")));
    }
    Ok(p)
}

/// `|x|^p` (the terms of an Lp norm).
fn lp_power(x: Expr, p: i64) -> CResult<Expr> {
    match p {
        1 => call("abs", vec![x], &[]),
        2 => call("multiply", vec![x.clone(), x], &[]),
        _ => {
            let dt = dtype_of(&x)?;
            let a = call("abs", vec![x], &[])?;
            call("power", vec![a, scalar(p as f64, dt)?], &[])
        }
    }
}

/// `sum^(1/p)` (an Lp norm from its summed terms).
fn lp_root(sum: Expr, p: i64) -> CResult<Expr> {
    match p {
        1 => Ok(sum),
        2 => call("sqrt", vec![sum], &[]),
        _ => {
            let dt = dtype_of(&sum)?;
            call("power", vec![sum, scalar(1.0 / p as f64, dt)?], &[])
        }
    }
}

/// GlobalAveragePool / GlobalMaxPool over any number of spatial axes: 2-D directly, others as
/// a 2-D pooling of `[N, C, 1, prod(spatial)]` reshaped back to `[N, C, 1, ...]`.
fn global_pool(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    if xs.len() < 3 {
        return Err(Msg(format!(
            "global pooling needs an input [N, C, spatial...] of rank 3 or more, got {xs:?}"
        )));
    }
    let op = if node.op_type == "GlobalMaxPool" {
        "nn.global_max_pool2d"
    } else {
        "nn.global_avg_pool2d"
    };
    if xs.len() == 4 {
        return Ok(vec![call(op, vec![x], &[])?]);
    }
    let flat: i64 = xs[2..].iter().product();
    let pooled = call(op, vec![reshape(x, vec![xs[0], xs[1], 1, flat])?], &[])?;
    let mut out = vec![xs[0], xs[1]];
    out.extend(std::iter::repeat_n(1, xs.len() - 2));
    Ok(vec![reshape(pooled, out)?])
}

/// Registers the converters of this file.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("MaxPool", pool);
    t.insert("AveragePool", pool);
    t.insert("LpPool", lp_pool);
    t.insert("GlobalAveragePool", global_pool);
    t.insert("GlobalMaxPool", global_pool);
    t.insert("GlobalLpPool", global_lp_pool);
    t.insert("MaxUnpool", max_unpool);
}

/// GlobalLpPool: LpPool with one window over all spatial axes.
fn global_lp_pool(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    if xs.len() < 3 {
        return Err(Msg(format!(
            "input `X` {xs:?} must be [N, C, spatial...] with at least one spatial axis"
        )));
    }
    let p = lp_order(node)?;
    let powered = lp_power(x, p)?;
    let axes: Vec<i64> = (2..xs.len() as i64).collect();
    let sum = call(
        "sum",
        vec![powered],
        &[("axis", axes.into()), ("keepdims", true.into())],
    )?;
    Ok(vec![lp_root(sum, p)?])
}
