//! Read-only traversal of expressions and statements: the [`ExprVisitor`] / [`StmtVisitor`]
//! traits (override a hook, call `walk_*` to continue into children), closure helpers, and the
//! variable-use analyses passes need (`uses_var`, `undefined_vars`).

use crate::buffer::Buffer;
use crate::expr::{ExprKind, PrimExpr, Var};
use crate::stmt::{Stmt, StmtKind};
use std::collections::HashSet;

/// Visits expressions. Override `visit_expr` and call [`walk_expr`] to visit the children.
pub trait ExprVisitor {
    /// Called on every expression; the default visits its children.
    fn visit_expr(&mut self, e: &PrimExpr) {
        walk_expr(self, e)
    }

    /// Called on the buffer of every load, store and buffer declaration (nothing by default;
    /// the buffer's shape is not visited).
    fn visit_buffer(&mut self, _b: &Buffer) {}
}

/// Visits the children of `e` (in field order).
pub fn walk_expr<V: ExprVisitor + ?Sized>(v: &mut V, e: &PrimExpr) {
    match e.kind() {
        ExprKind::IntImm(_) | ExprKind::FloatImm(_) | ExprKind::StringImm(_) | ExprKind::Var(_) => {
        }
        ExprKind::Binary(_, a, b) => {
            v.visit_expr(a);
            v.visit_expr(b);
        }
        ExprKind::Not(a) | ExprKind::Cast(a) => v.visit_expr(a),
        ExprKind::Select { cond, t, f } => {
            v.visit_expr(cond);
            v.visit_expr(t);
            v.visit_expr(f);
        }
        ExprKind::Let { value, body, .. } => {
            v.visit_expr(value);
            v.visit_expr(body);
        }
        ExprKind::BufferLoad { buffer, indices } => {
            v.visit_buffer(buffer);
            indices.iter().for_each(|i| v.visit_expr(i));
        }
        ExprKind::Ramp { base, stride, .. } => {
            v.visit_expr(base);
            v.visit_expr(stride);
        }
        ExprKind::Broadcast { value, .. } => v.visit_expr(value),
        ExprKind::Call { args, .. } => args.iter().for_each(|a| v.visit_expr(a)),
    }
}

/// Visits statements and the expressions in them. Override `visit_stmt` and call
/// [`walk_stmt`] to continue.
pub trait StmtVisitor: ExprVisitor {
    /// Called on every statement; the default visits its expressions and sub-statements.
    fn visit_stmt(&mut self, s: &Stmt) {
        walk_stmt(self, s)
    }
}

/// Visits the expressions and sub-statements of `s` (in field order; loop and let variables
/// are not visited as expressions).
pub fn walk_stmt<V: StmtVisitor + ?Sized>(v: &mut V, s: &Stmt) {
    match s.kind() {
        StmtKind::For(f) => {
            v.visit_expr(&f.min);
            v.visit_expr(&f.extent);
            v.visit_stmt(&f.body);
        }
        StmtKind::BufferStore(st) => {
            v.visit_buffer(&st.buffer);
            v.visit_expr(&st.value);
            st.indices.iter().for_each(|i| v.visit_expr(i));
        }
        StmtKind::Allocate(a) => {
            a.extents.iter().for_each(|e| v.visit_expr(e));
            v.visit_expr(&a.condition);
            v.visit_stmt(&a.body);
        }
        StmtKind::DeclBuffer(d) => {
            v.visit_buffer(&d.buffer);
            v.visit_stmt(&d.body);
        }
        StmtKind::IfThenElse(i) => {
            v.visit_expr(&i.condition);
            v.visit_stmt(&i.then_case);
            if let Some(e) = &i.else_case {
                v.visit_stmt(e);
            }
        }
        StmtKind::LetStmt(l) => {
            v.visit_expr(&l.value);
            v.visit_stmt(&l.body);
        }
        StmtKind::Seq(q) => q.seq.iter().for_each(|x| v.visit_stmt(x)),
        StmtKind::AttrStmt(a) => {
            v.visit_expr(&a.value);
            v.visit_stmt(&a.body);
        }
        StmtKind::Assert(a) => {
            v.visit_expr(&a.condition);
            v.visit_expr(&a.message);
            v.visit_stmt(&a.body);
        }
        StmtKind::Evaluate(e) => v.visit_expr(&e.value),
    }
}

/// A node met by [`post_order_visit`].
#[derive(Clone, Copy)]
pub enum IrRef<'a> {
    /// An expression.
    Expr(&'a PrimExpr),
    /// A statement.
    Stmt(&'a Stmt),
}

struct PostOrder<F>(F);

impl<F: FnMut(IrRef<'_>)> ExprVisitor for PostOrder<F> {
    fn visit_expr(&mut self, e: &PrimExpr) {
        walk_expr(self, e);
        (self.0)(IrRef::Expr(e));
    }
}

impl<F: FnMut(IrRef<'_>)> StmtVisitor for PostOrder<F> {
    fn visit_stmt(&mut self, s: &Stmt) {
        walk_stmt(self, s);
        (self.0)(IrRef::Stmt(s));
    }
}

/// Calls `f` on every statement and expression of `s`, children before parents.
pub fn post_order_visit(s: &Stmt, f: impl FnMut(IrRef<'_>)) {
    PostOrder(f).visit_stmt(s)
}

/// Calls `f` on every sub-expression of `e`, children before parents.
pub fn post_order_visit_expr(e: &PrimExpr, mut f: impl FnMut(&PrimExpr)) {
    PostOrder(|n: IrRef<'_>| {
        if let IrRef::Expr(x) = n {
            f(x)
        }
    })
    .visit_expr(e)
}

struct PreOrder<F>(F);

impl<F: FnMut(&PrimExpr) -> bool> ExprVisitor for PreOrder<F> {
    fn visit_expr(&mut self, e: &PrimExpr) {
        if (self.0)(e) {
            walk_expr(self, e);
        }
    }
}

/// Calls `f` on every sub-expression of `e`, parents first; `f` returns false to skip a
/// node's children.
pub fn pre_order_visit_expr(e: &PrimExpr, f: impl FnMut(&PrimExpr) -> bool) {
    PreOrder(f).visit_expr(e)
}

/// True when `e` uses a variable for which `pred` holds.
pub fn uses_var_where(e: &PrimExpr, mut pred: impl FnMut(&Var) -> bool) -> bool {
    let mut found = false;
    pre_order_visit_expr(e, |x| {
        if found {
            return false;
        }
        if let ExprKind::Var(v) = x.kind() {
            found = pred(&v);
        }
        !found
    });
    found
}

/// True when `e` uses `v`.
pub fn uses_var(e: &PrimExpr, v: &Var) -> bool {
    uses_var_where(e, |x| x == v)
}

/// True when statement `s` uses `v` in any expression or as a buffer's data.
pub fn stmt_uses_var(s: &Stmt, v: &Var) -> bool {
    struct Finder<'a> {
        v: &'a Var,
        found: bool,
    }
    impl ExprVisitor for Finder<'_> {
        fn visit_expr(&mut self, e: &PrimExpr) {
            if self.found {
                return;
            }
            if let ExprKind::Var(x) = e.kind() {
                self.found = &x == self.v;
            } else {
                walk_expr(self, e);
            }
        }
        fn visit_buffer(&mut self, b: &Buffer) {
            self.found |= b.data() == self.v;
        }
    }
    impl StmtVisitor for Finder<'_> {
        fn visit_stmt(&mut self, s: &Stmt) {
            if !self.found {
                walk_stmt(self, s)
            }
        }
    }
    let mut f = Finder { v, found: false };
    f.visit_stmt(s);
    f.found
}

/// The variables `s` uses without defining them (loop, let and allocation variables are
/// definitions), in order of first use; buffer data variables and the variables in buffer
/// shapes, strides and offsets count as uses. What a function needs as parameters.
pub fn undefined_vars(s: &Stmt) -> Vec<Var> {
    let mut u = UseDef::default();
    u.visit_stmt(s);
    u.order
}

/// As [`undefined_vars`], for an expression.
pub fn undefined_vars_expr(e: &PrimExpr) -> Vec<Var> {
    let mut u = UseDef::default();
    u.visit_expr(e);
    u.order
}

#[derive(Default)]
struct UseDef {
    defined: HashSet<Var>,
    seen: HashSet<Var>,
    seen_buffers: HashSet<Buffer>,
    order: Vec<Var>,
}

impl UseDef {
    fn use_var(&mut self, v: &Var) {
        if !self.defined.contains(v) && self.seen.insert(v.clone()) {
            self.order.push(v.clone());
        }
    }
}

impl ExprVisitor for UseDef {
    fn visit_expr(&mut self, e: &PrimExpr) {
        match e.kind() {
            ExprKind::Var(v) => self.use_var(&v),
            ExprKind::Let { var, value, body } => {
                self.visit_expr(value);
                self.defined.insert(var.clone());
                self.visit_expr(body);
            }
            _ => walk_expr(self, e),
        }
    }
    fn visit_buffer(&mut self, b: &Buffer) {
        if !self.seen_buffers.insert(b.clone()) {
            return;
        }
        self.use_var(b.data());
        b.shape().iter().for_each(|e| self.visit_expr(e));
        b.strides().iter().for_each(|e| self.visit_expr(e));
        self.visit_expr(b.elem_offset());
    }
}

impl StmtVisitor for UseDef {
    fn visit_stmt(&mut self, s: &Stmt) {
        match s.kind() {
            StmtKind::For(f) => self.defined.insert(f.loop_var.clone()),
            StmtKind::LetStmt(l) => {
                self.visit_expr(&l.value);
                self.defined.insert(l.var.clone());
                self.visit_stmt(&l.body);
                return;
            }
            StmtKind::Allocate(a) => self.defined.insert(a.buffer_var.clone()),
            _ => false,
        };
        walk_stmt(self, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stmt::ForKind;
    use kiln_ffi::DataType;

    #[test]
    fn undefined_vars_skip_definitions() {
        let n = Var::int32("n");
        let i = Var::int32("i");
        let a = Buffer::decl("A", DataType::float(32), vec![n.to_expr()]);
        let body = Stmt::for_loop(&i, 0, &n, ForKind::Serial, a.store(1.0, vec![i.to_expr()]));
        let u = undefined_vars(&body);
        assert_eq!(u.len(), 2);
        assert!(u[0] == n && &u[1] == a.data());
        assert!(stmt_uses_var(&body, &i));
        assert!(uses_var(&(&i + &n), &n));
        let mut count = 0;
        post_order_visit(&body, |_| count += 1);
        assert_eq!(count, 6, "0, n, 1.0, i, the store, the loop");
    }
}
