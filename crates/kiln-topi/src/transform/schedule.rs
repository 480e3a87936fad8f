//! The schedule of injective operators (TVM's `schedule_injective` for x86).

use kiln_ffi::Result;
use kiln_te::{create_schedule, Schedule, Tensor};
use kiln_tir::CpuDesc;

/// Schedules the injective output `out` in `s` row by row: every axis but the last fused
/// into one parallel loop (so index arithmetic on the outer axes runs once per row), the last
/// axis split by the output dtype's vector lanes on `cpu` (or half of them) and vectorized when
/// one divides it, else left as a plain inner loop for LLVM's loop vectorizer (rows of 55 or 13
/// elements). A 1-D output is split by the lanes with the outer part parallel. Rank-0 outputs,
/// placeholders and symbolic last axes get only the parallel loop.
pub fn schedule_injective(s: &Schedule, out: &Tensor, cpu: &CpuDesc) -> Result<()> {
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
    let lanes = cpu.lanes(out.dtype());
    let vf = last.and_then(|l| {
        [lanes, lanes / 2]
            .into_iter()
            .find(|&v| v > 1 && l % v == 0)
    });
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
                let (outer, _inner) = st.split(&axes[0], lanes)?;
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
pub fn create_injective_schedule(outs: &[Tensor], cpu: &CpuDesc) -> Result<Schedule> {
    let s = create_schedule(&outs.iter().map(|t| t.op().clone()).collect::<Vec<_>>());
    for t in outs {
        schedule_injective(&s, t, cpu)?;
    }
    Ok(s)
}
