//! The generic fallback schedules: inline injective producers, parallelize the outer loops,
//! vectorize the innermost dimension when that is safe.

use super::{extent, fuse_all, inline_injective, is_injective_op, producers, vector_factor};
use kiln_ffi::Result;
use kiln_te::{Schedule, Tensor};

/// Injective ops (elementwise, broadcast, layout): producers inlined; the output's outer
/// dimensions fused and parallel, the last split by [`super::vector_factor`] and vectorized.
pub fn schedule_injective(s: &Schedule, out: &Tensor) -> Result<()> {
    inline_injective(s, out, &[])?;
    let st = s.stage(out);
    let n = out.ndim();
    if n == 0 {
        return Ok(());
    }
    let axes: Vec<_> = (0..n).map(|i| out.axis(i)).collect();
    let last = extent(out, n - 1);
    let vf = if last > 0 { vector_factor(last) } else { 1 };
    let inner = if vf > 1 {
        let (o, i) = st.split(&axes[n - 1], vf)?;
        st.vectorize(&i)?;
        Some(o)
    } else {
        None
    };
    let mut outer: Vec<_> = axes[..n - 1].to_vec();
    if n == 1 {
        outer = inner.into_iter().collect();
    }
    if let Some(f) = fuse_all(&st, &outer)? {
        st.parallel(&f)?;
    }
    Ok(())
}

/// Reductions: producers inlined, every reduction stage at root with its data-parallel loops
/// fused and parallel; an injective output reading a reduction is parallel on its outer
/// dimensions.
pub fn schedule_reduce(s: &Schedule, out: &Tensor) -> Result<()> {
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
pub fn schedule_generic(s: &Schedule, out: &Tensor) -> Result<()> {
    inline_injective(s, out, &[])?;
    if out.ndim() > 0 {
        s.stage(out).parallel(&out.axis(0))?;
    }
    Ok(())
}
