//! `SimplifyInference`: inference-time rewrites of training ops.
//! `batch_norm(x, g, b, mean, var).0` becomes `x * s + (b - mean * s)` with
//! `s = g / sqrt(var + eps)` expanded along the channel axis (FoldConstant then folds `s` and
//! the shift when the parameters are constants); `dropout(x).0` becomes `x`.

use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::visit::rewrite_function_orig;
use crate::ir::{AttrValue, Expr};
use crate::op::mk;
use kiln_ffi::Result;

fn expand(e: Expr, n: usize) -> Expr {
    if n == 0 {
        e
    } else {
        mk(
            "expand_dims",
            vec![e],
            &[
                ("axis", 1.into()),
                ("num_newaxis", AttrValue::Int(n as i64)),
            ],
        )
    }
}

fn batch_norm(call: &Expr, rank: usize) -> Result<Expr> {
    let a = call.args();
    let attrs = call.attrs();
    let (data, gamma, beta, mean, var) = (&a[0], &a[1], &a[2], &a[3], &a[4]);
    let axis = crate::op::normalize_axis(attrs.int("axis")?, rank)
        .map_err(kiln_ffi::Error::value_error)?;
    let eps = Expr::scalar_f32(attrs.float("epsilon")? as f32);
    let inv_std = mk("rsqrt", vec![mk("add", vec![var.clone(), eps], &[])], &[]);
    let scale = if attrs.bool("scale")? {
        mk("multiply", vec![inv_std, gamma.clone()], &[])
    } else {
        inv_std
    };
    let neg_mean = mk("negative", vec![mean.clone()], &[]);
    let mut shift = mk("multiply", vec![neg_mean, scale.clone()], &[]);
    if attrs.bool("center")? {
        shift = mk("add", vec![shift, beta.clone()], &[]);
    }
    let trailing = rank - 1 - axis;
    let out = mk("multiply", vec![data.clone(), expand(scale, trailing)], &[]);
    Ok(mk("add", vec![out, expand(shift, trailing)], &[]))
}

/// The pass (opt level 0).
pub fn simplify_inference() -> Pass {
    function_pass("SimplifyInference", 0, |f, _| {
        let f = infer_function(&f)?;
        let out = rewrite_function_orig(&f, |orig, e| {
            if let Expr::TupleGetItem(g) = e {
                if g.index == 0 {
                    match g.tuple.op_name() {
                        Some("nn.batch_norm") => {
                            // The original node is typed; the rebuilt one may not be.
                            let rank = orig.ty()?.shape().len();
                            return batch_norm(&g.tuple, rank);
                        }
                        Some("nn.dropout") => return Ok(g.tuple.args()[0].clone()),
                        _ => {}
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

    #[test]
    fn batch_norm_and_dropout() {
        let x = Var::new("x", Type::f32(&[1, 2, 3, 3]));
        let ps: Vec<Var> = ["g", "b", "m", "v"]
            .iter()
            .map(|n| Var::new(n, Type::f32(&[2])))
            .collect();
        let mut args = vec![x.expr()];
        args.extend(ps.iter().map(|p| p.expr()));
        let bn = Expr::get_item(mk("nn.batch_norm", args, &[("epsilon", 1e-3.into())]), 0);
        let body = Expr::get_item(mk("nn.dropout", vec![bn], &[]), 0);
        let mut params = vec![x.clone()];
        params.extend(ps.iter().cloned());
        let m = IRModule::from_main(Function::new(params.clone(), body));
        let out = simplify_inference().apply(m).unwrap().main().unwrap();

        let (g, b, mn, v) = (ps[0].expr(), ps[1].expr(), ps[2].expr(), ps[3].expr());
        let scale = mk(
            "multiply",
            vec![
                mk(
                    "rsqrt",
                    vec![mk("add", vec![v, Expr::scalar_f32(1e-3)], &[])],
                    &[],
                ),
                g,
            ],
            &[],
        );
        let shift = mk(
            "add",
            vec![
                mk(
                    "multiply",
                    vec![mk("negative", vec![mn], &[]), scale.clone()],
                    &[],
                ),
                b,
            ],
            &[],
        );
        let want = mk(
            "add",
            vec![
                mk("multiply", vec![x.expr(), expand(scale, 2)], &[]),
                expand(shift, 2),
            ],
            &[],
        );
        assert_structural_equal(out.body(), &want);
        assert_eq!(out.body().ty().unwrap(), Type::f32(&[1, 2, 3, 3]));
    }
}
