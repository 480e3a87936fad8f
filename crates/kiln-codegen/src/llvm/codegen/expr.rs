//! Expressions: constants, variables, arithmetic (integer division truncating, `floordiv` /
//! `floormod` rounding toward negative infinity), comparisons, logic, casts (every int and float
//! width, bool, float16 as LLVM `half`, bfloat16 through bit operations), select, let, ramps,
//! broadcasts, buffer loads (vector loads for unit-stride ramps, per-lane otherwise, with
//! alignment from the index's known factor), and calls (dispatched to [`super::intrinsics`] and
//! [`super::packed`]).

use super::{pow2_align, with_fast_math, CodeGen};
use crate::llvm::llvm_error;
use crate::lower_common::unit_stride_base;
use inkwell::types::{BasicTypeEnum, VectorType};
use inkwell::values::{BasicValue, BasicValueEnum, IntValue, PointerValue, VectorValue};
use inkwell::{FloatPredicate, IntPredicate};
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::{BinOp, Buffer, DataTypeExt, ExprKind, PrimExpr};

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

/// The multiple an integer expression is known to be (0: it is zero, any multiple).
pub fn known_factor(e: &PrimExpr) -> i64 {
    fn gcd(a: i64, b: i64) -> i64 {
        if b == 0 {
            a.abs()
        } else {
            gcd(b, a % b)
        }
    }
    match e.kind() {
        ExprKind::IntImm(v) => v.saturating_abs(),
        ExprKind::Binary(BinOp::Mul, a, b) => known_factor(a).saturating_mul(known_factor(b)),
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) => gcd(known_factor(a), known_factor(b)),
        ExprKind::Cast(v) if v.dtype().is_integer() => known_factor(v),
        ExprKind::Ramp { base, .. } => known_factor(base),
        _ => 1,
    }
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

    /// The address of element `index` (a scalar) of `buffer`.
    pub(crate) fn element_ptr(
        &mut self,
        buffer: &Buffer,
        index: BasicValueEnum<'ctx>,
        index_t: DataType,
    ) -> Result<PointerValue<'ctx>> {
        self.element_address(buffer, index, index_t, true)
    }

    /// [`Self::element_ptr`] without LLVM's in-bounds promise: a masked access may start
    /// before the buffer (its first lanes masked off), where an in-bounds address would be
    /// poison.
    pub(crate) fn unchecked_element_ptr(
        &mut self,
        buffer: &Buffer,
        index: BasicValueEnum<'ctx>,
        index_t: DataType,
    ) -> Result<PointerValue<'ctx>> {
        self.element_address(buffer, index, index_t, false)
    }

    fn element_address(
        &mut self,
        buffer: &Buffer,
        index: BasicValueEnum<'ctx>,
        index_t: DataType,
        in_bounds: bool,
    ) -> Result<PointerValue<'ctx>> {
        let data = self.var_value(buffer.data())?;
        let BasicValueEnum::PointerValue(data) = data else {
            return Err(Error::type_error(format!(
                "buffer `{}`: its data `{}` is not a pointer",
                buffer.name(),
                buffer.data().name()
            )));
        };
        let mut off = self.cast(index_t, DataType::int(64), index)?;
        let eo = buffer.elem_offset();
        if !eo.is_const_int(0) {
            let eov = self.expr(eo)?;
            let eov = self.cast(eo.dtype(), DataType::int(64), eov)?;
            off = if in_bounds {
                on_int!(off, eov, |x, y| self.b.build_int_nsw_add(x, y, "off"))?
            } else {
                on_int!(off, eov, |x, y| self.b.build_int_add(x, y, "off"))?
            };
        }
        let elem = self.memory_type(buffer.dtype())?;
        let off = [off.into_int_value()];
        // SAFETY: with `in_bounds`, a promise to LLVM that this is an element of the buffer;
        // without, plain address arithmetic (only masked lanes read it).
        unsafe {
            if in_bounds {
                self.b.build_in_bounds_gep(elem, data, &off, "elem")
            } else {
                self.b.build_gep(elem, data, &off, "elem")
            }
        }
        .map_err(llvm_error)
    }

    /// The alignment of an access of `bytes` bytes at `index` of `buffer`.
    pub(crate) fn access_align(&self, buffer: &Buffer, index: &PrimExpr, elem_bytes: i64) -> u32 {
        let cap = buffer_alignment(buffer);
        let mut factor = known_factor(index);
        if !buffer.elem_offset().is_const_int(0) {
            factor = 1;
        }
        pow2_align(factor.saturating_mul(elem_bytes), cap).max(1)
    }

    fn buffer_load(
        &mut self,
        buffer: &Buffer,
        indices: &[PrimExpr],
        t: DataType,
    ) -> Result<BasicValueEnum<'ctx>> {
        let [index] = indices else {
            return Err(Error::value_error(format!(
                "buffer `{}` is loaded with {} indices: code generation needs flat (1-D) \
                 accesses (run StorageFlatten first)",
                buffer.name(),
                indices.len()
            )));
        };
        let elem_t = buffer.dtype();
        let elem_bytes = (elem_t.bits() as i64 * elem_t.lanes() as i64 + 7) / 8;
        let lanes = index.dtype().lanes();
        let mem_t = buffer.dtype().with_lanes(elem_t.lanes() * lanes);
        let value_t = t;
        let stack_base = unit_stride_base(index)
            .filter(|b| self.mask.is_some() && self.within_stack_array(buffer, b, lanes as i64));
        let raw = if let (Some(mask), Some(base)) = (self.mask, stack_base) {
            // Inside a stack array: the whole vector, the lanes not chosen zeroed.
            let i = self.expr(base)?;
            let p = self.element_ptr(buffer, i, base.dtype())?;
            let align = self.access_align(buffer, base, elem_bytes);
            let v = self.load(mem_t, p, align)?;
            let zero = const_zero(v.get_type());
            self.b
                .build_select(mask, v, zero, "lanes")
                .map_err(llvm_error)?
        } else if let (Some(mask), true) = (self.mask, lanes > 1) {
            self.masked_load(buffer, index, mem_t, mask)?
        } else if lanes == 1 {
            let i = self.expr(index)?;
            let p = self.element_ptr(buffer, i, index.dtype())?;
            let align = self.access_align(buffer, index, elem_bytes);
            let v = self.load(mem_t, p, align)?;
            self.tag_access(v.as_instruction_value(), buffer);
            v
        } else if let Some(base) = unit_stride_base(index) {
            let i = self.expr(base)?;
            let p = self.element_ptr(buffer, i, base.dtype())?;
            let align = self.access_align(buffer, base, elem_bytes);
            let v = self.load(mem_t, p, align)?;
            self.tag_access(v.as_instruction_value(), buffer);
            v
        } else if let Some((base, stride)) = small_stride(index, elem_t) {
            self.span_load(buffer, base, stride, mem_t, None)?
        } else {
            self.gather(buffer, index, mem_t)?
        };
        if value_t.element_of().is_bool() {
            let zero = self.const_int(DataType::int(8).with_lanes(mem_t.lanes()), 0)?;
            return on_int!(raw, zero, |x, y| self.b.build_int_compare(
                IntPredicate::NE,
                x,
                y,
                "b"
            ));
        }
        Ok(raw)
    }

    pub(crate) fn load(
        &mut self,
        mem_t: DataType,
        p: PointerValue<'ctx>,
        align: u32,
    ) -> Result<BasicValueEnum<'ctx>> {
        let ty = self.memory_type(mem_t)?;
        let v = self.b.build_load(ty, p, "ld").map_err(llvm_error)?;
        if let Some(i) = v.as_instruction_value() {
            let _ = i.set_alignment(align);
        }
        Ok(v)
    }

    /// The load of a ramp with a small constant stride `s` (`ramp(base, s, n)`): one contiguous
    /// load of the `(n - 1) * s + 1` elements it spans, then a shuffle picking every `s`-th
    /// (vector code for stride-2 pooling and convolution windows, where loads of single
    /// lanes were several times slower). Nothing past the last element addressed is read.
    /// With `mask`, only the elements of its lanes are read (a masked load of the span, the
    /// mask spread to the elements picked); the other lanes are zero.
    fn span_load(
        &mut self,
        buffer: &Buffer,
        base: &PrimExpr,
        stride: u32,
        mem_t: DataType,
        mask: Option<VectorValue<'ctx>>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let lanes = mem_t.lanes() as u32;
        let span = (lanes - 1) * stride + 1;
        let elem_t = buffer.dtype();
        let elem_bytes = (elem_t.bits() as i64 + 7) / 8;
        let i = self.expr(base)?;
        let align = self.access_align(buffer, base, elem_bytes);
        let wide_t = elem_t.with_lanes(span as u16);
        let wide = match mask {
            None => {
                let p = self.element_ptr(buffer, i, base.dtype())?;
                let v = self.load(wide_t, p, align)?;
                self.tag_access(v.as_instruction_value(), buffer);
                v
            }
            Some(mask) => {
                let p = self.unchecked_element_ptr(buffer, i, base.dtype())?;
                let span_mask = if stride == 1 {
                    mask
                } else {
                    // Element k of the span is read when it is some kept lane's (k = j * s).
                    let spread: Vec<_> = (0..span)
                        .map(|k| {
                            let j = if k % stride == 0 { k / stride } else { lanes };
                            self.abi.i32.const_int(u64::from(j), false)
                        })
                        .collect();
                    let off = self.ctx.bool_type().vec_type(lanes).const_zero();
                    self.b
                        .build_shuffle_vector(
                            mask,
                            off,
                            VectorType::const_vector(&spread),
                            "spread",
                        )
                        .map_err(llvm_error)?
                };
                let vt = self.memory_type(wide_t)?;
                let a = self.abi.i32.const_int(u64::from(align), false);
                let args = [p.into(), a.into(), span_mask.into(), const_zero(vt)];
                self.masked_intrinsic("llvm.masked.load", &[vt, p.get_type().into()], &args)?
            }
        };
        if stride == 1 {
            return Ok(wide);
        }
        let wide = wide.into_vector_value();
        let pick: Vec<_> = (0..lanes)
            .map(|k| self.abi.i32.const_int(u64::from(k * stride), false))
            .collect();
        let v = self
            .b
            .build_shuffle_vector(
                wide,
                wide.get_type().get_poison(),
                VectorType::const_vector(&pick),
                "strided",
            )
            .map_err(llvm_error)?;
        Ok(v.into())
    }

    /// The load of vector index `index` for the lanes of `mask` only (the others are zero and
    /// their addresses are not touched): one masked contiguous load for a unit-stride ramp, a
    /// masked load of the span of a small-stride ramp (its mask spread to the lanes read),
    /// else a masked gather.
    fn masked_load(
        &mut self,
        buffer: &Buffer,
        index: &PrimExpr,
        mem_t: DataType,
        mask: VectorValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let elem_t = buffer.dtype();
        let elem_bytes = (elem_t.bits() as i64 + 7) / 8;
        let lanes = mem_t.lanes() as u32;
        let (base, stride) = match (unit_stride_base(index), small_stride(index, elem_t)) {
            (Some(b), _) if elem_t.lanes() == 1 => (b, 1),
            (_, Some((b, s))) => (b, s),
            _ => {
                let iv = self.expr(index)?.into_vector_value();
                let it = index.dtype();
                let mut ptrs = self.abi.ptr.vec_type(lanes).get_poison();
                for k in 0..lanes {
                    let kk = self.abi.i32.const_int(u64::from(k), false);
                    let i = self
                        .b
                        .build_extract_element(iv, kk, "idx")
                        .map_err(llvm_error)?;
                    let p = self.unchecked_element_ptr(buffer, i, it.element_of())?;
                    ptrs = self
                        .b
                        .build_insert_element(ptrs, p, kk, "ptrs")
                        .map_err(llvm_error)?;
                }
                let align = pow2_align(elem_bytes, buffer_alignment(buffer));
                let vt = self.memory_type(mem_t)?;
                let a = self.abi.i32.const_int(u64::from(align), false);
                return self.masked_intrinsic(
                    "llvm.masked.gather",
                    &[vt, ptrs.get_type().into()],
                    &[ptrs.into(), a.into(), mask.into(), const_zero(vt)],
                );
            }
        };
        self.span_load(buffer, base, stride, mem_t, Some(mask))
    }

    /// A call of the masked memory intrinsic `name` declared for `types`, returning its value.
    fn masked_intrinsic(
        &mut self,
        name: &str,
        types: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        self.call_intrinsic(name, types, args)?
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| Error::runtime_error(format!("`{name}` returned no value")))
    }

    /// A load of each lane of a vector index.
    fn gather(
        &mut self,
        buffer: &Buffer,
        index: &PrimExpr,
        mem_t: DataType,
    ) -> Result<BasicValueEnum<'ctx>> {
        let it = index.dtype();
        let iv = self.expr(index)?.into_vector_value();
        let elem_t = buffer.dtype();
        let elem_bytes = (elem_t.bits() as i64 + 7) / 8;
        let mut acc = self.memory_type(mem_t)?.into_vector_type().get_poison();
        for k in 0..it.lanes() as u64 {
            let kk = self.abi.i32.const_int(k, false);
            let i = self
                .b
                .build_extract_element(iv, kk, "idx")
                .map_err(llvm_error)?;
            let p = self.element_ptr(buffer, i, it.element_of())?;
            let align = pow2_align(elem_bytes, buffer_alignment(buffer));
            let v = self.load(elem_t, p, align)?;
            self.tag_access(v.as_instruction_value(), buffer);
            acc = self
                .b
                .build_insert_element(acc, v, kk, "gather")
                .map_err(llvm_error)?;
        }
        Ok(acc.into())
    }
}

/// The alignment the buffer's data is known to have (64 bytes unless the buffer says less).
pub(crate) fn buffer_alignment(buffer: &Buffer) -> i64 {
    let a = buffer.object().data_alignment;
    if a <= 0 {
        64
    } else {
        a.min(64)
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

/// The base and stride of a ramp index with a constant stride from 2 to [`MAX_LOAD_STRIDE`]
/// over scalar elements, whose span is loaded whole by [`CodeGen::span_load`].
fn small_stride(index: &PrimExpr, elem_t: DataType) -> Option<(&PrimExpr, u32)> {
    let ExprKind::Ramp { base, stride, .. } = index.kind() else {
        return None;
    };
    let s = stride.as_int()?;
    (elem_t.lanes() == 1 && (2..=MAX_LOAD_STRIDE).contains(&s)).then_some((base, s as u32))
}

/// The largest ramp stride loaded as one span and a shuffle (VectorizeLoop masks loads up to
/// it); wider strides load each lane (a span of more than four times the vector costs more
/// than the single loads save).
const MAX_LOAD_STRIDE: i64 = kiln_tir::transform::vectorize_loop::MAX_MASKED_STRIDE;

/// The zero of vector type `t` (a masked load's value in the lanes it does not read).
fn const_zero(t: BasicTypeEnum<'_>) -> BasicValueEnum<'_> {
    t.into_vector_type().const_zero().into()
}
