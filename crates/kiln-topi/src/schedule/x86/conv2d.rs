//! x86 schedule of NCHW convolutions (generic, grouped, depthwise, transposed).

use super::main_and_compute;
use crate::schedule::{
    dividing_factor, extent, extents, find_tagged, fuse_all, generic, inline_all_but_padding,
    inline_injective, reduce_extents, same_shape, unroll_factor, vector_factor,
};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{Operation, Schedule, Tensor};
use kiln_tir::CpuDesc;

/// Schedules the convolution `out` depends on (tags [`tag::CONV2D_NCHW`],
/// [`tag::DEPTHWISE_CONV2D_NCHW`], [`tag::CONV2D_TRANSPOSE_NCHW`]), `out` being it or a 4-D
/// injective epilogue of its shape:
///
/// - the padding stage at root, its `(n, c)` loops parallel (so the inner loads are plain);
/// - output tiles of `ob` channels x `vf` columns (`ob` a power of two dividing O within the
///   CPU's accumulator budget, 1 for depthwise; `vf` from [`crate::schedule::vector_factor`]);
///   `n`, the channel blocks and rows fused and parallel;
/// - the convolution accumulated per tile in a local cache (or computed at the epilogue's
///   tile), reduction loops outside, channels unrolled and columns vectorized inside.
pub fn schedule_conv2d_nchw(s: &Schedule, out: &Tensor, cpu: &CpuDesc) -> Result<()> {
    if find_tagged(out, &[tag::CONV2D_WINOGRAD]).is_some() {
        return crate::nn::conv2d_winograd::schedule_conv2d_winograd(s, out, cpu);
    }
    if let Some(conv) = find_tagged(out, &[tag::CONV2D_NCHWC_FLAT]) {
        return super::conv2d_flat::schedule_conv2d_nchwc_flat(s, out, &conv, cpu);
    }
    if let Some(conv) = find_tagged(out, &[tag::CONV2D_NCHWC, tag::DEPTHWISE_CONV2D_NCHWC]) {
        return schedule_conv2d_nchwc(s, out, &conv, cpu);
    }
    if let Some(conv) = find_tagged(out, &[tag::CONV2D_1X1_SPATIAL]) {
        return schedule_conv2d_1x1(s, out, &conv, cpu);
    }
    if let Some(conv) = find_tagged(out, &[tag::CONV2D_NCHWC_GROUP_PADDED]) {
        return schedule_conv2d_nchwc_at_root(s, out, &conv, cpu);
    }
    let tags = [
        tag::CONV2D_NCHW,
        tag::DEPTHWISE_CONV2D_NCHW,
        tag::CONV2D_TRANSPOSE_NCHW,
    ];
    let Some(conv) = find_tagged(out, &tags) else {
        return generic::schedule_generic(s, out, cpu);
    };
    let conv_t = conv.output(0);
    if out.ndim() != 4 || !same_shape(out, &conv_t) {
        return generic::schedule_generic(s, out, cpu);
    }
    inline_all_but_padding(s, out, &conv, &[], cpu)?;
    let depthwise = conv.tag() == tag::DEPTHWISE_CONV2D_NCHW;
    let (main, mt, cs) = main_and_compute(s, out, &conv)?;
    let lanes = cpu.lanes(mt.dtype());
    // Depthwise rows of up to four vectors are one (split) vector: 28 or 14 wide rows would
    // otherwise get 4- or 2-wide vectors (a 136-channel 28x28 layer of a shufflenet on AVX2:
    // 0.099 -> 0.055 ms as three full vectors and a half one; onnxruntime 0.075).
    let ow = extent(&mt, 3);
    let vf = if depthwise && (1..=4 * lanes).contains(&ow) {
        ow
    } else {
        vector_factor(ow, lanes)
    };
    let vectors = (vf + lanes - 1) / lanes;
    let ob = if depthwise {
        1
    } else {
        let budget = cpu.accumulators_wide();
        unroll_factor(extent(&mt, 1), (budget / 2).min(budget / vectors))
    };
    // Depthwise rows of whole vectors (or of one vector at most) accumulate in tiles of
    // several rows: one row's taps are one chain of dependent multiply-adds, which waits on
    // their latency (AVX2 code, AMD EPYC family 25 model 17: a 3x3 kernel over 56-wide rows
    // of 144 channels 0.28 -> 0.17 ms in tiles of 8 rows, onnxruntime 0.26; AVX-512 code, a
    // 7x7 kernel over 14-wide rows of 384 channels 0.24 -> 0.17 ms in tiles of 7). Rows of
    // whole vectors and a piece (28 columns of 16 lanes) stay apart: LLVM's vectors then
    // span two rows' accumulators, and a 5x5 layer ran twice as slow in tiles of 2.
    let rows = if depthwise && (vf <= lanes || vf % lanes == 0) {
        let budget = (cpu.accumulators_wide() / vectors).clamp(1, 8);
        dividing_factor(extent(&mt, 2), &(1..=budget).rev().collect::<Vec<_>>())
    } else {
        1
    };
    let (oo, oi) = main.split(&mt.axis(1), ob)?;
    let (yo, yi) = main.split(&mt.axis(2), rows)?;
    let (xo, xi) = main.split(&mt.axis(3), vf)?;
    main.reorder(&[
        mt.axis(0),
        oo.clone(),
        yo.clone(),
        xo.clone(),
        yi.clone(),
        oi,
        xi.clone(),
    ])?;
    if rows > 1 {
        main.unroll(&yi)?;
    }
    let fused = fuse_all(&main, &[mt.axis(0), oo, yo])?.expect("three loops");
    main.parallel(&fused)?;
    if vf > 1 {
        main.vectorize(&xi)?;
    }
    cs.compute_at(&main, &xo)?;
    let leaf = cs.leaf_iter_vars();
    let (data, red): (Vec<_>, Vec<_>) = leaf.into_iter().partition(|iv| !iv.is_reduce());
    let mut order = vec![data[0].clone()];
    order.extend(red);
    order.extend([data[2].clone(), data[1].clone(), data[3].clone()]);
    cs.reorder(&order)?;
    if rows > 1 {
        cs.unroll(&data[2])?;
    }
    if ob > 1 {
        cs.unroll(&data[1])?;
    }
    if vf > 1 {
        cs.vectorize(&data[3])?;
    }
    Ok(())
}

/// The register tile of a channel-blocked convolution on `cpu`: `(blocks, columns)`, the
/// number of channel blocks (each `vectors` vector registers wide) and of output columns one
/// tile accumulates, for an output `width` columns wide with `blocks` channel blocks, a kernel
/// `kw` wide and a horizontal `stride`.
///
/// With one kernel tap (`kw` 1), `one_tap_tile`: the tile with the fewest loads per
/// multiply-add. With more taps, which are unrolled, the input values broadcast for
/// neighbouring taps are live together, so a tile keeps [`CpuDesc::accumulators_wide`]
/// accumulators (8 with AVX2, 16 with AVX-512), enough independent chains to cover the FMA
/// latency; broadcasts that spill reload from L1, but accumulators must not spill (12 of
/// AVX2's registers measured 1.2-2x slower). Its columns are `row_columns` of that budget;
/// then, for narrow outputs, as many blocks (4, 3 or 2, dividing `blocks`) as keep the tile
/// within [`CpuDesc::accumulators_wide`] (more blocks keep more weight vectors live: 2 x 12 of
/// AVX-512's registers spilled); for wider outputs, the budget may go to several blocks of
/// fewer columns instead ([`blocked_tile`]).
pub fn register_tile(
    width: i64,
    blocks: i64,
    vectors: i64,
    (kw, stride): (i64, i64),
    cpu: &CpuDesc,
) -> (i64, i64) {
    let v = vectors.max(1);
    let width = width.max(1);
    if kw <= 1 {
        return one_tap_tile(width, blocks, v, cpu);
    }
    let budget = (cpu.accumulators_wide() / v).max(1);
    let cols = row_columns(width, budget);
    let tb = [4, 3, 2]
        .into_iter()
        .find(|&t| blocks % t == 0 && t * cols * v <= cpu.accumulators_wide())
        .unwrap_or(1);
    if tb == 1 {
        return blocked_tile(width, blocks, v, (kw, stride), budget, cols).unwrap_or((1, cols));
    }
    (tb, cols)
}

/// The tile of a multi-tap kernel within `budget` accumulators: of one, two or four blocks
/// (dividing `blocks`) over the columns that split the row evenly, with no fewer accumulators
/// than one block of `cols` columns (fewer chains would wait on the multiply-add latency),
/// the one with the fewest loads per multiply-add. Per input channel and kernel row, a tile of
/// `t` blocks x `c` columns loads `t x v x kw` weight vectors and broadcasts the `(c - 1) x
/// stride + kw` inputs its taps read, for `t x v x c x kw` multiply-adds: at stride 2 a row of
/// one block broadcasts almost one input per multiply-add. AVX2, one block of 8 columns before (AMD
/// EPYC family 25 model 17): a YOLO-style detector's stride-2 3x3 layer 0.79 -> 0.66 ms in 2
/// blocks x 4 columns (onnxruntime 0.63); the stride-1 layers 0-2% faster in the networks
/// (AVX-512: 2 blocks x 8 columns, level). `None` when no such tile divides the row.
fn blocked_tile(
    width: i64,
    blocks: i64,
    v: i64,
    (kw, stride): (i64, i64),
    budget: i64,
    cols: i64,
) -> Option<(i64, i64)> {
    [1i64, 2, 4]
        .into_iter()
        .filter(|&tb| blocks % tb == 0 && budget / tb >= 2)
        .filter_map(|tb| {
            let c = row_columns(width, budget / tb);
            (width % c == 0 && tb * c >= cols).then_some((tb, c))
        })
        .min_by(|&(t1, c1), &(t2, c2)| {
            // loads / multiply-adds, compared as fractions; then the more accumulators.
            let loads = |t: i64, c: i64| t * v * kw + (c - 1) * stride + kw;
            let fmas = |t: i64, c: i64| t * v * c * kw;
            (loads(t1, c1) * fmas(t2, c2))
                .cmp(&(loads(t2, c2) * fmas(t1, c1)))
                .then((t2 * c2).cmp(&(t1 * c1)))
        })
}

/// The columns of a row tile of at most `budget` columns over `width`: the whole row when it
/// fits, else the largest divisor of `width` filling at least three quarters of the budget,
/// else the row in equal tiles (55 as 7 x 8 - 1).
fn row_columns(width: i64, budget: i64) -> i64 {
    if width <= budget {
        return width;
    }
    ((3 * budget + 3) / 4..=budget)
        .rev()
        .find(|c| width % c == 0)
        .unwrap_or_else(|| {
            let tiles = (width + budget - 1) / budget;
            (width + tiles - 1) / tiles
        })
}

/// The register tile of a one-tap (1x1) channel-blocked convolution: of 1 to 4 blocks
/// (dividing `blocks`), each with the [`row_columns`] that fit the registers with a weight
/// vector per block and the broadcast inputs, the tile with the fewest loads per multiply-add
/// over a row (`blocks x vectors` weight loads and `columns` broadcasts per input channel, for
/// `blocks x columns x vectors` multiply-adds); ties go to more accumulators. A core with two
/// full-width FMA units issues two multiply-adds a cycle but only two loads: a row of one
/// block (a weight load and a broadcast per multiply-add) ran resnet50's 1x1 layers at half
/// of onnxruntime's speed on an Intel Xeon with AVX-512, 4 blocks x 4 or 5 columns level
/// with it; one block per tile also read
/// the input planes once per block (256 -> 64 channels at 56x56: 1.48 -> 0.72 ms).
fn one_tap_tile(width: i64, blocks: i64, v: i64, cpu: &CpuDesc) -> (i64, i64) {
    let regs = cpu.vector_registers as i64;
    // (blocks, columns, loads and multiply-adds per row) of each candidate.
    let candidates = (1..=4.min(blocks))
        .filter(|tb| blocks % tb == 0)
        .filter_map(|tb| {
            // Live registers: the accumulators, a weight vector per block, and the broadcast
            // inputs: one at a time for one block; every column's, shared by the blocks, for
            // several (LLVM loads each once and keeps it: 2 x 12 of AVX-512's registers spilled).
            let budget = if tb == 1 {
                regs - v - 1
            } else {
                (regs - tb * v) / (tb * v + 1)
            };
            (budget >= 1).then(|| {
                let cols = row_columns(width, budget);
                let tiles = (width + cols - 1) / cols;
                (tb, cols, tiles * tb * v + width, tb * v * width)
            })
        });
    // A row that one block's tile holds whole within the wide accumulator budget, where
    // every tile of more blocks would split it unevenly: the whole row (a shorter last tile
    // keeps its guard inside the reduction loop: a shufflenet's 544-channel grouped 1x1
    // layers at 7x7 on AVX2 took 0.124 ms in tiles of 2 blocks x 4 + 3 columns, 0.080 ms in
    // whole rows; rows of 14, split 4 + 4 + 4 + 2, ran faster than whole rows of 14
    // accumulators).
    let candidates: Vec<_> = candidates.collect();
    let whole_row = width <= cpu.accumulators_wide()
        && candidates.iter().any(|c| c.0 == 1 && c.1 == width)
        && candidates.iter().all(|c| c.0 == 1 || width % c.1 != 0);
    candidates
        .into_iter()
        .filter(|c| !whole_row || c.0 == 1)
        .min_by(|a, b| {
            (a.2 * b.3)
                .cmp(&(b.2 * a.3))
                .then((b.0 * b.1).cmp(&(a.0 * a.1)))
        })
        .map_or((1, 1), |(tb, cols, _, _)| (tb, cols))
}

/// The register tile `(blocks, columns)` of a convolution over rows of `width` outputs in
/// `blocks` channel blocks: the tuning records' knobs `blocks` (1 to 4, dividing `blocks`)
/// and `cols` (the whole row, its divisors and equal splits in up to four tiles, at most
/// `max_cols`) for workload `key` where they have one, else `heuristic`.
pub fn tuned_tile(
    key: &str,
    heuristic: (i64, i64),
    width: i64,
    blocks: i64,
    max_cols: i64,
) -> (i64, i64) {
    let mut col_choices: Vec<i64> = (1..=width.min(max_cols))
        .filter(|c| width % c == 0 || (1..=4).any(|t| (width + t - 1) / t == *c))
        .collect();
    col_choices.push(heuristic.1);
    col_choices.sort_unstable();
    col_choices.dedup();
    let tb =
        crate::tuning::knob(key, "blocks", &super::block_choices(blocks)).unwrap_or(heuristic.0);
    let cols = crate::tuning::knob(key, "cols", &col_choices).unwrap_or(heuristic.1);
    (tb, cols)
}

/// The width of the kernel window of `conv` (its last reduction axis), 1 when unknown, and its
/// horizontal stride as its padded data's width and its output's `width` give it (the
/// dilation's extra columns divided into the stride away).
fn kernel_taps(conv: &Operation, width: i64) -> (i64, i64) {
    let kw = reduce_extents(conv).last().copied().flatten().unwrap_or(1);
    let data_width = conv
        .input_tensors()
        .first()
        .filter(|d| d.ndim() >= 4)
        .map_or(0, |d| extent(d, 3));
    let stride = if width > 1 && data_width >= kw {
        ((data_width - kw) / (width - 1)).max(1)
    } else {
        1
    };
    (kw, stride)
}

/// Schedules a convolution with a packed kernel ([`crate::nn::conv2d_packed`], a depthwise one
/// in channel blocks included): the padding stage, if any, at root (parallel over `(n, c)`);
/// the output (NCHW: the unpack stage and fused
/// epilogue; or the blocked product itself, with its epilogue, stored a block vector at a time)
/// in tiles of `b`-channel blocks x columns ([`register_tile`]), `n`, channel
/// tiles and rows fused and parallel, the columns one vector loop when they are whole vectors
/// (contiguous stores into the NCHW output; left to LLVM, the unpack became scatter stores
/// along the channels, four times slower on a 3-channel 32x32 stem); the blocked product
/// computed at each tile into an accumulator of `blocks x columns` vectors, reduction loops
/// outside, blocks and columns unrolled and the `b` channels of a block one vector.
fn schedule_conv2d_nchwc(
    s: &Schedule,
    out: &Tensor,
    conv: &Operation,
    cpu: &CpuDesc,
) -> Result<()> {
    let conv_t = conv.output(0);
    let blocked_out = out.ndim() == 5 && same_shape(out, &conv_t);
    if !(out.ndim() == 4 || blocked_out) || conv_t.ndim() != 5 {
        return generic::schedule_generic(s, out, cpu);
    }
    let partial = conv
        .input_tensors()
        .into_iter()
        .find(|t| t.op().tag() == tag::CONV2D_NCHWC_PARTIAL);
    if let Some(p) = partial {
        return schedule_conv2d_nchwc_in_passes(s, out, conv, &p.op().clone(), cpu);
    }
    inline_all_but_padding(s, out, conv, &[], cpu)?;
    // A blocked output with no epilogue is the product itself: it accumulates in a local
    // cache computed at each tile of the output.
    let local = if out.op() == conv {
        Some(s.cache_write(&conv_t, "local")?)
    } else {
        None
    };
    let b = extent(&conv_t, 4);
    let (tb, cols) = product_tile(&conv_t, conv, extent(out, 3), cpu);
    let main = s.stage(out);
    let (_, xo) = output_tiles(&main, out, b, (tb, cols), None, cpu)?;
    let cs = match &local {
        Some(l) => s.stage(l),
        None => s.stage_op(conv),
    };
    cs.compute_at(&main, &xo)?;
    let leaf = cs.leaf_iter_vars();
    let (data, red): (Vec<_>, Vec<_>) = leaf.into_iter().partition(|iv| !iv.is_reduce());
    let mut order = vec![data[0].clone(), data[2].clone()];
    order.extend(red);
    order.extend([data[1].clone(), data[3].clone(), data[4].clone()]);
    cs.reorder(&order)?;
    cs.unroll(&data[1])?;
    cs.unroll(&data[3])?;
    if b > 1 {
        cs.vectorize(&data[4])?;
    }
    Ok(())
}

/// The most columns of a register tile: the vector registers less a weight and a broadcast.
fn max_tile_columns(cpu: &CpuDesc) -> i64 {
    cpu.vector_registers as i64 - 2
}

/// The register tile `(blocks, columns)` of the channel-blocked product `conv_t` computed by
/// `product` (the product itself, or the partial product of its passes) for an output
/// `width` columns wide: [`register_tile`]'s, or the tuning records' ([`tuned_tile`]).
fn product_tile(conv_t: &Tensor, product: &Operation, width: i64, cpu: &CpuDesc) -> (i64, i64) {
    let (b, blocks) = (extent(conv_t, 4), extent(conv_t, 1));
    let vectors = block_vectors(b, conv_t.dtype(), cpu);
    let heuristic = register_tile(width, blocks, vectors, kernel_taps(product, width), cpu);
    let key = conv_key(conv_t, product);
    tuned_tile(&key, heuristic, width, blocks, max_tile_columns(cpu))
}

/// The output `out` of a channel-blocked product (blocks of `b`) in register tiles of `(tb,
/// cols)`: `n`, tiles of `tb` blocks, the rows (in groups of `rows` when some), tiles of `cols`
/// columns, then a tile's blocks, channels and columns; `n`, the channel tiles and the rows
/// (or row groups) fused and parallel, a stage's own reduction loops (a product that
/// accumulates its passes in place) right inside. A blocked output stores whole channel
/// vectors (blocks and columns unrolled); an NCHW one rows of columns, vectors when `cols` is
/// whole vectors. Returns the fused loop and the column-tile loop.
pub(super) fn output_tiles(
    main: &kiln_te::Stage,
    out: &Tensor,
    b: i64,
    (tb, cols): (i64, i64),
    rows: Option<i64>,
    cpu: &CpuDesc,
) -> Result<(kiln_te::IterVar, kiln_te::IterVar)> {
    let blocked_out = out.ndim() == 5;
    let reductions: Vec<_> = main
        .leaf_iter_vars()
        .into_iter()
        .filter(|iv| iv.is_reduce())
        .collect();
    let (oo, tile_channels) = if blocked_out {
        let (oo, om) = main.split(&out.axis(1), tb)?;
        (oo, vec![om])
    } else {
        let (oo, o_in) = main.split(&out.axis(1), b * tb)?;
        let (om, oi) = main.split(&o_in, b)?;
        (oo, vec![om, oi])
    };
    let (rows_out, rows_in) = match rows {
        Some(r) => {
            let (yo, yi) = main.split(&out.axis(2), r)?;
            (yo, vec![yi])
        }
        None => (out.axis(2), Vec::new()),
    };
    let (xo, xi) = main.split(&out.axis(3), cols)?;
    let mut order = vec![out.axis(0), oo.clone(), rows_out.clone()];
    order.extend(reductions);
    order.extend(rows_in);
    order.push(xo.clone());
    order.extend(tile_channels.iter().cloned());
    order.push(xi.clone());
    if blocked_out {
        order.push(out.axis(4));
    }
    main.reorder(&order)?;
    let fused = fuse_all(main, &[out.axis(0), oo, rows_out])?.expect("three loops");
    main.parallel(&fused)?;
    if blocked_out {
        main.unroll(&tile_channels[0])?;
        main.unroll(&xi)?;
        if b > 1 {
            main.vectorize(&out.axis(4))?;
        }
    } else if cols % cpu.lanes(out.dtype()) == 0 {
        main.vectorize(&xi)?;
    }
    Ok((fused, xo))
}

/// Schedules a channel-blocked convolution summed in passes over chunks of its input channels
/// ([`crate::nn::PackedLayouts::channel_chunk`]): the output in tiles as
/// [`schedule_conv2d_nchwc`]'s, its rows in groups ([`pass_rows`]), `n`, channel tiles and row
/// groups fused and parallel; the blocked product of a group's rows computed there (in L2),
/// zeroed, then pass by pass: each column tile's partial product accumulated in registers
/// over the pass's channels (its weights, one pass of the tile's blocks, stay in L1 across
/// the rows) and added to the product; the epilogue (or NCHW unpack) reads the product after
/// the last pass.
fn schedule_conv2d_nchwc_in_passes(
    s: &Schedule,
    out: &Tensor,
    conv: &Operation,
    partial: &Operation,
    cpu: &CpuDesc,
) -> Result<()> {
    let conv_t = conv.output(0);
    let part_t = partial.output(0);
    inline_all_but_padding(s, out, partial, &[], cpu)?;
    let b = extent(&conv_t, 4);
    let (width, blocks) = (extent(out, 3), extent(&conv_t, 1));
    let (tb, cols) = product_tile(&conv_t, partial, width, cpu);
    let (n, height) = (extent(out, 0), extent(out, 2));
    let row_bytes = tb * b * width * conv_t.dtype().bytes() as i64;
    let rows = pass_rows(height, row_bytes, n * (blocks / tb), cpu);
    let main = s.stage(out);
    let in_place = out.op() == conv;
    let (fused, xo) = output_tiles(&main, out, b, (tb, cols), Some(rows), cpu)?;
    // The product of the rows: zeroed, then each pass's tiles added.
    if in_place {
        return schedule_pass_tile(s, &part_t, &main, &xo, b);
    }
    {
        let cs = s.stage_op(conv);
        cs.compute_at(&main, &fused)?;
        let (data, red): (Vec<_>, Vec<_>) = cs
            .leaf_iter_vars()
            .into_iter()
            .partition(|iv| !iv.is_reduce());
        let (cxo, cxi) = cs.split(&data[3], cols)?;
        let mut order = vec![data[0].clone()];
        order.extend(red);
        order.extend([
            data[2].clone(),
            cxo.clone(),
            data[1].clone(),
            cxi.clone(),
            data[4].clone(),
        ]);
        cs.reorder(&order)?;
        cs.unroll(&data[1])?;
        cs.unroll(&cxi)?;
        if b > 1 {
            cs.vectorize(&data[4])?;
        }
        schedule_pass_tile(s, &part_t, &cs, &cxo, b)
    }
}

/// The partial product of one pass over one column tile (`part`), computed at `at` of
/// `parent` into registers: reduction loops outside, blocks and columns unrolled, a block one
/// vector.
fn schedule_pass_tile(
    s: &Schedule,
    part: &Tensor,
    parent: &kiln_te::Stage,
    at: &kiln_te::IterVar,
    b: i64,
) -> Result<()> {
    let ps = s.stage(part);
    ps.set_scope("local")?;
    ps.compute_at(parent, at)?;
    let (data, red): (Vec<_>, Vec<_>) = ps
        .leaf_iter_vars()
        .into_iter()
        .partition(|iv| !iv.is_reduce());
    let mut order = vec![data[0].clone(), data[1].clone(), data[3].clone()];
    order.extend(red);
    order.extend([data[2].clone(), data[4].clone(), data[5].clone()]);
    ps.reorder(&order)?;
    ps.unroll(&data[2])?;
    ps.unroll(&data[4])?;
    if b > 1 {
        ps.vectorize(&data[5])?;
    }
    Ok(())
}

/// The output rows one pass of a chunked convolution sweeps before the next pass: the most
/// (a divisor of `height`) whose product, `row_bytes` a row, fits in the L1 data cache (it is
/// read and written once a pass), leaving at least two parallel tasks when `tasks`
/// (batch x channel tiles) alone does not.
pub fn pass_rows(height: i64, row_bytes: i64, tasks: i64, cpu: &CpuDesc) -> i64 {
    let budget = cpu.caches.l1d as i64;
    (1..=height)
        .rev()
        .find(|&r| {
            height % r == 0 && r * row_bytes <= budget && (tasks * (height / r) >= 2 || r == 1)
        })
        .unwrap_or(1)
}

/// The input channels a pass of a channel-blocked convolution sums
/// ([`crate::nn::PackedLayouts::channel_chunk`]), `None` for one pass. When the weights of a
/// register tile ([`tuned_tile`]'s blocks of `b` output channels, for rows `width` wide) over
/// all `channels` and the `taps` exceed three quarters of the L1 data cache, they stream from
/// L2 for every column tile; the chunk is then the most channels (whole data blocks of
/// `data_block`, dividing `channels`) whose tile weights fit there. resnet50 on an Intel Xeon
/// with AVX-512: the 1x1 layers of 512 to 2048 channels and the stride-2 3x3 layers 4-16%
/// faster, 56.5 ms instead of 59.6; 128 channels of 4 blocks (32 KiB of a 48 KiB L1 chunked
/// in two) 24% slower. The tuning knob `chunk` of workload `key` (the channels per pass; all of
/// them for one pass) may choose instead.
#[allow(clippy::too_many_arguments)]
pub fn channel_chunk(
    key: &str,
    width: i64,
    blocks: i64,
    b: i64,
    channels: i64,
    taps: (i64, i64),
    stride: i64,
    data_block: i64,
    dtype: kiln_tir::DataType,
    cpu: &CpuDesc,
) -> Option<i64> {
    let vectors = block_vectors(b, dtype, cpu);
    let heuristic = register_tile(width, blocks, vectors, (taps.1, stride), cpu);
    let (tb, _) = tuned_tile(key, heuristic, width, blocks, max_tile_columns(cpu));
    let per_channel = tb * b * taps.0 * taps.1 * dtype.bytes() as i64;
    let step = data_block.max(1);
    let fitting = |budget: i64| {
        (1..channels / step)
            .rev()
            .map(|m| m * step)
            .find(|&k| channels % k == 0 && k * per_channel <= budget)
    };
    let l1 = cpu.caches.l1d as i64;
    let chunk = (channels * per_channel > l1 * 3 / 4)
        .then(|| fitting(l1 * 3 / 4))
        .flatten();
    let mut choices: Vec<i64> = [Some(channels), fitting(l1 * 3 / 4), fitting(l1 * 3 / 8)]
        .into_iter()
        .flatten()
        .collect();
    choices.dedup();
    let k = crate::tuning::knob(key, "chunk", &choices).or(chunk);
    k.filter(|&k| k < channels)
}

/// The tuning key of a channel-blocked convolution from its shapes: the blocked output, the
/// data (padded, as logical NCHW) and the packed weights.
pub fn nchwc_key(out: &[i64], data_nchw: &[i64], weight: &[i64]) -> String {
    crate::tuning::workload_key("conv2d_nchwc", &[out, data_nchw, weight])
}

/// The tuning key of a channel-blocked convolution: its data by logical NCHW shape, whether
/// it arrives in channel blocks or not, so a layer tuned alone (NCHW data) applies where the
/// model feeds it blocks (the register tile is the same; the blocks only change the loads).
fn conv_key(conv_t: &Tensor, product: &Operation) -> String {
    let mut shapes = vec![extents(conv_t)];
    for (i, t) in product.input_tensors().iter().enumerate() {
        let mut s = extents(t);
        if i == 0 && s.len() == 5 {
            s = vec![s[0], s[1] * s[4], s[2], s[3]];
        }
        shapes.push(s);
    }
    match shapes.as_slice() {
        [out, data, weight] => nchwc_key(out, data, weight),
        _ => {
            let views: Vec<&[i64]> = shapes.iter().map(Vec::as_slice).collect();
            crate::tuning::workload_key("conv2d_nchwc", &views)
        }
    }
}

/// How many vector registers one channel block of `b` elements of `dtype` takes on `cpu`.
fn block_vectors(b: i64, dtype: kiln_tir::DataType, cpu: &CpuDesc) -> i64 {
    let lanes = cpu.lanes(dtype);
    (b + lanes - 1) / lanes
}

/// Schedules a packed convolution whose groups pad their blocks: output tiles would straddle
/// blocks, so the blocked product is computed whole at root (rows parallel, a register tile of
/// [`register_tile`]'s columns x `b` accumulated in a local cache with the reduction outside), and the
/// unpack with its epilogue runs after it as an injective loop nest.
fn schedule_conv2d_nchwc_at_root(
    s: &Schedule,
    out: &Tensor,
    conv: &Operation,
    cpu: &CpuDesc,
) -> Result<()> {
    let conv_t = conv.output(0);
    if out.ndim() != 4 || conv_t.ndim() != 5 {
        return generic::schedule_generic(s, out, cpu);
    }
    inline_all_but_padding(s, out, conv, std::slice::from_ref(conv), cpu)?;
    let b = extent(&conv_t, 4);
    let vectors = block_vectors(b, conv_t.dtype(), cpu);
    let taps = kernel_taps(conv, extent(&conv_t, 3));
    let (_, cols) = register_tile(extent(&conv_t, 3), 1, vectors, taps, cpu);
    let local = s.cache_write(&conv_t, "local")?;
    let cs = s.stage_op(conv);
    let ax: Vec<_> = (0..5).map(|i| conv_t.axis(i)).collect();
    let (xo, xi) = cs.split(&ax[3], cols)?;
    cs.reorder(&[
        ax[0].clone(),
        ax[1].clone(),
        ax[2].clone(),
        xo.clone(),
        xi,
        ax[4].clone(),
    ])?;
    let fused = fuse_all(&cs, &ax[..3])?.expect("three loops");
    cs.parallel(&fused)?;
    if b > 1 {
        cs.vectorize(&ax[4])?;
    }
    let ls = s.stage(&local);
    ls.compute_at(&cs, &xo)?;
    let leaf = ls.leaf_iter_vars();
    let (data, red): (Vec<_>, Vec<_>) = leaf.into_iter().partition(|iv| !iv.is_reduce());
    let mut order = data[..3].to_vec();
    order.extend(red);
    order.extend([data[3].clone(), data[4].clone()]);
    ls.reorder(&order)?;
    ls.unroll(&data[3])?;
    if b > 1 {
        ls.vectorize(&data[4])?;
    }
    let main = s.stage(out);
    let fused = fuse_all(&main, &[out.axis(0), out.axis(1), out.axis(2)])?.expect("three loops");
    main.parallel(&fused)?;
    Ok(())
}

/// Schedules a 1x1 convolution computed over flattened positions ([`crate::nn::conv2d_1x1`]),
/// a matrix product of the weights (rows: output channels) and the input planes (columns:
/// positions, contiguous): the NCHW output (and fused epilogue) per block of `mr` channels,
/// batch and channel blocks fused and parallel, its rows vector code; the product of a block
/// computed before it, in tiles of several vectors of positions with
/// a shorter last tile, each accumulated in registers ([`spatial_tile`]) with the input
/// channels outermost, channels and vectors unrolled. The block's product (`mr` planes)
/// stays in L2 for the epilogue.
fn schedule_conv2d_1x1(s: &Schedule, out: &Tensor, conv: &Operation, cpu: &CpuDesc) -> Result<()> {
    let g = conv.output(0);
    let (h, w) = (extent(out, 2), extent(out, 3));
    let fits = out.ndim() == 4
        && g.ndim() == 3
        && extent(&g, 0) == extent(out, 0)
        && extent(&g, 1) == extent(out, 1)
        && extent(&g, 2) == h * w;
    if !fits {
        return generic::schedule_generic(s, out, cpu);
    }
    let lanes = cpu.f32_lanes();
    let hw = h * w;
    let (mr, cols) = spatial_tile(group_rows(conv, extent(out, 1)), hw, cpu);
    inline_injective(s, out, std::slice::from_ref(conv))?;
    let local = s.cache_write(&g, "local")?;
    let main = s.stage(out);
    let (oo, oi) = main.split(&out.axis(1), mr)?;
    let xv = vector_factor(w, lanes);
    let (xo, xi) = main.split(&out.axis(3), xv)?;
    main.reorder(&[out.axis(0), oo.clone(), oi, out.axis(2), xo, xi.clone()])?;
    let fused = fuse_all(&main, &[out.axis(0), oo])?.expect("two loops");
    main.parallel(&fused)?;
    if xv > 1 {
        main.vectorize(&xi)?;
    }
    let gs = s.stage(&g);
    gs.compute_at(&main, &fused)?;
    let (fo, fi) = gs.split(&g.axis(2), cols)?;
    gs.reorder(&[g.axis(0), fo.clone(), g.axis(1), fi.clone()])?;
    let (_, fl) = gs.split(&fi, lanes)?;
    gs.vectorize(&fl)?;
    let ls = s.stage(&local);
    ls.compute_at(&gs, &fo)?;
    crate::schedule::register_tile_rows_by_vectors(&ls, lanes)
}

/// The output channels of one group of the spatial 1x1 convolution `conv` with `o` output
/// channels (its weight `[O, C/G, 1, 1]`, its data `[N, C, ...]`).
fn group_rows(conv: &Operation, o: i64) -> i64 {
    let inputs = conv.input_tensors();
    let (c, cpg) = match inputs.as_slice() {
        [d, w, ..] if d.ndim() >= 2 && w.ndim() >= 2 => (extent(d, 1), extent(w, 1)),
        _ => return o,
    };
    if cpg <= 0 || c % cpg != 0 || o % (c / cpg) != 0 {
        return o;
    }
    o / (c / cpg)
}

/// The register tile of a 1x1 convolution over flattened positions on `cpu`: `(channels,
/// positions)` for `o` output channels a group and `hw` positions. Of two to four vectors of
/// positions (up to twelve for groups of few channels), the one whose
/// [`super::dense::matrix_tile`] rows, lowered to a divisor of `o`, make the most
/// accumulators: a shorter last channel tile would leave a guard inside the reduction loop (16
/// channels take 4 x 3 vectors on AVX2, not 6 + 6 + 4 x 2), and a tile across two groups
/// would load two groups' inputs (34 channels a group take 2 rows x 12 vectors on AVX-512).
pub fn spatial_tile(o: i64, hw: i64, cpu: &CpuDesc) -> (i64, i64) {
    let lanes = cpu.f32_lanes();
    let regs = cpu.vector_registers as i64;
    // (rows, positions, (accumulators doing useful work in lanes, accumulators)).
    let mut best = (1, lanes, (0, 0));
    for v in 2..=MAX_SPATIAL_VECTORS {
        let blocks = (hw + v * lanes - 1) / (v * lanes);
        let (rows, tb) = super::dense::matrix_tile(o, blocks, v, cpu);
        let r = (1..=rows).rev().find(|r| o % r == 0).unwrap_or(1);
        let acc = r * v * tb;
        if acc > cpu.accumulators() || acc + v * tb >= regs {
            continue;
        }
        // Positions of the last tile past the plane are computed for nothing.
        let tile = v * lanes * tb;
        let useful = acc * lanes * hw / (((hw + tile - 1) / tile) * tile);
        if (useful, acc) > best.2 {
            best = (r, tile, (useful, acc));
        }
    }
    (best.0, best.1)
}

/// The most vectors of positions in a row of [`spatial_tile`]: groups of few channels (34
/// a group: tiles of 2 rows) fill the accumulators along the positions.
const MAX_SPATIAL_VECTORS: i64 = 12;
