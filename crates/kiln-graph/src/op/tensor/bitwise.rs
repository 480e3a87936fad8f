//! `bitwise_and`, `bitwise_or`, `bitwise_xor` (numpy broadcasting, pattern `Broadcast`) and
//! `bitwise_not` (pattern `ElemWise`) of integers, in the operands' dtype (ONNX `BitwiseAnd`,
//! `BitwiseOr`, `BitwiseXor`, `BitwiseNot`).

use crate::ir::Type;
use crate::op::{broadcast_shapes, eval, input, one, OpDef, OpPattern, RelCtx};
use kiln_ffi::{DataType, Result};
use kiln_tir::DataTypeExt;
use kiln_topi::{broadcast as bc, elemwise as ew};

/// Checks that `d` is an integer type (not bool).
fn integer(ctx: &RelCtx<'_>, d: DataType) -> Result<()> {
    if d.is_integer() && !d.is_bool() {
        Ok(())
    } else {
        Err(ctx.err(format!("arguments must be integers, got {d}")))
    }
}

fn binary_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (a, _) = ctx.tensor(0)?;
    let (b, _) = ctx.tensor(1)?;
    let d = ctx.same_dtype(0, 1)?;
    integer(ctx, d)?;
    let shape = broadcast_shapes(a, b).map_err(|m| ctx.err(m))?;
    Ok(Type::tensor(&shape, d))
}

fn not_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (_, d) = ctx.tensor(0)?;
    integer(ctx, d)?;
    Ok(ctx.args[0].clone())
}

/// `v` (an integer value of `d`, carried in an `f64`) wrapped into `d`'s range.
fn wrap(v: i128, d: DataType) -> f64 {
    let bits = d.bits() as u32;
    let m = v & ((1i128 << bits) - 1);
    let v = if d.is_int() && m >> (bits - 1) == 1 {
        m - (1i128 << bits)
    } else {
        m
    };
    v as f64
}

macro_rules! bitwise_binary {
    ($($name:literal => $op:tt, $topi:path;)*) => {
        /// The definitions of this file.
        pub(crate) fn defs(v: &mut Vec<OpDef>) {
            $(
                v.push(
                    OpDef::new($name, &["lhs", "rhs"], OpPattern::Broadcast, binary_rel)
                        .eval(|a, _, ty| {
                            let d = a[0].dtype();
                            eval::broadcast(a, ty, |x| {
                                wrap((x[0] as i128) $op (x[1] as i128), d)
                            })
                        })
                        .compute(|i, _, _| {
                            let x = |k| input($name, i, k);
                            one($topi(x(0)?, x(1)?))
                        }),
                );
            )*
            v.push(
                OpDef::new("bitwise_not", &["data"], OpPattern::ElemWise, not_rel)
                    .eval(|a, _, ty| {
                        let d = a[0].dtype();
                        eval::unary(a, ty, |x| wrap(!(x as i128), d))
                    })
                    .compute(|i, _, _| one(ew::bitwise_not(input("bitwise_not", i, 0)?))),
            );
        }
    };
}

bitwise_binary! {
    "bitwise_and" => &, bc::bitwise_and;
    "bitwise_or" => |, bc::bitwise_or;
    "bitwise_xor" => ^, bc::bitwise_xor;
}
