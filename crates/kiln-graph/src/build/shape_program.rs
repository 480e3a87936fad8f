//! The shape program of a kernel compiled with run-time extents: its result's dimensions, as
//! the operators' computes give them (expressions of the inputs' dimensions), turned into the
//! VM's stack program (`kiln_runtime::vm::shape_expr`). So an operator's shape rule is
//! written once, in its compute, and a run-time shape needs no shape function of its own.

use super::lower::fused_compute;
use crate::ir::Function;
use kiln_ffi::Result;
use kiln_runtime::vm::shape_expr::op::*;
use kiln_te::Tensor;
use kiln_tir::{BinOp, CpuDesc, ExprKind, PrimExpr};

/// The program computing the dimensions of `f`'s single tensor result from the dimensions
/// of its parameters (in order), or `None` when a dimension depends on anything else (a value,
/// an extent bound from the result itself) or `f` has several results.
///
/// # Errors
/// What building `f`'s compute reports (an operator that needs static shapes).
pub fn result_shape_program(f: &Function) -> Result<Option<Vec<i64>>> {
    let fc = fused_compute(f, &CpuDesc::default())?;
    let [out] = fc.outputs.as_slice() else {
        return Ok(None);
    };
    let mut code = Vec::new();
    for d in out.shape() {
        if !emit(d, &fc.inputs, &mut code) {
            return Ok(None);
        }
        code.push(EMIT);
    }
    Ok(Some(code))
}

/// Appends the words computing `e` (dimensions are non-negative, so truncating and floor
/// division agree); false when `e` reads anything but constants and input dimensions.
fn emit(e: &PrimExpr, inputs: &[Tensor], code: &mut Vec<i64>) -> bool {
    match e.kind() {
        ExprKind::IntImm(v) => code.extend([PUSH, v]),
        ExprKind::Var(v) => {
            let at = inputs.iter().enumerate().find_map(|(a, t)| {
                t.shape()
                    .iter()
                    .position(|d| matches!(d.kind(), ExprKind::Var(w) if w == v))
                    .map(|j| (a, j))
            });
            let Some((a, j)) = at else {
                return false;
            };
            code.extend([DIM, a as i64, j as i64]);
        }
        ExprKind::Cast(x) => return emit(x, inputs, code),
        ExprKind::Select { cond, t, f } => {
            if !(emit(cond, inputs, code) && emit(t, inputs, code) && emit(f, inputs, code)) {
                return false;
            }
            code.push(SELECT);
        }
        ExprKind::Binary(op, a, b) => {
            // Operands swapped for >, > and >= as a negated <, != as a negated ==.
            let (x, y, words): (&PrimExpr, &PrimExpr, &[i64]) = match op {
                BinOp::Add => (a, b, &[ADD]),
                BinOp::Sub => (a, b, &[SUB]),
                BinOp::Mul | BinOp::And => (a, b, &[MUL]),
                BinOp::Div | BinOp::FloorDiv => (a, b, &[FLOOR_DIV]),
                BinOp::Mod | BinOp::FloorMod => (a, b, &[FLOOR_MOD]),
                BinOp::Min => (a, b, &[MIN]),
                BinOp::Max | BinOp::Or => (a, b, &[MAX]),
                BinOp::Eq => (a, b, &[EQ]),
                BinOp::Ne => (a, b, &[EQ, PUSH, 0, EQ]),
                BinOp::Lt => (a, b, &[LT]),
                BinOp::Gt => (b, a, &[LT]),
                BinOp::Le => (b, a, &[LT, PUSH, 0, EQ]),
                BinOp::Ge => (a, b, &[LT, PUSH, 0, EQ]),
            };
            if !(emit(x, inputs, code) && emit(y, inputs, code)) {
                return false;
            }
            code.extend_from_slice(words);
        }
        _ => return false,
    }
    true
}
