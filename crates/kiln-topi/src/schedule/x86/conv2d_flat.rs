//! x86 schedule of 1x1 channel-blocked convolutions over flattened output positions
//! ([`crate::nn::PackedLayouts::flat_positions`], tag [`crate::tag::CONV2D_NCHWC_FLAT`]): a
//! matrix product of the positions (rows, a broadcast input value each per channel) and the
//! packed weights (columns, a vector of `b` filters per block), whose register tiles span
//! output rows as the matrix kernel's do ([`super::dense`]).
//!
//! A register tile of the row-by-row kernel ([`super::conv2d::register_tile`]) is cut from one
//! output row: with AVX2's 16 registers, 4 blocks x 2 columns or, on 7-wide rows, 1 block x 7
//! columns (8 or 7 accumulators, up to 1.14 loads a multiply-add). Over flattened positions a
//! tile is 2 blocks x 6 positions (12 accumulators, 0.67 loads a multiply-add) on any plane.

use crate::nn::conv2d::Conv2dAttrs;
use crate::schedule::{extent, fuse_all, generic, inline_all_but_padding};
use kiln_ffi::Result;
use kiln_te::{Operation, Schedule, Stage, Tensor};
use kiln_tir::{CpuDesc, DataType};

/// Whether a channel-blocked convolution (packed weight `[O/b, C, KH, KW, b]`, blocked data
/// and output, elements of `dtype`) is computed over flattened positions on `cpu`: float32
/// (where it was measured), a 1x1 kernel, no padding, one group, and either a stride (the
/// product then reads its positions copied together) or fewer lanes than
/// [`crate::nn::conv2d_1x1::WIDE_LANES`].
///
/// Measured on an AMD EPYC family 25 model 17, one layer with blocked data and output, timed in
/// turns with the row-by-row kernel:
/// - AVX2 code, stride 1: resnet50's 1x1 layers 5-16% faster (2048 -> 512 at 7x7 1.149 ->
///   0.968 ms, 512 -> 2048 at 7x7 1.141 -> 0.975, 1024 -> 256 at 14x14 0.972 -> 0.896, 64 ->
///   256 at 56x56 0.972 -> 0.924), 0-12% with the caches flushed before each run;
/// - stride 2: 1024 -> 2048 at 14x14 3.02 -> 2.24 ms, 512 -> 1024 at 28x28 2.12 -> 1.89,
///   256 -> 512 at 56x56 2.94 -> 2.53 (AVX2), 5% faster with AVX-512;
/// - AVX-512, stride 1: the row-by-row tiles already hold 16 to 24 accumulators with 32
///   registers: level (-8% to +6%).
pub fn applies(weight: &[i64], a: &Conv2dAttrs, dtype: DataType, cpu: &CpuDesc) -> bool {
    let narrow = cpu.lanes(dtype) < crate::nn::conv2d_1x1::WIDE_LANES;
    dtype == DataType::float(32)
        && weight.len() == 5
        && weight[2] == 1
        && weight[3] == 1
        && a.padding.is_zero()
        && a.groups == 1
        && (narrow || a.strides != (1, 1))
}

/// Schedules the blocked output `out` (`[N, O/b, OH, OW, b]`: the flat product `conv`
/// `[N, O/b, OH*OW, b]` read back by row and column, with its fused epilogue) as the matrix
/// kernel schedules a product (an NCHW output: `schedule_unpacked`):
///
/// - the output's rows and columns fused into one loop of positions, split into tiles of `mr`
///   positions (the last may be shorter), its channel blocks into tiles of `tb` ([`flat_tile`]);
///   `n` and the channel tiles fused and parallel, the position tiles inside, then a tile's
///   blocks and positions unrolled and a block's `b` channels one vector;
/// - the product computed at each position tile into `tb x mr` accumulators (the fused index
///   `(p / OW) * OW + p % OW` simplifies to `p`, so the tile is exactly its positions), the
///   epilogue then applied from the registers. The input channels are outermost (the channels
///   of a data block split by 4, the inner 4 unrolled), a position's broadcast input meeting
///   the tile's `tb` weight vectors in turn.
pub fn schedule_conv2d_nchwc_flat(
    s: &Schedule,
    out: &Tensor,
    conv: &Operation,
    cpu: &CpuDesc,
) -> Result<()> {
    let ft = conv.output(0);
    let same_plane = |c: i64| {
        ft.ndim() == 4
            && extent(out, 0) == extent(&ft, 0)
            && extent(out, 1) == c
            && extent(out, 2) * extent(out, 3) == extent(&ft, 2)
    };
    let (blocks, b) = (extent(&ft, 1), extent(&ft, 3));
    let lanes = cpu.lanes(ft.dtype());
    let vectors = (b + lanes - 1) / lanes;
    if out.ndim() == 4 && same_plane(blocks * b) {
        return schedule_unpacked(s, out, conv, vectors, cpu);
    }
    if !(out.ndim() == 5 && same_plane(blocks) && extent(out, 4) == b) {
        return generic::schedule_generic(s, out, cpu);
    }
    let (tb, mr) = flat_tile(blocks, extent(&ft, 2), vectors, cpu);
    inline_all_but_padding(s, out, conv, &[], cpu)?;
    let main = s.stage(out);
    let p = main.fuse(&out.axis(2), &out.axis(3))?;
    let (po, pi) = main.split(&p, mr)?;
    let (oo, om) = main.split(&out.axis(1), tb)?;
    // A shorter last tile of blocks keeps its guard linear in the outermost (parallel) loop,
    // which LoopPartition then peels, the other tiles staying unguarded; else `n` and the
    // channel tiles are fused.
    let whole = blocks % tb == 0;
    let outer = if whole {
        [out.axis(0), oo.clone()]
    } else {
        [oo.clone(), out.axis(0)]
    };
    let inner = [po.clone(), om.clone(), pi.clone(), out.axis(4)];
    main.reorder(&[outer.as_slice(), &inner].concat())?;
    if whole {
        let fused = fuse_all(&main, &outer)?.expect("two loops");
        main.parallel(&fused)?;
    } else {
        main.parallel(&oo)?;
    }
    main.unroll(&om)?;
    main.unroll(&pi)?;
    if b > 1 {
        main.vectorize(&out.axis(4))?;
    }
    let cs = s.stage_op(conv);
    cs.set_scope("local")?;
    cs.compute_at(&main, &po)?;
    register_tile(&cs, b)
}

/// [`schedule_conv2d_nchwc_flat`] for an NCHW output `out` (`[N, O, OH, OW]`: the blocked
/// product unpacked by a fused layout transform, with the epilogue): a register tile across
/// rows would leave its channels to be transposed through memory into the output's rows
/// (a YOLO-style detector's 1x1 layer into an NCHW head, 40x40: 0.31 -> 0.41 ms), so the tiles
/// are the row-by-row kernel's ([`super::conv2d::register_tile`], stored as
/// [`super::conv2d::output_tiles`] stores them): `tb` blocks x `cols` positions of one row,
/// each a box of the flat product, computed at the output's column tile.
fn schedule_unpacked(
    s: &Schedule,
    out: &Tensor,
    conv: &Operation,
    vectors: i64,
    cpu: &CpuDesc,
) -> Result<()> {
    let ft = conv.output(0);
    let (blocks, b) = (extent(&ft, 1), extent(&ft, 3));
    let tile = super::conv2d::register_tile(extent(out, 3), blocks, vectors, (1, 1), cpu);
    inline_all_but_padding(s, out, conv, &[], cpu)?;
    let main = s.stage(out);
    let (_, xo) = super::conv2d::output_tiles(&main, out, b, tile, None, cpu)?;
    let cs = s.stage_op(conv);
    cs.set_scope("local")?;
    cs.compute_at(&main, &xo)?;
    register_tile(&cs, b)
}

/// The product's stage `[n, blocks, positions, b]` (its reduction over the channels: data
/// blocks, then the channels of a block) in registers: the reduction outermost,
/// the channels of a block split by 4 and the inner 4 unrolled when there are at least 8, then
/// positions and blocks (both unrolled) and the block's `b` channels (vectorized).
fn register_tile(cs: &Stage, b: i64) -> Result<()> {
    let (data, red): (Vec<_>, Vec<_>) = cs
        .leaf_iter_vars()
        .into_iter()
        .partition(|iv| !iv.is_reduce());
    let [n, blocks, positions, lanes] = data.as_slice() else {
        return Ok(());
    };
    let mut order = vec![n.clone()];
    let mut unroll = None;
    match red.as_slice() {
        [rco, rci] if b >= 8 && b % 4 == 0 => {
            let (ko, ki) = cs.split(rci, 4)?;
            order.extend([rco.clone(), ko, ki.clone()]);
            unroll = Some(ki);
        }
        _ => order.extend(red),
    }
    order.extend([positions.clone(), blocks.clone(), lanes.clone()]);
    cs.reorder(&order)?;
    if let Some(ki) = unroll {
        cs.unroll(&ki)?;
    }
    cs.unroll(positions)?;
    cs.unroll(blocks)?;
    if b > 1 {
        cs.vectorize(lanes)?;
    }
    Ok(())
}

/// The register tile `(blocks, positions)` of a flat product with `blocks` channel blocks of
/// `vectors` vectors each over `positions` output positions: of 1 to 4 blocks dividing
/// `blocks`, each with the most positions (up to 16) whose accumulators fit
/// [`CpuDesc::accumulators`] and leave registers for a weight vector per block and a
/// broadcast, the tile with the fewest loads per multiply-add (`blocks x vectors` weight loads
/// and `positions` broadcasts per input channel, for `blocks x vectors x positions`
/// multiply-adds); ties go to more accumulators. AVX2: 2 blocks x 6 positions; AVX-512: 4
/// blocks x 6. Where only tiles of one block divide, tiles of up to a quarter of the blocks
/// compete too, the last tile then shorter: squeezenet's 1000 classes are 125 blocks of 8,
/// 2.07 -> 1.66 ms in tiles of 3 blocks x 4 positions (AVX2, AMD EPYC family 25 model 17).
pub fn flat_tile(blocks: i64, positions: i64, vectors: i64, cpu: &CpuDesc) -> (i64, i64) {
    let v = vectors.max(1);
    let fits = |r: i64, t: i64| super::dense::tile_fits(r, t, v, cpu);
    let best = |partial: bool| {
        (1..=4.min(blocks.max(1)))
            .filter(|t| blocks % t == 0 || (partial && blocks >= 4 * t))
            .filter_map(|t| {
                let r = (1..=positions.clamp(1, 16)).rev().find(|&r| fits(r, t))?;
                Some((t, r))
            })
            .min_by(|&(t1, r1), &(t2, r2)| {
                // loads / multiply-adds, compared as fractions; then the more accumulators.
                let loads = |t: i64, r: i64| t * v + r;
                let fmas = |t: i64, r: i64| t * v * r;
                (loads(t1, r1) * fmas(t2, r2))
                    .cmp(&(loads(t2, r2) * fmas(t1, r1)))
                    .then((t2 * r2).cmp(&(t1 * r1)))
            })
            .unwrap_or((1, 1))
    };
    match best(false) {
        (1, _) => best(true),
        whole => whole,
    }
}
