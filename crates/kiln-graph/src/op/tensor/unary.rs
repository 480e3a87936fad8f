//! Elementwise unary operators (one shape: same type in and out, pattern `ElemWise`), made by
//! one macro as in tract's `math/mod.rs`: exp, log, sqrt, rsqrt, abs, negative, floor, ceil,
//! round, reciprocal, logical_not, sigmoid, tanh, the trigonometric and hyperbolic functions
//! and their inverses, erf, nn.relu, nn.gelu, hard_sigmoid,
//! hard_swish, silu. Each has a reference evaluator.

use crate::ir::Type;
use crate::op::{eval, input, one, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_tir::DataTypeExt;
use kiln_topi::elemwise as ew;

fn same_type(ctx: &RelCtx<'_>) -> Result<Type> {
    ctx.tensor(0)?;
    Ok(ctx.args[0].clone())
}

fn bool_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (_, d) = ctx.tensor(0)?;
    if !d.is_bool() {
        return Err(ctx.err(format!("argument `data` must be bool, got {d}")));
    }
    Ok(ctx.args[0].clone())
}

/// The error function (Abramowitz-Stegun 7.1.26 refined; |error| < 1.5e-7).
pub fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.3275911 * x.abs());
    let y = 1.0
        - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
            + 0.254829592)
            * t
            * (-x * x).exp();
    if x >= 0.0 {
        y
    } else {
        -y
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

macro_rules! unary_ops {
    ($($name:literal => $f:expr, $topi:path),* $(,)?) => {
        /// The definitions of this family.
        pub(crate) fn defs(v: &mut Vec<OpDef>) {
            $(
                v.push(
                    OpDef::new($name, &["data"], OpPattern::ElemWise, same_type)
                        .eval(|a, _, ty| eval::unary(a, ty, $f))
                        .compute(|i, _, _| one($topi(input($name, i, 0)?))),
                );
            )*
            v.push(
                OpDef::new("logical_not", &["data"], OpPattern::ElemWise, bool_rel)
                    .eval(|a, _, ty| eval::unary(a, ty, |x| if x != 0.0 { 0.0 } else { 1.0 }))
                    .compute(|i, _, _| one(ew::logical_not(input("logical_not", i, 0)?))),
            );
        }
    };
}

unary_ops! {
    "exp" => f64::exp, ew::exp,
    "log" => f64::ln, ew::log,
    "sqrt" => f64::sqrt, ew::sqrt,
    "rsqrt" => |x: f64| 1.0 / x.sqrt(), ew::rsqrt,
    "abs" => f64::abs, ew::abs,
    "negative" => |x: f64| -x, ew::neg,
    "floor" => f64::floor, ew::floor,
    "ceil" => f64::ceil, ew::ceil,
    "round" => f64::round_ties_even, ew::round,
    "reciprocal" => |x: f64| 1.0 / x, ew::reciprocal,
    "sigmoid" => sigmoid, ew::sigmoid,
    "tanh" => f64::tanh, ew::tanh,
    "sin" => f64::sin, ew::sin,
    "cos" => f64::cos, ew::cos,
    "tan" => f64::tan, ew::tan,
    "asin" => f64::asin, ew::asin,
    "acos" => f64::acos, ew::acos,
    "atan" => f64::atan, ew::atan,
    "sinh" => f64::sinh, ew::sinh,
    "cosh" => f64::cosh, ew::cosh,
    "asinh" => f64::asinh, ew::asinh,
    "acosh" => f64::acosh, ew::acosh,
    "atanh" => f64::atanh, ew::atanh,
    "erf" => erf, ew::erf,
    "nn.relu" => |x: f64| x.max(0.0), ew::relu,
    "nn.gelu" => |x: f64| 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)), ew::gelu,
    "hard_sigmoid" => |x: f64| (x / 6.0 + 0.5).clamp(0.0, 1.0), hard_sigmoid,
    "hard_swish" => |x: f64| x * (x / 6.0 + 0.5).clamp(0.0, 1.0), ew::hard_swish,
    "silu" => |x: f64| x * sigmoid(x), ew::silu,
}

/// `hard_sigmoid` with its fixed ONNX-style slope 1/6 and offset 1/2 (the graph op's).
fn hard_sigmoid(x: &kiln_te::Tensor) -> Result<kiln_te::Tensor> {
    ew::hard_sigmoid(x, 1.0 / 6.0, 0.5)
}
