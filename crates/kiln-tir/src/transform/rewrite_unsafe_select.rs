//! RewriteUnsafeSelect: a `Select` evaluates both values, so one whose values read memory (a
//! load that may be out of bounds when the condition is false, as in padding) or call
//! functions becomes `tir.if_then_else(cond, t, f)`, which evaluates only the chosen value.

use super::{prim_func_pass, Pass};
use crate::expr::{ExprKind, PrimExpr};
use crate::mutator::transform_stmt;
use crate::op;
use crate::visitor::pre_order_visit_expr;

/// The RewriteUnsafeSelect pass (`tir.RewriteUnsafeSelect`, opt level 0).
pub fn rewrite_unsafe_select() -> Pass {
    prim_func_pass("tir.RewriteUnsafeSelect", 0, |f, _| {
        let body = transform_stmt(f.body(), |s| s, rewrite);
        Ok(if body.same_as(f.body()) {
            f
        } else {
            f.with_body(body)
        })
    })
}

/// True when evaluating `e` may fault or have effects: loads, and calls other than the float
/// math intrinsics.
pub fn is_unsafe(e: &PrimExpr) -> bool {
    let mut bad = false;
    pre_order_visit_expr(e, |x| {
        match x.kind() {
            ExprKind::BufferLoad { .. } => bad = true,
            ExprKind::Call { op: name, .. }
                if !op::FLOAT_UNARY.contains(&name) && !op::FLOAT_BINARY.contains(&name) =>
            {
                bad = true
            }
            _ => {}
        }
        !bad
    });
    bad
}

/// Rewrites one (already rebuilt) node.
fn rewrite(e: PrimExpr) -> PrimExpr {
    if let ExprKind::Select { cond, t, f } = e.kind() {
        if is_unsafe(t) || is_unsafe(f) {
            return PrimExpr::call(
                e.dtype(),
                op::IF_THEN_ELSE,
                vec![cond.clone(), t.clone(), f.clone()],
            );
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    #[test]
    fn selects_over_loads_become_if_then_else() {
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(8)]);
        let c = Buffer::decl("C", DataType::float(32), vec![PrimExpr::i32(10)]);
        let i = Var::int32("i");
        let cond = i.ge(1).logical_and(i.lt(9));
        let pad = select(cond.clone(), a.load(vec![&i - 1]), 0.0);
        let safe = select(cond.clone(), PrimExpr::f32(1.0), 0.0);
        let body = Stmt::for_loop(
            &i,
            0,
            10,
            ForKind::Serial,
            c.store(pad + safe.clone(), vec![i.to_expr()]),
        );
        let m = IRModule::from_func(
            "f",
            PrimFunc::from_buffers("f", &[a.clone(), c.clone()], body),
        );
        let out = rewrite_unsafe_select().apply(m).unwrap();
        let ite = PrimExpr::call(
            DataType::float(32),
            op::IF_THEN_ELSE,
            vec![cond, a.load(vec![&i - 1]), PrimExpr::f32(0.0)],
        );
        let expected = Stmt::for_loop(
            &i,
            0,
            10,
            ForKind::Serial,
            c.store(ite + safe, vec![i.to_expr()]),
        );
        assert_structural_equal(out.lookup("f").unwrap().body(), &expected);
    }
}
