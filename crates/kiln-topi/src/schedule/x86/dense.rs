//! x86 schedule of dense, matmul and batch matmul.

use super::main_and_compute;
use crate::schedule::{
    covers, extent, find_tagged, fuse_all, generic, inline_injective, op_key, reduce_extents,
    vector_factor,
};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{Schedule, Tensor};
use kiln_tir::CpuDesc;

/// Schedules the product `out` depends on (tags [`tag::DENSE`], [`tag::MATMUL`],
/// [`tag::BATCH_MATMUL`]), `out` being it or an injective epilogue of its shape (a bias
/// add) or of its first columns (a product over a packed weight's padded columns). Any number
/// of batch dimensions.
///
/// Output tiles of [`matrix_tile`] rows x columns (a packed weight's block, two vectors, or
/// several blocks for few rows); the last row tile may be shorter. Row tiles are grouped in
/// blocks whose rows of A fill an eighth of the last-level cache ([`row_block`]); batch, row
/// blocks, column tiles and row tiles are fused and parallel in that order (up to the column
/// tiles when the last is shorter), so a column panel of B stays in L2 while every row tile of
/// a block passes it. The product is
/// accumulated per tile in a local cache with `k` outermost (split by 4, the inner 4 unrolled
/// when they divide K), rows and blocks unrolled and columns vectorized. A long reduction
/// over few rows is summed in chunks instead ([`k_blocked`]).
pub fn schedule_dense(s: &Schedule, out: &Tensor, cpu: &CpuDesc) -> Result<()> {
    let Some(op) = find_tagged(out, &[tag::DENSE, tag::MATMUL, tag::BATCH_MATMUL]) else {
        return generic::schedule_generic(s, out, cpu);
    };
    let t = op.output(0);
    if !covers(&t, out) || out.ndim() < 2 {
        return generic::schedule_generic(s, out, cpu);
    }
    let nd = t.ndim();
    // A packed weight `[ceil(N/b), K, b]` sets the column block. Packed at run time (a
    // `layout_transform` of a runtime matrix), it is computed whole first: runs of blocks
    // ([`pack_run`]) in parallel, each copied row by row, its rows in vectors.
    let packed = op
        .input_tensors()
        .into_iter()
        .find(|t| t.ndim() == 3 && nd == 2);
    let pack: Vec<_> = packed
        .iter()
        .map(|w| w.op().clone())
        .filter(|p| matches!(p.kind(), kiln_te::OpKind::Compute(_)))
        .collect();
    inline_injective(s, out, &pack)?;
    for p in &pack {
        let w = p.output(0);
        let st = s.stage(&w);
        let run = pack_run(extent(&w, 0), extent(&w, 2) * w.dtype().bytes() as i64);
        let (bo, bi) = st.split(&w.axis(0), run)?;
        st.reorder(&[bo.clone(), w.axis(1), bi.clone(), w.axis(2)])?;
        st.parallel(&bo)?;
        st.unroll(&bi)?;
        st.vectorize(&w.axis(2))?;
    }
    let (main, mt, cs) = main_and_compute(s, out, &op)?;
    let (ax_m, ax_n) = (mt.axis(nd - 2), mt.axis(nd - 1));
    let lanes = cpu.lanes(mt.dtype());
    let (m, n) = (extent(&mt, nd - 2), extent(&mt, nd - 1));
    let block = match &packed {
        Some(w) => extent(w, 2),
        // Two vectors of columns when they divide N; for columns that no vector divides
        // (a vision transformer's 197 tokens), whole vectors with a shorter last tile.
        None if n % (2 * lanes) == 0 => 2 * lanes,
        None if n % lanes != 0 && n > lanes => {
            if n > 2 * lanes {
                2 * lanes
            } else {
                lanes
            }
        }
        None => vector_factor(n, lanes),
    };
    let blocks = match &packed {
        Some(w) => extent(w, 0),
        None => n / block.max(1),
    };
    let vectors = (block + lanes - 1) / lanes;
    let (mr, tb) = matrix_tile(m, blocks, vectors, cpu);
    let k = reduce_extents(&op).first().copied().flatten().unwrap_or(0);
    let bytes = mt.dtype().bytes() as i64;
    // Tuning records may choose the rows (up to M) and the blocks (dividing them) instead.
    let key = op_key("dense", &op);
    let rows: Vec<i64> = (1..=m.clamp(1, 8)).collect();
    let mr = crate::tuning::knob(&key, "rows", &rows).unwrap_or(mr);
    let tb = crate::tuning::knob(&key, "blocks", &super::block_choices(blocks)).unwrap_or(tb);
    let nb = block * tb;
    let (mo, no, mi, ni) = main.tile(&ax_m, &ax_n, mr, nb)?;
    let row_tiles = (m + mr - 1) / mr;
    let per_block = row_block(mr * k.max(1) * bytes, cpu);
    let group = group_tiles(mr * nb * bytes, cpu);
    let chunk = k_chunk(k, nb * bytes, cpu)
        .filter(|_| tb == 1 && nb > 1 && n % nb == 0 && row_tiles <= 2 * group);
    if let Some(kc) = chunk {
        return k_blocked(
            &main,
            &mt,
            &cs,
            (mo, no, mi, ni),
            (mr, kc),
            (row_tiles, group),
        );
    }
    let mut outer: Vec<_> = (0..nd - 2).map(|i| mt.axis(i)).collect();
    if split_rows(row_tiles, per_block) {
        let (mbo, mbi) = main.split(&mo, per_block)?;
        outer.extend([mbo, no.clone(), mbi]);
    } else {
        outer.extend([no.clone(), mo]);
    }
    let mut order = outer.clone();
    order.extend([mi, ni.clone()]);
    main.reorder(&order)?;
    // A last column tile shorter than the others keeps its guard linear in the column tile
    // loop (LoopPartition then peels it off, and the other tiles stay vector code): the loops
    // from it inwards are not fused, and only those before it (or it alone) are parallel.
    let at = if n % nb != 0 {
        let pos = outer.iter().position(|iv| iv == &no).expect("column tiles");
        match fuse_all(&main, &outer[..pos])? {
            Some(f) => main.parallel(&f)?,
            None => main.parallel(&no)?,
        }
        outer.last().expect("tile loops").clone()
    } else {
        let fused = fuse_all(&main, &outer)?.expect("tile loops");
        main.parallel(&fused)?;
        fused
    };
    // A tile of several blocks: blocks unrolled, one block a vector (a vector spanning blocks
    // would gather from the packed weight).
    if tb > 1 {
        let (bo, bi) = main.split(&ni, block)?;
        main.unroll(&bo)?;
        main.vectorize(&bi)?;
    } else if nb > 1 {
        main.vectorize(&ni)?;
    }
    cs.compute_at(&main, &at)?;
    let leaf = cs.leaf_iter_vars();
    let (data, red): (Vec<_>, Vec<_>) = leaf.into_iter().partition(|iv| !iv.is_reduce());
    let mut order: Vec<_> = data[..data.len() - 2].to_vec();
    let mut unroll_k = None;
    match red.as_slice() {
        [rk] if k >= 8 && k % 4 == 0 => {
            let (ko, ki) = cs.split(rk, 4)?;
            order.extend([ko, ki.clone()]);
            unroll_k = Some(ki);
        }
        _ => order.extend(red),
    }
    order.extend(data[data.len() - 2..].iter().cloned());
    cs.reorder(&order)?;
    if let Some(ki) = unroll_k {
        cs.unroll(&ki)?;
    }
    if mr > 1 {
        cs.unroll(&data[data.len() - 2])?;
    }
    if tb > 1 {
        let (bo, bi) = cs.split(&data[data.len() - 1], block)?;
        cs.unroll(&bo)?;
        cs.vectorize(&bi)?;
    } else if nb > 1 {
        cs.vectorize(&data[data.len() - 1])?;
    }
    Ok(())
}

/// The reduction chunk of a product whose column panel of B (`k` rows of `row_bytes`) does
/// not fit the L1 cache: the largest multiple of 4 dividing `k` whose panel fills at most
/// half of it. `None` for a panel that fits.
pub fn k_chunk(k: i64, row_bytes: i64, cpu: &CpuDesc) -> Option<i64> {
    let l1 = cpu.caches.l1d as i64;
    let most = l1 / 2 / row_bytes.max(1);
    if k * row_bytes <= l1 || most < 4 {
        return None;
    }
    (4..=most).rev().find(|c| c % 4 == 0 && k % c == 0)
}

/// [`schedule_dense`] for a product whose B panel overflows L1 ([`k_chunk`]) and whose rows
/// make at most two groups ([`group_tiles`]): the accumulators of a group of row tiles by one
/// column block live in a local array and are summed a chunk of `kc` of the reduction at a
/// time over every tile of the group, so the chunk's panel of B stays in L1 across the tiles
/// (the group's last, shorter tile included); the output copies the group out with its
/// epilogue. The groups of a product are even. AVX2 code tiled for a 512 KiB L2, AMD EPYC
/// family 25 model 17: a transformer's [128, 1024] x [1024, 256] product 0.659 -> 0.613 ms
/// (onnxruntime 0.641; its 22 row tiles had been split into L2 blocks of 10, 10 and 2), the
/// layer 2.30 -> 2.25 ms; tiled for a 1 MiB L2, level alone and the layer 1.5% faster. Products
/// of more row tiles keep the whole reduction per tile: the 1024^3 product ran 2% slower in
/// chunks, streaming B once per group.
fn k_blocked(
    main: &kiln_te::Stage,
    mt: &Tensor,
    cs: &kiln_te::Stage,
    (mo, no, mi, ni): (
        kiln_te::IterVar,
        kiln_te::IterVar,
        kiln_te::IterVar,
        kiln_te::IterVar,
    ),
    (mr, kc): (i64, i64),
    (row_tiles, most): (i64, i64),
) -> Result<()> {
    let nd = mt.ndim();
    let groups = (row_tiles + most - 1) / most;
    let (mgo, mgi) = main.split(&mo, (row_tiles + groups - 1) / groups)?;
    let mut outer: Vec<_> = (0..nd - 2).map(|i| mt.axis(i)).collect();
    outer.extend([mgo, no]);
    let order: Vec<_> = outer.iter().cloned().chain([mgi, mi, ni.clone()]).collect();
    main.reorder(&order)?;
    let at = fuse_all(main, &outer)?.expect("tile loops");
    main.parallel(&at)?;
    main.vectorize(&ni)?;
    cs.compute_at(main, &at)?;
    let leaf = cs.leaf_iter_vars();
    let (data, red): (Vec<_>, Vec<_>) = leaf.into_iter().partition(|iv| !iv.is_reduce());
    let [rk] = red.as_slice() else {
        return Err(kiln_ffi::Error::value_error(
            "dense schedule: a chunked product has one reduction axis",
        ));
    };
    let (rows, cols) = (&data[data.len() - 2], &data[data.len() - 1]);
    let (ro, ri) = cs.split(rows, mr)?;
    let (ko, kin) = cs.split(rk, kc)?;
    let (ki, kii) = cs.split(&kin, 4)?;
    let mut order: Vec<_> = data[..data.len() - 2].to_vec();
    order.extend([ko, ro, ki, kii.clone(), ri.clone(), cols.clone()]);
    cs.reorder(&order)?;
    cs.unroll(&kii)?;
    cs.unroll(&ri)?;
    cs.vectorize(cols)?;
    Ok(())
}

/// How many row tiles (of `tile_bytes` of accumulators each) one group of a chunked product
/// ([`k_blocked`]) holds: its accumulators fill at most a quarter of the L1 cache, at least 1.
pub fn group_tiles(tile_bytes: i64, cpu: &CpuDesc) -> i64 {
    (cpu.caches.l1d as i64 / 4 / tile_bytes.max(1)).max(1)
}

/// The register tile of a matrix product on `cpu`: `(rows, blocks)` of an output with `m` rows
/// and `blocks` column blocks of `vectors` vector registers each. As many rows as keep their
/// accumulators within [`CpuDesc::accumulators`] with one block's vectors and a broadcast row
/// value in the remaining registers, at most 8 (6 x 2 vectors on AVX2, 8 x 2 on AVX-512, the
/// best measured by `bench/matmul`) and at most `m`; for fewer rows, several blocks (dividing
/// `blocks`) so that enough independent accumulators keep the multiply-adds in flight.
pub fn matrix_tile(m: i64, blocks: i64, vectors: i64, cpu: &CpuDesc) -> (i64, i64) {
    let v = vectors.max(1);
    let fits = |r: i64, t: i64| tile_fits(r, t, v, cpu);
    let rows = (1..=m.clamp(1, 8)).rev().find(|&r| fits(r, 1)).unwrap_or(1);
    if rows * v >= cpu.accumulators_wide() {
        return (rows, 1);
    }
    let tb = (1..=blocks.max(1))
        .rev()
        .find(|&t| blocks % t == 0 && fits(rows, t))
        .unwrap_or(1);
    (rows, tb)
}

/// Whether a register tile of `rows` rows (or positions) x `blocks` blocks of `vectors`
/// vectors keeps its accumulators within [`CpuDesc::accumulators`] and leaves a register for
/// each block's operand vector and one for the broadcast row value: the rule of the matrix
/// kernel's tiles ([`matrix_tile`]) and of the flat 1x1 convolution's
/// ([`super::conv2d_flat::flat_tile`]).
pub fn tile_fits(rows: i64, blocks: i64, vectors: i64, cpu: &CpuDesc) -> bool {
    let acc = rows * blocks * vectors;
    acc <= cpu.accumulators() && acc + blocks * vectors < cpu.vector_registers as i64
}

/// How many of `blocks` column blocks (of `block_bytes` per row) a run-time packing copies
/// from each row of the matrix in turn: the most, dividing `blocks`, within 512 bytes of the
/// row. Block by block, every load of the copy opened another row (another page, for rows of
/// 4 KiB) and packing a [1024, 1024] matrix took 3.3% of its product; eight blocks of 64 bytes
/// at a time, 1.8% (AVX2 code, AMD EPYC family 25 model 17).
pub fn pack_run(blocks: i64, block_bytes: i64) -> i64 {
    let most = (512 / block_bytes.max(1)).max(1);
    (1..=most.min(blocks.max(1)))
        .rev()
        .find(|r| blocks % r == 0)
        .unwrap_or(1)
}

/// Whether `row_tiles` row tiles are split into blocks of `per_block` ([`row_block`]): only
/// when they exceed half as many again. Every block streams all of B from memory for its
/// rows, and a last block of one or two tiles would do it for next to nothing: a transformer
/// layer's [128, 1024] x [1024, 256] product on AVX2 (22 tiles of 6 rows, blocks of 21, 1 MiB
/// of B) ran the layer 4% slower in two blocks than in one, its A panel (512 KiB) then filling
/// half the L2 cache (AMD EPYC family 25 model 17).
pub fn split_rows(row_tiles: i64, per_block: i64) -> bool {
    2 * row_tiles > 3 * per_block
}

/// How many row tiles (of `tile_bytes` of A each) make one block of rows: those whose A panel
/// fills an eighth of `cpu`'s last-level cache (half the L2 cache on a CPU without L3), at
/// least 1. Each column panel of B stays in L2 while the block's row tiles pass it, their rows
/// of A streaming from L3; B is read once per block. Blocks whose A panel filled half the L2
/// cache had the output's lines evict it and the panel of B between row tiles. AVX2 code,
/// GFLOP/s in turns with OpenBLAS (97-104): 1024^3 97 -> 105 (blocks of 21 row tiles -> one
/// block), 2048^3 85 -> 97 (10 -> 85 tiles), [512, 768] x [768, 3072] 91 -> 107; AVX-512
/// level to 6% faster (AMD EPYC family 25 model 17).
pub fn row_block(tile_bytes: i64, cpu: &CpuDesc) -> i64 {
    let panel = match cpu.caches.l3 {
        0 => cpu.caches.l2 / 2,
        l3 => l3 / 8,
    };
    (panel as i64 / tile_bytes.max(1)).max(1)
}

/// The column block of the matrix kernel for `n` output columns on a CPU of `lanes` lanes (the
/// block of packed weights, `NK{b}n`): two vectors of outputs when there are that many, else
/// one; `None` below three quarters of a vector, where packing would mostly load padding.
pub fn column_block(n: i64, lanes: i64) -> Option<i64> {
    if n >= 2 * lanes {
        Some(2 * lanes)
    } else if n >= lanes * 3 / 4 {
        Some(lanes)
    } else {
        None
    }
}
