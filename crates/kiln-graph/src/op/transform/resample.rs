//! ONNX Resize with run-time scales, sizes or region (or a run-time-shaped input), in three
//! steps (`kiln_topi::transform::resample`):
//! - `dyn.resize_geometry(data, target)`: int64 `[rank + len(axes)]`, the result's extents then
//!   each resized axis' tap count;
//! - `dyn.resize_table(data, target, roi, axis_index)`: float64 `[n_out, taps, 2]`, the source
//!   index and weight of each tap of resized axis `axes[axis_index]`;
//! - `dyn.resample(data, table, axis, nearest, extrapolation)`: `data` resampled along `axis`.
//!
//! The sampling attributes are ONNX's (`mode`, `coordinate_transformation_mode`,
//! `nearest_mode` with `legacy` for the rule before opset 11, `cubic_coeff_a`, `antialias`,
//! `exclude_outside`, `keep_aspect_ratio_policy`), plus `target` (`scales` or `sizes`).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{input, one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::{DataType, Error, Result};
use kiln_topi::transform::resample::{self as rs, Coord, Mode, Rounding, Sampling, Target};

/// The sampling and target the attributes describe.
fn sampling(a: &Attrs<'_>) -> Result<(Sampling, Target)> {
    let bad = |what: &str, v: &str| Error::value_error(format!("resize: unknown {what} `{v}`"));
    let rounding = a.str("nearest_mode")?;
    let rounding = Rounding::parse(&rounding).ok_or_else(|| bad("nearest_mode", &rounding))?;
    let mode = match a.str("mode")?.as_str() {
        "nearest" => Mode::Nearest(rounding),
        "linear" => Mode::Linear,
        "cubic" => Mode::Cubic(a.float("cubic_coeff_a")? as f32),
        m => return Err(bad("mode", m)),
    };
    let coord = a.str("coordinate_transformation_mode")?;
    let coord = Coord::parse(&coord).ok_or_else(|| bad("coordinate mode", &coord))?;
    let (by, policy) = (a.str("target")?, a.str("keep_aspect_ratio_policy")?);
    let target = Target::parse(&by, &policy).ok_or_else(|| bad("target", &by))?;
    let s = Sampling {
        mode,
        coord,
        antialias: a.bool("antialias")?,
        exclude_outside: a.bool("exclude_outside")?,
    };
    Ok((s, target))
}

fn axes(a: &Attrs<'_>) -> Result<Vec<usize>> {
    Ok(a.ints("axes")?.iter().map(|&x| x as usize).collect())
}

fn sampling_attrs() -> Vec<AttrSpec> {
    vec![
        AttrSpec::new("axes", AttrKind::Ints, Vec::<i64>::new()),
        AttrSpec::new("target", AttrKind::Str, "scales"),
        AttrSpec::new("keep_aspect_ratio_policy", AttrKind::Str, "stretch"),
        AttrSpec::new("mode", AttrKind::Str, "nearest"),
        AttrSpec::new(
            "coordinate_transformation_mode",
            AttrKind::Str,
            "half_pixel",
        ),
        AttrSpec::new("nearest_mode", AttrKind::Str, "round_prefer_floor"),
        AttrSpec::new("cubic_coeff_a", AttrKind::Float, -0.75),
        AttrSpec::new("antialias", AttrKind::Bool, false),
        AttrSpec::new("exclude_outside", AttrKind::Bool, false),
    ]
}

/// Checks the target's dtype and length and the axes; returns the data's rank.
fn check_target(ctx: &RelCtx<'_>) -> Result<usize> {
    let (s, _) = ctx.tensor(0)?;
    let (t, d) = ctx.tensor(1)?;
    let (_, target) = sampling(&ctx.attrs).map_err(|e| ctx.err(e.message()))?;
    let want = if target == Target::Scales {
        DataType::float(32)
    } else {
        DataType::int(64)
    };
    let axes = axes(&ctx.attrs)?;
    if axes.is_empty() || axes.iter().any(|&a| a >= s.len()) {
        return Err(ctx.err(format!("axes {axes:?} of a rank-{} input", s.len())));
    }
    if d != want || t.len() != 1 || (t[0] >= 0 && t[0] != axes.len() as i64) {
        return Err(ctx.err(format!(
            "the target must be {want} with one value per resized axis ({}), it is {d} {t:?}",
            axes.len()
        )));
    }
    Ok(s.len())
}

fn geometry_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let rank = check_target(ctx)?;
    let n = rank + axes(&ctx.attrs)?.len();
    Ok(Type::tensor(&[n as i64], DataType::int(64)))
}

fn table_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    check_target(ctx)?;
    let k = ctx.attrs.int("axis_index")?;
    if !(0..axes(&ctx.attrs)?.len() as i64).contains(&k) {
        return Err(ctx.err(format!("axis_index {k} is not a resized axis")));
    }
    let (r, d) = ctx.tensor(2)?;
    if r.len() != 1 || !kiln_tir::DataTypeExt::is_floating(d) {
        return Err(ctx.err(format!("roi must be a 1-D float tensor, it is {d} {r:?}")));
    }
    let (s, _) = sampling(&ctx.attrs).map_err(|e| ctx.err(e.message()))?;
    let taps = rs::static_taps(&s).unwrap_or(-1);
    Ok(Type::tensor(&[-1, taps, 2], DataType::float(64)))
}

fn resample_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let (t, td) = ctx.tensor(1)?;
    let axis = ctx.attrs.int("axis")?;
    if !(0..s.len() as i64).contains(&axis) {
        return Err(ctx.err(format!("axis {axis} of a rank-{} input", s.len())));
    }
    if td != DataType::float(64) || t.len() != 3 || t[2] != 2 {
        return Err(ctx.err(format!(
            "the table must be float64 [n, taps, 2], it is {td} {t:?}"
        )));
    }
    let nearest = ctx.attrs.bool("nearest")?;
    if nearest && t[1] != 1 {
        return Err(ctx.err(format!("a nearest table has one tap, this one {}", t[1])));
    }
    if !nearest && !kiln_tir::DataTypeExt::is_floating(d) {
        return Err(ctx.err(format!("only nearest resamples {d} tensors")));
    }
    let mut out = s.to_vec();
    out[axis as usize] = t[0];
    Ok(Type::tensor(&out, d))
}

/// Registers the three steps.
pub fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new(
            "dyn.resize_geometry",
            &["data", "target"],
            OpPattern::Opaque,
            geometry_rel,
        )
        .attrs(sampling_attrs())
        .compute(|i, a, _| {
            let op = "dyn.resize_geometry";
            let (s, target) = sampling(a)?;
            one(rs::resize_geometry(
                input(op, i, 0)?,
                input(op, i, 1)?,
                &axes(a)?,
                target,
                &s,
            ))
        }),
    );
    let mut table_attrs = sampling_attrs();
    table_attrs.push(AttrSpec::new("axis_index", AttrKind::Int, 0i64));
    v.push(
        OpDef::new(
            "dyn.resize_table",
            &["data", "target", "roi"],
            OpPattern::Opaque,
            table_rel,
        )
        .attrs(table_attrs)
        .compute(|i, a, _| {
            let op = "dyn.resize_table";
            let (s, target) = sampling(a)?;
            one(rs::resize_table(
                input(op, i, 0)?,
                input(op, i, 1)?,
                input(op, i, 2)?,
                &axes(a)?,
                a.int("axis_index")? as usize,
                target,
                &s,
            ))
        }),
    );
    v.push(
        OpDef::new(
            "dyn.resample",
            &["data", "table"],
            OpPattern::Opaque,
            resample_rel,
        )
        .attrs(vec![
            AttrSpec::new("axis", AttrKind::Int, 0i64),
            AttrSpec::new("nearest", AttrKind::Bool, false),
            AttrSpec::new("extrapolate", AttrKind::Bool, false),
            AttrSpec::new("extrapolation", AttrKind::Float, 0.0),
        ])
        .compute(|i, a, _| {
            let op = "dyn.resample";
            let e = a
                .bool("extrapolate")?
                .then(|| a.float("extrapolation"))
                .transpose()?;
            one(rs::resample(
                input(op, i, 0)?,
                input(op, i, 1)?,
                a.int("axis")? as usize,
                a.bool("nearest")?,
                e,
            ))
        }),
    );
}
