//! Attention converters (opset 23/24): Attention (scaled dot-product attention with grouped
//! query heads, masks, causal masking, a key/value cache, softcap and the `qk_matmul_output`
//! output) and RotaryEmbedding, composed from reshape, transpose, nn.matmul, softmax, where
//! and arithmetic.

use std::collections::HashMap;

use kiln_ffi::DataType as GDataType;
use kiln_graph::ir::Expr;

use super::nn::Stash;
use super::{
    call, const_i64, constant, dtype_of, graph_dtype, reshape, scalar, shape_of, transpose,
    CResult, ConvertFn, Ctx, Msg,
};
use crate::{DataType, Node};

fn binary(op: &str, a: Expr, b: Expr) -> CResult<Expr> {
    call(op, vec![a, b], &[])
}

fn cast(x: Expr, to: GDataType) -> CResult<Expr> {
    if dtype_of(&x)? == to {
        return Ok(x);
    }
    call(
        "cast",
        vec![x],
        &[("dtype", to.to_string().as_str().into())],
    )
}

/// `[b, s, heads * d]` -> `[b, heads, s, d]`.
fn split_heads(x: Expr, heads: i64, what: &str) -> CResult<Expr> {
    let s = shape_of(&x)?;
    if heads <= 0 || s[2] % heads != 0 {
        return Err(Msg(format!(
            "{what} hidden size {} is not divisible by its number of heads {heads}",
            s[2]
        )));
    }
    let x = reshape(x, [s[0], s[1], heads, s[2] / heads])?;
    transpose(x, [0, 2, 1, 3])
}

/// The additive mask bias `0` where `allowed`, `-inf` elsewhere, in `dtype`.
fn bias_from_allowed(allowed: Expr, dtype: GDataType) -> CResult<Expr> {
    call(
        "where",
        vec![
            allowed,
            scalar(0.0, dtype)?,
            scalar(f64::NEG_INFINITY, dtype)?,
        ],
        &[],
    )
}

/// `attn_mask` (bool, or Q's type `dtype`) as an additive bias of the compute type `st`
/// whose last axis covers the `kv` keys: a boolean mask becomes `0` / `-inf`, and a mask
/// shorter than `kv` is padded with masked keys.
fn mask_bias(mask: Expr, kv: i64, dtype: GDataType, st: &Stash) -> CResult<Expr> {
    let ms = shape_of(&mask)?;
    let md = dtype_of(&mask)?;
    let last = *ms
        .last()
        .ok_or("input #3 ('attn_mask') must have rank >= 1")?;
    let is_bool = md == GDataType::bool();
    if !is_bool && md != dtype {
        return Err(Msg(format!(
            "input #3 ('attn_mask') must be bool or {dtype} like Q, got {md}"
        )));
    }
    if last > kv {
        return Err(Msg(format!(
            "input #3 ('attn_mask') covers {last} keys, more than the {kv} keys of K"
        )));
    }
    let mut mask = mask;
    if last < kv {
        let mut pad_shape = ms.clone();
        *pad_shape.last_mut().unwrap() = kv - last;
        let n = pad_shape.iter().product::<i64>() as usize;
        let fill = if is_bool { 0.0 } else { f64::NEG_INFINITY };
        let pad = constant(&vec![fill; n], &pad_shape, md)?;
        let axis = ms.len() as i64 - 1;
        mask = call("concatenate", vec![mask, pad], &[("axis", axis.into())])?;
    }
    if is_bool {
        bias_from_allowed(mask, st.compute_dtype())
    } else {
        st.widen(mask)
    }
}

/// The causal bias `[q, kv]`: query `i` attends key `j` iff `j <= i + offset`.
fn causal_bias(q: i64, kv: i64, offset: i64, dtype: GDataType) -> CResult<Expr> {
    let mut v = Vec::with_capacity((q * kv) as usize);
    for i in 0..q {
        for j in 0..kv {
            v.push(if j <= i + offset {
                0.0
            } else {
                f64::NEG_INFINITY
            });
        }
    }
    constant(&v, &[q, kv], dtype)
}

/// The run-time biases of `nonpad_kv_seqlen` (`[batch]`): keys at or past `nonpad[b]` are
/// masked, and with `causal` the frontier is `j <= i + nonpad[b] - q` per batch.
fn nonpad_bias(nonpad: Expr, q: i64, kv: i64, causal: bool, dtype: GDataType) -> CResult<Expr> {
    let n = shape_of(&nonpad)?;
    if n.len() != 1 {
        return Err(Msg(format!(
            "input #6 ('nonpad_kv_seqlen') must be 1-D [batch], got {n:?}"
        )));
    }
    let nonpad = reshape(cast(nonpad, GDataType::int(64))?, [n[0], 1, 1, 1])?;
    let j = reshape(const_i64(&(0..kv).collect::<Vec<_>>())?, [1, 1, 1, kv])?;
    let mut allowed = binary("less", j.clone(), nonpad.clone())?;
    if causal {
        let i = reshape(const_i64(&(0..q).collect::<Vec<_>>())?, [1, 1, q, 1])?;
        let frontier = binary("subtract", binary("add", i, nonpad)?, const_i64(&[q])?)?;
        let c = binary("less_equal", j, frontier)?;
        allowed = binary("logical_and", allowed, c)?;
    }
    bias_from_allowed(allowed, dtype)
}

/// The additive bias of Attention's scores, `[.., q, kv]` in the compute type of `st`: the
/// mask (input #3), the causal mask and the `nonpad_kv_seqlen` padding (input #6) summed;
/// `None` when nothing is masked. `dims` is `[q, kv, past]`.
fn attention_bias(
    ctx: &Ctx<'_>,
    node: &Node,
    at: &AttnAttrs,
    [q, kv, past]: [i64; 3],
    st: &Stash,
) -> CResult<Option<Expr>> {
    let dc = st.compute_dtype();
    let mut parts = Vec::new();
    if let Some(m) = ctx.opt_input(node, 3)? {
        parts.push(mask_bias(m, kv, dtype_of(&ctx.input(node, 0)?)?, st)?);
    }
    let nonpad = ctx.opt_input(node, 6)?;
    if nonpad.is_some() && past > 0 {
        return Err("input #6 ('nonpad_kv_seqlen') cannot be used with past_key".into());
    }
    match nonpad {
        // The causal frontier then depends on each batch's key count.
        Some(n) => parts.push(nonpad_bias(n, q, kv, at.causal, dc)?),
        None if at.causal => parts.push(causal_bias(q, kv, past, dc)?),
        None => {}
    }
    let mut parts = parts.into_iter();
    let Some(first) = parts.next() else {
        return Ok(None);
    };
    parts
        .try_fold(first, |acc, p| binary("add", acc, p))
        .map(Some)
}

/// The Attention attributes Kiln reads.
struct AttnAttrs {
    causal: bool,
    q_heads: Option<i64>,
    kv_heads: Option<i64>,
    scale: Option<f64>,
    softcap: f64,
    softmax_dtype: Option<GDataType>,
    qk_mode: i64,
}

impl AttnAttrs {
    fn of(node: &Node) -> CResult<AttnAttrs> {
        let qk_mode = node.attr_i("qk_matmul_output_mode", 0)?;
        if !(0..=3).contains(&qk_mode) {
            return Err(Msg(format!(
                "attribute qk_matmul_output_mode={qk_mode} is not 0, 1, 2 or 3"
            )));
        }
        let softmax_dtype = match node.opt_i("softmax_precision")? {
            None => None,
            Some(p) => {
                let d = i32::try_from(p).ok().and_then(DataType::from_onnx);
                match d {
                    Some(
                        d @ (DataType::Float32
                        | DataType::Float16
                        | DataType::Float64
                        | DataType::BFloat16),
                    ) => Some(graph_dtype(d)),
                    _ => {
                        return Err(Msg(format!(
                            "attribute softmax_precision={p} is not a floating-point type"
                        )))
                    }
                }
            }
        };
        for w in ["left_window_size", "right_window_size"] {
            if node.attr_i(w, -1)? != -1 {
                return Err(Msg(format!(
                    "attribute {w} (sliding windows) is not supported"
                )));
            }
        }
        Ok(AttnAttrs {
            causal: node.attr_i("is_causal", 0)? != 0,
            q_heads: node.opt_i("q_num_heads")?,
            kv_heads: node.opt_i("kv_num_heads")?,
            scale: node.opt_f("scale")?.map(f64::from),
            softcap: f64::from(node.attr_f("softcap", 0.0)?),
            softmax_dtype,
            qk_mode,
        })
    }
}

/// Attention: `softmax(Q K^T * scale (softcapped) + bias) V` per head, with K/V heads shared
/// by groups of query heads (GQA), the key/value cache appended to (`present_key`,
/// `present_value`), and `qk_matmul_output` at the stage `qk_matmul_output_mode` names.
fn attention(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let at = AttnAttrs::of(node)?;
    let (mut q, mut k, mut v) = (
        ctx.input(node, 0)?,
        ctx.input(node, 1)?,
        ctx.input(node, 2)?,
    );
    let qs = shape_of(&q)?;
    let rank = qs.len();
    if !(rank == 3 || rank == 4) || shape_of(&k)?.len() != rank || shape_of(&v)?.len() != rank {
        return Err(Msg(format!(
            "Q, K and V must all be 3-D or all 4-D, got {qs:?}, {:?}, {:?}",
            shape_of(&k)?,
            shape_of(&v)?
        )));
    }
    let d = dtype_of(&q)?;
    if rank == 3 {
        let need = |v: Option<i64>, name: &str| {
            v.ok_or_else(|| Msg(format!("attribute {name} is required for 3-D Q, K and V")))
        };
        let (hq, hk) = (
            need(at.q_heads, "q_num_heads")?,
            need(at.kv_heads, "kv_num_heads")?,
        );
        q = split_heads(q, hq, "Q")?;
        k = split_heads(k, hk, "K")?;
        v = split_heads(v, hk, "V")?;
    }
    let (past_k, past_v) = (ctx.opt_input(node, 4)?, ctx.opt_input(node, 5)?);
    let past_len = match (&past_k, &past_v) {
        (Some(pk), Some(pv)) => {
            let (ps, pvs) = (shape_of(pk)?, shape_of(pv)?);
            if ps.len() != 4 || pvs.len() != 4 {
                return Err(Msg(format!(
                    "inputs #4 ('past_key') {ps:?} and #5 ('past_value') {pvs:?} must be 4-D \
                     [batch, heads, past, head size]"
                )));
            }
            ps[2]
        }
        (None, None) => 0,
        _ => return Err("inputs #4 ('past_key') and #5 ('past_value') go together".into()),
    };
    if let (Some(pk), Some(pv)) = (past_k, past_v) {
        let cat = |a: Expr, b: Expr| call("concatenate", vec![a, b], &[("axis", 2i64.into())]);
        k = cat(pk, k)?;
        v = cat(pv, v)?;
    }
    let (present_k, present_v) = (k.clone(), v.clone());
    // Narrow floats are computed in float32 and rounded once at the end.
    let st = Stash::of(d);
    let (q, k, v) = (st.widen(q)?, st.widen(k)?, st.widen(v)?);
    let dc = st.compute_dtype();
    let (qs, ks, vs) = (shape_of(&q)?, shape_of(&k)?, shape_of(&v)?);
    let (batch, hq, sq, dh) = (qs[0], qs[1], qs[2], qs[3]);
    let (hk, skv, dv) = (ks[1], ks[2], vs[3]);
    if hk != vs[1] || hk <= 0 || hq % hk != 0 {
        return Err(Msg(format!(
            "{hq} query heads cannot be grouped over {hk} key and {} value heads",
            vs[1]
        )));
    }

    // Q and K are each scaled by sqrt(scale) against overflow.
    let scale = at.scale.unwrap_or(1.0 / (dh as f64).sqrt()).sqrt();
    let q = binary("multiply", q, scalar(scale, dc)?)?;
    let k = binary("multiply", k, scalar(scale, dc)?)?;
    // Grouped heads: query head `g * rep + r` reads key/value head `g`; the matmuls
    // broadcast K and V over `r` instead of repeating them.
    let rep = hq / hk;
    let grouped = |x: Expr, s: &[i64]| reshape(x, [batch, hk, rep, s[2], s[3]]);
    let shared = |x: Expr, s: &[i64]| reshape(x, [batch, hk, 1, s[2], s[3]]);
    // K^T materialized: the product's vectorized key axis then reads contiguous memory.
    let kt = transpose(shared(k, &ks)?, [0, 1, 2, 4, 3])?;
    // Scores stay in the grouped layout [batch, hk, rep, q, kv] up to the second product.
    let qk = call("nn.matmul", vec![grouped(q, &qs)?, kt], &[])?;
    let capped = if at.softcap > 0.0 {
        let c = scalar(at.softcap, dc)?;
        let t = call("tanh", vec![binary("divide", qk.clone(), c.clone())?], &[])?;
        binary("multiply", t, c)?
    } else {
        qk.clone()
    };

    let bias = attention_bias(ctx, node, &at, [sq, skv, past_len], &st)?;
    let logits = match &bias {
        Some(b) => binary("add", capped.clone(), grouped_bias(b.clone(), hq, hk)?)?,
        None => capped.clone(),
    };
    let sd = at.softmax_dtype.unwrap_or(dc);
    let mut probs = call(
        "nn.softmax",
        vec![cast(logits.clone(), sd)?],
        &[("axis", (-1i64).into())],
    )?;
    // A query row whose bias masks every key attends nothing: its probabilities are 0.
    if let Some(b) = &bias {
        let row_max = call(
            "max",
            vec![b.clone()],
            &[("axis", vec![-1i64].into()), ("keepdims", true.into())],
        )?;
        let dead = binary("equal", row_max, scalar(f64::NEG_INFINITY, dc)?)?;
        let none_dead = match dead.as_constant() {
            Some(t) => t.to_f64_vec()?.iter().all(|&x| x == 0.0),
            None => false,
        };
        if !none_dead {
            let dead = grouped_bias(dead, hq, hk)?;
            probs = call("where", vec![dead, scalar(0.0, sd)?, probs], &[])?;
        }
    }
    let probs = cast(probs, dc)?;
    let y = call("nn.matmul", vec![probs.clone(), shared(v, &vs)?], &[])?;
    let mut y = st.restore(reshape(y, [batch, hq, sq, dv])?)?;
    if rank == 3 {
        y = transpose(y, [0, 2, 1, 3])?;
        y = reshape(y, [batch, sq, hq * dv])?;
    }
    let qk_out = match at.qk_mode {
        0 => qk,
        1 => capped,
        2 => logits,
        _ => probs,
    };
    let qk_out = st.restore(reshape(qk_out, [batch, hq, sq, skv])?)?;
    Ok(vec![y, present_k, present_v, qk_out])
}

/// A bias `[.., q, kv]` of rank <= 4 that broadcasts over the scores `[batch, hq, q, kv]`,
/// viewed in their grouped layout `[batch, hk, hq / hk, q, kv]`.
fn grouped_bias(b: Expr, hq: i64, hk: i64) -> CResult<Expr> {
    let mut s = shape_of(&b)?;
    if s.len() > 4 {
        return Err(Msg(format!(
            "input #3 ('attn_mask') must have rank <= 4, got {s:?}"
        )));
    }
    while s.len() < 4 {
        s.insert(0, 1);
    }
    let heads = match s[1] {
        1 => [1, 1],
        h if h == hq => [hk, hq / hk],
        h => {
            return Err(Msg(format!(
                "input #3 ('attn_mask') has {h} heads, which do not broadcast to {hq}"
            )))
        }
    };
    reshape(b, [s[0], heads[0], heads[1], s[2], s[3]])
}

/// `x[..., begin..end]` along `axis`.
fn slice(x: Expr, axis: i64, begin: i64, end: i64) -> CResult<Expr> {
    call(
        "strided_slice",
        vec![x],
        &[
            ("begin", vec![begin].into()),
            ("end", vec![end].into()),
            ("strides", vec![1i64].into()),
            ("axes", vec![axis].into()),
        ],
    )
}

/// The `[batch, seq, half]` cos or sin table of RotaryEmbedding input #`i`: rows picked by
/// `position_ids` when given, cut to the `half` rotated pairs.
fn rotary_table(ctx: &Ctx<'_>, node: &Node, i: usize, half: i64) -> CResult<Expr> {
    let name = ["", "cos_cache", "sin_cache"][i];
    let mut t = ctx.input(node, i)?;
    if let Some(pos) = ctx.opt_input(node, 3)? {
        t = call(
            "take",
            vec![t, pos],
            &[("axis", 0i64.into()), ("mode", "clip".into())],
        )?;
    }
    let s = shape_of(&t)?;
    if s.len() != 3 || s[2] < half {
        return Err(Msg(format!(
            "input #{i} ('{name}') must give [batch, seq, {half}] values (rows picked by \
             position_ids, if any), got {s:?}"
        )));
    }
    if s[2] > half {
        t = slice(t, 2, 0, half)?;
    }
    Ok(t)
}

/// RotaryEmbedding (opset 23): the first `rotary_embedding_dim` features of each head are
/// rotated in pairs (halves, or adjacent pairs when `interleaved`) by the cos/sin tables.
fn rotary_embedding(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let interleaved = node.attr_i("interleaved", 0)? != 0;
    // Work on [b, s, heads, d] for 3-D input, on [b, heads, s, d] for 4-D; `table_axis` is
    // where the tables get their unit head axis.
    let (view, table_axis) = match xs.len() {
        3 => {
            let heads = node.attr_i("num_heads", 0)?;
            if heads <= 0 || xs[2] % heads != 0 {
                return Err(Msg(format!(
                    "attribute num_heads={heads} must be positive and divide the hidden size \
                     {} of a 3-D input",
                    xs[2]
                )));
            }
            (reshape(x, [xs[0], xs[1], heads, xs[2] / heads])?, 2i64)
        }
        4 => (x, 1i64),
        _ => {
            return Err(Msg(format!(
                "input #0 ('X') must be 3-D or 4-D, got {xs:?}"
            )))
        }
    };
    let vs = shape_of(&view)?;
    let head = vs[3];
    let rd = match node.attr_i("rotary_embedding_dim", 0)? {
        0 => head,
        r if r > 0 && r % 2 == 0 && r <= head => r,
        r => {
            return Err(Msg(format!(
                "attribute rotary_embedding_dim={r} must be even and at most the head size {head}"
            )))
        }
    };
    let half = rd / 2;
    let table = |i| -> CResult<Expr> {
        let t = rotary_table(ctx, node, i, half)?;
        call("expand_dims", vec![t], &[("axis", table_axis.into())])
    };
    let (cos, sin) = (table(1)?, table(2)?);
    let rot = slice(view.clone(), 3, 0, rd)?;
    let (x1, x2) = if interleaved {
        let pairs = reshape(rot, [vs[0], vs[1], vs[2], half, 2])?;
        let pick = |k| {
            reshape(
                slice(pairs.clone(), 4, k, k + 1)?,
                [vs[0], vs[1], vs[2], half],
            )
        };
        (pick(0)?, pick(1)?)
    } else {
        (slice(rot.clone(), 3, 0, half)?, slice(rot, 3, half, rd)?)
    };
    let mul = |a: &Expr, b: &Expr| binary("multiply", a.clone(), b.clone());
    let real = binary("subtract", mul(&cos, &x1)?, mul(&sin, &x2)?)?;
    let imag = binary("add", mul(&sin, &x1)?, mul(&cos, &x2)?)?;
    let mut y = if interleaved {
        let e = |t: Expr| call("expand_dims", vec![t], &[("axis", 4i64.into())]);
        let both = call(
            "concatenate",
            vec![e(real)?, e(imag)?],
            &[("axis", 4i64.into())],
        )?;
        reshape(both, [vs[0], vs[1], vs[2], rd])?
    } else {
        call("concatenate", vec![real, imag], &[("axis", 3i64.into())])?
    };
    if rd < head {
        let rest = slice(view, 3, rd, head)?;
        y = call("concatenate", vec![y, rest], &[("axis", 3i64.into())])?;
    }
    Ok(vec![reshape(y, xs.as_slice())?])
}

/// Registers this file's converters.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("Attention", attention);
    t.insert("RotaryEmbedding", rotary_embedding);
}
