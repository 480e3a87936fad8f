//! Operators whose output is made from shapes and attributes alone, materialized at compile
//! time: EyeLike and the window functions (HannWindow, HammingWindow, BlackmanWindow; a
//! window of a size known only at run time is a kernel instead).

use std::collections::HashMap;
use std::f64::consts::PI;

use kiln_graph::ir::Expr;
use kiln_runtime::vm::shape_expr::op;

use super::shaped::{ShapedKernel, Shapes};
use super::{constant, dtype_of, graph_dtype, shape_of, CResult, ConvertFn, Ctx, Msg};
use crate::tensor::DataType;
use crate::Node;

/// The most elements a generated constant may have (they are written into the library).
pub(super) const MAX_ELEMENTS: i64 = 1 << 26;

/// The element type an attribute names (`dtype`, `output_datatype`), else `default`.
pub(super) fn attr_dtype(
    node: &Node,
    name: &str,
    default: kiln_ffi::DataType,
) -> CResult<kiln_ffi::DataType> {
    let code = node.attr_i(name, 0)?;
    if code == 0 {
        return Ok(default);
    }
    i32::try_from(code)
        .ok()
        .and_then(DataType::from_onnx)
        .map(graph_dtype)
        .ok_or_else(|| {
            Msg(format!(
                "attribute '{name}' is {}, which Kiln does not support",
                crate::tensor::onnx_type_name(code.clamp(i32::MIN as i64, i32::MAX as i64) as i32)
            ))
        })
}

/// EyeLike: a 2-D tensor of the input's shape with ones on the diagonal `k` (0: the main one,
/// positive: above it) and zeros elsewhere, of type `dtype` (default: the input's).
fn eye_like(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let s = shape_of(&x)?;
    if s.len() != 2 {
        return Err(Msg(format!("expects a 2-D input, got shape {s:?}")));
    }
    let (rows, cols) = (s[0], s[1]);
    if rows.checked_mul(cols).is_none_or(|n| n > MAX_ELEMENTS) {
        return Err(Msg(format!(
            "output {s:?} has more than {MAX_ELEMENTS} elements, more than Kiln materializes"
        )));
    }
    let k = node.attr_i("k", 0)?;
    let d = attr_dtype(node, "dtype", dtype_of(&x)?)?;
    let mut v = vec![0.0; (rows * cols) as usize];
    for r in 0..rows {
        if let Some(c) = r.checked_add(k).filter(|c| (0..cols).contains(c)) {
            v[(r * cols + c) as usize] = 1.0;
        }
    }
    Ok(vec![constant(&v, &s, d)?])
}

/// The generalized cosine window `sum_j a_j cos(2 pi j n / N)` of `size` points, `N` being
/// `size` for a periodic window and `size - 1` for a symmetric one.
fn cosine_window(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let coefficients = window_coefficients(node)?;
    let size = ctx
        .const_ints(node, 0)?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| Msg::from("input #0 (size) must be a constant scalar"))?;
    if !(0..=MAX_ELEMENTS).contains(&size) {
        return Err(Msg(format!(
            "size {size} must be between 0 and {MAX_ELEMENTS}"
        )));
    }
    let periodic = node.attr_i("periodic", 1)? != 0;
    let d = attr_dtype(node, "output_datatype", kiln_ffi::DataType::float(32))?;
    let n_1 = if periodic { size } else { size - 1 } as f64;
    let v: Vec<f64> = (0..size)
        .map(|n| {
            coefficients
                .iter()
                .enumerate()
                .map(|(j, a)| {
                    let phase = 2.0 * PI * j as f64 * n as f64 / n_1;
                    // A one-point symmetric window divides by 0: its only value is the sum.
                    a * if n_1 == 0.0 { 1.0 } else { phase.cos() }
                })
                .sum()
        })
        .collect();
    Ok(vec![constant(&v, &[size], d)?])
}

/// The coefficients of the window `node` computes.
fn window_coefficients(node: &Node) -> CResult<Vec<f64>> {
    kiln_topi::transform::run_time::cosine_window_coefficients(&node.op_type)
        .ok_or_else(|| Msg(format!("{} is not a cosine window", node.op_type)))
}

/// A cosine window whose size is known only at run time: a kernel of run-time length (a shape
/// program reads the size).
pub(super) fn window_run_time(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    if !ctx.run_time_input(node, 0)? {
        return Ok(None);
    }
    window_coefficients(node)?;
    let size = ctx.input(node, 0)?;
    let d = attr_dtype(node, "output_datatype", kiln_ffi::DataType::float(32))?;
    let body = super::call(
        "dyn.cosine_window",
        Vec::new(),
        &[
            ("window", node.op_type.as_str().into()),
            ("periodic", (node.attr_i("periodic", 1)? != 0).into()),
            ("dtype", d.to_string().as_str().into()),
        ],
    )?;
    // The length: the size's one value.
    let code = vec![op::VALUE, 0, 0, op::EMIT];
    Ok(Some(super::shaped::kernel(
        Shapes::Program { code, rank: 1 },
        vec![size],
        Vec::new(),
        body,
        &[(0, None)],
    )?))
}

pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("EyeLike", eye_like);
    t.insert("HannWindow", cosine_window);
    t.insert("HammingWindow", cosine_window);
    t.insert("BlackmanWindow", cosine_window);
}
