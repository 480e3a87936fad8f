//! Constant integer bounds (`const_int_bound`): an interval `[min, max]` that an integer
//! expression's value is known to lie in, from the ranges of its variables, interval arithmetic
//! and the rules of each operator. Infinite ends are `NEG_INF` / `POS_INF`.

use super::const_fold::floor_div;
use super::Analyzer;
use crate::dtype::DataTypeExt;
use crate::expr::{BinOp, ExprKind, PrimExpr, Var};
use kiln_ffi::DataType;
use std::collections::HashMap;

/// "No upper limit".
pub const POS_INF: i64 = i64::MAX;
/// "No lower limit".
pub const NEG_INF: i64 = -i64::MAX;

/// A closed interval of integers, possibly unbounded at either end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConstIntBound {
    /// The smallest possible value (`NEG_INF`: unknown).
    pub min: i64,
    /// The largest possible value (`POS_INF`: unknown).
    pub max: i64,
}

impl ConstIntBound {
    /// `[min, max]`, with a minimum below `NEG_INF` clamped to it.
    pub fn new(min: i64, max: i64) -> Self {
        ConstIntBound {
            min: min.max(NEG_INF),
            max,
        }
    }

    /// Nothing known.
    pub fn everything() -> Self {
        ConstIntBound::new(NEG_INF, POS_INF)
    }

    /// Exactly `v`.
    pub fn single(v: i64) -> Self {
        ConstIntBound::new(v, v)
    }

    /// The values an integer (or bool) type can hold.
    pub fn of_type(t: DataType) -> Self {
        if t.is_bool() {
            ConstIntBound::new(0, 1)
        } else if t.is_integer() {
            ConstIntBound::new(t.int_min(), t.int_max())
        } else {
            ConstIntBound::everything()
        }
    }

    /// True when only one value is possible.
    pub fn is_single(&self) -> bool {
        self.min == self.max
    }

    /// The values in both.
    pub fn intersect(self, o: ConstIntBound) -> Self {
        ConstIntBound::new(self.min.max(o.min), self.max.min(o.max))
    }

    /// The values in either.
    pub fn union(self, o: ConstIntBound) -> Self {
        ConstIntBound::new(self.min.min(o.min), self.max.max(o.max))
    }
}

fn is_pos_inf(x: i64) -> bool {
    x == POS_INF
}
fn is_neg_inf(x: i64) -> bool {
    x <= NEG_INF
}

fn clamp(x: i128) -> i64 {
    x.clamp(NEG_INF as i128, POS_INF as i128) as i64
}

/// `x + y` for bound ends, keeping infinities infinite.
fn add_end(x: i64, y: i64) -> i64 {
    if is_pos_inf(x) || is_pos_inf(y) {
        if is_neg_inf(x) || is_neg_inf(y) {
            // inf - inf: nothing is known; callers only use this for matching ends.
            return 0;
        }
        return POS_INF;
    }
    if is_neg_inf(x) || is_neg_inf(y) {
        return NEG_INF;
    }
    clamp(x as i128 + y as i128)
}

fn neg_end(x: i64) -> i64 {
    if is_pos_inf(x) {
        NEG_INF
    } else if is_neg_inf(x) {
        POS_INF
    } else {
        -x
    }
}

fn mul_end(x: i64, y: i64) -> i64 {
    if x == 0 || y == 0 {
        return 0;
    }
    let inf = is_pos_inf(x) || is_neg_inf(x) || is_pos_inf(y) || is_neg_inf(y);
    if inf {
        return if (x > 0) == (y > 0) { POS_INF } else { NEG_INF };
    }
    clamp(x as i128 * y as i128)
}

/// `x / y` rounded toward zero (`trunc`) or down (`floor`); `y` finite and non-zero.
fn div_end(x: i64, y: i64, floor: bool) -> i64 {
    if is_pos_inf(x) || is_neg_inf(x) {
        return if (x > 0) == (y > 0) { POS_INF } else { NEG_INF };
    }
    let (a, b) = (x as i128, y as i128);
    clamp(if floor { floor_div(a, b) } else { a / b })
}

fn corners(a: ConstIntBound, b: ConstIntBound, f: impl Fn(i64, i64) -> i64) -> ConstIntBound {
    let v = [
        f(a.min, b.min),
        f(a.min, b.max),
        f(a.max, b.min),
        f(a.max, b.max),
    ];
    ConstIntBound::new(*v.iter().min().unwrap(), *v.iter().max().unwrap())
}

/// Bound analysis with the analyzer's variable ranges plus let-bound variables met on the way.
pub(crate) struct BoundCtx<'a> {
    pub(crate) an: &'a Analyzer,
    pub(crate) local: HashMap<Var, ConstIntBound>,
}

impl<'a> BoundCtx<'a> {
    pub(crate) fn new(an: &'a Analyzer) -> Self {
        BoundCtx {
            an,
            local: HashMap::new(),
        }
    }

    pub(crate) fn bound(&mut self, e: &PrimExpr) -> ConstIntBound {
        let t = e.dtype();
        if !(t.is_integer() || t.is_bool()) {
            return ConstIntBound::everything();
        }
        let b = self.raw_bound(e);
        b.intersect(ConstIntBound::of_type(t.element_of()))
    }

    fn var_bound(&mut self, v: &Var) -> ConstIntBound {
        if let Some(b) = self.local.get(v) {
            return *b;
        }
        if let Some(b) = self.an.var_bound(v) {
            return b;
        }
        if let Some(value) = self.an.var_value(v) {
            let value = value.clone();
            return self.bound(&value);
        }
        let t = ConstIntBound::of_type(v.dtype());
        if v.is_size_var() {
            t.intersect(ConstIntBound::new(0, POS_INF))
        } else {
            t
        }
    }

    fn raw_bound(&mut self, e: &PrimExpr) -> ConstIntBound {
        match e.kind() {
            ExprKind::IntImm(v) => {
                if e.dtype().is_uint() && v < 0 {
                    ConstIntBound::new(POS_INF, POS_INF)
                } else {
                    ConstIntBound::single(v)
                }
            }
            ExprKind::Var(v) => self.var_bound(&v),
            ExprKind::Binary(op, a, b) => self.binary(op, a, b),
            ExprKind::Not(_) => ConstIntBound::new(0, 1),
            ExprKind::Cast(v) => {
                let s = v.dtype();
                let inner = if s.is_integer() || s.is_bool() {
                    self.bound(v)
                } else {
                    ConstIntBound::everything()
                };
                let target = ConstIntBound::of_type(e.dtype());
                // The value survives only when it fits the target type.
                if inner.min >= target.min && inner.max <= target.max {
                    inner
                } else {
                    target
                }
            }
            ExprKind::Select { t, f, .. } => self.bound(t).union(self.bound(f)),
            ExprKind::Let { var, value, body } => {
                let vb = self.bound(value);
                let old = self.local.insert(var.clone(), vb);
                let r = self.bound(body);
                match old {
                    Some(o) => self.local.insert(var.clone(), o),
                    None => self.local.remove(var),
                };
                r
            }
            ExprKind::Ramp {
                base,
                stride,
                lanes,
            } => {
                let b = self.bound(base);
                let s = self.bound(stride);
                let last = corners(s, ConstIntBound::single(lanes - 1), mul_end);
                let end = corners(b, last, add_end);
                b.union(end)
            }
            ExprKind::Broadcast { value, .. } => self.bound(value),
            ExprKind::Call { op, args } => match (op, args) {
                ("tir.if_then_else", [_, t, f]) => self.bound(t).union(self.bound(f)),
                ("tir.likely", [c]) => self.bound(c),
                _ => ConstIntBound::of_type(e.dtype()),
            },
            _ => ConstIntBound::of_type(e.dtype()),
        }
    }

    fn binary(&mut self, op: BinOp, a: &PrimExpr, b: &PrimExpr) -> ConstIntBound {
        if op.is_comparison() || op.is_logical() {
            // A comparison with a known outcome is folded by the simplifier, not here.
            return ConstIntBound::new(0, 1);
        }
        let (x, y) = (self.bound(a), self.bound(b));
        match op {
            BinOp::Add => ConstIntBound::new(add_end(x.min, y.min), add_end(x.max, y.max)),
            BinOp::Sub => ConstIntBound::new(
                add_end(x.min, neg_end(y.max)),
                add_end(x.max, neg_end(y.min)),
            ),
            BinOp::Mul => corners(x, y, mul_end),
            BinOp::Div | BinOp::FloorDiv => {
                if y.min > 0 || y.max < 0 {
                    // Monotone in each operand on either side of zero: the corners bound it.
                    // An unbounded divisor end behaves as a huge divisor (quotient near 0).
                    let far = |v: i64| {
                        if is_pos_inf(v) {
                            1 << 62
                        } else if is_neg_inf(v) {
                            -(1 << 62)
                        } else {
                            v
                        }
                    };
                    let y = ConstIntBound::new(far(y.min), far(y.max));
                    let floor = op == BinOp::FloorDiv;
                    corners(x, y, |p, q| div_end(p, q, floor))
                } else {
                    ConstIntBound::everything()
                }
            }
            BinOp::FloorMod => {
                if y.min > 0 {
                    let m = if is_pos_inf(y.max) {
                        POS_INF
                    } else {
                        y.max - 1
                    };
                    if x.min >= 0 && x.max <= m && x.max < y.min {
                        x
                    } else if x.min >= 0 {
                        ConstIntBound::new(0, m.min(x.max))
                    } else {
                        ConstIntBound::new(0, m)
                    }
                } else if y.max < 0 {
                    let m = if is_neg_inf(y.min) {
                        NEG_INF
                    } else {
                        y.min + 1
                    };
                    ConstIntBound::new(m, 0)
                } else {
                    ConstIntBound::everything()
                }
            }
            BinOp::Mod => {
                // The remainder takes the dividend's sign and is smaller than |divisor|.
                let ymax = y
                    .min
                    .unsigned_abs()
                    .max(y.max.unsigned_abs())
                    .min(POS_INF as u64) as i64;
                if y.min > 0 || y.max < 0 {
                    let m = if ymax == POS_INF { POS_INF } else { ymax - 1 };
                    let lo = if x.min >= 0 { 0 } else { (-m).max(x.min) };
                    let hi = if x.max <= 0 { 0 } else { m.min(x.max) };
                    if x.min >= 0 && x.max < y.min.abs().min(y.max.abs()) {
                        x
                    } else {
                        ConstIntBound::new(lo, hi)
                    }
                } else {
                    ConstIntBound::everything()
                }
            }
            BinOp::Min => ConstIntBound::new(x.min.min(y.min), x.max.min(y.max)),
            BinOp::Max => ConstIntBound::new(x.min.max(y.min), x.max.max(y.max)),
            _ => ConstIntBound::everything(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{floordiv, floormod, max, min, truncdiv, truncmod};
    use crate::function::Range;

    #[test]
    fn bounds_follow_each_operator() {
        let x = Var::int32("x");
        let y = Var::int32("y");
        let mut an = Analyzer::new();
        an.bind(&x, &Range::from_min_extent(0, 8));
        an.bind(&y, &Range::from_min_extent(-4, 8));
        let b = |e: PrimExpr| {
            let r = an.const_int_bound(&e);
            (r.min, r.max)
        };
        assert_eq!(b(x.to_expr()), (0, 7));
        assert_eq!(b(&x * 4 + &y), (-4, 31));
        assert_eq!(b(&x - &y), (-3, 11));
        assert_eq!(b(&x * &y), (-28, 21));
        assert_eq!(b(floordiv(&y, 2)), (-2, 1));
        assert_eq!(b(truncdiv(&y, 2)), (-2, 1));
        assert_eq!(b(floormod(&y, 3)), (0, 2));
        assert_eq!(b(floormod(&x, 16)), (0, 7));
        assert_eq!(b(truncmod(&y, 3)), (-2, 2));
        assert_eq!(b(min(&x, &y)), (-4, 3));
        assert_eq!(b(max(&x, 3)), (3, 7));
        assert_eq!(
            b(floordiv(&x, &y)),
            (i32::MIN as i64, i32::MAX as i64),
            "divisor may be 0"
        );
        let z = Var::size_var("n", DataType::int(32));
        assert_eq!(b(z.to_expr()).0, 0);
        let u = Var::new("u", DataType::uint(8));
        assert_eq!(b(u.to_expr()), (0, 255));
    }
}
