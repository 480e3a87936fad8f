//! RemoveNoOp: drops statements that do nothing — `Evaluate` of a constant or of an expression
//! without calls, empty sequences, `x[i] = x[i]`, loops with a no-op body or a zero extent,
//! `if`s whose branches do nothing, and allocations, buffer declarations, lets and attributes
//! around a no-op body. Asserts stay (they check something).

use super::{prim_func_pass, Pass};
use crate::expr::{ExprKind, PrimExpr};
use crate::mutator::transform_stmt;
use crate::stmt::{Stmt, StmtKind};
use crate::structural::structural_equal;
use crate::visitor::pre_order_visit_expr;

/// The RemoveNoOp pass (`tir.RemoveNoOp`, opt level 0).
pub fn remove_no_op() -> Pass {
    prim_func_pass("tir.RemoveNoOp", 0, |f, _| {
        let body = remove_no_op_stmt(f.body());
        Ok(if body.same_as(f.body()) {
            f
        } else {
            f.with_body(body)
        })
    })
}

/// True when evaluating `e` has no effect (no calls, which may have side effects).
pub fn is_pure(e: &PrimExpr) -> bool {
    let mut pure = true;
    pre_order_visit_expr(e, |x| {
        if matches!(x.kind(), ExprKind::Call { .. }) {
            pure = false;
        }
        pure
    });
    pure
}

/// Removes the no-ops of `s` (bottom-up).
pub fn remove_no_op_stmt(s: &Stmt) -> Stmt {
    transform_stmt(s, step, |e| e)
}

fn step(s: Stmt) -> Stmt {
    let no_op = |x: &Stmt| x.is_no_op();
    let out = match s.kind() {
        StmtKind::Evaluate(e) if !e.value.is_const() && is_pure(&e.value) => Some(Stmt::no_op()),
        StmtKind::Seq(q)
            if q.seq
                .iter()
                .any(|x| no_op(x) || matches!(x.kind(), StmtKind::Seq(_))) =>
        {
            Some(Stmt::seq(q.seq.to_vec()))
        }
        StmtKind::BufferStore(st) => match st.value.kind() {
            ExprKind::BufferLoad { buffer, indices }
                if buffer.same_as(&st.buffer)
                    && indices.len() == st.indices.len()
                    && indices
                        .iter()
                        .zip(st.indices.iter())
                        .all(|(a, b)| structural_equal(a, b)) =>
            {
                Some(Stmt::no_op())
            }
            _ => None,
        },
        StmtKind::For(f) if no_op(&f.body) || f.extent.is_const_int(0) => Some(Stmt::no_op()),
        StmtKind::IfThenElse(i) => {
            let else_no_op = i.else_case.as_ref().is_none_or(no_op);
            if no_op(&i.then_case) && else_no_op && is_pure(&i.condition) {
                Some(Stmt::no_op())
            } else if no_op(&i.then_case) && !else_no_op {
                let not = PrimExpr::not_raw(i.condition.clone());
                Some(Stmt::if_then_else_raw(
                    not,
                    i.else_case.clone().unwrap(),
                    None,
                ))
            } else if i.else_case.is_some() && else_no_op {
                Some(Stmt::if_then_else_raw(
                    i.condition.clone(),
                    i.then_case.clone(),
                    None,
                ))
            } else {
                None
            }
        }
        StmtKind::LetStmt(l) if no_op(&l.body) && is_pure(&l.value) => Some(Stmt::no_op()),
        StmtKind::Allocate(a) if no_op(&a.body) => Some(Stmt::no_op()),
        StmtKind::DeclBuffer(d) if no_op(&d.body) => Some(Stmt::no_op()),
        StmtKind::AttrStmt(a) if no_op(&a.body) => Some(Stmt::no_op()),
        _ => None,
    };
    out.unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    #[test]
    fn drops_no_ops() {
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(8)]);
        let (i, j) = (Var::int32("i"), Var::int32("j"));
        let keep = a.store(1.0, vec![i.to_expr()]);
        let s = Stmt::seq_raw(vec![
            Stmt::for_loop(&j, 0, 4, ForKind::Serial, Stmt::evaluate(&j + 1)),
            Stmt::for_loop(&i, 0, 0, ForKind::Serial, keep.clone()),
            Stmt::if_then_else(i.lt(3), Stmt::no_op(), Some(keep.clone())),
            Stmt::seq_raw(vec![]),
            a.store(a.load(vec![i.to_expr()]), vec![i.to_expr()]),
            Stmt::if_then_else(i.lt(2), keep.clone(), Some(Stmt::no_op())),
        ]);
        let out = remove_no_op_stmt(&s);
        let expected = Stmt::seq(vec![
            Stmt::if_then_else(PrimExpr::not_raw(i.lt(3)), keep.clone(), None),
            Stmt::if_then_else(i.lt(2), keep.clone(), None),
        ]);
        assert_structural_equal(&out, &expected);
        let only = remove_no_op_stmt(&Stmt::for_loop(
            &i,
            0,
            4,
            ForKind::Serial,
            Stmt::seq_raw(vec![]),
        ));
        assert!(only.is_no_op());
        // Calls may have effects: kept.
        let call = Stmt::evaluate(crate::op::call_packed("f", vec![]));
        assert!(remove_no_op_stmt(&call).same_as(&call));
    }
}
