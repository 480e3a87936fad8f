//! Arithmetic analysis and simplification (TVM's `arith`): the [`Analyzer`] holds what is known
//! (variable ranges, let-bound values, facts from enclosing conditions) and answers
//! [`const_int_bound`](Analyzer::const_int_bound), [`can_prove`](Analyzer::can_prove) and
//! [`simplify`](Analyzer::simplify) / [`simplify_stmt`](Analyzer::simplify_stmt).
//!
//! - [`const_fold`]: folding of constant operands and trivial identities;
//! - `canonical`: linear integer forms and the division rules;
//! - `bound`: interval bounds;
//! - `rewrite`: the bottom-up simplifier that combines them;
//! - `stmt_simplify`: statements, with loop ranges and branch conditions in scope.

mod bound;
mod canonical;
pub mod const_fold;
mod rewrite;
mod stmt_simplify;

pub use bound::{ConstIntBound, NEG_INF, POS_INF};

use crate::expr::{BinOp, ExprKind, PrimExpr, Var};
use crate::function::Range;
use crate::stmt::Stmt;
use crate::structural::structural_equal;
use std::collections::HashMap;

/// What is known about variables and conditions, and the questions it can answer.
///
/// ```
/// use kiln_tir::*;
/// let (i, j) = (Var::int32("i"), Var::int32("j"));
/// let mut an = Analyzer::new();
/// an.bind(&i, &Range::from_min_extent(0, 8));
/// assert!(an.can_prove(&i.lt(8)));
/// let e = an.simplify(&floordiv(&j * 8 + &i, 8));
/// assert_structural_equal(&e, &j.to_expr());
/// ```
#[derive(Default, Clone)]
pub struct Analyzer {
    bounds: HashMap<Var, ConstIntBound>,
    values: HashMap<Var, PrimExpr>,
    facts: Vec<PrimExpr>,
}

impl Analyzer {
    /// An analyzer that knows nothing.
    pub fn new() -> Self {
        Analyzer::default()
    }

    /// Records that `var` lies in `range` (its bounds are evaluated now).
    pub fn bind(&mut self, var: &Var, range: &Range) {
        let b = self.range_bound(range.min(), range.extent());
        self.bounds.insert(var.clone(), b);
    }

    /// Records that `var` lies in `[min, max]`.
    pub fn bind_bound(&mut self, var: &Var, bound: ConstIntBound) {
        self.bounds.insert(var.clone(), bound);
    }

    /// Records that `var` equals `value` (the simplifier substitutes it).
    pub fn bind_value(&mut self, var: &Var, value: PrimExpr) {
        self.values.insert(var.clone(), value);
    }

    /// Forgets what was recorded about `var`.
    pub fn unbind(&mut self, var: &Var) {
        self.bounds.remove(var);
        self.values.remove(var);
    }

    /// The recorded bound of `var`.
    pub fn var_bound(&self, var: &Var) -> Option<ConstIntBound> {
        self.bounds.get(var).copied()
    }

    /// The recorded value of `var`.
    pub fn var_value(&self, var: &Var) -> Option<&PrimExpr> {
        self.values.get(var)
    }

    fn range_bound(&self, min: &PrimExpr, extent: &PrimExpr) -> ConstIntBound {
        let lo = self.const_int_bound(min);
        let ext = self.const_int_bound(extent);
        let max = if lo.max == POS_INF || ext.max == POS_INF {
            POS_INF
        } else {
            lo.max.saturating_add(ext.max).saturating_sub(1)
        };
        ConstIntBound::new(lo.min, max)
    }

    /// Runs `f` with `var` known to lie in `[min, min + extent)`, then restores what was known.
    pub fn with_range<R>(
        &mut self,
        var: &Var,
        min: &PrimExpr,
        extent: &PrimExpr,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R {
        let b = self.range_bound(min, extent);
        self.scoped_bound(var, b, f)
    }

    pub(crate) fn scoped_bound<R>(
        &mut self,
        var: &Var,
        b: ConstIntBound,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R {
        let old = self.bounds.insert(var.clone(), b);
        let r = f(self);
        match old {
            Some(o) => self.bounds.insert(var.clone(), o),
            None => self.bounds.remove(var),
        };
        r
    }

    pub(crate) fn scoped_value<R>(
        &mut self,
        var: &Var,
        value: PrimExpr,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R {
        let old = self.values.insert(var.clone(), value);
        let r = f(self);
        match old {
            Some(o) => self.values.insert(var.clone(), o),
            None => self.values.remove(var),
        };
        r
    }

    /// Runs `f` knowing that `cond` holds (as inside `if cond:`), then forgets it. Conditions
    /// of the form `v < e`, `v <= e`, `v > e`, `v >= e`, `v == e` (either side), joined by
    /// `and`, narrow the range of `v`; every condition is also remembered as a fact that the
    /// simplifier replaces by `True` (and its negation by `False`).
    pub fn with_constraint<R>(&mut self, cond: &PrimExpr, f: impl FnOnce(&mut Self) -> R) -> R {
        let saved_bounds = self.bounds.clone();
        let saved_facts = self.facts.len();
        self.assume(cond);
        let r = f(self);
        self.bounds = saved_bounds;
        self.facts.truncate(saved_facts);
        r
    }

    fn assume(&mut self, cond: &PrimExpr) {
        if let ExprKind::Binary(BinOp::And, a, b) = cond.kind() {
            self.assume(a);
            self.assume(b);
            return;
        }
        self.facts.push(cond.clone());
        let ExprKind::Binary(op, a, b) = cond.kind() else {
            return;
        };
        if !op.is_comparison() || op == BinOp::Ne {
            return;
        }
        let (var, other, op) = match (a.as_var(), b.as_var()) {
            (Some(v), _) => (v, b, op),
            (None, Some(v)) => (v, a, op.flip()),
            _ => return,
        };
        let o = self.const_int_bound(other);
        let cur = self
            .var_bound(&var)
            .unwrap_or_else(|| ConstIntBound::of_type(var.dtype()));
        let sub1 = |x: i64| if x == POS_INF { x } else { x - 1 };
        let add1 = |x: i64| if x <= NEG_INF { x } else { x + 1 };
        let refined = match op {
            BinOp::Lt => ConstIntBound::new(NEG_INF, sub1(o.max)),
            BinOp::Le => ConstIntBound::new(NEG_INF, o.max),
            BinOp::Gt => ConstIntBound::new(add1(o.min), POS_INF),
            BinOp::Ge => ConstIntBound::new(o.min, POS_INF),
            BinOp::Eq => o,
            _ => return,
        };
        self.bounds.insert(var, cur.intersect(refined));
    }

    /// `Some(true)` when `cond` is a known fact, `Some(false)` when its negation is.
    pub(crate) fn known(&self, cond: &PrimExpr) -> Option<bool> {
        for f in &self.facts {
            if structural_equal(f, cond) {
                return Some(true);
            }
            if rewrite::negate(f).is_some_and(|n| structural_equal(&n, cond)) {
                return Some(false);
            }
            if let ExprKind::Not(x) = cond.kind() {
                if structural_equal(f, x) {
                    return Some(false);
                }
            }
        }
        None
    }

    /// An interval that the value of integer expression `e` lies in.
    pub fn const_int_bound(&self, e: &PrimExpr) -> ConstIntBound {
        bound::BoundCtx::new(self).bound(e)
    }

    /// Simplifies `e`; returns `e` itself when nothing simplifies.
    pub fn simplify(&mut self, e: &PrimExpr) -> PrimExpr {
        rewrite::simplify(self, e)
    }

    /// Simplifies every expression of `s` with loop ranges, lets and branch conditions in
    /// scope; constant conditions pick their branch. Untouched parts stay the same objects.
    pub fn simplify_stmt(&mut self, s: &Stmt) -> Stmt {
        stmt_simplify::simplify_stmt(self, s)
    }

    /// True when `cond` is proven to hold (false means "not proven", not "false").
    pub fn can_prove(&mut self, cond: &PrimExpr) -> bool {
        self.simplify(cond).as_int().is_some_and(|v| v != 0)
    }

    /// True when `a == b` is proven.
    pub fn can_prove_equal(&mut self, a: &PrimExpr, b: &PrimExpr) -> bool {
        match crate::expr::try_build_binary(BinOp::Eq, a, b) {
            Ok(c) => self.can_prove(&c),
            Err(_) => false,
        }
    }
}

/// Simplifies `e` knowing nothing about its variables.
pub fn simplify(e: &PrimExpr) -> PrimExpr {
    Analyzer::new().simplify(e)
}

/// The bound of `e` with each variable in its range.
pub fn const_int_bound(e: &PrimExpr, ranges: &[(Var, Range)]) -> ConstIntBound {
    let mut an = Analyzer::new();
    ranges.iter().for_each(|(v, r)| an.bind(v, r));
    an.const_int_bound(e)
}

/// True when `cond` holds for every value of the variables in their ranges.
pub fn can_prove(cond: &PrimExpr, ranges: &[(Var, Range)]) -> bool {
    let mut an = Analyzer::new();
    ranges.iter().for_each(|(v, r)| an.bind(v, r));
    an.can_prove(cond)
}
