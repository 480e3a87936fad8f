//! `CanonicalizeOps`: `nn.bias_add(x, b, axis)` becomes `add(x, expand_dims(b, 1, n))` with
//! `n = rank - 1 - axis`, so later passes (FoldScaleAxis, FuseOps) see plain broadcasts.

use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::visit::rewrite_function_orig;
use crate::ir::AttrValue;
use crate::op::{mk, normalize_axis};
use kiln_ffi::Error;

/// The pass (opt level 3, as in TVM).
pub fn canonicalize_ops() -> Pass {
    function_pass("CanonicalizeOps", 3, |f, _| {
        let f = infer_function(&f)?;
        let out = rewrite_function_orig(&f, |orig, e| {
            if e.op_name() != Some("nn.bias_add") {
                return Ok(e.clone());
            }
            let (x, b) = (&e.args()[0], &e.args()[1]);
            // The original node is typed; the rebuilt one may not be.
            let rank = orig.args()[0].ty()?.shape().len();
            let axis = normalize_axis(e.attrs().int("axis")?, rank).map_err(Error::value_error)?;
            let n = rank - 1 - axis;
            let b = if n == 0 {
                b.clone()
            } else {
                mk(
                    "expand_dims",
                    vec![b.clone()],
                    &[
                        ("axis", 1.into()),
                        ("num_newaxis", AttrValue::Int(n as i64)),
                    ],
                )
            };
            Ok(mk("add", vec![x.clone(), b], &[]))
        })?;
        infer_function(&out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{assert_structural_equal, Function, IRModule, Type, Var};
    use crate::transform::PassContext;

    #[test]
    fn bias_add_to_add() {
        let x = Var::new("x", Type::f32(&[1, 3, 4, 4]));
        let b = Var::new("b", Type::f32(&[3]));
        let body = mk("nn.bias_add", vec![x.expr(), b.expr()], &[]);
        let m = IRModule::from_main(Function::new(vec![x.clone(), b.clone()], body));
        let out = canonicalize_ops()
            .run(m, &PassContext::with_opt_level(3))
            .unwrap()
            .main()
            .unwrap();
        let want = mk(
            "add",
            vec![
                x.expr(),
                mk(
                    "expand_dims",
                    vec![b.expr()],
                    &[("axis", 1.into()), ("num_newaxis", 2.into())],
                ),
            ],
            &[],
        );
        assert_structural_equal(out.body(), &want);
        // Below its opt level the pass does not run.
        let m = IRModule::from_main(Function::new(
            vec![x.clone(), b.clone()],
            mk("nn.bias_add", vec![x.expr(), b.expr()], &[]),
        ));
        let same = canonicalize_ops().apply(m).unwrap().main().unwrap();
        assert_eq!(same.body().op_name(), Some("nn.bias_add"));
    }
}
