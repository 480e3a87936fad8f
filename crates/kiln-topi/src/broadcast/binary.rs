//! Binary operators with broadcasting: arithmetic, `power`, `maximum`/`minimum`, floor
//! division and modulo, comparisons (bool results), logical `and`/`or`/`xor` and integer shifts.

use super::shape::{broadcast_index, broadcast_shape};
use crate::tag;
use crate::transform::util::{compute_tagged, constant};
use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::{DataTypeExt, PrimExpr};

/// `f(a[ia], b[ib])` over the broadcast shape of `a` and `b`, named `name` and tagged
/// `broadcast`. Both operands must have one dtype.
///
/// # Errors
/// A `ValueError` when the shapes do not broadcast, a `TypeError` when the dtypes differ.
pub fn broadcast_binary(
    a: &Tensor,
    b: &Tensor,
    name: &str,
    f: impl FnOnce(PrimExpr, PrimExpr) -> PrimExpr,
) -> Result<Tensor> {
    if a.dtype() != b.dtype() {
        return Err(Error::type_error(format!(
            "{name}: operands have different dtypes: `{}` is {} and `{}` is {} (cast one first)",
            a.name(),
            a.dtype(),
            b.name(),
            b.dtype()
        )));
    }
    let shape =
        broadcast_shape(a.shape(), b.shape()).map_err(|e| e.context(format!("in `{name}`")))?;
    compute_tagged(
        &shape,
        |i| {
            f(
                a.at(&broadcast_index(a, i, &shape)),
                b.at(&broadcast_index(b, i, &shape)),
            )
        },
        name,
        tag::BROADCAST,
    )
}

fn truthy(x: PrimExpr) -> PrimExpr {
    if x.dtype().is_bool() {
        x
    } else {
        let z = constant(x.dtype(), 0.0);
        x.not_equal(z)
    }
}

macro_rules! binary {
    ($($name:ident, $float_only:expr, |$a:ident, $b:ident| $body:expr, $doc:literal;)*) => {$(
        #[doc = $doc]
        ///
        /// # Errors
        /// A `ValueError` when the shapes do not broadcast; a `TypeError` when the dtypes
        /// differ or do not suit the operator.
        pub fn $name(a: &Tensor, b: &Tensor) -> Result<Tensor> {
            if $float_only && !a.dtype().is_floating() {
                return Err(Error::type_error(format!(
                    "{}: needs float operands, `{}` is {}",
                    stringify!($name),
                    a.name(),
                    a.dtype()
                )));
            }
            broadcast_binary(a, b, stringify!($name), |$a: PrimExpr, $b: PrimExpr| $body)
        }
    )*};
}

binary! {
    add, false, |x, y| x + y, "`a + b`.";
    subtract, false, |x, y| x - y, "`a - b`.";
    multiply, false, |x, y| x * y, "`a * b`.";
    divide, false, |x, y| x / y,
        "`a / b`: true division for floats, division truncating toward zero for integers \
         (ONNX `Div`, C).";
    power, true, |x, y| kiln_tir::op::pow(x, y), "`a ** b` of floats.";
    maximum, false, |x, y| kiln_tir::max(x, y), "The larger of `a` and `b`.";
    minimum, false, |x, y| kiln_tir::min(x, y), "The smaller of `a` and `b`.";
    equal, false, |x, y| x.equal(y), "`a == b` (bool).";
    not_equal, false, |x, y| x.not_equal(y), "`a != b` (bool).";
    less, false, |x, y| x.lt(y), "`a < b` (bool).";
    less_equal, false, |x, y| x.le(y), "`a <= b` (bool).";
    greater, false, |x, y| x.gt(y), "`a > b` (bool).";
    greater_equal, false, |x, y| x.ge(y), "`a >= b` (bool).";
    logical_and, false, |x, y| truthy(x).logical_and(truthy(y)),
        "`a and b` (bool; numbers are true when non-zero).";
    logical_or, false, |x, y| truthy(x).logical_or(truthy(y)),
        "`a or b` (bool; numbers are true when non-zero).";
    logical_xor, false, |x, y| truthy(x).not_equal(truthy(y)),
        "`a xor b` (bool; numbers are true when non-zero).";
    floor_divide, false, |x, y| {
        if x.dtype().is_floating() { kiln_tir::op::floor(x / y) } else { kiln_tir::floordiv(x, y) }
    }, "`a // b`: division rounding toward negative infinity (numpy's `floor_divide`).";
    floor_mod, false, |x, y| {
        if x.dtype().is_floating() {
            x.clone() - kiln_tir::op::floor(x / y.clone()) * y
        } else {
            kiln_tir::floormod(x, y)
        }
    }, "`a - (a // b) * b`: the remainder with the divisor's sign (numpy's `mod`).";
    trunc_mod, false, |x, y| {
        if x.dtype().is_floating() {
            let q = x.clone() / y.clone();
            let zero = constant(q.dtype(), 0.0);
            let t = kiln_tir::select(q.clone().ge(zero), kiln_tir::op::floor(q.clone()), kiln_tir::op::ceil(q));
            x - t * y
        } else {
            kiln_tir::truncmod(x, y)
        }
    }, "The remainder with the dividend's sign (C's `fmod`, ONNX `Mod` with `fmod=1`).";
}

/// `a op b` elementwise for integer operands (`op` a bitwise TIR builder), broadcast.
fn integer_binary(
    a: &Tensor,
    b: &Tensor,
    name: &str,
    f: fn(PrimExpr, PrimExpr) -> PrimExpr,
) -> Result<Tensor> {
    if !a.dtype().is_integer() || a.dtype().is_bool() {
        return Err(Error::type_error(format!(
            "{name}: needs integer operands, `{}` is {}",
            a.name(),
            a.dtype()
        )));
    }
    broadcast_binary(a, b, name, f)
}

/// `a & b` of integers (ONNX `BitwiseAnd`).
///
/// # Errors
/// A `ValueError` when the shapes do not broadcast; a `TypeError` for non-integer operands or
/// dtypes that differ.
pub fn bitwise_and(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    integer_binary(a, b, "bitwise_and", kiln_tir::op::bitwise_and)
}

/// `a | b` of integers (ONNX `BitwiseOr`).
///
/// # Errors
/// As [`bitwise_and`].
pub fn bitwise_or(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    integer_binary(a, b, "bitwise_or", kiln_tir::op::bitwise_or)
}

/// `a ^ b` of integers (ONNX `BitwiseXor`).
///
/// # Errors
/// As [`bitwise_and`].
pub fn bitwise_xor(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    integer_binary(a, b, "bitwise_xor", kiln_tir::op::bitwise_xor)
}

fn shift(a: &Tensor, b: &Tensor, left: bool) -> Result<Tensor> {
    let name = if left { "left_shift" } else { "right_shift" };
    if !a.dtype().is_integer() {
        return Err(Error::type_error(format!(
            "{name}: needs integer operands, `{}` is {}",
            a.name(),
            a.dtype()
        )));
    }
    broadcast_binary(a, b, name, |x, y| {
        if left {
            kiln_tir::op::shift_left(x, y)
        } else {
            kiln_tir::op::shift_right(x, y)
        }
    })
}

/// `a << b` of integers (ONNX `BitShift` LEFT: bits shifted out are lost).
///
/// # Errors
/// A `ValueError` when the shapes do not broadcast; a `TypeError` for non-integer operands or
/// dtypes that differ.
pub fn left_shift(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    shift(a, b, true)
}

/// `a >> b` of integers (ONNX `BitShift` RIGHT; logical for unsigned types, arithmetic for
/// signed ones).
///
/// # Errors
/// A `ValueError` when the shapes do not broadcast; a `TypeError` for non-integer operands or
/// dtypes that differ.
pub fn right_shift(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    shift(a, b, false)
}
