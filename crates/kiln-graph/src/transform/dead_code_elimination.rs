//! `DeadCodeElimination`. The graph IR has no `let`, so a node is live exactly when the
//! result reaches it; what remains dead is a tuple built only to be projected:
//! `Tuple(a, b, ...).i` becomes the field itself (TVM's `SimplifyExpr` rule), after which the
//! other fields are unreachable. Unused module functions are kept (nothing refers to globals
//! yet).

use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::visit::rewrite_function;
use crate::ir::Expr;

/// The pass (opt level 1).
pub fn dead_code_elimination() -> Pass {
    function_pass("DeadCodeElimination", 1, |f, _| {
        let out = rewrite_function(&f, |e| {
            if let Expr::TupleGetItem(g) = e {
                if let Expr::Tuple(t) = &g.tuple {
                    if let Some(field) = t.fields.get(g.index as usize) {
                        return Ok(field.clone());
                    }
                }
            }
            Ok(e.clone())
        })?;
        infer_function(&out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{assert_structural_equal, Function, IRModule, Type, Var};
    use crate::op::mk;

    #[test]
    fn projects_tuples() {
        let x = Var::new("x", Type::f32(&[4]));
        let dead = mk("exp", vec![x.expr()], &[]);
        let live = mk("nn.relu", vec![x.expr()], &[]);
        let body = mk(
            "negative",
            vec![Expr::get_item(Expr::tuple(vec![dead, live]), 1)],
            &[],
        );
        let m = IRModule::from_main(Function::new(vec![x.clone()], body));
        let out = dead_code_elimination().apply(m).unwrap().main().unwrap();
        let want = mk("negative", vec![mk("nn.relu", vec![x.expr()], &[])], &[]);
        assert_structural_equal(out.body(), &want);
        assert!(crate::ir::visit::post_order(out.body())
            .iter()
            .all(|e| e.op_name() != Some("exp")));
    }
}
