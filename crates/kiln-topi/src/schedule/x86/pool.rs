//! x86 schedule of 2-D and global pooling.

use crate::schedule::{
    extent, find_tagged, fuse_all, generic, inline_all_but_padding, inline_injective,
    is_injective_op, same_shape, vector_factor,
};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{Operation, Schedule, Tensor};
use kiln_tir::CpuDesc;

/// Schedules pooling (tags [`tag::POOL2D`], [`tag::GLOBAL_POOL2D`]): injective producers
/// inlined except a padding stage (`pad_data`, at root with `(n, c)` parallel, rows in
/// vectors); the output's `(n, c, y)` loops fused and parallel; a 2-D pooling's row in
/// vectors of the CPU's lanes with the window's taps unrolled outside them (each tap one
/// vector load, a strided one for stride 2: a 3x3/2 average pool of 136 x 28 x 28 took 110 us
/// as scalar code, 52 us so on AMD Zen 4); when the output divides a pooled sum (average
/// pooling) the sum is computed at that fused loop.
pub fn schedule_pool(s: &Schedule, out: &Tensor, cpu: &CpuDesc) -> Result<()> {
    let Some(pool) = find_tagged(out, &[tag::POOL2D, tag::GLOBAL_POOL2D]) else {
        return generic::schedule_generic(s, out, cpu);
    };
    if !(4..=5).contains(&out.ndim()) || !same_shape(out, &pool.output(0)) {
        return generic::schedule_generic(s, out, cpu);
    }
    if out.ndim() == 5 {
        return schedule_pool_blocked(s, out, &pool, cpu);
    }
    inline_all_but_padding(s, out, &pool, &[], cpu)?;
    let st = s.stage(out);
    let fused = fuse_all(&st, &[out.axis(0), out.axis(1), out.axis(2)])?.expect("three loops");
    st.parallel(&fused)?;
    let ps = s.stage_op(&pool);
    let at_row = is_injective_op(out.op());
    if at_row {
        ps.compute_at(&st, &fused)?;
    }
    // A global pool's lane partials (NCHW planes reduced in vectors) at each plane.
    for t in pool.input_tensors() {
        if t.op()
            .name()
            .ends_with(crate::nn::row_reduce::PARTIALS_SUFFIX)
        {
            s.stage(&t).compute_at(&st, &fused)?;
            crate::schedule::vectorize_lane_partials(&s.stage(&t))?;
        }
    }
    if pool.tag() == tag::POOL2D {
        // A row of outputs in vectors, the window's taps outside: each tap one (strided)
        // vector load.
        let vf = vector_factor(extent(out, 3), cpu.lanes(out.dtype()));
        let leaf = ps.leaf_iter_vars();
        let (data, red): (Vec<_>, Vec<_>) = leaf.into_iter().partition(|iv| !iv.is_reduce());
        let x = data.last().expect("axes").clone();
        let (xo, xi) = ps.split(&x, vf)?;
        let mut order = data[..data.len() - 1].to_vec();
        order.push(xo);
        order.extend(red.iter().cloned());
        order.push(xi.clone());
        ps.reorder(&order)?;
        for iv in &red {
            ps.unroll(iv)?;
        }
        if vf > 1 {
            ps.vectorize(&xi)?;
            if at_row {
                let (_, oi) = st.split(&out.axis(3), vf)?;
                st.vectorize(&oi)?;
            }
        }
    }
    Ok(())
}

/// [`schedule_pool`] over channel blocks (`[N, C/b, H, W, b]`): `(n, block, y)` fused and
/// parallel, the window loops (unrolled for 2-D pooling) outside the block's channels, which
/// are one vector.
fn schedule_pool_blocked(
    s: &Schedule,
    out: &Tensor,
    pool: &Operation,
    _cpu: &CpuDesc,
) -> Result<()> {
    // The padding inlines too: a tap's bounds test holds alike for the whole block vector
    // (one branch per tap), cheaper than writing the padded data out first.
    inline_injective(s, out, &[])?;
    let st = s.stage(out);
    let fused = fuse_all(&st, &[out.axis(0), out.axis(1), out.axis(2)])?.expect("three loops");
    st.parallel(&fused)?;
    let ps = s.stage_op(pool);
    if is_injective_op(out.op()) {
        st.vectorize(&out.axis(4))?;
        ps.compute_at(&st, &fused)?;
    }
    let leaf = ps.leaf_iter_vars();
    let (data, red): (Vec<_>, Vec<_>) = leaf.into_iter().partition(|iv| !iv.is_reduce());
    let (block, outer) = data.split_last().expect("axes");
    let mut order = outer.to_vec();
    order.extend(red.iter().cloned());
    order.push(block.clone());
    ps.reorder(&order)?;
    if pool.tag() == tag::POOL2D {
        for iv in &red {
            ps.unroll(iv)?;
        }
    }
    ps.vectorize(block)
}
