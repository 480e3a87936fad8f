//! GPU schedules (TVM's `topi.cuda` injective and reduction fallbacks) for the `opencl` and
//! `cuda` targets: one thread per output element, threads in blocks of `num_threads` along
//! the fused output loop (`blockIdx.x` x `threadIdx.x`), reductions serial per thread.

use super::{fuse_all, inline_injective};
use kiln_ffi::{Error, Result};
use kiln_te::{thread_axis, OpKind, Schedule, Tensor};

/// Threads per block when the target says nothing (TVM's default for OpenCL devices).
pub const DEFAULT_NUM_THREADS: i64 = 256;

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
    Ok(())
}
