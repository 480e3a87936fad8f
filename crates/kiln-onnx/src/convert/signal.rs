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
use super::shaped::{kernel, run_time_shaped, step_node, Result_, ShapedKernel, Shapes, Source};
use super::{
    call, constant, dtype_of, norm_axis, reshape, shape_of, transpose, CResult, ConvertFn, Ctx, Msg,
};
use crate::attr::AttrValue;
use crate::proto::{AttributeProto, GraphProto, NodeProto, ValueInfoProto};
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
    let out = super::shaped::first_output(node)?;
    let internal = |what: &str| format!("{out}::{what}");
    let step = node.input(1).ok_or("input #1 (frame_step) is required")?;
    let frame_length = node.input(3).map(str::to_string);
    let mut nodes = Vec::new();
    let plain = |op: &str, inputs: Vec<String>, output: String| {
        step_node(node, op, "", inputs, vec![output], Vec::new())
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
            AttrValue::Int(node.attr_i("onesided", 1)?),
        )],
    });
    Ok(Some(nodes))
}

/// The kernel of the internal STFT node: the shape program checks a positive step, a frame
/// no longer than the signal and a window of the frame length.
pub(super) fn kernel_of(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    if node.op_type == "AxisCheck" {
        return axis_check(ctx, node).map(Some);
    }
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

/// DFT (opset 20) whose axis is known only at run time: the axis checked first (a signal
/// axis, not the last: a shape program refuses others), then a chain of Ifs on its value,
/// each branch the DFT along one axis (compiled like any DFT); `None` otherwise.
pub(super) fn dft_expand(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Option<Vec<Node>>> {
    if ctx.opset < 20 || !ctx.run_time_input(node, 2)? {
        return Ok(None);
    }
    let r = shape_of(&ctx.input(node, 0)?)?.len() as i64;
    if r < 2 {
        return Err(Msg(format!(
            "the input must have a signal axis, its rank is {r}"
        )));
    }
    let out = super::shaped::first_output(node)?;
    let internal = |w: String| format!("{out}::{w}");
    let (axis, checked) = (node.inputs[2].clone(), internal("checked".into()));
    let plain = |op: &str, domain: &str, inputs: Vec<String>, output: String| {
        step_node(node, op, domain, inputs, vec![output], Vec::new())
    };
    let mut nodes = vec![plain(
        "AxisCheck",
        DOMAIN,
        vec![node.inputs[0].clone(), axis.clone()],
        checked.clone(),
    )];
    // cond_k: the axis is k, or k counted from the end.
    for k in 0..r - 1 {
        let (pos, neg) = (
            internal(format!("axis{k}")),
            internal(format!("axis{k}_from_end")),
        );
        ctx.bind(
            &pos,
            super::reshape(super::const_i64(&[k])?, Vec::<i64>::new())?,
        );
        ctx.bind(
            &neg,
            super::reshape(super::const_i64(&[k - r])?, Vec::<i64>::new())?,
        );
        let (e, f) = (
            internal(format!("is{k}")),
            internal(format!("is{k}_from_end")),
        );
        nodes.push(plain("Equal", "", vec![axis.clone(), pos], e.clone()));
        nodes.push(plain("Equal", "", vec![axis.clone(), neg], f.clone()));
        nodes.push(plain("Or", "", vec![e, f], internal(format!("cond{k}"))));
    }
    let int_attr = |n: &str| -> CResult<AttributeProto> {
        Ok(AttributeProto {
            name: Some(n.into()),
            i: Some(node.attr_i(n, 0)?),
            r#type: Some(2),
            ..Default::default()
        })
    };
    let attrs = vec![int_attr("inverse")?, int_attr("onesided")?];
    let len = node.input(1).unwrap_or("").to_string();
    let dft_along = |k: i64, output: &str| NodeProto {
        input: vec![checked.clone(), len.clone(), internal(format!("axis{k}"))],
        output: vec![output.into()],
        op_type: Some("DFT".into()),
        attribute: attrs.clone(),
        ..Default::default()
    };
    let graph = |name: String, nodes: Vec<NodeProto>, output: String| GraphProto {
        name: Some(name),
        node: nodes,
        output: vec![ValueInfoProto {
            name: Some(output),
            ..Default::default()
        }],
        ..Default::default()
    };
    let graph_attr = |n: &str, g: GraphProto| AttributeProto {
        name: Some(n.into()),
        g: Some(g),
        r#type: Some(5),
        ..Default::default()
    };
    // From the last candidate axis back: branch k takes axis k, else the chain after it.
    let last = r - 2;
    let mut chain: Vec<NodeProto> = vec![dft_along(last, &internal(format!("dft{last}")))];
    let mut chain_out = internal(format!("dft{last}"));
    for k in (0..last).rev() {
        let then_out = internal(format!("dft{k}"));
        let then_g = graph(
            internal(format!("then{k}")),
            vec![dft_along(k, &then_out)],
            then_out,
        );
        let else_g = graph(internal(format!("else{k}")), chain, chain_out);
        let if_out = internal(format!("pick{k}"));
        chain = vec![NodeProto {
            input: vec![internal(format!("cond{k}"))],
            output: vec![if_out.clone()],
            op_type: Some("If".into()),
            attribute: vec![
                graph_attr("then_branch", then_g),
                graph_attr("else_branch", else_g),
            ],
            ..Default::default()
        }];
        chain_out = if_out;
    }
    // The chain's outermost node runs at the top level (its output renamed to the node's).
    let top = chain.pop().expect("one node");
    let attributes = top
        .attribute
        .into_iter()
        .map(|a| {
            (
                a.name.clone().unwrap_or_default(),
                AttrValue::Graph(Box::new(a.g.unwrap_or_default())),
            )
        })
        .collect::<Vec<_>>();
    let top_node = if top.op_type.as_deref() == Some("If") {
        Node {
            name: node.name.clone(),
            op_type: "If".into(),
            domain: String::new(),
            inputs: top.input,
            outputs: vec![out],
            attributes,
        }
    } else {
        let mut n = node.clone();
        n.inputs = top.input;
        n.outputs = vec![out];
        n
    };
    nodes.push(top_node);
    Ok(Some(nodes))
}

/// The internal check of a run-time DFT axis: the signal itself, its axis (the shape
/// program's second argument) a signal axis.
fn axis_check(ctx: &Ctx<'_>, node: &Node) -> CResult<ShapedKernel> {
    let x = ctx.input(node, 0)?;
    let r = shape_of(&x)?.len() as i64;
    let norm = [
        op::VALUE,
        1,
        0,
        op::VALUE,
        1,
        0,
        op::PUSH,
        0,
        op::LT,
        op::PUSH,
        r,
        op::PUSH,
        0,
        op::SELECT,
        op::ADD,
    ];
    let mut code = vec![op::PUSH, -1];
    code.extend(norm);
    code.extend([op::LT, op::CHECK]);
    code.extend(norm);
    code.extend([op::PUSH, r - 1, op::LT, op::CHECK]);
    Ok(ShapedKernel {
        shapes: Shapes::Program { code, rank: 0 },
        shape_args: vec![x.clone(), ctx.input(node, 1)?],
        shape_inputs: Vec::new(),
        kernel: None,
        results: vec![Result_ {
            source: Source::Value(x.clone()),
            view: None,
            ty: x.ty()?,
        }],
    })
}
