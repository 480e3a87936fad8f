//! ThreadSync for `shared` memory (a simplified TVM `ThreadSync("shared")`): barriers
//! (`tir.tvm_storage_sync("shared")`) where the threads of a block may read shared memory that
//! other threads wrote.
//!
//! - In a sequence (through the bodies of declarations, lets and attributes), a statement that
//!   reads a `shared` buffer written by an earlier statement (since the last barrier) gets a
//!   barrier before it; a conditional or loop counts as one statement.
//! - A loop whose body writes a `shared` buffer that the body also reads gets a barrier at the
//!   start of its body, so the next iteration's writes wait for this one's reads.
//!
//! Only device kernels are rewritten (`calling_conv = 2`); host functions have no threads.

use super::split_host_device::is_device_kernel;
use super::{prim_func_pass, Pass};
use crate::expr::{ExprKind, PrimExpr, Var};
use crate::mutator::{mutate_stmt_children, ExprMutator, StmtMutator};
use crate::op::builtin;
use crate::stmt::{ForObj, Stmt, StmtKind, StmtObj};
use crate::visitor::{post_order_visit, IrRef};
use kiln_ffi::DataType;
use std::collections::HashSet;

/// The ThreadSync pass (`tir.ThreadSync`, opt level 0) over device kernels.
pub fn thread_sync() -> Pass {
    prim_func_pass("tir.ThreadSync", 0, |f, _| {
        if !is_device_kernel(&f) {
            return Ok(f);
        }
        let body = thread_sync_stmt(f.body());
        Ok(if body.same_as(f.body()) {
            f
        } else {
            f.with_body(body)
        })
    })
}

/// `s` with the barriers of the module docs.
pub fn thread_sync_stmt(s: &Stmt) -> Stmt {
    let mut shared = HashSet::new();
    post_order_visit(s, |n| {
        if let IrRef::Stmt(st) = n {
            if let StmtKind::Allocate(a) = st.kind() {
                if &*a.scope == "shared" {
                    shared.insert(a.buffer_var.clone());
                }
            }
        }
    });
    if shared.is_empty() {
        return s.clone();
    }
    Sync { shared }.mutate_stmt(s)
}

/// The barrier statement.
fn barrier() -> Stmt {
    Stmt::evaluate(PrimExpr::call(
        DataType::int(32),
        builtin::TVM_STORAGE_SYNC,
        vec![PrimExpr::string("shared")],
    ))
}

struct Sync {
    shared: HashSet<Var>,
}

impl Sync {
    /// The shared buffers `s` reads and writes.
    fn accesses(&self, s: &Stmt) -> (HashSet<Var>, HashSet<Var>) {
        let (mut reads, mut writes) = (HashSet::new(), HashSet::new());
        post_order_visit(s, |n| match n {
            IrRef::Expr(e) => {
                if let ExprKind::BufferLoad { buffer, .. } = e.kind() {
                    if self.shared.contains(buffer.data()) {
                        reads.insert(buffer.data().clone());
                    }
                }
            }
            IrRef::Stmt(st) => {
                if let StmtKind::BufferStore(b) = st.kind() {
                    if self.shared.contains(b.buffer.data()) {
                        writes.insert(b.buffer.data().clone());
                    }
                }
            }
        });
        (reads, writes)
    }

    /// `s` with barriers; `written` holds the shared buffers written since the last barrier
    /// on the way to `s` and is updated past it.
    fn visit(&mut self, s: &Stmt, written: &mut HashSet<Var>) -> Stmt {
        match s.kind() {
            StmtKind::Seq(q) => Stmt::seq(q.seq.iter().map(|x| self.visit(x, written)).collect()),
            // Wrappers: their body continues the same sequence.
            StmtKind::DeclBuffer(_)
            | StmtKind::Allocate(_)
            | StmtKind::LetStmt(_)
            | StmtKind::AttrStmt(_) => {
                let mut inner = Within {
                    sync: self,
                    written,
                };
                mutate_stmt_children(&mut inner, s)
            }
            StmtKind::For(f) => {
                let (reads, writes) = self.accesses(s);
                let before = reads.iter().any(|v| written.contains(v));
                let mut fresh = HashSet::new();
                let body = self.visit(&f.body, &mut fresh);
                let (body_reads, body_writes) = self.accesses(&body);
                let body = if body_writes.iter().any(|v| body_reads.contains(v)) {
                    Stmt::seq(vec![barrier(), body])
                } else {
                    body
                };
                let lp = if body.same_as(&f.body) {
                    s.clone()
                } else {
                    Stmt::from_node(ForObj {
                        parent: StmtObj {},
                        loop_var: f.loop_var.clone(),
                        min: f.min.clone(),
                        extent: f.extent.clone(),
                        kind: f.kind,
                        body,
                        annotations: f.annotations.clone(),
                    })
                };
                if before {
                    written.clear();
                }
                written.extend(writes);
                if before {
                    Stmt::seq(vec![barrier(), lp])
                } else {
                    lp
                }
            }
            _ => {
                let (reads, writes) = self.accesses(s);
                let before = reads.iter().any(|v| written.contains(v));
                if before {
                    written.clear();
                }
                written.extend(writes);
                if before {
                    Stmt::seq(vec![barrier(), s.clone()])
                } else {
                    s.clone()
                }
            }
        }
    }
}

/// Visits a wrapper's body in the enclosing sequence's state.
struct Within<'a> {
    sync: &'a mut Sync,
    written: &'a mut HashSet<Var>,
}

impl ExprMutator for Within<'_> {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        e.clone()
    }
}

impl StmtMutator for Within<'_> {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        self.sync.visit(s, self.written)
    }
}

impl ExprMutator for Sync {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        e.clone()
    }
}

impl StmtMutator for Sync {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        self.visit(s, &mut HashSet::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Buffer;
    use crate::stmt::ForKind;

    #[test]
    fn barriers_between_shared_writes_and_reads() {
        let sh = Buffer::decl_in("S", DataType::float(32), vec![PrimExpr::i32(8)], "shared");
        let out = Buffer::decl("O", DataType::float(32), vec![PrimExpr::i32(8)]);
        let (k, t) = (Var::int32("k"), Var::int32("t"));
        let body = Stmt::seq(vec![
            sh.store(PrimExpr::f32(1.0), vec![t.to_expr()]),
            out.store(
                sh.load(vec![PrimExpr::i32(7) - t.to_expr()]),
                vec![t.to_expr()],
            ),
        ]);
        let lp = Stmt::for_loop(&k, 0, 4, ForKind::Serial, body);
        let s = Stmt::allocate_buffer(&sh, lp);
        let text = thread_sync_stmt(&s).to_string();
        assert_eq!(text.matches("tvm_storage_sync").count(), 2, "{text}");
        let first = text.find("tvm_storage_sync").unwrap();
        assert!(first < text.find("S[t] =").unwrap(), "{text}");
        // Without shared memory nothing changes.
        let plain = out.store(PrimExpr::f32(1.0), vec![t.to_expr()]);
        assert!(thread_sync_stmt(&plain).same_as(&plain));
    }
}
