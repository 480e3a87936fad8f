//! Neural-network converters: Gemm, MatMul, Det, the normalizations (Batch, Layer, Instance, Lp,
//! RMS), Softmax/LogSoftmax (opset < 13 flattening semantics), Hardmax, LRN and Dropout.
//! Convolutions are in `conv`, poolings in `pool`.

use std::collections::HashMap;

use kiln_graph::ir::Expr;

use super::{call, constant, dtype_of, scalar, shape_of, CResult, ConvertFn, Ctx, Msg};
use crate::Node;

fn transpose2d(x: Expr) -> CResult<Expr> {
    call("transpose", vec![x], &[("axes", vec![1i64, 0].into())])
}

fn gemm(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let mut a = ctx.input(node, 0)?;
    let mut b = ctx.input(node, 1)?;
    let alpha = node.attr_f("alpha", 1.0)? as f64;
    let beta = node.attr_f("beta", 1.0)? as f64;
    if node.attr_i("transA", 0)? != 0 {
        a = transpose2d(a)?;
    }
    if node.attr_i("transB", 0)? == 0 {
        b = transpose2d(b)?;
    }
    let d = dtype_of(&a)?;
    let mut y = call("nn.dense", vec![a, b], &[])?;
    if alpha != 1.0 {
        y = call("multiply", vec![y, scalar(alpha, d)?], &[])?;
    }
    if let Some(mut c) = ctx.opt_input(node, 2)? {
        if beta != 0.0 {
            if beta != 1.0 {
                c = call("multiply", vec![c, scalar(beta, d)?], &[])?;
            }
            y = call("add", vec![y, c], &[])?;
        }
    }
    Ok(vec![y])
}

fn matmul(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    Ok(vec![matmul_of(ctx.input(node, 0)?, ctx.input(node, 1)?)?])
}

/// ONNX MatMul of `a` and `b` (numpy semantics: 1-D operands promoted and their unit axis
/// dropped again, leading axes broadcast).
pub(super) fn matmul_of(mut a: Expr, mut b: Expr) -> CResult<Expr> {
    let (ra, rb) = (shape_of(&a)?.len(), shape_of(&b)?.len());
    if ra == 1 {
        a = call("expand_dims", vec![a], &[("axis", 0i64.into())])?;
    }
    if rb == 1 {
        b = call("expand_dims", vec![b], &[("axis", 1i64.into())])?;
    }
    let mut y = call("nn.matmul", vec![a, b], &[])?;
    if rb == 1 {
        y = call("squeeze", vec![y], &[("axis", vec![-1i64].into())])?;
    }
    if ra == 1 {
        let axis = if rb == 1 { -1i64 } else { -2 };
        y = call("squeeze", vec![y], &[("axis", vec![axis].into())])?;
    }
    Ok(y)
}

fn batch_norm(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let args = (0..5)
        .map(|i| ctx.input(node, i))
        .collect::<CResult<Vec<_>>>()?;
    let eps = node.attr_f("epsilon", 1e-5)? as f64;
    if ctx.opset < 9 && node.attr_i("spatial", 1)? == 0 {
        return Err(Msg(
            "spatial=0 (statistics per channel and position) is not supported".into(),
        ));
    }
    if ctx.opset >= 14 && node.attr_i("training_mode", 0)? != 0 {
        let momentum = node.attr_f("momentum", 0.9)? as f64;
        return batch_norm_training(args, eps, momentum);
    }
    let bn = call(
        "nn.batch_norm",
        args,
        &[("axis", 1i64.into()), ("epsilon", eps.into())],
    )?;
    Ok(vec![Expr::get_item(bn, 0)])
}

/// BatchNormalization with `training_mode=1`: normalized with the batch's own statistics
/// (mean and population variance over every axis but the channel axis), and the running
/// statistics updated as `running * momentum + batch * (1 - momentum)`.
fn batch_norm_training(args: Vec<Expr>, eps: f64, momentum: f64) -> CResult<Vec<Expr>> {
    let [x, scale, bias, running_mean, running_var]: [Expr; 5] = args
        .try_into()
        .map_err(|_| Msg("BatchNormalization takes 5 inputs".into()))?;
    let xs = shape_of(&x)?;
    if xs.len() < 2 {
        return Err(Msg(format!("input must be [N, C, ...], got {xs:?}")));
    }
    let st = Stash::of(dtype_of(&x)?);
    let d = st.compute_dtype();
    let x = st.widen(x)?;
    // Scale, bias and the running statistics may have their own types (opset 15): each is
    // computed in the stash type and given back in its own.
    let to = |e: Expr, t: kiln_ffi::DataType| -> CResult<Expr> {
        if dtype_of(&e)? == t {
            Ok(e)
        } else {
            call("cast", vec![e], &[("dtype", t.to_string().as_str().into())])
        }
    };
    let axes: Vec<i64> = (0..xs.len() as i64).filter(|&a| a != 1).collect();
    let Moments {
        centered,
        mean,
        var,
        inv,
    } = moments(x, axes, eps, d)?;
    // [C] -> [1, C, 1, ...] to broadcast against the input.
    let mut per_channel = vec![1i64; xs.len()];
    per_channel[1] = xs[1];
    let channel = |e: Expr| {
        call(
            "reshape",
            vec![e],
            &[("newshape", per_channel.clone().into())],
        )
    };
    let mut y = call("multiply", vec![centered, inv], &[])?;
    y = call("multiply", vec![y, channel(to(scale, d)?)?], &[])?;
    y = call("add", vec![y, channel(to(bias, d)?)?], &[])?;
    let flat = |e: Expr| call("reshape", vec![e], &[("newshape", vec![xs[1]].into())]);
    let update = |running: Expr, batch: Expr| -> CResult<Expr> {
        let own = dtype_of(&running)?;
        let r = call("multiply", vec![to(running, d)?, scalar(momentum, d)?], &[])?;
        let b = call(
            "multiply",
            vec![flat(batch)?, scalar(1.0 - momentum, d)?],
            &[],
        )?;
        to(call("add", vec![r, b], &[])?, own)
    };
    Ok(vec![
        st.restore(y)?,
        update(running_mean, mean)?,
        update(running_var, var)?,
    ])
}

fn layer_norm(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let axis = super::norm_axis(node.attr_i("axis", -1)?, xs.len())?;
    let eps = node.attr_f("epsilon", 1e-5)? as f64;
    let wants_stats = node.outputs.iter().skip(1).any(|o| !o.is_empty());
    if axis != xs.len() - 1 || wants_stats {
        return layer_norm_general(ctx, node, x, &xs, axis, eps);
    }
    let c = xs[axis];
    let d = dtype_of(&x)?;
    let vec1 = |e: Expr| -> CResult<Expr> {
        if shape_of(&e)? == [c] {
            Ok(e)
        } else {
            call("reshape", vec![e], &[("newshape", vec![c].into())])
        }
    };
    let gamma = vec1(ctx.input(node, 1)?)?;
    let beta = match ctx.opt_input(node, 2)? {
        Some(b) => vec1(b)?,
        None => constant(&vec![0.0; c as usize], &[c], d)?,
    };
    Ok(vec![call(
        "nn.layer_norm",
        vec![x, gamma, beta],
        &[("axis", (axis as i64).into()), ("epsilon", eps.into())],
    )?])
}

/// The float32 "stash" of normalizations: tensors of narrower floats are computed in float32
/// and cast back; float32 and float64 stay as they are.
pub(super) struct Stash {
    dtype: kiln_ffi::DataType,
    narrow: bool,
}

impl Stash {
    /// The stash for an input of `dtype`.
    pub(super) fn of(dtype: kiln_ffi::DataType) -> Stash {
        let f32t = kiln_ffi::DataType::float(32);
        let narrow = dtype != f32t && dtype != kiln_ffi::DataType::float(64);
        Stash { dtype, narrow }
    }

    /// The element type computations run in.
    pub(super) fn compute_dtype(&self) -> kiln_ffi::DataType {
        if self.narrow {
            kiln_ffi::DataType::float(32)
        } else {
            self.dtype
        }
    }

    /// `e` in the compute type.
    pub(super) fn widen(&self, e: Expr) -> CResult<Expr> {
        self.cast(e, self.compute_dtype())
    }

    /// A result back in the input's type.
    pub(super) fn restore(&self, e: Expr) -> CResult<Expr> {
        self.cast(e, self.dtype)
    }

    fn cast(&self, e: Expr, t: kiln_ffi::DataType) -> CResult<Expr> {
        if !self.narrow {
            return Ok(e);
        }
        call("cast", vec![e], &[("dtype", t.to_string().as_str().into())])
    }
}

/// LayerNormalization over the axes `axis..` with its Mean and InvStdDev outputs, from
/// reductions and arithmetic (computed in float32, the stash type, for narrower floats).
/// What normalizing over some axes computes: the input minus its mean, the mean and the
/// (population) variance kept as reduced axes of size 1, and `1 / sqrt(var + eps)`.
struct Moments {
    centered: Expr,
    mean: Expr,
    var: Expr,
    inv: Expr,
}

/// The [`Moments`] of `x` (of element type `d`) over `axes`.
fn moments(x: Expr, axes: Vec<i64>, eps: f64, d: kiln_ffi::DataType) -> CResult<Moments> {
    let mean_keep = |e: Expr| {
        call(
            "mean",
            vec![e],
            &[("axis", axes.clone().into()), ("keepdims", true.into())],
        )
    };
    let mean = mean_keep(x.clone())?;
    let centered = call("subtract", vec![x, mean.clone()], &[])?;
    let var = mean_keep(call(
        "multiply",
        vec![centered.clone(), centered.clone()],
        &[],
    )?)?;
    let inv = call(
        "rsqrt",
        vec![call("add", vec![var.clone(), scalar(eps, d)?], &[])?],
        &[],
    )?;
    Ok(Moments {
        centered,
        mean,
        var,
        inv,
    })
}

fn layer_norm_general(
    ctx: &mut Ctx<'_>,
    node: &Node,
    x: Expr,
    xs: &[i64],
    axis: usize,
    eps: f64,
) -> CResult<Vec<Expr>> {
    let st = Stash::of(dtype_of(&x)?);
    let x = st.widen(x)?;
    let stash = st.compute_dtype();
    let axes: Vec<i64> = (axis as i64..xs.len() as i64).collect();
    let Moments {
        centered,
        mean,
        inv,
        ..
    } = moments(x, axes, eps, stash)?;
    let mut y = call("multiply", vec![centered, inv.clone()], &[])?;
    y = call("multiply", vec![y, st.widen(ctx.input(node, 1)?)?], &[])?;
    if let Some(b) = ctx.opt_input(node, 2)? {
        y = call("add", vec![y, st.widen(b)?], &[])?;
    }
    Ok(vec![st.restore(y)?, mean, inv])
}

fn softmax(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let op = if node.op_type == "LogSoftmax" {
        "nn.log_softmax"
    } else {
        "nn.softmax"
    };
    let default = if ctx.opset < 13 { 1 } else { -1 };
    let axis = super::norm_axis(node.attr_i("axis", default)?, xs.len())?;
    if ctx.opset >= 13 || axis == xs.len() - 1 {
        return Ok(vec![call(op, vec![x], &[("axis", (axis as i64).into())])?]);
    }
    // Before opset 13: the input is seen as 2-D [prod(dims[..axis]), prod(dims[axis..])].
    let flat = call("flatten", vec![x], &[("axis", (axis as i64).into())])?;
    let y = call(op, vec![flat], &[("axis", 1i64.into())])?;
    Ok(vec![call("reshape", vec![y], &[("newshape", xs.into())])?])
}

fn dropout(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let mut outs = vec![x.clone()];
    if node.outputs.get(1).is_some_and(|o| !o.is_empty()) {
        // Inference mode: the mask is all true.
        let s = shape_of(&x)?;
        let n = s.iter().product::<i64>() as usize;
        outs.push(constant(&vec![1.0; n], &s, kiln_ffi::DataType::bool())?);
    }
    Ok(outs)
}

/// LRN across channels: `x / (bias + alpha/size * sum of x^2 over the channel window)^beta`,
/// with the window sum as an average pool (count_include_pad) over a `[N, 1, C, H*W]` view.
fn lrn(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    if xs.len() < 3 {
        return Err(Msg(format!("LRN needs an input of rank >= 3, got {xs:?}")));
    }
    let size = node
        .opt_i("size")?
        .ok_or_else(|| Msg::from(node.missing_attr("size")))?;
    let alpha = node.attr_f("alpha", 1e-4)? as f64;
    let beta = node.attr_f("beta", 0.75)? as f64;
    let bias = node.attr_f("bias", 1.0)? as f64;
    let d = dtype_of(&x)?;
    let rest: i64 = xs[2..].iter().product();
    let sq = call("multiply", vec![x.clone(), x.clone()], &[])?;
    let view = call(
        "reshape",
        vec![sq],
        &[("newshape", vec![xs[0], 1, xs[1], rest].into())],
    )?;
    let (lo, hi) = ((size - 1) / 2, size - 1 - (size - 1) / 2);
    let avg = call(
        "nn.avg_pool2d",
        vec![view],
        &[
            ("pool_size", vec![size, 1].into()),
            ("padding", vec![lo, 0, hi, 0].into()),
            ("count_include_pad", true.into()),
        ],
    )?;
    let avg = call("reshape", vec![avg], &[("newshape", xs.into())])?;
    let scaled = call("multiply", vec![avg, scalar(alpha, d)?], &[])?;
    let base = call("add", vec![scaled, scalar(bias, d)?], &[])?;
    let den = call("power", vec![base, scalar(beta, d)?], &[])?;
    Ok(vec![call("divide", vec![x, den], &[])?])
}

/// InstanceNormalization: each (n, c) plane normalized over its spatial axes, then
/// `scale[c] * y + bias[c]`.
fn instance_norm(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    if xs.len() < 3 {
        return Err(Msg(format!("input must be [N, C, spatial...], got {xs:?}")));
    }
    let d = dtype_of(&x)?;
    let eps = node.attr_f("epsilon", 1e-5)? as f64;
    let axes: Vec<i64> = (2..xs.len() as i64).collect();
    let keep = [("axis", axes.into()), ("keepdims", true.into())];
    let mean = call("mean", vec![x.clone()], &keep)?;
    let centered = call("subtract", vec![x, mean], &[])?;
    let var = call(
        "mean",
        vec![call(
            "multiply",
            vec![centered.clone(), centered.clone()],
            &[],
        )?],
        &keep,
    )?;
    let inv = call(
        "rsqrt",
        vec![call("add", vec![var, scalar(eps, d)?], &[])?],
        &[],
    )?;
    let mut per_channel = vec![xs[1]];
    per_channel.extend(std::iter::repeat_n(1, xs.len() - 2));
    let channel = |e: Expr| {
        call(
            "reshape",
            vec![e],
            &[("newshape", per_channel.clone().into())],
        )
    };
    let y = call("multiply", vec![centered, inv], &[])?;
    let y = call("multiply", vec![y, channel(ctx.input(node, 1)?)?], &[])?;
    Ok(vec![call(
        "add",
        vec![y, channel(ctx.input(node, 2)?)?],
        &[],
    )?])
}

/// LpNormalization: `x / ||x||_p` along `axis` (p = 1 or 2).
fn lp_norm(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let axis = super::norm_axis(node.attr_i("axis", -1)?, xs.len())? as i64;
    let p = node.attr_i("p", 2)?;
    let keep = [("axis", vec![axis].into()), ("keepdims", true.into())];
    let norm = match p {
        1 => call("sum", vec![call("abs", vec![x.clone()], &[])?], &keep)?,
        2 => call(
            "sqrt",
            vec![call(
                "sum",
                vec![call("multiply", vec![x.clone(), x.clone()], &[])?],
                &keep,
            )?],
            &[],
        )?,
        _ => return Err(Msg(format!("p={p} is not 1 or 2"))),
    };
    Ok(vec![call("divide", vec![x, norm], &[])?])
}

/// RMSNormalization (opset 23): `x / sqrt(mean(x^2 over axis..) + epsilon) * scale`, computed
/// in float32 (the stash type) for narrower floats.
fn rms_norm(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let axis = super::norm_axis(node.attr_i("axis", -1)?, xs.len())?;
    let eps = node.attr_f("epsilon", 1e-5)? as f64;
    let st = Stash::of(dtype_of(&x)?);
    let x = st.widen(x)?;
    let stash = st.compute_dtype();
    let axes: Vec<i64> = (axis as i64..xs.len() as i64).collect();
    let ms = call(
        "mean",
        vec![call("multiply", vec![x.clone(), x.clone()], &[])?],
        &[("axis", axes.into()), ("keepdims", true.into())],
    )?;
    let inv = call(
        "rsqrt",
        vec![call("add", vec![ms, scalar(eps, stash)?], &[])?],
        &[],
    )?;
    let y = call("multiply", vec![x, inv], &[])?;
    let y = call("multiply", vec![y, st.widen(ctx.input(node, 1)?)?], &[])?;
    Ok(vec![st.restore(y)?])
}

/// Hardmax: 1 at the first largest element along `axis`, 0 elsewhere (before opset 13 over
/// the input coerced to 2-D at `axis`, as Softmax then).
fn hardmax(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let d = dtype_of(&x)?;
    let default = if ctx.opset < 13 { 1 } else { -1 };
    let axis = super::norm_axis(node.attr_i("axis", default)?, xs.len())?;
    let (work, axis_w) = if ctx.opset < 13 {
        let rows: i64 = xs[..axis].iter().product();
        let cols: i64 = xs[axis..].iter().product();
        let r = call("reshape", vec![x], &[("newshape", vec![rows, cols].into())])?;
        (r, 1usize)
    } else {
        (x, axis)
    };
    let ws = shape_of(&work)?;
    let idx = call(
        "argmax",
        vec![work],
        &[
            ("axis", vec![axis_w as i64].into()),
            ("keepdims", true.into()),
        ],
    )?;
    let n = ws[axis_w];
    let mut iota_shape = vec![1i64; ws.len()];
    iota_shape[axis_w] = n;
    let iota = call(
        "reshape",
        vec![super::const_i64(&(0..n).collect::<Vec<_>>())?],
        &[("newshape", iota_shape.into())],
    )?;
    let hot = call("equal", vec![iota, idx], &[])?;
    let y = call(
        "cast",
        vec![hot],
        &[("dtype", d.to_string().as_str().into())],
    )?;
    if ctx.opset < 13 {
        return Ok(vec![call("reshape", vec![y], &[("newshape", xs.into())])?]);
    }
    Ok(vec![y])
}

/// Registers this file's converters.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("Gemm", gemm);
    t.insert("MatMul", matmul);
    t.insert("Det", |ctx, node| {
        Ok(vec![call("det", vec![ctx.input(node, 0)?], &[])?])
    });
    t.insert("BatchNormalization", batch_norm);
    t.insert("LayerNormalization", layer_norm);
    t.insert("Softmax", softmax);
    t.insert("LogSoftmax", softmax);
    t.insert("Hardmax", hardmax);
    t.insert("InstanceNormalization", instance_norm);
    t.insert("LpNormalization", lp_norm);
    t.insert("RMSNormalization", rms_norm);
    t.insert("Dropout", dropout);
    t.insert("LRN", lrn);
}
