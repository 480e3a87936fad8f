//! The schedule of injective operators (TVM's `schedule_injective` for x86).

use kiln_ffi::Result;
use kiln_te::{create_schedule, Schedule, Tensor};

/// The vector width (in elements) the injective schedule splits by.
pub const VECTOR_FACTOR: i64 = 16;

/// Schedules the injective output `out` in `s` row by row: every axis but the last fused
/// into one parallel loop (so index arithmetic on the outer axes runs once per row), the last
/// axis split by [`VECTOR_FACTOR`] or 8 and vectorized when one divides it, else left as a
/// plain inner loop for LLVM's loop vectorizer (rows of 55 or 13 elements). A 1-D output is
/// split by [`VECTOR_FACTOR`] with the outer part parallel. Rank-0 outputs, placeholders and
/// symbolic last axes get only the parallel loop.
pub fn schedule_injective(s: &Schedule, out: &Tensor) -> Result<()> {
    let Some(c) = out.op().as_compute() else {
        return Ok(());
    };
    if c.axis.is_empty() || !c.reduce_axis.is_empty() {
        return Ok(());
    }
    let st = s.stage(out);
    let axes: Vec<_> = c.axis.iter().cloned().collect();
    let n = axes.len();
    let last = out.shape()[n - 1].as_int();
    let vf = last.and_then(|l| [VECTOR_FACTOR, 8].into_iter().find(|v| l % v == 0));
    if n == 1 {
        match (last, vf) {
            (Some(l), _) if l <= 1 => {}
            (Some(l), Some(v)) => {
                let (outer, inner) = st.split(&axes[0], v)?;
                st.vectorize(&inner)?;
                if l > v {
                    st.parallel(&outer)?;
                }
            }
            _ => {
                let (outer, _inner) = st.split(&axes[0], VECTOR_FACTOR)?;
                st.parallel(&outer)?;
            }
        }
        return Ok(());
    }
    if let Some(v) = vf {
        let (_outer, inner) = st.split(&axes[n - 1], v)?;
        st.vectorize(&inner)?;
    }
    let mut fused = axes[0].clone();
    for a in &axes[1..n - 1] {
        fused = st.fuse(&fused, a)?;
    }
    st.parallel(&fused)?;
    Ok(())
}

/// A schedule for `outs` (all injective) with [`schedule_injective`] applied to each output.
pub fn create_injective_schedule(outs: &[Tensor]) -> Result<Schedule> {
    let s = create_schedule(&outs.iter().map(|t| t.op().clone()).collect::<Vec<_>>());
    for t in outs {
        schedule_injective(&s, t)?;
    }
    Ok(s)
}
