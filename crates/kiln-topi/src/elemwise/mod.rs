//! Elementwise unary operators: one output point from the same point of one input.
//!
//! Simple operators come from the [`unary!`] table below (one line each, in tract's style);
//! those with parameters or a longer formula have their own files ([`clip()`], [`gelu()`],
//! [`hard_sigmoid()`], [`hard_swish()`], [`cast()`]). Every function returns a new tensor of
//! the input's shape tagged `elemwise`; float-only operators give a `TypeError` on other
//! dtypes.

mod cast;
mod clip;
mod gelu;
mod hard;
pub mod narrow_cast;

pub use cast::{cast, cast_with};
pub use clip::clip;
pub use gelu::{gelu, gelu_expr};
pub use hard::{hard_sigmoid, hard_sigmoid_expr, hard_swish};

use crate::tag;
use crate::transform::util::{compute_tagged, constant, require_float, var_exprs};
use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::{op, DataTypeExt, PrimExpr};

/// `f(x[i])` for every point of `x`, named `name` and tagged `elemwise`.
pub fn map(x: &Tensor, name: &str, f: impl FnOnce(PrimExpr) -> PrimExpr) -> Result<Tensor> {
    compute_tagged(x.shape(), |i| f(x.at(&var_exprs(i))), name, tag::ELEMWISE)
}

/// `1 / (1 + exp(-x))` of a float expression.
pub fn sigmoid_expr(x: PrimExpr) -> PrimExpr {
    let t = x.dtype();
    constant(t, 1.0) / (constant(t, 1.0) + op::exp(-x))
}

fn float_only(x: &Tensor, name: &str) -> Result<()> {
    require_float(x, name)
}

fn any_type(_: &Tensor, _: &str) -> Result<()> {
    Ok(())
}

fn integer_only(x: &Tensor, name: &str) -> Result<()> {
    if x.dtype().is_integer() && !x.dtype().is_bool() {
        Ok(())
    } else {
        Err(Error::type_error(format!(
            "{name}: needs an integer tensor, `{}` is {}",
            x.name(),
            x.dtype()
        )))
    }
}

fn bool_or_number(x: &Tensor, name: &str) -> Result<()> {
    if x.dtype().is_handle() {
        Err(Error::type_error(format!("{name}: handles have no values")))
    } else {
        Ok(())
    }
}

/// Declares unary operators: `name, check, |x| formula, doc`.
macro_rules! unary {
    ($($name:ident, $check:ident, |$x:ident| $body:expr, $doc:literal;)*) => {$(
        #[doc = $doc]
        ///
        /// # Errors
        /// A `TypeError` when the input's dtype does not suit the operator.
        pub fn $name(x: &Tensor) -> Result<Tensor> {
            $check(x, stringify!($name))?;
            map(x, stringify!($name), |$x: PrimExpr| $body)
        }
    )*};
}

unary! {
    relu, any_type, |x| { let z = constant(x.dtype(), 0.0); kiln_tir::max(x, z) },
        "`max(x, 0)`.";
    sigmoid, float_only, |x| sigmoid_expr(x), "`1 / (1 + exp(-x))`.";
    tanh, float_only, |x| op::tanh(x), "`tanh(x)`.";
    sin, float_only, |x| op::sin(x), "`sin(x)`.";
    cos, float_only, |x| op::cos(x), "`cos(x)`.";
    tan, float_only, |x| op::tan(x), "`tan(x)`.";
    asin, float_only, |x| op::asin(x), "`asin(x)`.";
    acos, float_only, |x| op::acos(x), "`acos(x)`.";
    atan, float_only, |x| op::atan(x), "`atan(x)`.";
    sinh, float_only, |x| op::sinh(x), "`sinh(x)`.";
    cosh, float_only, |x| op::cosh(x), "`cosh(x)`.";
    asinh, float_only, |x| op::asinh(x), "`asinh(x)`.";
    acosh, float_only, |x| op::acosh(x), "`acosh(x)`.";
    atanh, float_only, |x| op::atanh(x), "`atanh(x)`.";
    erf, float_only, |x| op::erf(x), "The error function.";
    silu, float_only, |x| x.clone() * sigmoid_expr(x), "`x * sigmoid(x)` (swish).";
    exp, float_only, |x| op::exp(x), "`e^x`.";
    log, float_only, |x| op::log(x), "The natural logarithm.";
    sqrt, float_only, |x| op::sqrt(x), "The square root.";
    rsqrt, float_only, |x| { let t = x.dtype(); constant(t, 1.0) / op::sqrt(x) },
        "`1 / sqrt(x)`.";
    abs, any_type, |x| op::abs(x), "`|x|`.";
    neg, any_type, |x| -x, "`-x`.";
    floor, float_only, |x| op::floor(x), "Rounds toward negative infinity.";
    ceil, float_only, |x| op::ceil(x), "Rounds toward positive infinity.";
    round, float_only, |x| op::nearbyint(x),
        "Rounds to the nearest integer, ties to even (numpy's and ONNX's `Round`).";
    reciprocal, float_only, |x| { let t = x.dtype(); constant(t, 1.0) / x }, "`1 / x`.";
    bitwise_not, integer_only, |x| op::bitwise_not(x), "`~x` of integers (ONNX `BitwiseNot`).";
    logical_not, bool_or_number, |x| {
        if x.dtype().is_bool() { kiln_tir::logical_not(x) } else { let z = constant(x.dtype(), 0.0); x.equal(z) }
    }, "`not x` (a bool tensor; numbers are true when non-zero).";
}
