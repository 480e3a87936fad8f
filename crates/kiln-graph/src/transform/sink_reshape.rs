//! `SinkReshape`: an elementwise or broadcast call on a reshaped tensor runs before the
//! reshape. `f(reshape(x), c)` becomes `reshape(f(x, c'))`, so that the call joins the group
//! of `x`'s producer in `FuseOps`: a matrix product flattened to two dimensions by
//! `AlterOpLayout` (`[1, 640, 64] x [64, 256]` as a `[640, 64]` product reshaped back) takes
//! its bias and activation (GELU's diamond included) in its output loop instead of a second
//! pass over the output, and the reshape left at the end is a view.
//!
//! A call sinks a reshape when every reshaped operand has the call's output shape and the same
//! source shape `S` (so `mul(reshape(a), reshape(b))` sinks when `a` and `b` have one shape),
//! and every other operand, without its leading unit axes, spans only trailing axes that `S`
//! and the output shape share: a bias `[N]` added to `[B, M, N]` reshaped from `[B * M, N]`
//! broadcasts the same way over either. Calls with an `axis` attribute (`nn.bias_add`) and
//! `broadcast_to` stay, as does any call with a shape known only at run time. Sinking repeats
//! down a chain of such calls, since each rewritten call is again a reshape.
//!
//! A transpose sinks alike: `f(transpose(x, axes), c)` becomes `transpose(f(x, c), axes)` when
//! one operand is transposed and every other operand is one value (all its axes 1). A
//! detector's head, `sigmoid(transpose(reshape(conv)))`, then takes the sigmoid into the
//! convolution's output loop, in vectors, and the transpose left after it is a copy; fused
//! after the transpose, the sigmoid ran one scalar `exp` per element along the transposed rows. The call freed of a transpose may sink a reshape in turn, and
//! the other way round, when its operands are nodes of the input graph (typed): a rebuilt
//! operand is typed only by rebuilding it again, which would split a node shared with other
//! users into copies computed twice.

use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::visit::{rewrite_function_orig, with_children};
use crate::ir::Expr;
use crate::op::{self, attr, mk, OpPattern};
use kiln_ffi::Result;
use std::collections::HashMap;

/// The pass (opt level 3).
pub fn sink_reshape() -> Pass {
    function_pass("SinkReshape", 3, |f, _| {
        let f = infer_function(&f)?;
        // The source shapes of the reshapes this pass creates (new nodes are untyped).
        let mut sources: HashMap<usize, Vec<i64>> = HashMap::new();
        let out = rewrite_function_orig(&f, |orig, e| {
            let r = sink(orig, e, &mut sources)?;
            if !r.same_as(e) {
                return Ok(r);
            }
            sink_transpose(orig, e, &mut sources)
        })?;
        infer_function(&out)
    })
}

/// Whether `e` calls an elementwise or broadcast operator whose result is the broadcast of its
/// operands alone (no `axis` attribute, not `broadcast_to`): one that a reshape or transpose
/// of its operands may follow instead.
fn movable(e: &Expr) -> Result<bool> {
    let Some(name) = e.op_name() else {
        return Ok(false);
    };
    Ok(op::get(name)?.pattern <= OpPattern::Broadcast
        && name != "broadcast_to"
        && e.attrs().get("axis").is_none())
}

/// `e` (rebuilt from `orig`) with a transpose of its operands moved after it, when allowed
/// (see the module docs).
fn sink_transpose(orig: &Expr, e: &Expr, sources: &mut HashMap<usize, Vec<i64>>) -> Result<Expr> {
    if !movable(e)? {
        return Ok(e.clone());
    }
    let out_shape = orig.ty()?.shape().to_vec();
    if out_shape.contains(&-1) {
        return Ok(e.clone());
    }
    let mut perm: Option<Vec<i64>> = None;
    let mut args = Vec::with_capacity(e.args().len());
    for (a, o) in e.args().iter().zip(orig.args()) {
        let shape = o.ty()?.shape().to_vec();
        if a.op_name() == Some("transpose") && shape == out_shape {
            // Explicit axes only (the transpose may be new and untyped: no rank to reverse).
            let axes = a.attrs().opt_ints("axes")?.unwrap_or_default();
            let mut sorted = axes.clone();
            sorted.sort_unstable();
            let permutation = sorted.iter().copied().eq(0..shape.len() as i64);
            // One transposed operand: two (a residual add of transposed values) would move
            // the add out of the group of the product that computes one of them.
            if !permutation || perm.is_some() {
                return Ok(e.clone());
            }
            perm = Some(axes);
            args.push(a.args()[0].clone());
        } else if shape.iter().all(|&d| d == 1) {
            args.push(a.clone());
        } else {
            return Ok(e.clone());
        }
    }
    let Some(axes) = perm else {
        return Ok(e.clone());
    };
    // The call, typed, may sink a reshape of its operand in turn (a transposed reshape).
    let mut inner = with_children(e, &args);
    if let Some(typed) = super::infer_type::infer_node(&inner) {
        inner = sink(&typed, &typed, sources)?;
    }
    Ok(mk("transpose", vec![inner], &[("axes", attr(axes))]))
}

/// `e` (rebuilt from `orig`) with a reshape of its operands moved after it, when allowed.
fn sink(orig: &Expr, e: &Expr, sources: &mut HashMap<usize, Vec<i64>>) -> Result<Expr> {
    if !movable(e)? {
        return Ok(e.clone());
    }
    let out_shape = orig.ty()?.shape().to_vec();
    if out_shape.contains(&-1) {
        return Ok(e.clone());
    }
    // The common source shape of the reshaped operands.
    let mut source: Option<Vec<i64>> = None;
    let mut reshaped = vec![false; e.args().len()];
    for (i, (a, o)) in e.args().iter().zip(orig.args()).enumerate() {
        if a.op_name() != Some("reshape") || o.ty()?.shape() != out_shape.as_slice() {
            continue;
        }
        let s = match sources.get(&a.key()) {
            Some(s) => s.clone(),
            None if o.op_name() == Some("reshape") => o.args()[0].ty()?.shape().to_vec(),
            None => continue,
        };
        match &source {
            Some(prev) if *prev != s => return Ok(e.clone()),
            _ => source = Some(s),
        }
        reshaped[i] = true;
    }
    let Some(source) = source else {
        return Ok(e.clone());
    };
    if source.contains(&-1) {
        return Ok(e.clone());
    }
    // Trailing axes the source and output shapes share.
    let shared = source
        .iter()
        .rev()
        .zip(out_shape.iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut args = Vec::with_capacity(e.args().len());
    for ((a, o), &r) in e.args().iter().zip(orig.args()).zip(&reshaped) {
        if r {
            args.push(a.args()[0].clone());
            continue;
        }
        let shape = o.ty()?.shape().to_vec();
        let lead = shape.iter().take_while(|&&d| d == 1).count();
        let rest = &shape[lead..];
        if rest.len() > shared || rest.contains(&-1) {
            return Ok(e.clone());
        }
        args.push(if lead == 0 {
            a.clone()
        } else {
            mk(
                "reshape",
                vec![a.clone()],
                &[("newshape", attr(rest.to_vec()))],
            )
        });
    }
    // The call, typed, may sink a transpose of its operand in turn (a pixel shuffle).
    let mut inner = with_children(e, &args);
    if let Some(typed) = super::infer_type::infer_node(&inner) {
        inner = sink_transpose(&typed, &typed, sources)?;
    }
    let out = mk("reshape", vec![inner], &[("newshape", attr(out_shape))]);
    sources.insert(out.key(), source);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Function, IRModule, Type, Var};
    use crate::transform::PassContext;

    fn run(f: Function) -> Expr {
        let m = IRModule::from_main(f);
        let ctx = PassContext::with_opt_level(3);
        sink_reshape()
            .run(m, &ctx)
            .unwrap()
            .main()
            .unwrap()
            .body()
            .clone()
    }

    fn reshape(x: Expr, shape: &[i64]) -> Expr {
        mk("reshape", vec![x], &[("newshape", attr(shape.to_vec()))])
    }

    #[test]
    fn a_bias_and_a_gelu_diamond_run_before_the_reshape() {
        // y = reshape(x) + b; out = y * (erf(y) + 1)
        let x = Var::new("x", Type::f32(&[6, 4]));
        let y = mk(
            "add",
            vec![
                reshape(x.expr(), &[1, 6, 4]),
                Expr::const_f32(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 4]),
            ],
            &[],
        );
        let erf = mk("erf", vec![y.clone()], &[]);
        let one = Expr::const_f32(&[1.0], &[]);
        let out = mk("multiply", vec![y, mk("add", vec![erf, one], &[])], &[]);
        let body = run(Function::new(vec![x], out));
        assert_eq!(body.op_name(), Some("reshape"));
        assert_eq!(body.ty().unwrap(), Type::f32(&[1, 6, 4]));
        let mul = &body.args()[0];
        assert_eq!(mul.op_name(), Some("multiply"));
        assert_eq!(mul.ty().unwrap(), Type::f32(&[6, 4]));
        // Both operands of the product are reshape-free: the diamond sank as a whole.
        let [y, add1] = mul.args() else {
            panic!("two operands")
        };
        assert_eq!(y.op_name(), Some("add"));
        assert_eq!(y.args()[0].op_name(), None, "the parameter itself");
        assert_eq!(y.args()[1].ty().unwrap(), Type::f32(&[4]));
        assert_eq!(add1.op_name(), Some("add"));
        assert_eq!(add1.args()[0].op_name(), Some("erf"));
    }

    #[test]
    fn operands_broadcast_over_changed_axes_and_other_sources_stay() {
        // A [6, 1] operand broadcasts over [2, 3, 4]'s axes that the reshape changed.
        let x = Var::new("x", Type::f32(&[6, 4]));
        let c = Var::new("c", Type::f32(&[3, 1]));
        let add = mk("add", vec![reshape(x.expr(), &[2, 3, 4]), c.expr()], &[]);
        let body = run(Function::new(vec![x, c], add));
        assert_eq!(body.op_name(), Some("add"));
        // Two reshapes of different source shapes.
        let a = Var::new("a", Type::f32(&[6, 4]));
        let b = Var::new("b", Type::f32(&[2, 12]));
        let add = mk(
            "add",
            vec![reshape(a.expr(), &[2, 3, 4]), reshape(b.expr(), &[2, 3, 4])],
            &[],
        );
        assert_eq!(run(Function::new(vec![a, b], add)).op_name(), Some("add"));
        // A reshaped operand broadcast up to a larger output.
        let a = Var::new("a", Type::f32(&[4]));
        let d = Var::new("d", Type::f32(&[3, 4]));
        let add = mk("add", vec![reshape(a.expr(), &[1, 4]), d.expr()], &[]);
        assert_eq!(run(Function::new(vec![a, d], add)).op_name(), Some("add"));
        // bias_add names an axis.
        let a = Var::new("a", Type::f32(&[6, 4]));
        let w = Var::new("w", Type::f32(&[3]));
        let ba = mk(
            "nn.bias_add",
            vec![reshape(a.expr(), &[2, 3, 4]), w.expr()],
            &[("axis", attr(1i64))],
        );
        assert_eq!(
            run(Function::new(vec![a, w], ba)).op_name(),
            Some("nn.bias_add")
        );
    }

    #[test]
    fn a_sigmoid_after_a_transposed_reshape_runs_before_both() {
        // A detector head: sigmoid(transpose(reshape(x))) -> transpose(reshape(sigmoid(x))),
        // and a call by a single value after it sinks the transpose too.
        let x = Var::new("x", Type::f32(&[1, 6, 2, 2]));
        let r = reshape(x.expr(), &[1, 2, 3, 4]);
        let t = mk("transpose", vec![r], &[("axes", attr(vec![0i64, 1, 3, 2]))]);
        let s = mk("sigmoid", vec![t], &[]);
        let out = mk(
            "multiply",
            vec![s, Expr::const_f32(&[2.0], &[1, 1, 1, 1])],
            &[],
        );
        let body = run(Function::new(vec![x], out));
        assert_eq!(body.op_name(), Some("transpose"), "{body}");
        assert_eq!(body.ty().unwrap(), Type::f32(&[1, 2, 4, 3]));
        let mul = &body.args()[0];
        assert_eq!(mul.op_name(), Some("multiply"), "{body}");
        let r = &mul.args()[0];
        assert_eq!(r.op_name(), Some("reshape"), "{body}");
        let sig = &r.args()[0];
        assert_eq!(sig.op_name(), Some("sigmoid"), "{body}");
        assert_eq!(sig.ty().unwrap(), Type::f32(&[1, 6, 2, 2]));
        assert_eq!(sig.args()[0].op_name(), None, "the parameter itself");
        // A per-column operand of the transposed shape stays after the transpose.
        let x = Var::new("x", Type::f32(&[2, 3]));
        let t = mk(
            "transpose",
            vec![x.expr()],
            &[("axes", attr(vec![1i64, 0]))],
        );
        let add = mk("add", vec![t, Expr::const_f32(&[1.0, 2.0], &[2])], &[]);
        assert_eq!(run(Function::new(vec![x], add)).op_name(), Some("add"));
    }

    #[test]
    fn values_rebuilt_upstream_stay_one_node_for_all_their_users() {
        // A sunk transpose upstream rebuilds the softmax after it; two calls on reshapes of
        // that softmax each sink their reshape, and both must read the one softmax (a copy
        // would compute it, and everything above it, twice).
        let x = Var::new("x", Type::f32(&[2, 3]));
        let t = mk(
            "transpose",
            vec![x.expr()],
            &[("axes", attr(vec![1i64, 0]))],
        );
        let e = mk("exp", vec![t], &[]);
        let soft = mk("nn.softmax", vec![e], &[("axis", attr(1i64))]);
        let two = Expr::const_f32(&[2.0], &[]);
        let three = Expr::const_f32(&[3.0], &[]);
        let a = mk("multiply", vec![reshape(soft.clone(), &[6]), two], &[]);
        let b = mk("multiply", vec![reshape(soft, &[6]), three], &[]);
        let body = run(Function::new(vec![x], mk("add", vec![a, b], &[])));
        let count = |name: &str| {
            crate::ir::visit::post_order(&body)
                .iter()
                .filter(|e| e.op_name() == Some(name))
                .count()
        };
        assert_eq!(count("nn.softmax"), 1, "{body}");
        assert_eq!(count("exp"), 1, "{body}");
    }

    #[test]
    fn two_reshapes_of_one_shape_sink_together() {
        let a = Var::new("a", Type::f32(&[6, 4]));
        let b = Var::new("b", Type::f32(&[6, 4]));
        let mul = mk(
            "multiply",
            vec![reshape(a.expr(), &[2, 12]), reshape(b.expr(), &[2, 12])],
            &[],
        );
        let body = run(Function::new(vec![a, b], mul));
        assert_eq!(body.op_name(), Some("reshape"));
        assert_eq!(body.ty().unwrap(), Type::f32(&[2, 12]));
        assert_eq!(body.args()[0].ty().unwrap(), Type::f32(&[6, 4]));
    }
}
