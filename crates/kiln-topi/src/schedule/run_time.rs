//! The schedule of kernels whose extents are known only at run time.

use kiln_ffi::Result;
use kiln_te::{IterVar, Schedule, Tensor};

/// Schedules `out`, a result of extents known only at run time, in `s`: the stages before it
/// that are not reductions are inlined; reduction stages are computed inside the output's
/// innermost loop (each output element's own accumulator, so no buffer of a run-time size is
/// allocated); the outermost output loop runs in parallel. Correct for any compute; fast only
/// where each output element's reduction is its own (`reduce_to_shape`, products).
pub fn schedule_run_time(s: &Schedule, out: &Tensor) -> Result<()> {
    let Some(c) = out.op().as_compute() else {
        return Ok(());
    };
    let st = s.stage(out);
    let axes: Vec<IterVar> = c.axis.to_vec();
    let mut seen: Vec<kiln_te::Operation> = Vec::new();
    let mut todo: Vec<Tensor> = out.op().input_tensors();
    while let Some(t) = todo.pop() {
        let op = t.op().clone();
        let Some(tc) = op.as_compute() else {
            continue;
        };
        if seen.iter().any(|o| o.same_as(&op)) {
            continue;
        }
        seen.push(op.clone());
        if !tc.reduce_axis.is_empty() {
            if let Some(inner) = axes.last() {
                s.stage(&t).compute_at(&st, inner)?;
            }
        } else {
            s.stage(&t).compute_inline()?;
        }
        todo.extend(op.input_tensors());
    }
    if let Some(outer) = axes.first() {
        st.parallel(outer)?;
    }
    Ok(())
}
