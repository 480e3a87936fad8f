//! x86 schedule of 2-D and global pooling.

use crate::nn::tag;
use crate::schedule::{
    find_tagged, fuse_all, generic, inline_injective, is_injective_op, same_shape,
};
use kiln_ffi::Result;
use kiln_te::{Schedule, Tensor};

/// Schedules pooling (tags [`tag::POOL2D`], [`tag::GLOBAL_POOL2D`]): injective producers
/// inlined; the output's `(n, c, y)` loops fused and parallel; when the output divides a
/// pooled sum (average pooling) the sum is computed at that fused loop.
pub fn schedule_pool(s: &Schedule, out: &Tensor) -> Result<()> {
    let Some(pool) = find_tagged(out, &[tag::POOL2D, tag::GLOBAL_POOL2D]) else {
        return generic::schedule_generic(s, out);
    };
    if out.ndim() != 4 || !same_shape(out, &pool.output(0)) {
        return generic::schedule_generic(s, out);
    }
    inline_injective(s, out, &[])?;
    let st = s.stage(out);
    let fused = fuse_all(&st, &[out.axis(0), out.axis(1), out.axis(2)])?.expect("three loops");
    st.parallel(&fused)?;
    if is_injective_op(out.op()) {
        s.stage_op(&pool).compute_at(&st, &fused)?;
    }
    Ok(())
}
