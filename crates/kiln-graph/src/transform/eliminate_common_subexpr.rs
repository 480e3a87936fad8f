//! `EliminateCommonSubexpr`: calls of one operator with the same attributes and the same
//! (already deduplicated) arguments become one node; so do equal tuple projections.
//! Constants are compared by identity (two equal weights stay two).

use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::attrs::fmt_value;
use crate::ir::visit::rewrite_function;
use crate::ir::Expr;
use std::collections::HashMap;

fn key(e: &Expr) -> Option<String> {
    match e {
        Expr::Call(c) => {
            let callee = match &c.op {
                Expr::Op(o) => o.name.to_string(),
                other => format!("fn@{}", other.key()),
            };
            let attrs: Vec<String> = e
                .attrs()
                .entries()
                .iter()
                .map(|(k, v)| format!("{k}={}", fmt_value(v)))
                .collect();
            let args: Vec<String> = c.args.iter().map(|a| a.key().to_string()).collect();
            Some(format!("{callee}({};{})", args.join(","), attrs.join(",")))
        }
        Expr::TupleGetItem(g) => Some(format!("{}.{}", g.tuple.key(), g.index)),
        _ => None,
    }
}

/// The pass (opt level 3, as in TVM).
pub fn eliminate_common_subexpr() -> Pass {
    function_pass("EliminateCommonSubexpr", 3, |f, _| {
        let mut seen: HashMap<String, Expr> = HashMap::new();
        let out = rewrite_function(&f, |e| {
            Ok(match key(e) {
                Some(k) => seen.entry(k).or_insert_with(|| e.clone()).clone(),
                None => e.clone(),
            })
        })?;
        infer_function(&out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{assert_structural_equal, Function, IRModule, Type, Var};
    use crate::op::mk;
    use crate::transform::PassContext;

    #[test]
    fn merges_equal_calls() {
        let x = Var::new("x", Type::f32(&[4]));
        let a = mk("nn.relu", vec![x.expr()], &[]);
        let b = mk("nn.relu", vec![x.expr()], &[]);
        let c = mk(
            "clip",
            vec![x.expr()],
            &[("a_min", 0.0.into()), ("a_max", 1.0.into())],
        );
        let d = mk(
            "clip",
            vec![x.expr()],
            &[("a_min", 0.0.into()), ("a_max", 2.0.into())],
        );
        let body = mk(
            "add",
            vec![mk("add", vec![a, b], &[]), mk("add", vec![c, d], &[])],
            &[],
        );
        let m = IRModule::from_main(Function::new(vec![x.clone()], body));
        let out = eliminate_common_subexpr()
            .run(m, &PassContext::with_opt_level(3))
            .unwrap()
            .main()
            .unwrap();
        let r = mk("nn.relu", vec![x.expr()], &[]);
        let c = mk(
            "clip",
            vec![x.expr()],
            &[("a_min", 0.0.into()), ("a_max", 1.0.into())],
        );
        let d = mk(
            "clip",
            vec![x.expr()],
            &[("a_min", 0.0.into()), ("a_max", 2.0.into())],
        );
        let want = mk(
            "add",
            vec![
                mk("add", vec![r.clone(), r], &[]),
                mk("add", vec![c, d], &[]),
            ],
            &[],
        );
        assert_structural_equal(out.body(), &want);
        let first = &out.body().args()[0];
        assert!(first.args()[0].same_as(&first.args()[1]));
    }
}
