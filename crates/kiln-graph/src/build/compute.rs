//! The compute table of the graph build (TVM's `FTVMCompute` per op): a graph operator call,
//! its input tensor expressions and its attributes to the TOPI compute that makes its
//! output(s).
//!
//! Operators of [`kiln_topi::schedule::strategy::STRATEGIES`] (conv2d, conv2d_transpose,
//! dense, matmul, batch_matmul, pooling, softmax, layer norm) go through the strategy's compute
//! with their attributes mapped by [`strategy_attrs`];
//! elementwise, broadcast, reduction and layout operators call their TOPI function here.

use crate::ir::Attrs;
use kiln_ffi::{DataType, Error, Result};
use kiln_te::Tensor;
use kiln_tir::CpuDesc;
use kiln_topi::nn::{self, Conv2dAttrs, MatmulAttrs, Padding2d, Pool2dAttrs};
use kiln_topi::schedule::strategy::OpAttrs;
use kiln_topi::{broadcast as bc, elemwise as ew, reduce, transform as tf};

fn pair(v: &[i64], what: &str) -> Result<(i64, i64)> {
    match v {
        [a] => Ok((*a, *a)),
        [a, b] => Ok((*a, *b)),
        _ => Err(Error::value_error(format!(
            "`{what}` needs 1 or 2 values, got {v:?}"
        ))),
    }
}

fn padding(v: &[i64]) -> Result<Padding2d> {
    match v {
        [p] => Ok(Padding2d::same(*p)),
        [h, w] => Ok(Padding2d::from_array([*h, *w, *h, *w])),
        [t, l, b, r] => Ok(Padding2d::from_array([*t, *l, *b, *r])),
        _ => Err(Error::value_error(format!(
            "`padding` needs 1, 2 or 4 values, got {v:?}"
        ))),
    }
}

/// The strategy-table attributes of an operator call (see [`OpAttrs`]).
pub fn strategy_attrs(op: &str, a: &Attrs<'_>) -> Result<OpAttrs> {
    Ok(match op {
        "nn.conv2d" => OpAttrs::Conv2d(Conv2dAttrs {
            strides: pair(&a.ints("strides")?, "strides")?,
            padding: padding(&a.ints("padding")?)?,
            dilation: pair(&a.ints("dilation")?, "dilation")?,
            groups: a.int("groups")?,
            channels: a.opt_int("channels")?,
        }),
        "nn.conv2d_transpose" => OpAttrs::Conv2dTranspose(nn::Conv2dTransposeAttrs {
            strides: pair(&a.ints("strides")?, "strides")?,
            padding: padding(&a.ints("padding")?)?,
            output_padding: pair(&a.ints("output_padding")?, "output_padding")?,
            dilation: pair(&a.ints("dilation")?, "dilation")?,
            groups: a.int("groups")?,
        }),
        "nn.max_pool2d" | "nn.avg_pool2d" => OpAttrs::Pool2d(Pool2dAttrs {
            pool_size: pair(&a.ints("pool_size")?, "pool_size")?,
            strides: pair(&a.ints("strides")?, "strides")?,
            dilation: pair(&a.ints("dilation")?, "dilation")?,
            padding: padding(&a.ints("padding")?)?,
            ceil_mode: a.bool("ceil_mode")?,
            count_include_pad: op == "nn.avg_pool2d" && a.bool("count_include_pad")?,
        }),
        "nn.matmul" | "nn.batch_matmul" => OpAttrs::Matmul(MatmulAttrs {
            transpose_a: a.bool("transpose_a")?,
            transpose_b: a.bool("transpose_b")?,
        }),
        "nn.softmax" | "nn.log_softmax" => OpAttrs::Axis(a.int("axis")?),
        "nn.dense" => OpAttrs::Dense(a.opt_int("units")?),
        "nn.layer_norm" => OpAttrs::LayerNorm(nn::LayerNormAttrs {
            axes: vec![a.int("axis")?],
            epsilon: a.float("epsilon")?,
        }),
        _ => OpAttrs::None,
    })
}

fn one(t: Result<Tensor>) -> Result<Vec<Tensor>> {
    t.map(|t| vec![t])
}

fn arg<'a>(op: &str, i: &'a [Tensor], k: usize) -> Result<&'a Tensor> {
    i.get(k)
        .ok_or_else(|| Error::value_error(format!("{op}: missing argument {k}")))
}

/// Reduction axes from `axis`/`exclude` (None: every axis).
fn reduce_axes(a: &Attrs<'_>, ndim: usize) -> Result<Option<Vec<i64>>> {
    let axes = a.opt_ints("axis")?;
    if !a.bool("exclude").unwrap_or(false) {
        return Ok(axes);
    }
    let listed: Vec<usize> = axes
        .unwrap_or_default()
        .iter()
        .map(|&x| crate::op::normalize_axis(x, ndim).map_err(Error::value_error))
        .collect::<Result<_>>()?;
    Ok(Some(
        (0..ndim as i64)
            .filter(|d| !listed.contains(&(*d as usize)))
            .collect(),
    ))
}

/// `bias` `[C]` added along `axis` of `data` (`nn.bias_add`).
fn bias_add(data: &Tensor, bias: &Tensor, axis: i64) -> Result<Tensor> {
    let nd = data.ndim();
    let ax = crate::op::normalize_axis(axis, nd).map_err(Error::value_error)?;
    let c = bias.shape()[0]
        .as_int()
        .ok_or_else(|| Error::value_error("nn.bias_add: symbolic bias"))?;
    let mut shape = vec![c];
    shape.extend(std::iter::repeat_n(1, nd - ax - 1));
    let b = if shape.len() == 1 {
        bias.clone()
    } else {
        tf::reshape(bias, &shape)?
    };
    bc::add(data, &b)
}

/// The output tensor(s) of operator `op` on `inputs` with attributes `a`, for code that runs
/// on `cpu`.
pub fn compute(op: &str, inputs: &[Tensor], a: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<Tensor>> {
    let x = || arg(op, inputs, 0);
    let y = || arg(op, inputs, 1);
    if let Some(s) = kiln_topi::schedule::strategy::lookup(op) {
        // batch_norm is a tuple-valued graph op that SimplifyInference rewrites away.
        if op != "nn.batch_norm" {
            return one((s.compute)(inputs, &strategy_attrs(op, a)?, cpu));
        }
    }
    match op {
        "nn.relu" => one(ew::relu(x()?)),
        "sigmoid" => one(ew::sigmoid(x()?)),
        "tanh" => one(ew::tanh(x()?)),
        "erf" => one(ew::erf(x()?)),
        "silu" => one(ew::silu(x()?)),
        "exp" => one(ew::exp(x()?)),
        "log" => one(ew::log(x()?)),
        "sqrt" => one(ew::sqrt(x()?)),
        "rsqrt" => one(ew::rsqrt(x()?)),
        "abs" => one(ew::abs(x()?)),
        "negative" => one(ew::neg(x()?)),
        "floor" => one(ew::floor(x()?)),
        "ceil" => one(ew::ceil(x()?)),
        "round" => one(ew::round(x()?)),
        "reciprocal" => one(ew::reciprocal(x()?)),
        "logical_not" => one(ew::logical_not(x()?)),
        "nn.gelu" => one(ew::gelu(x()?)),
        "hard_sigmoid" => one(ew::hard_sigmoid(x()?, 1.0 / 6.0, 0.5)),
        "hard_swish" => one(ew::hard_swish(x()?)),
        "clip" => one(ew::clip(x()?, a.float("a_min")?, a.float("a_max")?)),
        "cast" => {
            let d: DataType = a
                .str("dtype")?
                .parse()
                .map_err(|_| Error::value_error("cast: bad dtype"))?;
            one(ew::cast(x()?, d))
        }
        "add" => one(bc::add(x()?, y()?)),
        "subtract" => one(bc::subtract(x()?, y()?)),
        "multiply" => one(bc::multiply(x()?, y()?)),
        "divide" => one(bc::divide(x()?, y()?)),
        "power" => one(bc::power(x()?, y()?)),
        "maximum" => one(bc::maximum(x()?, y()?)),
        "minimum" => one(bc::minimum(x()?, y()?)),
        "equal" => one(bc::equal(x()?, y()?)),
        "not_equal" => one(bc::not_equal(x()?, y()?)),
        "less" => one(bc::less(x()?, y()?)),
        "less_equal" => one(bc::less_equal(x()?, y()?)),
        "greater" => one(bc::greater(x()?, y()?)),
        "greater_equal" => one(bc::greater_equal(x()?, y()?)),
        "logical_and" => one(bc::logical_and(x()?, y()?)),
        "logical_or" => one(bc::logical_or(x()?, y()?)),
        "where" => one(bc::where_(x()?, y()?, arg(op, inputs, 2)?)),
        "nn.bias_add" => one(bias_add(x()?, y()?, a.int("axis")?)),
        "broadcast_to" => one(bc::broadcast_to(x()?, &a.ints("shape")?)),
        "sum" | "mean" | "max" | "min" | "prod" => {
            let t = x()?;
            let axes = reduce_axes(a, t.ndim())?;
            let keep = a.bool("keepdims")?;
            let f = match op {
                "sum" => reduce::sum,
                "mean" => reduce::mean,
                "max" => reduce::max,
                "min" => reduce::min,
                _ => reduce::prod,
            };
            one(f(t, axes.as_deref(), keep))
        }
        "argmax" | "argmin" => {
            let t = x()?;
            let axis = a.opt_ints("axis")?.and_then(|v| v.first().copied());
            let keep = a.bool("keepdims")?;
            if op == "argmax" {
                one(reduce::argmax(t, axis, keep))
            } else {
                one(reduce::argmin(t, axis, keep))
            }
        }
        "reshape" => one(tf::reshape(x()?, &a.ints("newshape")?)),
        "flatten" => one(tf::flatten(x()?, a.int("axis")?)),
        "transpose" => one(tf::transpose(x()?, a.opt_ints("axes")?.as_deref())),
        "layout_transform" => one(tf::layout_transform(
            x()?,
            &a.str("src_layout")?,
            &a.str("dst_layout")?,
        )),
        "squeeze" => one(tf::squeeze(x()?, a.opt_ints("axis")?.as_deref())),
        "expand_dims" => one(tf::expand_dims(
            x()?,
            a.int("axis")?,
            a.int("num_newaxis")? as usize,
        )),
        "concatenate" => one(tf::concatenate(inputs, a.int("axis")?)),
        "strided_slice" => one(tf::strided_slice(
            x()?,
            &a.ints("begin")?,
            &a.ints("end")?,
            a.opt_ints("strides")?.as_deref(),
            a.opt_ints("axes")?.as_deref(),
        )),
        "take" => {
            let axis = a
                .opt_int("axis")?
                .ok_or_else(|| Error::value_error("take: only an explicit `axis` is supported"))?;
            one(tf::take(x()?, y()?, axis))
        }
        "nn.pad" => {
            let w = a.ints("pad_width")?;
            let before: Vec<i64> = w.iter().step_by(2).copied().collect();
            let after: Vec<i64> = w.iter().skip(1).step_by(2).copied().collect();
            let mode = match a.str("pad_mode")?.as_str() {
                "edge" => tf::PadMode::Edge,
                "reflect" => tf::PadMode::Reflect,
                _ => tf::PadMode::Constant(a.float("pad_value")?),
            };
            one(tf::pad(x()?, &before, &after, mode))
        }
        "split" => {
            let spec = match (a.opt_int("sections")?, a.opt_ints("indices")?) {
                (Some(n), _) => tf::SplitSpec::Sections(n as usize),
                (None, Some(ix)) => tf::SplitSpec::Indices(ix),
                (None, None) => {
                    return Err(Error::value_error("split: needs `sections` or `indices`"))
                }
            };
            tf::split(x()?, &spec, a.int("axis")?)
        }
        _ => Err(Error::value_error(format!(
            "graph build: operator `{op}` has no TOPI compute in the build's table"
        ))),
    }
}
