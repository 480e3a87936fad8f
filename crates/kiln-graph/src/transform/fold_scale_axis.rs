//! `FoldScaleAxis` (forward direction, the patterns batch norm leaves behind):
//! `multiply(conv2d(x, W), s)` with a constant per-output-channel `s` (shape `[C, 1, 1]`,
//! `[1, C, 1, 1]`, `[C]`-free scalars included) becomes `conv2d(x, W * s[:, None, None, None])`,
//! and `multiply(add(conv2d(x, W), b), s)` with a constant channel bias becomes
//! `add(conv2d(x, W * s), b * s)`. Only when the conv (and the add) have no other user and
//! `W`, `b`, `s` are constants (run FoldConstant first).

use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::visit::{rewrite_post_orig, use_counts};
use crate::ir::{Expr, Type};
use crate::op::{eval, mk};
use kiln_ffi::Result;
use kiln_runtime::tensor::Tensor;
use std::collections::HashMap;

/// Per-output-channel scale values (`C` of them) from a constant `s` applied to `[N, C, H, W]`.
fn channel_scale(s: &Tensor, c: i64) -> Option<Vec<f64>> {
    let shape = s.shape();
    let per_channel = matches!(shape, [k, 1, 1] | [1, k, 1, 1] if *k == c);
    let scalar = shape.iter().all(|&d| d == 1) && shape.len() <= 4;
    let v = s.to_f64_vec().ok()?;
    if per_channel {
        Some(v)
    } else if scalar {
        Some(vec![v[0]; c as usize])
    } else {
        None
    }
}

/// `t` (leading axis = channel) with each channel multiplied by `scale`.
fn scale_rows(t: &Tensor, scale: &[f64]) -> Result<Tensor> {
    let v = eval::values(t)?;
    let per = v.len() / scale.len();
    let out: Vec<f64> = v
        .iter()
        .enumerate()
        .map(|(i, x)| x * scale[i / per])
        .collect();
    eval::make(&out, &Type::tensor(t.shape(), t.dtype()))
}

fn fold(e: &Expr, orig: &Expr, uses: &HashMap<usize, usize>) -> Result<Option<Expr>> {
    if e.op_name() != Some("multiply") {
        return Ok(None);
    }
    let (lhs, s, orig_lhs) = match (e.args()[0].as_constant(), e.args()[1].as_constant()) {
        (None, Some(s)) => (&e.args()[0], s, &orig.args()[0]),
        (Some(s), None) => (&e.args()[1], s, &orig.args()[1]),
        _ => return Ok(None),
    };
    let single = |x: &Expr| uses.get(&x.key()) == Some(&1);
    if !single(orig_lhs) {
        return Ok(None);
    }
    let (conv, bias, orig_conv) = match lhs.op_name() {
        Some("nn.conv2d") => (lhs, None, orig_lhs),
        Some("add") => match (lhs.args()[0].op_name(), lhs.args()[1].as_constant()) {
            (Some("nn.conv2d"), Some(b)) => (&lhs.args()[0], Some(b), &orig_lhs.args()[0]),
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    if !single(orig_conv) {
        return Ok(None);
    }
    let Some(w) = conv.args()[1].as_constant() else {
        return Ok(None);
    };
    let c = w.shape()[0];
    let Some(scale) = channel_scale(s, c) else {
        return Ok(None);
    };
    let new_w = Expr::constant(scale_rows(w, &scale)?);
    let new_conv = Expr::call_raw(
        Expr::op("nn.conv2d"),
        vec![conv.args()[0].clone(), new_w],
        conv.as_call().expect("a call").attrs.clone(),
    );
    Ok(Some(match bias {
        None => new_conv,
        Some(b) => {
            let bs = b.shape();
            let ok = matches!(bs, [k, 1, 1] | [1, k, 1, 1] if *k == c);
            if !ok {
                return Ok(None);
            }
            let nb = scale_rows(&b.view(&[c, 1, 1], b.dtype())?, &scale)?.view(bs, b.dtype())?;
            mk("add", vec![new_conv, Expr::constant(nb)], &[])
        }
    }))
}

/// The pass (opt level 3, as in TVM).
pub fn fold_scale_axis() -> Pass {
    function_pass("FoldScaleAxis", 3, |f, _| {
        let uses = use_counts(f.body());
        let body = rewrite_post_orig(f.body(), |orig, e| {
            Ok(fold(e, orig, &uses)?.unwrap_or_else(|| e.clone()))
        })?;
        infer_function(&f.with_body(f.params().to_vec(), body))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{assert_structural_equal, Function, IRModule, Var};
    use crate::transform::PassContext;

    #[test]
    fn scale_into_weights_through_bias() {
        let x = Var::new("x", Type::f32(&[1, 1, 3, 3]));
        let w = Expr::const_f32(&[1.0, 2.0], &[2, 1, 1, 1]);
        let conv = mk("nn.conv2d", vec![x.expr(), w], &[]);
        let add = mk(
            "add",
            vec![conv, Expr::const_f32(&[1.0, 1.0], &[2, 1, 1])],
            &[],
        );
        let body = mk(
            "multiply",
            vec![add, Expr::const_f32(&[3.0, 5.0], &[2, 1, 1])],
            &[],
        );
        let m = IRModule::from_main(Function::new(vec![x.clone()], body));
        let out = fold_scale_axis()
            .run(m, &PassContext::with_opt_level(3))
            .unwrap()
            .main()
            .unwrap();
        let want = mk(
            "add",
            vec![
                mk(
                    "nn.conv2d",
                    vec![x.expr(), Expr::const_f32(&[3.0, 10.0], &[2, 1, 1, 1])],
                    &[],
                ),
                Expr::const_f32(&[3.0, 5.0], &[2, 1, 1]),
            ],
            &[],
        );
        assert_structural_equal(out.body(), &want);
    }

    #[test]
    fn shared_conv_is_left_alone() {
        let x = Var::new("x", Type::f32(&[1, 1, 3, 3]));
        let conv = mk(
            "nn.conv2d",
            vec![x.expr(), Expr::const_f32(&[1.0], &[1, 1, 1, 1])],
            &[],
        );
        let m1 = mk(
            "multiply",
            vec![conv.clone(), Expr::const_f32(&[2.0], &[1, 1, 1])],
            &[],
        );
        let body = mk("add", vec![m1, conv], &[]);
        let f = Function::new(vec![x.clone()], body.clone());
        let out = fold_scale_axis()
            .run(IRModule::from_main(f), &PassContext::with_opt_level(3))
            .unwrap()
            .main()
            .unwrap();
        assert_structural_equal(out.body(), &body);
    }
}
