//! Quantization converters, composed from existing graph ops: QuantizeLinear and
//! DequantizeLinear (per-tensor, per-axis and blocked parameters), DynamicQuantizeLinear,
//! ConvInteger and MatMulInteger (integer operands widened to `int32` and their zero points
//! subtracted, then an `int32` convolution or matrix product), QLinearConv and QLinearMatMul
//! (the same integer product, requantized through `float32`).
//!
//! Quantization is `saturate(round_half_even(x / scale) + zero_point)`, the division (not a
//! multiplication by the reciprocal, as onnxruntime and the ONNX reference do) in the common
//! floating-point type of `x` and `scale` or the `precision` attribute; dequantization is
//! `float32(int32(x) - int32(zero_point)) * scale`. Kiln quantizes to `int8`, `uint8`, `int16`,
//! `uint16` and the 4-/2-bit integers; to a float8 or float4 type quantization is ONNX's
//! `cast(x / scale + zero_point)` (no integer rounding; `saturate` as in Cast) and
//! dequantization `(float32(x) - float32(zero_point)) * scale`.

use std::collections::HashMap;

use kiln_ffi::dtype::code;
use kiln_ffi::DataType as GDataType;
use kiln_graph::ir::Expr;

use super::conv::conv_of;
use super::nn::matmul_of;
use super::{call, const_i64, dtype_of, graph_dtype, scalar, shape_of, CResult, ConvertFn, Ctx};
use super::{norm_axis, reshape, Msg};
use crate::{onnx_type_name, DataType, Node};

fn f32t() -> GDataType {
    GDataType::float(32)
}

fn i32t() -> GDataType {
    GDataType::int(32)
}

fn cast(x: Expr, d: GDataType) -> CResult<Expr> {
    if dtype_of(&x)? == d {
        return Ok(x);
    }
    let name = d.to_string();
    call("cast", vec![x], &[("dtype", name.as_str().into())])
}

fn binary(op: &str, a: Expr, b: Expr) -> CResult<Expr> {
    call(op, vec![a, b], &[])
}

/// Kiln's element type for the ONNX type code `onnx_code` given by attribute `attr`, or an
/// error naming the ONNX type Kiln lacks.
fn attr_dtype(onnx_code: i64, attr: &str) -> CResult<GDataType> {
    let c = i32::try_from(onnx_code).unwrap_or(-1);
    DataType::from_onnx(c).map(graph_dtype).ok_or_else(|| {
        Msg(format!(
            "attribute `{attr}` = {} is not supported: Kiln has no such element type",
            onnx_type_name(c)
        ))
    })
}

/// The range `[lo, hi]` of the quantized type `d` (`what` names the tensor for the error).
fn qrange(d: GDataType, what: &str) -> CResult<(f64, f64)> {
    let ok = matches!(d.code(), code::INT | code::UINT) && d.lanes() == 1 && d.bits() <= 16;
    if !ok {
        return Err(Msg(format!(
            "{what} of type {d} is not supported (Kiln quantizes to int8, uint8, int16, uint16)"
        )));
    }
    let bits = d.bits() as i32;
    Ok(if d.code() == code::UINT {
        (0.0, 2f64.powi(bits) - 1.0)
    } else {
        (-(2f64.powi(bits - 1)), 2f64.powi(bits - 1) - 1.0)
    })
}

/// `saturate(round(v) + zp)` cast to `out`: `v` is rounded in its own floating-point type,
/// the zero point `zp` (`float32`) added in `float32`, where every quantized value is exact.
fn saturate_round(v: Expr, zp: Option<Expr>, out: GDataType) -> CResult<Expr> {
    let (lo, hi) = qrange(out, "the quantized output")?;
    let mut q = cast(call("round", vec![v], &[])?, f32t())?;
    if let Some(zp) = zp {
        q = binary("add", q, zp)?;
    }
    let q = call(
        "clip",
        vec![q],
        &[("a_min", lo.into()), ("a_max", hi.into())],
    )?;
    cast(q, out)
}

/// `int32(x) - int32(zp)`: a quantized tensor as exact integers.
fn centered(x: Expr, zp: Option<Expr>) -> CResult<Expr> {
    let x = cast(x, i32t())?;
    match zp {
        Some(zp) => binary("subtract", x, cast(zp, i32t())?),
        None => Ok(x),
    }
}

/// The number of elements of a shape.
fn numel(s: &[i64]) -> i64 {
    s.iter().product()
}

/// How a quantization parameter (scale or zero point) maps onto the quantized tensor: per
/// tensor (one element), per axis (1-D along `axis`) or blocked (`block_size` consecutive
/// elements along `axis` share one value).
struct Layout {
    shape: Vec<i64>,
    axis: i64,
    block: i64,
}

impl Layout {
    fn of(node: &Node, shape: Vec<i64>) -> CResult<Layout> {
        let axis = node.attr_i("axis", 1)?;
        let block = node.attr_i("block_size", 0)?;
        if block < 0 {
            return Err(Msg(format!(
                "attribute `block_size` must be >= 0, got {block}"
            )));
        }
        Ok(Layout { shape, axis, block })
    }

    /// `p` (the input named `what`) placed so that it broadcasts against the tensor.
    fn place(&self, p: Expr, what: &str) -> CResult<Expr> {
        let ps = shape_of(&p)?;
        if self.block == 0 && numel(&ps) == 1 && ps.len() <= 1 {
            return reshape(p, vec![]);
        }
        // Only per-axis and blocked parameters read `axis`.
        let axis = norm_axis(self.axis, self.shape.len())
            .map_err(|m| Msg(format!("attribute `axis`: {}", m.0)))?;
        if self.block == 0 {
            if ps.len() != 1 || ps[0] != self.shape[axis] {
                return Err(Msg(format!(
                    "input `{what}` has shape {ps:?}: expected one value or one per element of axis {axis} of the {:?} input",
                    self.shape
                )));
            }
            let mut s = vec![1; self.shape.len()];
            s[axis] = ps[0];
            return reshape(p, s);
        }
        let d = self.shape[axis];
        let blocks = (d + self.block - 1) / self.block;
        let mut want = self.shape.clone();
        want[axis] = blocks;
        if ps != want {
            return Err(Msg(format!(
                "input `{what}` has shape {ps:?}: blocks of {} along axis {axis} of the {:?} input need shape {want:?}",
                self.block, self.shape
            )));
        }
        let idx: Vec<i64> = (0..d).map(|i| i / self.block).collect();
        call(
            "take",
            vec![p, const_i64(&idx)?],
            &[("axis", (axis as i64).into())],
        )
    }
}

/// The quantized output type: the zero point's, else attribute `output_dtype` (opset 21+),
/// else `uint8`.
fn quantized_type(ctx: &Ctx<'_>, node: &Node, zp: Option<&Expr>) -> CResult<GDataType> {
    let attr = match node.opt_i("output_dtype")? {
        Some(c) if c != 0 && ctx.opset >= 21 => Some(attr_dtype(c, "output_dtype")?),
        _ => None,
    };
    match (zp, attr) {
        (Some(z), Some(a)) if dtype_of(z)? != a => Err(Msg(format!(
            "attribute `output_dtype` = {a} disagrees with `y_zero_point` of type {}",
            dtype_of(z)?
        ))),
        (Some(z), _) => dtype_of(z),
        (None, Some(a)) => Ok(a),
        (None, None) => Ok(GDataType::uint(8)),
    }
}

fn is_floating(d: GDataType) -> bool {
    matches!(d.code(), code::FLOAT | code::BFLOAT)
}

/// The type QuantizeLinear divides `x` (of type `x`) by `y_scale` (of type `s`) in: attribute
/// `precision` (opset 23+), else the common floating-point type of the two as the ONNX
/// reference promotes them (`float16` for two `float16`s; `float32` when they differ in kind,
/// e.g. `float16` with `bfloat16`).
fn division_type(ctx: &Ctx<'_>, node: &Node, x: GDataType, s: GDataType) -> CResult<GDataType> {
    if ctx.opset >= 23 {
        if let Some(c) = node.opt_i("precision")?.filter(|&c| c != 0) {
            let d = attr_dtype(c, "precision")?;
            if !is_floating(d) {
                return Err(Msg(format!(
                    "attribute `precision` = {d} is not a floating-point type"
                )));
            }
            return Ok(d);
        }
    }
    let floats: Vec<GDataType> = [x, s].into_iter().filter(|&d| is_floating(d)).collect();
    Ok(match floats.as_slice() {
        [d] => *d,
        [a, b] if a == b => *a,
        [a, b] if a.code() == code::FLOAT && a.bits() >= b.bits().max(32) => *a,
        [a, b] if b.code() == code::FLOAT && b.bits() >= a.bits().max(32) => *b,
        _ => f32t(),
    })
}

/// Whether `d` is a float8 or float4 type (quantized without integer rounding).
fn is_narrow_float(d: GDataType) -> bool {
    kiln_ffi::narrow::NarrowFloat::of(d).is_some()
}

fn quantize_linear(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let zp = ctx.opt_input(node, 2)?;
    let out = quantized_type(ctx, node, zp.as_ref())?;
    if !is_narrow_float(out) {
        qrange(out, "the output `y`")?;
    }
    let layout = Layout::of(node, shape_of(&x)?)?;
    let scale = layout.place(ctx.input(node, 1)?, "y_scale")?;
    let div = division_type(ctx, node, dtype_of(&x)?, dtype_of(&scale)?)?;
    let zp = zp
        .map(|z| cast(layout.place(z, "y_zero_point")?, f32t()))
        .transpose()?;
    let v = binary("divide", cast(x, div)?, cast(scale, div)?)?;
    if is_narrow_float(out) {
        let mut v = cast(v, f32t())?;
        if let Some(zp) = zp {
            v = binary("add", v, zp)?;
        }
        let saturate = node.attr_i("saturate", 1)? != 0;
        let name = out.to_string();
        let y = call(
            "cast",
            vec![v],
            &[
                ("dtype", name.as_str().into()),
                ("saturate", saturate.into()),
            ],
        )?;
        return Ok(vec![y]);
    }
    Ok(vec![saturate_round(v, zp, out)?])
}

fn dequantize_linear(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xd = dtype_of(&x)?;
    if xd != i32t() && !is_narrow_float(xd) {
        qrange(xd, "input `x`")?;
    }
    let scale = ctx.input(node, 1)?;
    let out = match node.opt_i("output_dtype")? {
        Some(c) if c != 0 && ctx.opset >= 23 => attr_dtype(c, "output_dtype")?,
        _ => dtype_of(&scale)?,
    };
    if !is_floating(out) {
        return Err(Msg(format!(
            "the output type {out} (attribute `output_dtype` or `x_scale`'s type) is not a floating-point type"
        )));
    }
    let layout = Layout::of(node, shape_of(&x)?)?;
    let scale = cast(layout.place(scale, "x_scale")?, f32t())?;
    let zp = ctx
        .opt_input(node, 2)?
        .map(|z| layout.place(z, "x_zero_point"))
        .transpose()?;
    let v = if is_narrow_float(xd) {
        let x = cast(x, f32t())?;
        match zp {
            Some(zp) => binary("subtract", x, cast(zp, f32t())?)?,
            None => x,
        }
    } else {
        cast(centered(x, zp)?, f32t())?
    };
    let y = binary("multiply", v, scale)?;
    Ok(vec![cast(y, out)?])
}

/// DynamicQuantizeLinear to `uint8`: the range `[min(x, 0), max(x, 0)]` maps onto
/// `[0, 255]` (a scale of 1 when that range is empty, as in onnxruntime).
fn dynamic_quantize_linear(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = cast(ctx.input(node, 0)?, f32t())?;
    let zero = || scalar(0.0, f32t());
    let lo = binary("minimum", call("min", vec![x.clone()], &[])?, zero()?)?;
    let hi = binary("maximum", call("max", vec![x.clone()], &[])?, zero()?)?;
    let range = binary("subtract", hi.clone(), lo.clone())?;
    let scale = call(
        "where",
        vec![
            binary("equal", hi, lo.clone())?,
            scalar(1.0, f32t())?,
            binary("divide", range, scalar(255.0, f32t())?)?,
        ],
        &[],
    )?;
    let u8t = GDataType::uint(8);
    let zp_f = call(
        "clip",
        vec![call(
            "round",
            vec![binary(
                "subtract",
                zero()?,
                binary("divide", lo, scale.clone())?,
            )?],
            &[],
        )?],
        &[("a_min", 0.0.into()), ("a_max", 255.0.into())],
    )?;
    let y = saturate_round(binary("divide", x, scale.clone())?, Some(zp_f.clone()), u8t)?;
    Ok(vec![y, scale, cast(zp_f, u8t)?])
}

/// A parameter (scale or zero point) of a matrix or convolution operand, shaped to broadcast
/// against it: one value, or a 1-D tensor of one value per entry of `shape` (e.g. `[M, 1]` for
/// the rows of a matrix, `[O, 1, 1, 1]` for the filters of a convolution weight).
fn param(p: Expr, what: &str, shape: &[i64]) -> CResult<Expr> {
    let ps = shape_of(&p)?;
    let n = numel(&ps);
    if n == 1 {
        return reshape(p, vec![]);
    }
    if ps.len() == 1 && n == numel(shape) {
        return reshape(p, shape.to_vec());
    }
    let per = if numel(shape) > 1 {
        format!(" or {} (one per entry of shape {shape:?})", numel(shape))
    } else {
        String::new()
    };
    Err(Msg(format!(
        "input `{what}` has shape {ps:?}: expected one value{per}"
    )))
}

/// An optional zero point placed by [`param`].
fn zero_point(zp: Option<Expr>, what: &str, shape: &[i64]) -> CResult<Option<Expr>> {
    zp.map(|z| param(z, what, shape)).transpose()
}

/// The shape that puts a per-row parameter of matrix `a` on its rows: `[M, 1]`.
fn rows_of(a: &Expr) -> CResult<Vec<i64>> {
    let s = shape_of(a)?;
    Ok(if s.len() >= 2 {
        vec![s[s.len() - 2], 1]
    } else {
        vec![1]
    })
}

/// The shape that puts a per-filter parameter of convolution weight `w` on its first axis.
fn filters_of(w: &Expr) -> CResult<Vec<i64>> {
    let s = shape_of(w)?;
    if s.len() < 3 {
        return Err(Msg(format!(
            "input `w` has shape {s:?}: a convolution weight has rank 3 or more"
        )));
    }
    let mut v = vec![1; s.len()];
    v[0] = s[0];
    Ok(v)
}

/// The shape that puts a per-filter parameter of weight `w` on the channel axis of the
/// convolution's output (`[O, 1, ...]`, one axis fewer than `w`, broadcasting over the batch).
fn out_channels(w: &Expr) -> CResult<Vec<i64>> {
    let mut v = filters_of(w)?;
    v.remove(1);
    Ok(v)
}

/// The `int32` convolution of the centered `x` and `w`: inputs `x`, `w` and their zero points
/// at positions `xi`, `xzi`, `wi`, `wzi` of `node`.
fn integer_conv(ctx: &Ctx<'_>, node: &Node, idx: [usize; 4]) -> CResult<Expr> {
    let [xi, xzi, wi, wzi] = idx;
    let (x, w) = (ctx.input(node, xi)?, ctx.input(node, wi)?);
    let xz = zero_point(ctx.opt_input(node, xzi)?, "x_zero_point", &[1])?;
    let wz = zero_point(ctx.opt_input(node, wzi)?, "w_zero_point", &filters_of(&w)?)?;
    conv_of(node, centered(x, xz)?, centered(w, wz)?)
}

/// The `int32` matrix product of the centered `a` and `b`: inputs `a`, its zero point, `b` and
/// its zero point at positions `idx` of `node`. `a`'s zero point is one value or one per row,
/// `b`'s one value or one per column (or any shape broadcasting against `b`).
fn integer_matmul(ctx: &Ctx<'_>, node: &Node, idx: [usize; 4]) -> CResult<Expr> {
    let [ai, azi, bi, bzi] = idx;
    let (a, b) = (ctx.input(node, ai)?, ctx.input(node, bi)?);
    let az = zero_point(ctx.opt_input(node, azi)?, "a_zero_point", &rows_of(&a)?)?;
    let bz = match ctx.opt_input(node, bzi)? {
        Some(z) if numel(&shape_of(&z)?) == 1 => Some(reshape(z, vec![])?),
        z => z,
    };
    matmul_of(centered(a, az)?, centered(b, bz)?)
}

fn conv_integer(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    Ok(vec![integer_conv(ctx, node, [0, 2, 1, 3])?])
}

fn matmul_integer(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    Ok(vec![integer_matmul(ctx, node, [0, 2, 1, 3])?])
}

/// A scale (input `i`) as `float32`, one value or reshaped to `shape` when it has one value per
/// element of it.
fn scale_input(ctx: &Ctx<'_>, node: &Node, i: usize, what: &str, shape: &[i64]) -> CResult<Expr> {
    cast(param(ctx.input(node, i)?, what, shape)?, f32t())
}

/// `acc` (`int32`) requantized: `saturate(round(acc * a_scale * b_scale / y_scale) + y_zp)`,
/// the multiplier computed as onnxruntime does, `(a_scale * b_scale) / y_scale` in `float32`.
fn requantize(
    ctx: &Ctx<'_>,
    node: &Node,
    acc: Expr,
    a_scale: Expr,
    b_scale: Expr,
) -> CResult<Expr> {
    let y_scale = scale_input(ctx, node, 6, "y_scale", &[1])?;
    let zp = ctx.input(node, 7)?;
    let out = dtype_of(&zp)?;
    let zp = cast(param(zp, "y_zero_point", &[1])?, f32t())?;
    let m = binary("divide", binary("multiply", a_scale, b_scale)?, y_scale)?;
    let v = binary("multiply", cast(acc, f32t())?, m)?;
    saturate_round(v, Some(zp), out)
}

fn qlinear_conv(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let w = ctx.input(node, 3)?;
    let mut acc = integer_conv(ctx, node, [0, 2, 3, 5])?;
    if let Some(b) = ctx.opt_input(node, 8)? {
        acc = call(
            "nn.bias_add",
            vec![acc, cast(b, i32t())?],
            &[("axis", 1i64.into())],
        )?;
    }
    let xs = scale_input(ctx, node, 1, "x_scale", &[1])?;
    let ws = scale_input(ctx, node, 4, "w_scale", &out_channels(&w)?)?;
    Ok(vec![requantize(ctx, node, acc, xs, ws)?])
}

fn qlinear_matmul(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let (a, b) = (ctx.input(node, 0)?, ctx.input(node, 3)?);
    let acc = integer_matmul(ctx, node, [0, 2, 3, 5])?;
    let a_scale = scale_input(ctx, node, 1, "a_scale", &rows_of(&a)?)?;
    let bs = shape_of(&b)?;
    let n = if bs.len() >= 2 { bs[bs.len() - 1] } else { 1 };
    let b_scale = scale_input(ctx, node, 4, "b_scale", &[n])?;
    Ok(vec![requantize(ctx, node, acc, a_scale, b_scale)?])
}

/// Registers this family's converters.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("QuantizeLinear", quantize_linear);
    t.insert("DequantizeLinear", dequantize_linear);
    t.insert("DynamicQuantizeLinear", dynamic_quantize_linear);
    t.insert("ConvInteger", conv_integer);
    t.insert("MatMulInteger", matmul_integer);
    t.insert("QLinearConv", qlinear_conv);
    t.insert("QLinearMatMul", qlinear_matmul);
}
