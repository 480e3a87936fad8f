//! Elementwise converters: activations, unary math, binary arithmetic and comparisons with
//! broadcasting, Clip (attributes before opset 11, inputs from it on), Cast, Where, Identity,
//! and activations composed from those (HardSigmoid, LeakyRelu, PRelu, Elu, Selu, Softplus).

use std::collections::HashMap;

use kiln_graph::ir::Expr;

use super::{call, dtype_of, graph_dtype, scalar, shape_of, CResult, ConvertFn, Ctx, Msg};
use crate::{DataType, Node};

/// ONNX unary op -> Kiln op.
const UNARY: &[(&str, &str)] = &[
    ("Relu", "nn.relu"),
    ("Sigmoid", "sigmoid"),
    ("Tanh", "tanh"),
    ("Sin", "sin"),
    ("Cos", "cos"),
    ("Tan", "tan"),
    ("Asin", "asin"),
    ("Acos", "acos"),
    ("Atan", "atan"),
    ("Sinh", "sinh"),
    ("Cosh", "cosh"),
    ("Asinh", "asinh"),
    ("Acosh", "acosh"),
    ("Atanh", "atanh"),
    ("BitwiseNot", "bitwise_not"),
    ("Erf", "erf"),
    ("Sqrt", "sqrt"),
    ("Reciprocal", "reciprocal"),
    ("Exp", "exp"),
    ("Log", "log"),
    ("Abs", "abs"),
    ("Neg", "negative"),
    ("Floor", "floor"),
    ("Ceil", "ceil"),
    ("Round", "round"),
    ("Not", "logical_not"),
    ("HardSwish", "hard_swish"),
];

/// ONNX binary op -> Kiln op.
const BINARY: &[(&str, &str)] = &[
    ("Add", "add"),
    ("Sub", "subtract"),
    ("Mul", "multiply"),
    ("Div", "divide"),
    ("Pow", "power"),
    ("Equal", "equal"),
    ("Less", "less"),
    ("LessOrEqual", "less_equal"),
    ("Greater", "greater"),
    ("GreaterOrEqual", "greater_equal"),
    ("And", "logical_and"),
    ("Or", "logical_or"),
    ("Xor", "logical_xor"),
    ("BitwiseAnd", "bitwise_and"),
    ("BitwiseOr", "bitwise_or"),
    ("BitwiseXor", "bitwise_xor"),
];

fn kiln_op(table: &[(&str, &'static str)], op: &str) -> &'static str {
    table
        .iter()
        .find(|(o, _)| *o == op)
        .map(|(_, k)| *k)
        .expect("registered from this table")
}

fn unary(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    Ok(vec![call(kiln_op(UNARY, &node.op_type), vec![x], &[])?])
}

/// `b` laid out for numpy broadcasting against `a` under the broadcasting of opsets before 7:
/// with `broadcast=1`, `b`'s shape is a run of `a`'s starting at `axis` (default: its suffix);
/// without it the shapes must be equal.
fn legacy_broadcast(node: &Node, a: &Expr, b: Expr) -> CResult<Expr> {
    let (sa, sb) = (shape_of(a)?, shape_of(&b)?);
    if node.attr_i("broadcast", 0)? == 0 {
        if sa != sb {
            return Err(Msg(format!(
                "inputs of shapes {sa:?} and {sb:?} need broadcast=1 before opset 7"
            )));
        }
        return Ok(b);
    }
    let axis = node.attr_i("axis", sa.len() as i64 - sb.len() as i64)?;
    if axis < 0 || axis as usize + sb.len() > sa.len() {
        return Err(Msg(format!(
            "broadcast axis {axis} does not place a {sb:?} input inside {sa:?}"
        )));
    }
    let mut shape = vec![1i64; axis as usize];
    shape.extend(&sb);
    shape.resize(sa.len(), 1);
    call("reshape", vec![b], &[("newshape", shape.into())])
}

fn binary(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let a = ctx.input(node, 0)?;
    let mut b = ctx.input(node, 1)?;
    if ctx.opset < 7 {
        b = legacy_broadcast(node, &a, b)?;
    }
    let base = dtype_of(&a)?;
    if node.op_type == "Pow"
        && matches!(
            base.code(),
            kiln_ffi::dtype::code::INT | kiln_ffi::dtype::code::UINT
        )
    {
        // Integer powers through float64 (exact while the result fits in 53 bits), in the
        // base's type as ONNX prescribes.
        let f64s = |e: Expr| call("cast", vec![e], &[("dtype", "float64".into())]);
        let p = call("power", vec![f64s(a)?, f64s(b)?], &[])?;
        let d = base.to_string();
        return Ok(vec![call(
            "cast",
            vec![p],
            &[("dtype", d.as_str().into())],
        )?]);
    }
    if node.op_type == "Pow" && dtype_of(&a)? != dtype_of(&b)? {
        let d = dtype_of(&a)?.to_string();
        b = call("cast", vec![b], &[("dtype", d.as_str().into())])?;
    }
    Ok(vec![call(kiln_op(BINARY, &node.op_type), vec![a, b], &[])?])
}

/// Max, Min, Sum: variadic, folded pairwise.
fn variadic(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let op = match node.op_type.as_str() {
        "Max" => "maximum",
        "Min" => "minimum",
        _ => "add",
    };
    let mut acc = ctx.input(node, 0)?;
    for i in 1..node.inputs.len() {
        let x = ctx.input(node, i)?;
        acc = call(op, vec![acc, x], &[])?;
    }
    Ok(vec![acc])
}

fn identity(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    Ok(vec![ctx.input(node, 0)?])
}

fn clip(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    if ctx.opset < 11 {
        let lo = node.attr_f("min", f32::NEG_INFINITY)? as f64;
        let hi = node.attr_f("max", f32::INFINITY)? as f64;
        return Ok(vec![call(
            "clip",
            vec![x],
            &[("a_min", lo.into()), ("a_max", hi.into())],
        )?]);
    }
    // A constant scalar bound, or a runtime one.
    let bound = |i: usize| -> CResult<Option<Result<f64, Expr>>> {
        if node.input(i).is_none() {
            return Ok(None);
        }
        match ctx.const_floats(node, i) {
            Ok(Some(v)) if v.len() == 1 => Ok(Some(Ok(v[0]))),
            _ => Ok(Some(Err(ctx.input(node, i)?))),
        }
    };
    let (lo, hi) = (bound(1)?, bound(2)?);
    if matches!(lo, Some(Err(_))) || matches!(hi, Some(Err(_))) {
        let d = dtype_of(&x)?;
        let mut y = x;
        for (b, op) in [(lo, "maximum"), (hi, "minimum")] {
            if let Some(b) = b {
                let e = match b {
                    Ok(v) => scalar(v, d)?,
                    Err(e) => e,
                };
                y = call(op, vec![y, e], &[])?;
            }
        }
        return Ok(vec![y]);
    }
    let lo = lo.and_then(Result::ok).unwrap_or(f64::NEG_INFINITY);
    let hi = hi.and_then(Result::ok).unwrap_or(f64::INFINITY);
    Ok(vec![call(
        "clip",
        vec![x],
        &[("a_min", lo.into()), ("a_max", hi.into())],
    )?])
}

fn cast(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let to = node.attr_i("to", 0)?;
    let d = i32::try_from(to)
        .ok()
        .and_then(DataType::from_onnx)
        .ok_or_else(|| {
            Msg(format!(
                "Cast: attribute 'to' is {}, which Kiln does not support",
                crate::tensor::onnx_type_name(to.clamp(i32::MIN as i64, i32::MAX as i64) as i32)
            ))
        })?;
    cast_to(node, x, &graph_dtype(d).to_string())
}

/// CastLike: a Cast to the second input's element type.
fn cast_like(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let d = dtype_of(&ctx.input(node, 1)?)?.to_string();
    cast_to(node, x, &d)
}

/// The cast of Cast and CastLike, with their `saturate` and `round_mode` attributes (which
/// matter for the narrow float targets).
fn cast_to(node: &Node, x: Expr, dtype: &str) -> CResult<Vec<Expr>> {
    let saturate = node.attr_i("saturate", 1)? != 0;
    let round = node.attr_s("round_mode", "up")?;
    if kiln_ffi::narrow::E8m0Round::parse(&round).is_none() {
        return Err(Msg(format!(
            "attribute 'round_mode' must be up, down or nearest, got '{round}'"
        )));
    }
    Ok(vec![call(
        "cast",
        vec![x],
        &[
            ("dtype", dtype.into()),
            ("saturate", saturate.into()),
            ("round_mode", round.as_str().into()),
        ],
    )?])
}

/// Mod: numpy's remainder (the divisor's sign) with `fmod=0`, C's `fmod` (the dividend's sign)
/// with `fmod=1`, which ONNX requires for floats.
fn modulo(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let (a, b) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let fmod = node.attr_i("fmod", 0)? != 0;
    let code = dtype_of(&a)?.code();
    let float = code == kiln_ffi::dtype::code::FLOAT || code == kiln_ffi::dtype::code::BFLOAT;
    if !fmod && float {
        return Err(Msg("Mod of floats needs fmod=1 (ONNX)".into()));
    }
    let op = if fmod { "trunc_mod" } else { "floor_mod" };
    Ok(vec![call(op, vec![a, b], &[])?])
}

fn where_(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let (c, a, b) = (
        ctx.input(node, 0)?,
        ctx.input(node, 1)?,
        ctx.input(node, 2)?,
    );
    Ok(vec![call("where", vec![c, a, b], &[])?])
}

/// `alpha * x + beta` (skipping the identity parts), in `x`'s dtype.
fn affine(x: Expr, alpha: f64, beta: f64) -> CResult<Expr> {
    let d = dtype_of(&x)?;
    let mut y = x;
    if alpha != 1.0 {
        y = call("multiply", vec![y, scalar(alpha, d)?], &[])?;
    }
    if beta != 0.0 {
        y = call("add", vec![y, scalar(beta, d)?], &[])?;
    }
    Ok(y)
}

fn hard_sigmoid(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let alpha = node.attr_f("alpha", 0.2)? as f64;
    let beta = node.attr_f("beta", 0.5)? as f64;
    let y = affine(x, alpha, beta)?;
    Ok(vec![call(
        "clip",
        vec![y],
        &[("a_min", 0.0.into()), ("a_max", 1.0.into())],
    )?])
}

/// Swish (opset 24): `x * sigmoid(alpha * x)`.
fn swish(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let alpha = node.attr_f("alpha", 1.0)? as f64;
    let gate = call("sigmoid", vec![affine(x.clone(), alpha, 0.0)?], &[])?;
    Ok(vec![call("multiply", vec![x, gate], &[])?])
}

fn leaky_relu(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let alpha = node.attr_f("alpha", 0.01)? as f64;
    let d = dtype_of(&x)?;
    let pos = call("greater", vec![x.clone(), scalar(0.0, d)?], &[])?;
    let neg = affine(x.clone(), alpha, 0.0)?;
    Ok(vec![call("where", vec![pos, x, neg], &[])?])
}

fn gelu(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    match node.attr_s("approximate", "none")?.as_str() {
        "none" => Ok(vec![call("nn.gelu", vec![x], &[])?]),
        "tanh" => {
            // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            let x3 = call(
                "multiply",
                vec![
                    call("multiply", vec![x.clone(), x.clone()], &[])?,
                    x.clone(),
                ],
                &[],
            )?;
            let inner = call("add", vec![x.clone(), affine(x3, 0.044715, 0.0)?], &[])?;
            let k = (2.0 / std::f64::consts::PI).sqrt();
            let t = call("tanh", vec![affine(inner, k, 0.0)?], &[])?;
            let half = affine(t, 0.5, 0.5)?;
            Ok(vec![call("multiply", vec![x, half], &[])?])
        }
        other => Err(Msg(format!(
            "Gelu with approximate=\"{other}\" is not an ONNX mode (none or tanh)"
        ))),
    }
}

/// Softsign: `x / (1 + |x|)`.
fn softsign(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let den = affine(call("abs", vec![x.clone()], &[])?, 1.0, 1.0)?;
    Ok(vec![call("divide", vec![x, den], &[])?])
}

/// Celu: `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.
fn celu(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let alpha = node.attr_f("alpha", 1.0)? as f64;
    let d = dtype_of(&x)?;
    let zero = scalar(0.0, d)?;
    let e = call("exp", vec![affine(x.clone(), 1.0 / alpha, 0.0)?], &[])?;
    let neg = call(
        "minimum",
        vec![affine(e, alpha, -alpha)?, zero.clone()],
        &[],
    )?;
    let pos = call("maximum", vec![x, zero], &[])?;
    Ok(vec![call("add", vec![pos, neg], &[])?])
}

/// ThresholdedRelu: `x > alpha ? x : 0`.
fn thresholded_relu(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let alpha = node.attr_f("alpha", 1.0)? as f64;
    let d = dtype_of(&x)?;
    let keep = call("greater", vec![x.clone(), scalar(alpha, d)?], &[])?;
    Ok(vec![call("where", vec![keep, x, scalar(0.0, d)?], &[])?])
}

/// Shrink: `x < -lambd ? x + bias : (x > lambd ? x - bias : 0)`.
fn shrink(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let lambd = node.attr_f("lambd", 0.5)? as f64;
    let bias = node.attr_f("bias", 0.0)? as f64;
    let d = dtype_of(&x)?;
    let low = call("less", vec![x.clone(), scalar(-lambd, d)?], &[])?;
    let high = call("greater", vec![x.clone(), scalar(lambd, d)?], &[])?;
    let up = call("add", vec![x.clone(), scalar(bias, d)?], &[])?;
    let down = call("subtract", vec![x, scalar(bias, d)?], &[])?;
    let inner = call("where", vec![high, down, scalar(0.0, d)?], &[])?;
    Ok(vec![call("where", vec![low, up, inner], &[])?])
}

/// Mish: `x * tanh(log(1 + exp(x)))`.
fn mish(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let sp = call(
        "log",
        vec![affine(call("exp", vec![x.clone()], &[])?, 1.0, 1.0)?],
        &[],
    )?;
    Ok(vec![call(
        "multiply",
        vec![x, call("tanh", vec![sp], &[])?],
        &[],
    )?])
}

/// Sign: -1, 0 or 1.
fn sign(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let d = dtype_of(&x)?;
    let pos = call("greater", vec![x.clone(), scalar(0.0, d)?], &[])?;
    let neg = call("less", vec![x, scalar(0.0, d)?], &[])?;
    let inner = call("where", vec![neg, scalar(-1.0, d)?, scalar(0.0, d)?], &[])?;
    Ok(vec![call("where", vec![pos, scalar(1.0, d)?, inner], &[])?])
}

/// IsNaN: `x != x`.
fn is_nan(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    Ok(vec![call("not_equal", vec![x.clone(), x], &[])?])
}

/// IsInf: `x == +inf` (detect_positive) or `x == -inf` (detect_negative).
fn is_inf(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let d = dtype_of(&x)?;
    let pos = node.attr_i("detect_positive", 1)? != 0;
    let neg = node.attr_i("detect_negative", 1)? != 0;
    let eq = |v: f64| call("equal", vec![x.clone(), scalar(v, d)?], &[]);
    Ok(vec![match (pos, neg) {
        (true, true) => call(
            "logical_or",
            vec![eq(f64::INFINITY)?, eq(f64::NEG_INFINITY)?],
            &[],
        )?,
        (true, false) => eq(f64::INFINITY)?,
        (false, true) => eq(f64::NEG_INFINITY)?,
        // Nothing detected: all false (`x < x` is false for every value, NaN included).
        (false, false) => call("less", vec![x.clone(), x], &[])?,
    }])
}

fn prelu(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let mut slope = ctx.input(node, 1)?;
    let (xs, ss) = (shape_of(&x)?, shape_of(&slope)?);
    if ctx.opset < 7 && ss.len() == 1 && ss[0] > 1 && xs.len() > 2 && xs[1] == ss[0] {
        // Before opset 7 a slope of one value per channel applies along axis 1.
        let mut shape = vec![ss[0]];
        shape.resize(xs.len() - 1, 1);
        slope = call("reshape", vec![slope], &[("newshape", shape.into())])?;
    }
    let d = dtype_of(&x)?;
    let pos = call("greater", vec![x.clone(), scalar(0.0, d)?], &[])?;
    let neg = call("multiply", vec![x.clone(), slope], &[])?;
    Ok(vec![call("where", vec![pos, x, neg], &[])?])
}

/// Elu and Selu: `gamma * (x > 0 ? x : alpha * (exp(x) - 1))`.
fn elu(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let selu = node.op_type == "Selu";
    let alpha = node.attr_f("alpha", if selu { 1.673_263_2 } else { 1.0 })? as f64;
    let gamma = if selu {
        node.attr_f("gamma", 1.050_701)? as f64
    } else {
        1.0
    };
    let d = dtype_of(&x)?;
    let pos = call("greater", vec![x.clone(), scalar(0.0, d)?], &[])?;
    let e = call("exp", vec![x.clone()], &[])?;
    let neg = affine(e, alpha, -alpha)?;
    let y = call("where", vec![pos, x, neg], &[])?;
    Ok(vec![affine(y, gamma, 0.0)?])
}

/// Softplus: `log(exp(x) + 1)`.
fn softplus(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let e = call("exp", vec![x], &[])?;
    let e = affine(e, 1.0, 1.0)?;
    Ok(vec![call("log", vec![e], &[])?])
}

/// Mean of any number of inputs.
fn mean(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let sum = variadic(ctx, node)?.remove(0);
    let n = node.inputs.len() as f64;
    Ok(vec![affine(sum, 1.0 / n, 0.0)?])
}

/// Registers this file's converters.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    for (op, _) in UNARY {
        t.insert(op, unary);
    }
    for (op, _) in BINARY {
        t.insert(op, binary);
    }
    for op in ["Max", "Min", "Sum"] {
        t.insert(op, variadic);
    }
    t.insert("Identity", identity);
    // A tensor where an optional is allowed is the optional's value (Kiln has no empty
    // optionals: graph inputs and values are always present).
    t.insert("OptionalGetElement", identity);
    t.insert("Clip", clip);
    t.insert("Cast", cast);
    t.insert("CastLike", cast_like);
    t.insert("Mod", modulo);
    t.insert("Where", where_);
    t.insert("HardSigmoid", hard_sigmoid);
    t.insert("Swish", swish);
    t.insert("LeakyRelu", leaky_relu);
    t.insert("Gelu", gelu);
    t.insert("PRelu", prelu);
    t.insert("Elu", elu);
    t.insert("Selu", elu);
    t.insert("Softplus", softplus);
    t.insert("Softsign", softsign);
    t.insert("Celu", celu);
    t.insert("ThresholdedRelu", thresholded_relu);
    t.insert("Shrink", shrink);
    t.insert("Mish", mish);
    t.insert("Sign", sign);
    t.insert("IsNaN", is_nan);
    t.insert("IsInf", is_inf);
    t.insert("Mean", mean);
}
