//! Rank-0 outputs of a function built for a GPU target. A kernel is a loop bound to threads,
//! and a scalar has no loop: each rank-0 output is computed instead by a one-element stage
//! (`NAME_one`, shape `[1]`) that reads it, so the schedule binds that stage and computes the
//! scalar inside its thread ([`widen`]); after lowering, the output parameter's buffer is made
//! rank 0 again over the same memory ([`narrow`]), so callers still pass a rank-0 tensor.

use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::{PrimExpr, PrimFunc};

/// `outputs` with every rank-0 tensor replaced by a one-element stage reading it; the
/// positions replaced.
pub fn widen(outputs: &[Tensor]) -> Result<(Vec<Tensor>, Vec<usize>)> {
    let mut out = Vec::with_capacity(outputs.len());
    let mut widened = Vec::new();
    for (i, t) in outputs.iter().enumerate() {
        if t.ndim() > 0 {
            out.push(t.clone());
            continue;
        }
        let src = t.clone();
        let one = kiln_topi::transform::util::compute_tagged(
            &[PrimExpr::i32(1)],
            |_| src.at(&[]),
            &format!("{}_one", t.name()),
            kiln_topi::tag::ELEMWISE,
        )?;
        out.push(one);
        widened.push(i);
    }
    Ok((out, widened))
}

/// `func` (lowered over `num_inputs` inputs then the outputs) with the buffers of the outputs
/// at positions `widened` made rank 0 over the same data.
pub fn narrow(func: PrimFunc, num_inputs: usize, widened: &[usize]) -> Result<PrimFunc> {
    if widened.is_empty() {
        return Ok(func);
    }
    let params = func.params().to_vec();
    let mut map = Vec::with_capacity(params.len());
    for (k, p) in params.iter().enumerate() {
        let b = func.buffer_map().get(p).cloned().ok_or_else(|| {
            Error::runtime_error(format!("lowering: parameter `{}` has no buffer", p.name()))
        })?;
        let b = if k >= num_inputs && widened.contains(&(k - num_inputs)) {
            b.with_shape(Vec::new(), Vec::new())?
        } else {
            b
        };
        map.push((p.clone(), b));
    }
    PrimFunc::new(
        params,
        func.body().clone(),
        func.ret_type(),
        map,
        func.attrs().clone(),
    )
}
