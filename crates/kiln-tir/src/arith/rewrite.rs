//! The expression simplifier: a bottom-up rewrite that applies, at each node whose children are
//! already simple, constant folding, the canonical linear form (integer `+ - * / %`), and rules
//! that use bounds and known facts: comparisons decided or normalized, `min`/`max` chosen,
//! `and`/`or`/`not` folded, selects and `if_then_else` with known conditions, lets inlined, and
//! ramp/broadcast arithmetic for vectors.

use super::canonical::{is_canonical_type, simplify_arith, Sum};
use super::const_fold::{const_of, try_fold};
use super::Analyzer;
use crate::dtype::DataTypeExt;
use crate::expr::{BinOp, ExprKind, PrimExpr};
use crate::mutator::{mutate_expr_children, ExprMutator};
use crate::structural::structural_equal;
use crate::visitor::uses_var;

/// Simplifies `e` with the facts and ranges of `an` (repeating until nothing changes, at most
/// a few rounds); returns `e` itself when it is already simple.
pub(crate) fn simplify(an: &mut Analyzer, e: &PrimExpr) -> PrimExpr {
    let mut cur = e.clone();
    for _ in 0..4 {
        let next = Rewriter { an: &mut *an }.mutate_expr(&cur);
        if next.same_as(&cur) || structural_equal(&next, &cur) {
            break;
        }
        cur = next;
    }
    if structural_equal(&cur, e) {
        e.clone()
    } else {
        cur
    }
}

struct Rewriter<'a> {
    an: &'a mut Analyzer,
}

impl ExprMutator for Rewriter<'_> {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        match e.kind() {
            ExprKind::Let { var, value, body } => {
                let value = self.mutate_expr(value);
                let inline = value.is_const() || value.as_var().is_some();
                let body = if inline {
                    self.an
                        .scoped_value(var, value.clone(), |an| simplify(an, body))
                } else {
                    let b = self.an.const_int_bound(&value);
                    self.an
                        .scoped_bound(var, b, |an| Rewriter { an }.mutate_expr(body))
                };
                if inline || !uses_var(&body, var) {
                    body
                } else {
                    PrimExpr::let_raw(var.clone(), value, body)
                }
            }
            _ => {
                let rebuilt = mutate_expr_children(self, e);
                self.rewrite(&rebuilt)
            }
        }
    }
}

fn bool_const(v: bool) -> PrimExpr {
    PrimExpr::bool(v)
}

impl Rewriter<'_> {
    fn sub(&mut self, e: &PrimExpr) -> PrimExpr {
        self.mutate_expr(e)
    }

    fn rewrite(&mut self, e: &PrimExpr) -> PrimExpr {
        if let Some(f) = try_fold(e) {
            return f;
        }
        if e.dtype() == kiln_ffi::DataType::bool() {
            if let Some(v) = self.an.known(e) {
                return bool_const(v);
            }
        }
        let t = e.dtype();
        match e.kind() {
            ExprKind::Var(v) => match self.an.var_value(&v) {
                Some(x) => x.clone(),
                None => e.clone(),
            },
            ExprKind::Binary(op, a, b) => {
                let ot = a.dtype();
                if ot.is_vector() {
                    if let Some(r) = self.vector(op, a, b) {
                        return r;
                    }
                    return e.clone();
                }
                match op {
                    BinOp::Min | BinOp::Max => self.min_max(op, a, b).unwrap_or_else(|| e.clone()),
                    _ if op.is_comparison() => self.compare(op, a, b).unwrap_or_else(|| e.clone()),
                    BinOp::And | BinOp::Or => self.logic(op, a, b).unwrap_or_else(|| e.clone()),
                    _ if is_canonical_type(ot) => {
                        simplify_arith(self.an, op, a, b).unwrap_or_else(|| e.clone())
                    }
                    _ => e.clone(),
                }
            }
            ExprKind::Not(a) => self.not(a).unwrap_or_else(|| e.clone()),
            ExprKind::Select { cond, t: x, f: y } => {
                if structural_equal(x, y) {
                    return x.clone();
                }
                if let ExprKind::Not(c) = cond.kind() {
                    return PrimExpr::select_raw(c.clone(), y.clone(), x.clone());
                }
                e.clone()
            }
            ExprKind::Cast(v)
                if t.is_int() && v.dtype().is_int() && t.bits() >= v.dtype().bits() =>
            {
                // Widening a value that already is in range: fold nested widening casts.
                if let ExprKind::Cast(inner) = v.kind() {
                    if inner.dtype().is_int() && inner.dtype().bits() <= v.dtype().bits() {
                        return PrimExpr::cast_raw(t, inner.clone());
                    }
                }
                e.clone()
            }
            ExprKind::Ramp {
                base,
                stride,
                lanes,
            } if stride.is_const_int(0) => PrimExpr::broadcast_raw(base.clone(), lanes),
            ExprKind::Call {
                op: "tir.if_then_else",
                args: [_, x, y],
            } if structural_equal(x, y) => x.clone(),
            _ => e.clone(),
        }
    }

    /// `min`/`max` decided by the bound of the difference, or nested constant bounds merged.
    fn min_max(&mut self, op: BinOp, a: &PrimExpr, b: &PrimExpr) -> Option<PrimExpr> {
        if structural_equal(a, b) {
            return Some(a.clone());
        }
        let is_min = op == BinOp::Min;
        if is_canonical_type(a.dtype()) {
            let mut d = Sum::of(a);
            d.add_sum(&Sum::of(b), -1);
            let bd = self.an.const_int_bound(&d.to_expr());
            if bd.max <= 0 {
                return Some(if is_min { a.clone() } else { b.clone() });
            }
            if bd.min >= 0 {
                return Some(if is_min { b.clone() } else { a.clone() });
            }
        }
        // min(min(x, c1), c2) = min(x, min(c1, c2)).
        if let (ExprKind::Binary(inner, x, c1), Some(_)) = (a.kind(), const_of(b)) {
            if inner == op && const_of(c1).is_some() {
                let c = self.sub(&PrimExpr::binary_raw(op, c1.clone(), b.clone()));
                return Some(PrimExpr::binary_raw(op, x.clone(), c));
            }
        }
        // A constant goes second.
        if const_of(a).is_some() && const_of(b).is_none() {
            return Some(PrimExpr::binary_raw(op, b.clone(), a.clone()));
        }
        None
    }

    /// Integer comparisons: decided from the bound of `a - b`, else put in the form
    /// `positive terms op negative terms + constant` with common factors cancelled.
    fn compare(&mut self, op: BinOp, a: &PrimExpr, b: &PrimExpr) -> Option<PrimExpr> {
        if structural_equal(a, b) && !a.dtype().is_floating() {
            return Some(bool_const(matches!(op, BinOp::Eq | BinOp::Le | BinOp::Ge)));
        }
        if !is_canonical_type(a.dtype()) {
            return None;
        }
        let mut d = Sum::of(a);
        d.add_sum(&Sum::of(b), -1);
        let bd = self.an.const_int_bound(&d.to_expr());
        let decided = match op {
            BinOp::Lt => decide(bd.max < 0, bd.min >= 0),
            BinOp::Le => decide(bd.max <= 0, bd.min > 0),
            BinOp::Gt => decide(bd.min > 0, bd.max <= 0),
            BinOp::Ge => decide(bd.min >= 0, bd.max < 0),
            BinOp::Eq => decide(bd.min == 0 && bd.max == 0, bd.min > 0 || bd.max < 0),
            BinOp::Ne => decide(bd.min > 0 || bd.max < 0, bd.min == 0 && bd.max == 0),
            _ => None,
        };
        if let Some(v) = decided {
            return Some(bool_const(v));
        }
        let (mut op, mut d) = (op, d);
        if d.terms.iter().all(|(_, k)| *k < 0) {
            d = d.scaled(-1);
            op = op.flip();
        }
        let t = a.dtype();
        // terms op c, with the terms' common factor g divided out.
        let mut c = -d.constant;
        let g = d.terms.iter().fold(0, |g, (_, k)| gcd(g, *k));
        if g > 1 {
            let div_floor = |x: i64| x.div_euclid(g);
            let div_ceil = |x: i64| -((-x).div_euclid(g));
            c = match op {
                BinOp::Lt | BinOp::Ge => div_ceil(c),
                BinOp::Le | BinOp::Gt => div_floor(c),
                _ if c % g != 0 => return Some(bool_const(op == BinOp::Ne)),
                _ => c / g,
            };
        }
        let g = g.max(1);
        let mut lhs = Sum::new(t);
        let mut rhs = Sum::new(t);
        for (atom, k) in &d.terms {
            if *k > 0 {
                lhs.add_term(atom.clone(), *k / g);
            } else {
                rhs.add_term(atom.clone(), -*k / g);
            }
        }
        rhs.constant = c;
        Some(PrimExpr::binary_raw(op, lhs.to_expr(), rhs.to_expr()))
    }

    fn logic(&mut self, op: BinOp, a: &PrimExpr, b: &PrimExpr) -> Option<PrimExpr> {
        let is_and = op == BinOp::And;
        if structural_equal(a, b) {
            return Some(a.clone());
        }
        if self.negations(a, b) {
            return Some(bool_const(!is_and));
        }
        // x < c1 and x < c2, x < c1 or x < c2 (same left side, constant right sides).
        let half = |e: &PrimExpr| -> Option<(PrimExpr, bool, i64)> {
            match e.kind() {
                ExprKind::Binary(cmp, l, r) if is_canonical_type(l.dtype()) => {
                    let c = r.as_int()?;
                    // Normalize to "l <= c" (upper) or "l >= c" (lower).
                    match cmp {
                        BinOp::Lt => Some((l.clone(), true, c.checked_sub(1)?)),
                        BinOp::Le => Some((l.clone(), true, c)),
                        BinOp::Gt => Some((l.clone(), false, c.checked_add(1)?)),
                        BinOp::Ge => Some((l.clone(), false, c)),
                        _ => None,
                    }
                }
                _ => None,
            }
        };
        if let (Some((l1, up1, c1)), Some((l2, up2, c2))) = (half(a), half(b)) {
            if up1 == up2 && structural_equal(&l1, &l2) {
                // For upper bounds, "and" keeps the smaller limit and "or" the larger.
                let keep_first = (c1 <= c2) == (up1 == is_and);
                return Some(if keep_first { a.clone() } else { b.clone() });
            }
            if up1 != up2 && structural_equal(&l1, &l2) && is_and {
                let (lo, hi) = if up1 { (c2, c1) } else { (c1, c2) };
                if lo > hi {
                    return Some(bool_const(false));
                }
            }
        }
        None
    }

    /// True when `a` is the negation of `b`.
    fn negations(&self, a: &PrimExpr, b: &PrimExpr) -> bool {
        let neg_of = |x: &PrimExpr, y: &PrimExpr| match x.kind() {
            ExprKind::Not(inner) => structural_equal(inner, y),
            _ => negate(x).is_some_and(|n| structural_equal(&n, y)),
        };
        neg_of(a, b) || neg_of(b, a)
    }

    fn not(&mut self, a: &PrimExpr) -> Option<PrimExpr> {
        if let ExprKind::Not(inner) = a.kind() {
            return Some(inner.clone());
        }
        let n = negate(a)?;
        Some(self.rewrite(&n))
    }

    /// Vector arithmetic on ramps and broadcasts.
    fn vector(&mut self, op: BinOp, a: &PrimExpr, b: &PrimExpr) -> Option<PrimExpr> {
        use ExprKind::{Broadcast as B, Ramp as R};
        match (a.kind(), b.kind()) {
            (B { value: x, lanes }, B { value: y, .. }) => {
                let v = self.sub(&PrimExpr::binary_raw(op, x.clone(), y.clone()));
                Some(PrimExpr::broadcast_raw(v, lanes))
            }
            (
                R {
                    base: b1,
                    stride: s1,
                    lanes,
                },
                R {
                    base: b2,
                    stride: s2,
                    ..
                },
            ) if matches!(op, BinOp::Add | BinOp::Sub) => {
                let base = self.sub(&PrimExpr::binary_raw(op, b1.clone(), b2.clone()));
                let stride = self.sub(&PrimExpr::binary_raw(op, s1.clone(), s2.clone()));
                Some(self.ramp(base, stride, lanes))
            }
            (
                R {
                    base,
                    stride,
                    lanes,
                },
                B { value: x, .. },
            ) => match op {
                BinOp::Add | BinOp::Sub => {
                    let nb = self.sub(&PrimExpr::binary_raw(op, base.clone(), x.clone()));
                    Some(self.ramp(nb, stride.clone(), lanes))
                }
                BinOp::Mul => {
                    let nb = self.sub(&PrimExpr::binary_raw(op, base.clone(), x.clone()));
                    let ns = self.sub(&PrimExpr::binary_raw(op, stride.clone(), x.clone()));
                    Some(self.ramp(nb, ns, lanes))
                }
                BinOp::FloorDiv | BinOp::FloorMod => {
                    x.as_int().filter(|&c| c > 0)?;
                    let s = stride.as_int().filter(|&s| s >= 0)?;
                    let first = self.sub(&PrimExpr::binary_raw(
                        BinOp::FloorDiv,
                        base.clone(),
                        x.clone(),
                    ));
                    let last_base = self.sub(&PrimExpr::binary_raw(
                        BinOp::Add,
                        base.clone(),
                        PrimExpr::const_int(base.dtype(), s * (lanes - 1)),
                    ));
                    let last =
                        self.sub(&PrimExpr::binary_raw(BinOp::FloorDiv, last_base, x.clone()));
                    if !structural_equal(&first, &last) {
                        return None;
                    }
                    if op == BinOp::FloorDiv {
                        Some(PrimExpr::broadcast_raw(first, lanes))
                    } else {
                        let m = self.sub(&PrimExpr::binary_raw(
                            BinOp::FloorMod,
                            base.clone(),
                            x.clone(),
                        ));
                        Some(self.ramp(m, stride.clone(), lanes))
                    }
                }
                _ => None,
            },
            (
                B { value: x, .. },
                R {
                    base,
                    stride,
                    lanes,
                },
            ) => match op {
                BinOp::Add | BinOp::Mul => {
                    let nb = self.sub(&PrimExpr::binary_raw(op, x.clone(), base.clone()));
                    let ns = if op == BinOp::Mul {
                        self.sub(&PrimExpr::binary_raw(op, x.clone(), stride.clone()))
                    } else {
                        stride.clone()
                    };
                    Some(self.ramp(nb, ns, lanes))
                }
                BinOp::Sub => {
                    let nb = self.sub(&PrimExpr::binary_raw(op, x.clone(), base.clone()));
                    let zero = PrimExpr::const_int(stride.dtype(), 0);
                    let ns = self.sub(&PrimExpr::binary_raw(op, zero, stride.clone()));
                    Some(self.ramp(nb, ns, lanes))
                }
                _ => None,
            },
            _ => None,
        }
    }

    fn ramp(&mut self, base: PrimExpr, stride: PrimExpr, lanes: i64) -> PrimExpr {
        if stride.is_const_int(0) {
            PrimExpr::broadcast_raw(base, lanes)
        } else {
            PrimExpr::ramp_raw(base, stride, lanes)
        }
    }
}

fn decide(yes: bool, no: bool) -> Option<bool> {
    if yes {
        Some(true)
    } else if no {
        Some(false)
    } else {
        None
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.min(i64::MAX as u64) as i64
}

/// The negation of an integer comparison (`a < b` gives `a >= b`); floats are left alone
/// (NaN makes `not (a < b)` differ from `a >= b`).
pub(crate) fn negate(e: &PrimExpr) -> Option<PrimExpr> {
    match e.kind() {
        ExprKind::Binary(op, a, b) if op.is_comparison() && !a.dtype().is_floating() => {
            Some(PrimExpr::binary_raw(op.negate()?, a.clone(), b.clone()))
        }
        ExprKind::IntImm(v) => Some(PrimExpr::const_int(e.dtype(), (v == 0) as i64)),
        _ => None,
    }
}
