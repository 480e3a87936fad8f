//! The generic schedule of injective operators (TVM's `schedule_injective` for x86).

use kiln_ffi::Result;
use kiln_te::{create_schedule, Schedule, Tensor};

/// The vector width (in elements) the injective schedule splits by.
pub const VECTOR_FACTOR: i64 = 16;

/// Schedules the injective output `out` in `s`: fuses all output axes into one loop, splits it
/// by [`VECTOR_FACTOR`] (or 8 / 4, the largest that divides the static element count) with the
/// inner part vectorized, and runs the outer part in parallel. When no factor divides the
/// count (or the shape is symbolic) the fused loop is split by 16 without vectorizing, so the
/// outer part can still run in parallel. Rank-0 outputs and placeholders are left alone.
pub fn schedule_injective(s: &Schedule, out: &Tensor) -> Result<()> {
    let Some(c) = out.op().as_compute() else {
        return Ok(());
    };
    if c.axis.is_empty() || !c.reduce_axis.is_empty() {
        return Ok(());
    }
    let st = s.stage(out);
    let axes: Vec<_> = c.axis.iter().cloned().collect();
    let mut fused = axes[0].clone();
    for a in &axes[1..] {
        fused = st.fuse(&fused, a)?;
    }
    let total: Option<i64> = out
        .shape()
        .iter()
        .map(|e| e.as_int())
        .try_fold(1i64, |acc, d| d.map(|d| acc * d));
    match total {
        Some(n) if n <= 1 => {}
        Some(n) => {
            if let Some(v) = [VECTOR_FACTOR, 8, 4].into_iter().find(|v| n % v == 0) {
                let (outer, inner) = st.split(&fused, v)?;
                st.vectorize(&inner)?;
                if n > v {
                    st.parallel(&outer)?;
                }
            } else if n > VECTOR_FACTOR {
                let (outer, _inner) = st.split(&fused, VECTOR_FACTOR)?;
                st.parallel(&outer)?;
            }
        }
        None => {
            let (outer, _inner) = st.split(&fused, VECTOR_FACTOR)?;
            st.parallel(&outer)?;
        }
    }
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
