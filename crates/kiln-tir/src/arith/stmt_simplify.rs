//! Simplifying statements: every expression is simplified with what its position implies —
//! loop variables in their ranges, let values (constants and variables are substituted, the
//! let dropped), `if` conditions (true in the then-branch, false in the else-branch), asserts
//! that hold are dropped, and `if`s with constant conditions replaced by their branch.

use super::Analyzer;
use crate::expr::{PrimExpr, Var};
use crate::mutator::{mutate_stmt_children, ExprMutator, StmtMutator};
use crate::stmt::{ForObj, LetStmtObj, Stmt, StmtKind, StmtObj};

pub(crate) fn simplify_stmt(an: &mut Analyzer, s: &Stmt) -> Stmt {
    StmtSimplifier { an }.mutate_stmt(s)
}

struct StmtSimplifier<'a> {
    an: &'a mut Analyzer,
}

impl ExprMutator for StmtSimplifier<'_> {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        self.an.simplify(e)
    }
}

fn inlinable(value: &PrimExpr, var: &Var) -> bool {
    (value.is_const() || value.as_var().is_some()) && value.dtype() == var.dtype()
}

impl StmtMutator for StmtSimplifier<'_> {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        match s.kind() {
            StmtKind::For(f) => {
                let min = self.mutate_expr(&f.min);
                let extent = self.mutate_expr(&f.extent);
                let var = f.loop_var.clone();
                let body = self.an.with_range(&var, &min, &extent, |an| {
                    StmtSimplifier { an }.mutate_stmt(&f.body)
                });
                if min.same_as(&f.min) && extent.same_as(&f.extent) && body.same_as(&f.body) {
                    return s.clone();
                }
                Stmt::from_node(ForObj {
                    parent: StmtObj {},
                    loop_var: var,
                    min,
                    extent,
                    kind: f.kind,
                    body,
                    annotations: f.annotations.clone(),
                })
            }
            StmtKind::IfThenElse(i) => {
                let cond = self.mutate_expr(&i.condition);
                if let Some(v) = cond.as_int() {
                    return if v != 0 {
                        self.mutate_stmt(&i.then_case)
                    } else {
                        match &i.else_case {
                            Some(e) => self.mutate_stmt(e),
                            None => Stmt::no_op(),
                        }
                    };
                }
                let then_case = self
                    .an
                    .with_constraint(&cond, |an| StmtSimplifier { an }.mutate_stmt(&i.then_case));
                let else_case = i.else_case.as_ref().map(|e| {
                    let not = self.an.simplify(&PrimExpr::not_raw(cond.clone()));
                    self.an
                        .with_constraint(&not, |an| StmtSimplifier { an }.mutate_stmt(e))
                });
                let same_else = match (&else_case, &i.else_case) {
                    (Some(a), Some(b)) => a.same_as(b),
                    (None, None) => true,
                    _ => false,
                };
                if cond.same_as(&i.condition) && then_case.same_as(&i.then_case) && same_else {
                    return s.clone();
                }
                Stmt::if_then_else_raw(cond, then_case, else_case)
            }
            StmtKind::LetStmt(l) => {
                let value = self.mutate_expr(&l.value);
                if inlinable(&value, &l.var) {
                    return self.an.scoped_value(&l.var, value, |an| {
                        StmtSimplifier { an }.mutate_stmt(&l.body)
                    });
                }
                let b = self.an.const_int_bound(&value);
                let body = self
                    .an
                    .scoped_bound(&l.var, b, |an| StmtSimplifier { an }.mutate_stmt(&l.body));
                if value.same_as(&l.value) && body.same_as(&l.body) {
                    return s.clone();
                }
                Stmt::from_node(LetStmtObj {
                    parent: StmtObj {},
                    var: l.var.clone(),
                    value,
                    body,
                })
            }
            StmtKind::Assert(a) => {
                let cond = self.mutate_expr(&a.condition);
                if cond.as_int().is_some_and(|v| v != 0) {
                    return self.mutate_stmt(&a.body);
                }
                mutate_stmt_children(self, s)
            }
            _ => mutate_stmt_children(self, s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Buffer;
    use crate::expr::{floordiv, floormod, Var};
    use crate::stmt::ForKind;
    use crate::structural::assert_structural_equal;
    use kiln_ffi::DataType;

    #[test]
    fn loop_ranges_and_conditions_are_in_scope() {
        let (i, j) = (Var::int32("i"), Var::int32("j"));
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(64)]);
        let idx = floordiv(&i * 8 + &j, 8) * 8 + floormod(&i * 8 + &j, 8);
        let store = Stmt::if_then_else(i.lt(8), a.store(1.0, vec![idx]), None);
        let body = Stmt::for_loop(
            &i,
            0,
            8,
            ForKind::Serial,
            Stmt::for_loop(&j, 0, 8, ForKind::Serial, store),
        );
        let out = Analyzer::new().simplify_stmt(&body);
        let expected = Stmt::for_loop(
            &i,
            0,
            8,
            ForKind::Serial,
            Stmt::for_loop(&j, 0, 8, ForKind::Serial, a.store(1.0, vec![&i * 8 + &j])),
        );
        assert_structural_equal(&out, &expected);
        // Nothing to do: the same object comes back.
        let again = Analyzer::new().simplify_stmt(&out);
        assert!(again.same_as(&out));
    }

    #[test]
    fn lets_inline_and_branches_see_their_condition() {
        let (x, n) = (Var::int32("x"), Var::int32("n"));
        let a = Buffer::decl("A", DataType::int(32), vec![PrimExpr::i32(4)]);
        let s = Stmt::let_stmt(
            &x,
            PrimExpr::i32(3),
            Stmt::if_then_else(
                n.lt(2),
                a.store(crate::expr::select(n.lt(2), &x, 0), vec![PrimExpr::i32(0)]),
                Some(a.store(crate::expr::select(n.lt(2), 1, &n), vec![PrimExpr::i32(1)])),
            ),
        );
        let out = Analyzer::new().simplify_stmt(&s);
        let expected = Stmt::if_then_else(
            n.lt(2),
            a.store(3, vec![PrimExpr::i32(0)]),
            Some(a.store(&n, vec![PrimExpr::i32(1)])),
        );
        assert_structural_equal(&out, &expected);
    }
}
