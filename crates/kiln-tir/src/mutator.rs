//! Rewriting IR: the [`ExprMutator`] / [`StmtMutator`] traits, closure-based rewriters and
//! variable substitution.
//!
//! Rebuilding is copy-on-write: a node whose children all come back as the same objects is
//! returned as itself, so untouched subtrees stay identical (`same_as`) and a pass that changes
//! nothing returns its input. Rebuilt nodes take their dtype from their new children where it
//! follows from them (arithmetic, comparisons, selects, lets, ramps, broadcasts, loads), so a
//! mutator may turn scalars into vectors.

use crate::buffer::Buffer;
use crate::expr::{ExprKind, PrimExpr, Var};
use crate::stmt::*;
use std::collections::HashMap;

/// Rewrites expressions. Override `mutate_expr` (call [`mutate_expr_children`] for the default)
/// and `mutate_buffer` to replace the buffers of loads.
pub trait ExprMutator {
    /// Rewrites an expression; the default rewrites its children.
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        mutate_expr_children(self, e)
    }

    /// Rewrites the buffer of a load, store or declaration (the same buffer by default).
    fn mutate_buffer(&mut self, b: &Buffer) -> Buffer {
        b.clone()
    }
}

fn mutate_list<M: ExprMutator + ?Sized>(m: &mut M, l: &[PrimExpr]) -> Option<Vec<PrimExpr>> {
    let new: Vec<PrimExpr> = l.iter().map(|x| m.mutate_expr(x)).collect();
    if new.iter().zip(l).all(|(a, b)| a.same_as(b)) {
        None
    } else {
        Some(new)
    }
}

/// Rewrites the children of `e` with `m` and rebuilds `e` if any changed.
pub fn mutate_expr_children<M: ExprMutator + ?Sized>(m: &mut M, e: &PrimExpr) -> PrimExpr {
    match e.kind() {
        ExprKind::IntImm(_) | ExprKind::FloatImm(_) | ExprKind::StringImm(_) | ExprKind::Var(_) => {
            e.clone()
        }
        ExprKind::Binary(op, a, b) => {
            let (x, y) = (m.mutate_expr(a), m.mutate_expr(b));
            if x.same_as(a) && y.same_as(b) {
                e.clone()
            } else {
                PrimExpr::binary_raw(op, x, y)
            }
        }
        ExprKind::Not(a) => {
            let x = m.mutate_expr(a);
            if x.same_as(a) {
                e.clone()
            } else {
                PrimExpr::not_raw(x)
            }
        }
        ExprKind::Cast(a) => {
            let x = m.mutate_expr(a);
            if x.same_as(a) {
                e.clone()
            } else {
                let t = e.dtype().with_lanes(x.dtype().lanes());
                PrimExpr::cast_raw(t, x)
            }
        }
        ExprKind::Select { cond, t, f } => {
            let (c, x, y) = (m.mutate_expr(cond), m.mutate_expr(t), m.mutate_expr(f));
            if c.same_as(cond) && x.same_as(t) && y.same_as(f) {
                e.clone()
            } else {
                PrimExpr::select_raw(c, x, y)
            }
        }
        ExprKind::Let { var, value, body } => {
            let (v, b) = (m.mutate_expr(value), m.mutate_expr(body));
            if v.same_as(value) && b.same_as(body) {
                e.clone()
            } else {
                PrimExpr::let_raw(var.clone(), v, b)
            }
        }
        ExprKind::BufferLoad { buffer, indices } => {
            let nb = m.mutate_buffer(buffer);
            let ni = mutate_list(m, indices);
            if nb.same_as(buffer) && ni.is_none() {
                e.clone()
            } else {
                PrimExpr::buffer_load_raw(nb, ni.unwrap_or_else(|| indices.to_vec()))
            }
        }
        ExprKind::Ramp {
            base,
            stride,
            lanes,
        } => {
            let (b, s) = (m.mutate_expr(base), m.mutate_expr(stride));
            if b.same_as(base) && s.same_as(stride) {
                e.clone()
            } else {
                PrimExpr::ramp_raw(b, s, lanes)
            }
        }
        ExprKind::Broadcast { value, lanes } => {
            let v = m.mutate_expr(value);
            if v.same_as(value) {
                e.clone()
            } else {
                PrimExpr::broadcast_raw(v, lanes)
            }
        }
        ExprKind::Call { op, args } => match mutate_list(m, args) {
            None => e.clone(),
            Some(a) => PrimExpr::call(e.dtype(), op, a),
        },
    }
}

/// Rewrites statements and the expressions in them. Override `mutate_stmt` (call
/// [`mutate_stmt_children`] for the default).
pub trait StmtMutator: ExprMutator {
    /// Rewrites a statement; the default rewrites its expressions and sub-statements.
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        mutate_stmt_children(self, s)
    }
}

/// Rewrites the expressions and sub-statements of `s` with `m` and rebuilds `s` if any changed.
pub fn mutate_stmt_children<M: StmtMutator + ?Sized>(m: &mut M, s: &Stmt) -> Stmt {
    let p = || StmtObj {};
    match s.kind() {
        StmtKind::For(f) => {
            let (min, ext, body) = (
                m.mutate_expr(&f.min),
                m.mutate_expr(&f.extent),
                m.mutate_stmt(&f.body),
            );
            if min.same_as(&f.min) && ext.same_as(&f.extent) && body.same_as(&f.body) {
                return s.clone();
            }
            Stmt::from_node(ForObj {
                parent: p(),
                loop_var: f.loop_var.clone(),
                min,
                extent: ext,
                kind: f.kind,
                body,
                annotations: f.annotations.clone(),
            })
        }
        StmtKind::BufferStore(st) => {
            let nb = m.mutate_buffer(&st.buffer);
            let v = m.mutate_expr(&st.value);
            let ni = mutate_list(m, &st.indices);
            if nb.same_as(&st.buffer) && v.same_as(&st.value) && ni.is_none() {
                return s.clone();
            }
            Stmt::buffer_store_raw(nb, v, ni.unwrap_or_else(|| st.indices.to_vec()))
        }
        StmtKind::Allocate(a) => {
            let ne = mutate_list(m, &a.extents);
            let c = m.mutate_expr(&a.condition);
            let body = m.mutate_stmt(&a.body);
            if ne.is_none() && c.same_as(&a.condition) && body.same_as(&a.body) {
                return s.clone();
            }
            Stmt::from_node(AllocateObj {
                parent: p(),
                buffer_var: a.buffer_var.clone(),
                dtype: a.dtype,
                extents: ne.unwrap_or_else(|| a.extents.to_vec()).into(),
                condition: c,
                body,
                annotations: a.annotations.clone(),
                scope: a.scope.clone(),
            })
        }
        StmtKind::DeclBuffer(d) => {
            let nb = m.mutate_buffer(&d.buffer);
            let body = m.mutate_stmt(&d.body);
            if nb.same_as(&d.buffer) && body.same_as(&d.body) {
                return s.clone();
            }
            Stmt::decl_buffer(nb, body)
        }
        StmtKind::IfThenElse(i) => {
            let c = m.mutate_expr(&i.condition);
            let t = m.mutate_stmt(&i.then_case);
            let e = i.else_case.as_ref().map(|e| m.mutate_stmt(e));
            let same_else = match (&e, &i.else_case) {
                (Some(x), Some(y)) => x.same_as(y),
                (None, None) => true,
                _ => false,
            };
            if c.same_as(&i.condition) && t.same_as(&i.then_case) && same_else {
                return s.clone();
            }
            Stmt::if_then_else_raw(c, t, e)
        }
        StmtKind::LetStmt(l) => {
            let v = m.mutate_expr(&l.value);
            let body = m.mutate_stmt(&l.body);
            if v.same_as(&l.value) && body.same_as(&l.body) {
                return s.clone();
            }
            Stmt::from_node(LetStmtObj {
                parent: p(),
                var: l.var.clone(),
                value: v,
                body,
            })
        }
        StmtKind::Seq(q) => {
            let new: Vec<Stmt> = q.seq.iter().map(|x| m.mutate_stmt(x)).collect();
            if new.iter().zip(q.seq.iter()).all(|(a, b)| a.same_as(b)) {
                return s.clone();
            }
            Stmt::seq_raw(new)
        }
        StmtKind::AttrStmt(a) => {
            let v = m.mutate_expr(&a.value);
            let body = m.mutate_stmt(&a.body);
            if v.same_as(&a.value) && body.same_as(&a.body) {
                return s.clone();
            }
            Stmt::from_node(AttrStmtObj {
                parent: p(),
                node: a.node.clone(),
                attr_key: a.attr_key.clone(),
                value: v,
                body,
            })
        }
        StmtKind::Assert(a) => {
            let c = m.mutate_expr(&a.condition);
            let msg = m.mutate_expr(&a.message);
            let body = m.mutate_stmt(&a.body);
            if c.same_as(&a.condition) && msg.same_as(&a.message) && body.same_as(&a.body) {
                return s.clone();
            }
            Stmt::from_node(AssertStmtObj {
                parent: p(),
                condition: c,
                message: msg,
                body,
            })
        }
        StmtKind::Evaluate(ev) => {
            let v = m.mutate_expr(&ev.value);
            if v.same_as(&ev.value) {
                return s.clone();
            }
            Stmt::evaluate(v)
        }
    }
}

/// A mutator made of closures: `stmt` and `expr` are asked first at each node (pre-order);
/// `Some(new)` replaces the node (not revisited), `None` descends into its children.
struct PreOrderMutator<FS, FE> {
    stmt: FS,
    expr: FE,
}

impl<FS, FE: FnMut(&PrimExpr) -> Option<PrimExpr>> ExprMutator for PreOrderMutator<FS, FE> {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        match (self.expr)(e) {
            Some(new) => new,
            None => mutate_expr_children(self, e),
        }
    }
}

impl<FS, FE> StmtMutator for PreOrderMutator<FS, FE>
where
    FS: FnMut(&Stmt) -> Option<Stmt>,
    FE: FnMut(&PrimExpr) -> Option<PrimExpr>,
{
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        match (self.stmt)(s) {
            Some(new) => new,
            None => mutate_stmt_children(self, s),
        }
    }
}

/// Rewrites an expression top-down: `f` is asked at each node; `Some(new)` replaces it,
/// `None` descends. Untouched subtrees are kept as the same objects.
pub fn mutate_expr(e: &PrimExpr, f: impl FnMut(&PrimExpr) -> Option<PrimExpr>) -> PrimExpr {
    PreOrderMutator {
        stmt: |_: &Stmt| None::<Stmt>,
        expr: f,
    }
    .mutate_expr(e)
}

/// Rewrites a statement top-down: `fs` at each statement and `fe` at each expression, as in
/// [`mutate_expr`].
pub fn mutate_stmt(
    s: &Stmt,
    fs: impl FnMut(&Stmt) -> Option<Stmt>,
    fe: impl FnMut(&PrimExpr) -> Option<PrimExpr>,
) -> Stmt {
    PreOrderMutator { stmt: fs, expr: fe }.mutate_stmt(s)
}

struct PostOrderMutator<FS, FE> {
    stmt: FS,
    expr: FE,
}

impl<FS, FE: FnMut(PrimExpr) -> PrimExpr> ExprMutator for PostOrderMutator<FS, FE> {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        let rebuilt = mutate_expr_children(self, e);
        (self.expr)(rebuilt)
    }
}

impl<FS: FnMut(Stmt) -> Stmt, FE: FnMut(PrimExpr) -> PrimExpr> StmtMutator
    for PostOrderMutator<FS, FE>
{
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        let rebuilt = mutate_stmt_children(self, s);
        (self.stmt)(rebuilt)
    }
}

/// Rewrites an expression bottom-up: children first, then `f` on each (rebuilt) node.
pub fn transform_expr(e: &PrimExpr, f: impl FnMut(PrimExpr) -> PrimExpr) -> PrimExpr {
    PostOrderMutator {
        stmt: |s: Stmt| s,
        expr: f,
    }
    .mutate_expr(e)
}

/// Rewrites a statement bottom-up (TVM's `IRTransform` post-order): `fs` on each rebuilt
/// statement, `fe` on each rebuilt expression.
pub fn transform_stmt(
    s: &Stmt,
    fs: impl FnMut(Stmt) -> Stmt,
    fe: impl FnMut(PrimExpr) -> PrimExpr,
) -> Stmt {
    PostOrderMutator { stmt: fs, expr: fe }.mutate_stmt(s)
}

/// Replaces the variables for which `f` gives a value.
pub fn substitute_with(e: &PrimExpr, f: impl Fn(&Var) -> Option<PrimExpr>) -> PrimExpr {
    mutate_expr(e, |x| match x.kind() {
        ExprKind::Var(v) => Some(f(&v).unwrap_or_else(|| x.clone())),
        _ => None,
    })
}

/// Replaces variables by expressions (each value should have its variable's dtype).
pub fn substitute(e: &PrimExpr, map: &HashMap<Var, PrimExpr>) -> PrimExpr {
    if map.is_empty() {
        return e.clone();
    }
    substitute_with(e, |v| map.get(v).cloned())
}

/// Replaces variables in every expression of a statement.
pub fn substitute_stmt_with(s: &Stmt, f: impl Fn(&Var) -> Option<PrimExpr>) -> Stmt {
    mutate_stmt(
        s,
        |_| None,
        |x| match x.kind() {
            ExprKind::Var(v) => Some(f(&v).unwrap_or_else(|| x.clone())),
            _ => None,
        },
    )
}

/// Replaces variables by expressions in every expression of a statement.
pub fn substitute_stmt(s: &Stmt, map: &HashMap<Var, PrimExpr>) -> Stmt {
    if map.is_empty() {
        return s.clone();
    }
    substitute_stmt_with(s, |v| map.get(v).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structural::structural_equal;
    use kiln_ffi::DataType;

    #[test]
    fn untouched_subtrees_stay_identical() {
        let (x, y, z) = (Var::int32("x"), Var::int32("y"), Var::int32("z"));
        let left = &x * 4 + &y;
        let e = &left - (&z + 1);
        let out = substitute(&e, &[(z.clone(), PrimExpr::i32(2))].into_iter().collect());
        match out.kind() {
            ExprKind::Binary(_, a, b) => {
                assert!(a.same_as(&left), "left side untouched, same object");
                let two_plus_one = PrimExpr::binary_raw(
                    crate::expr::BinOp::Add,
                    PrimExpr::i32(2),
                    PrimExpr::i32(1),
                );
                assert!(structural_equal(b, &two_plus_one), "rebuilt, not folded");
            }
            _ => panic!(),
        }
        let same = substitute(
            &e,
            &[(Var::int32("w"), PrimExpr::i32(0))].into_iter().collect(),
        );
        assert!(same.same_as(&e), "nothing to replace: same object back");
    }

    #[test]
    fn statement_rewrites_rebuild_only_the_path() {
        let i = Var::int32("i");
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(8)]);
        let b = Buffer::decl("B", DataType::float(32), vec![PrimExpr::i32(8)]);
        let s1 = a.store(1.0, vec![i.to_expr()]);
        let s2 = b.store(2.0, vec![i.to_expr()]);
        let body = Stmt::seq(vec![s1.clone(), s2.clone()]);
        let out = mutate_stmt(
            &body,
            |s| match s.kind() {
                StmtKind::BufferStore(st) if st.buffer == b => Some(Stmt::no_op()),
                _ => None,
            },
            |_| None,
        );
        match out.kind() {
            StmtKind::Seq(q) => {
                assert!(q.seq[0].same_as(&s1));
                assert!(q.seq[1].is_no_op());
            }
            _ => panic!(),
        }
        let doubled = transform_stmt(
            &body,
            |s| s,
            |e| match e.as_float() {
                Some(v) => PrimExpr::f32(v * 2.0),
                None => e,
            },
        );
        assert!(structural_equal(
            &doubled,
            &Stmt::seq(vec![
                a.store(2.0, vec![i.to_expr()]),
                b.store(4.0, vec![i.to_expr()])
            ])
        ));
    }
}
