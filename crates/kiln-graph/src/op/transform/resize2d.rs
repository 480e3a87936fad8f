//! `image.resize2d(data, size)`: NCHW resize to `size = [h, w]`, `method` `nearest_neighbor` or
//! `linear`, `coordinate_transformation_mode` (`half_pixel`, `align_corners`, `asymmetric`).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one};
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::transform as tf;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d, block) = crate::op::nn::nchw_arg(ctx, 0, "layout")?;
    let size = ctx.attrs.ints("size")?;
    if size.len() != 2 || size.iter().any(|&x| x < 1) {
        return Err(ctx.err(format!(
            "attribute `size` must be [height, width] >= 1, got {size:?}"
        )));
    }
    let m = ctx.attrs.str("method")?;
    if m != "nearest_neighbor" && m != "linear" {
        return Err(ctx.err(format!(
            "attribute `method` = \"{m}\" is not nearest_neighbor or linear"
        )));
    }
    let c = ctx.attrs.str("coordinate_transformation_mode")?;
    if ![
        "half_pixel",
        "align_corners",
        "asymmetric",
        "pytorch_half_pixel",
    ]
    .contains(&c.as_str())
    {
        return Err(ctx.err(format!(
            "attribute `coordinate_transformation_mode` = \"{c}\" is not supported"
        )));
    }
    Ok(Type::tensor(
        &crate::op::nn::in_blocks([s[0], s[1], size[0], size[1]], block),
        d,
    ))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let size = a.ints("size")?;
    let [h, w] = size[..] else {
        return Err(kiln_ffi::Error::value_error(format!(
            "image.resize2d: `size` must be [height, width], got {size:?}"
        )));
    };
    let nearest = match a.str("rounding_method")?.as_str() {
        "round_prefer_ceil" => tf::NearestMode::RoundPreferCeil,
        "floor" => tf::NearestMode::Floor,
        "ceil" => tf::NearestMode::Ceil,
        _ => tf::NearestMode::RoundPreferFloor,
    };
    let method = match a.str("method")?.as_str() {
        "nearest_neighbor" => tf::ResizeMethod::Nearest(nearest),
        _ => tf::ResizeMethod::Linear,
    };
    let coord = match a.str("coordinate_transformation_mode")?.as_str() {
        "align_corners" => tf::CoordMode::AlignCorners,
        "asymmetric" => tf::CoordMode::Asymmetric,
        "pytorch_half_pixel" => tf::CoordMode::PytorchHalfPixel,
        _ => tf::CoordMode::HalfPixel,
    };
    let data = input("image.resize2d", i, 0)?;
    // Channel blocks (`layout` NCHW<b>c): the block axis follows W.
    let inner = usize::from(data.ndim() == 5);
    one(tf::resize2d_inner(data, (h, w), method, coord, inner))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("image.resize2d", &["data"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::new("size", AttrKind::Ints, Vec::<i64>::new()),
                AttrSpec::new("method", AttrKind::Str, "linear"),
                AttrSpec::new(
                    "coordinate_transformation_mode",
                    AttrKind::Str,
                    "half_pixel",
                ),
                AttrSpec::new("rounding_method", AttrKind::Str, "round_prefer_floor"),
                AttrSpec::new("layout", AttrKind::Str, "NCHW"),
            ])
            .compute(lower),
    );
}
