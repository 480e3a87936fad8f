//! `resize2d`: nearest or (bi)linear resizing of the last two axes (ONNX `Resize`, TVM's
//! `topi.image.resize2d`), e.g. H and W of NCHW.
//!
//! The source coordinate of output position `o` (input size `n`, output size `m`,
//! `scale = m / n`, computed in float32 as onnxruntime does) depends on [`CoordMode`]:
//! half-pixel `(o + 0.5) / scale - 0.5`, asymmetric `o / scale`, align-corners
//! `o * (n - 1) / (m - 1)` (0 when `m == 1`), PyTorch half-pixel as half-pixel but 0 when
//! `m == 1`. Nearest rounds it by [`NearestMode`] and clamps into the input; linear
//! interpolates between the two neighbours clamped into the input (edge replication).

use super::util::{
    compute_tagged, const_shape, index_dtype, require_float, shape_exprs, value_error,
};
use crate::tag;
use kiln_ffi::{DataType, Result};
use kiln_te::Tensor;
use kiln_tir::{cast, op, PrimExpr, Var};

/// ONNX's `coordinate_transformation_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoordMode {
    /// `(o + 0.5) / scale - 0.5` (ONNX's default).
    HalfPixel,
    /// `o / scale`.
    Asymmetric,
    /// `o * (n - 1) / (m - 1)`.
    AlignCorners,
    /// Half-pixel, but 0 when the output size is 1.
    PytorchHalfPixel,
}

/// ONNX's `nearest_mode`: how nearest rounds a source coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NearestMode {
    /// Round, halves down (ONNX's default).
    RoundPreferFloor,
    /// Round, halves up.
    RoundPreferCeil,
    /// Toward negative infinity.
    Floor,
    /// Toward positive infinity.
    Ceil,
}

/// The interpolation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeMethod {
    /// The nearest input point.
    Nearest(NearestMode),
    /// Linear along each axis (bilinear in 2-D); float tensors only.
    Linear,
}

fn source_coord(o: &Var, n: i64, m: i64, mode: CoordMode) -> PrimExpr {
    let f = DataType::float(32);
    let of = cast(f, o.to_expr());
    let c = |v: f64| PrimExpr::const_float(f, v);
    let scale = (m as f32 / n as f32) as f64;
    match mode {
        CoordMode::HalfPixel => (of + c(0.5)) / c(scale) - c(0.5),
        CoordMode::PytorchHalfPixel if m == 1 => c(0.0),
        CoordMode::PytorchHalfPixel => (of + c(0.5)) / c(scale) - c(0.5),
        CoordMode::Asymmetric => of / c(scale),
        CoordMode::AlignCorners if m == 1 => c(0.0),
        CoordMode::AlignCorners => of * c((n - 1) as f64) / c((m - 1) as f64),
    }
}

fn clamp_index(i: PrimExpr, n: i64) -> PrimExpr {
    kiln_tir::min(kiln_tir::max(i, 0), n - 1)
}

/// `x` (rank >= 2) with its last two axes resized to `size = (height, width)`.
///
/// # Errors
/// A `ValueError` for rank < 2, an empty input or output axis, or a symbolic shape; a
/// `TypeError` for linear resizing of a non-float tensor.
pub fn resize2d(
    x: &Tensor,
    size: (i64, i64),
    method: ResizeMethod,
    coord: CoordMode,
) -> Result<Tensor> {
    resize2d_inner(x, size, method, coord, 0)
}

/// [`resize2d`] of the two axes before the last `inner` ones (1 for channel blocks,
/// `[N, C/b, H, W, b]`: each block is resized alike).
pub fn resize2d_inner(
    x: &Tensor,
    size: (i64, i64),
    method: ResizeMethod,
    coord: CoordMode,
    inner: usize,
) -> Result<Tensor> {
    let shape = const_shape(x, "resize2d")?;
    let r = shape.len().saturating_sub(inner);
    if r < 2 {
        return Err(value_error(
            "resize2d",
            format!("needs rank >= {}, got {shape:?}", 2 + inner),
        ));
    }
    let (ih, iw) = (shape[r - 2], shape[r - 1]);
    if ih < 1 || iw < 1 || size.0 < 1 || size.1 < 1 {
        return Err(value_error(
            "resize2d",
            format!(
                "sizes must be positive: input {ih}x{iw}, output {}x{}",
                size.0, size.1
            ),
        ));
    }
    if method == ResizeMethod::Linear {
        require_float(x, "resize2d (linear)")?;
    }
    let mut out = shape.clone();
    out[r - 2] = size.0;
    out[r - 1] = size.1;
    let dt = index_dtype(x);
    compute_tagged(
        &shape_exprs(&out, dt),
        |i: &[Var]| {
            let lead: Vec<PrimExpr> = i[..r - 2].iter().map(Var::to_expr).collect();
            let at = |y: PrimExpr, xx: PrimExpr| {
                let mut idx = lead.clone();
                idx.push(y);
                idx.push(xx);
                idx.extend(i[r..].iter().map(Var::to_expr));
                x.at(&idx)
            };
            let sy = source_coord(&i[r - 2], ih, size.0, coord);
            let sx = source_coord(&i[r - 1], iw, size.1, coord);
            match method {
                ResizeMethod::Nearest(nm) => {
                    let round = |s: PrimExpr| -> PrimExpr {
                        let h = PrimExpr::const_float(s.dtype(), 0.5);
                        let v = match nm {
                            NearestMode::RoundPreferFloor => op::ceil(s - h),
                            NearestMode::RoundPreferCeil => op::floor(s + h),
                            NearestMode::Floor => op::floor(s),
                            NearestMode::Ceil => op::ceil(s),
                        };
                        cast(dt, v)
                    };
                    at(clamp_index(round(sy), ih), clamp_index(round(sx), iw))
                }
                ResizeMethod::Linear => {
                    let f = DataType::float(32);
                    let y0f = op::floor(sy.clone());
                    let x0f = op::floor(sx.clone());
                    let ly = sy - y0f.clone();
                    let lx = sx - x0f.clone();
                    let (y0, x0) = (cast(dt, y0f), cast(dt, x0f));
                    let y1 = clamp_index(y0.clone() + 1, ih);
                    let x1 = clamp_index(x0.clone() + 1, iw);
                    let (y0, x0) = (clamp_index(y0, ih), clamp_index(x0, iw));
                    let ld = |y: &PrimExpr, xx: &PrimExpr| cast(f, at(y.clone(), xx.clone()));
                    let one = PrimExpr::const_float(f, 1.0);
                    let top = ld(&y0, &x0) * (one.clone() - lx.clone()) + ld(&y0, &x1) * lx.clone();
                    let bot = ld(&y1, &x0) * (one.clone() - lx.clone()) + ld(&y1, &x1) * lx;
                    cast(x.dtype(), top * (one - ly.clone()) + bot * ly)
                }
            }
        },
        "resize2d",
        tag::INJECTIVE,
    )
}
