//! The general GPU schedule for any tensor-expression graph (TVM's `topi.cuda` fallback
//! applied to every stage): injective producers are inlined; every other stage left at root
//! (the outputs and the reductions) becomes one kernel whose data-parallel loops are fused,
//! split into blocks of threads and bound to `blockIdx.x` / `threadIdx.x`, each thread computing
//! its elements' reductions serially.
//!
//! A reduction read only by one output of its own shape (a convolution, dense or pooling
//! followed by an elementwise epilogue: bias, activation, requantize) is instead computed inside
//! the output's thread loop into a private (`local`) value, so the group is one kernel and the
//! intermediate never reaches global memory. Each such thread computes a block of consecutive
//! channels (axis 1, see [`CHANNEL_BLOCKS`]) and, for outputs of rank 3 or more, of columns
//! (the last axis, [`WIDTH_BLOCKS`]) with the reduction loops outside the block's loops, so
//! every input value read feeds several accumulators and every weight several columns. A rank-0
//! reduction read by one output is computed that way too (each thread recomputes it: a
//! reduction to a scalar has no loop to bind).
//!
//! Extern operations (hand-written loop nests) cannot run as kernels: the schedule returns an
//! error naming them.

use super::bind_spatial;
use crate::schedule::{
    dividing_factor, fuse_all, inline_injective, is_injective_op, producers, same_shape,
};
use kiln_ffi::{Error, Result};
use kiln_te::{thread_axis, IterVar, Operation, Schedule, Tensor};

/// Schedules the graph computing `outs` for a GPU with blocks of at most `num_threads` threads
/// (see the module docs).
pub fn schedule_fallback(s: &Schedule, outs: &[Tensor], num_threads: i64) -> Result<()> {
    if num_threads <= 0 {
        return Err(Error::value_error(format!(
            "gpu schedule: num_threads must be positive, got {num_threads}"
        )));
    }
    let out_ops: Vec<Operation> = outs.iter().map(|t| t.op().clone()).collect();
    let all = all_producers(outs);
    if let Some(e) = all.iter().find(|op| op.as_extern().is_some()) {
        return Err(Error::value_error(format!(
            "gpu schedule: `{}` is an extern operation (a hand-written loop nest); it has no \
             device schedule",
            e.name()
        )));
    }
    for o in outs {
        inline_injective(s, o, &out_ops)?;
    }
    let is_out = |op: &Operation| out_ops.iter().any(|o| o.same_as(op));
    let kept: Vec<Operation> = all
        .iter()
        .filter(|op| op.as_compute().is_some() && (is_out(op) || !is_injective_op(op)))
        .cloned()
        .collect();
    // Each reduction computed inside an output's thread (see the module docs), or at root.
    let mut attached: Vec<(Operation, Operation)> = Vec::new();
    for r in kept.iter().filter(|op| !is_out(op)) {
        let t = r.output(0);
        let readers: Vec<&Operation> = kept
            .iter()
            .filter(|k| reads(k, &kept).iter().any(|x| x.same_as(r)))
            .collect();
        if let [reader] = readers.as_slice() {
            if is_out(reader) && (t.ndim() == 0 || same_shape(&t, &reader.output(0))) {
                attached.push((r.clone(), (*reader).clone()));
                continue;
            }
        }
        bind_spatial(s, &t, threads_for(&t, num_threads))?;
    }
    let mut done: Vec<Operation> = Vec::new();
    for o in outs {
        if done.iter().any(|d| d.same_as(o.op())) {
            continue;
        }
        done.push(o.op().clone());
        let mine: Vec<&Operation> = attached
            .iter()
            .filter(|(_, reader)| reader.same_as(o.op()))
            .map(|(r, _)| r)
            .collect();
        let block = if mine.is_empty() { 1 } else { channel_block(o) };
        let wblock = if block > 1 { width_block(o) } else { 1 };
        let tx = if block > 1 {
            bind_blocked(s, o, block, wblock, num_threads)?
        } else {
            bind_spatial(s, o, threads_for(o, num_threads))?
        };
        for r in mine {
            let st = s.stage_op(r);
            st.compute_at(&s.stage_op(o.op()), &tx)?;
            st.set_scope("local")?;
            if block > 1 {
                // The block's channels (and columns) innermost: each input value read once for
                // all channels, each weight once for all columns.
                let t = r.output(0);
                let last = t.ndim() - 1;
                let inner: Vec<usize> = if wblock > 1 { vec![1, last] } else { vec![1] };
                let mut order: Vec<IterVar> = (0..t.ndim())
                    .filter(|i| !inner.contains(i))
                    .map(|i| t.axis(i))
                    .collect();
                if let Some(c) = r.as_compute() {
                    order.extend(c.reduce_axis.iter().cloned());
                }
                order.extend(inner.iter().map(|&i| t.axis(i)));
                st.reorder(&order)?;
            }
        }
    }
    Ok(())
}

/// Output channels (axis 1) each thread computes when reductions are computed in its
/// thread: the largest of [`CHANNEL_BLOCKS`] dividing the extent (each input element then
/// feeds that many accumulators, as a direct convolution or dense layer reuses it), else 1.
fn channel_block(o: &Tensor) -> i64 {
    if o.ndim() < 2 {
        return 1;
    }
    match o.shape()[1].as_int() {
        Some(c) if c > 0 => dividing_factor(c, &CHANNEL_BLOCKS),
        _ => 1,
    }
}

/// The channel blocks a thread of a blocked epilogue may take (the largest dividing the
/// channel count), largest first.
pub const CHANNEL_BLOCKS: [i64; 3] = [8, 4, 2];

/// Columns (the last axis of a rank-3 or higher output) each thread computes beside its
/// channel block: the largest of [`WIDTH_BLOCKS`] dividing the extent, else 1.
fn width_block(o: &Tensor) -> i64 {
    if o.ndim() < 3 {
        return 1;
    }
    match o.shape()[o.ndim() - 1].as_int() {
        Some(w) if w > 0 => dividing_factor(w, &WIDTH_BLOCKS),
        _ => 1,
    }
}

/// The column blocks a thread of a blocked epilogue may take (the largest dividing the last
/// axis), largest first.
pub const WIDTH_BLOCKS: [i64; 2] = [4, 2];

/// Binds `o` with `block` consecutive channels (axis 1) and `wblock` consecutive columns (the
/// last axis, when above 1) per thread: those axes split, the other loops and the outer parts
/// fused, split into blocks of threads and bound, the block's channels and columns serial
/// loops inside; returns the `threadIdx.x` loop.
fn bind_blocked(
    s: &Schedule,
    o: &Tensor,
    block: i64,
    wblock: i64,
    num_threads: i64,
) -> Result<IterVar> {
    let st = s.stage(o);
    let last = o.ndim() - 1;
    let (co, ci) = st.split(&o.axis(1), block)?;
    let mut outer = vec![o.axis(0), co];
    let mut inner = vec![ci];
    if wblock > 1 {
        outer.extend((2..last).map(|i| o.axis(i)));
        let (wo, wi) = st.split(&o.axis(last), wblock)?;
        outer.push(wo);
        inner.push(wi);
    } else {
        outer.extend((2..o.ndim()).map(|i| o.axis(i)));
    }
    let mut order = outer.clone();
    order.extend(inner);
    st.reorder(&order)?;
    let fused = fuse_all(&st, &outer)?.ok_or_else(|| {
        Error::value_error(format!("gpu schedule: `{}` has no loop to bind", o.name()))
    })?;
    let per_thread = block * wblock;
    let total = threads_for(o, num_threads * per_thread) / per_thread;
    let (bx, tx) = st.split(&fused, total.max(1))?;
    st.bind(&bx, &thread_axis("blockIdx.x")?)?;
    st.bind(&tx, &thread_axis("threadIdx.x")?)?;
    Ok(tx)
}

/// Every operation the outputs depend on (the outputs first), each once.
fn all_producers(outs: &[Tensor]) -> Vec<Operation> {
    let mut all: Vec<Operation> = Vec::new();
    for o in outs {
        for op in producers(o) {
            if !all.iter().any(|a| a.same_as(&op)) {
                all.push(op);
            }
        }
    }
    all
}

/// The stages of `kept` that `op` reads, directly or through inlined (injective) stages.
fn reads(op: &Operation, kept: &[Operation]) -> Vec<Operation> {
    let mut found: Vec<Operation> = Vec::new();
    let mut seen: Vec<Operation> = Vec::new();
    let mut stack: Vec<Operation> = op.input_tensors().iter().map(|t| t.op().clone()).collect();
    while let Some(x) = stack.pop() {
        if seen.iter().any(|y| y.same_as(&x)) {
            continue;
        }
        seen.push(x.clone());
        if kept.iter().any(|k| k.same_as(&x)) {
            found.push(x);
        } else if is_injective_op(&x) {
            stack.extend(x.input_tensors().iter().map(|t| t.op().clone()));
        }
    }
    found
}

/// Threads per block for the stage of `t`: `num_threads`, or fewer when `t` has fewer
/// elements (no idle threads in a single small block).
fn threads_for(t: &Tensor, num_threads: i64) -> i64 {
    let total = t
        .shape()
        .iter()
        .map(|d| d.as_int())
        .try_fold(1i64, |acc, d| d.map(|d| acc.saturating_mul(d)));
    match total {
        Some(n) if n > 0 => num_threads.min(n),
        _ => num_threads,
    }
}
