//! Calls by name: the dispatcher for `tir.Call`, math intrinsics and bit operations.
//!
//! - LLVM intrinsics (vectorizable): `exp`, `exp2`, `exp10`, `log`, `log2`, `log10`, `sqrt`,
//!   `sin`, `cos`, `fabs`, `floor`, `ceil`, `round` (`llvm.nearbyint`: ties to even, as numpy),
//!   `nearbyint`, `trunc`, `pow`, `copysign`.
//! - libm calls (`tanhf`/`tanh`, ...; vectors lane by lane): `tan`, `sinh`, `cosh`, `tanh`,
//!   `asin`, `acos`, `atan`, `atan2`, `erf`, `expm1`, `log1p`, `hypot`.
//! - Expansions: `sigmoid(x) = 1 / (1 + exp(-x))`, `rsqrt(x) = 1 / sqrt(x)`, `fmod` as `frem`.
//! - float32 `exp`, `erf`, `tanh`, `sigmoid`, `log` and `pow` by a non-integer constant
//!   (scalars and vectors) are the polynomial expansions of [`kiln_tir::fast_math`], which
//!   vectorize; `exp` scales by `2^n` with `vscalefps` where the CPU has it (`exp.rs`).
//! - float16 goes through float32 for libm calls; bfloat16 through float32 for everything.
//! - `tir.if_then_else` (only the chosen side runs), `tir.likely`, `tir.reinterpret`, bitwise
//!   and/or/xor/not, shifts (arithmetic right shift for signed types).
//! - `tir.handle_add_byte_offset(handle, bytes)`: a byte-wise pointer offset (how packed
//!   functions reach the `DLTensor` inside an `ffi.Tensor` object).

use super::CodeGen;
use crate::llvm::llvm_error;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::Linkage;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicMetadataValueEnum, BasicValue, BasicValueEnum};
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::op::{self, builtin};
use kiln_tir::{fast_math, DataTypeExt, PrimExpr};

/// The LLVM intrinsic behind a TIR math op, when there is one.
fn llvm_intrinsic(op: &str) -> Option<&'static str> {
    Some(match op {
        "tir.exp" => "llvm.exp",
        "tir.exp2" => "llvm.exp2",
        "tir.exp10" => "llvm.exp10",
        "tir.log" => "llvm.log",
        "tir.log2" => "llvm.log2",
        "tir.log10" => "llvm.log10",
        "tir.sqrt" => "llvm.sqrt",
        "tir.sin" => "llvm.sin",
        "tir.cos" => "llvm.cos",
        "tir.fabs" => "llvm.fabs",
        "tir.floor" => "llvm.floor",
        "tir.ceil" => "llvm.ceil",
        "tir.round" | "tir.nearbyint" => "llvm.nearbyint",
        "tir.trunc" => "llvm.trunc",
        "tir.pow" => "llvm.pow",
        "tir.copysign" => "llvm.copysign",
        _ => return None,
    })
}

/// The libm function behind a TIR math op that has no LLVM intrinsic (double version; `f`
/// suffix for float); `tir.fmod` is a `frem` instead.
fn libm_function(op: &str) -> Option<&'static str> {
    if llvm_intrinsic(op).is_some() || op == "tir.fmod" {
        return None;
    }
    crate::lower_common::libm_name(op)
}

impl<'a, 'ctx> CodeGen<'a, 'ctx> {
    /// A call of operator `op` returning `t`.
    pub(crate) fn call(
        &mut self,
        op: &str,
        t: DataType,
        args: &[PrimExpr],
    ) -> Result<BasicValueEnum<'ctx>> {
        if fast_math::is_f32(t) {
            if op == "tir.exp" {
                return self.fast_exp(t, &args[0]);
            }
            let expanded = match op {
                "tir.erf" => Some(fast_math::erf(args[0].clone())),
                "tir.tanh" => Some(fast_math::tanh(args[0].clone())),
                "tir.sigmoid" => Some(fast_math::sigmoid(args[0].clone())),
                "tir.log" => Some(fast_math::log(args[0].clone())),
                "tir.pow" => fast_math::pow(args[0].clone(), &args[1]),
                _ => None,
            };
            if let Some(e) = expanded {
                return self.expr(&e);
            }
        }
        if llvm_intrinsic(op).is_some()
            || libm_function(op).is_some()
            || matches!(op, "tir.sigmoid" | "tir.rsqrt" | "tir.fmod")
        {
            return self.math(op, t, args);
        }
        match op {
            op::IF_THEN_ELSE => self.if_then_else(t, args),
            op::DOT4_U8S8 => self.dot4_u8s8(t, &args[0], &args[1]),
            op::LIKELY => self.expr(&args[0]),
            op::PREFETCH => {
                // llvm.prefetch(address, read, keep in all cache levels, data).
                let p = self.expr(&args[0])?.into_pointer_value();
                let i32t = self.ctx.i32_type();
                let flags = [0, 3, 1].map(|v| i32t.const_int(v, false).into());
                self.call_intrinsic(
                    "llvm.prefetch",
                    &[p.get_type().into()],
                    &[p.into(), flags[0], flags[1], flags[2]],
                )?;
                self.const_int(t, 0)
            }
            op::REINTERPRET => {
                let from = args[0].dtype();
                let v = self.expr(&args[0])?;
                self.reinterpret(from, t, v)
            }
            op::BITWISE_AND
            | op::BITWISE_OR
            | op::BITWISE_XOR
            | op::SHIFT_LEFT
            | op::SHIFT_RIGHT => {
                let (a, b) = (self.expr(&args[0])?, self.expr(&args[1])?);
                let signed = args[0].dtype().is_int();
                let bl = &self.b;
                match op {
                    op::BITWISE_AND => on_int!(a, b, |x, y| bl.build_and(x, y, "and")),
                    op::BITWISE_OR => on_int!(a, b, |x, y| bl.build_or(x, y, "or")),
                    op::BITWISE_XOR => on_int!(a, b, |x, y| bl.build_xor(x, y, "xor")),
                    op::SHIFT_LEFT => on_int!(a, b, |x, y| bl.build_left_shift(x, y, "shl")),
                    _ => on_int!(a, b, |x, y| bl.build_right_shift(x, y, signed, "shr")),
                }
            }
            op::BITWISE_NOT => {
                let a = self.expr(&args[0])?;
                on_int!(a, |x| self.b.build_not(x, "not"))
            }
            _ => self.builtin_call(op, t, args),
        }
    }

    /// `cond ? t : f` evaluating only the chosen side.
    fn if_then_else(&mut self, t: DataType, args: &[PrimExpr]) -> Result<BasicValueEnum<'ctx>> {
        if args[0].dtype().lanes() > 1 {
            // Per lane: each side evaluated with its loads masked to the lanes choosing it.
            let c = self.expr(&args[0])?.into_vector_value();
            let outer = self.mask;
            let not_c = self.b.build_not(c, "not").map_err(llvm_error)?;
            let under = |cg: &mut Self, m| match outer {
                Some(o) => cg.b.build_and(o, m, "mask").map_err(llvm_error),
                None => Ok(m),
            };
            self.mask = Some(under(self, c)?);
            let x = self.expr(&args[1]);
            self.mask = Some(under(self, not_c)?);
            let y = self.expr(&args[2]);
            self.mask = outer;
            return self.select(c.into(), x?, y?);
        }
        let c = self.expr(&args[0])?.into_int_value();
        let then_bb = self.block("ite_then");
        let else_bb = self.block("ite_else");
        let end_bb = self.block("ite_end");
        self.b
            .build_conditional_branch(c, then_bb, else_bb)
            .map_err(llvm_error)?;
        self.b.position_at_end(then_bb);
        let x = self.expr(&args[1])?;
        let x_bb = self.b.get_insert_block().expect("positioned");
        self.b
            .build_unconditional_branch(end_bb)
            .map_err(llvm_error)?;
        self.b.position_at_end(else_bb);
        let y = self.expr(&args[2])?;
        let y_bb = self.b.get_insert_block().expect("positioned");
        self.b
            .build_unconditional_branch(end_bb)
            .map_err(llvm_error)?;
        self.b.position_at_end(end_bb);
        let phi = self
            .b
            .build_phi(self.llvm_type(t)?, "ite")
            .map_err(llvm_error)?;
        phi.add_incoming(&[(&x, x_bb), (&y, y_bb)]);
        Ok(phi.as_basic_value())
    }

    /// The bits of `v` (of `from`) as `to`.
    fn reinterpret(
        &mut self,
        from: DataType,
        to: DataType,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as Op;
        let ty = self.llvm_type(to)?;
        let op = match (from.is_handle(), to.is_handle()) {
            (true, true) => return Ok(v),
            (true, false) => Op::PtrToInt,
            (false, true) => Op::IntToPtr,
            _ => Op::BitCast,
        };
        self.b
            .build_cast(op, v, ty, "reinterpret")
            .map_err(llvm_error)
    }

    /// A math intrinsic of `args` returning `t`.
    fn math(&mut self, op: &str, t: DataType, args: &[PrimExpr]) -> Result<BasicValueEnum<'ctx>> {
        let at = args[0].dtype();
        if !at.is_floating() {
            return Err(Error::type_error(format!(
                "{op} needs float operands, got {at}"
            )));
        }
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            vals.push(self.expr(a)?);
        }
        // bfloat16 everywhere, float16 for libm: compute in float32.
        let promote = at.is_bfloat() || (at.bits() == 16 && libm_function(op).is_some());
        if promote {
            let f32t = DataType::float(32).with_lanes(at.lanes());
            for v in vals.iter_mut() {
                *v = self.cast(at, f32t, *v)?;
            }
            let r = self.math_values(op, f32t, &vals)?;
            return self.cast(f32t, t, r);
        }
        self.math_values(op, at, &vals)
    }

    fn math_values(
        &mut self,
        op: &str,
        t: DataType,
        vals: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        use kiln_tir::BinOp;
        if let Some(name) = llvm_intrinsic(op) {
            return self.intrinsic_call(name, vals);
        }
        if let Some(name) = libm_function(op) {
            return self.libm_call(name, t, vals);
        }
        let one = self.const_float(t, 1.0)?;
        match op {
            "tir.sigmoid" => {
                let zero = self.const_float(t, 0.0)?;
                let neg = self.binary(BinOp::Sub, t, zero, vals[0])?;
                let e = self.intrinsic_call("llvm.exp", &[neg])?;
                let d = self.binary(BinOp::Add, t, one, e)?;
                self.binary(BinOp::Div, t, one, d)
            }
            "tir.rsqrt" => {
                let s = self.intrinsic_call("llvm.sqrt", &[vals[0]])?;
                self.binary(BinOp::Div, t, one, s)
            }
            "tir.fmod" => self.binary(BinOp::Mod, t, vals[0], vals[1]),
            _ => Err(Error::value_error(format!("unknown math intrinsic `{op}`"))),
        }
    }

    /// Calls the overloaded LLVM intrinsic `name` on values of one type.
    pub(crate) fn intrinsic_call(
        &mut self,
        name: &str,
        vals: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let r = self
            .call_intrinsic(name, &[vals[0].get_type()], vals)?
            .try_as_basic_value()
            .basic()
            .expect("math intrinsics return a value");
        Ok(super::with_fast_math(self.target, r))
    }

    /// A call of LLVM intrinsic `name`, overloaded on `types`, with `args`.
    pub(crate) fn call_intrinsic(
        &mut self,
        name: &str,
        types: &[inkwell::types::BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<inkwell::values::CallSiteValue<'ctx>> {
        let decl = Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, types))
            .ok_or_else(|| {
                let ts: Vec<String> = types
                    .iter()
                    .map(|t| t.print_to_string().to_string())
                    .collect();
                Error::runtime_error(format!(
                    "LLVM has no intrinsic `{name}` for {}",
                    ts.join(", ")
                ))
            })?;
        let args: Vec<BasicMetadataValueEnum> = args.iter().map(|v| (*v).into()).collect();
        self.b.build_call(decl, &args, "intr").map_err(llvm_error)
    }

    /// A call of the non-overloaded LLVM intrinsic `name` that returns a vector (the x86
    /// intrinsics of `exp.rs` and `dot.rs`).
    pub(crate) fn call_vector_intrinsic(
        &mut self,
        name: &str,
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<inkwell::values::VectorValue<'ctx>> {
        self.call_intrinsic(name, &[], args)?
            .try_as_basic_value()
            .basic()
            .map(|v| v.into_vector_value())
            .ok_or_else(|| Error::runtime_error(format!("`{name}` returned nothing")))
    }

    /// `llvm.<name>` of one value.
    pub(crate) fn unary_intrinsic(
        &mut self,
        name: &str,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        self.intrinsic_call(name, &[v])
    }

    /// Calls libm's `name` (`namef` for float32) lane by lane.
    fn libm_call(
        &mut self,
        name: &str,
        t: DataType,
        vals: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let scalar_t = self.llvm_type(t.element_of())?;
        let fname = match t.bits() {
            32 => format!("{name}f"),
            64 => name.to_string(),
            b => return Err(Error::type_error(format!("no libm `{name}` for float{b}"))),
        };
        let f = self.module.get_function(&fname).unwrap_or_else(|| {
            let params: Vec<inkwell::types::BasicMetadataTypeEnum> =
                vals.iter().map(|_| scalar_t.into()).collect();
            let fty = match scalar_t {
                BasicTypeEnum::FloatType(ft) => ft.fn_type(&params, false),
                _ => unreachable!("libm functions take floats"),
            };
            self.module
                .add_function(&fname, fty, Some(Linkage::External))
        });
        let call1 =
            |cg: &mut Self, args: &[BasicValueEnum<'ctx>]| -> Result<BasicValueEnum<'ctx>> {
                let a: Vec<BasicMetadataValueEnum> = args.iter().map(|v| (*v).into()).collect();
                Ok(cg
                    .b
                    .build_call(f, &a, "libm")
                    .map_err(llvm_error)?
                    .try_as_basic_value()
                    .basic()
                    .expect("libm returns a value"))
            };
        if t.lanes() == 1 {
            return call1(self, vals);
        }
        let mut acc = self.llvm_type(t)?.into_vector_type().get_poison();
        for k in 0..t.lanes() as u64 {
            let kk = self.abi.i32.const_int(k, false);
            let mut lane = Vec::with_capacity(vals.len());
            for v in vals {
                lane.push(
                    self.b
                        .build_extract_element(v.into_vector_value(), kk, "lane")
                        .map_err(llvm_error)?,
                );
            }
            let r = call1(self, &lane)?;
            acc = self
                .b
                .build_insert_element(acc, r, kk, "libm.v")
                .map_err(llvm_error)?;
        }
        Ok(acc.as_basic_value_enum())
    }

    fn builtin_call(
        &mut self,
        op: &str,
        t: DataType,
        args: &[PrimExpr],
    ) -> Result<BasicValueEnum<'ctx>> {
        match op {
            builtin::TVM_STRUCT_GET => self.struct_get(t, args),
            builtin::TVM_STRUCT_SET => self.struct_set(args),
            builtin::ALLOC_WORKSPACE => self.alloc_workspace(args),
            builtin::FREE_WORKSPACE => self.free_workspace(args),
            op::CALL_PACKED => self.call_packed(t, args),
            op::CALL_EXTERN | op::CALL_PURE_EXTERN => self.call_extern(t, args),
            builtin::ISNULLPTR => {
                let p = self.expr(&args[0])?.into_pointer_value();
                Ok(self
                    .b
                    .build_is_null(p, "isnull")
                    .map_err(llvm_error)?
                    .into())
            }
            builtin::RET => {
                let v = self.expr(&args[0])?;
                let v = self.cast(args[0].dtype(), DataType::int(32), v)?;
                self.b.build_return(Some(&v)).map_err(llvm_error)?;
                let dead = self.block("after_ret");
                self.b.position_at_end(dead);
                self.const_int(t, 0)
            }
            builtin::TVM_THROW_LAST_ERROR => {
                self.return_error()?;
                self.const_int(t, 0)
            }
            builtin::ADDRESS_OF => self.address_of(&args[0]),
            builtin::HANDLE_ADD_BYTE_OFFSET => self.handle_add_byte_offset(args),
            _ => Err(Error::value_error(format!(
                "code generation does not know the operator `{op}` (returning {t})"
            ))),
        }
    }
}

impl<'a, 'ctx> CodeGen<'a, 'ctx> {
    /// `tir.handle_add_byte_offset(handle, offset)`: an `i8` GEP (`handle + offset` bytes).
    fn handle_add_byte_offset(&mut self, args: &[PrimExpr]) -> Result<BasicValueEnum<'ctx>> {
        if args.len() != 2 {
            return Err(Error::value_error(format!(
                "`{}` takes a handle and a byte offset, not {} arguments",
                builtin::HANDLE_ADD_BYTE_OFFSET,
                args.len()
            )));
        }
        let p = self.expr(&args[0])?.into_pointer_value();
        let off = self.expr(&args[1])?;
        let off = self.cast(args[1].dtype(), DataType::int(64), off)?;
        // SAFETY: the offset stays inside the object the handle points to (TVM's contract).
        let q = unsafe {
            self.b
                .build_gep(self.abi.i8, p, &[off.into_int_value()], "handle.off")
                .map_err(llvm_error)?
        };
        Ok(q.into())
    }
}
