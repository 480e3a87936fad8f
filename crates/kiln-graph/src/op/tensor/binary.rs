//! Binary operators with numpy broadcasting (pattern `Broadcast`): arithmetic (add, subtract,
//! multiply, divide, power, maximum, minimum, floor_divide, floor_mod), comparisons (equal,
//! not_equal, less, less_equal, greater, greater_equal: bool results) and logic (logical_and,
//! logical_or, logical_xor on bools). Each has a reference evaluator.

use crate::ir::Type;
use crate::op::{broadcast_shapes, eval, input, one, OpDef, OpPattern, RelCtx};
use kiln_ffi::{DataType, Result};
use kiln_tir::DataTypeExt;
use kiln_topi::broadcast as bc;

fn broadcast_rel(ctx: &RelCtx<'_>) -> Result<(Vec<i64>, DataType)> {
    let (a, _) = ctx.tensor(0)?;
    let (b, _) = ctx.tensor(1)?;
    let d = ctx.same_dtype(0, 1)?;
    let shape = broadcast_shapes(a, b).map_err(|m| ctx.err(m))?;
    Ok((shape, d))
}

fn arith_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = broadcast_rel(ctx)?;
    Ok(Type::tensor(&s, d))
}

fn cmp_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, _) = broadcast_rel(ctx)?;
    Ok(Type::tensor(&s, DataType::bool()))
}

fn logic_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = broadcast_rel(ctx)?;
    if !d.is_bool() {
        return Err(ctx.err(format!("arguments must be bool, got {d}")));
    }
    Ok(Type::tensor(&s, d))
}

fn b(x: bool) -> f64 {
    if x {
        1.0
    } else {
        0.0
    }
}

macro_rules! binary_ops {
    ($($name:literal, $rel:ident => $f:expr, $topi:path),* $(,)?) => {
        /// The definitions of this family.
        pub(crate) fn defs(v: &mut Vec<OpDef>) {
            $(
                v.push(
                    OpDef::new($name, &["lhs", "rhs"], OpPattern::Broadcast, $rel)
                        .eval(|a, _, ty| {
                            let f: fn(f64, f64) -> f64 = $f;
                            eval::broadcast(a, ty, |x| f(x[0], x[1]))
                        })
                        .compute(|i, _, _| one($topi(input($name, i, 0)?, input($name, i, 1)?))),
                );
            )*
        }
    };
}

binary_ops! {
    "add", arith_rel => |x, y| x + y, bc::add,
    "subtract", arith_rel => |x, y| x - y, bc::subtract,
    "multiply", arith_rel => |x, y| x * y, bc::multiply,
    "divide", arith_rel => |x, y| x / y, bc::divide,
    "power", arith_rel => f64::powf, bc::power,
    "maximum", arith_rel => f64::max, bc::maximum,
    "minimum", arith_rel => f64::min, bc::minimum,
    "floor_divide", arith_rel => |x, y| (x / y).floor(), bc::floor_divide,
    "floor_mod", arith_rel => |x, y| x - (x / y).floor() * y, bc::floor_mod,
    "trunc_mod", arith_rel => |x, y| x % y, bc::trunc_mod,
    "equal", cmp_rel => |x, y| b(x == y), bc::equal,
    "not_equal", cmp_rel => |x, y| b(x != y), bc::not_equal,
    "less", cmp_rel => |x, y| b(x < y), bc::less,
    "less_equal", cmp_rel => |x, y| b(x <= y), bc::less_equal,
    "greater", cmp_rel => |x, y| b(x > y), bc::greater,
    "greater_equal", cmp_rel => |x, y| b(x >= y), bc::greater_equal,
    "logical_and", logic_rel => |x, y| b(x != 0.0 && y != 0.0), bc::logical_and,
    "logical_or", logic_rel => |x, y| b(x != 0.0 || y != 0.0), bc::logical_or,
    "logical_xor", logic_rel => |x, y| b((x != 0.0) != (y != 0.0)), bc::logical_xor,
}
