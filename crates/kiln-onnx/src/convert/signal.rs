//! The signal operators: DFT (opsets 17 and 20), STFT and MelWeightMatrix.
//!
//! A DFT along one axis is a product with constant cosine and sine matrices built at compile
//! time (in f64, then the signal's type): the transformed axis is moved last, real and
//! imaginary parts are multiplied separately, and the two results are stacked as ONNX's
//! trailing `[re, im]` axis. A `dft_length` above the signal's length zero-pads (the extra
//! rows of the matrices would multiply zeros, so they are left out), one below truncates;
//! `onesided` keeps the first `N/2 + 1` frequencies; an inverse transform scales by `1/N`, and
//! an inverse one-sided transform is numpy's `irfft` (real output, the Hermitian half counted
//! twice). STFT gathers its frames with one `take` of constant indices, applies the window and
//! runs the same DFT along the frame axis. MelWeightMatrix, whose inputs must be constants,
//! is computed here as ONNX's reference defines it.

use std::collections::HashMap;
use std::f64::consts::PI;

use kiln_graph::ir::{Expr, Var};
use kiln_runtime::vm::shape_expr::op;

use super::conv::slice_axis;
use super::generate::attr_dtype;
use super::nn::matmul_of;
use super::shaped::{kernel, run_time_shaped, ShapedKernel, Shapes};
use super::{
    call, constant, dtype_of, norm_axis, reshape, shape_of, transpose, CResult, ConvertFn, Ctx, Msg,
};
use crate::Node;

/// What a DFT computes.
#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Forward {
        onesided: bool,
    },
    Inverse,
    /// Inverse of a one-sided spectrum: a real signal.
    InverseOneSided,
}

/// `x` (`[..., c]`, `c` 1 or 2) transformed along `axis` (not the last) with length `n`.
fn dft(x: Expr, axis: usize, n: i64, dir: Direction) -> CResult<Expr> {
    let s = shape_of(&x)?;
    let r = s.len();
    let c = s[r - 1];
    if r < 2 || axis >= r - 1 {
        return Err(Msg(format!(
            "the transformed axis {axis} must be a signal axis of the input {s:?} (not the \
             last, which holds the real and imaginary parts)"
        )));
    }
    if c != 1 && c != 2 {
        return Err(Msg(format!(
            "the last axis must have 1 (real) or 2 (complex) entries, the input is {s:?}"
        )));
    }
    if n < 1 {
        return Err(Msg(format!("dft_length must be positive, got {n}")));
    }
    let d = dtype_of(&x)?;
    let part = |k: i64| -> CResult<Expr> {
        reshape(
            slice_axis(x.clone(), (r - 1) as i64, k, 1, 1)?,
            s[..r - 1].to_vec(),
        )
    };
    // The transformed axis moved last.
    let mut perm: Vec<i64> = (0..(r - 1) as i64).filter(|&a| a != axis as i64).collect();
    perm.push(axis as i64);
    let mut back = vec![0i64; r - 1];
    for (i, &p) in perm.iter().enumerate() {
        back[p as usize] = i as i64;
    }
    let last = |e: Expr| transpose(e, perm.clone());
    let re = last(part(0)?)?;
    let im = if c == 2 { Some(last(part(1)?)?) } else { None };
    let len = s[axis];
    // Input rows used and output columns.
    let (rows, cols) = match dir {
        Direction::Forward { onesided: true } => (len.min(n), n / 2 + 1),
        Direction::Forward { .. } | Direction::Inverse => (len.min(n), n),
        Direction::InverseOneSided => (len.min(n / 2 + 1), n),
    };
    let cut = |e: Expr| -> CResult<Expr> {
        if rows == len {
            Ok(e)
        } else {
            slice_axis(e, -1, 0, rows, 1)
        }
    };
    let (re, im) = (cut(re)?, im.map(cut).transpose()?);
    let scale = if dir == Direction::Inverse || dir == Direction::InverseOneSided {
        1.0 / n as f64
    } else {
        1.0
    };
    let matrix = |f: fn(f64) -> f64, hermitian: bool| -> CResult<Expr> {
        let mut v = Vec::with_capacity((rows * cols) as usize);
        for j in 0..rows {
            let w = if hermitian && j != 0 && !(n % 2 == 0 && j == n / 2) {
                2.0
            } else {
                1.0
            };
            for k in 0..cols {
                let theta = 2.0 * PI * ((j * k) % n) as f64 / n as f64;
                v.push(w * scale * f(theta));
            }
        }
        constant(&v, &[rows, cols], d)
    };
    let herm = dir == Direction::InverseOneSided;
    let cos = matrix(f64::cos, herm)?;
    let sin = matrix(f64::sin, herm)?;
    let mm = |a: &Expr, m: &Expr| matmul_of(a.clone(), m.clone());
    let add = |a: Expr, b: Expr| call("add", vec![a, b], &[]);
    let sub = |a: Expr, b: Expr| call("subtract", vec![a, b], &[]);
    let neg = |a: Expr| call("negative", vec![a], &[]);
    let parts = match (dir, &im) {
        (Direction::Forward { .. }, None) => vec![mm(&re, &cos)?, neg(mm(&re, &sin)?)?],
        (Direction::Forward { .. }, Some(im)) => vec![
            add(mm(&re, &cos)?, mm(im, &sin)?)?,
            sub(mm(im, &cos)?, mm(&re, &sin)?)?,
        ],
        (Direction::Inverse, None) => vec![mm(&re, &cos)?, mm(&re, &sin)?],
        (Direction::Inverse, Some(im)) => vec![
            sub(mm(&re, &cos)?, mm(im, &sin)?)?,
            add(mm(im, &cos)?, mm(&re, &sin)?)?,
        ],
        (Direction::InverseOneSided, None) => vec![mm(&re, &cos)?],
        (Direction::InverseOneSided, Some(im)) => vec![sub(mm(&re, &cos)?, mm(im, &sin)?)?],
    };
    let parts = parts
        .into_iter()
        .map(|p| {
            let p = transpose(p, back.clone())?;
            call("expand_dims", vec![p], &[("axis", (r as i64 - 1).into())])
        })
        .collect::<CResult<Vec<_>>>()?;
    if parts.len() == 1 {
        return Ok(parts.into_iter().next().expect("one part"));
    }
    call("concatenate", parts, &[("axis", (r as i64 - 1).into())])
}

/// A constant scalar integer input, if present.
fn const_int(ctx: &Ctx<'_>, node: &Node, i: usize) -> CResult<Option<i64>> {
    Ok(ctx.const_ints(node, i)?.and_then(|v| v.first().copied()))
}

fn dft_op(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let r = shape_of(&x)?.len();
    let axis = if ctx.opset >= 20 {
        const_int(ctx, node, 2)?.unwrap_or(-2)
    } else {
        node.attr_i("axis", 1)?
    };
    let axis = norm_axis(axis, r)?;
    let inverse = node.attr_i("inverse", 0)? != 0;
    let onesided = node.attr_i("onesided", 0)? != 0;
    let len = shape_of(&x)?.get(axis).copied().unwrap_or(0);
    let n = match const_int(ctx, node, 1)? {
        Some(n) => n,
        None if inverse && onesided => 2 * (len - 1),
        None => len,
    };
    let dir = match (inverse, onesided) {
        (false, o) => Direction::Forward { onesided: o },
        (true, false) => Direction::Inverse,
        (true, true) => Direction::InverseOneSided,
    };
    Ok(vec![dft(x, axis, n, dir)?])
}

fn stft(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let s = shape_of(&x)?;
    if s.len() != 3 {
        return Err(Msg(format!(
            "the signal must be [batch, length, 1 or 2], got {s:?}"
        )));
    }
    let step = const_int(ctx, node, 1)?.ok_or_else(|| ctx.not_constant(node, 1))?;
    let window = ctx.opt_input(node, 2)?;
    let frame = match const_int(ctx, node, 3)? {
        Some(f) => f,
        None => match &window {
            Some(w) => shape_of(w)?[0],
            None => s[1],
        },
    };
    if step < 1 || frame < 1 || frame > s[1] {
        return Err(Msg(format!(
            "frame_step {step} and frame_length {frame} must be positive, the frame no longer \
             than the signal ({})",
            s[1]
        )));
    }
    let frames = 1 + (s[1] - frame) / step;
    let idx: Vec<i64> = (0..frames)
        .flat_map(|f| (0..frame).map(move |j| f * step + j))
        .collect();
    let idx = reshape(super::const_i64(&idx)?, vec![frames, frame])?;
    let mut framed = call("take", vec![x, idx], &[("axis", 1i64.into())])?;
    if let Some(w) = window {
        if shape_of(&w)? != [frame] {
            return Err(Msg(format!(
                "the window must be [{frame}] (the frame length), got {:?}",
                shape_of(&w)?
            )));
        }
        framed = call("multiply", vec![framed, reshape(w, vec![frame, 1])?], &[])?;
    }
    let onesided = node.attr_i("onesided", 1)? != 0;
    Ok(vec![dft(
        framed,
        2,
        frame,
        Direction::Forward { onesided },
    )?])
}

fn mel_weight_matrix(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let int = |i: usize| -> CResult<i64> {
        const_int(ctx, node, i)?.ok_or_else(|| ctx.not_constant(node, i))
    };
    let float = |i: usize| -> CResult<f64> {
        ctx.const_floats(node, i)?
            .and_then(|v| v.first().copied())
            .ok_or_else(|| ctx.not_constant(node, i))
    };
    let (bins, dft_length, rate) = (int(0)?, int(1)?, int(2)?);
    let (lo, hi) = (float(3)?, float(4)?);
    if bins < 1 || dft_length < 1 || rate < 1 {
        return Err(Msg(format!(
            "num_mel_bins {bins}, dft_length {dft_length} and sample_rate {rate} must be positive"
        )));
    }
    let spectrum = dft_length / 2 + 1;
    let mel = |hz: f64| 2595.0 * (hz / 700.0).ln_1p() / 10f64.ln();
    let (lo_mel, hi_mel) = (mel(lo), mel(hi));
    let step = (hi_mel - lo_mel) / (bins + 2) as f64;
    let points: Vec<i64> = (0..bins + 2)
        .map(|i| {
            let hz = 700.0 * ((i as f64 * step + lo_mel) / 2595.0 * 10f64.ln()).exp_m1();
            (((dft_length + 1) as f64 * hz) / rate as f64).floor() as i64
        })
        .collect();
    let mut out = vec![0.0; (spectrum * bins) as usize];
    let mut set = |j: i64, i: i64, v: f64| -> CResult<()> {
        if j < 0 || j >= spectrum {
            return Err(Msg(format!(
                "mel band {i} reaches frequency bin {j}, outside the {spectrum} bins of \
                 dft_length {dft_length} (upper_edge_hertz above the Nyquist frequency?)"
            )));
        }
        out[(j * bins + i) as usize] = v;
        Ok(())
    };
    for i in 0..bins {
        let (l, c, h) = (
            points[i as usize],
            points[i as usize + 1],
            points[i as usize + 2],
        );
        if c == l {
            set(c, i, 1.0)?;
        } else {
            for j in l..=c {
                set(j, i, (j - l) as f64 / (c - l) as f64)?;
            }
        }
        if h > c {
            for j in c..h {
                set(j, i, (h - j) as f64 / (h - c) as f64)?;
            }
        }
    }
    let d = attr_dtype(node, "output_datatype", kiln_ffi::DataType::float(32))?;
    Ok(vec![constant(&out, &[spectrum, bins], d)?])
}

/// Registers DFT, STFT and MelWeightMatrix.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("DFT", dft_op);
    t.insert("STFT", stft);
    t.insert("MelWeightMatrix", mel_weight_matrix);
}

/// The domain of the internal node a run-time STFT becomes.
pub(super) const DOMAIN: &str = "kiln.signal";

/// STFT whose step or frame length is known only at run time, or whose signal or window has
/// run-time extents: one kernel (`dyn.stft`) over the signal, the step and a window whose
/// length is the frame length (ones of the frame length, made first, when none is given).
pub(super) fn stft_expand(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Option<Vec<Node>>> {
    let x = ctx.input(node, 0)?;
    let window = ctx.opt_input(node, 2)?;
    let run_time = run_time_shaped(&x)
        || window.as_ref().is_some_and(run_time_shaped)
        || ctx.run_time_input(node, 1)?
        || ctx.run_time_input(node, 3)?;
    if !run_time {
        return Ok(None);
    }
    let s = shape_of(&x)?;
    if s.len() != 3 {
        return Err(Msg(format!(
            "the signal must be [batch, length, 1 or 2], got {s:?}"
        )));
    }
    let out = node
        .outputs
        .first()
        .filter(|o| !o.is_empty())
        .ok_or("output #0 is required")?;
    let internal = |what: &str| format!("{out}::{what}");
    let step = node.input(1).ok_or("input #1 (frame_step) is required")?;
    let frame_length = node.input(3).map(str::to_string);
    let mut nodes = Vec::new();
    let plain = |op: &str, inputs: Vec<String>, output: String| Node {
        name: node.name.clone(),
        op_type: op.into(),
        domain: String::new(),
        inputs,
        outputs: vec![output],
        attributes: Vec::new(),
    };
    let window = match (node.input(2), &frame_length) {
        (Some(w), _) => w.to_string(),
        (None, Some(len)) => {
            // Ones of the frame length: the rectangular window.
            let (one, shape1) = (internal("one"), internal("shape1"));
            ctx.bind(&one, super::scalar(1.0, dtype_of(&x)?)?);
            ctx.bind(&shape1, super::const_i64(&[1])?);
            let names = ["len1", "zeros", "zeros_like", "window"].map(internal);
            nodes.push(plain(
                "Reshape",
                vec![len.clone(), shape1],
                names[0].clone(),
            ));
            nodes.push(plain(
                "ConstantOfShape",
                vec![names[0].clone()],
                names[1].clone(),
            ));
            nodes.push(plain(
                "CastLike",
                vec![names[1].clone(), node.inputs[0].clone()],
                names[2].clone(),
            ));
            nodes.push(plain("Add", vec![names[2].clone(), one], names[3].clone()));
            names[3].clone()
        }
        (None, None) if s[1] >= 0 => {
            let w = internal("window");
            ctx.bind(
                &w,
                constant(&vec![1.0; s[1] as usize], &[s[1]], dtype_of(&x)?)?,
            );
            w
        }
        (None, None) => {
            return Err(
                "a window or frame_length is needed when the signal's length is known only at \
                 run time"
                    .into(),
            )
        }
    };
    let mut inputs = vec![node.inputs[0].clone(), step.to_string(), window];
    inputs.extend(frame_length);
    nodes.push(Node {
        name: node.name.clone(),
        op_type: "Stft".into(),
        domain: DOMAIN.into(),
        inputs,
        outputs: vec![out.clone()],
        attributes: vec![(
            "onesided".into(),
            crate::attr::AttrValue::Int(node.attr_i("onesided", 1)?),
        )],
    });
    Ok(Some(nodes))
}

/// The kernel of the internal STFT node: the shape program checks a positive step, a frame
/// no longer than the signal and a window of the frame length.
pub(super) fn kernel_of(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    let vars = (0..3)
        .map(|i| {
            let e = ctx.input(node, i)?;
            let v = Var::new(&format!("p{i}"), e.ty()?);
            Ok((e, v))
        })
        .collect::<CResult<Vec<_>>>()?;
    let body = call(
        "dyn.stft",
        vars.iter().map(|(_, v)| v.expr()).collect(),
        &[],
    )?;
    // Shape arguments: 0 the signal, 1 the step, 2 the window, 3 the frame length if given.
    let mut code = vec![op::PUSH, 0, op::VALUE, 1, 0, op::LT, op::CHECK];
    code.extend([
        op::DIM,
        2,
        0,
        op::DIM,
        0,
        1,
        op::PUSH,
        1,
        op::ADD,
        op::LT,
        op::CHECK,
    ]);
    let mut args: Vec<Expr> = vars.iter().map(|(e, _)| e.clone()).collect();
    if let Some(len) = ctx.opt_input(node, 3)? {
        code.extend([op::VALUE, 3, 0, op::DIM, 2, 0, op::EQ, op::CHECK]);
        args.push(len);
    }
    code.extend([op::DIM, 0, 0, op::EMIT]);
    code.extend([
        op::DIM,
        0,
        1,
        op::DIM,
        2,
        0,
        op::SUB,
        op::VALUE,
        1,
        0,
        op::FLOOR_DIV,
    ]);
    code.extend([op::PUSH, 1, op::ADD, op::EMIT]);
    if node.attr_i("onesided", 1)? != 0 {
        code.extend([
            op::DIM,
            2,
            0,
            op::PUSH,
            2,
            op::FLOOR_DIV,
            op::PUSH,
            1,
            op::ADD,
            op::EMIT,
        ]);
    } else {
        code.extend([op::DIM, 2, 0, op::EMIT]);
    }
    code.extend([op::PUSH, 2, op::EMIT]);
    Ok(Some(kernel(
        Shapes::Program { code, rank: 4 },
        args,
        vars,
        body,
        &[(0, None)],
    )?))
}

/// MelWeightMatrix with a parameter known only at run time: one kernel, its extents from the
/// number of bins and the DFT length (each checked positive, as the sample rate).
pub(super) fn mel_run_time(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    let mut run_time = false;
    for i in 0..5 {
        run_time |= ctx.run_time_input(node, i)?;
    }
    if !run_time {
        return Ok(None);
    }
    let inputs = (0..5)
        .map(|i| ctx.input(node, i))
        .collect::<CResult<Vec<_>>>()?;
    let vars = inputs[1..]
        .iter()
        .enumerate()
        .map(|(i, e)| Ok((e.clone(), Var::new(&format!("p{i}"), e.ty()?))))
        .collect::<CResult<Vec<_>>>()?;
    let d = attr_dtype(node, "output_datatype", kiln_ffi::DataType::float(32))?;
    let body = call(
        "dyn.mel_weight_matrix",
        vars.iter().map(|(_, v)| v.expr()).collect(),
        &[("dtype", d.to_string().as_str().into())],
    )?;
    // Shape arguments: 0 the bins, 1 the DFT length, 2 the sample rate.
    let mut code = Vec::new();
    for a in 0..3 {
        code.extend([op::PUSH, 0, op::VALUE, a, 0, op::LT, op::CHECK]);
    }
    code.extend([
        op::VALUE,
        1,
        0,
        op::PUSH,
        2,
        op::FLOOR_DIV,
        op::PUSH,
        1,
        op::ADD,
        op::EMIT,
    ]);
    code.extend([op::VALUE, 0, 0, op::EMIT]);
    Ok(Some(kernel(
        Shapes::Program { code, rank: 2 },
        inputs[..3].to_vec(),
        vars,
        body,
        &[(0, None)],
    )?))
}
