//! StorageRewrite: allocations are hoisted to the top of their scope and share memory when
//! their lifetimes do not overlap.
//!
//! A scope is the function body or the body of a parallel loop (each thread needs its own
//! memory there). In a scope, every `Allocate` with constant extents and a `True` condition
//! (outside nested parallel loops) is a candidate. Statements are numbered in execution order;
//! an allocation is live from the first to the last statement that uses its variable, widened
//! to a whole loop when used inside a loop that the allocation is outside of (values may flow
//! between iterations). Candidates are then assigned, in order of first use, to memory slots
//! of the same element type and storage scope whose previous user is dead; each slot becomes
//! one `Allocate` (of the largest extent) at the top of the scope, and the merged variables and
//! the buffers over them are renamed to the slot's variable.

use super::{prim_func_pass, Pass};
use crate::buffer::Buffer;
use crate::expr::{ExprKind, PrimExpr, Var};
use crate::mutator::{mutate_expr_children, mutate_stmt_children, ExprMutator, StmtMutator};
use crate::stmt::{ForKind, ForObj, Stmt, StmtKind, StmtObj};
use crate::visitor::{walk_expr, ExprVisitor};
use kiln_ffi::{DataType, Map};
use std::collections::HashMap;

/// The StorageRewrite pass (`tir.StorageRewrite`, opt level 0).
pub fn storage_rewrite() -> Pass {
    prim_func_pass("tir.StorageRewrite", 0, |f, _| {
        let body = rewrite_storage(f.body());
        Ok(if body.same_as(f.body()) {
            f
        } else {
            f.with_body(body)
        })
    })
}

/// Rewrites the allocations of one scope (and of nested parallel loops).
pub fn rewrite_storage(s: &Stmt) -> Stmt {
    // Inner scopes first.
    let s = InnerScopes.mutate_stmt(s);
    let mut lin = Linearizer::default();
    lin.stmt(&s, 0);
    if lin.allocs.is_empty() {
        return s;
    }
    // Lifetimes.
    let mut live: Vec<(i64, i64, usize)> = Vec::new();
    for (k, a) in lin.allocs.iter().enumerate() {
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for (t, loops) in lin.uses.get(&a.var).into_iter().flatten() {
            let (l, h) = match loops.get(a.depth) {
                Some(id) => lin.loops[*id],
                None => (*t, *t),
            };
            lo = lo.min(l);
            hi = hi.max(h);
        }
        if lo > hi {
            (lo, hi) = (a.at, a.at);
        }
        live.push((lo, hi, k));
    }
    live.sort();
    // Slots: (dtype, scope, extent, last end, var).
    let mut slots: Vec<(DataType, String, i64, i64, Var)> = Vec::new();
    let mut rename: HashMap<Var, Var> = HashMap::new();
    for (lo, hi, k) in live {
        let a = &lin.allocs[k];
        let free = slots
            .iter_mut()
            .find(|s| s.0 == a.dtype && s.1 == a.scope && s.3 < lo);
        match free {
            Some(slot) => {
                slot.2 = slot.2.max(a.extent);
                slot.3 = hi;
                rename.insert(a.var.clone(), slot.4.clone());
            }
            None => slots.push((a.dtype, a.scope.clone(), a.extent, hi, a.var.clone())),
        }
    }
    let candidates: Vec<Var> = lin.allocs.iter().map(|a| a.var.clone()).collect();
    let mut r = Renamer {
        drop: candidates,
        rename,
        buffers: HashMap::new(),
    };
    let body = r.mutate_stmt(&s);
    slots
        .into_iter()
        .rev()
        .fold(body, |acc, (dt, scope, ext, _, var)| {
            Stmt::try_allocate(
                var,
                dt,
                vec![PrimExpr::i32(ext)],
                PrimExpr::bool(true),
                acc,
                Map::new(vec![]),
                &scope,
            )
            .expect("a valid allocation")
        })
}

struct InnerScopes;

impl ExprMutator for InnerScopes {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        e.clone()
    }
}

impl StmtMutator for InnerScopes {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        match s.kind() {
            StmtKind::For(f) if f.kind == ForKind::Parallel => {
                let body = rewrite_storage(&f.body);
                if body.same_as(&f.body) {
                    return s.clone();
                }
                Stmt::from_node(ForObj {
                    parent: StmtObj {},
                    loop_var: f.loop_var.clone(),
                    min: f.min.clone(),
                    extent: f.extent.clone(),
                    kind: f.kind,
                    body,
                    annotations: f.annotations.clone(),
                })
            }
            _ => mutate_stmt_children(self, s),
        }
    }
}

struct Candidate {
    var: Var,
    dtype: DataType,
    scope: String,
    extent: i64,
    /// Loop nesting depth at the allocation.
    depth: usize,
    /// Its statement number.
    at: i64,
}

#[derive(Default)]
struct Linearizer {
    tick: i64,
    /// Statement ranges of loops by id.
    loops: Vec<(i64, i64)>,
    stack: Vec<usize>,
    allocs: Vec<Candidate>,
    /// Uses of each variable: statement number and the enclosing loop ids.
    uses: HashMap<Var, Vec<(i64, Vec<usize>)>>,
}

struct VarUses<'a>(&'a mut Vec<Var>);

impl ExprVisitor for VarUses<'_> {
    fn visit_expr(&mut self, e: &PrimExpr) {
        if let ExprKind::Var(v) = e.kind() {
            self.0.push(v);
        }
        walk_expr(self, e)
    }
    fn visit_buffer(&mut self, b: &Buffer) {
        self.0.push(b.data().clone());
    }
}

impl Linearizer {
    fn use_exprs(&mut self, es: &[&PrimExpr], bufs: &[&Buffer]) {
        let mut vars = Vec::new();
        let mut v = VarUses(&mut vars);
        es.iter().for_each(|e| v.visit_expr(e));
        bufs.iter().for_each(|b| v.visit_buffer(b));
        for var in vars {
            self.uses
                .entry(var)
                .or_default()
                .push((self.tick, self.stack.clone()));
        }
    }

    /// `parallel_depth` > 0 inside nested parallel loops (their allocations are not ours).
    fn stmt(&mut self, s: &Stmt, parallel_depth: usize) {
        self.tick += 1;
        match s.kind() {
            StmtKind::For(f) => {
                self.use_exprs(&[&f.min, &f.extent], &[]);
                let id = self.loops.len();
                self.loops.push((self.tick, self.tick));
                self.stack.push(id);
                let pd = parallel_depth + usize::from(f.kind == ForKind::Parallel);
                self.stmt(&f.body, pd);
                self.stack.pop();
                self.loops[id].1 = self.tick;
            }
            StmtKind::BufferStore(st) => {
                let mut es: Vec<&PrimExpr> = vec![&st.value];
                es.extend(st.indices.iter());
                self.use_exprs(&es, &[&st.buffer]);
            }
            StmtKind::Allocate(a) => {
                let extent = a
                    .extents
                    .iter()
                    .try_fold(1i64, |acc, e| e.as_int().map(|x| acc * x));
                if let (Some(extent), 0, true) =
                    (extent, parallel_depth, a.condition.is_const_int(1))
                {
                    self.allocs.push(Candidate {
                        var: a.buffer_var.clone(),
                        dtype: a.dtype,
                        scope: a.scope.to_string(),
                        extent,
                        depth: self.stack.len(),
                        at: self.tick,
                    });
                }
                let es: Vec<&PrimExpr> = a.extents.iter().collect();
                self.use_exprs(&es, &[]);
                self.stmt(&a.body, parallel_depth);
            }
            StmtKind::DeclBuffer(d) => self.stmt(&d.body, parallel_depth),
            StmtKind::IfThenElse(i) => {
                self.use_exprs(&[&i.condition], &[]);
                self.stmt(&i.then_case, parallel_depth);
                if let Some(e) = &i.else_case {
                    self.stmt(e, parallel_depth);
                }
            }
            StmtKind::LetStmt(l) => {
                self.use_exprs(&[&l.value], &[]);
                self.stmt(&l.body, parallel_depth);
            }
            StmtKind::Seq(q) => q.seq.iter().for_each(|x| self.stmt(x, parallel_depth)),
            StmtKind::AttrStmt(a) => {
                self.use_exprs(&[&a.value], &[]);
                if let Ok(v) = a.node.try_as::<Var>() {
                    self.uses
                        .entry(v)
                        .or_default()
                        .push((self.tick, self.stack.clone()));
                }
                self.stmt(&a.body, parallel_depth);
            }
            StmtKind::Assert(a) => {
                self.use_exprs(&[&a.condition, &a.message], &[]);
                self.stmt(&a.body, parallel_depth);
            }
            StmtKind::Evaluate(e) => self.use_exprs(&[&e.value], &[]),
        }
    }
}

/// Drops the candidate allocations and renames merged variables (and buffers over them).
struct Renamer {
    drop: Vec<Var>,
    rename: HashMap<Var, Var>,
    buffers: HashMap<Buffer, Buffer>,
}

impl ExprMutator for Renamer {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        if let ExprKind::Var(v) = e.kind() {
            if let Some(n) = self.rename.get(&v) {
                return n.to_expr();
            }
        }
        mutate_expr_children(self, e)
    }
    fn mutate_buffer(&mut self, b: &Buffer) -> Buffer {
        let Some(n) = self.rename.get(b.data()) else {
            return b.clone();
        };
        self.buffers
            .entry(b.clone())
            .or_insert_with(|| b.with_data(n))
            .clone()
    }
}

impl StmtMutator for Renamer {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        match s.kind() {
            StmtKind::Allocate(a) if self.drop.contains(&a.buffer_var) => self.mutate_stmt(&a.body),
            StmtKind::For(f) if f.kind == ForKind::Parallel => {
                // Inner scope: already rewritten; rename only the outer variables in it.
                mutate_stmt_children(self, s)
            }
            _ => mutate_stmt_children(self, s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    #[test]
    fn sequential_temporaries_share_memory() {
        let f32 = DataType::float(32);
        let out = Buffer::decl("O", f32, vec![PrimExpr::i32(8)]);
        let t1 = Buffer::decl("T1", f32, vec![PrimExpr::i32(8)]);
        let t2 = Buffer::decl("T2", f32, vec![PrimExpr::i32(8)]);
        let t3 = Buffer::decl("T3", f32, vec![PrimExpr::i32(4)]);
        let i = Var::int32("i");
        let lp = |b: Stmt| Stmt::for_loop(&i, 0, 8, ForKind::Serial, b);
        let ld = |b: &Buffer| b.load(vec![i.to_expr()]);
        let st = |b: &Buffer, v: PrimExpr| b.store(v, vec![i.to_expr()]);
        // T1 = 1; T2 = T1 + 1; T3 = T2 (T1 dead by now); O = T3.
        let s = Stmt::allocate_buffer(
            &t1,
            Stmt::seq(vec![
                lp(st(&t1, PrimExpr::f32(1.0))),
                Stmt::allocate_buffer(
                    &t2,
                    Stmt::seq(vec![
                        lp(st(&t2, ld(&t1) + 1.0)),
                        Stmt::allocate_buffer(
                            &t3,
                            Stmt::seq(vec![lp(st(&t3, ld(&t2))), lp(st(&out, ld(&t3)))]),
                        ),
                    ]),
                ),
            ]),
        );
        let got = rewrite_storage(&s);
        let t3m = t3.with_data(t1.data());
        let expected = Stmt::try_allocate(
            t1.data().clone(),
            f32,
            vec![PrimExpr::i32(8)],
            PrimExpr::bool(true),
            Stmt::try_allocate(
                t2.data().clone(),
                f32,
                vec![PrimExpr::i32(8)],
                PrimExpr::bool(true),
                Stmt::decl_buffer(
                    t1.clone(),
                    Stmt::seq(vec![
                        lp(st(&t1, PrimExpr::f32(1.0))),
                        Stmt::decl_buffer(
                            t2.clone(),
                            Stmt::seq(vec![
                                lp(st(&t2, ld(&t1) + 1.0)),
                                Stmt::decl_buffer(
                                    t3m.clone(),
                                    Stmt::seq(vec![lp(st(&t3m, ld(&t2))), lp(st(&out, ld(&t3m)))]),
                                ),
                            ]),
                        ),
                    ]),
                ),
                Map::new(vec![]),
                "global",
            )
            .unwrap(),
            Map::new(vec![]),
            "global",
        )
        .unwrap();
        assert_structural_equal(&got, &expected);
    }

    #[test]
    fn loop_carried_and_parallel_scopes() {
        let f32 = DataType::float(32);
        let out = Buffer::decl("O", f32, vec![PrimExpr::i32(8)]);
        let t1 = Buffer::decl("T1", f32, vec![PrimExpr::i32(1)]);
        let t2 = Buffer::decl("T2", f32, vec![PrimExpr::i32(1)]);
        let (i, p) = (Var::int32("i"), Var::int32("p"));
        let z = || vec![PrimExpr::i32(0)];
        // T1 is used in two statements of one loop, T2 between them: no sharing.
        let s = Stmt::allocate_buffer(
            &t1,
            Stmt::allocate_buffer(
                &t2,
                Stmt::for_loop(
                    &i,
                    0,
                    8,
                    ForKind::Serial,
                    Stmt::seq(vec![
                        out.store(t1.load(z()), vec![i.to_expr()]),
                        t2.store(1.0, z()),
                        t1.store(t2.load(z()), z()),
                    ]),
                ),
            ),
        );
        let got = rewrite_storage(&s);
        let mut allocs = 0;
        crate::visitor::post_order_visit(&got, |n| {
            if let crate::visitor::IrRef::Stmt(s) = n {
                allocs += usize::from(matches!(s.kind(), StmtKind::Allocate(_)));
            }
        });
        assert_eq!(allocs, 2, "{got}");
        // An allocation inside a parallel loop stays inside it.
        let par = Stmt::for_loop(
            &p,
            0,
            4,
            ForKind::Parallel,
            Stmt::allocate_buffer(
                &t1,
                Stmt::seq(vec![
                    t1.store(1.0, z()),
                    out.store(t1.load(z()), vec![p.to_expr()]),
                ]),
            ),
        );
        let got = rewrite_storage(&par);
        let StmtKind::For(f) = got.kind() else {
            panic!("{got}")
        };
        assert!(matches!(f.body.kind(), StmtKind::Allocate(_)), "{got}");
    }
}
