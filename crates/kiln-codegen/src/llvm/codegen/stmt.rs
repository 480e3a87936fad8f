//! Statements: loops (serial, unrolled and leftover vectorized ones as plain loops, parallel ones
//! through [`super::parallel`]), buffer stores (vector stores for unit-stride ramps, per-lane
//! otherwise), stack allocations, conditionals, lets, sequences, attributes (ignored) and
//! asserts, which raise `Kind: message` through `TVMFFIErrorSetRaisedFromCStrParts` and return
//! -1.

use super::memory::buffer_alignment;
use super::{pow2_align, CodeGen};
use crate::llvm::{llvm_error, symbols};
use crate::lower_common::{constant_element_count, unit_stride_base};
use inkwell::values::{BasicValue, BasicValueEnum, IntValue};
use inkwell::IntPredicate;
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::stmt::{AllocateObj, AssertStmtObj, BufferStoreObj, ForObj};
use kiln_tir::{DataTypeExt, ForKind, Stmt, StmtKind, Var};

pub use crate::lower_common::assert_kind_message;

/// Stack allocations larger than this many bytes are still made on the stack, but with a
/// dynamic size they are made where they appear.
const ENTRY_ALLOCA_MAX_BYTES: i64 = 1 << 20;

impl<'a, 'ctx> CodeGen<'a, 'ctx> {
    /// Emits `s` at the builder's position.
    pub fn stmt(&mut self, s: &Stmt) -> Result<()> {
        match s.kind() {
            StmtKind::For(f) => self.for_loop(f),
            StmtKind::BufferStore(st) => self.buffer_store(st),
            StmtKind::Allocate(a) => self.allocate(a),
            StmtKind::DeclBuffer(d) => self.stmt(&d.body),
            StmtKind::IfThenElse(n) if n.condition.dtype().lanes() > 1 => {
                // A per-lane condition (VectorizeLoop's predicate): the stores of the lanes
                // where it holds, their loads masked alike.
                let c = self.expr(&n.condition)?.into_vector_value();
                let outer = self.mask;
                self.mask = Some(match outer {
                    Some(o) => self.b.build_and(o, c, "mask").map_err(llvm_error)?,
                    None => c,
                });
                let r = self.stmt(&n.then_case);
                self.mask = outer;
                r
            }
            StmtKind::IfThenElse(n) => {
                let c = self.expr(&n.condition)?.into_int_value();
                let then_bb = self.block("if_then");
                let else_bb = n.else_case.as_ref().map(|_| self.block("if_else"));
                let end_bb = self.block("if_end");
                self.b
                    .build_conditional_branch(c, then_bb, else_bb.unwrap_or(end_bb))
                    .map_err(llvm_error)?;
                self.b.position_at_end(then_bb);
                self.stmt(&n.then_case)?;
                self.branch_to(end_bb)?;
                if let (Some(bb), Some(e)) = (else_bb, &n.else_case) {
                    self.b.position_at_end(bb);
                    self.stmt(e)?;
                    self.branch_to(end_bb)?;
                }
                self.b.position_at_end(end_bb);
                Ok(())
            }
            StmtKind::LetStmt(l) => {
                let v = self.expr(&l.value)?;
                let prev = self.bind(&l.var, v);
                let r = self.stmt(&l.body);
                self.unbind(&l.var, prev);
                r
            }
            StmtKind::Seq(q) => q.seq.iter().try_for_each(|x| self.stmt(x)),
            StmtKind::AttrStmt(a) => self.stmt(&a.body),
            StmtKind::Assert(a) => self.assert_stmt(a),
            StmtKind::Evaluate(e) => {
                if !e.value.is_const() {
                    self.expr(&e.value)?;
                }
                Ok(())
            }
        }
    }

    /// Branches to `bb` unless the current block already ends.
    pub(crate) fn branch_to(&mut self, bb: inkwell::basic_block::BasicBlock<'ctx>) -> Result<()> {
        let cur = self.b.get_insert_block().expect("positioned");
        if cur.get_terminator().is_none() {
            self.b.build_unconditional_branch(bb).map_err(llvm_error)?;
        }
        Ok(())
    }

    fn for_loop(&mut self, f: &ForObj) -> Result<()> {
        if f.kind == ForKind::Parallel && !self.in_parallel {
            return self.parallel_for(f);
        }
        if f.kind == ForKind::ThreadBinding {
            return Err(Error::value_error(format!(
                "loop `{}` is bound to a GPU thread axis: it cannot run on the host (run \
                 SplitHostDevice first)",
                f.loop_var.name()
            )));
        }
        let t = f.loop_var.dtype();
        let min = self.expr(&f.min)?;
        let min = self.cast(f.min.dtype(), t, min)?.into_int_value();
        let ext = self.expr(&f.extent)?;
        let ext = self.cast(f.extent.dtype(), t, ext)?.into_int_value();
        let end = if f.min.is_const_int(0) {
            ext
        } else {
            self.b
                .build_int_nsw_add(min, ext, "end")
                .map_err(llvm_error)?
        };
        let known = f.min.as_int().zip(f.extent.as_int()).is_some();
        if known {
            let range = kiln_tir::Range::from_min_extent(f.min.clone(), f.extent.clone());
            self.loop_ranges.bind(&f.loop_var, &range);
        }
        let r = self.emit_loop(&f.loop_var, min, end, None, &f.body);
        if known {
            self.loop_ranges.unbind(&f.loop_var);
        }
        r
    }

    /// `for j in begin..end: body` with `var = offset + j` (or `j`), as a counted loop.
    pub(crate) fn emit_loop(
        &mut self,
        var: &Var,
        begin: IntValue<'ctx>,
        end: IntValue<'ctx>,
        offset: Option<IntValue<'ctx>>,
        body: &Stmt,
    ) -> Result<()> {
        let pre = self.b.get_insert_block().expect("positioned");
        let head = self.block("for_begin");
        let body_bb = self.block("for_body");
        let end_bb = self.block("for_end");
        self.b
            .build_unconditional_branch(head)
            .map_err(llvm_error)?;
        self.b.position_at_end(head);
        let phi = self
            .b
            .build_phi(begin.get_type(), var.name())
            .map_err(llvm_error)?;
        phi.add_incoming(&[(&begin, pre)]);
        let j = phi.as_basic_value().into_int_value();
        let c = self
            .b
            .build_int_compare(IntPredicate::SLT, j, end, "cond")
            .map_err(llvm_error)?;
        self.b
            .build_conditional_branch(c, body_bb, end_bb)
            .map_err(llvm_error)?;
        self.b.position_at_end(body_bb);
        let value = match offset {
            Some(o) => self.b.build_int_nsw_add(o, j, "i").map_err(llvm_error)?,
            None => j,
        };
        let prev = self.bind(var, value.into());
        let r = self.stmt(body);
        self.unbind(var, prev);
        r?;
        let cur = self.b.get_insert_block().expect("positioned");
        if cur.get_terminator().is_none() {
            let one = begin.get_type().const_int(1, false);
            let next = self
                .b
                .build_int_nsw_add(j, one, "next")
                .map_err(llvm_error)?;
            phi.add_incoming(&[(&next, cur)]);
            self.b
                .build_unconditional_branch(head)
                .map_err(llvm_error)?;
        }
        self.b.position_at_end(end_bb);
        Ok(())
    }

    fn buffer_store(&mut self, st: &BufferStoreObj) -> Result<()> {
        let buffer = &st.buffer;
        let [index] = st.indices.as_slice() else {
            return Err(Error::value_error(format!(
                "buffer `{}` is stored with {} indices: code generation needs flat (1-D) \
                 accesses (run StorageFlatten first)",
                buffer.name(),
                st.indices.len()
            )));
        };
        let vt = st.value.dtype();
        let mut value = self.expr(&st.value)?;
        if vt.element_of().is_bool() {
            value = self.cast(vt, DataType::int(8).with_lanes(vt.lanes()), value)?;
        }
        let elem_t = buffer.dtype();
        let elem_bytes = (elem_t.bits() as i64 * elem_t.lanes() as i64 + 7) / 8;
        let lanes = index.dtype().lanes();
        if lanes == 1 {
            let i = self.expr(index)?;
            let p = self.element_ptr(buffer, i, index.dtype())?;
            let align = self.access_align(buffer, index, elem_bytes);
            return self.store_tagged(value, p, align, buffer);
        }
        if let (Some(mask), Some(base)) = (self.mask, unit_stride_base(index)) {
            if self.within_stack_array(buffer, base, lanes as i64) {
                // Whole vectors in and out: the lanes not chosen keep their old values.
                let mem_t = elem_t.with_lanes(elem_t.lanes() * lanes);
                let (old, p, align) = self.load_at(buffer, base, mem_t)?;
                let blend = self
                    .b
                    .build_select(mask, value, old, "blend")
                    .map_err(llvm_error)?;
                return self.store_tagged(blend, p, align, buffer);
            }
            let i = self.expr(base)?;
            let p = self.unchecked_element_ptr(buffer, i, base.dtype())?;
            let align = self.access_align(buffer, base, elem_bytes);
            let a = self.abi.i32.const_int(u64::from(align), false);
            let ty = [value.get_type(), p.get_type().into()];
            self.call_intrinsic(
                "llvm.masked.store",
                &ty,
                &[value, p.into(), a.into(), mask.into()],
            )?;
            return Ok(());
        }
        if self.mask.is_some() {
            return Err(Error::value_error(format!(
                "a predicated store to `{}` needs a contiguous vector index, got {index}",
                buffer.name()
            )));
        }
        if let Some(base) = unit_stride_base(index) {
            let i = self.expr(base)?;
            let p = self.element_ptr(buffer, i, base.dtype())?;
            let align = self.access_align(buffer, base, elem_bytes);
            return self.store_tagged(value, p, align, buffer);
        }
        // Scatter lane by lane.
        let vv = value.into_vector_value();
        for (k, i) in self.lane_indices(index)?.into_iter().enumerate() {
            let kk = self.abi.i32.const_int(k as u64, false);
            let x = self
                .b
                .build_extract_element(vv, kk, "val")
                .map_err(llvm_error)?;
            let p = self.element_ptr(buffer, i, index.dtype().element_of())?;
            let align = pow2_align(elem_bytes, buffer_alignment(buffer));
            self.store_tagged(x, p, align, buffer)?;
        }
        Ok(())
    }

    fn store_tagged(
        &mut self,
        value: BasicValueEnum<'ctx>,
        p: inkwell::values::PointerValue<'ctx>,
        align: u32,
        buffer: &kiln_tir::Buffer,
    ) -> Result<()> {
        let st = self.b.build_store(p, value).map_err(llvm_error)?;
        st.set_alignment(align).map_err(llvm_error)?;
        self.tag_access(Some(st), buffer);
        Ok(())
    }

    pub(crate) fn store(
        &mut self,
        value: BasicValueEnum<'ctx>,
        p: inkwell::values::PointerValue<'ctx>,
        align: u32,
    ) -> Result<()> {
        let st = self.b.build_store(p, value).map_err(llvm_error)?;
        st.set_alignment(align).map_err(llvm_error)?;
        Ok(())
    }

    fn allocate(&mut self, a: &AllocateObj) -> Result<()> {
        let elem = self.memory_type(a.dtype)?;
        let elem_bytes = (a.dtype.bits() as i64 * a.dtype.lanes() as i64 + 7) / 8;
        let (ptr, stack_len) = match constant_element_count(a) {
            Some(n) if n.saturating_mul(elem_bytes) <= ENTRY_ALLOCA_MAX_BYTES => {
                let n = n.max(1) as u32;
                let ty = match elem {
                    inkwell::types::BasicTypeEnum::IntType(t) => t.array_type(n).into(),
                    inkwell::types::BasicTypeEnum::FloatType(t) => t.array_type(n).into(),
                    inkwell::types::BasicTypeEnum::VectorType(t) => t.array_type(n).into(),
                    inkwell::types::BasicTypeEnum::PointerType(t) => t.array_type(n).into(),
                    other => other,
                };
                (
                    self.entry_alloca(ty, 64, a.buffer_var.name())?,
                    Some(i64::from(n)),
                )
            }
            _ => {
                let mut count: Option<IntValue> = None;
                for e in a.extents.iter() {
                    let v = self.expr(e)?;
                    let v = self.cast(e.dtype(), DataType::int(64), v)?.into_int_value();
                    count = Some(match count {
                        None => v,
                        Some(c) => self.b.build_int_mul(c, v, "n").map_err(llvm_error)?,
                    });
                }
                let count = count.unwrap_or(self.abi.i64.const_int(1, false));
                let p = self
                    .b
                    .build_array_alloca(elem, count, a.buffer_var.name())
                    .map_err(llvm_error)?;
                if let Some(i) = p.as_instruction_value() {
                    let _ = i.set_alignment(64);
                }
                (p, None)
            }
        };
        // The body knows a stack array's size ([`CodeGen::within_stack_array`]).
        let var = &a.buffer_var;
        let prev_len = stack_len.map(|n| self.stack_len.insert(var.clone(), n));
        let prev = self.bind(var, ptr.into());
        let r = self.stmt(&a.body);
        self.unbind(var, prev);
        match prev_len {
            Some(Some(l)) => {
                self.stack_len.insert(var.clone(), l);
            }
            Some(None) => {
                self.stack_len.remove(var);
            }
            None => {}
        }
        r
    }

    fn assert_stmt(&mut self, a: &AssertStmtObj) -> Result<()> {
        let c = self.expr(&a.condition)?.into_int_value();
        let ok_bb = self.block("assert_ok");
        let fail_bb = self.block("assert_fail");
        self.b
            .build_conditional_branch(c, ok_bb, fail_bb)
            .map_err(llvm_error)?;
        self.b.position_at_end(fail_bb);
        let (kind, message) = assert_kind_message(&a.message);
        let msg = self
            .b
            .build_global_string_ptr(&message, "assert.msg")
            .map_err(llvm_error)?
            .as_pointer_value();
        symbols::build_set_raised(&self.b, self.module, &self.abi, &kind, &[msg])?;
        self.b
            .build_return(Some(&self.abi.i32.const_all_ones()))
            .map_err(llvm_error)?;
        self.b.position_at_end(ok_bb);
        self.stmt(&a.body)
    }
}
