//! The general GPU schedule for any tensor-expression graph (TVM's `topi.cuda` fallback
//! applied to every stage): injective producers are inlined; every other stage left at root
//! (the outputs and the reductions) becomes one kernel whose data-parallel loops are fused,
//! split into blocks of threads and bound to `blockIdx.x` / `threadIdx.x`, each thread computing
//! its elements' reductions serially.
//!
//! A reduction read only by one output of its own shape (a convolution, dense or pooling
//! followed by an elementwise epilogue: bias, activation, requantize) is instead computed inside
//! the output's thread loop into a private (`local`) value, so the group is one kernel and the
//! intermediate never reaches global memory. A rank-0 reduction read by one output is computed
//! that way too (each thread recomputes it: a reduction to a scalar has no loop to bind).
//!
//! Extern operations (hand-written loop nests) cannot run as kernels: the schedule returns an
//! error naming them.

use super::bind_spatial;
use crate::schedule::{inline_injective, is_injective_op, producers, same_shape};
use kiln_ffi::{Error, Result};
use kiln_te::{Operation, Schedule, Tensor};

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
    let mut thread_loops = Vec::with_capacity(outs.len());
    for o in outs {
        if thread_loops
            .iter()
            .any(|(op, _): &(Operation, _)| op.same_as(o.op()))
        {
            continue;
        }
        let tx = bind_spatial(s, o, threads_for(o, num_threads))?;
        thread_loops.push((o.op().clone(), tx));
    }
    for r in kept.iter().filter(|op| !is_out(op)) {
        let t = r.output(0);
        let readers: Vec<&Operation> = kept
            .iter()
            .filter(|k| reads(k, &kept).iter().any(|x| x.same_as(r)))
            .collect();
        let attach = match readers.as_slice() {
            [reader] => thread_loops
                .iter()
                .find(|(op, _)| op.same_as(reader))
                .filter(|(op, _)| t.ndim() == 0 || same_shape(&t, &op.output(0))),
            _ => None,
        };
        match attach {
            Some((op, tx)) => {
                let st = s.stage_op(r);
                st.compute_at(&s.stage_op(op), tx)?;
                st.set_scope("local")?;
            }
            None => {
                bind_spatial(s, &t, threads_for(&t, num_threads))?;
            }
        }
    }
    Ok(())
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
