//! Traversal of the dataflow graph: post-order listing, use counts and a memoized bottom-up
//! rewrite. Nested functions (callees of calls) are leaves: passes that need to enter them do
//! so explicitly.

use super::expr::{CallObj, Expr, Function, TupleGetItemObj, TupleObj};
use kiln_ffi::{ObjectRef, Result};
use std::collections::{HashMap, HashSet};

/// The dataflow inputs of a node (call arguments, tuple fields, the projected tuple).
pub fn children(e: &Expr) -> Vec<Expr> {
    match e {
        Expr::Call(c) => {
            // The callee (a function) last, so a post-order lists groups after their inputs.
            let mut v = Vec::with_capacity(c.args.len() + 1);
            v.extend(c.args.iter().cloned());
            if let Expr::Function(_) = c.op {
                v.push(c.op.clone());
            }
            v
        }
        Expr::Tuple(t) => t.fields.to_vec(),
        Expr::TupleGetItem(g) => vec![g.tuple.clone()],
        _ => Vec::new(),
    }
}

/// Every node reachable from `root` once, inputs before users (iterative).
pub fn post_order(root: &Expr) -> Vec<Expr> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![(root.clone(), false)];
    while let Some((e, expanded)) = stack.pop() {
        if expanded {
            out.push(e);
            continue;
        }
        if !seen.insert(e.key()) {
            continue;
        }
        stack.push((e.clone(), true));
        for c in children(&e).into_iter().rev() {
            if !seen.contains(&c.key()) {
                stack.push((c, false));
            }
        }
    }
    out
}

/// How many times each node is used as an input (by node key); the root counts one more use.
pub fn use_counts(root: &Expr) -> HashMap<usize, usize> {
    let mut n = HashMap::new();
    for e in post_order(root) {
        for c in children(&e) {
            *n.entry(c.key()).or_insert(0) += 1;
        }
    }
    *n.entry(root.key()).or_insert(0) += 1;
    n
}

/// `e` with its inputs replaced by `new` (in [`children`] order); `e` itself when nothing
/// changed. The rebuilt node has no checked type.
pub fn with_children(e: &Expr, new: &[Expr]) -> Expr {
    let old = children(e);
    if old.len() == new.len() && old.iter().zip(new).all(|(a, b)| a.same_as(b)) {
        return e.clone();
    }
    match e {
        Expr::Call(c) => {
            let (op, args) = if let Expr::Function(_) = c.op {
                (new[new.len() - 1].clone(), new[..new.len() - 1].to_vec())
            } else {
                (c.op.clone(), new.to_vec())
            };
            Expr::Call(ObjectRef::new(CallObj {
                op,
                args: args.into(),
                attrs: c.attrs.clone(),
                checked_type: None,
            }))
        }
        Expr::Tuple(_) => Expr::Tuple(ObjectRef::new(TupleObj {
            fields: new.to_vec().into(),
            checked_type: None,
        })),
        Expr::TupleGetItem(g) => Expr::TupleGetItem(ObjectRef::new(TupleGetItemObj {
            tuple: new[0].clone(),
            index: g.index,
            checked_type: None,
        })),
        _ => e.clone(),
    }
}

/// Rewrites the graph under `root` bottom-up: each node is rebuilt over its rewritten inputs,
/// then passed to `f`, whose result replaces it (memoized: a shared node is rewritten once).
pub fn rewrite_post(root: &Expr, mut f: impl FnMut(&Expr) -> Result<Expr>) -> Result<Expr> {
    rewrite_post_orig(root, |_, e| f(e))
}

/// [`rewrite_post`] whose callback also sees the original node (`f(original, rebuilt)`), for
/// rewrites that consult facts computed on the original graph (use counts).
pub fn rewrite_post_orig(
    root: &Expr,
    mut f: impl FnMut(&Expr, &Expr) -> Result<Expr>,
) -> Result<Expr> {
    let mut memo: HashMap<usize, Expr> = HashMap::new();
    let order = post_order(root);
    for e in &order {
        let new_children: Vec<Expr> = children(e)
            .iter()
            .map(|c| memo.get(&c.key()).cloned().unwrap_or_else(|| c.clone()))
            .collect();
        let rebuilt = with_children(e, &new_children);
        let out = f(e, &rebuilt)?;
        memo.insert(e.key(), out);
    }
    Ok(memo.remove(&root.key()).unwrap_or_else(|| root.clone()))
}

/// [`rewrite_post_orig`] over a function's body; parameters and attributes are kept.
pub fn rewrite_function_orig(
    func: &Function,
    f: impl FnMut(&Expr, &Expr) -> Result<Expr>,
) -> Result<Function> {
    let body = rewrite_post_orig(func.body(), f)?;
    if body.same_as(func.body()) {
        return Ok(func.clone());
    }
    Ok(func.with_body(func.params().to_vec(), body))
}

/// [`rewrite_post`] over a function's body; parameters and attributes are kept.
pub fn rewrite_function(func: &Function, f: impl FnMut(&Expr) -> Result<Expr>) -> Result<Function> {
    let body = rewrite_post(func.body(), f)?;
    if body.same_as(func.body()) {
        return Ok(func.clone());
    }
    Ok(func.with_body(func.params().to_vec(), body))
}
