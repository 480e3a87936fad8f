//! Building expressions the way one writes them: operators (`a + b * 2`), comparison and logic
//! methods (`i.lt(n)`), and TVM's free functions (`floordiv`, `floormod`, `min`, `max`, `cast`,
//! `select`).
//!
//! Rust literals adapt to the other operand's dtype (`x + 1` with `x: int64` adds an `int64`
//! constant; `y * 2.0` with `y: float32` a `float32` one). As TVM's `operator+`, these builders
//! fold constants (`2 + 3` is `5`, `x * 1` is `x`); the checked constructors
//! (`PrimExpr::try_binary`) build exactly the node asked for.
//!
//! # Panics
//! On operands of different dtypes (or a float literal with an integer expression), with a
//! `TypeError` message naming both types; use `PrimExpr::try_*` to get the error instead.

use super::{BinOp, PrimExpr, Var};
use crate::dtype::DataTypeExt;
use kiln_ffi::{DataType, Result};

/// An operand: an expression or variable, or a Rust literal that takes the other operand's type.
#[derive(Clone, Debug)]
pub enum Operand {
    /// An expression.
    Expr(PrimExpr),
    /// An integer literal.
    Int(i64),
    /// A float literal.
    Float(f64),
    /// A bool literal.
    Bool(bool),
}

impl From<PrimExpr> for Operand {
    fn from(e: PrimExpr) -> Self {
        Operand::Expr(e)
    }
}
impl From<&PrimExpr> for Operand {
    fn from(e: &PrimExpr) -> Self {
        Operand::Expr(e.clone())
    }
}
impl From<Var> for Operand {
    fn from(v: Var) -> Self {
        Operand::Expr(v.into())
    }
}
impl From<&Var> for Operand {
    fn from(v: &Var) -> Self {
        Operand::Expr(v.into())
    }
}
impl From<i64> for Operand {
    fn from(v: i64) -> Self {
        Operand::Int(v)
    }
}
impl From<i32> for Operand {
    fn from(v: i32) -> Self {
        Operand::Int(v as i64)
    }
}
impl From<f64> for Operand {
    fn from(v: f64) -> Self {
        Operand::Float(v)
    }
}
impl From<bool> for Operand {
    fn from(v: bool) -> Self {
        Operand::Bool(v)
    }
}

impl Operand {
    /// The operand as an expression of its own default type: int literals are `int32` (`int64`
    /// when too large), floats `float32`, bools `bool`.
    pub fn into_expr(self) -> PrimExpr {
        match self {
            Operand::Expr(e) => e,
            Operand::Int(v) => {
                if DataType::int(32).fits_int(v) {
                    PrimExpr::i32(v)
                } else {
                    PrimExpr::i64(v)
                }
            }
            Operand::Float(v) => PrimExpr::f32(v),
            Operand::Bool(b) => PrimExpr::bool(b),
        }
    }

    /// The operand as an expression of type `dtype` (literals only; expressions are returned
    /// as they are).
    pub fn into_expr_of(self, dtype: DataType) -> Result<PrimExpr> {
        let e = match self {
            Operand::Expr(e) => return Ok(e),
            Operand::Float(v) if !dtype.is_floating() => {
                return Err(kiln_ffi::Error::type_error(format!(
                    "float literal {v:?} used with an expression of type {dtype}"
                )))
            }
            // Rounded once, to `dtype` (not first to float32).
            Operand::Float(v) => PrimExpr::f64(v),
            other => other.into_expr(),
        };
        super::adapt_literal(e, dtype)
    }
}

/// Resolves two operands into expressions of a common type (literals adapt to expressions).
pub fn operands(a: impl Into<Operand>, b: impl Into<Operand>) -> Result<(PrimExpr, PrimExpr)> {
    match (a.into(), b.into()) {
        (Operand::Expr(a), b) => {
            let t = a.dtype();
            Ok((a, b.into_expr_of(t)?))
        }
        (a, Operand::Expr(b)) => {
            let t = b.dtype();
            Ok((a.into_expr_of(t)?, b))
        }
        (a, b) => {
            let (a, b) = (a.into_expr(), b.into_expr());
            if a.dtype() == b.dtype() {
                Ok((a, b))
            } else if a.dtype().is_floating() {
                Ok((a.clone(), Operand::Expr(b).into_expr_of(a.dtype())?))
            } else {
                let t = b.dtype();
                Ok((Operand::Expr(a).into_expr_of(t)?, b))
            }
        }
    }
}

/// `a op b` with literal adaptation and constant folding (TVM's `operator+` and friends).
pub fn try_build_binary(
    op: BinOp,
    a: impl Into<Operand>,
    b: impl Into<Operand>,
) -> Result<PrimExpr> {
    let (a, b) = operands(a, b)?;
    let e = PrimExpr::try_binary(op, a, b)?;
    Ok(crate::arith::const_fold::try_fold(&e).unwrap_or(e))
}

/// `a op b` with literal adaptation and constant folding.
///
/// # Panics
/// When the operand types do not match (see the module docs).
pub fn build_binary(op: BinOp, a: impl Into<Operand>, b: impl Into<Operand>) -> PrimExpr {
    try_build_binary(op, a, b).unwrap_or_else(|e| panic!("{e}"))
}

macro_rules! binary_fns {
    ($($name:ident => $op:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        ///
        /// # Panics
        /// When the operand types do not match.
        pub fn $name(a: impl Into<Operand>, b: impl Into<Operand>) -> PrimExpr {
            build_binary(BinOp::$op, a, b)
        }
    )*};
}

binary_fns! {
    floordiv => FloorDiv, "Division rounding toward negative infinity.";
    floormod => FloorMod, "Remainder of [`floordiv`] (takes the divisor's sign).";
    truncdiv => Div, "Division rounding toward zero (C's `/` on integers; `/` on floats).";
    truncmod => Mod, "Remainder of [`truncdiv`] (C's `%`).";
    min => Min, "The smaller of two values.";
    max => Max, "The larger of two values.";
    equal => Eq, "`a == b`.";
    not_equal => Ne, "`a != b`.";
    less => Lt, "`a < b`.";
    less_equal => Le, "`a <= b`.";
    greater => Gt, "`a > b`.";
    greater_equal => Ge, "`a >= b`.";
    logical_and => And, "`a and b` of bools.";
    logical_or => Or, "`a or b` of bools.";
}

/// `not a`, folding constants.
///
/// # Panics
/// When `a` is not bool.
pub fn logical_not(a: impl Into<Operand>) -> PrimExpr {
    let a = a.into().into_expr();
    let e = PrimExpr::try_not(a).unwrap_or_else(|e| panic!("{e}"));
    crate::arith::const_fold::try_fold(&e).unwrap_or(e)
}

/// `value` converted to `dtype` (no node when it already has that type; constants fold).
///
/// # Panics
/// When the lane counts differ.
pub fn cast(dtype: DataType, value: impl Into<Operand>) -> PrimExpr {
    let value = value.into().into_expr();
    if value.dtype() == dtype {
        return value;
    }
    let e = PrimExpr::try_cast(dtype, value).unwrap_or_else(|e| panic!("{e}"));
    crate::arith::const_fold::try_fold(&e).unwrap_or(e)
}

/// `cond ? t : f` (both sides evaluated).
///
/// # Panics
/// When `cond` is not bool or the values' types differ.
pub fn select(cond: impl Into<Operand>, t: impl Into<Operand>, f: impl Into<Operand>) -> PrimExpr {
    let cond = cond.into().into_expr();
    let (t, f) = operands(t, f).unwrap_or_else(|e| panic!("{e}"));
    PrimExpr::try_select(cond, t, f).unwrap_or_else(|e| panic!("{e}"))
}

/// `let var = value in body`.
///
/// # Panics
/// When `value`'s type is not `var`'s.
pub fn let_expr(var: &Var, value: impl Into<Operand>, body: impl Into<Operand>) -> PrimExpr {
    let value = value
        .into()
        .into_expr_of(var.dtype())
        .unwrap_or_else(|e| panic!("{e}"));
    PrimExpr::try_let(var.clone(), value, body.into().into_expr()).unwrap_or_else(|e| panic!("{e}"))
}

impl PrimExpr {
    /// `self < b`.
    pub fn lt(&self, b: impl Into<Operand>) -> PrimExpr {
        less(self, b)
    }
    /// `self <= b`.
    pub fn le(&self, b: impl Into<Operand>) -> PrimExpr {
        less_equal(self, b)
    }
    /// `self > b`.
    pub fn gt(&self, b: impl Into<Operand>) -> PrimExpr {
        greater(self, b)
    }
    /// `self >= b`.
    pub fn ge(&self, b: impl Into<Operand>) -> PrimExpr {
        greater_equal(self, b)
    }
    /// `self == b` (an expression; use structural equality to compare IR).
    pub fn equal(&self, b: impl Into<Operand>) -> PrimExpr {
        equal(self, b)
    }
    /// `self != b`.
    pub fn not_equal(&self, b: impl Into<Operand>) -> PrimExpr {
        not_equal(self, b)
    }
    /// `self and b`.
    pub fn logical_and(&self, b: impl Into<Operand>) -> PrimExpr {
        logical_and(self, b)
    }
    /// `self or b`.
    pub fn logical_or(&self, b: impl Into<Operand>) -> PrimExpr {
        logical_or(self, b)
    }
    /// `not self`.
    pub fn logical_not(&self) -> PrimExpr {
        logical_not(self)
    }
    /// `self` converted to `dtype`.
    pub fn cast(&self, dtype: DataType) -> PrimExpr {
        cast(dtype, self)
    }
}

impl Var {
    /// `self < b`.
    pub fn lt(&self, b: impl Into<Operand>) -> PrimExpr {
        less(self, b)
    }
    /// `self <= b`.
    pub fn le(&self, b: impl Into<Operand>) -> PrimExpr {
        less_equal(self, b)
    }
    /// `self > b`.
    pub fn gt(&self, b: impl Into<Operand>) -> PrimExpr {
        greater(self, b)
    }
    /// `self >= b`.
    pub fn ge(&self, b: impl Into<Operand>) -> PrimExpr {
        greater_equal(self, b)
    }
    /// `self == b` as an expression.
    pub fn equal(&self, b: impl Into<Operand>) -> PrimExpr {
        equal(self, b)
    }
    /// `self != b` as an expression.
    pub fn not_equal(&self, b: impl Into<Operand>) -> PrimExpr {
        not_equal(self, b)
    }
    /// `self` converted to `dtype`.
    pub fn cast(&self, dtype: DataType) -> PrimExpr {
        cast(dtype, self)
    }
}

macro_rules! arith_ops {
    ($($trait:ident :: $method:ident => $op:ident;)*) => {$(
        impl<R: Into<Operand>> std::ops::$trait<R> for PrimExpr {
            type Output = PrimExpr;
            fn $method(self, r: R) -> PrimExpr {
                build_binary(BinOp::$op, self, r)
            }
        }
        impl<R: Into<Operand>> std::ops::$trait<R> for &PrimExpr {
            type Output = PrimExpr;
            fn $method(self, r: R) -> PrimExpr {
                build_binary(BinOp::$op, self, r)
            }
        }
        impl<R: Into<Operand>> std::ops::$trait<R> for Var {
            type Output = PrimExpr;
            fn $method(self, r: R) -> PrimExpr {
                build_binary(BinOp::$op, self, r)
            }
        }
        impl<R: Into<Operand>> std::ops::$trait<R> for &Var {
            type Output = PrimExpr;
            fn $method(self, r: R) -> PrimExpr {
                build_binary(BinOp::$op, self, r)
            }
        }
        arith_ops!(@lit $trait :: $method => $op; i64, f64);
    )*};
    (@lit $trait:ident :: $method:ident => $op:ident; $($lit:ty),*) => {$(
        impl std::ops::$trait<PrimExpr> for $lit {
            type Output = PrimExpr;
            fn $method(self, r: PrimExpr) -> PrimExpr {
                build_binary(BinOp::$op, self, r)
            }
        }
        impl std::ops::$trait<&PrimExpr> for $lit {
            type Output = PrimExpr;
            fn $method(self, r: &PrimExpr) -> PrimExpr {
                build_binary(BinOp::$op, self, r)
            }
        }
        impl std::ops::$trait<Var> for $lit {
            type Output = PrimExpr;
            fn $method(self, r: Var) -> PrimExpr {
                build_binary(BinOp::$op, self, r)
            }
        }
        impl std::ops::$trait<&Var> for $lit {
            type Output = PrimExpr;
            fn $method(self, r: &Var) -> PrimExpr {
                build_binary(BinOp::$op, self, r)
            }
        }
    )*};
}

arith_ops! {
    Add::add => Add;
    Sub::sub => Sub;
    Mul::mul => Mul;
    Div::div => Div;
    Rem::rem => Mod;
}

macro_rules! neg_op {
    ($($t:ty),*) => {$(
        impl std::ops::Neg for $t {
            type Output = PrimExpr;
            /// `0 - x`.
            fn neg(self) -> PrimExpr {
                build_binary(BinOp::Sub, 0, self)
            }
        }
    )*};
}
neg_op!(PrimExpr, &PrimExpr, Var, &Var);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::ExprKind;

    #[test]
    fn literals_adapt_and_constants_fold() {
        let x = Var::new("x", DataType::int(64));
        let e = &x + 1;
        assert_eq!(e.dtype(), DataType::int(64));
        match e.kind() {
            ExprKind::Binary(BinOp::Add, a, b) => {
                assert!(a.as_var().unwrap() == x);
                assert_eq!(b.as_int(), Some(1));
                assert_eq!(b.dtype(), DataType::int(64));
            }
            k => panic!("unexpected {k:?}"),
        }
        assert_eq!((PrimExpr::i32(2) + 3).as_int(), Some(5));
        assert!((&x * 1).as_var().is_some());
        let y = Var::new("y", DataType::float(32));
        assert_eq!((&y * 2.0).dtype(), DataType::float(32));
        assert_eq!((2 * &y).dtype(), DataType::float(32));
        assert_eq!(x.lt(10).dtype(), DataType::bool());
    }

    #[test]
    fn mismatched_types_are_type_errors() {
        let x = Var::int32("x");
        let y = Var::new("y", DataType::float(32));
        let e = try_build_binary(BinOp::Add, &x, &y).unwrap_err();
        assert_eq!(e.kind(), "TypeError");
        assert!(
            e.message()
                .contains("tir.Add needs operands of one dtype, got int32 (x) and float32 (y)"),
            "{}",
            e.message()
        );
        assert!(try_build_binary(BinOp::Add, &x, 1.5).is_err());
        assert!(PrimExpr::try_binary(BinOp::And, x.to_expr(), x.to_expr()).is_err());
        let r = std::panic::catch_unwind(|| Var::int32("a") + Var::new("b", DataType::int(64)));
        assert!(r.is_err());
    }
}
