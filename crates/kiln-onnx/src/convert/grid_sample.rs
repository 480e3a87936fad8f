//! GridSample (opsets 16 and 20): samples `X` `[N, C, D1..Dr]` at the normalized locations of
//! `grid` `[N, O1..Or, r]` (component 0 is the last spatial axis, x), with nearest, linear or
//! cubic interpolation and zeros, border or reflection padding.
//!
//! Composed from graph ops: per spatial axis the location is unnormalized
//! (`align_corners`), rounded for nearest, clamped or reflected for border and reflection
//! padding, and split into its taps (1, 2 or 4 indices with weights); every combination of
//! taps reads `X` flattened over its spatial axes with one `gather_elements` and adds its
//! weighted value. Out-of-range taps read 0 with zeros padding, the clamped or reflected pixel
//! otherwise.

use std::collections::HashMap;

use kiln_graph::ir::Expr;
use kiln_runtime::vm::shape_expr::op;

use super::conv::slice_axis;
use super::{call, dtype_of, reshape, scalar, shape_of, CResult, ConvertFn, Ctx, Msg};
use crate::Node;

/// Cubic convolution's `A` (as in onnxruntime and the ONNX reference).
const CUBIC_A: f64 = -0.75;

/// How sample locations between pixels are read.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

/// What is read outside the image.
#[derive(Clone, Copy, PartialEq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

fn binary(op: &str, a: Expr, b: Expr) -> CResult<Expr> {
    call(op, vec![a, b], &[])
}

fn unary(op: &str, a: Expr) -> CResult<Expr> {
    call(op, vec![a], &[])
}

/// `p` reflected into `[lo, hi]` (a mirror at each bound, repeating):
/// `lo + span - |((p - lo) mod 2 span) - span|`; `lo` itself when the range is empty.
fn reflect(p: Expr, lo: f64, hi: f64) -> CResult<Expr> {
    let d = dtype_of(&p)?;
    let span = hi - lo;
    if span <= 0.0 {
        let zero = binary("multiply", p, scalar(0.0, d)?)?;
        return binary("add", zero, scalar(lo, d)?);
    }
    let u = binary("subtract", p, scalar(lo, d)?)?;
    let period = scalar(2.0 * span, d)?;
    let turns = unary("floor", binary("divide", u.clone(), period.clone())?)?;
    let m = binary("subtract", u, binary("multiply", turns, period)?)?;
    let dist = unary("abs", binary("subtract", m, scalar(span, d)?)?)?;
    binary("subtract", scalar(lo + span, d)?, dist)
}

/// The cubic convolution weights of the four taps `floor(p) - 1 .. floor(p) + 2` at fraction `t`.
fn cubic_weights(t: &Expr) -> CResult<[Expr; 4]> {
    let d = dtype_of(t)?;
    let a = CUBIC_A;
    let c = |v: f64| scalar(v, d);
    // Distance 1..2: ((a x - 5a) x + 8a) x - 4a; distance 0..1: ((a + 2) x - (a + 3)) x x + 1.
    let far = |x: Expr| -> CResult<Expr> {
        let y = binary(
            "subtract",
            binary("multiply", x.clone(), c(a)?)?,
            c(5.0 * a)?,
        )?;
        let y = binary("add", binary("multiply", y, x.clone())?, c(8.0 * a)?)?;
        binary("subtract", binary("multiply", y, x)?, c(4.0 * a)?)
    };
    let near = |x: Expr| -> CResult<Expr> {
        let y = binary(
            "subtract",
            binary("multiply", x.clone(), c(a + 2.0)?)?,
            c(a + 3.0)?,
        )?;
        let y = binary("multiply", binary("multiply", y, x.clone())?, x)?;
        binary("add", y, c(1.0)?)
    };
    let one_minus = binary("subtract", c(1.0)?, t.clone())?;
    Ok([
        far(binary("add", t.clone(), c(1.0)?)?)?,
        near(t.clone())?,
        near(one_minus.clone())?,
        far(binary("add", one_minus, c(1.0)?)?)?,
    ])
}

fn grid_sample(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let grid = ctx.input(node, 1)?;
    let (xs, gs) = (shape_of(&x)?, shape_of(&grid)?);
    let r = xs.len().saturating_sub(2);
    if r == 0 || gs.len() != r + 2 || gs[0] != xs[0] || gs[r + 1] != r as i64 {
        return Err(Msg(format!(
            "expects X [N, C, D1..Dr] and grid [N, O1..Or, r]; got X {xs:?}, grid {gs:?}"
        )));
    }
    let mode = match node.attr_s("mode", "linear")?.as_str() {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        m => {
            return Err(Msg(format!(
                "attribute mode '{m}' is not nearest, linear or cubic"
            )))
        }
    };
    let padding = match node.attr_s("padding_mode", "zeros")?.as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        p => {
            return Err(Msg(format!(
                "attribute padding_mode '{p}' is not zeros, border or reflection"
            )))
        }
    };
    let align = node.attr_i("align_corners", 0)? != 0;
    let d = dtype_of(&x)?;
    let (n, c) = (xs[0], xs[1]);
    let out_spatial = &gs[1..=r];
    let positions: i64 = out_spatial.iter().product();
    let sizes = &xs[2..];
    let total: i64 = sizes.iter().product();
    let grid = call(
        "cast",
        vec![grid],
        &[("dtype", d.to_string().as_str().into())],
    )?;
    let flat_grid = reshape(grid, vec![n, positions, r as i64])?;

    // Per spatial axis: its taps, (index as a float, weight or None for 1).
    let mut axis_taps: Vec<Vec<(Expr, Option<Expr>)>> = Vec::with_capacity(r);
    for (a, &size) in sizes.iter().enumerate() {
        let component = r - 1 - a; // grid component 0 is the last axis
        let g = reshape(
            slice_axis(flat_grid.clone(), 2, component as i64, 1, 1)?,
            vec![n, 1, positions],
        )?;
        let s = size as f64;
        // Unnormalize: -1..1 to the pixel centres (align_corners) or the image's edges.
        let mut p = if align {
            binary(
                "multiply",
                binary("add", g, scalar(1.0, d)?)?,
                scalar((s - 1.0) / 2.0, d)?,
            )?
        } else {
            let y = binary(
                "multiply",
                binary("add", g, scalar(1.0, d)?)?,
                scalar(s / 2.0, d)?,
            )?;
            binary("subtract", y, scalar(0.5, d)?)?
        };
        if mode == Mode::Nearest {
            p = unary("round", p)?;
        }
        let (lo, hi) = if align {
            (0.0, s - 1.0)
        } else {
            (-0.5, s - 0.5)
        };
        match padding {
            // Cubic taps are clamped one by one (below), the location itself is not: clamping
            // it first would change the fraction the weights come from.
            Padding::Border if mode != Mode::Cubic => {
                p = call(
                    "clip",
                    vec![p],
                    &[("a_min", 0.0.into()), ("a_max", (s - 1.0).into())],
                )?
            }
            Padding::Reflection => p = reflect(p, lo, hi)?,
            Padding::Border | Padding::Zeros => {}
        }
        let taps = match mode {
            Mode::Nearest => vec![(p, None)],
            Mode::Linear => {
                let i0 = unary("floor", p.clone())?;
                let w1 = binary("subtract", p, i0.clone())?;
                let w0 = binary("subtract", scalar(1.0, d)?, w1.clone())?;
                let i1 = binary("add", i0.clone(), scalar(1.0, d)?)?;
                vec![(i0, Some(w0)), (i1, Some(w1))]
            }
            Mode::Cubic => {
                let f = unary("floor", p.clone())?;
                let t = binary("subtract", p, f.clone())?;
                let w = cubic_weights(&t)?;
                w.into_iter()
                    .enumerate()
                    .map(|(k, wk)| -> CResult<(Expr, Option<Expr>)> {
                        Ok((
                            binary("add", f.clone(), scalar(k as f64 - 1.0, d)?)?,
                            Some(wk),
                        ))
                    })
                    .collect::<CResult<Vec<_>>>()?
            }
        };
        // Taps as in-range integer indices, with a 0/1 mask where zeros padding reads nothing.
        let mut resolved = Vec::with_capacity(taps.len());
        for (idx, w) in taps {
            let (idx, mask) = match padding {
                Padding::Zeros => {
                    let inside = call(
                        "logical_and",
                        vec![
                            binary("greater_equal", idx.clone(), scalar(0.0, d)?)?,
                            binary("less_equal", idx.clone(), scalar(s - 1.0, d)?)?,
                        ],
                        &[],
                    )?;
                    let mask = call(
                        "cast",
                        vec![inside],
                        &[("dtype", d.to_string().as_str().into())],
                    )?;
                    (idx, Some(mask))
                }
                Padding::Border => (idx, None),
                // A tap beyond the reflected location is reflected too; int() of the result.
                Padding::Reflection => (
                    unary(
                        "floor",
                        binary("maximum", reflect(idx, lo, hi)?, scalar(0.0, d)?)?,
                    )?,
                    None,
                ),
            };
            let idx = call(
                "clip",
                vec![idx],
                &[("a_min", 0.0.into()), ("a_max", (s - 1.0).into())],
            )?;
            let weight = match (w, mask) {
                (Some(w), Some(m)) => Some(binary("multiply", w, m)?),
                (w, m) => w.or(m),
            };
            resolved.push((idx, weight));
        }
        axis_taps.push(resolved);
    }

    // Every combination of one tap per axis: a flat index and a weight.
    let x_flat = reshape(x, vec![n, c, total])?;
    let mut sum: Option<Expr> = None;
    let mut combo = vec![0usize; r];
    loop {
        let mut flat: Option<Expr> = None;
        let mut weight: Option<Expr> = None;
        let mut stride = 1i64;
        for a in (0..r).rev() {
            let (idx, w) = &axis_taps[a][combo[a]];
            let term = binary("multiply", idx.clone(), scalar(stride as f64, d)?)?;
            flat = Some(match flat {
                None => term,
                Some(f) => binary("add", f, term)?,
            });
            if let Some(w) = w {
                weight = Some(match weight {
                    None => w.clone(),
                    Some(acc) => binary("multiply", acc, w.clone())?,
                });
            }
            stride *= sizes[a];
        }
        let flat = unary("round", flat.expect("r >= 1"))?;
        let index = call("cast", vec![flat], &[("dtype", "int64".into())])?;
        let index = call(
            "broadcast_to",
            vec![index],
            &[("shape", vec![n, c, positions].into())],
        )?;
        let mut value = call(
            "gather_elements",
            vec![x_flat.clone(), index],
            &[("axis", 2i64.into())],
        )?;
        if let Some(w) = weight {
            value = binary("multiply", value, w)?;
        }
        sum = Some(match sum {
            None => value,
            Some(s) => binary("add", s, value)?,
        });
        // The next combination, the last axis fastest.
        let mut a = r;
        loop {
            if a == 0 {
                let mut out = vec![n, c];
                out.extend_from_slice(out_spatial);
                return Ok(vec![reshape(sum.expect("at least one tap"), out)?]);
            }
            a -= 1;
            combo[a] += 1;
            if combo[a] < axis_taps[a].len() {
                break;
            }
            combo[a] = 0;
        }
    }
}

/// AffineGrid (opset 20): the sampling grid `[N, H, W, 2]` (or `[N, D, H, W, 3]`) of the
/// affine maps `theta` `[N, 2, 3]` (`[N, 3, 4]`) over the normalized coordinates of an output
/// of `size` (a constant): the constant `[positions, r + 1]` matrix of `(x, y[, z], 1)` times
/// each `theta` transposed.
fn affine_grid(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let theta = ctx.input(node, 0)?;
    let ts = shape_of(&theta)?;
    let size = ctx
        .const_ints(node, 1)?
        .ok_or_else(|| ctx.not_constant(node, 1))?;
    let r = size.len().saturating_sub(2);
    if !(r == 2 || r == 3) || ts != [size[0], r as i64, r as i64 + 1] {
        return Err(Msg(format!(
            "theta {ts:?} and size {size:?} must be [N, 2, 3] and [N, C, H, W], or [N, 3, 4] and \
             [N, C, D, H, W]"
        )));
    }
    let align = node.attr_i("align_corners", 0)? != 0;
    let coord = |i: i64, n: i64| -> f64 {
        if align {
            // A single point: onnxruntime puts it at 1 (the end of its linear space; ONNX's
            // Python reference at -1).
            if n == 1 {
                1.0
            } else {
                -1.0 + 2.0 * i as f64 / (n - 1) as f64
            }
        } else {
            (2 * i + 1) as f64 / n as f64 - 1.0
        }
    };
    // Spatial extents, slowest first (D, H, W); coordinate components are x (W) first.
    let dims = &size[2..];
    let positions: i64 = dims.iter().product();
    let mut base = Vec::with_capacity((positions as usize) * (r + 1));
    for p in 0..positions {
        let mut rest = p;
        let mut idx = vec![0i64; r];
        for a in (0..r).rev() {
            idx[a] = rest % dims[a];
            rest /= dims[a];
        }
        for a in (0..r).rev() {
            base.push(coord(idx[a], dims[a]));
        }
        base.push(1.0);
    }
    let d = dtype_of(&theta)?;
    let base = super::constant(&base, &[positions, r as i64 + 1], d)?;
    let theta_t = call(
        "transpose",
        vec![theta],
        &[("axes", vec![0i64, 2, 1].into())],
    )?;
    let grid = super::nn::matmul_of(base, theta_t)?;
    let mut out = vec![size[0]];
    out.extend_from_slice(dims);
    out.push(r as i64);
    Ok(vec![reshape(grid, out)?])
}

/// AffineGrid whose size is known only at run time: a kernel of run-time spatial extents (a
/// shape program reads them from the size, checking its batch against theta's).
pub(super) fn affine_grid_run_time(
    ctx: &Ctx<'_>,
    node: &Node,
) -> CResult<Option<super::shaped::ShapedKernel>> {
    if !ctx.run_time_input(node, 1)? {
        return Ok(None);
    }
    let theta = ctx.input(node, 0)?;
    let ts = shape_of(&theta)?;
    let size = ctx.input(node, 1)?;
    let len = super::shaped::length(&size, "input #1 (size)")?;
    let r = len.saturating_sub(2);
    if !(r == 2 || r == 3) || ts.len() != 3 || ts[1..] != [r as i64, r as i64 + 1] {
        return Err(Msg(format!(
            "theta {ts:?} and a size of {len} values must be [N, 2, 3] and [N, C, H, W], or \
             [N, 3, 4] and [N, C, D, H, W]"
        )));
    }
    // [N (checked against the size's), spatial extents from the size, r].
    let n = [op::DIM, 0, 0];
    let mut code: Vec<i64> = n
        .iter()
        .chain(&[op::VALUE, 1, 0, op::EQ, op::CHECK])
        .copied()
        .collect();
    code.extend(n.iter().chain(&[op::EMIT]));
    for k in 2..len {
        code.extend([op::VALUE, 1, k as i64, op::EMIT]);
    }
    code.extend([op::PUSH, r as i64, op::EMIT]);
    let pt = kiln_graph::ir::Var::new("theta", theta.ty()?);
    let align = node.attr_i("align_corners", 0)? != 0;
    let body = call(
        "dyn.affine_grid",
        vec![pt.expr()],
        &[("align_corners", align.into())],
    )?;
    Ok(Some(super::shaped::kernel(
        super::shaped::Shapes::Program { code, rank: r + 2 },
        vec![theta.clone(), size],
        vec![(theta, pt)],
        body,
        &[(0, None)],
    )?))
}

pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("GridSample", grid_sample);
    t.insert("AffineGrid", affine_grid);
}
