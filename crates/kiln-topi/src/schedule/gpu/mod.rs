//! GPU schedules (TVM's `topi.cuda` injective and reduction fallbacks) for the `opencl` and
//! `cuda` targets: one thread per output element, threads in blocks of `num_threads` along
//! the fused output loop (`blockIdx.x` x `threadIdx.x`), reductions serial per thread.
//! [`fallback`] schedules any compute graph that way (every stage left at root is a kernel).

pub mod fallback;

pub use fallback::schedule_fallback;

use super::{fuse_all, inline_injective, is_injective_op, producers};
use kiln_ffi::{Error, Result};
use kiln_te::{thread_axis, IterVar, OpKind, Schedule, Tensor};

/// Threads per block when the target says nothing (TVM's default for OpenCL devices).
pub const DEFAULT_NUM_THREADS: i64 = 256;

/// The GPU schedule of the graph computing `outs`: [`schedule_injective`] for one output whose
/// producers are all injective computes, [`schedule_reduce`] for one reduction output whose
/// other producers are, [`schedule_fallback`] for anything else (several outputs, several
/// reductions, a reduction with an epilogue).
pub fn schedule_outputs(s: &Schedule, outs: &[Tensor], num_threads: i64) -> Result<()> {
    if let [out] = outs {
        let others_injective = producers(out)
            .iter()
            .skip(1)
            .all(|op| matches!(op.kind(), OpKind::Placeholder(_)) || is_injective_op(op));
        if others_injective && out.ndim() > 0 {
            return match out.op().kind() {
                OpKind::Compute(c) if c.reduce_axis.is_empty() => {
                    schedule_injective(s, out, num_threads)
                }
                OpKind::Compute(_) => schedule_reduce(s, out, num_threads),
                _ => schedule_fallback(s, outs, num_threads),
            };
        }
    }
    schedule_fallback(s, outs, num_threads)
}

/// Injective ops: producers inlined; the output's loops fused, split by `num_threads` and
/// bound to `blockIdx.x` / `threadIdx.x`.
pub fn schedule_injective(s: &Schedule, out: &Tensor, num_threads: i64) -> Result<()> {
    inline_injective(s, out, &[])?;
    bind_output(s, out, num_threads)
}

/// A reduction output (sum, max, ... over some axes): injective producers inlined, the
/// data-parallel loops fused and bound as in [`schedule_injective`], each thread reducing its
/// element serially.
pub fn schedule_reduce(s: &Schedule, out: &Tensor, num_threads: i64) -> Result<()> {
    match out.op().kind() {
        OpKind::Compute(c) if !c.reduce_axis.is_empty() => {}
        _ => {
            return Err(Error::value_error(format!(
                "gpu schedule_reduce: `{}` is not a reduction",
                out.name()
            )))
        }
    }
    inline_injective(s, out, &[])?;
    bind_output(s, out, num_threads)
}

/// Fuses `out`'s data-parallel loops and binds them to blocks of `num_threads` threads.
fn bind_output(s: &Schedule, out: &Tensor, num_threads: i64) -> Result<()> {
    bind_spatial(s, out, num_threads).map(|_| ())
}

/// Fuses the data-parallel loops of `out`'s stage, splits the fused loop by `num_threads` and
/// binds the parts to `blockIdx.x` / `threadIdx.x`; returns the `threadIdx.x` loop.
pub fn bind_spatial(s: &Schedule, out: &Tensor, num_threads: i64) -> Result<IterVar> {
    if num_threads <= 0 {
        return Err(Error::value_error(format!(
            "gpu schedule: num_threads must be positive, got {num_threads}"
        )));
    }
    let st = s.stage(out);
    let axes: Vec<_> = (0..out.ndim()).map(|i| out.axis(i)).collect();
    let Some(fused) = fuse_all(&st, &axes)? else {
        return Err(Error::value_error(format!(
            "gpu schedule: `{}` is a scalar; there is no loop to bind to threads",
            out.name()
        )));
    };
    let (bx, tx) = st.split(&fused, num_threads)?;
    st.bind(&bx, &thread_axis("blockIdx.x")?)?;
    st.bind(&tx, &thread_axis("threadIdx.x")?)?;
    Ok(tx)
}
