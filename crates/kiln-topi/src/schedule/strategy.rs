//! The operator strategy table (a sketch of TVM's `relay.op.strategy`): operator name ->
//! compute function + schedule function, for the graph compiler's lowering of fused
//! functions. Computes take the input tensors and the operator's attributes as an
//! [`OpAttrs`] value.

use super::{generic, x86, ScheduleFn};
use crate::nn;
use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::CpuDesc;

/// The attributes of any operator in the table.
#[derive(Clone, Debug, PartialEq)]
pub enum OpAttrs {
    /// No attributes.
    None,
    /// [`nn::conv2d`].
    Conv2d(nn::Conv2dAttrs),
    /// [`nn::conv2d_transpose`].
    Conv2dTranspose(nn::Conv2dTransposeAttrs),
    /// [`nn::matmul`] / [`nn::batch_matmul`].
    Matmul(nn::MatmulAttrs),
    /// [`nn::max_pool2d`] / [`nn::avg_pool2d`].
    Pool2d(nn::Pool2dAttrs),
    /// [`nn::softmax`] / [`nn::log_softmax`].
    Axis(i64),
    /// [`nn::layer_norm`].
    LayerNorm(nn::LayerNormAttrs),
    /// [`nn::batch_norm_inference`].
    BatchNorm(nn::BatchNormAttrs),
    /// [`nn::dense`] / [`nn::dense_packed`]: the output units (needed when packed).
    Dense(Option<i64>),
}

/// A compute function: inputs and attributes to the output tensor, for code that runs on the
/// given CPU (which picks between computes of the same operator, as TVM's strategies do).
pub type ComputeFn = fn(&[Tensor], &OpAttrs, &CpuDesc) -> Result<Tensor>;

/// One row of the table.
#[derive(Clone, Copy)]
pub struct Strategy {
    /// The operator name (ONNX-like graph names, `nn.conv2d` style).
    pub name: &'static str,
    /// Builds the output.
    pub compute: ComputeFn,
    /// The x86 schedule.
    pub schedule_x86: ScheduleFn,
    /// The generic fallback schedule.
    pub schedule_generic: ScheduleFn,
}

fn bad(name: &str, attrs: &OpAttrs) -> Error {
    Error::value_error(format!("{name}: unexpected attributes {attrs:?}"))
}

fn arg<'a>(name: &str, inputs: &'a [Tensor], i: usize) -> Result<&'a Tensor> {
    inputs
        .get(i)
        .ok_or_else(|| Error::value_error(format!("{name}: missing input {i}")))
}

fn conv2d(i: &[Tensor], a: &OpAttrs, cpu: &CpuDesc) -> Result<Tensor> {
    let OpAttrs::Conv2d(a) = a else {
        return Err(bad("nn.conv2d", a));
    };
    let (data, weight) = (arg("nn.conv2d", i, 0)?, arg("nn.conv2d", i, 1)?);
    if weight.ndim() == 5 {
        return nn::conv2d_packed(data, weight, a);
    }
    let ds = nn::const_shape(data, "nn.conv2d")?;
    let ws = nn::const_shape(weight, "nn.conv2d")?;
    if nn::conv2d_1x1::applies(&ds, &ws, a, cpu) {
        nn::conv2d_1x1(data, weight, a, cpu)
    } else {
        nn::conv2d(data, weight, a)
    }
}

fn conv2d_transpose(i: &[Tensor], a: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    let OpAttrs::Conv2dTranspose(a) = a else {
        return Err(bad("nn.conv2d_transpose", a));
    };
    nn::conv2d_transpose(
        arg("nn.conv2d_transpose", i, 0)?,
        arg("nn.conv2d_transpose", i, 1)?,
        a,
    )
}

fn dense(i: &[Tensor], a: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    let (data, weight) = (arg("nn.dense", i, 0)?, arg("nn.dense", i, 1)?);
    if weight.ndim() == 3 {
        let units = match a {
            OpAttrs::Dense(u) => *u,
            _ => None,
        };
        nn::dense_packed(data, weight, units, i.get(2))
    } else {
        nn::dense(data, weight, i.get(2))
    }
}

fn matmul_attrs(a: &OpAttrs) -> nn::MatmulAttrs {
    match a {
        OpAttrs::Matmul(m) => *m,
        _ => nn::MatmulAttrs::default(),
    }
}

fn matmul(i: &[Tensor], a: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    nn::matmul(
        arg("nn.matmul", i, 0)?,
        arg("nn.matmul", i, 1)?,
        &matmul_attrs(a),
    )
}

fn batch_matmul(i: &[Tensor], a: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    nn::batch_matmul(
        arg("nn.batch_matmul", i, 0)?,
        arg("nn.batch_matmul", i, 1)?,
        &matmul_attrs(a),
    )
}

fn max_pool2d(i: &[Tensor], a: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    let OpAttrs::Pool2d(a) = a else {
        return Err(bad("nn.max_pool2d", a));
    };
    nn::max_pool2d(arg("nn.max_pool2d", i, 0)?, a)
}

fn avg_pool2d(i: &[Tensor], a: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    let OpAttrs::Pool2d(a) = a else {
        return Err(bad("nn.avg_pool2d", a));
    };
    nn::avg_pool2d(arg("nn.avg_pool2d", i, 0)?, a)
}

fn global_max_pool2d(i: &[Tensor], _: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    nn::global_max_pool2d(arg("nn.global_max_pool2d", i, 0)?)
}

fn global_avg_pool2d(i: &[Tensor], _: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    nn::global_avg_pool2d(arg("nn.global_avg_pool2d", i, 0)?)
}

fn axis(a: &OpAttrs) -> i64 {
    match a {
        OpAttrs::Axis(x) => *x,
        _ => -1,
    }
}

fn softmax(i: &[Tensor], a: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    nn::softmax(arg("nn.softmax", i, 0)?, axis(a))
}

fn log_softmax(i: &[Tensor], a: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    nn::log_softmax(arg("nn.log_softmax", i, 0)?, axis(a))
}

fn layer_norm(i: &[Tensor], a: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    let OpAttrs::LayerNorm(a) = a else {
        return Err(bad("nn.layer_norm", a));
    };
    nn::layer_norm(arg("nn.layer_norm", i, 0)?, i.get(1), i.get(2), a)
}

fn batch_norm(i: &[Tensor], a: &OpAttrs, _: &CpuDesc) -> Result<Tensor> {
    let a = match a {
        OpAttrs::BatchNorm(b) => *b,
        _ => nn::BatchNormAttrs::default(),
    };
    let n = "nn.batch_norm";
    nn::batch_norm_inference(
        arg(n, i, 0)?,
        arg(n, i, 1)?,
        arg(n, i, 2)?,
        arg(n, i, 3)?,
        arg(n, i, 4)?,
        &a,
    )
}

const fn row(name: &'static str, compute: ComputeFn, schedule_x86: ScheduleFn) -> Strategy {
    Strategy {
        name,
        compute,
        schedule_x86,
        schedule_generic: generic::schedule_generic,
    }
}

/// The table: every operator of [`crate::nn`] with its compute and schedules. The injective,
/// broadcast, reduction and layout operators schedule with
/// [`generic::schedule_injective`] / [`generic::schedule_reduce`].
pub static STRATEGIES: &[Strategy] = &[
    row("nn.conv2d", conv2d, x86::schedule_conv2d_nchw),
    row(
        "nn.conv2d_transpose",
        conv2d_transpose,
        x86::schedule_conv2d_nchw,
    ),
    row("nn.dense", dense, x86::schedule_dense),
    row("nn.matmul", matmul, x86::schedule_dense),
    row("nn.batch_matmul", batch_matmul, x86::schedule_dense),
    row("nn.max_pool2d", max_pool2d, x86::schedule_pool),
    row("nn.avg_pool2d", avg_pool2d, x86::schedule_pool),
    row(
        "nn.global_max_pool2d",
        global_max_pool2d,
        x86::schedule_pool,
    ),
    row(
        "nn.global_avg_pool2d",
        global_avg_pool2d,
        x86::schedule_pool,
    ),
    row("nn.softmax", softmax, x86::schedule_softmax),
    row("nn.log_softmax", log_softmax, x86::schedule_softmax),
    row("nn.layer_norm", layer_norm, x86::schedule_layer_norm),
    row("nn.batch_norm", batch_norm, generic::schedule_injective),
];

/// The strategy of operator `name`.
pub fn lookup(name: &str) -> Option<&'static Strategy> {
    STRATEGIES.iter().find(|s| s.name == name)
}

/// The schedule to use for `target` (x86 for `llvm` targets, the generic fallback otherwise).
pub fn schedule_for(strategy: &Strategy, target: &str) -> ScheduleFn {
    if target.starts_with("llvm") && !target.contains("aarch64") && !target.contains("arm") {
        strategy.schedule_x86
    } else {
        strategy.schedule_generic
    }
}
