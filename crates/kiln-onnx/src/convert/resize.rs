//! ONNX Resize and Upsample: every mode (nearest, linear, cubic, with antialias), every
//! coordinate transformation (tf_crop_and_resize with `roi` and extrapolation), every
//! `nearest_mode`, `axes`, `keep_aspect_ratio_policy`, any rank.
//!
//! Resizing is separable per axis and shapes are static, so for each resized axis the
//! converter computes at compile time a table of `taps` source indices and weights per output
//! position ([`axis_table`], where all of ONNX's sampling semantics live), then expresses the
//! axis' resampling with elementwise graph ops that fuse: per tap, a `take` along the axis and
//! a multiply by that tap's weights, the taps added (plus a constant for extrapolated
//! positions). The 4-D nearest cases `image.resize2d` computes exactly stay on that op.
//! Coordinates are computed as onnxruntime computes them (see [`source_coord`]).

use std::collections::HashMap;

use kiln_ffi::dtype::code;
use kiln_ffi::DataType as GDataType;
use kiln_graph::ir::Expr;
use kiln_topi::transform::resample::{cubic_kernel, Coord, Mode, Rounding};

use super::{
    call, const_i64, constant, dtype_of, norm_axis, shape_of, CResult, ConvertFn, Ctx, Msg,
};
use crate::Node;

/// How one Resize node samples, shared by every axis.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sampling {
    /// The interpolation.
    pub mode: Mode,
    /// The coordinate transformation.
    pub coord: Coord,
    /// Whether a downsampling filter is widened.
    pub antialias: bool,
    /// Whether taps outside the input get weight 0.
    pub exclude_outside: bool,
    /// The value of positions outside tf_crop_and_resize's region.
    pub extrapolation: f32,
}

/// The resampling of one axis: output position `o` reads input indices
/// `index[o * taps .. (o + 1) * taps]` with `weight`s; an `extrapolated` position is
/// `extrapolation_value` instead (its weights are 0).
#[derive(Debug, PartialEq)]
struct AxisTable {
    taps: usize,
    index: Vec<i64>,
    weight: Vec<f64>,
    extrapolated: Vec<bool>,
}

/// One resized axis: extents, float32 scale, the target length `width` (fractional when
/// computed from a scale: `scale * n_in`) and the tf_crop_and_resize region `roi`.
#[derive(Clone, Copy, Debug)]
struct Axis {
    n_in: usize,
    n_out: usize,
    scale: f32,
    width: f64,
    roi: (f32, f32),
}

/// The source coordinate of output position `o`, in onnxruntime's precision and order of
/// operations (float32, a few steps in float64) so that ties round alike. Where a scale gives a
/// fractional target length, align_corners and tf_crop_and_resize divide by it (align_corners
/// in float64), as ONNX's reference and so the backend test data do; onnxruntime divides by
/// the integer output length.
fn source_coord(c: Coord, o: usize, a: &Axis) -> f64 {
    let (x, nin, scale) = (o as f32, a.n_in as f32, a.scale);
    let half = |x: f32| (x + 0.5) / scale - 0.5;
    let v: f32 = match c {
        Coord::HalfPixel => half(x),
        Coord::HalfPixelSymmetric => {
            let adjustment = a.n_out as f64 / a.width;
            let offset = a.n_in as f64 / 2.0 * (1.0 - adjustment);
            (offset + (o as f64 + 0.5) / scale as f64 - 0.5) as f32
        }
        Coord::PytorchHalfPixel if a.n_out > 1 => half(x),
        Coord::PytorchHalfPixel => 0.0,
        Coord::AlignCorners if a.width != 1.0 => {
            return o as f64 * (a.n_in as f64 - 1.0) / (a.width - 1.0);
        }
        Coord::AlignCorners => 0.0,
        Coord::Asymmetric => x / scale,
        Coord::TfHalfPixelForNn => (x + 0.5) / scale,
        Coord::TfCropAndResize if a.width != 1.0 => {
            let (r0, r1) = a.roi;
            r0 * (nin - 1.0) + x * (r1 - r0) * (nin - 1.0) / (a.width as f32 - 1.0)
        }
        Coord::TfCropAndResize => {
            (0.5 * (a.roi.0 as f64 + a.roi.1 as f64) * (a.n_in as f64 - 1.0)) as f32
        }
    };
    v as f64
}

fn round_nearest(r: Rounding, x: f64, scale: f32) -> i64 {
    let v = match r {
        Rounding::Legacy if scale < 1.0 => x.ceil(),
        Rounding::Legacy => x.floor(),
        Rounding::RoundPreferFloor if x - x.floor() == 0.5 => x.floor(),
        Rounding::RoundPreferFloor => x.round(),
        Rounding::RoundPreferCeil if x - x.floor() == 0.5 => x.ceil(),
        Rounding::RoundPreferCeil => x.round(),
        Rounding::Floor => x.floor(),
        Rounding::Ceil => x.ceil(),
    };
    v as i64
}

/// The index and weight table of one resized axis.
fn axis_table(s: &Sampling, a: &Axis) -> AxisTable {
    let (n_out, scale) = (a.n_out, a.scale);
    let last = a.n_in as i64 - 1;
    // The filter's width in input samples: stretched by 1 / scale when antialiasing a
    // downsampling (ONNX's reference), the plain kernel otherwise.
    let support = match s.mode {
        Mode::Nearest(_) => 0.0,
        Mode::Linear => 1.0,
        Mode::Cubic(_) => 2.0,
    };
    let fscale = if s.antialias {
        (scale as f64).min(1.0)
    } else {
        1.0
    };
    let start = (-support / fscale).floor() as i64 + 1;
    let taps = match s.mode {
        Mode::Nearest(_) => 1,
        _ => (2 - 2 * start) as usize,
    };
    let mut t = AxisTable {
        taps,
        index: Vec::with_capacity(n_out * taps),
        weight: Vec::with_capacity(n_out * taps),
        extrapolated: Vec::with_capacity(n_out),
    };
    for o in 0..n_out {
        let x = source_coord(s.coord, o, a);
        let outside = s.coord == Coord::TfCropAndResize && (x < 0.0 || x > last as f64);
        t.extrapolated.push(outside);
        if outside {
            t.index.extend(std::iter::repeat_n(0, taps));
            t.weight.extend(std::iter::repeat_n(0.0, taps));
            continue;
        }
        if let Mode::Nearest(r) = s.mode {
            t.index.push(round_nearest(r, x, scale).clamp(0, last));
            t.weight.push(1.0);
            continue;
        }
        // Taps sit at base + start .. base + start + taps, base = ceil(x) - 1, so that the
        // fractional offset `ratio` lies in (0, 1].
        let base = x.ceil() as i64 - 1;
        let ratio = x - base as f64;
        let mut w: Vec<f64> = (0..taps as i64)
            .map(|k| {
                let d = (start + k) as f64 - ratio;
                match s.mode {
                    Mode::Cubic(a) => cubic_kernel(a as f64, d * fscale),
                    _ => (1.0 - (d * fscale).abs()).max(0.0),
                }
            })
            .collect();
        let pos: Vec<i64> = (0..taps as i64).map(|k| base + start + k).collect();
        if s.exclude_outside {
            for (w, p) in w.iter_mut().zip(&pos) {
                if *p < 0 || *p > last {
                    *w = 0.0;
                }
            }
        }
        if s.exclude_outside || s.antialias {
            let sum: f64 = w.iter().sum();
            if sum != 0.0 {
                w.iter_mut().for_each(|w| *w /= sum);
            }
        }
        t.index.extend(pos.iter().map(|&p| p.clamp(0, last)));
        t.weight.extend(w);
    }
    t
}

/// The most taps [`resample_axis`] applies one by one.
const MAX_UNROLLED_TAPS: usize = 16;

/// [`resample_axis`] for many taps: one gather of every tap (`[.., n_out, taps, ..]`), a
/// multiply by the weights and a sum over the taps.
fn gather_and_sum(
    x: Expr,
    axis: usize,
    trailing: &[i64],
    d: GDataType,
    t: &AxisTable,
    e: f32,
) -> CResult<Expr> {
    let n_out = t.extrapolated.len() as i64;
    let index: Vec<f64> = t.index.iter().map(|&i| i as f64).collect();
    let ix = constant(&index, &[n_out, t.taps as i64], GDataType::int(64))?;
    let g = call(
        "take",
        vec![x, ix],
        &[("axis", (axis as i64).into()), ("mode", "clip".into())],
    )?;
    let mut wshape = vec![n_out, t.taps as i64];
    wshape.extend(trailing);
    let p = call("multiply", vec![g, constant(&t.weight, &wshape, d)?], &[])?;
    let y = call(
        "sum",
        vec![p],
        &[
            ("axis", vec![axis as i64 + 1].into()),
            ("keepdims", false.into()),
        ],
    )?;
    add_extrapolation(y, trailing, d, t, e)
}

/// Resamples axis `axis` of `x` (rank `rank`, element type `d`) by the table `t`.
fn resample_axis(
    x: Expr,
    axis: usize,
    rank: usize,
    d: GDataType,
    t: &AxisTable,
    e: f32,
) -> CResult<Expr> {
    let n_out = t.extrapolated.len() as i64;
    let trailing = vec![1i64; rank - axis - 1];
    let any_extrapolated = t.extrapolated.iter().any(|&b| b);
    let take = |x: Expr, k: usize| -> CResult<Expr> {
        let ix: Vec<i64> = (0..n_out as usize)
            .map(|o| t.index[o * t.taps + k])
            .collect();
        call(
            "take",
            vec![x, const_i64(&ix)?],
            &[("axis", (axis as i64).into()), ("mode", "clip".into())],
        )
    };
    // One gather and multiply per tap, summed: elementwise ops that fuse into one loop nest
    // (a gather of all taps followed by a reduction over them runs several times slower), but
    // whose number grows with the taps; wide antialiasing filters gather all taps and sum.
    if t.taps > MAX_UNROLLED_TAPS {
        return gather_and_sum(x, axis, &trailing, d, t, e);
    }
    let mut wshape = vec![n_out];
    wshape.extend(&trailing);
    let mut y: Option<Expr> = None;
    for k in 0..t.taps {
        let mut term = take(x.clone(), k)?;
        let w: Vec<f64> = (0..n_out as usize)
            .map(|o| t.weight[o * t.taps + k])
            .collect();
        if t.taps > 1 || any_extrapolated {
            term = call("multiply", vec![term, constant(&w, &wshape, d)?], &[])?;
        }
        y = Some(match y {
            None => term,
            Some(acc) => call("add", vec![acc, term], &[])?,
        });
    }
    let y = y.ok_or("a resampling table without taps")?;
    add_extrapolation(y, &trailing, d, t, e)
}

/// `y` with `e` added at the extrapolated positions (their weights are 0).
fn add_extrapolation(
    y: Expr,
    trailing: &[i64],
    d: GDataType,
    t: &AxisTable,
    e: f32,
) -> CResult<Expr> {
    if !t.extrapolated.iter().any(|&b| b) {
        return Ok(y);
    }
    let mut cshape = vec![t.extrapolated.len() as i64];
    cshape.extend(trailing);
    let c: Vec<f64> = t
        .extrapolated
        .iter()
        .map(|&b| if b { e as f64 } else { 0.0 })
        .collect();
    call("add", vec![y, constant(&c, &cshape, d)?], &[])
}

impl AxisTable {
    /// Whether the table copies the axis unchanged.
    fn is_identity(&self) -> bool {
        self.extrapolated.len() * self.taps == self.index.len()
            && !self.extrapolated.iter().any(|&b| b)
            && (0..self.extrapolated.len()).all(|o| {
                let r = o * self.taps..(o + 1) * self.taps;
                self.index[r.clone()]
                    .iter()
                    .zip(&self.weight[r])
                    .all(|(&i, &w)| w == 0.0 || (i == o as i64 && w == 1.0))
            })
    }
}

fn parse_coord(s: &str) -> CResult<Coord> {
    Coord::parse(s).ok_or_else(|| {
        Msg(format!(
            "attribute coordinate_transformation_mode = \"{s}\" is not one of half_pixel, \
             half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric, \
             tf_half_pixel_for_nn, tf_crop_and_resize"
        ))
    })
}

fn parse_rounding(s: &str) -> CResult<Rounding> {
    match Rounding::parse(s) {
        Some(r) if r != Rounding::Legacy => Ok(r),
        _ => Err(Msg(format!(
            "attribute nearest_mode = \"{s}\" is not one of round_prefer_floor, \
             round_prefer_ceil, floor, ceil"
        ))),
    }
}

/// The node's sampling attributes (Upsample and Resize before opset 11 sample asymmetric
/// coordinates, nearest rounding by [`Rounding::Legacy`]).
pub(super) fn sampling(ctx: &Ctx<'_>, node: &Node) -> CResult<Sampling> {
    let legacy = node.op_type == "Upsample" || ctx.opset < 11;
    let rounding = if legacy {
        Rounding::Legacy
    } else {
        parse_rounding(&node.attr_s("nearest_mode", "round_prefer_floor")?)?
    };
    let mode = match node.attr_s("mode", "nearest")?.as_str() {
        "nearest" => Mode::Nearest(rounding),
        "linear" | "bilinear" => Mode::Linear,
        "cubic" if !legacy => Mode::Cubic(node.attr_f("cubic_coeff_a", -0.75)?),
        m => {
            return Err(Msg(format!(
                "attribute mode = \"{m}\" is not one of nearest, linear{}",
                if legacy { "" } else { ", cubic" }
            )))
        }
    };
    let coord = if legacy {
        Coord::Asymmetric
    } else {
        parse_coord(&node.attr_s("coordinate_transformation_mode", "half_pixel")?)?
    };
    Ok(Sampling {
        mode,
        coord,
        antialias: node.attr_i("antialias", 0)? != 0,
        exclude_outside: node.attr_i("exclude_outside", 0)? != 0,
        extrapolation: node.attr_f("extrapolation_value", 0.0)?,
    })
}

/// What the node asks for on the resized axes.
enum Target {
    Scales(Vec<f64>),
    Sizes(Vec<i64>),
}

/// The scales or sizes given for the resized axes.
fn target(ctx: &Ctx<'_>, node: &Node) -> CResult<Target> {
    if node.op_type == "Upsample" && ctx.opset < 9 {
        let s = node.attr_floats("scales", &[])?;
        return Ok(Target::Scales(s.iter().map(|&v| v as f64).collect()));
    }
    if node.op_type == "Upsample" || ctx.opset < 11 {
        let s = ctx
            .const_floats(node, 1)?
            .ok_or("input scales is required")?;
        return Ok(Target::Scales(s));
    }
    let scales = ctx.const_floats(node, 2)?.filter(|s| !s.is_empty());
    let sizes = ctx.const_ints(node, 3)?.filter(|s| !s.is_empty());
    match (scales, sizes) {
        (Some(_), Some(_)) => {
            Err("inputs scales and sizes are both given; exactly one must be".into())
        }
        (Some(s), None) => Ok(Target::Scales(s)),
        (None, Some(s)) => Ok(Target::Sizes(s)),
        (None, None) => Err("one of the inputs scales and sizes is required".into()),
    }
}

/// Every axis of `xs` resized (axes not in `axes` unchanged; `roi` set later).
fn output_geometry(node: &Node, xs: &[i64], axes: &[usize], target: Target) -> CResult<Vec<Axis>> {
    let mut out = xs.to_vec();
    let mut sc = vec![1.0f32; xs.len()];
    let mut width: Vec<f64> = xs.iter().map(|&n| n as f64).collect();
    let given = |n: usize, what: &str| -> CResult<()> {
        if n != axes.len() {
            return Err(Msg(format!(
                "input {what} has {n} values, but {} axes are resized",
                axes.len()
            )));
        }
        Ok(())
    };
    match target {
        Target::Sizes(sizes) => {
            given(sizes.len(), "sizes")?;
            if let Some(&s) = sizes.iter().find(|&&s| s <= 0) {
                return Err(Msg(format!(
                    "input sizes {sizes:?} has a non-positive size {s}"
                )));
            }
            let ratio = |i: usize| sizes[i] as f32 / xs[axes[i]] as f32;
            let policy = node.attr_s("keep_aspect_ratio_policy", "stretch")?;
            let keep = match policy.as_str() {
                "stretch" => None,
                "not_larger" => Some((0..axes.len()).map(ratio).fold(f32::INFINITY, f32::min)),
                "not_smaller" => Some((0..axes.len()).map(ratio).fold(0.0, f32::max)),
                p => {
                    return Err(Msg(format!(
                        "attribute keep_aspect_ratio_policy = \"{p}\" is not one of stretch, \
                         not_larger, not_smaller"
                    )))
                }
            };
            for (i, &a) in axes.iter().enumerate() {
                match keep {
                    None => {
                        out[a] = sizes[i];
                        sc[a] = ratio(i);
                        width[a] = sizes[i] as f64;
                    }
                    Some(s) => {
                        width[a] = s as f64 * xs[a] as f64;
                        out[a] = (s * xs[a] as f32).round() as i64;
                        sc[a] = s;
                    }
                }
            }
        }
        Target::Scales(scales) => {
            given(scales.len(), "scales")?;
            for (i, &a) in axes.iter().enumerate() {
                let s = scales[i] as f32;
                if !(s > 0.0 && s.is_finite()) {
                    return Err(Msg(format!(
                        "input scales {scales:?} has a non-positive scale {s}"
                    )));
                }
                width[a] = s as f64 * xs[a] as f64;
                out[a] = (s * xs[a] as f32) as i64;
                sc[a] = s;
            }
        }
    }
    if let Some(a) = out.iter().position(|&n| n <= 0) {
        return Err(Msg(format!(
            "the output extent of axis {a} is {}: Kiln does not support empty tensors",
            out[a]
        )));
    }
    Ok((0..xs.len())
        .map(|a| Axis {
            n_in: xs[a] as usize,
            n_out: out[a] as usize,
            scale: sc[a],
            width: width[a],
            roi: (0.0, 1.0),
        })
        .collect())
}

/// The resized axes: attribute `axes` (opset 18) or every axis.
pub(super) fn resized_axes(node: &Node, rank: usize) -> CResult<Vec<usize>> {
    let Some(axes) = node.opt_ints("axes")? else {
        return Ok((0..rank).collect());
    };
    let mut v = Vec::with_capacity(axes.len());
    for &a in &axes {
        let a = norm_axis(a, rank).map_err(|m| Msg(format!("attribute axes {axes:?}: {}", m.0)))?;
        if v.contains(&a) {
            return Err(Msg(format!("attribute axes {axes:?} repeats axis {a}")));
        }
        v.push(a);
    }
    Ok(v)
}

/// The rounding `image.resize2d` does for nearest, when it computes this resize exactly (4-D,
/// the last two axes resized, its scale `out / in` in float32, a coordinate mode it knows).
/// Only nearest goes there: for linear the tap tables run faster (measured on 64x128x128
/// upsampled and 32x256x256 downsampled by 2), for nearest the two are close.
fn resize2d_rounding(s: &Sampling, g: &[Axis]) -> Option<&'static str> {
    let exact = |a: &Axis| a.scale == a.n_out as f32 / a.n_in as f32 && a.width == a.n_out as f64;
    let fits = g.len() == 4
        && g[..2].iter().all(|a| a.n_out == a.n_in && a.scale == 1.0)
        && g[2..].iter().all(exact)
        && matches!(
            s.coord,
            Coord::HalfPixel | Coord::Asymmetric | Coord::AlignCorners | Coord::PytorchHalfPixel
        );
    match s.mode {
        Mode::Nearest(r) if fits => match r {
            Rounding::RoundPreferFloor => Some("round_prefer_floor"),
            Rounding::RoundPreferCeil => Some("round_prefer_ceil"),
            Rounding::Floor => Some("floor"),
            Rounding::Ceil => Some("ceil"),
            Rounding::Legacy if g[2..].iter().all(|a| a.scale >= 1.0) => Some("floor"),
            Rounding::Legacy => None,
        },
        _ => None,
    }
}

fn resize2d(x: Expr, s: &Sampling, g: &[Axis], rounding: &str) -> CResult<Expr> {
    let ct = match s.coord {
        Coord::HalfPixel => "half_pixel",
        Coord::Asymmetric => "asymmetric",
        Coord::AlignCorners => "align_corners",
        _ => "pytorch_half_pixel",
    };
    call(
        "image.resize2d",
        vec![x],
        &[
            ("size", vec![g[2].n_out as i64, g[3].n_out as i64].into()),
            ("method", "nearest_neighbor".into()),
            ("coordinate_transformation_mode", ct.into()),
            ("rounding_method", rounding.into()),
        ],
    )
}

/// ONNX Resize (opsets 10 to 19) and Upsample.
fn resize(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let (xs, d) = (shape_of(&x)?, dtype_of(&x)?);
    let s = sampling(ctx, node)?;
    let floating = matches!(d.code(), code::FLOAT | code::BFLOAT);
    if !floating && !matches!(s.mode, Mode::Nearest(_)) {
        return Err(Msg(format!(
            "mode {:?} on a {d} tensor is not supported (only nearest resizes integer tensors)",
            node.attr_s("mode", "nearest")?
        )));
    }
    let axes = resized_axes(node, xs.len())?;
    let mut g = output_geometry(node, &xs, &axes, target(ctx, node)?)?;
    if let Some(rounding) = resize2d_rounding(&s, &g) {
        return Ok(vec![resize2d(x, &s, &g, rounding)?]);
    }
    if s.coord == Coord::TfCropAndResize {
        let r = ctx
            .const_floats(node, 1)?
            .filter(|r| !r.is_empty())
            .ok_or("input roi is required by coordinate_transformation_mode tf_crop_and_resize")?;
        if r.len() != 2 * axes.len() {
            return Err(Msg(format!(
                "input roi {r:?} must have 2 values per resized axis ({})",
                2 * axes.len()
            )));
        }
        for (i, &a) in axes.iter().enumerate() {
            g[a].roi = (r[i] as f32, r[axes.len() + i] as f32);
        }
    }
    let mut y = x;
    for &a in &axes {
        let t = axis_table(&s, &g[a]);
        if g[a].n_out == g[a].n_in && t.is_identity() {
            continue;
        }
        y = resample_axis(y, a, xs.len(), d, &t, s.extrapolation)?;
    }
    Ok(vec![y])
}

/// Registers Resize and Upsample.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("Resize", resize);
    t.insert("Upsample", resize);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling(mode: Mode, coord: Coord, antialias: bool) -> Sampling {
        Sampling {
            mode,
            coord,
            antialias,
            exclude_outside: false,
            extrapolation: 0.0,
        }
    }

    fn axis(n_in: usize, scale: f32) -> Axis {
        let width = scale as f64 * n_in as f64;
        Axis {
            n_in,
            n_out: width as usize,
            scale,
            width,
            roi: (0.0, 1.0),
        }
    }

    /// The table applied to `f(i)` for each input index `i`.
    fn apply(t: &AxisTable, f: impl Fn(i64) -> f64) -> Vec<f64> {
        (0..t.extrapolated.len())
            .map(|o| {
                (0..t.taps)
                    .map(|k| t.weight[o * t.taps + k] * f(t.index[o * t.taps + k]))
                    .sum()
            })
            .collect()
    }

    #[test]
    fn linear_and_cubic_tables_reproduce_a_ramp_inside_the_input() {
        // Linear interpolation and Keys' cubic with a = -0.5 keep a ramp exact; so does the
        // antialiasing triangle stretched by a whole factor (off-centre samples of other
        // filters do not).
        let cases = [
            (Mode::Linear, 2.3, false),
            (Mode::Linear, 0.6, false),
            (Mode::Linear, 0.5, true),
            (Mode::Linear, 0.25, true),
            (Mode::Cubic(-0.5), 2.3, false),
            (Mode::Cubic(-0.5), 0.6, false),
        ];
        for (mode, scale, antialias) in cases {
            let s = sampling(mode, Coord::HalfPixel, antialias);
            let a = axis(40, scale);
            let t = axis_table(&s, &a);
            let got = apply(&t, |i| i as f64);
            // Far from the edges (where indices clamp), a ramp maps to the source coordinate.
            let margin = t.taps as f64 + 1.0;
            for (o, g) in got.iter().enumerate() {
                let x = source_coord(s.coord, o, &a);
                if x > margin && x < 39.0 - margin {
                    assert!((g - x).abs() < 1e-4, "{mode:?} {scale} {o}: {g} vs {x}");
                }
            }
            for w in t.weight.chunks(t.taps) {
                assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn antialias_widens_the_filter_by_the_inverse_scale() {
        let plain = axis_table(
            &sampling(Mode::Linear, Coord::HalfPixel, false),
            &axis(16, 0.25),
        );
        let wide = axis_table(
            &sampling(Mode::Linear, Coord::HalfPixel, true),
            &axis(16, 0.25),
        );
        assert_eq!((plain.taps, wide.taps), (2, 8));
        let cubic = axis_table(
            &sampling(Mode::Cubic(-0.75), Coord::HalfPixel, true),
            &axis(16, 0.5),
        );
        assert_eq!(cubic.taps, 8);
    }

    #[test]
    fn nearest_modes_round_halves_as_named() {
        let r = |m, x| round_nearest(m, x, 2.0);
        assert_eq!(r(Rounding::RoundPreferFloor, 2.5), 2);
        assert_eq!(r(Rounding::RoundPreferCeil, 2.5), 3);
        assert_eq!(r(Rounding::RoundPreferFloor, 2.6), 3);
        assert_eq!(r(Rounding::RoundPreferCeil, 2.4), 2);
        assert_eq!(r(Rounding::Floor, 2.9), 2);
        assert_eq!(r(Rounding::Ceil, 2.1), 3);
        assert_eq!(round_nearest(Rounding::Legacy, 2.1, 2.0), 2);
        assert_eq!(round_nearest(Rounding::Legacy, 2.1, 0.5), 3);
    }

    #[test]
    fn tf_crop_and_resize_flags_positions_outside_the_input() {
        let s = sampling(Mode::Linear, Coord::TfCropAndResize, false);
        let a = Axis {
            roi: (-0.5, 1.0),
            ..axis(5, 2.0)
        };
        let t = axis_table(&s, &a);
        for (o, &e) in t.extrapolated.iter().enumerate() {
            assert_eq!(e, source_coord(s.coord, o, &a) < 0.0, "position {o}");
        }
        assert!(t.extrapolated[0] && !t.extrapolated[9]);
    }

    #[test]
    fn an_unchanged_axis_is_the_identity() {
        for mode in [
            Mode::Nearest(Rounding::RoundPreferFloor),
            Mode::Linear,
            Mode::Cubic(-0.75),
        ] {
            for coord in [Coord::HalfPixel, Coord::AlignCorners, Coord::Asymmetric] {
                let t = axis_table(&sampling(mode, coord, false), &axis(7, 1.0));
                assert!(t.is_identity(), "{mode:?} {coord:?}");
            }
        }
        let t = axis_table(
            &sampling(Mode::Linear, Coord::HalfPixel, false),
            &axis(7, 1.5),
        );
        assert!(!t.is_identity());
    }
}
