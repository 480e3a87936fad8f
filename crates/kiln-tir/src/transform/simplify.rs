//! Simplify: the arithmetic [`Analyzer`] over a whole function body, with loop ranges, let
//! values and branch conditions in scope (see [`Analyzer::simplify_stmt`]).

use super::{prim_func_pass, Pass};
use crate::arith::Analyzer;

/// The Simplify pass (`tir.Simplify`, opt level 0).
pub fn simplify() -> Pass {
    prim_func_pass("tir.Simplify", 0, |f, _| {
        let body = Analyzer::new().simplify_stmt(f.body());
        Ok(if body.same_as(f.body()) {
            f
        } else {
            f.with_body(body)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    #[test]
    fn folds_with_loop_ranges() {
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(16)]);
        let i = Var::int32("i");
        let body = Stmt::for_loop(
            &i,
            0,
            16,
            ForKind::Serial,
            Stmt::if_then_else(i.lt(16), a.store(1.0, vec![floordiv(&i * 4, 4) + 0]), None),
        );
        let m = IRModule::from_func(
            "f",
            PrimFunc::from_buffers("f", std::slice::from_ref(&a), body),
        );
        let out = simplify().apply(m.clone()).unwrap();
        let expected = Stmt::for_loop(&i, 0, 16, ForKind::Serial, a.store(1.0, vec![i.to_expr()]));
        assert_structural_equal(out.lookup("f").unwrap().body(), &expected);
        let again = simplify().apply(out.clone()).unwrap();
        assert!(again.lookup("f").unwrap().same_as(out.lookup("f").unwrap()));
    }
}
