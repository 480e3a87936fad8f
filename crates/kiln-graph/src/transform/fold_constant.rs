//! `FoldConstant`: evaluates calls whose arguments are all constants, with the operators'
//! reference evaluators ([`crate::op::eval`]): elementwise, broadcast, reductions, reshape-like
//! ops, transpose, broadcast_to, bias_add. Calls of operators without an evaluator (conv2d,
//! pooling, softmax, concatenate, ...) are left alone, as are `TupleGetItem(Tuple(..))`
//! (DeadCodeElimination's job). Folding runs to a fixpoint in one bottom-up sweep.

use super::infer_type::{infer_expr, infer_function};
use super::{function_pass, Pass};
use crate::ir::visit::rewrite_function;
use crate::ir::Expr;
use crate::op;
use kiln_ffi::Result;

/// Folds `e` when it is an op call over constants with an evaluator.
pub fn try_fold(e: &Expr) -> Result<Option<Expr>> {
    let Some(name) = e.op_name() else {
        return Ok(None);
    };
    let def = op::get(name)?;
    let Some(eval) = def.eval else {
        return Ok(None);
    };
    let args: Option<Vec<_>> = e.args().iter().map(|a| a.as_constant().cloned()).collect();
    let Some(args) = args else {
        return Ok(None);
    };
    let ty = infer_expr(e)?.ty()?;
    let value =
        eval(&args, e.attrs(), &ty).map_err(|err| err.context(format!("folding {name}")))?;
    Ok(Some(Expr::constant(value)))
}

/// The pass (opt level 2).
pub fn fold_constant() -> Pass {
    function_pass("FoldConstant", 2, |f, _| {
        let out = rewrite_function(&f, |e| Ok(try_fold(e)?.unwrap_or_else(|| e.clone())))?;
        infer_function(&out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{assert_structural_equal, Function, IRModule, Type, Var};
    use crate::op::mk;

    #[test]
    fn folds_constant_subgraphs_only() {
        let x = Var::new("x", Type::f32(&[2, 2]));
        let c = Expr::const_f32(&[1.0, 4.0], &[2]);
        let folded = mk(
            "sqrt",
            vec![mk("multiply", vec![c, Expr::scalar_f32(4.0)], &[])],
            &[],
        );
        let t = mk(
            "transpose",
            vec![Expr::const_f32(&[1.0, 2.0, 3.0, 4.0], &[2, 2])],
            &[],
        );
        let body = mk("add", vec![mk("add", vec![x.expr(), folded], &[]), t], &[]);
        let m = IRModule::from_main(Function::new(vec![x.clone()], body));
        let out = fold_constant().apply(m).unwrap().main().unwrap();
        let want = mk(
            "add",
            vec![
                mk(
                    "add",
                    vec![x.expr(), Expr::const_f32(&[2.0, 4.0], &[2])],
                    &[],
                ),
                Expr::const_f32(&[1.0, 3.0, 2.0, 4.0], &[2, 2]),
            ],
            &[],
        );
        assert_structural_equal(out.body(), &want);
    }

    #[test]
    fn leaves_ops_without_evaluator() {
        let c = Expr::const_f32(&[1.0; 16], &[1, 1, 4, 4]);
        let w = Expr::const_f32(&[1.0; 9], &[1, 1, 3, 3]);
        let conv = mk("nn.conv2d", vec![c, w], &[]);
        let s = mk("sum", vec![Expr::const_f32(&[1.0, 2.0, 3.0], &[3])], &[]);
        let body = Expr::tuple(vec![conv.clone(), s]);
        let out = fold_constant()
            .apply(IRModule::from_main(Function::new(vec![], body)))
            .unwrap()
            .main()
            .unwrap();
        assert_structural_equal(
            out.body(),
            &Expr::tuple(vec![conv, Expr::const_f32(&[6.0], &[])]),
        );
    }
}
