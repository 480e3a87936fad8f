//! `left_shift(lhs, rhs)` and `right_shift(lhs, rhs)` (ONNX `BitShift`): integer shifts with
//! numpy broadcasting (pattern `Broadcast`), in the operands' dtype; a left shift drops the
//! bits shifted out, a right shift of unsigned integers fills with zeros.

use crate::ir::Type;
use crate::op::{broadcast_shapes, eval, input, one, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_runtime::tensor::Tensor;
use kiln_tir::DataTypeExt;
use kiln_topi::broadcast as bc;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (a, _) = ctx.tensor(0)?;
    let (b, _) = ctx.tensor(1)?;
    let d = ctx.same_dtype(0, 1)?;
    if !d.is_integer() {
        return Err(ctx.err(format!("arguments must be integers, got {d}")));
    }
    let shape = broadcast_shapes(a, b).map_err(|m| ctx.err(m))?;
    Ok(Type::tensor(&shape, d))
}

/// `x << s` (or `x >> s`) in an integer type of `bits` bits, through `i128` (the evaluator
/// works on `f64` values, exact up to 2^53).
fn shift(x: f64, s: f64, bits: u32, signed: bool, left: bool) -> f64 {
    let (x, s) = (x as i128, s as u32);
    if s >= bits {
        return if !left && signed && x < 0 { -1.0 } else { 0.0 };
    }
    let r = if left { x << s } else { x >> s };
    // Wrap into the type: keep the low `bits` bits, sign-extended for signed types.
    let m = r & ((1i128 << bits) - 1);
    let v = if signed && m >> (bits - 1) == 1 {
        m - (1i128 << bits)
    } else {
        m
    };
    v as f64
}

fn eval_shift(args: &[Tensor], ty: &Type, left: bool) -> Result<Tensor> {
    let d = args[0].dtype();
    let (bits, signed) = (d.bits() as u32, d.is_int());
    eval::broadcast(args, ty, |x| shift(x[0], x[1], bits, signed, left))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("left_shift", &["lhs", "rhs"], OpPattern::Broadcast, rel)
            .eval(|a, _, ty| eval_shift(a, ty, true))
            .compute(|i, _, _| {
                let x = |k| input("left_shift", i, k);
                one(bc::left_shift(x(0)?, x(1)?))
            }),
    );
    v.push(
        OpDef::new("right_shift", &["lhs", "rhs"], OpPattern::Broadcast, rel)
            .eval(|a, _, ty| eval_shift(a, ty, false))
            .compute(|i, _, _| {
                let x = |k| input("right_shift", i, k);
                one(bc::right_shift(x(0)?, x(1)?))
            }),
    );
}
