//! LowerTVMBuiltin: large allocations go to the runtime's workspace.
//!
//! An `Allocate` of more than 1024 bytes (TVM's `kMaxStackAlloca`; 64 KiB for `local` register
//! tiles) or of a non-constant size becomes
//!
//! ```text
//! buf = T.TVMBackendAllocWorkspace(1, 0, T.int64(nbytes), dtype_code, dtype_bits)
//! assert not T.isnullptr(buf), "RuntimeError: Failed to allocate workspace of N bytes"
//! <body>
//! assert T.TVMBackendFreeWorkspace(1, 0, buf) == 0, "RuntimeError: Failed to free workspace"
//! ```
//!
//! (a `LetStmt` binding the allocation's handle variable; device CPU 1, id 0). In the host
//! part of a device function (attribute `kiln.device_type`, set by SplitHostDevice) every
//! allocation goes to that device's workspace. Small constant
//! allocations stay `Allocate` (code generation makes them stack allocas).

use super::{prim_func_pass, Pass};
use crate::expr::{cast, PrimExpr};
use crate::mutator::{mutate_stmt_children, ExprMutator, StmtMutator};
use crate::op::builtin;
use crate::stmt::{Stmt, StmtKind};
use kiln_ffi::DataType;

/// Allocations up to this many bytes stay on the stack.
pub const MAX_STACK_ALLOCA: i64 = 1024;

/// `local` allocations (a schedule's register tiles: 24 accumulators of 64 bytes are 1536)
/// up to this many bytes stay on the stack, where code generation can keep them in
/// registers; in the workspace every access would be a memory access.
pub const MAX_LOCAL_STACK_ALLOCA: i64 = 64 * 1024;

/// The LowerTVMBuiltin pass (`tir.LowerTVMBuiltin`, opt level 0).
pub fn lower_tvm_builtin() -> Pass {
    prim_func_pass("tir.LowerTVMBuiltin", 0, |f, _| {
        let device_type = super::split_host_device::device_type_of(&f);
        let body = Lower { device_type }.mutate_stmt(f.body());
        Ok(if body.same_as(f.body()) {
            f
        } else {
            f.with_body(body)
        })
    })
}

/// Lowers the allocations of `s` (see the module docs).
pub fn lower_builtin_stmt(s: &Stmt) -> Stmt {
    Lower { device_type: 1 }.mutate_stmt(s)
}

/// The rewriter; `device_type` is where the function's buffers live (1: CPU). Host code of a
/// device function allocates every buffer on the device (its kernels read it there).
struct Lower {
    device_type: i64,
}

impl ExprMutator for Lower {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        e.clone()
    }
}

impl StmtMutator for Lower {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        let StmtKind::Allocate(a) = s.kind() else {
            return mutate_stmt_children(self, s);
        };
        let body = self.mutate_stmt(&a.body);
        let elem_bytes = a.dtype.bytes() as i64;
        let count = a.extents.iter().fold(PrimExpr::i64(1), |acc, e| {
            acc * cast(DataType::int(64), e.clone())
        });
        let nbytes = crate::arith::simplify(&(count * elem_bytes));
        let on_device = self.device_type != 1;
        let limit = if a.scope == "local" {
            MAX_LOCAL_STACK_ALLOCA
        } else {
            MAX_STACK_ALLOCA
        };
        if !on_device && nbytes.as_int().is_some_and(|b| b <= limit) {
            return if body.same_as(&a.body) {
                s.clone()
            } else {
                Stmt::try_allocate(
                    a.buffer_var.clone(),
                    a.dtype,
                    a.extents.to_vec(),
                    a.condition.clone(),
                    body,
                    a.annotations.clone(),
                    &a.scope,
                )
                .expect("rebuilding a valid allocation")
            };
        }
        let i32t = DataType::int(32);
        let var = &a.buffer_var;
        let alloc = PrimExpr::call(
            DataType::handle(),
            builtin::ALLOC_WORKSPACE,
            vec![
                PrimExpr::i32(self.device_type),
                PrimExpr::i32(0),
                nbytes.clone(),
                PrimExpr::i32(a.dtype.code() as i64),
                PrimExpr::i32(a.dtype.bits() as i64),
            ],
        );
        let free = PrimExpr::call(
            i32t,
            builtin::FREE_WORKSPACE,
            vec![
                PrimExpr::i32(self.device_type),
                PrimExpr::i32(0),
                var.to_expr(),
            ],
        );
        let free_ok = Stmt::assert(
            free.equal(0),
            "RuntimeError: Failed to free workspace",
            Stmt::no_op(),
        );
        let msg = match nbytes.as_int() {
            Some(b) => format!("RuntimeError: Failed to allocate workspace of {b} bytes"),
            None => "RuntimeError: Failed to allocate workspace".to_string(),
        };
        let is_null = PrimExpr::call(DataType::bool(), builtin::ISNULLPTR, vec![var.to_expr()]);
        Stmt::let_stmt(
            var,
            alloc,
            Stmt::assert(
                PrimExpr::not_raw(is_null),
                &msg,
                Stmt::seq(vec![body, free_ok]),
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    #[test]
    fn large_allocations_use_the_workspace() {
        let f32 = DataType::float(32);
        let big = Buffer::decl("T", f32, vec![PrimExpr::i32(1024)]);
        let small = Buffer::decl("S", f32, vec![PrimExpr::i32(16)]);
        let inner = Stmt::seq(vec![
            big.store(1.0, vec![PrimExpr::i32(0)]),
            small.store(2.0, vec![PrimExpr::i32(0)]),
        ]);
        let s = Stmt::allocate_buffer(&big, Stmt::allocate_buffer(&small, inner.clone()));
        let out = lower_builtin_stmt(&s);
        let v = big.data();
        let alloc = PrimExpr::call(
            DataType::handle(),
            builtin::ALLOC_WORKSPACE,
            vec![
                PrimExpr::i32(1),
                PrimExpr::i32(0),
                PrimExpr::i64(4096),
                PrimExpr::i32(2),
                PrimExpr::i32(32),
            ],
        );
        let free = PrimExpr::call(
            DataType::int(32),
            builtin::FREE_WORKSPACE,
            vec![PrimExpr::i32(1), PrimExpr::i32(0), v.to_expr()],
        );
        let null = PrimExpr::call(DataType::bool(), builtin::ISNULLPTR, vec![v.to_expr()]);
        let expected = Stmt::let_stmt(
            v,
            alloc,
            Stmt::assert(
                PrimExpr::not_raw(null),
                "RuntimeError: Failed to allocate workspace of 4096 bytes",
                Stmt::seq(vec![
                    Stmt::decl_buffer(big.clone(), Stmt::allocate_buffer(&small, inner)),
                    Stmt::assert(
                        free.equal(0),
                        "RuntimeError: Failed to free workspace",
                        Stmt::no_op(),
                    ),
                ]),
            ),
        );
        assert_structural_equal(&out, &expected);
    }

    #[test]
    fn register_tiles_stay_on_the_stack() {
        // 24 accumulators of 16 float32 lanes: 1536 bytes in `local` scope.
        let f32 = DataType::float(32);
        let tile = Buffer::decl_in("acc", f32, vec![PrimExpr::i32(384)], "local");
        let s = Stmt::allocate_buffer(&tile, tile.store(1.0, vec![PrimExpr::i32(0)]));
        let out = lower_builtin_stmt(&s);
        assert!(matches!(out.kind(), StmtKind::Allocate(_)), "{out}");
        // Past the `local` limit, or in `global` scope, the workspace.
        let n = MAX_LOCAL_STACK_ALLOCA / 4 + 1;
        let huge = Buffer::decl_in("acc", f32, vec![PrimExpr::i32(n)], "local");
        let s = Stmt::allocate_buffer(&huge, huge.store(1.0, vec![PrimExpr::i32(0)]));
        assert!(matches!(
            lower_builtin_stmt(&s).kind(),
            StmtKind::LetStmt(_)
        ));
        let global = Buffer::decl("g", f32, vec![PrimExpr::i32(384)]);
        let s = Stmt::allocate_buffer(&global, global.store(1.0, vec![PrimExpr::i32(0)]));
        assert!(matches!(
            lower_builtin_stmt(&s).kind(),
            StmtKind::LetStmt(_)
        ));
    }
}
