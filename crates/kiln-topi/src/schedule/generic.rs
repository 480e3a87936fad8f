//! The generic fallback schedules: inline injective producers, parallelize the outer loops,
//! vectorize the innermost dimension when that is safe.

use super::{fuse_all, inline_injective, is_injective_op, producers};
use kiln_ffi::Result;
use kiln_te::{Schedule, Tensor};
use kiln_tir::CpuDesc;

/// Injective ops (elementwise, broadcast, layout): producers inlined, then
/// [`crate::transform::schedule_injective`] on the output.
pub fn schedule_injective(s: &Schedule, out: &Tensor, cpu: &CpuDesc) -> Result<()> {
    inline_injective(s, out, &[])?;
    crate::transform::schedule_injective(s, out, cpu)
}

/// Operators built of several reduction stages (cumsum, scatter): producers inlined, every
/// reduction stage at root with its data-parallel loops fused and parallel; an injective output
/// reading a reduction is parallel on its outer dimensions. The schedule of the reduction
/// operators themselves is [`crate::reduce::schedule_reduce`].
pub fn schedule_reduce_stages(s: &Schedule, out: &Tensor, _cpu: &CpuDesc) -> Result<()> {
    inline_injective(s, out, &[])?;
    for op in producers(out) {
        if !matches!(op.kind(), kiln_te::OpKind::Compute(_)) {
            continue;
        }
        let t = op.output(0);
        if !is_injective_op(&op) || op.same_as(out.op()) {
            let st = s.stage_op(&op);
            let axes: Vec<_> = (0..t.ndim()).map(|i| t.axis(i)).collect();
            let keep = if is_injective_op(&op) && axes.len() > 1 {
                axes.len() - 1
            } else {
                axes.len()
            };
            if let Some(f) = fuse_all(&st, &axes[..keep])? {
                st.parallel(&f)?;
            }
        }
    }
    Ok(())
}

/// The fallback for any operator: injective producers inlined, the output's outermost loop
/// parallel (reduction stages stay at root).
pub fn schedule_generic(s: &Schedule, out: &Tensor, _cpu: &CpuDesc) -> Result<()> {
    inline_injective(s, out, &[])?;
    if out.ndim() > 0 {
        s.stage(out).parallel(&out.axis(0))?;
    }
    Ok(())
}
