//! Operators whose results have extents known only at run time (every dimension -1): the VM
//! allocates the result by a shape function's answer and the kernel binds its extents from it
//! (see `kiln_topi::transform::run_time`).
//!
//! - `dyn.full(rank, value, dtype)`: a fill (ONNX ConstantOfShape with a run-time shape);
//! - `dyn.range(start, delta)`: `start + i * delta` (ONNX Range with run-time inputs);
//! - `dyn.strided_slice(data, begin, step)`: `data[begin + i * step]` per axis, `begin` and
//!   `step` int64 with one value per axis (ONNX Slice with run-time inputs);
//! - `dyn.one_hot(indices, values, axis)`: ONNX OneHot with a run-time depth;
//! - `dyn.tile(data)`: ONNX Tile with run-time repeats;
//! - `dyn.center_crop_pad(data, axes)`: ONNX CenterCropPad with a run-time shape;
//! - `dyn.pad(data, pads, value, axes, mode)`: ONNX Pad with run-time pads;
//! - `dyn.pad_axes(data, pads, value, axes, mode)`: the same with run-time axes (a tensor);
//! - `dyn.affine_grid(theta, align_corners)`: ONNX AffineGrid with a run-time size;
//! - `dyn.stft(signal, step, window)`: ONNX STFT with run-time frames, step or length;
//! - `dyn.col2im(cols, strides, dilations, pads)`: ONNX Col2Im of run-time image and block
//!   shapes, over its columns viewed as `[N, C, block..., windows...]`;
//! - `dyn.mel_weight_matrix(dft_length, sample_rate, lower, upper, dtype)`: ONNX
//!   MelWeightMatrix of run-time parameters (the bins bound from the result);
//! - `dyn.cosine_window(window, periodic, dtype)`: ONNX's cosine windows of a run-time size;
//! - `dyn.broadcast_to(data, rank)`: ONNX Expand with a run-time shape (the result's
//!   dimensions that `data` fixes are known, the others -1).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::tensor::cast::parse_dtype;
use crate::op::{input, one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::{DataType, Result};
use kiln_te::Tensor as TeTensor;
use kiln_topi::transform::run_time as rt;

fn full_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let rank = ctx.attrs.int("rank")?;
    if !(0..=64).contains(&rank) {
        return Err(ctx.err(format!("rank {rank} is not in [0, 64]")));
    }
    let dtype = parse_dtype(&ctx.attrs.str("dtype")?).map_err(|e| ctx.err(e.message()))?;
    Ok(Type::tensor(&vec![-1; rank as usize], dtype))
}

fn full(a: &Attrs<'_>) -> Result<Vec<TeTensor>> {
    one(rt::full_run_time(
        a.int("rank")? as usize,
        a.float("value")?,
        parse_dtype(&a.str("dtype")?)?,
    ))
}

fn range_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (_, dtype) = ctx.tensor(0)?;
    let (_, delta) = ctx.tensor(1)?;
    if delta != dtype {
        return Err(ctx.err(format!("start is {dtype}, delta {delta}")));
    }
    Ok(Type::tensor(&[-1], dtype))
}

fn slice_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, dtype) = ctx.tensor(0)?;
    for i in [1, 2] {
        let (p, d) = ctx.tensor(i)?;
        if d != DataType::int(64) || p.len() != 1 || (p[0] >= 0 && p[0] != s.len() as i64) {
            return Err(ctx.err(format!(
                "argument {i} must be int64 with one value per axis of the rank-{} data, it \
                 is {d} {p:?}",
                s.len()
            )));
        }
    }
    Ok(Type::tensor(&vec![-1; s.len()], dtype))
}

fn one_hot_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, _) = ctx.tensor(0)?;
    let (v, dtype) = ctx.tensor(1)?;
    let axis = ctx.attrs.int("axis")?;
    if !(0..=s.len() as i64).contains(&axis) || v != [2] {
        return Err(ctx.err(format!(
            "axis {axis} of a rank-{} result, values of shape {v:?} (two values expected)",
            s.len() + 1
        )));
    }
    let mut out = s.to_vec();
    out.insert(axis as usize, -1);
    Ok(Type::tensor(&out, dtype))
}

fn broadcast_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, dtype) = ctx.tensor(0)?;
    let rank = ctx.attrs.int("rank")?;
    if !(s.len() as i64..=64).contains(&rank) {
        return Err(ctx.err(format!(
            "rank {rank} is not in [{}, 64] (a rank-{} input)",
            s.len(),
            s.len()
        )));
    }
    let mut out = vec![-1; rank as usize - s.len()];
    out.extend(s.iter().map(|&d| if d == 1 { -1 } else { d }));
    Ok(Type::tensor(&out, dtype))
}

fn center_crop_pad_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, dtype) = ctx.tensor(0)?;
    let axes = ctx.attrs.ints("axes")?;
    let mut out = s.to_vec();
    for &a in &axes {
        let d = usize::try_from(a)
            .ok()
            .and_then(|a| out.get_mut(a))
            .ok_or_else(|| ctx.err(format!("axis {a} of a rank-{} input", s.len())))?;
        *d = -1;
    }
    Ok(Type::tensor(&out, dtype))
}

fn pad_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let t = center_crop_pad_rel(ctx)?;
    let (_, dtype) = ctx.tensor(0)?;
    let (p, pt) = ctx.tensor(1)?;
    let (v, vt) = ctx.tensor(2)?;
    let axes = ctx.attrs.ints("axes")?.len() as i64;
    if p != [2 * axes] || pt != DataType::int(64) || v.iter().product::<i64>() != 1 || vt != dtype {
        return Err(ctx.err(format!(
            "pads must be int64 [{}] and the value one {dtype}, got {pt}{p:?} and {vt}{v:?}",
            2 * axes
        )));
    }
    Ok(t)
}

fn pad_axes_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, dtype) = ctx.tensor(0)?;
    let (p, pt) = ctx.tensor(1)?;
    let (v, vt) = ctx.tensor(2)?;
    let (a, at) = ctx.tensor(3)?;
    let ok = matches!((p, a), ([p], [a]) if *a >= 0 && *p == 2 * a);
    if !ok || pt != DataType::int(64) || at != DataType::int(64) {
        return Err(ctx.err(format!(
            "pads and axes must be int64 with 2 widths per axis, got {pt}{p:?} and {at}{a:?}"
        )));
    }
    if v.iter().product::<i64>() != 1 || vt != dtype {
        return Err(ctx.err(format!("the value must be one {dtype}, got {vt}{v:?}")));
    }
    Ok(Type::tensor(&vec![-1; s.len()], dtype))
}

fn stft_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, dtype) = ctx.tensor(0)?;
    let (st, sd) = ctx.tensor(1)?;
    let (w, wd) = ctx.tensor(2)?;
    let ok = matches!(s, [_, _, 1 | 2])
        && st.iter().product::<i64>() == 1
        && (sd == DataType::int(64) || sd == DataType::int(32))
        && w.len() == 1
        && wd == dtype;
    if !ok {
        return Err(ctx.err(format!(
            "the signal must be [batch, length, 1 or 2], the step one integer and the window a \
             1-D {dtype}; got {dtype}{s:?}, {sd}{st:?} and {wd}{w:?}"
        )));
    }
    Ok(Type::tensor(&[s[0], -1, -1, 2], dtype))
}

fn mel_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    for i in 0..4 {
        let (s, _) = ctx.tensor(i)?;
        if s.iter().product::<i64>() != 1 {
            return Err(ctx.err(format!("argument {i} must hold one value, it is {s:?}")));
        }
    }
    let dtype = parse_dtype(&ctx.attrs.str("dtype")?).map_err(|e| ctx.err(e.message()))?;
    Ok(Type::tensor(&[-1, -1], dtype))
}

fn col2im_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, dtype) = ctx.tensor(0)?;
    let r = ctx.attrs.ints("strides")?.len();
    if r == 0 || s.len() != 2 + 2 * r {
        return Err(ctx.err(format!(
            "the columns must be [N, C, block..., windows...] for {r} spatial axes, got {s:?}"
        )));
    }
    let mut out = s[..2].to_vec();
    out.extend(vec![-1; r]);
    Ok(Type::tensor(&out, dtype))
}

fn affine_grid_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (t, dtype) = ctx.tensor(0)?;
    match t {
        [n, r @ (2 | 3), c] if *c == r + 1 => {
            let mut out = vec![*n];
            out.extend(vec![-1; *r as usize]);
            out.push(*r);
            Ok(Type::tensor(&out, dtype))
        }
        _ => Err(ctx.err(format!("theta must be [N, 2, 3] or [N, 3, 4], got {t:?}"))),
    }
}

fn window_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let dtype = parse_dtype(&ctx.attrs.str("dtype")?).map_err(|e| ctx.err(e.message()))?;
    Ok(Type::tensor(&[-1], dtype))
}

fn tile_rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, dtype) = ctx.tensor(0)?;
    Ok(Type::tensor(&vec![-1; s.len()], dtype))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("dyn.full", &[], OpPattern::Opaque, full_rel)
            .attrs(vec![
                AttrSpec::new("rank", AttrKind::Int, 0i64),
                AttrSpec::new("value", AttrKind::Float, 0.0),
                AttrSpec::new("dtype", AttrKind::Str, "float32"),
            ])
            .compute(|_, a, _| full(a)),
    );
    v.push(
        OpDef::new(
            "dyn.range",
            &["start", "delta"],
            OpPattern::Opaque,
            range_rel,
        )
        .compute(|i, _, _| {
            one(rt::range_run_time(
                input("dyn.range", i, 0)?,
                input("dyn.range", i, 1)?,
            ))
        }),
    );
    v.push(
        OpDef::new(
            "dyn.strided_slice",
            &["data", "begin", "step"],
            OpPattern::Opaque,
            slice_rel,
        )
        .compute(|i, _, _| {
            let op = "dyn.strided_slice";
            one(rt::strided_slice_run_time(
                input(op, i, 0)?,
                input(op, i, 1)?,
                input(op, i, 2)?,
            ))
        }),
    );
    v.push(
        OpDef::new(
            "dyn.one_hot",
            &["indices", "values"],
            OpPattern::Opaque,
            one_hot_rel,
        )
        .attrs(vec![AttrSpec::new("axis", AttrKind::Int, 0i64)])
        .compute(|i, a, _| {
            let op = "dyn.one_hot";
            one(rt::one_hot_run_time(
                input(op, i, 0)?,
                input(op, i, 1)?,
                a.int("axis")? as usize,
            ))
        }),
    );
    v.push(
        OpDef::new(
            "dyn.broadcast_to",
            &["data"],
            OpPattern::Opaque,
            broadcast_rel,
        )
        .attrs(vec![AttrSpec::new("rank", AttrKind::Int, 0i64)])
        .compute(|i, a, _| {
            let x = input("dyn.broadcast_to", i, 0)?;
            one(rt::broadcast_run_time(x, a.int("rank")? as usize))
        }),
    );
    v.push(
        OpDef::new(
            "dyn.center_crop_pad",
            &["data"],
            OpPattern::Opaque,
            center_crop_pad_rel,
        )
        .attrs(vec![AttrSpec::new(
            "axes",
            AttrKind::Ints,
            Vec::<i64>::new(),
        )])
        .compute(|i, a, _| {
            let axes: Vec<usize> = a.ints("axes")?.iter().map(|&x| x as usize).collect();
            one(rt::center_crop_pad_run_time(
                input("dyn.center_crop_pad", i, 0)?,
                &axes,
            ))
        }),
    );
    v.push(
        OpDef::new(
            "dyn.pad",
            &["data", "pads", "value"],
            OpPattern::Opaque,
            pad_rel,
        )
        .attrs(vec![
            AttrSpec::new("axes", AttrKind::Ints, Vec::<i64>::new()),
            AttrSpec::new("mode", AttrKind::Str, "constant"),
        ])
        .compute(|i, a, _| {
            let op = "dyn.pad";
            let axes: Vec<usize> = a.ints("axes")?.iter().map(|&x| x as usize).collect();
            one(rt::pad_run_time(
                input(op, i, 0)?,
                input(op, i, 1)?,
                input(op, i, 2)?,
                rt::PadAxes::Given(&axes),
                &a.str("mode")?,
            ))
        }),
    );
    v.push(
        OpDef::new(
            "dyn.pad_axes",
            &["data", "pads", "value", "axes"],
            OpPattern::Opaque,
            pad_axes_rel,
        )
        .attrs(vec![AttrSpec::new("mode", AttrKind::Str, "constant")])
        .compute(|i, a, _| {
            let op = "dyn.pad_axes";
            one(rt::pad_run_time(
                input(op, i, 0)?,
                input(op, i, 1)?,
                input(op, i, 2)?,
                rt::PadAxes::RunTime(input(op, i, 3)?),
                &a.str("mode")?,
            ))
        }),
    );
    v.push(
        OpDef::new(
            "dyn.stft",
            &["signal", "step", "window"],
            OpPattern::Opaque,
            stft_rel,
        )
        .compute(|i, _, _| {
            let op = "dyn.stft";
            one(kiln_topi::transform::spectral::stft_run_time(
                input(op, i, 0)?,
                input(op, i, 1)?,
                input(op, i, 2)?,
            ))
        }),
    );
    v.push(
        OpDef::new(
            "dyn.mel_weight_matrix",
            &[
                "dft_length",
                "sample_rate",
                "lower_edge_hertz",
                "upper_edge_hertz",
            ],
            OpPattern::Opaque,
            mel_rel,
        )
        .attrs(vec![AttrSpec::new("dtype", AttrKind::Str, "float32")])
        .compute(|i, a, _| {
            let op = "dyn.mel_weight_matrix";
            one(kiln_topi::transform::spectral::mel_weight_matrix_run_time(
                input(op, i, 0)?,
                input(op, i, 1)?,
                input(op, i, 2)?,
                input(op, i, 3)?,
                parse_dtype(&a.str("dtype")?)?,
            ))
        }),
    );
    v.push(
        OpDef::new("dyn.col2im", &["cols"], OpPattern::Opaque, col2im_rel)
            .attrs(vec![
                AttrSpec::new("strides", AttrKind::Ints, Vec::<i64>::new()),
                AttrSpec::new("dilations", AttrKind::Ints, Vec::<i64>::new()),
                AttrSpec::new("pads", AttrKind::Ints, Vec::<i64>::new()),
            ])
            .compute(|i, a, _| {
                one(kiln_topi::nn::col2im::col2im_run_time(
                    input("dyn.col2im", i, 0)?,
                    &a.ints("strides")?,
                    &a.ints("dilations")?,
                    &a.ints("pads")?,
                ))
            }),
    );
    v.push(
        OpDef::new(
            "dyn.affine_grid",
            &["theta"],
            OpPattern::Opaque,
            affine_grid_rel,
        )
        .attrs(vec![AttrSpec::new("align_corners", AttrKind::Bool, false)])
        .compute(|i, a, _| {
            one(rt::affine_grid_run_time(
                input("dyn.affine_grid", i, 0)?,
                a.bool("align_corners")?,
            ))
        }),
    );
    v.push(
        OpDef::new("dyn.cosine_window", &[], OpPattern::Opaque, window_rel)
            .attrs(vec![
                AttrSpec::new("window", AttrKind::Str, "HannWindow"),
                AttrSpec::new("periodic", AttrKind::Bool, true),
                AttrSpec::new("dtype", AttrKind::Str, "float32"),
            ])
            .compute(|_, a, _| {
                one(rt::cosine_window_run_time(
                    &a.str("window")?,
                    a.bool("periodic")?,
                    parse_dtype(&a.str("dtype")?)?,
                ))
            }),
    );
    v.push(
        OpDef::new("dyn.tile", &["data"], OpPattern::Opaque, tile_rel)
            .compute(|i, _, _| one(rt::tile_run_time(input("dyn.tile", i, 0)?))),
    );
}
