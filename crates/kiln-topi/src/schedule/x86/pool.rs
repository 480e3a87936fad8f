//! x86 schedule of 2-D and global pooling.

use crate::nn::tag;
use crate::schedule::{
    find_tagged, fuse_all, generic, inline_injective, is_injective_op, same_shape,
};
use kiln_ffi::Result;
use kiln_te::{Schedule, Tensor};

/// Schedules pooling (tags [`tag::POOL2D`], [`tag::GLOBAL_POOL2D`]): injective producers
/// inlined except a padding stage (`pad_data`, at root with `(n, c)` parallel); the output's
/// `(n, c, y)` loops fused and parallel; the window loops of a 2-D pooling unrolled (straight
/// code per output column, which LLVM vectorizes along the row); when the output divides a
/// pooled sum (average pooling) the sum is computed at that fused loop.
pub fn schedule_pool(s: &Schedule, out: &Tensor) -> Result<()> {
    let Some(pool) = find_tagged(out, &[tag::POOL2D, tag::GLOBAL_POOL2D]) else {
        return generic::schedule_generic(s, out);
    };
    if out.ndim() != 4 || !same_shape(out, &pool.output(0)) {
        return generic::schedule_generic(s, out);
    }
    let pad = pool
        .input_tensors()
        .into_iter()
        .find(|t| t.op().name() == "pad_data");
    let keep: Vec<_> = pad.iter().map(|p| p.op().clone()).collect();
    inline_injective(s, out, &keep)?;
    if let Some(p) = &pad {
        let ps = s.stage(p);
        if let Some(f) = fuse_all(&ps, &[p.axis(0), p.axis(1)])? {
            ps.parallel(&f)?;
        }
    }
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
