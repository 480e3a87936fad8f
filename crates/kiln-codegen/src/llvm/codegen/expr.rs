//! Expressions: constants, variables, arithmetic (integer division truncating, `floordiv` /
//! `floormod` rounding toward negative infinity), comparisons, logic, casts (every int and float
//! width, bool, float16 as LLVM `half`, bfloat16 through bit operations), select, let, ramps,
//! broadcasts, buffer loads ([`super::memory`]), and calls (dispatched to [`super::intrinsics`]
//! and [`super::packed`]).

use super::{with_fast_math, CodeGen};
use crate::llvm::llvm_error;
use inkwell::types::{BasicTypeEnum, VectorType};
use inkwell::values::{BasicValue, BasicValueEnum, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::{BinOp, DataTypeExt, ExprKind, PrimExpr};

/// Applies a builder call to an integer scalar or vector value (or a pair of them).
macro_rules! on_int {
    ($v:expr, |$x:ident| $body:expr) => {
        match $v {
            inkwell::values::BasicValueEnum::IntValue($x) => $body
                .map(|r| r.as_basic_value_enum())
                .map_err(crate::llvm::llvm_error),
            inkwell::values::BasicValueEnum::VectorValue($x) => $body
                .map(|r| r.as_basic_value_enum())
                .map_err(crate::llvm::llvm_error),
            other => Err(kiln_ffi::Error::type_error(format!(
                "expected an integer value, got {}",
                other.get_type().print_to_string()
            ))),
        }
    };
    ($a:expr, $b:expr, |$x:ident, $y:ident| $body:expr) => {
        match ($a, $b) {
            (
                inkwell::values::BasicValueEnum::IntValue($x),
                inkwell::values::BasicValueEnum::IntValue($y),
            ) => $body
                .map(|r| r.as_basic_value_enum())
                .map_err(crate::llvm::llvm_error),
            (
                inkwell::values::BasicValueEnum::VectorValue($x),
                inkwell::values::BasicValueEnum::VectorValue($y),
            ) => $body
                .map(|r| r.as_basic_value_enum())
                .map_err(crate::llvm::llvm_error),
            (a, b) => Err(kiln_ffi::Error::type_error(format!(
                "expected two integer values of one shape, got {} and {}",
                a.get_type().print_to_string(),
                b.get_type().print_to_string()
            ))),
        }
    };
}

/// As [`on_int`], for floating-point scalars and vectors.
macro_rules! on_float {
    ($a:expr, $b:expr, |$x:ident, $y:ident| $body:expr) => {
        match ($a, $b) {
            (
                inkwell::values::BasicValueEnum::FloatValue($x),
                inkwell::values::BasicValueEnum::FloatValue($y),
            ) => $body
                .map(|r| r.as_basic_value_enum())
                .map_err(crate::llvm::llvm_error),
            (
                inkwell::values::BasicValueEnum::VectorValue($x),
                inkwell::values::BasicValueEnum::VectorValue($y),
            ) => $body
                .map(|r| r.as_basic_value_enum())
                .map_err(crate::llvm::llvm_error),
            (a, b) => Err(kiln_ffi::Error::type_error(format!(
                "expected two float values of one shape, got {} and {}",
                a.get_type().print_to_string(),
                b.get_type().print_to_string()
            ))),
        }
    };
}

impl<'a, 'ctx> CodeGen<'a, 'ctx> {
    /// The LLVM value of `e`.
    pub fn expr(&mut self, e: &PrimExpr) -> Result<BasicValueEnum<'ctx>> {
        let t = e.dtype();
        match e.kind() {
            ExprKind::IntImm(v) => self.const_int(t, v),
            ExprKind::FloatImm(v) => self.const_float(t, v),
            ExprKind::StringImm(s) => Ok(self
                .b
                .build_global_string_ptr(s, "str")
                .map_err(llvm_error)?
                .as_pointer_value()
                .into()),
            ExprKind::Var(v) => self.var_value(&v),
            ExprKind::Binary(op, a, b) => {
                let at = a.dtype();
                if op == BinOp::Add {
                    if let Some(v) = self.fused_dot4_add(at, a, b)? {
                        return Ok(v);
                    }
                }
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                self.binary(op, at, x, y)
            }
            ExprKind::Not(a) => {
                let x = self.expr(a)?;
                on_int!(x, |v| self.b.build_not(v, "not"))
            }
            ExprKind::Cast(v) => {
                let from = v.dtype();
                let x = self.expr(v)?;
                self.cast(from, t, x)
            }
            ExprKind::Select { cond, t: tv, f } => {
                let c = self.expr(cond)?;
                let (x, y) = (self.expr(tv)?, self.expr(f)?);
                self.select(c, x, y)
            }
            ExprKind::Let { var, value, body } => {
                let v = self.expr(value)?;
                let prev = self.bind(var, v);
                let r = self.expr(body);
                self.unbind(var, prev);
                r
            }
            ExprKind::BufferLoad { buffer, indices } => self.buffer_load(buffer, indices, t),
            ExprKind::Ramp {
                base,
                stride,
                lanes,
            } => {
                let bt = base.dtype();
                let (b0, s0) = (self.expr(base)?, self.expr(stride)?);
                self.ramp(bt, b0, s0, lanes as u32)
            }
            ExprKind::Broadcast { value, lanes } => {
                let v = self.expr(value)?;
                self.splat(v, lanes as u32)
            }
            ExprKind::Call { op, args } => self.call(op, t, args),
        }
    }

    /// The constant `v` of integer (or bool) type `t` (vectors splat).
    pub(crate) fn const_int(&self, t: DataType, v: i64) -> Result<BasicValueEnum<'ctx>> {
        if t.is_floating() {
            return self.const_float(t, v as f64);
        }
        let ty = self.llvm_type(t.element_of())?;
        let c: BasicValueEnum = match ty {
            BasicTypeEnum::IntType(it) => it.const_int(v as u64, true).into(),
            BasicTypeEnum::PointerType(pt) if v == 0 => pt.const_null().into(),
            _ => {
                return Err(Error::type_error(format!(
                    "no integer constant of type {t}"
                )))
            }
        };
        self.splat_const(c, t.lanes())
    }

    /// The constant `v` of float type `t` (bfloat16 as its bits; vectors splat).
    pub(crate) fn const_float(&self, t: DataType, v: f64) -> Result<BasicValueEnum<'ctx>> {
        let elem = t.element_of();
        let c: BasicValueEnum = if elem.is_bfloat() {
            self.abi
                .i16
                .const_int(f32_to_bf16_bits(v as f32) as u64, false)
                .into()
        } else if elem.is_float() {
            self.llvm_type(elem)?
                .into_float_type()
                .const_float(v)
                .into()
        } else {
            return self.const_int(t, v as i64);
        };
        self.splat_const(c, t.lanes())
    }

    fn splat_const(&self, c: BasicValueEnum<'ctx>, lanes: u16) -> Result<BasicValueEnum<'ctx>> {
        if lanes <= 1 {
            return Ok(c);
        }
        let items = vec![c; lanes as usize];
        Ok(VectorType::const_vector(&items).into())
    }

    /// `v` in each of `lanes` lanes.
    pub(crate) fn splat(
        &mut self,
        v: BasicValueEnum<'ctx>,
        lanes: u32,
    ) -> Result<BasicValueEnum<'ctx>> {
        if lanes <= 1 {
            return Ok(v);
        }
        let vt = match v.get_type() {
            BasicTypeEnum::IntType(t) => t.vec_type(lanes),
            BasicTypeEnum::FloatType(t) => t.vec_type(lanes),
            BasicTypeEnum::PointerType(t) => t.vec_type(lanes),
            other => {
                return Err(Error::type_error(format!(
                    "cannot broadcast a value of type {}",
                    other.print_to_string()
                )))
            }
        };
        let zero = self.abi.i32.const_zero();
        let one = self
            .b
            .build_insert_element(vt.get_poison(), v, zero, "bcast")
            .map_err(llvm_error)?;
        let mask = VectorType::const_vector(&vec![zero; lanes as usize]);
        let r = self
            .b
            .build_shuffle_vector(one, vt.get_poison(), mask, "bcast")
            .map_err(llvm_error)?;
        Ok(r.into())
    }

    /// `[base + k * stride for k in 0..lanes]`.
    pub(crate) fn ramp(
        &mut self,
        t: DataType,
        base: BasicValueEnum<'ctx>,
        stride: BasicValueEnum<'ctx>,
        lanes: u32,
    ) -> Result<BasicValueEnum<'ctx>> {
        let it = self.llvm_type(t)?.into_int_type();
        let iota: Vec<IntValue> = (0..lanes).map(|k| it.const_int(k as u64, false)).collect();
        let iota: BasicValueEnum = VectorType::const_vector(&iota).into();
        let bb = self.splat(base, lanes)?;
        let sb = self.splat(stride, lanes)?;
        let off = on_int!(sb, iota, |x, y| self.b.build_int_mul(x, y, "ramp.off"))?;
        on_int!(bb, off, |x, y| self.b.build_int_add(x, y, "ramp"))
    }

    /// `cond ? t : f` (both evaluated); `cond` is a scalar or a vector of bools.
    pub(crate) fn select(
        &mut self,
        cond: BasicValueEnum<'ctx>,
        t: BasicValueEnum<'ctx>,
        f: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        match cond {
            BasicValueEnum::IntValue(c) => self.b.build_select(c, t, f, "sel"),
            BasicValueEnum::VectorValue(c) => self.b.build_select(c, t, f, "sel"),
            _ => return Err(Error::type_error("a select condition must be bool")),
        }
        .map_err(llvm_error)
    }

    /// `a op b` for operands of dtype `t` (the result of a comparison is bool).
    pub(crate) fn binary(
        &mut self,
        op: BinOp,
        t: DataType,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        if t.is_bfloat() {
            // Compute in float32, round back for arithmetic.
            let f32t = DataType::float(32).with_lanes(t.lanes());
            let (x, y) = (self.cast(t, f32t, a)?, self.cast(t, f32t, b)?);
            let r = self.binary(op, f32t, x, y)?;
            return if op.is_arith() {
                self.cast(f32t, t, r)
            } else {
                Ok(r)
            };
        }
        if t.is_floating() {
            return self.float_binary(op, t, a, b);
        }
        let signed = t.is_int();
        let nsw = signed && t.bits() >= 32;
        let b_ = &self.b;
        match op {
            BinOp::Add if nsw => on_int!(a, b, |x, y| b_.build_int_nsw_add(x, y, "add")),
            BinOp::Sub if nsw => on_int!(a, b, |x, y| b_.build_int_nsw_sub(x, y, "sub")),
            BinOp::Mul if nsw => on_int!(a, b, |x, y| b_.build_int_nsw_mul(x, y, "mul")),
            BinOp::Add => on_int!(a, b, |x, y| b_.build_int_add(x, y, "add")),
            BinOp::Sub => on_int!(a, b, |x, y| b_.build_int_sub(x, y, "sub")),
            BinOp::Mul => on_int!(a, b, |x, y| b_.build_int_mul(x, y, "mul")),
            BinOp::Div if signed => on_int!(a, b, |x, y| b_.build_int_signed_div(x, y, "div")),
            BinOp::Div => on_int!(a, b, |x, y| b_.build_int_unsigned_div(x, y, "div")),
            BinOp::Mod if signed => on_int!(a, b, |x, y| b_.build_int_signed_rem(x, y, "rem")),
            BinOp::Mod => on_int!(a, b, |x, y| b_.build_int_unsigned_rem(x, y, "rem")),
            BinOp::FloorDiv | BinOp::FloorMod if !signed => {
                let div = op == BinOp::FloorDiv;
                on_int!(a, b, |x, y| if div {
                    b_.build_int_unsigned_div(x, y, "fdiv")
                } else {
                    b_.build_int_unsigned_rem(x, y, "fmod")
                })
            }
            BinOp::FloorDiv | BinOp::FloorMod => self.floor_div_mod(op, t, a, b),
            BinOp::Min | BinOp::Max => {
                let pred = match (op, signed) {
                    (BinOp::Min, true) => IntPredicate::SLT,
                    (BinOp::Min, false) => IntPredicate::ULT,
                    (_, true) => IntPredicate::SGT,
                    (_, false) => IntPredicate::UGT,
                };
                let c = on_int!(a, b, |x, y| b_.build_int_compare(pred, x, y, "cmp"))?;
                self.select(c, a, b)
            }
            BinOp::And => on_int!(a, b, |x, y| b_.build_and(x, y, "and")),
            BinOp::Or => on_int!(a, b, |x, y| b_.build_or(x, y, "or")),
            _ => {
                let pred = int_predicate(op, signed);
                if t.is_handle() {
                    let (x, y) = (a.into_pointer_value(), b.into_pointer_value());
                    let xi = b_
                        .build_ptr_to_int(x, self.abi.i64, "p")
                        .map_err(llvm_error)?;
                    let yi = b_
                        .build_ptr_to_int(y, self.abi.i64, "p")
                        .map_err(llvm_error)?;
                    return Ok(b_
                        .build_int_compare(pred, xi, yi, "cmp")
                        .map_err(llvm_error)?
                        .into());
                }
                on_int!(a, b, |x, y| b_.build_int_compare(pred, x, y, "cmp"))
            }
        }
    }

    /// Signed floor division / modulo: truncating results corrected when the remainder is
    /// non-zero and its sign differs from the divisor's.
    fn floor_div_mod(
        &mut self,
        op: BinOp,
        t: DataType,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let b_ = &self.b;
        let zero = self.const_int(t, 0)?;
        let q = on_int!(a, b, |x, y| b_.build_int_signed_div(x, y, "q"))?;
        let r = on_int!(a, b, |x, y| b_.build_int_signed_rem(x, y, "r"))?;
        let r_nz = on_int!(r, zero, |x, y| b_.build_int_compare(
            IntPredicate::NE,
            x,
            y,
            "r.nz"
        ))?;
        let r_neg = on_int!(r, zero, |x, y| b_.build_int_compare(
            IntPredicate::SLT,
            x,
            y,
            "r.neg"
        ))?;
        let b_neg = on_int!(b, zero, |x, y| b_.build_int_compare(
            IntPredicate::SLT,
            x,
            y,
            "b.neg"
        ))?;
        let differ = on_int!(r_neg, b_neg, |x, y| b_.build_xor(x, y, "differ"))?;
        let fix = on_int!(r_nz, differ, |x, y| b_.build_and(x, y, "fix"))?;
        if op == BinOp::FloorDiv {
            let one = self.const_int(t, 1)?;
            let qm = on_int!(q, one, |x, y| b_.build_int_sub(x, y, "q.m1"))?;
            self.select(fix, qm, q)
        } else {
            let rp = on_int!(r, b, |x, y| b_.build_int_add(x, y, "r.pb"))?;
            self.select(fix, rp, r)
        }
    }

    fn float_binary(
        &mut self,
        op: BinOp,
        t: DataType,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let b_ = &self.b;
        let r = match op {
            BinOp::Add => on_float!(a, b, |x, y| b_.build_float_add(x, y, "fadd"))?,
            BinOp::Sub => on_float!(a, b, |x, y| b_.build_float_sub(x, y, "fsub"))?,
            BinOp::Mul => on_float!(a, b, |x, y| b_.build_float_mul(x, y, "fmul"))?,
            BinOp::Div => on_float!(a, b, |x, y| b_.build_float_div(x, y, "fdiv"))?,
            BinOp::Mod => on_float!(a, b, |x, y| b_.build_float_rem(x, y, "frem"))?,
            BinOp::FloorDiv | BinOp::FloorMod => {
                let q = on_float!(a, b, |x, y| b_.build_float_div(x, y, "fdiv"))?;
                let q = with_fast_math(self.target, q);
                let fq = self.unary_intrinsic("llvm.floor", q)?;
                if op == BinOp::FloorDiv {
                    return Ok(fq);
                }
                let b_ = &self.b;
                let m = on_float!(fq, b, |x, y| b_.build_float_mul(x, y, "fmul"))?;
                let m = with_fast_math(self.target, m);
                on_float!(a, m, |x, y| b_.build_float_sub(x, y, "fmod"))?
            }
            BinOp::Min | BinOp::Max => {
                let pred = if op == BinOp::Min {
                    FloatPredicate::OLT
                } else {
                    FloatPredicate::OGT
                };
                let c = on_float!(a, b, |x, y| b_.build_float_compare(pred, x, y, "fcmp"))?;
                return self.select(c, a, b);
            }
            _ => {
                let pred = match op {
                    BinOp::Eq => FloatPredicate::OEQ,
                    BinOp::Ne => FloatPredicate::UNE,
                    BinOp::Lt => FloatPredicate::OLT,
                    BinOp::Le => FloatPredicate::OLE,
                    BinOp::Gt => FloatPredicate::OGT,
                    BinOp::Ge => FloatPredicate::OGE,
                    _ => {
                        return Err(Error::type_error(format!(
                            "{} is not defined for {t}",
                            op.type_key()
                        )))
                    }
                };
                on_float!(a, b, |x, y| b_.build_float_compare(pred, x, y, "fcmp"))?
            }
        };
        Ok(with_fast_math(self.target, r))
    }

    /// Converts `v` of dtype `from` to `to` (same lanes).
    pub fn cast(
        &mut self,
        from: DataType,
        to: DataType,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as Op;
        if from == to {
            return Ok(v);
        }
        if from.is_byte_code() || to.is_byte_code() {
            return Err(Error::type_error(format!(
                "cast from {from} to {to}: narrow types convert in kiln_topi::elemwise::cast, \
                 not in code generation"
            )));
        }
        let lanes = to.lanes();
        if from.lanes() != lanes {
            return Err(Error::type_error(format!("cannot cast {from} to {to}")));
        }
        let f32t = DataType::float(32).with_lanes(lanes);
        if from.is_bfloat() {
            let i32t = self.llvm_type(DataType::int(32).with_lanes(lanes))?;
            let w = self
                .b
                .build_cast(Op::ZExt, v, i32t, "bf")
                .map_err(llvm_error)?;
            let s = self.const_int(DataType::int(32).with_lanes(lanes), 16)?;
            let w = on_int!(w, s, |x, y| self.b.build_left_shift(x, y, "bf"))?;
            let f = self
                .b
                .build_bit_cast(w, self.llvm_type(f32t)?, "bf")
                .map_err(llvm_error)?;
            return self.cast(f32t, to, f);
        }
        if to.is_bfloat() {
            let f = self.cast(from, f32t, v)?;
            return self.f32_to_bf16(f, lanes);
        }
        let ty = self.llvm_type(to)?;
        let b = &self.b;
        let cast = |op: Op| b.build_cast(op, v, ty, "cast").map_err(llvm_error);
        if to.is_bool() {
            let zero = self.const_int(from, 0)?;
            return if from.is_floating() {
                on_float!(v, zero, |x, y| b.build_float_compare(
                    FloatPredicate::UNE,
                    x,
                    y,
                    "tobool"
                ))
            } else if from.is_handle() {
                let i = b
                    .build_ptr_to_int(v.into_pointer_value(), self.abi.i64, "p")
                    .map_err(llvm_error)?;
                Ok(
                    b.build_int_compare(IntPredicate::NE, i, self.abi.i64.const_zero(), "tobool")
                        .map_err(llvm_error)?
                        .into(),
                )
            } else {
                on_int!(v, zero, |x, y| b.build_int_compare(
                    IntPredicate::NE,
                    x,
                    y,
                    "tobool"
                ))
            };
        }
        let from_signed = from.is_int();
        if to.is_handle() {
            return if from.is_handle() {
                Ok(v)
            } else {
                cast(Op::IntToPtr)
            };
        }
        if from.is_handle() {
            return cast(Op::PtrToInt);
        }
        if from.is_floating() && to.is_floating() {
            return if from.bits() < to.bits() {
                cast(Op::FPExt)
            } else {
                cast(Op::FPTrunc)
            };
        }
        if from.is_floating() {
            return cast(if to.is_int() { Op::FPToSI } else { Op::FPToUI });
        }
        if to.is_floating() {
            return cast(if from_signed { Op::SIToFP } else { Op::UIToFP });
        }
        // Integer (or bool) to integer.
        let (fb, tb) = (from.bits(), to.bits());
        let fb = if from.is_bool() { 1 } else { fb };
        if fb == tb {
            Ok(v)
        } else if fb > tb {
            cast(Op::Trunc)
        } else if from_signed {
            cast(Op::SExt)
        } else {
            cast(Op::ZExt)
        }
    }

    /// Round-to-nearest-even float32 to bfloat16 bits (NaN stays a quiet NaN).
    fn f32_to_bf16(&mut self, f: BasicValueEnum<'ctx>, lanes: u16) -> Result<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as Op;
        let i32t = DataType::uint(32).with_lanes(lanes);
        let bits = self
            .b
            .build_bit_cast(f, self.llvm_type(i32t)?, "bits")
            .map_err(llvm_error)?;
        let c16 = self.const_int(i32t, 16)?;
        let c1 = self.const_int(i32t, 1)?;
        let bias = self.const_int(i32t, 0x7fff)?;
        let b = &self.b;
        let hi = on_int!(bits, c16, |x, y| b.build_right_shift(x, y, false, "hi"))?;
        let lsb = on_int!(hi, c1, |x, y| b.build_and(x, y, "lsb"))?;
        let r = on_int!(bits, bias, |x, y| b.build_int_add(x, y, "r"))?;
        let r = on_int!(r, lsb, |x, y| b.build_int_add(x, y, "r"))?;
        let r = on_int!(r, c16, |x, y| b.build_right_shift(x, y, false, "r"))?;
        let i16t = self.llvm_type(DataType::uint(16).with_lanes(lanes))?;
        let r = b
            .build_cast(Op::Trunc, r, i16t, "bf16")
            .map_err(llvm_error)?;
        let nan = on_float!(f, f, |x, y| b.build_float_compare(
            FloatPredicate::UNO,
            x,
            y,
            "isnan"
        ))?;
        let qnan = self.const_int(DataType::uint(16).with_lanes(lanes), 0x7fc0)?;
        self.select(nan, qnan, r)
    }
}

fn int_predicate(op: BinOp, signed: bool) -> IntPredicate {
    match (op, signed) {
        (BinOp::Eq, _) => IntPredicate::EQ,
        (BinOp::Ne, _) => IntPredicate::NE,
        (BinOp::Lt, true) => IntPredicate::SLT,
        (BinOp::Lt, false) => IntPredicate::ULT,
        (BinOp::Le, true) => IntPredicate::SLE,
        (BinOp::Le, false) => IntPredicate::ULE,
        (BinOp::Gt, true) => IntPredicate::SGT,
        (BinOp::Gt, false) => IntPredicate::UGT,
        (BinOp::Ge, true) => IntPredicate::SGE,
        _ => IntPredicate::UGE,
    }
}

/// The bits of the bfloat16 nearest to `v` (ties to even).
pub fn f32_to_bf16_bits(v: f32) -> u16 {
    if v.is_nan() {
        return 0x7fc0;
    }
    let b = v.to_bits();
    let r = b.wrapping_add(0x7fff + ((b >> 16) & 1));
    (r >> 16) as u16
}
