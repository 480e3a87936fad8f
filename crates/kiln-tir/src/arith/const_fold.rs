//! Constant folding of single nodes: operators on constants (with the machine's semantics: integer
//! wrap-around at the type's width, unsigned arithmetic for `uint`, C truncation for `Div`/`Mod`,
//! `float32` rounding), casts of constants, and the identities that need no analysis
//! (`x + 0`, `x * 1`, `x * 0` on integers, `true and x`, ...). Vector constants (`Broadcast` of
//! a constant) fold lane-wise.

use crate::dtype::DataTypeExt;
use crate::expr::{BinOp, ExprKind, PrimExpr};
use kiln_ffi::DataType;

/// A scalar constant, seen through a `Broadcast`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Const {
    Int(i64),
    Float(f64),
}

/// The constant `e` is (a broadcast constant counts), if any.
pub(crate) fn const_of(e: &PrimExpr) -> Option<Const> {
    match e.kind() {
        ExprKind::IntImm(v) => Some(Const::Int(v)),
        ExprKind::FloatImm(v) => Some(Const::Float(v)),
        ExprKind::Broadcast { value, .. } => const_of(value),
        _ => None,
    }
}

fn is_int_const(e: &PrimExpr, v: i64) -> bool {
    const_of(e) == Some(Const::Int(v))
}

fn is_zero(e: &PrimExpr) -> bool {
    matches!(const_of(e), Some(Const::Int(0))) || const_of(e) == Some(Const::Float(0.0))
}

fn is_one(e: &PrimExpr) -> bool {
    matches!(const_of(e), Some(Const::Int(1))) || const_of(e) == Some(Const::Float(1.0))
}

/// Floor division of integers (`b != 0`), in i128 so `MIN / -1` cannot overflow.
pub(crate) fn floor_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// Remainder of floor division (sign of `b`).
pub(crate) fn floor_mod(a: i128, b: i128) -> i128 {
    a - b * floor_div(a, b)
}

/// Folds integer `a op b` in the operand type `t`; `None` for division by zero.
pub(crate) fn fold_int(op: BinOp, t: DataType, a: i64, b: i64) -> Option<i64> {
    let elem = t.element_of();
    let unsigned = elem.is_uint();
    let (x, y): (i128, i128) = if unsigned {
        (a as u64 as i128, b as u64 as i128)
    } else {
        (a as i128, b as i128)
    };
    let r: i128 = match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod if y == 0 => return None,
        BinOp::Div => x / y,
        BinOp::Mod => x % y,
        BinOp::FloorDiv => floor_div(x, y),
        BinOp::FloorMod => floor_mod(x, y),
        BinOp::Min => x.min(y),
        BinOp::Max => x.max(y),
        BinOp::Eq => return Some((x == y) as i64),
        BinOp::Ne => return Some((x != y) as i64),
        BinOp::Lt => return Some((x < y) as i64),
        BinOp::Le => return Some((x <= y) as i64),
        BinOp::Gt => return Some((x > y) as i64),
        BinOp::Ge => return Some((x >= y) as i64),
        BinOp::And => return Some((x != 0 && y != 0) as i64),
        BinOp::Or => return Some((x != 0 || y != 0) as i64),
    };
    Some(elem.wrap_int(r as i64))
}

fn fold_float(op: BinOp, t: DataType, a: f64, b: f64) -> Option<PrimExpr> {
    if !(t.bits() == 32 || t.bits() == 64) || !t.is_float() {
        return None;
    }
    let v = match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div if b != 0.0 => a / b,
        BinOp::FloorDiv if b != 0.0 => (a / b).floor(),
        BinOp::FloorMod if b != 0.0 => a - (a / b).floor() * b,
        BinOp::Min => a.min(b),
        BinOp::Max => a.max(b),
        BinOp::Eq => return Some(bool_of(t, a == b)),
        BinOp::Ne => return Some(bool_of(t, a != b)),
        BinOp::Lt => return Some(bool_of(t, a < b)),
        BinOp::Le => return Some(bool_of(t, a <= b)),
        BinOp::Gt => return Some(bool_of(t, a > b)),
        BinOp::Ge => return Some(bool_of(t, a >= b)),
        _ => return None,
    };
    Some(PrimExpr::const_float(t, v))
}

fn bool_of(operand_t: DataType, v: bool) -> PrimExpr {
    PrimExpr::const_int(DataType::bool().with_lanes(operand_t.lanes()), v as i64)
}

/// Folds `a op b` (operands of one type); `None` when nothing folds.
pub(crate) fn fold_binary(op: BinOp, a: &PrimExpr, b: &PrimExpr) -> Option<PrimExpr> {
    let t = a.dtype();
    match (const_of(a), const_of(b)) {
        (Some(Const::Int(x)), Some(Const::Int(y))) => {
            let v = fold_int(op, t, x, y)?;
            return Some(if op.is_comparison() {
                bool_of(t, v != 0)
            } else {
                PrimExpr::const_int(t, v)
            });
        }
        (Some(Const::Float(x)), Some(Const::Float(y))) => return fold_float(op, t, x, y),
        _ => {}
    }
    let int = t.is_integer();
    match op {
        BinOp::Add if is_zero(b) => Some(a.clone()),
        BinOp::Add if is_zero(a) => Some(b.clone()),
        BinOp::Sub if is_zero(b) => Some(a.clone()),
        BinOp::Mul if is_one(b) => Some(a.clone()),
        BinOp::Mul if is_one(a) => Some(b.clone()),
        BinOp::Mul if int && (is_int_const(a, 0) || is_int_const(b, 0)) => {
            Some(PrimExpr::const_int(t, 0))
        }
        BinOp::Div | BinOp::FloorDiv if is_one(b) => Some(a.clone()),
        BinOp::Mod | BinOp::FloorMod if int && (is_int_const(b, 1) || is_int_const(b, -1)) => {
            Some(PrimExpr::const_int(t, 0))
        }
        // 0 / x is 0 wherever it is defined (x == 0 is undefined behaviour).
        BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod
            if int && is_int_const(a, 0) =>
        {
            Some(a.clone())
        }
        BinOp::And if t.is_bool() => match (const_of(a), const_of(b)) {
            (Some(Const::Int(0)), _) => Some(a.clone()),
            (_, Some(Const::Int(0))) => Some(b.clone()),
            (Some(Const::Int(_)), _) => Some(b.clone()),
            (_, Some(Const::Int(_))) => Some(a.clone()),
            _ => None,
        },
        BinOp::Or if t.is_bool() => match (const_of(a), const_of(b)) {
            (Some(Const::Int(0)), _) => Some(b.clone()),
            (_, Some(Const::Int(0))) => Some(a.clone()),
            (Some(Const::Int(_)), _) => Some(a.clone()),
            (_, Some(Const::Int(_))) => Some(b.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// Folds a cast of a constant (or a cast to the value's own type).
pub(crate) fn fold_cast(t: DataType, v: &PrimExpr) -> Option<PrimExpr> {
    let s = v.dtype();
    if s == t {
        return Some(v.clone());
    }
    let out = match const_of(v)? {
        Const::Int(x) => {
            if t.is_floating() {
                let f = if s.is_uint() {
                    x as u64 as f64
                } else {
                    x as f64
                };
                PrimExpr::const_float(t, f)
            } else if t.is_bool() {
                PrimExpr::const_int(t, (x != 0) as i64)
            } else if t.is_integer() {
                PrimExpr::const_int(t, x)
            } else {
                return None;
            }
        }
        Const::Float(f) => {
            if t.is_floating() {
                PrimExpr::const_float(t, f)
            } else if t.is_bool() {
                PrimExpr::const_int(t, (f != 0.0) as i64)
            } else if t.is_integer() {
                // Out-of-range conversions are undefined in C: leave them to run time.
                let x = f.trunc();
                if !x.is_finite() || x < t.int_min() as f64 || x > t.int_max() as f64 {
                    return None;
                }
                PrimExpr::const_int(t, x as i64)
            } else {
                return None;
            }
        }
    };
    Some(out)
}

/// Folds one node whose operands are constants, or an identity (`x + 0`, `x * 1`, ...); `None`
/// when nothing applies. What the expression builders apply, as TVM's `operator+` does.
pub fn try_fold(e: &PrimExpr) -> Option<PrimExpr> {
    match e.kind() {
        ExprKind::Binary(op, a, b) => fold_binary(op, a, b),
        ExprKind::Not(a) => match const_of(a)? {
            Const::Int(v) => Some(PrimExpr::const_int(e.dtype(), (v == 0) as i64)),
            Const::Float(_) => None,
        },
        ExprKind::Cast(v) => fold_cast(e.dtype(), v),
        ExprKind::Select { cond, t, f } => match const_of(cond)? {
            Const::Int(0) => Some(f.clone()),
            Const::Int(_) => Some(t.clone()),
            Const::Float(_) => None,
        },
        ExprKind::Call { op, args } => match (op, args) {
            ("tir.if_then_else", [c, t, f]) => match const_of(c)? {
                Const::Int(0) => Some(f.clone()),
                Const::Int(_) => Some(t.clone()),
                Const::Float(_) => None,
            },
            ("tir.likely", [c]) if c.is_const() => Some(c.clone()),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{cast, floordiv, floormod, truncdiv, truncmod, Var};

    #[test]
    fn integer_semantics() {
        let i = |v| PrimExpr::i32(v);
        assert_eq!(truncdiv(i(-7), i(2)).as_int(), Some(-3));
        assert_eq!(truncmod(i(-7), i(2)).as_int(), Some(-1));
        assert_eq!(floordiv(i(-7), i(2)).as_int(), Some(-4));
        assert_eq!(floormod(i(-7), i(2)).as_int(), Some(1));
        assert_eq!(floormod(i(7), i(-2)).as_int(), Some(-1));
        assert_eq!(
            (i(i32::MAX as i64) + 1).as_int(),
            Some(i32::MIN as i64),
            "wraps"
        );
        let u = DataType::uint(8);
        let a = PrimExpr::const_int(u, 250);
        assert_eq!((&a + 10).as_int(), Some(4));
        assert_eq!(
            a.gt(PrimExpr::const_int(u, 3)).as_int(),
            Some(1),
            "unsigned compare"
        );
        // Division by zero is left alone.
        assert!(truncdiv(i(1), i(0)).as_int().is_none());
    }

    #[test]
    fn floats_casts_and_identities() {
        let f = PrimExpr::f32(0.1) + PrimExpr::f32(0.2);
        assert_eq!(
            f.as_float(),
            Some((0.1f32 as f64 + 0.2f32 as f64) as f32 as f64)
        );
        assert_eq!(
            cast(DataType::int(32), PrimExpr::f32(-2.7)).as_int(),
            Some(-2)
        );
        assert_eq!(
            cast(DataType::uint(8), PrimExpr::i32(300)).as_int(),
            Some(44)
        );
        assert_eq!(
            cast(DataType::float(32), PrimExpr::i32(3)).as_float(),
            Some(3.0)
        );
        assert!(cast(DataType::int(8), PrimExpr::f32(1e10))
            .as_int()
            .is_none());
        let x = Var::int32("x");
        assert!((&x + 0).as_var().is_some());
        assert_eq!((&x * 0).as_int(), Some(0));
        assert_eq!(floormod(&x, 1).as_int(), Some(0));
        let c = x.lt(3);
        assert!(c.logical_and(true).same_as(&c));
        assert_eq!(c.logical_and(false).as_int(), Some(0));
        assert_eq!(c.logical_or(true).as_int(), Some(1));
        let v = PrimExpr::const_int(DataType::int(32).with_lanes(4), 3);
        let w = &v * PrimExpr::const_int(DataType::int(32).with_lanes(4), 2);
        assert_eq!(const_of(&w), Some(Const::Int(6)));
        assert_eq!(w.dtype().lanes(), 4);
    }
}
