//! Convolution converters: Conv and ConvTranspose over any number of spatial axes (groups,
//! pads, strides, dilations, auto_pad; ConvTranspose's output_padding and output_shape), and
//! Col2Im, the transposed convolution that sums image patches back into place.
//!
//! Kiln's graph has 2-D convolutions; the other ranks reduce to them. A 1-D convolution is a
//! 2-D one of a single row (a unit axis before the spatial one), so that its length is the
//! width the schedules vectorize and tile. An N-D convolution (N >= 3) is an (N-1)-D one whose
//! input channels are the depth windows stacked beside the channels: for each output depth,
//! the `KD` input depths under the kernel become `KD * C` channels (per group), and the
//! weight's depth axis joins its input-channel axis the same way. A transposed N-D convolution
//! computes one (N-1)-D transposed convolution per kernel depth at once (kernel depths as extra
//! output channels), then places each depth's result at its strided output depths and sums.

use std::collections::HashMap;

use kiln_graph::ir::Expr;

use super::{call, dtype_of, reshape, shape_of, transpose, CResult, ConvertFn, Ctx, Msg};
use crate::Node;

/// Padding `[begin..., end...]` for the spatial `input` extents under `auto_pad`, or the
/// node's `pads` attribute.
pub(super) fn pads(
    node: &Node,
    input: &[i64],
    kernel: &[i64],
    strides: &[i64],
    dilations: &[i64],
) -> CResult<Vec<i64>> {
    let n = input.len();
    let auto = node.attr_s("auto_pad", "NOTSET")?;
    match auto.as_str() {
        "NOTSET" => {
            let p = node.attr_ints("pads", &vec![0; 2 * n])?;
            if p.len() != 2 * n {
                return Err(Msg(format!("pads {p:?} must have {} values", 2 * n)));
            }
            Ok(p)
        }
        "VALID" => Ok(vec![0; 2 * n]),
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut out = vec![0; 2 * n];
            for i in 0..n {
                let o = (input[i] + strides[i] - 1) / strides[i];
                let eff = (kernel[i] - 1) * dilations[i] + 1;
                let total = ((o - 1) * strides[i] + eff - input[i]).max(0);
                let (b, e) = split_same(total, &auto);
                out[i] = b;
                out[n + i] = e;
            }
            Ok(out)
        }
        other => Err(Msg(format!("auto_pad \"{other}\" is not supported"))),
    }
}

/// `total` padding split between begin and end: SAME_UPPER puts the odd one at the end.
fn split_same(total: i64, auto: &str) -> (i64, i64) {
    if auto == "SAME_UPPER" {
        (total / 2, total - total / 2)
    } else {
        (total - total / 2, total / 2)
    }
}

/// The `strides` and `dilations` attributes (default 1 per kernel axis), checked.
pub(super) fn spatial_attrs(node: &Node, kernel: &[i64]) -> CResult<(Vec<i64>, Vec<i64>)> {
    let n = kernel.len();
    let strides = node.attr_ints("strides", &vec![1; n])?;
    let dil = node.attr_ints("dilations", &vec![1; n])?;
    for (name, v) in [("strides", &strides), ("dilations", &dil)] {
        if v.len() != n || v.iter().any(|&x| x < 1) {
            return Err(Msg(format!(
                "attribute `{name}` {v:?} must hold {n} positive values, one per spatial axis"
            )));
        }
    }
    if kernel.iter().any(|&k| k < 1) {
        return Err(Msg(format!(
            "attribute `kernel_shape` {kernel:?} must be positive"
        )));
    }
    Ok((strides, dil))
}

/// The permutation of `rank` axes that swaps axes 1 and 2.
fn swap_1_2(rank: usize) -> Vec<i64> {
    let mut p: Vec<i64> = (0..rank as i64).collect();
    p.swap(1, 2);
    p
}

/// `x[begin : begin + (count - 1) * step + 1 : step]` along `axis`.
pub(super) fn slice_axis(x: Expr, axis: i64, begin: i64, count: i64, step: i64) -> CResult<Expr> {
    call(
        "strided_slice",
        vec![x],
        &[
            ("begin", vec![begin].into()),
            ("end", vec![begin + (count - 1) * step + 1].into()),
            ("strides", vec![step].into()),
            ("axes", vec![axis].into()),
        ],
    )
}

/// `x` zero-padded by `before` and `after` along `axis` (no-op for zeros).
fn pad_axis(x: Expr, axis: usize, before: i64, after: i64) -> CResult<Expr> {
    if before == 0 && after == 0 {
        return Ok(x);
    }
    let rank = shape_of(&x)?.len();
    let mut w = vec![0i64; 2 * rank];
    w[2 * axis] = before;
    w[2 * axis + 1] = after;
    call("nn.pad", vec![x], &[("pad_width", w.into())])
}

/// `x` `[N, C, L]` as one row `[N, C, 1, L]` (the 2-D view of a 1-D operand: its length the
/// width, which the 2-D schedules vectorize; as a column, `[N, C, L, 1]`, every vector of a
/// 1-D convolution held one element).
pub(super) fn unit_row(x: Expr) -> CResult<Expr> {
    let mut s = shape_of(&x)?;
    s.insert(2, 1);
    reshape(x, s)
}

/// `x` `[N, C, 1, L]` without its unit row axis.
pub(super) fn drop_row(x: Expr) -> CResult<Expr> {
    let mut s = shape_of(&x)?;
    s.remove(2);
    reshape(x, s)
}

/// The geometry of a convolution over `k` spatial axes.
#[derive(Clone, Debug)]
struct Geometry {
    strides: Vec<i64>,
    dilations: Vec<i64>,
    /// `[begin..., end...]`.
    pads: Vec<i64>,
    groups: i64,
}

impl Geometry {
    /// The geometry without its first spatial axis.
    fn inner(&self) -> Geometry {
        let k = self.strides.len();
        let mut pads = self.pads[1..k].to_vec();
        pads.extend_from_slice(&self.pads[k + 1..]);
        Geometry {
            strides: self.strides[1..].to_vec(),
            dilations: self.dilations[1..].to_vec(),
            pads,
            groups: self.groups,
        }
    }

    /// The geometry with a unit leading spatial axis (1-D as one row of 2-D, [`unit_row`]).
    fn widened(&self) -> Geometry {
        Geometry {
            strides: vec![1, self.strides[0]],
            dilations: vec![1, self.dilations[0]],
            pads: vec![0, self.pads[0], 0, self.pads[1]],
            groups: self.groups,
        }
    }
}

/// Convolution of `x` `[N, C, S...]` with `w` `[O, C/groups, K...]`, any number of spatial axes.
fn conv_nd(x: Expr, w: Expr, g: &Geometry) -> CResult<Expr> {
    let xs = shape_of(&x)?;
    let ws = shape_of(&w)?;
    match xs.len() {
        3 => {
            let y = conv_nd(unit_row(x)?, unit_row(w)?, &g.widened())?;
            drop_row(y)
        }
        4 => call(
            "nn.conv2d",
            vec![x, w],
            &[
                ("strides", g.strides.clone().into()),
                ("padding", g.pads.clone().into()),
                ("dilation", g.dilations.clone().into()),
                ("groups", g.groups.into()),
                ("channels", ws[0].into()),
            ],
        ),
        _ => conv_depth_stacked(x, w, g, &xs, &ws),
    }
}

/// An N-D convolution (N >= 3) as an (N-1)-D one over depth windows stacked as channels.
fn conv_depth_stacked(x: Expr, w: Expr, g: &Geometry, xs: &[i64], ws: &[i64]) -> CResult<Expr> {
    let k = xs.len() - 2;
    let (n, c, o, kd) = (xs[0], xs[1], ws[0], ws[2]);
    let (s, dil, groups) = (g.strides[0], g.dilations[0], g.groups);
    let cg = c / groups;
    let x = pad_axis(x, 2, g.pads[0], g.pads[k])?;
    let dp = shape_of(&x)?[2];
    let span = dil * (kd - 1) + 1;
    if dp < span {
        return Err(Msg(format!(
            "the kernel's depth window {span} is larger than the padded input depth {dp}"
        )));
    }
    let od = (dp - span) / s + 1;
    let rest = &xs[3..];
    // [N, C, KD, OD, R...]: for each kernel depth, the input depths it reads.
    let windows = (0..kd)
        .map(|t| {
            let sl = slice_axis(x.clone(), 2, t * dil, od, s)?;
            call(
                "expand_dims",
                vec![sl],
                &[("axis", 2i64.into()), ("num_newaxis", 1i64.into())],
            )
        })
        .collect::<CResult<Vec<_>>>()?;
    let stacked = if windows.len() == 1 {
        windows.into_iter().next().unwrap()
    } else {
        call("concatenate", windows, &[("axis", 2i64.into())])?
    };
    // [N, G, Cg, KD, OD, R...] -> [N, OD, G, KD, Cg, R...] -> [N*OD, G*KD*Cg, R...].
    let mut split = vec![n, groups, cg, kd, od];
    split.extend_from_slice(rest);
    let mut perm = vec![0i64, 4, 1, 3, 2];
    perm.extend((5..5 + rest.len() as i64).collect::<Vec<_>>());
    let mut merged = vec![n * od, groups * kd * cg];
    merged.extend_from_slice(rest);
    let xi = reshape(transpose(reshape(stacked, split)?, perm)?, merged)?;
    // Weight [O, Cg, KD, KR...] -> [O, KD, Cg, KR...] -> [O, KD*Cg, KR...].
    let wperm = swap_1_2(ws.len());
    let mut wshape = vec![o, kd * cg];
    wshape.extend_from_slice(&ws[3..]);
    let wi = reshape(transpose(w, wperm)?, wshape)?;
    let y = conv_nd(xi, wi, &g.inner())?;
    // [N*OD, O, RO...] -> [N, OD, O, RO...] -> [N, O, OD, RO...].
    let ys = shape_of(&y)?;
    let mut unmerged = vec![n, od, o];
    unmerged.extend_from_slice(&ys[2..]);
    transpose(reshape(y, unmerged)?, swap_1_2(ys.len() + 1))
}

/// The `kernel_shape` attribute, checked against the weight `ws` `[_, _, K...]` (its default).
fn kernel_shape(node: &Node, ws: &[i64]) -> CResult<Vec<i64>> {
    let kernel = node.attr_ints("kernel_shape", &ws[2..])?;
    if kernel != ws[2..] {
        return Err(Msg(format!(
            "attribute `kernel_shape` {kernel:?} differs from the weight's spatial shape {:?}",
            &ws[2..]
        )));
    }
    Ok(kernel)
}

/// Checks the ranks of a convolution's data and weight.
fn check_ranks(xs: &[i64], ws: &[i64]) -> CResult<()> {
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(Msg(format!(
            "input `X` {xs:?} and weight `W` {ws:?} must both be [N, C, spatial...] of the same \
             rank, at least 3"
        )));
    }
    Ok(())
}

fn conv(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let (x, w) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let mut y = conv_of(node, x, w)?;
    if let Some(b) = ctx.opt_input(node, 2)? {
        y = call("nn.bias_add", vec![y, b], &[("axis", 1i64.into())])?;
    }
    Ok(vec![y])
}

/// The convolution of `x` by `w` (any spatial rank, without bias) under the attributes of
/// `node`, a Conv-like node (Conv, ConvInteger and QLinearConv share them).
pub(super) fn conv_of(node: &Node, x: Expr, w: Expr) -> CResult<Expr> {
    let xs = shape_of(&x)?;
    let ws = shape_of(&w)?;
    check_ranks(&xs, &ws)?;
    let kernel = kernel_shape(node, &ws)?;
    let (strides, dilations) = spatial_attrs(node, &kernel)?;
    let pads = pads(node, &xs[2..], &kernel, &strides, &dilations)?;
    let groups = node.attr_i("group", 1)?;
    if groups < 1 || xs[1] % groups != 0 || ws[0] % groups != 0 || ws[1] * groups != xs[1] {
        return Err(Msg(format!(
            "attribute `group` {groups} does not fit input channels {} and weight {ws:?}",
            xs[1]
        )));
    }
    let g = Geometry {
        strides,
        dilations,
        pads,
        groups,
    };
    conv_nd(x, w, &g)
}

/// The geometry of a transposed convolution (pads from `output_shape` or `auto_pad`).
struct TransposedGeometry {
    conv: Geometry,
    output_padding: Vec<i64>,
}

impl TransposedGeometry {
    fn inner(&self) -> TransposedGeometry {
        TransposedGeometry {
            conv: self.conv.inner(),
            output_padding: self.output_padding[1..].to_vec(),
        }
    }

    fn widened(&self) -> TransposedGeometry {
        TransposedGeometry {
            conv: self.conv.widened(),
            output_padding: vec![0, self.output_padding[0]],
        }
    }
}

/// Col2Im: `input` `[N, C * prod(block), L]` holds, per column, the image patch at one of the
/// `L` sliding-window positions; the output `[N, C, image...]` sums every patch back where it
/// came from. That is a transposed convolution, with one group per channel, of the columns
/// viewed as `[N, C * prod(block), L...]` and a kernel routing patch element `k` of channel
/// `c` to offset `k` (a one-hot `[C * prod(block), 1, block...]` weight).
fn col2im(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let image = ctx
        .const_ints(node, 1)?
        .ok_or_else(|| Msg::from("input #1 (image_shape) must be a constant"))?;
    let block = ctx
        .const_ints(node, 2)?
        .ok_or_else(|| Msg::from("input #2 (block_shape) must be a constant"))?;
    let r = image.len();
    if r == 0 || block.len() != r || xs.len() != 3 {
        return Err(Msg(format!(
            "expects input [N, C * prod(block_shape), L] and image_shape, block_shape of one              equal length; got input {xs:?}, image_shape {image:?}, block_shape {block:?}"
        )));
    }
    let ints = |name: &str, default: i64, len: usize| -> CResult<Vec<i64>> {
        let v = node.attr_ints(name, &vec![default; len])?;
        if v.len() != len {
            return Err(Msg(format!(
                "attribute {name} has {} values, expected {len}",
                v.len()
            )));
        }
        Ok(v)
    };
    let strides = ints("strides", 1, r)?;
    let dilations = ints("dilations", 1, r)?;
    let pads = ints("pads", 0, 2 * r)?;
    if image.iter().chain(&block).any(|&d| d < 1)
        || strides.iter().chain(&dilations).any(|&d| d < 1)
        || pads.iter().any(|&p| p < 0)
    {
        return Err(Msg(format!(
            "image_shape {image:?}, block_shape {block:?}, strides {strides:?} and dilations              {dilations:?} must be positive and pads {pads:?} non-negative"
        )));
    }
    let patch: i64 = block.iter().product();
    if xs[1] % patch != 0 {
        return Err(Msg(format!(
            "input channels {} are not a multiple of the block size {patch} ({block:?})",
            xs[1]
        )));
    }
    let c = xs[1] / patch;
    // The sliding-window positions per axis, and the output padding that reaches the image
    // size where the last window stops short of the image's end.
    let mut windows = Vec::with_capacity(r);
    let mut output_padding = Vec::with_capacity(r);
    for a in 0..r {
        let span = dilations[a] * (block[a] - 1) + 1;
        let room = image[a] + pads[a] + pads[r + a] - span;
        if room < 0 {
            return Err(Msg(format!(
                "block {block:?} with dilations {dilations:?} does not fit image {image:?}                  with pads {pads:?}"
            )));
        }
        windows.push(room / strides[a] + 1);
        output_padding.push(room % strides[a]);
    }
    let positions: i64 = windows.iter().product();
    if positions != xs[2] {
        return Err(Msg(format!(
            "input has {} columns but image {image:?}, block {block:?}, strides {strides:?},              dilations {dilations:?} and pads {pads:?} give {positions} window positions",
            xs[2]
        )));
    }
    let mut view = vec![xs[0], xs[1]];
    view.extend(&windows);
    let cols = reshape(x, view)?;
    let dtype = super::dtype_of(&cols)?;
    let mut w = vec![0.0; (xs[1] * patch) as usize];
    for ch in 0..c {
        for k in 0..patch {
            let row = ch * patch + k; // input channel: element k of channel ch's patch
            w[(row * patch + k) as usize] = 1.0;
        }
    }
    let mut wshape = vec![xs[1], 1];
    wshape.extend(&block);
    let weight = super::constant(&w, &wshape, dtype)?;
    let g = TransposedGeometry {
        conv: Geometry {
            strides,
            dilations,
            pads,
            groups: c,
        },
        output_padding,
    };
    Ok(vec![conv_transpose_nd(cols, weight, &g)?])
}

/// Transposed convolution of `x` `[N, C, S...]` with `w` `[C, O/groups, K...]`.
fn conv_transpose_nd(x: Expr, w: Expr, g: &TransposedGeometry) -> CResult<Expr> {
    let xs = shape_of(&x)?;
    match xs.len() {
        3 => {
            let y = conv_transpose_nd(unit_row(x)?, unit_row(w)?, &g.widened())?;
            drop_row(y)
        }
        4 => call(
            "nn.conv2d_transpose",
            vec![x, w],
            &[
                ("strides", g.conv.strides.clone().into()),
                ("padding", g.conv.pads.clone().into()),
                ("dilation", g.conv.dilations.clone().into()),
                ("output_padding", g.output_padding.clone().into()),
                ("groups", g.conv.groups.into()),
            ],
        ),
        _ => conv_transpose_depth(x, w, g, &xs),
    }
}

/// An N-D transposed convolution (N >= 3): one (N-1)-D transposed convolution per input depth
/// computing every kernel depth at once, each kernel depth's result then dilated by the stride,
/// shifted by its offset and summed, and the padding cropped.
fn conv_transpose_depth(x: Expr, w: Expr, g: &TransposedGeometry, xs: &[i64]) -> CResult<Expr> {
    let ws = shape_of(&w)?;
    let k = xs.len() - 2;
    let (n, c, d) = (xs[0], xs[1], xs[2]);
    let (og, kd, groups) = (ws[1], ws[2], g.conv.groups);
    let (s, dil) = (g.conv.strides[0], g.conv.dilations[0]);
    let rest = &xs[3..];
    // x [N, C, D, R...] -> [N*D, C, R...].
    let perm = swap_1_2(xs.len());
    let mut merged = vec![n * d, c];
    merged.extend_from_slice(rest);
    let xi = reshape(transpose(x, perm)?, merged)?;
    // w [C, Og, KD, KR...] -> [C, KD, Og, KR...] -> [C, KD*Og, KR...].
    let wperm = swap_1_2(ws.len());
    let mut wshape = vec![c, kd * og];
    wshape.extend_from_slice(&ws[3..]);
    let wi = reshape(transpose(w, wperm)?, wshape)?;
    let y = conv_transpose_nd(xi, wi, &g.inner())?;
    // [N*D, G*KD*Og, RO...] -> [N, D, G, KD, Og, RO...] -> [N, KD, D, G, Og, RO...].
    let ro = shape_of(&y)?[2..].to_vec();
    let mut split = vec![n, d, groups, kd, og];
    split.extend_from_slice(&ro);
    let mut perm = vec![0i64, 3, 1, 2, 4];
    perm.extend((5..5 + ro.len() as i64).collect::<Vec<_>>());
    let mut by_depth = vec![n, kd, d, groups * og];
    by_depth.extend_from_slice(&ro);
    let y = reshape(transpose(reshape(y, split)?, perm)?, by_depth)?;
    let full = (d - 1) * s + (kd - 1) * dil + 1 + g.output_padding[0];
    let dilated_len = (d - 1) * s + 1;
    let mut sum: Option<Expr> = None;
    for t in 0..kd {
        // [N, D, O, RO...] for kernel depth t.
        let mut part = call(
            "squeeze",
            vec![slice_axis(y.clone(), 1, t, 1, 1)?],
            &[("axis", vec![1i64].into())],
        )?;
        if s > 1 {
            // Insert s-1 zero depths after each input depth, then drop the trailing ones.
            part = call(
                "expand_dims",
                vec![part],
                &[("axis", 2i64.into()), ("num_newaxis", 1i64.into())],
            )?;
            part = pad_axis(part, 2, 0, s - 1)?;
            let mut ps = shape_of(&part)?;
            ps.remove(2);
            ps[1] = d * s;
            part = slice_axis(reshape(part, ps)?, 1, 0, dilated_len, 1)?;
        }
        part = pad_axis(part, 1, t * dil, full - t * dil - dilated_len)?;
        sum = Some(match sum {
            None => part,
            Some(acc) => call("add", vec![acc, part], &[])?,
        });
    }
    let sum = sum.ok_or_else(|| Msg("the kernel has no depth".into()))?;
    let (pb, pe) = (g.conv.pads[0], g.conv.pads[k]);
    let od = full - pb - pe;
    if od < 1 {
        return Err(Msg(format!(
            "pads {:?} leave no output depth (full depth {full})",
            g.conv.pads
        )));
    }
    let cropped = slice_axis(sum, 1, pb, od, 1)?;
    transpose(cropped, swap_1_2(ro.len() + 3))
}

fn conv_transpose(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let w = ctx.input(node, 1)?;
    let xs = shape_of(&x)?;
    let ws = shape_of(&w)?;
    check_ranks(&xs, &ws)?;
    let k = xs.len() - 2;
    let kernel = kernel_shape(node, &ws)?;
    let (strides, dilations) = spatial_attrs(node, &kernel)?;
    let groups = node.attr_i("group", 1)?;
    if groups < 1 || ws[0] != xs[1] || xs[1] % groups != 0 {
        return Err(Msg(format!(
            "attribute `group` {groups} does not fit input channels {} and weight {ws:?}",
            xs[1]
        )));
    }
    let mut out_pad = node.attr_ints("output_padding", &vec![0; k])?;
    if out_pad.len() != k {
        return Err(Msg(format!(
            "attribute `output_padding` {out_pad:?} must hold {k} values"
        )));
    }
    let auto = node.attr_s("auto_pad", "NOTSET")?;
    // The full (unpadded) output extent of spatial axis i.
    let fulls: Vec<i64> = (0..k)
        .map(|i| strides[i] * (xs[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1)
        .collect();
    let full = |i: usize| fulls[i];
    let pads = if let Some(os) = node.opt_ints("output_shape")? {
        if os.len() < k {
            return Err(Msg(format!(
                "attribute `output_shape` {os:?} must hold the {k} spatial extents"
            )));
        }
        let os = &os[os.len() - k..];
        let mut p = vec![0; 2 * k];
        for i in 0..k {
            let total = full(i) - os[i];
            if total < 0 {
                // An output larger than the full result: the extra is output padding.
                out_pad[i] -= total;
                continue;
            }
            let (b, e) = split_same(total, &auto);
            p[i] = b;
            p[k + i] = e;
        }
        p
    } else if auto == "SAME_UPPER" || auto == "SAME_LOWER" {
        let mut p = vec![0; 2 * k];
        for i in 0..k {
            let (b, e) = split_same((full(i) - xs[2 + i] * strides[i]).max(0), &auto);
            p[i] = b;
            p[k + i] = e;
        }
        p
    } else if auto == "VALID" {
        vec![0; 2 * k]
    } else {
        let p = node.attr_ints("pads", &vec![0; 2 * k])?;
        if p.len() != 2 * k {
            return Err(Msg(format!("pads {p:?} must have {} values", 2 * k)));
        }
        p
    };
    let g = TransposedGeometry {
        conv: Geometry {
            strides,
            dilations,
            pads,
            groups,
        },
        output_padding: out_pad,
    };
    let mut y = conv_transpose_nd(x, w, &g)?;
    if let Some(b) = ctx.opt_input(node, 2)? {
        y = call("nn.bias_add", vec![y, b], &[("axis", 1i64.into())])?;
    }
    Ok(vec![y])
}

/// DeformConv (2-D): the convolution of `X` whose taps are moved by `offset` and scaled by
/// `mask` (a constant 1 when absent), plus the bias.
fn deform_conv(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let (x, w, offset) = (
        ctx.input(node, 0)?,
        ctx.input(node, 1)?,
        ctx.input(node, 2)?,
    );
    let (xs, ws) = (shape_of(&x)?, shape_of(&w)?);
    check_ranks(&xs, &ws)?;
    if xs.len() != 4 {
        return Err(Msg(format!(
            "only 2-D deformable convolution is supported, the input is {xs:?}"
        )));
    }
    let kernel = kernel_shape(node, &ws)?;
    let (strides, dilations) = spatial_attrs(node, &kernel)?;
    let pads = node.attr_ints("pads", &[0; 4])?;
    if pads.len() != 4 || pads.iter().any(|&p| p < 0) {
        return Err(Msg(format!(
            "attribute `pads` {pads:?} must hold 4 values >= 0"
        )));
    }
    let d = dtype_of(&x)?;
    let mask = match ctx.opt_input(node, 4)? {
        Some(m) => m,
        None => super::constant(&[1.0], &[1, 1, 1, 1], d)?,
    };
    let mut y = call(
        "nn.deformable_conv2d",
        vec![x, offset, w, mask],
        &[
            ("strides", strides.into()),
            ("padding", pads.into()),
            ("dilation", dilations.into()),
            ("groups", node.attr_i("group", 1)?.into()),
            ("offset_groups", node.attr_i("offset_group", 1)?.into()),
        ],
    )?;
    if let Some(b) = ctx.opt_input(node, 3)? {
        y = call("nn.bias_add", vec![y, b], &[("axis", 1i64.into())])?;
    }
    Ok(vec![y])
}

/// Registers the converters of this file.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("Conv", conv);
    t.insert("ConvTranspose", conv_transpose);
    t.insert("Col2Im", col2im);
    t.insert("DeformConv", deform_conv);
}
