//! x86 schedules of softmax, log-softmax and layer norm: the row statistics computed at the
//! output's row, rows in parallel.

use crate::nn::tag;
use crate::schedule::{fuse_all, generic, inline_injective, is_injective_op};
use kiln_ffi::Result;
use kiln_te::{Schedule, Tensor};
use kiln_tir::CpuDesc;

/// Fuses and parallelizes the output loops outside the reduced trailing dimensions and
/// computes every reduction stage feeding `out` there; with `trailing == false` (reduced axes
/// not last) the reductions stay at root, each parallel on its first loop.
fn rows_with_stats(s: &Schedule, out: &Tensor, kept: usize, trailing: bool) -> Result<()> {
    inline_injective(s, out, &[])?;
    let stats: Vec<_> = out
        .op()
        .input_tensors()
        .into_iter()
        .filter(|t| {
            !is_injective_op(t.op()) && matches!(t.op().kind(), kiln_te::OpKind::Compute(_))
        })
        .collect();
    let st = s.stage(out);
    if trailing && kept > 0 {
        let axes: Vec<_> = (0..kept).map(|i| out.axis(i)).collect();
        let fused = fuse_all(&st, &axes)?.expect("kept loops");
        st.parallel(&fused)?;
        for t in &stats {
            s.stage(t).compute_at(&st, &fused)?;
        }
        return Ok(());
    }
    for t in &stats {
        if t.ndim() > 0 {
            s.stage(t).parallel(&t.axis(0))?;
        }
    }
    st.parallel(&out.axis(0))?;
    Ok(())
}

/// Softmax / log-softmax ([`tag::SOFTMAX_OUTPUT`]) along `axis` (non-negative).
pub fn schedule_softmax_axis(s: &Schedule, out: &Tensor, axis: usize) -> Result<()> {
    let n = out.ndim();
    rows_with_stats(s, out, axis, axis + 1 == n)
}

/// Softmax / log-softmax, the axis found from the statistics' shape (the first dimension
/// where they differ from the output); falls back to the generic schedule for other ops.
pub fn schedule_softmax(s: &Schedule, out: &Tensor, cpu: &CpuDesc) -> Result<()> {
    if out.op().tag() != tag::SOFTMAX_OUTPUT {
        return generic::schedule_generic(s, out, cpu);
    }
    let stat =
        out.op().input_tensors().into_iter().find(|t| {
            !is_injective_op(t.op()) && matches!(t.op().kind(), kiln_te::OpKind::Compute(_))
        });
    let Some(stat) = stat else {
        return generic::schedule_generic(s, out, cpu);
    };
    let axis = (0..out.ndim())
        .find(|&d| d >= stat.ndim() || stat.shape()[d].as_int() != out.shape()[d].as_int())
        .unwrap_or(out.ndim() - 1);
    schedule_softmax_axis(s, out, axis)
}

/// Layer norm ([`tag::LAYER_NORM_OUTPUT`]): when the normalized axes are the trailing ones,
/// mean and variance are computed per row inside the parallel row loop.
pub fn schedule_layer_norm(s: &Schedule, out: &Tensor, cpu: &CpuDesc) -> Result<()> {
    if out.op().tag() != tag::LAYER_NORM_OUTPUT {
        return generic::schedule_generic(s, out, cpu);
    }
    let mean = out
        .op()
        .input_tensors()
        .into_iter()
        .find(|t| t.op().name() == "layer_norm_mean");
    let Some(mean) = mean else {
        return generic::schedule_generic(s, out, cpu);
    };
    let kept = mean.ndim();
    let trailing = (0..kept).all(|d| mean.shape()[d].as_int() == out.shape()[d].as_int());
    rows_with_stats(s, out, kept, trailing)
}
