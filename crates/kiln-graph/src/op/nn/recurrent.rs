//! `nn.lstm`, `nn.gru` and `nn.rnn`: one direction of ONNX's recurrent layers over a whole
//! sequence, from the input projection of every step (see [`kiln_topi::nn::recurrent`]).
//!
//! - `nn.lstm(xw [T,B,4H], rt [H,4H], h0 [B,H], seq_lens [B] int32, c0 [B,H], p [3H])` ->
//!   `(y [T,B,H], y_h [B,H], y_c [B,H])`; attributes `f`, `g`, `h` (activations), `input_forget`.
//! - `nn.gru(xw [T,B,3H], rt [H,3H], h0, seq_lens, rb [H])` -> `(y, y_h)`; attributes `f`,
//!   `g`, `linear_before_reset`.
//! - `nn.rnn(xw [T,B,H], rt [H,H], h0, seq_lens)` -> `(y, y_h)`; attribute `f`.
//!
//! Every activation attribute `a` has `a_alpha` and `a_beta` (unset: the ONNX operator's
//! defaults); all take `reverse` and an
//! optional `clip`. `xw` holds `X W^T` plus the biases (for GRU, the hidden gate's recurrent
//! bias is `rb`, applied where `linear_before_reset` says); `rt` is `R` transposed.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::{DataType, Result};
use kiln_te::Tensor as TeTensor;
use kiln_tir::{CpuDesc, DataTypeExt};
use kiln_topi::nn::recurrent::{recurrent, Activation, ActivationKind, Cell, RecurrentInputs};

/// The gate count of each operator.
fn gates(op: &str) -> i64 {
    match op {
        "nn.lstm" => 4,
        "nn.gru" => 3,
        _ => 1,
    }
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let name = ctx.op.name;
    let (xs, dt) = ctx.tensor_rank(0, 3)?;
    if !dt.is_floating() {
        return Err(ctx.err(format!("argument `xw` must be a float tensor, got {dt}")));
    }
    let (rs, _) = ctx.tensor_rank(1, 2)?;
    ctx.same_dtype(0, 1)?;
    let (t, b, h) = (xs[0], xs[1], rs[0]);
    let g = gates(name);
    if xs[2] != g * h || rs[1] != g * h {
        return Err(ctx.err(format!(
            "`xw` {xs:?} and `rt` {rs:?} do not fit {g} gate(s) of hidden size {h} \
             (want [T, B, {}] and [{h}, {}])",
            g * h,
            g * h
        )));
    }
    let expect = |i: usize, shape: &[i64], dtype: DataType| -> Result<()> {
        let (s, d) = ctx.tensor(i)?;
        if s != shape || d != dtype {
            return Err(ctx.err(format!(
                "argument `{}` must be {shape:?} {dtype}, got {}",
                ctx.arg_name(i),
                ctx.args[i]
            )));
        }
        Ok(())
    };
    expect(2, &[b, h], dt)?;
    expect(3, &[b], DataType::int(32))?;
    match name {
        "nn.lstm" => {
            expect(4, &[b, h], dt)?;
            expect(5, &[3 * h], dt)?;
        }
        "nn.gru" => expect(4, &[h], dt)?,
        _ => {}
    }
    if let Some(c) = ctx.attrs.opt_float("clip")? {
        if c.is_nan() || c <= 0.0 {
            return Err(ctx.err(format!("attribute `clip` must be positive, got {c}")));
        }
    }
    let state = Type::tensor(&[b, h], dt);
    let mut out = vec![Type::tensor(&[t, b, h], dt), state.clone()];
    if name == "nn.lstm" {
        out.push(state);
    }
    Ok(Type::tuple(out))
}

/// Activation `key` of a call.
fn act(a: &Attrs<'_>, key: &str) -> Result<Activation> {
    let name = a.str(key)?;
    let (alpha, beta) = ActivationKind::parse(&name)
        .map(|(k, _)| k.defaults())
        .unwrap_or((0.0, 0.0));
    Activation::new(
        &name,
        a.opt_float(&format!("{key}_alpha"))?.unwrap_or(alpha),
        a.opt_float(&format!("{key}_beta"))?.unwrap_or(beta),
    )
}

fn lower_with(cell: Cell, i: &[TeTensor], a: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<TeTensor>> {
    let extra = |k: usize| i.get(k);
    let inputs = RecurrentInputs {
        xw: &i[0],
        rt: &i[1],
        h0: &i[2],
        seq_lens: &i[3],
        c0: matches!(cell, Cell::Lstm { .. })
            .then(|| extra(4))
            .flatten(),
        p: matches!(cell, Cell::Lstm { .. })
            .then(|| extra(5))
            .flatten(),
        rb: matches!(cell, Cell::Gru { .. }).then(|| extra(4)).flatten(),
    };
    recurrent(
        &inputs,
        &cell,
        a.bool("reverse")?,
        a.opt_float("clip")?,
        cpu,
    )
}

fn lower_lstm(i: &[TeTensor], a: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<TeTensor>> {
    let cell = Cell::Lstm {
        acts: [act(a, "f")?, act(a, "g")?, act(a, "h")?],
        input_forget: a.bool("input_forget")?,
    };
    lower_with(cell, i, a, cpu)
}

fn lower_gru(i: &[TeTensor], a: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<TeTensor>> {
    let cell = Cell::Gru {
        acts: [act(a, "f")?, act(a, "g")?],
        linear_before_reset: a.bool("linear_before_reset")?,
    };
    lower_with(cell, i, a, cpu)
}

fn lower_rnn(i: &[TeTensor], a: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<TeTensor>> {
    lower_with(Cell::Rnn { act: act(a, "f")? }, i, a, cpu)
}

/// The attributes of activation `key` with its default function.
fn act_specs(
    v: &mut Vec<AttrSpec>,
    key: &'static str,
    alpha: &'static str,
    beta: &'static str,
    default: &str,
) {
    v.push(AttrSpec::new(key, AttrKind::Str, default));
    v.push(AttrSpec::optional(alpha, AttrKind::Float));
    v.push(AttrSpec::optional(beta, AttrKind::Float));
}

fn common() -> Vec<AttrSpec> {
    vec![
        AttrSpec::new("reverse", AttrKind::Bool, false),
        AttrSpec::optional("clip", AttrKind::Float),
    ]
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    // Opaque: a sequential extern kernel that fuses with nothing.
    let mut lstm = common();
    act_specs(&mut lstm, "f", "f_alpha", "f_beta", "Sigmoid");
    act_specs(&mut lstm, "g", "g_alpha", "g_beta", "Tanh");
    act_specs(&mut lstm, "h", "h_alpha", "h_beta", "Tanh");
    lstm.push(AttrSpec::new("input_forget", AttrKind::Bool, false));
    v.push(
        OpDef::new(
            "nn.lstm",
            &["xw", "rt", "initial_h", "sequence_lens", "initial_c", "p"],
            OpPattern::Opaque,
            rel,
        )
        .attrs(lstm)
        .compute(lower_lstm),
    );
    let mut gru = common();
    act_specs(&mut gru, "f", "f_alpha", "f_beta", "Sigmoid");
    act_specs(&mut gru, "g", "g_alpha", "g_beta", "Tanh");
    gru.push(AttrSpec::new("linear_before_reset", AttrKind::Bool, false));
    v.push(
        OpDef::new(
            "nn.gru",
            &["xw", "rt", "initial_h", "sequence_lens", "rb"],
            OpPattern::Opaque,
            rel,
        )
        .attrs(gru)
        .compute(lower_gru),
    );
    let mut rnn = common();
    act_specs(&mut rnn, "f", "f_alpha", "f_beta", "Tanh");
    v.push(
        OpDef::new(
            "nn.rnn",
            &["xw", "rt", "initial_h", "sequence_lens"],
            OpPattern::Opaque,
            rel,
        )
        .attrs(rnn)
        .compute(lower_rnn),
    );
}
