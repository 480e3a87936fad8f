//! 3x3 convolutions with stride 1 as Winograd's F(2x2, 3x3) over channel blocks: every 2x2
//! tile of outputs from a 4x4 tile of inputs with 16 products per channel pair instead of 36.
//!
//! - input transform `V[e, t, c] = (B^T d B)[e]` for each 4x4 input tile `d` (tile `t`,
//!   channel `c`), `e` the 16 positions of the transformed tile;
//! - 16 products `M[e, t, k] = sum_c V[e, t, c] * U[e, c, k]`, `U` the transformed weights
//!   (`G g G^T`, made once from constant weights by [`transform_weights`]);
//! - output transform `Y = A^T M A` of each tile, in the output's channel blocks.
//!
//! `B^T`, `G` and `A^T` are the usual F(2, 3) matrices (interpolation points 0, 1, -1):
//! their entries are 0, 1/2 and +-1, so the transforms are additions and the results agree
//! with the direct convolution to a few float32 ulps.

use super::{compute_tagged, consts, invalid, shape_nd};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, Tensor};
use kiln_tir::{floordiv, floormod, select, PrimExpr};

/// The stage names the schedule finds: zero padding to whole tiles, the transformed input
/// tiles `V` and the 16 products `M`.
const PAD_STAGE: &str = "winograd_pad";
const V_STAGE: &str = "winograd_v";
const M_STAGE: &str = "winograd_m";

/// `B^T` of F(2, 3): row `r` of the input transform.
const BT: [[f32; 4]; 4] = [
    [1.0, 0.0, -1.0, 0.0],
    [0.0, 1.0, 1.0, 0.0],
    [0.0, -1.0, 1.0, 0.0],
    [0.0, 1.0, 0.0, -1.0],
];

/// `G` of F(2, 3): the weight transform.
const G: [[f32; 3]; 4] = [
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.0, 0.0, 1.0],
];

/// `A^T` of F(2, 3): the output transform.
const AT: [[f32; 4]; 2] = [[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, -1.0, -1.0]];

/// The transformed weights `U[e, c, k]` (`[16, C, K]`, `k` innermost) of OIHW 3x3 weights
/// `w` (`[K, C, 3, 3]`): `U[4i + j, c, k] = (G w[k, c] G^T)[i, j]`.
pub fn transform_weights(w: &[f32], k: usize, c: usize) -> Vec<f32> {
    let mut u = vec![0f32; 16 * c * k];
    for ko in 0..k {
        for ci in 0..c {
            let g = &w[(ko * c + ci) * 9..(ko * c + ci) * 9 + 9];
            // t = G g (4 x 3), then U = t G^T (4 x 4).
            let mut t = [[0f32; 3]; 4];
            for (i, row) in G.iter().enumerate() {
                for j in 0..3 {
                    t[i][j] = (0..3).map(|r| row[r] * g[r * 3 + j]).sum();
                }
            }
            for i in 0..4 {
                for (j, gj) in G.iter().enumerate() {
                    let v: f32 = (0..3).map(|r| t[i][r] * gj[r]).sum();
                    u[((i * 4 + j) * c + ci) * k + ko] = v;
                }
            }
        }
    }
    u
}

/// A linear combination `sum_i coef[i] * x[i]` written out, zero coefficients dropped and
/// coefficients of +-1 as additions and subtractions.
fn combine(coef: &[f32], x: &[PrimExpr]) -> PrimExpr {
    let mut acc: Option<PrimExpr> = None;
    for (&c, v) in coef.iter().zip(x) {
        if c == 0.0 {
            continue;
        }
        let negative = c == -1.0;
        let term = if c == 1.0 || negative {
            v.clone()
        } else {
            v.clone() * PrimExpr::f32(c as f64)
        };
        acc = Some(match (acc, negative) {
            (None, false) => term,
            (None, true) => PrimExpr::f32(0.0) - term,
            (Some(a), false) => a + term,
            (Some(a), true) => a - term,
        });
    }
    acc.unwrap_or_else(|| PrimExpr::f32(0.0))
}

/// `rows[r]` chosen by the index expression `r` (0 .. rows.len()): a chain of selects, which
/// fold away where `r` is a constant (an unrolled loop).
fn pick(r: &PrimExpr, rows: Vec<PrimExpr>) -> PrimExpr {
    let mut it = rows.into_iter().enumerate().rev();
    let (_, mut out) = it.next().expect("rows");
    for (i, v) in it {
        out = select(r.equal(i as i64), v, out);
    }
    out
}

/// The convolution of blocked data `data` (`[N, C/b, H, W, b]`) with transformed weights `u`
/// (`[16, C, K]`, [`transform_weights`]), padding `(top, left)` and output `[N, K/b, OH, OW,
/// b]` for `out_hw`: the stages `winograd_pad`, `winograd_v`, `winograd_m` and the output
/// (tagged [`tag::CONV2D_WINOGRAD`]).
pub fn conv2d_winograd_nchwc(
    data: &Tensor,
    u: &Tensor,
    pad: (i64, i64),
    out_hw: (i64, i64),
) -> Result<Tensor> {
    const W: &str = "conv2d (Winograd F(2x2, 3x3))";
    let ds = shape_nd(data, 5, W)?;
    let us = shape_nd(u, 3, W)?;
    let (n, cb, h, w, b) = (ds[0], ds[1], ds[2], ds[3], ds[4]);
    let (c, k) = (cb * b, us[2]);
    if us[0] != 16 || us[1] != c || k % b != 0 {
        return Err(invalid(
            W,
            format!(
                "weights {us:?} do not fit data {ds:?} (want [16, {c}, K], K in blocks of {b})"
            ),
        ));
    }
    let (oh, ow) = out_hw;
    let (th, tw) = ((oh + 1) / 2, (ow + 1) / 2);
    let tiles = n * th * tw;
    // Zero padding up to whole tiles: rows -top .. 2*th + 2 - top.
    let (ph, pw) = (2 * th + 2, 2 * tw + 2);
    let d = data.clone();
    let padded = compute_tagged(
        &consts(&[n, cb, ph, pw, b]),
        |i| {
            let y = i[2].to_expr() - pad.0;
            let x = i[3].to_expr() - pad.1;
            let inside = y
                .ge(0)
                .logical_and(y.lt(h))
                .logical_and(x.ge(0))
                .logical_and(x.lt(w));
            let yc = kiln_tir::max(kiln_tir::min(y, h - 1), 0);
            let xc = kiln_tir::max(kiln_tir::min(x, w - 1), 0);
            let v = d.at(&[i[0].to_expr(), i[1].to_expr(), yc, xc, i[4].to_expr()]);
            kiln_tir::op::if_then_else(inside, v, PrimExpr::f32(0.0))
        },
        PAD_STAGE,
        tag::INJECTIVE,
    )?;
    let v = compute_tagged(
        &consts(&[4, 4, tiles, c]),
        |i| {
            let (eps, nu, t, ch) = (
                i[0].to_expr(),
                i[1].to_expr(),
                i[2].to_expr(),
                i[3].to_expr(),
            );
            let nn = floordiv(t.clone(), th * tw);
            let ty = floordiv(floormod(t.clone(), th * tw), tw);
            let tx = floormod(t, tw);
            let at = |r: i64, s: i64| {
                padded.at(&[
                    nn.clone(),
                    floordiv(ch.clone(), b),
                    ty.clone() * 2 + r,
                    tx.clone() * 2 + s,
                    floormod(ch.clone(), b),
                ])
            };
            // Rows of B^T d, then columns of (B^T d) B.
            let rows: Vec<Vec<PrimExpr>> = BT
                .iter()
                .map(|bt| {
                    (0..4)
                        .map(|s| combine(bt, &(0..4).map(|r| at(r, s)).collect::<Vec<_>>()))
                        .collect()
                })
                .collect();
            let per_row: Vec<PrimExpr> = rows
                .iter()
                .map(|row| pick(&nu, BT.iter().map(|bt| combine(bt, row)).collect()))
                .collect();
            pick(&eps, per_row)
        },
        V_STAGE,
        tag::INJECTIVE,
    )?;
    let rc = reduce_axis_n(c, "rc");
    let m = compute_tagged(
        &consts(&[16, tiles, k]),
        |i| {
            let e = i[0].to_expr();
            sum(
                v.at(&[
                    floordiv(e.clone(), 4),
                    floormod(e.clone(), 4),
                    i[1].to_expr(),
                    rc.expr(),
                ]) * u.at(&[e, rc.expr(), i[2].to_expr()]),
                std::slice::from_ref(&rc),
            )
        },
        M_STAGE,
        tag::COMM_REDUCE,
    )?;
    compute_tagged(
        &consts(&[n, k / b, oh, ow, b]),
        |i| {
            let (y, x) = (i[2].to_expr(), i[3].to_expr());
            let t =
                i[0].to_expr() * (th * tw) + floordiv(y.clone(), 2) * tw + floordiv(x.clone(), 2);
            let ch = i[1].to_expr() * b + i[4].to_expr();
            let at = |e: i64| m.at(&[PrimExpr::i32(e), t.clone(), ch.clone()]);
            // Columns of M A, then rows of A^T (M A).
            let cols: Vec<Vec<PrimExpr>> = AT
                .iter()
                .map(|a| {
                    (0..4)
                        .map(|eps| {
                            combine(a, &(0..4).map(|nu| at(eps * 4 + nu)).collect::<Vec<_>>())
                        })
                        .collect()
                })
                .collect();
            let by_x: Vec<PrimExpr> = AT
                .iter()
                .map(|a| {
                    pick(
                        &floormod(x.clone(), 2),
                        cols.iter().map(|col| combine(a, col)).collect(),
                    )
                })
                .collect();
            // by_x[r] picks the row r of A^T; rows are chosen by y's parity.
            pick(&floormod(y, 2), by_x)
        },
        "conv2d_winograd",
        tag::CONV2D_WINOGRAD,
    )
}

/// Schedules [`conv2d_winograd_nchwc`] (`out` its output or a blocked elementwise epilogue of
/// it) on `cpu`: padding and input transform at root, tiles parallel, channels in vectors and
/// the 16 transformed positions unrolled; the 16 products in a register tile of `rows` tiles
/// x `vectors` channel vectors accumulated with the input channels outermost, computed for a
/// block of tiles and channels at each step of the output's parallel loop or whole at root
/// (`products_in_blocks`); the output transform per 2x2 outputs (unrolled), channel block
/// one vector.
pub fn schedule_conv2d_winograd(
    s: &kiln_te::Schedule,
    out: &Tensor,
    cpu: &kiln_tir::CpuDesc,
) -> Result<()> {
    use crate::schedule::{extent, find_tagged, fuse_all, inline_injective};
    let Some(conv) = find_tagged(out, &[tag::CONV2D_WINOGRAD]) else {
        return crate::schedule::generic::schedule_generic(s, out, cpu);
    };
    let stage_of = |name: &str| {
        crate::schedule::producers(out)
            .into_iter()
            .find(|op| op.name() == name)
            .map(|op| op.output(0))
    };
    let (Some(padded), Some(v), Some(m)) =
        (stage_of(PAD_STAGE), stage_of(V_STAGE), stage_of(M_STAGE))
    else {
        return crate::schedule::generic::schedule_generic(s, out, cpu);
    };
    // The output transform inlines into a blocked epilogue; unpacked to NCHW, it stays.
    let blocked = out.ndim() == 5;
    let mut keep = vec![padded.op().clone(), v.op().clone()];
    if !blocked {
        keep.push(conv.clone());
    }
    inline_injective(s, out, &keep)?;
    let lanes = cpu.lanes(out.dtype());
    // Padding: blocks of channels one vector.
    let ps = s.stage(&padded);
    let f = fuse_all(&ps, &[padded.axis(0), padded.axis(1), padded.axis(2)])?.expect("loops");
    ps.parallel(&f)?;
    ps.vectorize(&padded.axis(4))?;
    // Input transform: per tile, channel vectors with the 16 positions unrolled.
    let b = extent(&padded, 4);
    let vs = s.stage(&v);
    let (co, ci) = vs.split(&v.axis(3), b)?;
    vs.reorder(&[v.axis(2), co.clone(), v.axis(0), v.axis(1), ci.clone()])?;
    vs.parallel(&v.axis(2))?;
    vs.unroll(&v.axis(0))?;
    vs.unroll(&v.axis(1))?;
    vs.vectorize(&ci)?;
    // Products: rows of tiles x vectors of output channels in registers.
    let k = extent(&m, 2);
    let tiles = extent(&m, 1);
    // Half the registers as accumulators (4 x 4 vectors with AVX-512): the tile keeps its
    // weight vectors and broadcasts live too; 6 x 4 ran 1.2-3.4x slower on AMD Zen 4.
    let vectors = [4i64, 2, 1]
        .into_iter()
        .find(|vv| k % (vv * lanes) == 0)
        .unwrap_or(1);
    let rows = ((cpu.accumulators_wide() / vectors).max(1)).min(tiles);
    // Output transform (with its epilogue): 2x2 outputs unrolled, the block one vector; an
    // NCHW output (unpacked from the blocks) after it, rows in vectors.
    let y = if blocked { out.clone() } else { conv.output(0) };
    let os = s.stage(&y);
    let (yo, yi) = os.split(&y.axis(2), 2)?;
    let (xo, xi) = os.split(&y.axis(3), 2)?;
    let group = vectors * lanes;
    let out_b = extent(&y, 4);
    let local = s.cache_write(&m, "local")?;
    let ms = s.stage(&m);
    let in_blocks = products_in_blocks(extent(&v, 3), k, group) && group % out_b == 0;
    let f = if in_blocks {
        // The products of a block of tiles and a group of channels at each step of the
        // output's parallel loop, read back from L2: computed whole, the 16 products of every
        // tile are four times the output (3.2 MB for squeezenet's 64 channels at 55x55, read
        // back from memory: 0.67 ms against 0.35 on an Intel Xeon). Blocks of whole rows of
        // tiles (contiguous tiles), at most about PRODUCT_TILES tiles, dividing the rows so
        // that no block reaches past the plane.
        let (kbo, kbi) = os.split(&y.axis(1), group / out_b)?;
        let (th, tw) = ((extent(&y, 2) + 1) / 2, (extent(&y, 3) + 1) / 2);
        let most = ((PRODUCT_TILES + tw - 1) / tw).clamp(1, th);
        let rows_of_tiles = (1..=most).rev().find(|r| th % r == 0).unwrap_or(1);
        let (yoo, yoi) = os.split(&yo, rows_of_tiles)?;
        os.reorder(&[
            y.axis(0),
            kbo.clone(),
            yoo.clone(),
            yoi,
            kbi,
            xo,
            yi.clone(),
            xi.clone(),
            y.axis(4),
        ])?;
        let f = fuse_all(&os, &[y.axis(0), kbo, yoo])?.expect("loops");
        ms.compute_at(&os, &f)?;
        f
    } else {
        os.reorder(&[
            y.axis(0),
            y.axis(1),
            yo.clone(),
            xo,
            yi.clone(),
            xi.clone(),
            y.axis(4),
        ])?;
        fuse_all(&os, &[y.axis(0), y.axis(1), yo])?.expect("loops")
    };
    let (to, ti) = ms.split(&m.axis(1), rows)?;
    let (ko, kin) = ms.split(&m.axis(2), group)?;
    ms.reorder(&[m.axis(0), to.clone(), ko.clone(), ti, kin.clone()])?;
    if !in_blocks {
        let fm = fuse_all(&ms, &[m.axis(0), to])?.expect("loops");
        ms.parallel(&fm)?;
    }
    let (_, kv) = ms.split(&kin, lanes)?;
    ms.vectorize(&kv)?;
    let ls = s.stage(&local);
    ls.compute_at(&ms, &ko)?;
    crate::schedule::register_tile_rows_by_vectors(&ls, lanes)?;
    os.parallel(&f)?;
    os.unroll(&yi)?;
    os.unroll(&xi)?;
    os.vectorize(&y.axis(4))?;
    if !blocked {
        // Rows of the NCHW output in vectors (each a gather of one channel from 16 blocks'
        // positions, in L1); left scalar, a 16-channel 160x160 output took longer to unpack
        // than to compute.
        let st = s.stage(out);
        let f = fuse_all(&st, &[out.axis(0), out.axis(1), out.axis(2)])?.expect("loops");
        st.parallel(&f)?;
        let vf = crate::schedule::vector_factor(extent(out, 3), lanes);
        if vf > 1 {
            let (_, xi) = st.split(&out.axis(3), vf)?;
            st.vectorize(&xi)?;
        }
    }
    Ok(())
}

/// The least `C K / (C + K)` (input and output channels) for which [`applies`] chooses
/// Winograd: the products save `40 C K` flops per 2x2 tile and the transformed tiles cost
/// `16 (C + K)` floats written and read again, which on large planes leave the caches (a
/// 16 -> 16 layer at 160x160 in a DBNet-style detector: 1.5 ms against 1.0 direct; 16 -> 64
/// at 55x55 and wider layers won).
pub const MIN_CHANNEL_RATIO: i64 = 12;

/// The fewest 2x2 output tiles (over the batch) for which [`applies`] chooses Winograd: the
/// products reuse each transformed weight vector only across the tiles of one register tile,
/// and their `16 C K` weights (1.8x the direct kernel's) stream from L2 or memory once per
/// tile group, so small planes of wide layers are bound by weight traffic (resnet50's 512 ->
/// 512 at 7x7, 16 tiles: 3.5 ms in the network against 2.2 direct on an Intel Xeon with
/// AVX-512; its 14x14 layers, 49 tiles, gain 1.2x).
pub const MIN_TILES: i64 = 32;

/// Whether the 16 products are computed in blocks of tiles at the output transform's loop
/// (`c` input and `k` output channels, `group` channels per block): the transformed input
/// tiles are then read once per group of output channels, so blocks pay where those extra
/// reads (`k / group - 1` times the input tiles, `16 c` floats a tile) are fewer than the
/// products' own round trip through memory (`16 k` floats a tile). resnet50's 128- and
/// 256-channel layers computed whole ran 1.1-1.2x faster than in blocks (Intel Xeon).
fn products_in_blocks(c: i64, k: i64, group: i64) -> bool {
    (k / group.max(1) - 1).max(0) * c < k
}

/// About how many tiles the products compute at a time, for their output transform to read
/// back from L2 (whole rows of tiles: 4 KiB a tile with 64 output channels): enough that a
/// row of tiles of a 7x7 or 14x14 output splits into the register tile's rows with one
/// shorter tile at most.
const PRODUCT_TILES: i64 = 64;

/// The kernel layout of transformed weights (`[16, C, K]`, [`transform_weights`]).
pub const KERNEL_LAYOUT: &str = "WINOGRAD_F2x2_3x3";

/// Whether a convolution (`data` `[N, C, H, W]`, OIHW `weight`) computes as F(2x2, 3x3) on
/// `cpu`: a 3x3 kernel, stride and dilation 1, one group, every data extent known at compile
/// time, input and output channels in whole blocks of the CPU's float32 lanes and wide enough
/// ([`MIN_CHANNEL_RATIO`]), and at least [`MIN_TILES`] output tiles. Tuning records decide instead where they have the layer
/// (knob `winograd`). On AMD Zen 4 every such layer of resnet50, squeezenet and a YOLO-style
/// detector ran 1.25-2.2x faster than the direct channel-blocked kernel, which was at the
/// core's FMA peak.
pub fn applies(
    data: &[i64],
    weight: &[i64],
    a: &super::Conv2dAttrs,
    cpu: &kiln_tir::CpuDesc,
) -> bool {
    let lanes = cpu.f32_lanes();
    let shape_ok = data.len() == 4
        && weight.len() == 4
        && data.iter().all(|&d| d > 0)
        && weight[2] == 3
        && weight[3] == 3
        && a.strides == (1, 1)
        && a.dilation == (1, 1)
        && a.groups == 1
        && lanes > 1
        && data[1] == weight[1]
        && data[1] % lanes == 0
        && weight[0] % lanes == 0
        && data[1] * weight[0] >= MIN_CHANNEL_RATIO * (data[1] + weight[0]);
    let tiles = match super::conv2d::conv2d_out_shape(data, weight, a) {
        Ok([n, _, oh, ow]) => n * ((oh + 1) / 2) * ((ow + 1) / 2),
        Err(_) => 0,
    };
    if !shape_ok || tiles < MIN_TILES {
        return false;
    }
    let key = crate::tuning::workload_key("conv2d_winograd", &[data, weight]);
    crate::tuning::knob(&key, "winograd", &[0, 1]).is_none_or(|v| v != 0)
}
