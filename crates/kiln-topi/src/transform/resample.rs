//! ONNX Resize with its scales, sizes or region known only at run time (or an input whose
//! extents are), as three computes: [`resize_geometry`] (the result's extents and each axis'
//! tap count), [`resize_table`] (one axis' source indices and weights per output position)
//! and [`resample`] (an axis resampled by its table). Every ONNX sampling rule lives in
//! [`Sampling`] and the table; the onnx front end builds the same tables at compile time when
//! the inputs are constants. Coordinates are computed in onnxruntime's precision and order of
//! operations (float32, a few steps in float64), so that ties round alike.

use crate::tag;
use crate::transform::util::{compute_tagged, constant};
use kiln_ffi::{DataType, Error, Result};
use kiln_te::{reduce_axis_n, sum, Tensor};
use kiln_tir::{cast, op, select, PrimExpr, Var};

/// ONNX's `coordinate_transformation_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coord {
    /// `(o + 0.5) / scale - 0.5`.
    HalfPixel,
    /// Half-pixel, centred on the input when the target length is fractional.
    HalfPixelSymmetric,
    /// Half-pixel, but 0 when the result has one point.
    PytorchHalfPixel,
    /// `o * (n_in - 1) / (width - 1)`.
    AlignCorners,
    /// `o / scale`.
    Asymmetric,
    /// `(o + 0.5) / scale`.
    TfHalfPixelForNn,
    /// The region `roi` of the input stretched over the result.
    TfCropAndResize,
}

/// ONNX's `nearest_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// Round, halves down.
    RoundPreferFloor,
    /// Round, halves up.
    RoundPreferCeil,
    /// Toward negative infinity.
    Floor,
    /// Toward positive infinity.
    Ceil,
    /// Upsample and Resize before opset 11: down when upsampling the axis, up when
    /// downsampling it (onnxruntime's rule).
    Legacy,
}

/// The interpolation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// The nearest input point, rounded so.
    Nearest(Rounding),
    /// Linear along each axis.
    Linear,
    /// Cubic convolution with coefficient `a` (`cubic_coeff_a`).
    Cubic(f32),
}

/// How one Resize samples, shared by every axis.
#[derive(Clone, Copy, Debug)]
pub struct Sampling {
    /// The interpolation.
    pub mode: Mode,
    /// The coordinate transformation.
    pub coord: Coord,
    /// Whether a downsampling filter is widened by the inverse scale.
    pub antialias: bool,
    /// Whether taps outside the input get weight 0 (the others renormalized).
    pub exclude_outside: bool,
}

/// What gives the resized axes' lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A float32 scale per axis: `floor(scale * n_in)`.
    Scales,
    /// An int64 length per axis, stretched.
    Sizes,
    /// Int64 lengths, one scale for every axis: the smallest ratio (`not_larger`).
    SizesNotLarger,
    /// Int64 lengths, one scale for every axis: the largest ratio (`not_smaller`).
    SizesNotSmaller,
}

impl Coord {
    /// The mode by its ONNX name.
    pub fn parse(s: &str) -> Option<Coord> {
        Some(match s {
            "half_pixel" => Coord::HalfPixel,
            "half_pixel_symmetric" => Coord::HalfPixelSymmetric,
            "pytorch_half_pixel" => Coord::PytorchHalfPixel,
            "align_corners" => Coord::AlignCorners,
            "asymmetric" => Coord::Asymmetric,
            "tf_half_pixel_for_nn" => Coord::TfHalfPixelForNn,
            "tf_crop_and_resize" => Coord::TfCropAndResize,
            _ => return None,
        })
    }

    /// The ONNX name.
    pub fn name(self) -> &'static str {
        match self {
            Coord::HalfPixel => "half_pixel",
            Coord::HalfPixelSymmetric => "half_pixel_symmetric",
            Coord::PytorchHalfPixel => "pytorch_half_pixel",
            Coord::AlignCorners => "align_corners",
            Coord::Asymmetric => "asymmetric",
            Coord::TfHalfPixelForNn => "tf_half_pixel_for_nn",
            Coord::TfCropAndResize => "tf_crop_and_resize",
        }
    }
}

impl Rounding {
    /// The rounding by its ONNX name (`legacy` for the rule before opset 11).
    pub fn parse(s: &str) -> Option<Rounding> {
        Some(match s {
            "round_prefer_floor" => Rounding::RoundPreferFloor,
            "round_prefer_ceil" => Rounding::RoundPreferCeil,
            "floor" => Rounding::Floor,
            "ceil" => Rounding::Ceil,
            "legacy" => Rounding::Legacy,
            _ => return None,
        })
    }

    /// The name [`Rounding::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Rounding::RoundPreferFloor => "round_prefer_floor",
            Rounding::RoundPreferCeil => "round_prefer_ceil",
            Rounding::Floor => "floor",
            Rounding::Ceil => "ceil",
            Rounding::Legacy => "legacy",
        }
    }
}

impl Target {
    /// The target by input kind (`scales` or `sizes`) and `keep_aspect_ratio_policy`.
    pub fn parse(by: &str, policy: &str) -> Option<Target> {
        Some(match (by, policy) {
            ("scales", _) => Target::Scales,
            ("sizes", "stretch") => Target::Sizes,
            ("sizes", "not_larger") => Target::SizesNotLarger,
            ("sizes", "not_smaller") => Target::SizesNotSmaller,
            _ => return None,
        })
    }
}

impl Mode {
    /// The filter's half-width in input samples (0 for nearest).
    pub fn support(self) -> f64 {
        match self {
            Mode::Nearest(_) => 0.0,
            Mode::Linear => 1.0,
            Mode::Cubic(_) => 2.0,
        }
    }
}

/// The cubic convolution kernel with coefficient `a` at distance `d`.
pub fn cubic_kernel(a: f64, d: f64) -> f64 {
    let d = d.abs();
    if d <= 1.0 {
        ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0
    } else if d < 2.0 {
        ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a
    } else {
        0.0
    }
}

/// [`cubic_kernel`] as a float64 expression.
fn cubic_kernel_expr(a: f64, d: PrimExpr) -> PrimExpr {
    let d = op::fabs(d);
    let near = ((d.clone() * (a + 2.0) - (a + 3.0)) * d.clone() * d.clone()) + 1.0;
    let far = (((d.clone() * a - 5.0 * a) * d.clone() + 8.0 * a) * d.clone()) - 4.0 * a;
    select(
        d.clone().le(1.0),
        near,
        select(d.lt(2.0), far, PrimExpr::f64(0.0)),
    )
}

/// One resized axis at run time: input extent, float32 scale, float64 target length.
struct AxisGeometry {
    n_in: PrimExpr,
    n_out: PrimExpr,
    scale: PrimExpr,
    width: PrimExpr,
}

const F32: DataType = DataType::float(32);
const F64: DataType = DataType::float(64);
const I64: DataType = DataType::int(64);

/// `v` (positive float32) rounded half away from zero as int64, 0 when out of range.
fn to_extent(v: PrimExpr, round: bool) -> PrimExpr {
    let r = if round {
        let f = op::floor(v.clone());
        select((v.clone() - f.clone()).ge(0.5), f.clone() + 1.0, f)
    } else {
        v.clone()
    };
    select(
        v.clone().ge(0.5).logical_and(v.lt(2147483647.0)),
        cast(I64, r),
        PrimExpr::i64(0),
    )
}

/// Resized axis `k` (of `axes`) of `x` by `target` (`[axes.len()]`).
fn axis_geometry(
    x: &Tensor,
    target: &Tensor,
    axes: &[usize],
    k: usize,
    by: Target,
) -> AxisGeometry {
    let n_in = x.shape()[axes[k]].clone();
    let at = |i: usize| target.at(&[PrimExpr::i32(i as i64)]);
    let nf = cast(F32, n_in.clone());
    let ratio = |i: usize| cast(F32, at(i)) / cast(F32, x.shape()[axes[i]].clone());
    let keep = |pick: fn(PrimExpr, PrimExpr) -> PrimExpr| {
        (1..axes.len()).fold(ratio(0), |s, i| pick(s, ratio(i)))
    };
    let (n_out, scale, width) = match by {
        Target::Scales => {
            let s = cast(F32, at(k));
            let n_out = to_extent(s.clone() * nf, false);
            let width = cast(F64, s.clone()) * cast(F64, n_in.clone());
            (n_out, s, width)
        }
        Target::Sizes => (cast(I64, at(k)), ratio(k), cast(F64, at(k))),
        Target::SizesNotLarger | Target::SizesNotSmaller => {
            let s = if by == Target::SizesNotLarger {
                keep(kiln_tir::min)
            } else {
                keep(kiln_tir::max)
            };
            let n_out = to_extent(s.clone() * nf, true);
            let width = cast(F64, s.clone()) * cast(F64, n_in.clone());
            (n_out, s, width)
        }
    };
    AxisGeometry {
        n_in,
        n_out,
        scale,
        width,
    }
}

/// The filter's scale (float64): `min(scale, 1)` when antialiasing, else 1.
fn filter_scale(s: &Sampling, g: &AxisGeometry) -> PrimExpr {
    if s.antialias {
        kiln_tir::min(cast(F64, g.scale.clone()), PrimExpr::f64(1.0))
    } else {
        PrimExpr::f64(1.0)
    }
}

/// The first tap's offset from `ceil(x) - 1` (int64): `floor(-support / fscale) + 1`.
fn first_tap(s: &Sampling, g: &AxisGeometry) -> PrimExpr {
    let support = s.mode.support();
    if s.antialias {
        cast(I64, op::floor(PrimExpr::f64(-support) / filter_scale(s, g))) + 1
    } else {
        PrimExpr::i64(-(support as i64) + 1)
    }
}

/// The number of taps per output position when it is known without the scale.
pub fn static_taps(s: &Sampling) -> Option<i64> {
    match s.mode {
        Mode::Nearest(_) => Some(1),
        _ if s.antialias => None,
        m => Some(2 * m.support() as i64),
    }
}

/// The extents of `x` resized along `axes` by `target`, then the number of taps of each
/// resized axis: int64 `[rank + axes.len()]` (an extent out of range comes out 0, which the
/// caller's shape check refuses).
///
/// # Errors
/// A `ValueError` when `target` does not hold one value per axis or an axis is out of range.
pub fn resize_geometry(
    x: &Tensor,
    target: &Tensor,
    axes: &[usize],
    by: Target,
    s: &Sampling,
) -> Result<Tensor> {
    check(x, target, axes)?;
    let rank = x.ndim();
    let mut values: Vec<PrimExpr> = (0..rank).map(|j| cast(I64, x.shape()[j].clone())).collect();
    let mut taps = Vec::with_capacity(axes.len());
    for (k, &a) in axes.iter().enumerate() {
        let g = axis_geometry(x, target, axes, k, by);
        taps.push(match static_taps(s) {
            Some(t) => PrimExpr::i64(t),
            None => 2 - 2 * first_tap(s, &g),
        });
        values[a] = g.n_out;
    }
    values.extend(taps);
    let n = values.len();
    compute_tagged(
        &[PrimExpr::i32(n as i64)],
        |i| {
            let j = i[0].to_expr();
            (0..n - 1).rev().fold(values[n - 1].clone(), |acc, v| {
                select(j.clone().equal(v as i64), values[v].clone(), acc)
            })
        },
        "resize_geometry",
        tag::INJECTIVE,
    )
}

fn check(x: &Tensor, target: &Tensor, axes: &[usize]) -> Result<()> {
    let len = target.shape().first().and_then(|d| d.as_int());
    if target.ndim() != 1 || len.is_some_and(|n| n != axes.len() as i64) {
        return Err(Error::value_error(format!(
            "resize: the scales or sizes must hold one value per resized axis ({})",
            axes.len()
        )));
    }
    if axes.is_empty() || axes.iter().any(|&a| a >= x.ndim()) {
        return Err(Error::value_error(format!(
            "resize: axes {axes:?} of a rank-{} input",
            x.ndim()
        )));
    }
    Ok(())
}

/// The source coordinate (float64) of output position `o` (int32) on axis `g`.
fn source_coord(c: Coord, o: PrimExpr, g: &AxisGeometry, roi: (PrimExpr, PrimExpr)) -> PrimExpr {
    let (x, nin, scale) = (
        cast(F32, o.clone()),
        cast(F32, g.n_in.clone()),
        g.scale.clone(),
    );
    let half = |x: PrimExpr| (x + 0.5) / scale.clone() - 0.5;
    let v = match c {
        Coord::HalfPixel => half(x),
        Coord::HalfPixelSymmetric => {
            let adjustment = cast(F64, g.n_out.clone()) / g.width.clone();
            let offset = cast(F64, g.n_in.clone()) / 2.0 * (1.0 - adjustment);
            let v = offset + (cast(F64, o) + 0.5) / cast(F64, scale.clone()) - 0.5;
            cast(F32, v)
        }
        Coord::PytorchHalfPixel => select(g.n_out.clone().gt(1), half(x), PrimExpr::f32(0.0)),
        Coord::AlignCorners => {
            let v = cast(F64, o) * (cast(F64, g.n_in.clone()) - 1.0) / (g.width.clone() - 1.0);
            return select(g.width.clone().equal(1.0), PrimExpr::f64(0.0), v);
        }
        Coord::Asymmetric => x / scale,
        Coord::TfHalfPixelForNn => (x + 0.5) / scale,
        Coord::TfCropAndResize => {
            let (r0, r1) = roi;
            let span = cast(F32, g.width.clone()) - 1.0;
            let v = r0.clone() * (nin.clone() - 1.0)
                + x * (r1.clone() - r0.clone()) * (nin - 1.0) / span;
            let mid = (cast(F64, r0) + cast(F64, r1)) * 0.5 * (cast(F64, g.n_in.clone()) - 1.0);
            select(g.width.clone().equal(1.0), cast(F32, mid), v)
        }
    };
    cast(F64, v)
}

/// `x` (float64) rounded to an input index by `r` (int64; `scale` float32).
fn round_nearest(r: Rounding, x: PrimExpr, scale: PrimExpr) -> PrimExpr {
    let (fl, ce) = (op::floor(x.clone()), op::ceil(x.clone()));
    let tie = (x.clone() - fl.clone()).equal(0.5);
    let v = match r {
        Rounding::Legacy => select(scale.lt(1.0), ce, fl),
        Rounding::RoundPreferFloor => select(tie, fl, op::round(x)),
        Rounding::RoundPreferCeil => select(tie, ce, op::round(x)),
        Rounding::Floor => fl,
        Rounding::Ceil => ce,
    };
    cast(I64, v)
}

/// Tap `t` (int64) at output position `o` (int32) of an axis: its source index (int64,
/// clamped into the input; -1 where tf_crop_and_resize extrapolates) and its weight before
/// normalization (float64).
struct Taps {
    s: Sampling,
    g: AxisGeometry,
    roi: (PrimExpr, PrimExpr),
}

impl Taps {
    fn coord(&self, o: &PrimExpr) -> PrimExpr {
        source_coord(self.s.coord, o.clone(), &self.g, self.roi.clone())
    }

    fn last(&self) -> PrimExpr {
        cast(I64, self.g.n_in.clone()) - 1
    }

    fn outside(&self, x: &PrimExpr) -> PrimExpr {
        if self.s.coord == Coord::TfCropAndResize {
            let last = cast(F64, self.last());
            x.clone().lt(0.0).logical_or(x.clone().gt(last))
        } else {
            PrimExpr::bool(false)
        }
    }

    /// `ceil(x) - 1` (float64) and the position of tap `t` (int64) from it.
    fn position(&self, x: &PrimExpr, t: &PrimExpr) -> (PrimExpr, PrimExpr) {
        let base = op::ceil(x.clone()) - 1.0;
        let pos = cast(I64, base.clone()) + first_tap(&self.s, &self.g) + t.clone();
        (base, pos)
    }

    fn index(&self, o: &PrimExpr, t: &PrimExpr) -> PrimExpr {
        let x = self.coord(o);
        let last = self.last();
        let i = match self.s.mode {
            Mode::Nearest(r) => round_nearest(r, x.clone(), self.g.scale.clone()),
            _ => self.position(&x, t).1,
        };
        let i = kiln_tir::min(kiln_tir::max(i, PrimExpr::i64(0)), last);
        select(self.outside(&x), PrimExpr::i64(-1), i)
    }

    fn weight(&self, o: &PrimExpr, t: &PrimExpr) -> PrimExpr {
        let x = self.coord(o);
        let w = match self.s.mode {
            Mode::Nearest(_) => return PrimExpr::f64(1.0),
            Mode::Linear | Mode::Cubic(_) => {
                let (base, pos) = self.position(&x, t);
                let start = first_tap(&self.s, &self.g);
                let d = cast(F64, start + t.clone()) - (x.clone() - base);
                let d = d * filter_scale(&self.s, &self.g);
                let w = match self.s.mode {
                    Mode::Cubic(a) => cubic_kernel_expr(a as f64, d),
                    _ => kiln_tir::max(1.0 - op::fabs(d), PrimExpr::f64(0.0)),
                };
                if self.s.exclude_outside {
                    let out = pos.clone().lt(0).logical_or(pos.gt(self.last()));
                    select(out, PrimExpr::f64(0.0), w)
                } else {
                    w
                }
            }
        };
        select(self.outside(&x), PrimExpr::f64(0.0), w)
    }
}

/// The table of resized axis `k` (of `axes`) of `x`: float64 `[n_out, taps, 2]`, per output
/// position and tap the source index (-1 for a position outside the region of
/// tf_crop_and_resize, which takes the extrapolation value) and its weight. `n_out` (and
/// `taps` when it depends on the scale) are bound from the result; `roi` holds the region's
/// starts then ends per resized axis (read for tf_crop_and_resize only).
///
/// # Errors
/// As [`resize_geometry`].
pub fn resize_table(
    x: &Tensor,
    target: &Tensor,
    roi: &Tensor,
    axes: &[usize],
    k: usize,
    by: Target,
    s: &Sampling,
) -> Result<Tensor> {
    check(x, target, axes)?;
    if k >= axes.len() {
        return Err(Error::value_error(format!(
            "resize: no resized axis #{k} among {axes:?}"
        )));
    }
    let mut g = axis_geometry(x, target, axes, k, by);
    let n_out = Var::size_var("o0", DataType::int(32)).to_expr();
    g.n_out = cast(I64, n_out.clone());
    let taps = match static_taps(s) {
        Some(t) => PrimExpr::i32(t),
        None => Var::size_var("o1", DataType::int(32)).to_expr(),
    };
    let roi_at = |i: usize| cast(F32, roi.at(&[PrimExpr::i32(i as i64)]));
    let roi = if s.coord == Coord::TfCropAndResize {
        (roi_at(k), roi_at(axes.len() + k))
    } else {
        (PrimExpr::f32(0.0), PrimExpr::f32(1.0))
    };
    let taps_of = Taps { s: *s, g, roi };
    // Excluding outside taps or widening the filter renormalizes the weights.
    let normalize = (s.exclude_outside || s.antialias) && !matches!(s.mode, Mode::Nearest(_));
    let total = if normalize {
        let rt = reduce_axis_n(taps.clone(), "t");
        let w = &taps_of;
        Some(compute_tagged(
            std::slice::from_ref(&n_out),
            |i| {
                sum(
                    w.weight(&i[0].to_expr(), &cast(I64, rt.expr())),
                    std::slice::from_ref(&rt),
                )
            },
            "resize_weight_sum",
            tag::COMM_REDUCE,
        )?)
    } else {
        None
    };
    compute_tagged(
        &[n_out, taps, PrimExpr::i32(2)],
        |i| {
            let (o, t) = (i[0].to_expr(), cast(I64, i[1].to_expr()));
            let mut w = taps_of.weight(&o, &t);
            if let Some(total) = &total {
                let sum = total.at(std::slice::from_ref(&o));
                w = select(sum.clone().equal(0.0), w.clone(), w / sum);
            }
            let index = cast(F64, taps_of.index(&o, &t));
            select(i[2].to_expr().equal(0), index, w)
        },
        "resize_table",
        tag::INJECTIVE,
    )
}

/// `data` resampled along `axis` by `table` ([`resize_table`]): position `o` is the sum of
/// its taps' weights times the values they index, or `data` at its one tap's index for
/// `nearest` (any dtype); where the index is -1, `extrapolation` (added to the zero sum).
/// The result's extent along `axis` is the table's.
///
/// # Errors
/// A `ValueError` when the table is not `[n, taps, 2]` float64 or the axis is out of range.
pub fn resample(
    data: &Tensor,
    table: &Tensor,
    axis: usize,
    nearest: bool,
    extrapolation: Option<f64>,
) -> Result<Tensor> {
    let ts = table.shape();
    if axis >= data.ndim()
        || table.ndim() != 3
        || table.dtype() != F64
        || ts[2].as_int() != Some(2)
        || (nearest && ts[1].as_int() != Some(1))
    {
        return Err(Error::value_error(format!(
            "resample: axis {axis} of a rank-{} input by a {} table of {} axes",
            data.ndim(),
            table.dtype(),
            table.ndim()
        )));
    }
    let mut dims = data.shape().to_vec();
    dims[axis] = ts[0].clone();
    let dtype = data.dtype();
    let read = |i: &[Var], src: PrimExpr| {
        let mut idx: Vec<PrimExpr> = i.iter().map(Var::to_expr).collect();
        let last = data.shape()[axis].clone() - 1;
        idx[axis] = kiln_tir::min(kiln_tir::max(src, 0), last);
        data.at(&idx)
    };
    let entry = |o: PrimExpr, t: PrimExpr, c: i64| table.at(&[o, t, PrimExpr::i32(c)]);
    let index = |o: PrimExpr, t: PrimExpr| cast(DataType::int(32), entry(o, t, 0));
    let fill = constant(dtype, extrapolation.unwrap_or(0.0));
    if nearest {
        return compute_tagged(
            &dims,
            |i| {
                let o = i[axis].to_expr();
                let v = read(i, index(o.clone(), PrimExpr::i32(0)));
                match extrapolation {
                    Some(_) => select(entry(o, PrimExpr::i32(0), 0).lt(0.0), fill.clone(), v),
                    None => v,
                }
            },
            "resample",
            tag::INJECTIVE,
        );
    }
    let rt = reduce_axis_n(ts[1].clone(), "t");
    let acc = compute_tagged(
        &dims,
        |i| {
            let o = i[axis].to_expr();
            let w = cast(dtype, entry(o.clone(), rt.expr(), 1));
            sum(w * read(i, index(o, rt.expr())), std::slice::from_ref(&rt))
        },
        "resample",
        tag::COMM_REDUCE,
    )?;
    let Some(_) = extrapolation else {
        return Ok(acc);
    };
    compute_tagged(
        &dims,
        |i| {
            let idx: Vec<PrimExpr> = i.iter().map(Var::to_expr).collect();
            let o = i[axis].to_expr();
            let outside = entry(o, PrimExpr::i32(0), 0).lt(0.0);
            acc.at(&idx) + select(outside, fill.clone(), constant(dtype, 0.0))
        },
        "resample_extrapolated",
        tag::INJECTIVE,
    )
}
