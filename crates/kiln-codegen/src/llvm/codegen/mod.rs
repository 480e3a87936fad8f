//! TIR to LLVM IR: what turns packed-API `PrimFunc`s (after MakePackedAPI and LowerTVMBuiltin)
//! into exported `__tvm_ffi_<name>` functions, as Apache TVM's `CodeGenCPU` does.
//!
//! The input contract: every function has `calling_conv = 1`, a `global_symbol`, and the
//! parameters `self_handle: handle, args: handle, num_args: int32, result: handle`; they become
//! the four parameters of the safe-call signature directly (no separate compute function). The
//! body reads its arguments with `tir.tvm_struct_get`, writes its result with
//! `tir.tvm_struct_set`, and works on flat (1-D) buffers.
//!
//! - [`expr`]: expressions (arithmetic with floor semantics, comparisons, casts including
//!   float16 and bfloat16, select, let, ramps, broadcasts, buffer loads with alignment facts).
//! - [`stmt`]: statements (loops, stores, allocations, asserts raising TVM-style errors).
//! - [`parallel`]: parallel loops outlined into `__tvm_parallel_lambda_<function>` closures run through
//!   the `__TVMBackendParallelLaunch` context slot.
//! - [`dot`]: integer dot products (`vpdpbusd` where the CPU has it).
//! - [`intrinsics`]: math intrinsics (LLVM intrinsics, libm, expansions) and bit operations.
//! - [`packed`]: runtime structs, workspace calls, `tir.call_packed`, `tir.call_extern`.
//!
//! Entry points: [`generate_module`] (an LLVM module for an [`IRModule`]) and
//! [`compile_module`] (optimized and compiled to a [`CompiledModule`]).

#[macro_use]
pub mod expr;
pub mod dot;
pub mod exp;
pub mod intrinsics;
pub mod memory;
pub mod packed;
pub mod parallel;
pub mod pieces;
pub mod stmt;

use super::abi::FfiAbi;
use super::{llvm_error, symbols, CompiledModule, LlvmTarget};
use crate::variants::Variant;
use inkwell::basic_block::BasicBlock;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValue, BasicValueEnum, FunctionValue, PointerValue};
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::{DataTypeExt, IRModule, PrimFunc, Var};
use std::collections::HashMap;

pub use crate::lower_common::function_symbol;

/// The per-function state: the LLVM function being filled and its entry block (where stack
/// allocations go).
#[derive(Clone, Copy)]
pub(crate) struct FuncState<'ctx> {
    pub function: FunctionValue<'ctx>,
    pub entry: BasicBlock<'ctx>,
}

/// The code generator for one LLVM module: types, the builder, and the values of the TIR
/// variables in scope.
pub struct CodeGen<'a, 'ctx> {
    pub(crate) ctx: &'ctx Context,
    pub(crate) module: &'a Module<'ctx>,
    pub(crate) b: Builder<'ctx>,
    pub(crate) abi: FfiAbi<'ctx>,
    pub(crate) target: &'a LlvmTarget,
    pub(crate) vars: HashMap<Var, BasicValueEnum<'ctx>>,
    pub(crate) func: Option<FuncState<'ctx>>,
    pub(crate) in_parallel: bool,
    pub(crate) func_name: String,
    /// TBAA access tags by buffer data variable (distinct buffers do not alias, as TVM
    /// assumes for `tir.noalias` functions).
    pub(crate) tbaa: HashMap<Var, inkwell::values::MetadataValue<'ctx>>,
    /// The lanes a vector `if_then_else` side is evaluated for: its vector loads are masked
    /// to them (lanes outside may address memory that is not there).
    pub(crate) mask: Option<inkwell::values::VectorValue<'ctx>>,
    /// The element count of each stack array of constant size, by its buffer variable: a
    /// predicated access inside one reads and writes whole vectors (a blend in registers)
    /// instead of masked memory operations, which would keep an accumulator in memory.
    pub(crate) stack_len: HashMap<Var, i64>,
    /// The ranges of the enclosing serial loops of constant bounds (for
    /// [`CodeGen::within_stack_array`]).
    pub(crate) loop_ranges: kiln_tir::arith::Analyzer,
}

impl<'a, 'ctx> CodeGen<'a, 'ctx> {
    /// A generator for `module`, whose context is `ctx`.
    pub fn with_context(
        ctx: &'ctx Context,
        target: &'a LlvmTarget,
        module: &'a Module<'ctx>,
    ) -> CodeGen<'a, 'ctx> {
        CodeGen {
            ctx,
            module,
            b: ctx.create_builder(),
            abi: FfiAbi::new(ctx),
            target,
            vars: HashMap::new(),
            func: None,
            in_parallel: false,
            func_name: String::new(),
            tbaa: HashMap::new(),
            mask: None,
            stack_len: HashMap::new(),
            loop_ranges: kiln_tir::arith::Analyzer::new(),
        }
    }

    /// Adds `func` as the exported safe-call function `__tvm_ffi_<name>`.
    pub fn add_function(&mut self, name: &str, func: &PrimFunc) -> Result<FunctionValue<'ctx>> {
        check_packed_signature(name, func)?;
        let f = symbols::declare_safe_call(self.module, &self.abi, name)?;
        self.target.set_function_attributes(self.ctx, f);
        let entry = self.ctx.append_basic_block(f, "entry");
        self.b.position_at_end(entry);
        self.vars.clear();
        for (i, p) in func.params().iter().enumerate() {
            let v = f.get_nth_param(i as u32).expect("four parameters");
            self.vars.insert(p.clone(), v);
        }
        self.func = Some(FuncState { function: f, entry });
        self.func_name = name.to_string();
        self.in_parallel = false;
        self.stmt(func.body())
            .map_err(|e| e.context(format!("generating LLVM IR for function `{name}`")))?;
        self.finish_function()?;
        self.vars.clear();
        self.func = None;
        Ok(f)
    }

    /// Returns 0 from the current block when it has no terminator yet.
    pub(crate) fn finish_function(&mut self) -> Result<()> {
        let bb = self.b.get_insert_block().expect("positioned");
        if bb.get_terminator().is_none() {
            self.b
                .build_return(Some(&self.abi.i32.const_zero()))
                .map_err(llvm_error)?;
        }
        Ok(())
    }

    pub(crate) fn state(&self) -> FuncState<'ctx> {
        self.func.expect("inside a function")
    }

    /// A new block in the current function.
    pub(crate) fn block(&self, name: &str) -> BasicBlock<'ctx> {
        self.ctx.append_basic_block(self.state().function, name)
    }

    /// Returns `-1` (an error is already raised), then continues in a fresh unreachable block.
    pub(crate) fn return_error(&mut self) -> Result<()> {
        self.b
            .build_return(Some(&self.abi.i32.const_all_ones()))
            .map_err(llvm_error)?;
        let dead = self.block("after_error");
        self.b.position_at_end(dead);
        Ok(())
    }

    /// A stack slot of `ty` (times `count` when given) in the entry block, aligned to `align`.
    pub(crate) fn entry_alloca(
        &self,
        ty: BasicTypeEnum<'ctx>,
        align: u32,
        name: &str,
    ) -> Result<PointerValue<'ctx>> {
        let tmp = self.ctx.create_builder();
        let entry = self.state().entry;
        match entry.get_first_instruction() {
            Some(i) => tmp.position_before(&i),
            None => tmp.position_at_end(entry),
        }
        let p = tmp.build_alloca(ty, name).map_err(llvm_error)?;
        if let Some(i) = p.as_instruction_value() {
            let _ = i.set_alignment(align);
        }
        Ok(p)
    }

    /// The LLVM type of values of `dtype` (bool is `i1`, bfloat16 is `i16`, the byte-coded
    /// narrow types are `i8`, vectors are LLVM vectors).
    pub fn llvm_type(&self, dtype: DataType) -> Result<BasicTypeEnum<'ctx>> {
        let elem = self.scalar_type(dtype.element_of(), false)?;
        vectorize(elem, dtype.lanes())
    }

    /// The LLVM type of `dtype` in memory (bool is a byte, as in DLPack).
    pub fn memory_type(&self, dtype: DataType) -> Result<BasicTypeEnum<'ctx>> {
        let elem = self.scalar_type(dtype.element_of(), true)?;
        vectorize(elem, dtype.lanes())
    }

    fn scalar_type(&self, t: DataType, memory: bool) -> Result<BasicTypeEnum<'ctx>> {
        Ok(if t.is_handle() {
            self.abi.ptr.into()
        } else if t.is_bool() {
            if memory {
                self.abi.i8.into()
            } else {
                self.ctx.bool_type().into()
            }
        } else if t.is_bfloat() {
            self.abi.i16.into()
        } else if t.is_byte_code() {
            self.abi.i8.into()
        } else if t.is_float() {
            match t.bits() {
                16 => self.ctx.f16_type().into(),
                32 => self.ctx.f32_type().into(),
                64 => self.ctx.f64_type().into(),
                b => return Err(Error::type_error(format!("no LLVM type for float{b}"))),
            }
        } else if t.is_integer() {
            match t.bits() {
                1 => self.ctx.bool_type().into(),
                8 => self.abi.i8.into(),
                16 => self.abi.i16.into(),
                32 => self.abi.i32.into(),
                64 => self.abi.i64.into(),
                b => {
                    return Err(Error::type_error(format!(
                        "no LLVM type for {b}-bit integers"
                    )))
                }
            }
        } else {
            return Err(Error::type_error(format!("no LLVM value type for {t}")));
        })
    }

    /// Marks a load or store of `buffer` with its TBAA tag: one scalar type per buffer data
    /// variable under a common root, so that accesses to different buffers do not alias.
    pub(crate) fn tag_access(
        &mut self,
        inst: Option<inkwell::values::InstructionValue<'ctx>>,
        buffer: &kiln_tir::Buffer,
    ) {
        let Some(inst) = inst else { return };
        let ctx = self.ctx;
        let zero = self.abi.i64.const_zero();
        let tag = *self.tbaa.entry(buffer.data().clone()).or_insert_with(|| {
            let root = ctx.metadata_node(&[ctx.metadata_string("kiln-tbaa").into()]);
            let name = format!(
                "buffer:{}:{:p}",
                buffer.data().name(),
                buffer.data().object().as_ptr()
            );
            let ty =
                ctx.metadata_node(&[ctx.metadata_string(&name).into(), root.into(), zero.into()]);
            ctx.metadata_node(&[ty.into(), ty.into(), zero.into()])
        });
        let _ = inst.set_metadata(tag, ctx.get_kind_id("tbaa"));
    }

    /// The value bound to `v`.
    pub(crate) fn var_value(&self, v: &Var) -> Result<BasicValueEnum<'ctx>> {
        self.vars.get(v).copied().ok_or_else(|| {
            Error::value_error(format!(
                "variable `{}` ({}) is used but not defined",
                v.name(),
                v.dtype()
            ))
        })
    }

    /// Binds `v` to `value`, returning the previous binding.
    pub(crate) fn bind(
        &mut self,
        v: &Var,
        value: BasicValueEnum<'ctx>,
    ) -> Option<BasicValueEnum<'ctx>> {
        self.vars.insert(v.clone(), value)
    }

    /// Whether the `lanes` elements of `buffer` from index `base` lie inside a stack array of
    /// constant size (see [`CodeGen::stack_len`]) whatever the enclosing loops' variables.
    pub(crate) fn within_stack_array(
        &self,
        buffer: &kiln_tir::Buffer,
        base: &kiln_tir::PrimExpr,
        lanes: i64,
    ) -> bool {
        let Some(&len) = self.stack_len.get(buffer.data()) else {
            return false;
        };
        let Some(off) = buffer.elem_offset().as_int() else {
            return false;
        };
        let b = self.loop_ranges.const_int_bound(base);
        let inside = b.min > kiln_tir::arith::NEG_INF
            && b.max < kiln_tir::arith::POS_INF
            && b.min + off >= 0
            && b.max + off + lanes <= len;
        buffer.dtype().lanes() == 1 && inside
    }

    /// Restores the binding of `v` that [`bind`](Self::bind) returned.
    pub(crate) fn unbind(&mut self, v: &Var, previous: Option<BasicValueEnum<'ctx>>) {
        match previous {
            Some(p) => self.vars.insert(v.clone(), p),
            None => self.vars.remove(v),
        };
    }
}

fn vectorize(elem: BasicTypeEnum<'_>, lanes: u16) -> Result<BasicTypeEnum<'_>> {
    if lanes <= 1 {
        return Ok(elem);
    }
    Ok(match elem {
        BasicTypeEnum::IntType(t) => t.vec_type(lanes as u32).into(),
        BasicTypeEnum::FloatType(t) => t.vec_type(lanes as u32).into(),
        BasicTypeEnum::PointerType(t) => t.vec_type(lanes as u32).into(),
        other => {
            return Err(Error::type_error(format!(
                "no vector of {}",
                other.print_to_string()
            )))
        }
    })
}

/// Checks the packed-API shape: four parameters `(handle, handle, int32, handle)`.
fn check_packed_signature(name: &str, func: &PrimFunc) -> Result<()> {
    let p = func.params();
    let ok = crate::lower_common::has_packed_params(func);
    let conv = func
        .get_attr("calling_conv")
        .and_then(|v| v.try_as::<i64>().ok());
    if !ok || conv.is_some_and(|c| c != 1) {
        return Err(Error::value_error(format!(
            "function `{name}` is not in the packed calling convention (run MakePackedAPI \
             first): expected calling_conv = 1 and parameters (self_handle: handle, args: \
             handle, num_args: int32, result: handle), got {} parameters",
            p.len()
        )));
    }
    Ok(())
}

/// Generates one LLVM module named `name` for every function of `module` (each exported as
/// `__tvm_ffi_<global_symbol>`; with exactly one function, `__tvm_ffi_main` too). Not
/// optimized.
pub fn generate_module<'ctx>(
    ctx: &'ctx Context,
    target: &LlvmTarget,
    module: &IRModule,
    name: &str,
) -> Result<Module<'ctx>> {
    let m = target.create_module(ctx, name);
    let mut cg = CodeGen::with_context(ctx, target, &m);
    let mut funcs = Vec::new();
    for (key, func) in module.functions().iter() {
        let sym = function_symbol(key, func);
        funcs.push(cg.add_function(&sym, func)?);
    }
    if funcs.len() == 1 {
        symbols::add_main_alias(&m, &cg.abi, funcs[0])?;
    }
    drop(cg);
    Ok(m)
}

/// Generates, verifies, optimizes and compiles `module` for `target` (see
/// [`generate_module`]) as the code variant `variant` of a library: its functions renamed for
/// the variant's tag and its target record added ([`crate::variants`]).
pub fn compile_module(
    target: &LlvmTarget,
    module: &IRModule,
    name: &str,
    variant: &Variant,
) -> Result<CompiledModule> {
    let ctx = Context::create();
    let m = generate_module(&ctx, target, module, name)?;
    symbols::rename_for_variant(&m, &variant.tag);
    symbols::add_target_record(&m, &FfiAbi::new(&ctx), &variant.record().encode());
    CompiledModule::compile(target, &m, &variant.tag)
}

/// The largest power of two dividing `bytes` (capped at `cap`); 0 means "any multiple".
pub(crate) fn pow2_align(bytes: i64, cap: i64) -> u32 {
    if bytes == 0 {
        return cap as u32;
    }
    let p = 1i64 << bytes.unsigned_abs().trailing_zeros().min(30);
    p.min(cap).max(1) as u32
}

/// Marks `v` (an instruction) with the target's fast-math flags (at least `contract`).
pub(crate) fn with_fast_math<'ctx>(
    target: &LlvmTarget,
    v: BasicValueEnum<'ctx>,
) -> BasicValueEnum<'ctx> {
    let flags = target.fast_math_flags();
    if flags != inkwell::values::FastMathFlags::empty() {
        if let Some(i) = v.as_instruction_value() {
            let _ = i.set_fast_math_flags(flags);
        }
    }
    v
}
