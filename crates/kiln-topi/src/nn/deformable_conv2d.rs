//! `deformable_conv2d`: 2-D convolution whose taps are moved by learned offsets and scaled by
//! a mask (ONNX `DeformConv`, torchvision's `deform_conv2d`; NCHW, OIHW weights).
//!
//! Two stages: `deform_sampled[n, c, i, j, y, x]`, the input bilinearly sampled (zeros
//! outside the image, each corner on its own) at the tap `(i, j)` of output point `(y, x)`
//! moved by its offset and scaled by its mask (an im2col whose columns move), then the
//! reduction with the weights over `(c, i, j)` within each group. The sampled stage stays a
//! stage of its own (at the root, parallel) so each sample is computed once, not once per output
//! channel.

use super::conv2d::Conv2dAttrs;
use crate::transform::util::{compute_tagged, const_shape, constant, require_float, value_error};
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, Schedule, Tensor};
use kiln_tir::op::floor;
use kiln_tir::{cast, logical_and, max, min, select, PrimExpr};

/// Operation tag of the sampled stage.
pub const SAMPLED_TAG: &str = "deform_sampled";

/// Operation tag of the convolution stage.
pub const TAG: &str = "deformable_conv2d";

/// The deformable convolution of `x` `[N, C, H, W]` with `w` `[O, C/groups, kh, kw]`, offsets
/// `offset` `[N, og*kh*kw*2, OH, OW]` (per offset group and tap: `dy`, `dx`) and `mask`
/// `[N, og*kh*kw, OH, OW]` (a dimension of 1 broadcasts). Output `[N, O, OH, OW]`, with `OH`,
/// `OW` the offsets' (which must match the convolution's geometry).
///
/// # Errors
/// A `ValueError` for shapes or groups that do not fit, a `TypeError` for non-float data.
pub fn deformable_conv2d(
    x: &Tensor,
    w: &Tensor,
    offset: &Tensor,
    mask: &Tensor,
    attrs: &Conv2dAttrs,
    offset_groups: i64,
) -> Result<Tensor> {
    let name = "deformable_conv2d";
    require_float(x, name)?;
    let (xs, ws, os, ms) = (
        const_shape(x, name)?,
        const_shape(w, name)?,
        const_shape(offset, name)?,
        const_shape(mask, name)?,
    );
    let (n, c, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
    let (o, cg, kh, kw) = (ws[0], ws[1], ws[2], ws[3]);
    let g = attrs.groups;
    let og = offset_groups;
    let (sh, sw) = attrs.strides;
    let (dh, dw) = attrs.dilation;
    let (pt, pl) = (attrs.padding.top, attrs.padding.left);
    let (oh, ow) = (os[2], os[3]);
    if g < 1 || og < 1 || c != cg * g || o % g != 0 || c % og != 0 {
        return Err(value_error(
            name,
            format!(
                "channels do not fit: data {xs:?}, weight {ws:?}, groups {g}, offset groups {og}"
            ),
        ));
    }
    let taps = kh * kw;
    if os != [n, og * taps * 2, oh, ow] {
        return Err(value_error(
            name,
            format!(
                "offset must be [{n}, {}, OH, OW], got {os:?}",
                og * taps * 2
            ),
        ));
    }
    let fits = |got: i64, want: i64| got == 1 || got == want;
    if ms.len() != 4
        || !fits(ms[0], n)
        || !fits(ms[1], og * taps)
        || !fits(ms[2], oh)
        || !fits(ms[3], ow)
    {
        return Err(value_error(
            name,
            format!(
                "mask must be [{n}, {}, {oh}, {ow}] (or 1 where it broadcasts), got {ms:?}",
                og * taps
            ),
        ));
    }
    let dt = x.dtype();
    let it = x.shape()[0].dtype();
    let ci = |v: i64| PrimExpr::const_int(it, v);
    let cpg = c / og;
    let shape6: Vec<PrimExpr> = [n, c, kh, kw, oh, ow].iter().map(|&d| ci(d)).collect();
    let sampled = compute_tagged(
        &shape6,
        |v| {
            let (bn, bc, bi, bj, by, bx) = (
                v[0].to_expr(),
                v[1].to_expr(),
                v[2].to_expr(),
                v[3].to_expr(),
                v[4].to_expr(),
                v[5].to_expr(),
            );
            let tap = (bc.clone() / ci(cpg)) * ci(taps) + bi.clone() * ci(kw) + bj.clone();
            let off = |k: i64| {
                offset.at(&[
                    bn.clone(),
                    tap.clone() * ci(2) + ci(k),
                    by.clone(),
                    bx.clone(),
                ])
            };
            let base_y = by.clone() * ci(sh) - ci(pt) + bi * ci(dh);
            let base_x = bx.clone() * ci(sw) - ci(pl) + bj * ci(dw);
            let py = cast(dt, base_y) + off(0);
            let px = cast(dt, base_x) + off(1);
            let (fy, fx) = (floor(py.clone()), floor(px.clone()));
            let (ly, lx) = (py - fy.clone(), px - fx.clone());
            let (y0, x0) = (cast(it, fy), cast(it, fx));
            let one = constant(dt, 1.0);
            let corner = |yy: PrimExpr, xx: PrimExpr, wgt: PrimExpr| {
                let inside = logical_and(
                    logical_and(yy.ge(ci(0)), yy.lt(ci(h))),
                    logical_and(xx.ge(ci(0)), xx.lt(ci(wd))),
                );
                let cy = max(min(yy, ci(h - 1)), ci(0));
                let cx = max(min(xx, ci(wd - 1)), ci(0));
                let v = x.at(&[bn.clone(), bc.clone(), cy, cx]);
                select(inside, v * wgt, constant(dt, 0.0))
            };
            let val = corner(
                y0.clone(),
                x0.clone(),
                (one.clone() - ly.clone()) * (one.clone() - lx.clone()),
            ) + corner(
                y0.clone(),
                x0.clone() + ci(1),
                (one.clone() - ly.clone()) * lx.clone(),
            ) + corner(
                y0.clone() + ci(1),
                x0.clone(),
                ly.clone() * (one - lx.clone()),
            ) + corner(y0 + ci(1), x0 + ci(1), ly * lx);
            let pick = |d: usize, e: PrimExpr| if ms[d] == 1 { ci(0) } else { e };
            let m = mask.at(&[pick(0, bn), pick(1, tap), pick(2, by), pick(3, bx)]);
            val * m
        },
        SAMPLED_TAG,
        SAMPLED_TAG,
    )?;
    let rc = reduce_axis_n(ci(cg), "rc");
    let ri = reduce_axis_n(ci(kh), "ri");
    let rj = reduce_axis_n(ci(kw), "rj");
    let opg = o / g;
    let shape4: Vec<PrimExpr> = [n, o, oh, ow].iter().map(|&d| ci(d)).collect();
    let out = compute_tagged(
        &shape4,
        |v| {
            let (bn, bo, by, bx) = (
                v[0].to_expr(),
                v[1].to_expr(),
                v[2].to_expr(),
                v[3].to_expr(),
            );
            let chan = (bo.clone() / ci(opg)) * ci(cg) + rc.expr();
            sum(
                w.at(&[bo, rc.expr(), ri.expr(), rj.expr()])
                    * sampled.at(&[bn, chan, ri.expr(), rj.expr(), by, bx]),
                &[rc.clone(), ri.clone(), rj.clone()],
            )
        },
        name,
        TAG,
    )?;
    Ok(out)
}

/// The schedule: the sampled stage at the root with `(n, c)` fused and parallel, the output's
/// `(n, o)` fused and parallel; injective epilogues (a bias) inlined.
///
/// # Errors
/// A `ValueError` when `out` does not read a deformable convolution.
pub fn schedule_deformable_conv2d(
    s: &Schedule,
    out: &Tensor,
    _cpu: &kiln_tir::CpuDesc,
) -> Result<()> {
    let Some(sampled) = crate::schedule::find_tagged(out, &[SAMPLED_TAG]) else {
        return Err(value_error(
            "deformable_conv2d",
            "no sampled stage to schedule",
        ));
    };
    let conv = crate::schedule::find_tagged(out, &[TAG]);
    let keep: Vec<_> = std::iter::once(sampled.clone())
        .chain(conv.clone())
        .collect();
    crate::schedule::inline_injective(s, out, &keep)?;
    let st = s.stage_op(&sampled);
    let t = sampled.output(0);
    if let Some(f) = crate::schedule::fuse_all(&st, &[t.axis(0), t.axis(1)])? {
        st.parallel(&f)?;
    }
    let root = out.op().clone();
    let ot = root.output(0);
    if ot.ndim() >= 2 {
        let so = s.stage_op(&root);
        if let Some(f) = crate::schedule::fuse_all(&so, &[ot.axis(0), ot.axis(1)])? {
            so.parallel(&f)?;
        }
    }
    Ok(())
}
