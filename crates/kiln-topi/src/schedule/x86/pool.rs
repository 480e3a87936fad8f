//! x86 schedule of 2-D and global pooling.

use crate::schedule::{
    find_tagged, fuse_all, generic, inline_all_but_padding, is_injective_op, same_shape,
};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{Operation, Schedule, Tensor};
use kiln_tir::CpuDesc;

/// Schedules pooling (tags [`tag::POOL2D`], [`tag::GLOBAL_POOL2D`]): injective producers
/// inlined except a padding stage (`pad_data`, at root with `(n, c)` parallel); the output's
/// `(n, c, y)` loops fused and parallel; the window loops of a 2-D pooling unrolled (straight
/// code per output column, which LLVM vectorizes along the row); when the output divides a
/// pooled sum (average pooling) the sum is computed at that fused loop.
pub fn schedule_pool(s: &Schedule, out: &Tensor, cpu: &CpuDesc) -> Result<()> {
    let Some(pool) = find_tagged(out, &[tag::POOL2D, tag::GLOBAL_POOL2D]) else {
        return generic::schedule_generic(s, out, cpu);
    };
    if !(4..=5).contains(&out.ndim()) || !same_shape(out, &pool.output(0)) {
        return generic::schedule_generic(s, out, cpu);
    }
    if out.ndim() == 5 {
        return schedule_pool_blocked(s, out, &pool);
    }
    inline_all_but_padding(s, out, &pool, &[])?;
    if pool.tag() == tag::POOL2D {
        let ps = s.stage_op(&pool);
        for iv in ps.leaf_iter_vars().into_iter().filter(|iv| iv.is_reduce()) {
            ps.unroll(&iv)?;
        }
    }
    let st = s.stage(out);
    let fused = fuse_all(&st, &[out.axis(0), out.axis(1), out.axis(2)])?.expect("three loops");
    st.parallel(&fused)?;
    if is_injective_op(out.op()) {
        s.stage_op(&pool).compute_at(&st, &fused)?;
    }
    Ok(())
}

/// [`schedule_pool`] over channel blocks (`[N, C/b, H, W, b]`): `(n, block, y)` fused and
/// parallel, the window loops (unrolled for 2-D pooling) outside the block's channels, which
/// are one vector.
fn schedule_pool_blocked(s: &Schedule, out: &Tensor, pool: &Operation) -> Result<()> {
    inline_all_but_padding(s, out, pool, &[])?;
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
