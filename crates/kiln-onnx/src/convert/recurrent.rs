//! LSTM, GRU and RNN (forward, reverse, bidirectional; `layout` 0 and 1; activations with
//! their alphas and betas; `clip`; `input_forget`; peepholes; `sequence_lens`; initial
//! states; every optional output).
//!
//! Per direction the input projection of the whole sequence is one `nn.dense` (`[T*B, I]` by
//! `W^T`, plus the biases), then one `nn.lstm` / `nn.gru` / `nn.rnn` runs the recurrence (the
//! recurrent product and the gates fused per step, in one kernel); bidirectional layers stack
//! the two directions' outputs on the direction axis.

use std::collections::HashMap;

use kiln_graph::ir::{AttrValue, Expr};
use kiln_topi::nn::ActivationKind;

use super::control::stack;
use super::conv::slice_axis;
use super::{
    call, constant, dtype_of, reshape, shape_of, transpose, typed, CResult, ConvertFn, Ctx, Msg,
};
use crate::Node;

/// The cell kinds, as their ONNX names.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Lstm,
    Gru,
    Rnn,
}

impl Kind {
    fn gates(self) -> i64 {
        match self {
            Kind::Lstm => 4,
            Kind::Gru => 3,
            Kind::Rnn => 1,
        }
    }

    /// The activations per direction and their defaults.
    fn default_acts(self) -> &'static [&'static str] {
        match self {
            Kind::Lstm => &["Sigmoid", "Tanh", "Tanh"],
            Kind::Gru => &["Sigmoid", "Tanh"],
            Kind::Rnn => &["Tanh"],
        }
    }

    fn op(self) -> &'static str {
        match self {
            Kind::Lstm => "nn.lstm",
            Kind::Gru => "nn.gru",
            Kind::Rnn => "nn.rnn",
        }
    }
}

fn lstm(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    convert(ctx, node, Kind::Lstm)
}

fn gru(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    convert(ctx, node, Kind::Gru)
}

fn rnn(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    convert(ctx, node, Kind::Rnn)
}

/// The activation attributes of each direction: `(name, alpha, beta)` per activation, the
/// lists consumed in order (an activation with one parameter takes the next alpha, one with
/// two the next alpha and beta; missing values are the ONNX operators' defaults).
fn activations(node: &Node, kind: Kind, dirs: usize) -> CResult<Vec<Vec<(String, f64, f64)>>> {
    let per = kind.default_acts().len();
    let defaults: Vec<&str> = (0..dirs)
        .flat_map(|_| kind.default_acts().iter().copied())
        .collect();
    let names = node.attr_strings("activations", &defaults)?;
    if names.len() != per * dirs {
        return Err(Msg(format!(
            "attribute `activations` has {} entries, {} expected ({per} per direction, {dirs} \
             direction(s))",
            names.len(),
            per * dirs
        )));
    }
    let alphas = node.attr_floats("activation_alpha", &[])?;
    let betas = node.attr_floats("activation_beta", &[])?;
    let (mut ai, mut bi) = (0, 0);
    let mut out = Vec::new();
    for d in 0..dirs {
        let mut acts = Vec::new();
        for name in &names[d * per..(d + 1) * per] {
            let (k, params) = ActivationKind::parse(name).ok_or_else(|| {
                Msg(format!(
                    "attribute `activations`: unknown activation `{name}`"
                ))
            })?;
            let (mut alpha, mut beta) = k.defaults();
            if params >= 1 {
                if let Some(&a) = alphas.get(ai) {
                    alpha = a as f64;
                }
                ai += 1;
            }
            if params >= 2 {
                if let Some(&b) = betas.get(bi) {
                    beta = b as f64;
                }
                bi += 1;
            }
            acts.push((k.name().to_string(), alpha, beta));
        }
        out.push(acts);
    }
    Ok(out)
}

/// Slice `d` of axis 0 of `x`, that axis dropped.
fn direction(x: &Expr, d: i64) -> CResult<Expr> {
    let s = shape_of(x)?;
    reshape(slice_axis(x.clone(), 0, d, 1, 1)?, s[1..].to_vec())
}

fn convert(ctx: &mut Ctx<'_>, node: &Node, kind: Kind) -> CResult<Vec<Expr>> {
    let mut x = ctx.input(node, 0)?;
    let w = ctx.input(node, 1)?;
    let r = ctx.input(node, 2)?;
    let layout = node.attr_i("layout", 0)?;
    if layout != 0 && layout != 1 {
        return Err(Msg(format!(
            "attribute `layout` must be 0 or 1, got {layout}"
        )));
    }
    if shape_of(&x)?.len() != 3 {
        return Err(Msg(format!(
            "input X must be 3-D, got shape {:?}",
            shape_of(&x)?
        )));
    }
    if layout == 1 {
        x = transpose(x, vec![1i64, 0, 2])?;
    }
    let xs = shape_of(&x)?;
    let (t, b, i) = (xs[0], xs[1], xs[2]);
    let dt = dtype_of(&x)?;
    let dir = node.attr_s("direction", "forward")?;
    let dirs: usize = match dir.as_str() {
        "forward" | "reverse" => 1,
        "bidirectional" => 2,
        _ => {
            return Err(Msg(format!(
                "attribute `direction` must be forward, reverse or bidirectional, got `{dir}`"
            )))
        }
    };
    let g = kind.gates();
    let ws = shape_of(&w)?;
    let rs = shape_of(&r)?;
    let h = rs.get(2).copied().unwrap_or(0);
    if ws.len() != 3 || rs.len() != 3 || ws[0] != dirs as i64 || rs[0] != dirs as i64 {
        return Err(Msg(format!(
            "W {ws:?} and R {rs:?} must be [{dirs}, {g}*hidden, input] and [{dirs}, {g}*hidden, \
             hidden] for direction `{dir}`"
        )));
    }
    if ws[1] != g * h || ws[2] != i || rs[1] != g * h {
        return Err(Msg(format!(
            "W {ws:?} and R {rs:?} do not fit input size {i} and hidden size {h} ({g} gate(s))"
        )));
    }
    if let Some(hs) = node.opt_i("hidden_size")? {
        if hs != h {
            return Err(Msg(format!(
                "attribute `hidden_size` = {hs} but R gives hidden size {h}"
            )));
        }
    }
    let bias = ctx.opt_input(node, 3)?;
    if b < 0 || i < 0 {
        return Err(Msg(format!(
            "input X has the shape {xs:?}: its batch and input sizes must be known at compile \
             time (the sequence length may be known only at run time)"
        )));
    }
    // Without `sequence_lens` every row runs the whole sequence: a length the layer clamps
    // to the sequence's (known at run time or not).
    let full = if t < 0 { i32::MAX as i64 } else { t };
    let lens = match ctx.opt_input(node, 4)? {
        Some(l) => call("cast", vec![l], &[("dtype", "int32".into())])?,
        None => constant(
            &vec![full as f64; b as usize],
            &[b],
            kiln_ffi::DataType::int(32),
        )?,
    };
    // Initial states in [D, B, H] (layout 1 gives [B, D, H]).
    let state = |e: Option<Expr>| -> CResult<Option<Expr>> {
        match e {
            Some(s) if layout == 1 => Ok(Some(transpose(s, vec![1i64, 0, 2])?)),
            other => Ok(other),
        }
    };
    let h0 = state(ctx.opt_input(node, 5)?)?;
    let c0 = if kind == Kind::Lstm {
        state(ctx.opt_input(node, 6)?)?
    } else {
        None
    };
    let peep = if kind == Kind::Lstm {
        ctx.opt_input(node, 7)?
    } else {
        None
    };
    let zeros = |shape: &[i64]| {
        constant(
            &vec![0.0; shape.iter().product::<i64>() as usize],
            shape,
            dt,
        )
    };
    let acts = activations(node, kind, dirs)?;
    let clip = node.opt_f("clip")?;
    let lbr = kind == Kind::Gru && node.attr_i("linear_before_reset", 0)? != 0;

    // The input projection of the whole sequence: one product of the [T*B, I] rows (or of
    // [T, B, I] by the transposed weights when T is known only at run time).
    let x2 = if t < 0 {
        x.clone()
    } else {
        reshape(x.clone(), vec![t * b, i])?
    };
    let project = |wd: Expr| -> CResult<Expr> {
        if t < 0 {
            // W^T folded at compile time, so the product reads it by rows.
            call(
                "nn.matmul",
                vec![x2.clone(), transpose(wd, vec![1i64, 0])?],
                &[],
            )
        } else {
            call("nn.dense", vec![x2.clone(), wd], &[])
        }
    };
    let mut ys = Vec::new();
    let mut yhs = Vec::new();
    let mut ycs = Vec::new();
    for (d, dir_acts) in acts.iter().enumerate() {
        let di = d as i64;
        let mut xw = project(direction(&w, di)?)?;
        let mut rb = None;
        if let Some(bias) = &bias {
            let bd = direction(bias, di)?;
            let wb = slice_axis(bd.clone(), 0, 0, g * h, 1)?;
            let rbias = slice_axis(bd, 0, g * h, g * h, 1)?;
            let total = if kind == Kind::Gru {
                // The hidden gate's recurrent bias goes inside the cell.
                rb = Some(slice_axis(rbias.clone(), 0, 2 * h, h, 1)?);
                let mut mask = vec![1.0; (2 * h) as usize];
                mask.extend(vec![0.0; h as usize]);
                let keep = call("multiply", vec![rbias, constant(&mask, &[g * h], dt)?], &[])?;
                call("add", vec![wb, keep], &[])?
            } else {
                call("add", vec![wb, rbias], &[])?
            };
            xw = call("add", vec![xw, total], &[])?;
        }
        if t >= 0 {
            xw = reshape(xw, vec![t, b, g * h])?;
        }
        let rt = transpose(direction(&r, di)?, vec![1i64, 0])?;
        let h0d = match &h0 {
            Some(s) => direction(s, di)?,
            None => zeros(&[b, h])?,
        };
        let mut args = vec![xw, rt, h0d, lens.clone()];
        match kind {
            Kind::Lstm => {
                args.push(match &c0 {
                    Some(s) => direction(s, di)?,
                    None => zeros(&[b, h])?,
                });
                args.push(match &peep {
                    Some(p) => direction(p, di)?,
                    None => zeros(&[3 * h])?,
                });
            }
            Kind::Gru => args.push(match rb {
                Some(rb) => rb,
                None => zeros(&[h])?,
            }),
            Kind::Rnn => {}
        }
        let reverse = dir == "reverse" || d == 1;
        let mut attrs: Vec<(String, AttrValue)> = vec![("reverse".into(), reverse.into())];
        if let Some(c) = clip {
            attrs.push(("clip".into(), (c as f64).into()));
        }
        for (slot, (name, alpha, beta)) in ["f", "g", "h"].iter().zip(dir_acts) {
            attrs.push((slot.to_string(), AttrValue::Str(name.clone())));
            attrs.push((format!("{slot}_alpha"), (*alpha).into()));
            attrs.push((format!("{slot}_beta"), (*beta).into()));
        }
        match kind {
            Kind::Lstm => attrs.push((
                "input_forget".into(),
                (node.attr_i("input_forget", 0)? != 0).into(),
            )),
            Kind::Gru => attrs.push(("linear_before_reset".into(), lbr.into())),
            Kind::Rnn => {}
        }
        let attr_refs: Vec<(&str, AttrValue)> =
            attrs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let out = call(kind.op(), args, &attr_refs)?;
        ys.push(typed(Expr::get_item(out.clone(), 0))?);
        yhs.push(typed(Expr::get_item(out.clone(), 1))?);
        if kind == Kind::Lstm {
            ycs.push(typed(Expr::get_item(out, 2))?);
        }
    }
    // Directions on a new axis: 1 of Y, 0 of the states.
    let mut y = stack(ys, 1, false)?;
    let mut yh = stack(yhs, 0, false)?;
    let mut yc = if kind == Kind::Lstm {
        Some(stack(ycs, 0, false)?)
    } else {
        None
    };
    if layout == 1 {
        y = transpose(y, vec![2i64, 0, 1, 3])?;
        yh = transpose(yh, vec![1i64, 0, 2])?;
        yc = yc.map(|c| transpose(c, vec![1i64, 0, 2])).transpose()?;
    }
    let mut outs = vec![y, yh];
    outs.extend(yc);
    Ok(outs)
}

/// Registers LSTM, GRU and RNN.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("LSTM", lstm);
    t.insert("GRU", gru);
    t.insert("RNN", rnn);
}
