//! `FuseOps`: groups operator calls into `Primitive = 1` functions, each of which later lowers
//! to one tensor program; `main` then calls those functions.
//!
//! TVM's rules, applied along producer -> consumer edges where the producer has exactly one
//! user (so a group has one output, its root):
//! - an elementwise/broadcast group fuses into an injective, broadcast, elementwise or
//!   reduction consumer (`relu -> sum`, `add -> reshape`);
//! - an injective group fuses into an injective (or lighter) consumer, and into a convolution
//!   that pads its input: the padding stage, a copy of the input at root, reads through it
//!   (a channel shuffle's reshape, transpose and reshape before a depthwise layer are not
//!   written out on their own);
//! - an out-elementwise-fusable group (conv2d, dense, pooling) takes its elementwise epilogue:
//!   a consumer of pattern <= broadcast whose output has the producer's shape (TVM's
//!   "broadcast edge that is elementwise"), one such anchor per group;
//! - a convolution's group also takes a `layout_transform` of its channel blocks back to NCHW
//!   (ConvertBlockedLayout's boundary): the output stage writes NCHW;
//! - a matrix product's group (`nn.matmul`, `nn.batch_matmul` and their epilogue) joins a
//!   softmax along the last axis that is its one consumer (attention scores: the softmax's
//!   schedule computes a block of rows of the product just before their statistics);
//! - reductions, opaque ops (softmax, batch_norm, ...) and tuples end a group.
//!
//! Differences from TVM, documented: no post-dominator tree; a producer with several users
//! joins its consumers' group only as an elementwise diamond (every use a short chain of
//! single-use elementwise calls meeting at one call: `x * sigmoid(x)`, GELU), else it starts
//! its own group; tuples and projections stay outside
//! groups, no `max_fuse_depth`. Non-scalar constants become parameters of the fused function
//! (the graph codegen turns them into params); scalar constants stay inside. At opt level 0
//! every call becomes its own primitive function.

use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::attrs::{make_map, AttrValue};
use crate::ir::visit::{children, post_order, use_counts, with_children};
use crate::ir::{Expr, Function, Var};
use crate::op::{self, OpPattern};
use kiln_ffi::Result;
use std::collections::HashMap;

struct Groups {
    parent: Vec<usize>,
    pattern: Vec<OpPattern>,
    anchored: Vec<bool>,
    /// Whether the group holds a convolution (which may end with its blocks transformed
    /// back to NCHW).
    conv: Vec<bool>,
    /// Whether the group holds a matrix product of activations (`nn.matmul`,
    /// `nn.batch_matmul`), which a softmax over its rows may take in.
    product: Vec<bool>,
}

impl Groups {
    fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    /// Merges the producer group `p` into the consumer group `c`.
    fn merge(&mut self, p: usize, c: usize) {
        self.parent[p] = c;
        self.pattern[c] = self.pattern[c].max(self.pattern[p]);
        self.anchored[c] |= self.anchored[p];
        self.conv[c] |= self.conv[p];
        self.product[c] |= self.product[p];
    }
}

fn is_op_call(e: &Expr) -> bool {
    e.op_name().is_some()
}

/// The elementwise diamond over call `p` (indices into `calls`), if any: the call `c` where
/// every use of `p` meets, each through a chain of single-use elementwise/broadcast calls of
/// `p`'s shape (`x * sigmoid(x)`; GELU's `(0.5 * x) * (1 + erf(x / sqrt 2))`), `c`
/// elementwise and of `p`'s shape too. Returns `c` and the chains' calls; `c` then
/// post-dominates `p` and the whole diamond can be one group with one output (TVM finds
/// these with a post-dominator tree).
fn diamond(
    p: usize,
    calls: &[&Expr],
    users: &HashMap<usize, Vec<usize>>,
    uses: &HashMap<usize, usize>,
) -> Result<Option<(usize, Vec<usize>)>> {
    const MAX_CHAIN: usize = 5;
    let shape = calls[p].ty()?.shape().to_vec();
    let Some(us) = users.get(&p) else {
        return Ok(None);
    };
    if us.len() != uses.get(&calls[p].key()).copied().unwrap_or(0) {
        return Ok(None); // also used outside the calls (an output, a tuple)
    }
    let fits = |n: usize| -> Result<bool> {
        let e = calls[n];
        Ok(
            op::get(e.op_name().unwrap_or_default())?.pattern <= OpPattern::Broadcast
                && e.ty()?.shape() == shape.as_slice(),
        )
    };
    // From each use, the calls it flows through while each is elementwise with one user.
    let mut walks = Vec::with_capacity(us.len());
    for &u in us {
        let mut walk = vec![u];
        let mut n = u;
        while walk.len() <= MAX_CHAIN && fits(n)? {
            match users.get(&n).map(Vec::as_slice) {
                Some([next]) if uses.get(&calls[n].key()) == Some(&1) => {
                    n = *next;
                    walk.push(n);
                }
                _ => break,
            }
        }
        walks.push(walk);
    }
    let Some(c) = walks[0]
        .iter()
        .copied()
        .find(|n| walks.iter().all(|w| w.contains(n)))
    else {
        return Ok(None);
    };
    if !fits(c)? {
        return Ok(None);
    }
    let mut chain = Vec::new();
    for w in &walks {
        let before = w.iter().position(|&n| n == c).expect("c is on every walk");
        for &n in &w[..before] {
            if !chain.contains(&n) {
                chain.push(n);
            }
        }
    }
    Ok(Some((c, chain)))
}

/// Merges the diamond of [`diamond`] into `c`'s group: the chains, then `p`'s group, each
/// only when the two groups do not both hold an anchor.
fn fuse_diamond(g: &mut Groups, p: usize, c: usize, chain: &[usize]) {
    let groups: Vec<usize> = chain.iter().map(|&n| g.find(n)).collect();
    let gc = g.find(c);
    let gp = g.find(p);
    let anchors = groups
        .iter()
        .chain([&gp])
        .filter(|&&x| x != gc && g.anchored[x])
        .count()
        + usize::from(g.anchored[gc]);
    // As for one use: an elementwise producer, or an anchor taking its epilogue.
    let fusable =
        g.pattern[gp] <= OpPattern::Broadcast || g.pattern[gp] == OpPattern::OutEWiseFusable;
    if anchors > 1 || gp == gc || !fusable {
        return;
    }
    for gn in groups.into_iter().chain([gp]) {
        let (gn, gc) = (g.find(gn), g.find(c));
        if gn != gc {
            g.merge(gn, gc);
        }
    }
}

/// Whether `e` transforms channel blocks back to NCHW (`layout_transform` from `NCHW{b}c`,
/// what ConvertBlockedLayout puts after a convolution whose consumer wants NCHW): the
/// convolution's output stage then writes NCHW, as its unpack would.
fn unblocks(e: &Expr) -> Result<bool> {
    Ok(e.op_name() == Some("layout_transform")
        && e.attrs().str("dst_layout")? == "NCHW"
        && crate::op::nn::channel_block(&e.attrs().str("src_layout")?).is_some_and(|b| b.is_some()))
}

/// Whether `e` is a 2-D convolution that pads its input: its padding stage copies the input
/// anyway, so an injective producer (a channel shuffle's reshape, transpose, reshape) can be
/// read through in that copy instead of being written out on its own.
fn padded_conv(e: &Expr) -> Result<bool> {
    Ok(e.op_name() == Some("nn.conv2d") && e.attrs().ints("padding")?.iter().any(|&p| p > 0))
}

/// Whether `e` is a softmax along its input's last axis, of static shape: it takes in the
/// matrix product before it (attention scores), whose rows its schedule computes a block at a
/// time just before their statistics, while they are in L1 (the scores never go to memory).
fn softmax_of_rows(e: &Expr) -> Result<bool> {
    if e.op_name() != Some("nn.softmax") {
        return Ok(false);
    }
    let ty = e.ty()?;
    let shape = ty.shape();
    let axis = e.attrs().int("axis")?;
    let last = shape.len() as i64 - 1;
    Ok(last >= 1 && (axis == -1 || axis == last) && shape.iter().all(|&d| d > 0))
}

/// The name TVM would give a fused function: `fused_` + the op names in order, `.` -> `_`.
pub fn fused_name(f: &Function) -> String {
    let ops: Vec<String> = post_order(f.body())
        .iter()
        .filter_map(|e| e.op_name().map(|n| n.replace('.', "_")))
        .collect();
    format!("fused_{}", ops.join("_"))
}

/// Fuses the calls of one function (typed first).
pub fn fuse_function(f: &Function, fuse: bool) -> Result<Function> {
    let f = infer_function(f)?;
    let body = f.body().clone();
    let order = post_order(&body);
    let uses = use_counts(&body);
    let calls: Vec<&Expr> = order.iter().filter(|e| is_op_call(e)).collect();
    let index: HashMap<usize, usize> = calls
        .iter()
        .enumerate()
        .map(|(i, e)| (e.key(), i))
        .collect();
    let mut g = Groups {
        parent: (0..calls.len()).collect(),
        pattern: Vec::with_capacity(calls.len()),
        anchored: Vec::with_capacity(calls.len()),
        conv: Vec::with_capacity(calls.len()),
        product: Vec::with_capacity(calls.len()),
    };
    for e in &calls {
        let p = op::get(e.op_name().unwrap_or_default())?.pattern;
        g.pattern.push(p);
        g.anchored
            .push(p == OpPattern::OutEWiseFusable || p == OpPattern::CommReduce);
        g.conv.push(e.op_name() == Some("nn.conv2d"));
        g.product
            .push(matches!(e.op_name(), Some("nn.matmul" | "nn.batch_matmul")));
    }
    let mut users: HashMap<usize, Vec<usize>> = HashMap::new();
    for (ci, c) in calls.iter().enumerate() {
        for arg in c.args() {
            if let Some(&pi) = index.get(&arg.key()) {
                users.entry(pi).or_default().push(ci);
            }
        }
    }
    // TVM's phases: 0 fuses elementwise/broadcast producers and anchors' epilogues, 1 fuses
    // injective producers into injective groups (so `relu -> sum` wins over `reshape -> relu`).
    for phase in 0..2 {
        if !fuse {
            break;
        }
        for (ci, c) in calls.iter().enumerate() {
            let cp = op::get(c.op_name().unwrap_or_default())?.pattern;
            let out_shape = c.ty()?.shape().to_vec();
            for arg in c.args() {
                let Some(&pi) = index.get(&arg.key()) else {
                    continue;
                };
                if uses.get(&arg.key()) != Some(&1) {
                    if phase == 0 && cp <= OpPattern::Broadcast {
                        if let Some((c, chain)) = diamond(pi, &calls, &users, &uses)? {
                            fuse_diamond(&mut g, pi, c, &chain);
                        }
                    }
                    continue;
                }
                let (gp, gc) = (g.find(pi), g.find(ci));
                if gp == gc {
                    continue;
                }
                let ok = match (phase, g.pattern[gp]) {
                    (0, OpPattern::OutEWiseFusable) => {
                        !g.anchored[gc]
                            && ((cp <= OpPattern::Broadcast
                                && arg.ty()?.shape() == out_shape.as_slice())
                                || (g.conv[gp] && unblocks(c)?)
                                || (g.product[gp] && softmax_of_rows(c)?))
                    }
                    (0, p) if p <= OpPattern::Broadcast => {
                        cp <= OpPattern::Injective || cp == OpPattern::CommReduce
                    }
                    (1, OpPattern::Injective) => {
                        (cp <= OpPattern::Injective && g.pattern[gc] <= OpPattern::Injective)
                            || padded_conv(c)?
                    }
                    _ => false,
                };
                if ok {
                    g.merge(gp, gc);
                }
            }
        }
    }
    // Members of each group, in order; the root is the last one.
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..calls.len() {
        let r = g.find(i);
        members.entry(r).or_default().push(i);
    }
    let mut outer: HashMap<usize, Expr> = HashMap::new();
    for e in &order {
        let new = match index.get(&e.key()) {
            Some(&i) => {
                let r = g.find(i);
                let group = &members[&r];
                if *group.last().expect("a group has members") != i {
                    continue; // an inner member: only its group's function uses it
                }
                build_group(group, &calls, &outer)?
            }
            None => {
                let kids: Vec<Expr> = children(e)
                    .iter()
                    .map(|k| outer.get(&k.key()).cloned().unwrap_or_else(|| k.clone()))
                    .collect();
                with_children(e, &kids)
            }
        };
        outer.insert(e.key(), new);
    }
    let new_body = outer.remove(&body.key()).unwrap_or(body);
    infer_function(&f.with_body(f.params().to_vec(), new_body))
}

/// The primitive function of one group and its call in the outer function.
fn build_group(group: &[usize], calls: &[&Expr], outer: &HashMap<usize, Expr>) -> Result<Expr> {
    let member: HashMap<usize, usize> = group.iter().map(|&i| (calls[i].key(), i)).collect();
    let mut inner: HashMap<usize, Expr> = HashMap::new();
    let mut params: Vec<Var> = Vec::new();
    let mut args: Vec<Expr> = Vec::new();
    let mut param_of: HashMap<usize, Expr> = HashMap::new();
    for &i in group {
        let e = calls[i];
        let mut new_args = Vec::new();
        for a in e.args() {
            let k = a.key();
            let v = if member.contains_key(&k) {
                inner[&k].clone()
            } else if matches!(a, Expr::Constant(c) if c.data.ndim() == 0) {
                a.clone()
            } else if let Some(p) = param_of.get(&k) {
                p.clone()
            } else {
                let p = Var::new(&format!("p{}", params.len()), a.ty()?);
                params.push(p.clone());
                args.push(outer.get(&k).cloned().unwrap_or_else(|| a.clone()));
                param_of.insert(k, p.expr());
                p.expr()
            };
            new_args.push(v);
        }
        let c = e.as_call().expect("group members are calls");
        inner.insert(
            e.key(),
            Expr::call_raw(c.op.clone(), new_args, c.attrs.clone()),
        );
    }
    let root = calls[*group.last().expect("non-empty")];
    let body = inner.remove(&root.key()).expect("the root was built");
    let func = Function::with_attrs(params, body, make_map(&[("Primitive", AttrValue::Int(1))]));
    Ok(Expr::call_raw(Expr::Function(func), args, make_map(&[])))
}

/// The pass (opt level 0; at context opt level 0 each call is its own group).
pub fn fuse_ops() -> Pass {
    function_pass("FuseOps", 0, |f, ctx| {
        if f.is_primitive() {
            return Ok(f);
        }
        fuse_function(&f, ctx.opt_level > 0)
    })
}

/// The fused functions called by `f`'s body, in order, by their [`fused_name`].
pub fn fused_groups(f: &Function) -> Vec<String> {
    post_order(f.body())
        .iter()
        .filter_map(|e| match e {
            Expr::Function(g) if g.is_primitive() => Some(fused_name(g)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{assert_structural_equal, IRModule, Type};
    use crate::op::mk;

    fn run(params: Vec<Var>, body: Expr) -> Function {
        fuse_ops()
            .apply(IRModule::from_main(Function::new(params, body)))
            .unwrap()
            .main()
            .unwrap()
    }

    #[test]
    fn conv_takes_its_epilogue() {
        let x = Var::new("x", Type::f32(&[1, 3, 8, 8]));
        let w = Var::new("w", Type::f32(&[4, 3, 3, 3]));
        let b = Var::new("b", Type::f32(&[4, 1, 1]));
        let conv = mk(
            "nn.conv2d",
            vec![x.expr(), w.expr()],
            &[("padding", [1, 1].into())],
        );
        let body = mk("nn.relu", vec![mk("add", vec![conv, b.expr()], &[])], &[]);
        let out = run(vec![x.clone(), w.clone(), b.clone()], body);
        assert_eq!(fused_groups(&out), vec!["fused_nn_conv2d_add_nn_relu"]);

        // The expected IR: one primitive function over three parameters.
        let p: Vec<Var> = [
            Type::f32(&[1, 3, 8, 8]),
            Type::f32(&[4, 3, 3, 3]),
            Type::f32(&[4, 1, 1]),
        ]
        .iter()
        .enumerate()
        .map(|(i, t)| Var::new(&format!("p{i}"), t.clone()))
        .collect();
        let inner = mk(
            "nn.relu",
            vec![mk(
                "add",
                vec![
                    mk(
                        "nn.conv2d",
                        vec![p[0].expr(), p[1].expr()],
                        &[("padding", [1, 1].into())],
                    ),
                    p[2].expr(),
                ],
                &[],
            )],
            &[],
        );
        let func = Function::with_attrs(p, inner, make_map(&[("Primitive", AttrValue::Int(1))]));
        let want = Expr::call_raw(
            Expr::Function(func),
            vec![x.expr(), w.expr(), b.expr()],
            make_map(&[]),
        );
        assert_structural_equal(out.body(), &want);
        assert!(out.body().ty().is_ok());
    }

    #[test]
    fn two_anchors_do_not_share_a_group() {
        let x = Var::new("x", Type::f32(&[1, 3, 8, 8]));
        let w = Var::new("w", Type::f32(&[3, 3, 1, 1]));
        let c1 = mk("nn.conv2d", vec![x.expr(), w.expr()], &[]);
        let c2 = mk("nn.conv2d", vec![c1, w.expr()], &[]);
        let body = mk("nn.relu", vec![c2], &[]);
        let out = run(vec![x, w], body);
        assert_eq!(
            fused_groups(&out),
            vec!["fused_nn_conv2d", "fused_nn_conv2d_nn_relu"]
        );
    }

    #[test]
    fn attention_scores_join_their_softmax() {
        let q = Var::new("q", Type::f32(&[2, 16, 8]));
        let k = Var::new("k", Type::f32(&[2, 16, 8]));
        let scores = |q: &Var, k: &Var| {
            let p = mk("nn.batch_matmul", vec![q.expr(), k.expr()], &[]);
            mk("multiply", vec![p, Expr::const_f32(&[0.5], &[])], &[])
        };
        let sm = mk(
            "nn.softmax",
            vec![scores(&q, &k)],
            &[("axis", (-1i64).into())],
        );
        let out = run(vec![q.clone(), k.clone()], sm);
        assert_eq!(
            fused_groups(&out),
            vec!["fused_nn_batch_matmul_multiply_nn_softmax"]
        );
        // Along another axis, or with the scores used twice, the softmax stays apart.
        let sm = mk("nn.softmax", vec![scores(&q, &k)], &[("axis", 1i64.into())]);
        let out = run(vec![q.clone(), k.clone()], sm);
        assert_eq!(
            fused_groups(&out),
            vec!["fused_nn_batch_matmul_multiply", "fused_nn_softmax"]
        );
        let s = scores(&q, &k);
        let sm = mk("nn.softmax", vec![s.clone()], &[("axis", (-1i64).into())]);
        let out = run(vec![q, k], mk("add", vec![sm, s], &[]));
        assert_eq!(
            fused_groups(&out),
            vec![
                "fused_nn_batch_matmul_multiply",
                "fused_nn_softmax",
                "fused_add"
            ]
        );
    }

    #[test]
    fn injective_chains_reductions_and_opaque() {
        let x = Var::new("x", Type::f32(&[2, 3, 4]));
        let e = mk("exp", vec![x.expr()], &[]);
        let t = mk("transpose", vec![e], &[]);
        let r = mk("reshape", vec![t], &[("newshape", [4, 6].into())]);
        let s = mk(
            "sum",
            vec![mk("nn.relu", vec![r], &[])],
            &[("axis", [1].into())],
        );
        let sm = mk("nn.softmax", vec![mk("sigmoid", vec![s], &[])], &[]);
        let out = run(vec![x], sm);
        assert_eq!(
            fused_groups(&out),
            vec![
                "fused_exp_transpose_reshape",
                "fused_nn_relu_sum",
                "fused_sigmoid",
                "fused_nn_softmax"
            ]
        );
    }

    #[test]
    fn diamonds_fuse_and_constants_become_params() {
        // relu feeds subtract directly and through add -> multiply: one group, one output.
        let x = Var::new("x", Type::f32(&[4]));
        let r = mk("nn.relu", vec![x.expr()], &[]);
        let a = mk(
            "add",
            vec![r.clone(), Expr::const_f32(&[1.0; 4], &[4])],
            &[],
        );
        let m = mk("multiply", vec![a, Expr::scalar_f32(2.0)], &[]);
        let body = mk("subtract", vec![m, r], &[]);
        let out = run(vec![x], body);
        assert_eq!(
            fused_groups(&out),
            vec!["fused_nn_relu_add_multiply_subtract"]
        );
        let Expr::Call(c) = out.body() else { panic!() };
        let Expr::Function(g) = &c.op else { panic!() };
        // The input and the vector constant; the scalar stays inside.
        assert_eq!(g.params().len(), 2);
    }

    #[test]
    fn a_gelu_diamond_meets_past_its_first_consumer() {
        // x feeds multiply(x, 0.5) and divide -> erf -> add; both meet at the last multiply.
        let x = Var::new("x", Type::f32(&[2, 8]));
        let b = Var::new("b", Type::f32(&[8]));
        let y = mk("add", vec![x.expr(), b.expr()], &[]);
        let half = mk("multiply", vec![y.clone(), Expr::scalar_f32(0.5)], &[]);
        let e = mk(
            "erf",
            vec![mk("divide", vec![y, Expr::scalar_f32(1.414)], &[])],
            &[],
        );
        let one = mk("add", vec![e, Expr::scalar_f32(1.0)], &[]);
        let gelu = mk("multiply", vec![half, one], &[]);
        let out = run(vec![x, b], gelu);
        assert_eq!(
            fused_groups(&out),
            vec!["fused_add_multiply_divide_erf_add_multiply"]
        );
    }

    #[test]
    fn conv_takes_a_silu_epilogue_but_shared_outputs_stay_separate() {
        let x = Var::new("x", Type::f32(&[1, 3, 8, 8]));
        let w = Var::new("w", Type::f32(&[4, 3, 1, 1]));
        let conv = mk("nn.conv2d", vec![x.expr(), w.expr()], &[]);
        let silu = mk(
            "multiply",
            vec![mk("sigmoid", vec![conv.clone()], &[]), conv],
            &[],
        );
        let out = run(vec![x.clone(), w.clone()], silu.clone());
        assert_eq!(fused_groups(&out), vec!["fused_nn_conv2d_sigmoid_multiply"]);
        // The relu is also a result of the function: it cannot be inside another group.
        let r = mk("nn.relu", vec![silu], &[]);
        let body = Expr::tuple(vec![r.clone(), mk("exp", vec![r], &[])]);
        let out = run(vec![x, w], body);
        assert_eq!(
            fused_groups(&out),
            vec!["fused_nn_conv2d_sigmoid_multiply_nn_relu", "fused_exp"]
        );
    }

    #[test]
    fn opt_level_zero_makes_singletons() {
        let x = Var::new("x", Type::f32(&[4]));
        let body = mk("exp", vec![mk("nn.relu", vec![x.expr()], &[])], &[]);
        let m = IRModule::from_main(Function::new(vec![x], body));
        let out = fuse_ops()
            .run(m, &crate::transform::PassContext::with_opt_level(0))
            .unwrap()
            .main()
            .unwrap();
        assert_eq!(fused_groups(&out), vec!["fused_nn_relu", "fused_exp"]);
    }
}
