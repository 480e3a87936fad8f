//! The schedule of kernels whose extents are known only at run time.

use kiln_ffi::Result;
use kiln_te::{IterVar, Schedule, Tensor};

/// Schedules `out`, a result of extents known only at run time, in `s`: the stages before it
/// that are not reductions are inlined; reduction stages are computed inside the output's
/// innermost loop (each output element's own accumulator, so no buffer of a run-time size is
/// allocated), or once per row when their dimensions lead the output's; the outermost output
/// loop runs in parallel; a product's last axis runs in vectors of `lanes` (the target's)
/// when its extent is static and whole vectors. Correct for any compute; fast only
/// where each output element's reduction is its own (`reduce_to_shape`, products).
pub fn schedule_run_time(s: &Schedule, out: &Tensor, lanes: i64) -> Result<()> {
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
            // A reduction over rows that lead the output (softmax's maximum and sum) is
            // computed once per row, inside the loop of its last dimension (a scalar one at
            // the root); any other inside the innermost loop.
            let r = t.ndim();
            let leads = r < axes.len()
                && t.shape()
                    .iter()
                    .zip(out.shape())
                    .all(|(a, b)| kiln_tir::structural_equal(a, b));
            if leads && r == 0 {
                // Computed once, at the root.
            } else if let Some(at) = if leads { axes.get(r - 1) } else { axes.last() } {
                s.stage(&t).compute_at(&st, at)?;
            }
        } else {
            s.stage(&t).compute_inline()?;
        }
        todo.extend(op.input_tensors());
    }
    if let Some(outer) = axes.first() {
        st.parallel(outer)?;
    }
    // A product (the output is the reduction): its last axis in vectors of `lanes`, the
    // reduction between them, when that axis has a static extent of whole vectors.
    let whole = out
        .shape()
        .last()
        .and_then(|d| d.as_int())
        .is_some_and(|n| lanes > 1 && n % lanes == 0);
    if !c.reduce_axis.is_empty() && axes.len() >= 2 && whole {
        let last = axes.last().expect("two axes or more").clone();
        let (jo, ji) = st.split(&last, lanes)?;
        let mut order: Vec<IterVar> = vec![jo];
        order.extend(c.reduce_axis.iter().cloned());
        order.push(ji.clone());
        st.reorder(&order)?;
        st.vectorize(&ji)?;
    }
    Ok(())
}
