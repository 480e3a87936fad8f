//! The generic schedule of reductions.

use kiln_ffi::Result;
use kiln_te::{Schedule, Tensor};

/// Schedules the reduction output `out` in `s`: its data-parallel axes are fused into one
/// parallel loop, and every compute stage it reads directly that has the same output shape
/// (the sum of a mean, the extreme value of an argmax) is computed inside that loop.
pub fn schedule_reduce(s: &Schedule, out: &Tensor) -> Result<()> {
    let Some(c) = out.op().as_compute() else {
        return Ok(());
    };
    if c.axis.is_empty() {
        return Ok(());
    }
    let st = s.stage(out);
    let axes: Vec<_> = c.axis.iter().cloned().collect();
    let mut fused = axes[0].clone();
    for a in &axes[1..] {
        fused = st.fuse(&fused, a)?;
    }
    let n: Option<i64> = out
        .shape()
        .iter()
        .map(|e| e.as_int())
        .try_fold(1i64, |acc, d| d.map(|d| acc * d));
    if n != Some(1) {
        st.parallel(&fused)?;
    }
    for t in out.op().input_tensors() {
        let same_shape = t.ndim() == out.ndim()
            && t.shape()
                .iter()
                .zip(out.shape())
                .all(|(a, b)| a.as_int().is_some() && a.as_int() == b.as_int());
        if t.op().as_compute().is_some() && same_shape {
            s.stage(&t).compute_at(&st, &fused)?;
        }
    }
    Ok(())
}
