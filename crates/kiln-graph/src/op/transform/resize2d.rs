//! `image.resize2d(data, size)`: NCHW resize to `size = [h, w]`, `method` `nearest_neighbor` or
//! `linear`, `coordinate_transformation_mode` (`half_pixel`, `align_corners`, `asymmetric`).

use crate::ir::Type;
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor_rank(0, 4)?;
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
    Ok(Type::tensor(&[s[0], s[1], size[0], size[1]], d))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("image.resize2d", &["data"], OpPattern::Injective, rel).attrs(vec![
            AttrSpec::new("size", AttrKind::Ints, Vec::<i64>::new()),
            AttrSpec::new("method", AttrKind::Str, "linear"),
            AttrSpec::new(
                "coordinate_transformation_mode",
                AttrKind::Str,
                "half_pixel",
            ),
            AttrSpec::new("rounding_method", AttrKind::Str, "round_prefer_floor"),
            AttrSpec::new("layout", AttrKind::Str, "NCHW"),
        ]),
    );
}
