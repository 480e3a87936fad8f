//! The schedule of kernels whose extents are known only at run time.

use kiln_ffi::Result;
use kiln_te::{IterVar, Operation, Schedule, Tensor};
use kiln_tir::visitor::{post_order_visit_expr, uses_var};
use kiln_tir::{CpuDesc, ExprKind, Var};

/// Schedules `out`, a result of extents known only at run time, in `s` for `cpu`.
///
/// A product (one reduction whose result has the output's shape, with an elementwise epilogue
/// or none: matrix products, convolutions, poolings) is tiled ([`schedule_product`]). Any
/// other compute: the stages before it that are not reductions are inlined; reduction stages
/// are computed inside the output's innermost loop (each output element's own accumulator,
/// so no buffer of a run-time size is allocated), or once per row when their dimensions lead
/// the output's (the output's last axis then runs in vectors of the target's lanes); the
/// outermost output loop runs in parallel.
///
/// Stages feeding a hand-written loop nest (an extern operation: a recurrent layer's input
/// projection) are scheduled the same way, each as the output of its own part.
pub fn schedule_run_time(s: &Schedule, out: &Tensor, cpu: &CpuDesc) -> Result<()> {
    let Some(c) = out.op().as_compute() else {
        return Ok(());
    };
    let mut externs: Vec<Tensor> = Vec::new();
    if let Some(r) = product_of(out) {
        schedule_product(s, out, &r, cpu, &mut externs)?;
    } else {
        let st = s.stage(out);
        let axes: Vec<IterVar> = c.axis.to_vec();
        // Whether a reduction is computed inside the innermost loop (which then stays whole).
        let mut innermost = false;
        let mut seen: Vec<Operation> = Vec::new();
        let mut todo: Vec<Tensor> = out.op().input_tensors();
        while let Some(t) = todo.pop() {
            let op = t.op().clone();
            if seen.iter().any(|o| o.same_as(&op)) {
                continue;
            }
            seen.push(op.clone());
            let Some(tc) = op.as_compute() else {
                externs.push(t);
                continue;
            };
            if !tc.reduce_axis.is_empty() {
                // A reduction over rows that lead the output (softmax's maximum and sum) is
                // computed once per row, inside the loop of its last dimension (a scalar one
                // at the root); lane partials of such a row (`nn::row_reduce`, a last axis of
                // one vector) there too, in one vector; any other inside the innermost loop.
                let r = t.ndim();
                let leading = |k: usize| {
                    k < axes.len()
                        && t.shape()[..k]
                            .iter()
                            .zip(out.shape())
                            .all(|(a, b)| kiln_tir::structural_equal(a, b))
                };
                let partial = r >= 2
                    && t.op()
                        .name()
                        .ends_with(crate::nn::row_reduce::PARTIALS_SUFFIX)
                    && leading(r - 1);
                let leads = !partial && leading(r);
                if partial {
                    let ts = s.stage(&t);
                    ts.compute_at(&st, &axes[r - 2])?;
                    super::vectorize_lane_partials(&ts)?;
                } else if leads && r == 0 {
                    // Computed once, at the root.
                } else if let Some(at) = if leads { axes.get(r - 1) } else { axes.last() } {
                    innermost |= !leads;
                    s.stage(&t).compute_at(&st, at)?;
                }
            } else {
                s.stage(&t).compute_inline()?;
            }
            todo.extend(op.input_tensors());
        }
        // The last axis in vectors of the target's lanes (a tail when they do not divide
        // it), the outermost in parallel.
        let lanes = cpu.lanes(out.dtype());
        match axes.as_slice() {
            [] => {}
            [only] => st.parallel(only)?,
            [outer, .., last] => {
                st.parallel(outer)?;
                if !innermost && lanes > 1 {
                    let (_, inner) = st.split(last, lanes)?;
                    st.vectorize(&inner)?;
                }
            }
        }
    }
    // The computes feeding extern operations, each scheduled as an output of its own.
    for e in externs {
        for t in e.op().input_tensors() {
            if t.op().as_compute().is_some() && t.ndim() > 0 {
                schedule_run_time(s, &t, cpu)?;
            }
        }
    }
    Ok(())
}

/// The one reduction of `out`'s compute (through elementwise stages) when its result has
/// `out`'s shape (or a wider last axis), rank 2 or more, and nothing before it reduces: a
/// product.
fn product_of(out: &Tensor) -> Option<Tensor> {
    let mut found: Vec<Tensor> = Vec::new();
    let mut todo = vec![out.clone()];
    while let Some(t) = todo.pop() {
        let Some(c) = t.op().as_compute() else {
            continue;
        };
        if c.reduce_axis.is_empty() {
            todo.extend(t.op().input_tensors());
        } else if !found.iter().any(|f| f.op().same_as(t.op())) {
            found.push(t);
        }
    }
    let [r] = found.as_slice() else {
        return None;
    };
    // The same shape, or wider along the last axis (computed in whole vectors, then cut).
    let same_shape = r.ndim() == out.ndim()
        && r.shape()
            .iter()
            .zip(out.shape())
            .take(out.ndim().saturating_sub(1))
            .all(|(a, b)| kiln_tir::structural_equal(a, b));
    let last_is_one = out.shape().last().is_some_and(|d| d.as_int() == Some(1));
    let before_reduces = reduces_before(r);
    (same_shape && r.ndim() >= 2 && !last_is_one && !before_reduces).then(|| r.clone())
}

/// Whether a reduction computes any input of `t` (through other computes).
fn reduces_before(t: &Tensor) -> bool {
    let mut todo = t.op().input_tensors();
    while let Some(u) = todo.pop() {
        match u.op().as_compute() {
            Some(c) if !c.reduce_axis.is_empty() => return true,
            Some(_) => todo.extend(u.op().input_tensors()),
            None => {}
        }
    }
    false
}

/// The axis of `r` (not the last) whose tile of rows reuses a vector along the last axis: the
/// innermost one that some read along the last axis does not use (a matrix product's rows,
/// a convolution's output channels), if any.
fn row_axis(r: &Tensor) -> Option<usize> {
    let c = r.op().as_compute()?;
    let axes: Vec<Var> = c.axis.iter().map(|iv| iv.var().clone()).collect();
    let last = axes.last()?.clone();
    let mut reads: Vec<Vec<kiln_tir::PrimExpr>> = Vec::new();
    for b in c.body.iter() {
        post_order_visit_expr(b, |e| {
            if let ExprKind::BufferLoad { indices, .. } = e.kind() {
                reads.push(indices.to_vec());
            }
        });
    }
    let uses = |idx: &[kiln_tir::PrimExpr], v: &Var| idx.iter().any(|e| uses_var(e, v));
    // Axes of one iteration tile nothing.
    let single = |j: usize| {
        c.axis[j]
            .dom()
            .is_some_and(|d| d.extent().as_int() == Some(1))
    };
    (0..axes.len() - 1).rev().find(|&j| {
        !single(j)
            && reads
                .iter()
                .any(|idx| uses(idx, &last) && !uses(idx, &axes[j]))
    })
}

/// Tiles the product `r` computed into `out`: the last axis in vectors of the target's lanes
/// (a split that does not divide a run-time extent leaves a tail, which LoopPartition runs
/// apart from the main loop), a row axis ([`row_axis`]) in tiles of as many vectors as the
/// target has accumulators to spare, the reduction accumulated per tile in a local cache (the
/// reduction loops outside the tile's rows and vector); the outermost loop that is not of one
/// iteration in parallel. Stages before the product that are not reductions are inlined.
fn schedule_product(
    s: &Schedule,
    out: &Tensor,
    r: &Tensor,
    cpu: &CpuDesc,
    externs: &mut Vec<Tensor>,
) -> Result<()> {
    let lanes = cpu.lanes(out.dtype()).max(1);
    // Everything but the product and the output inlined (epilogues), except a convolution's
    // padding, computed first into a buffer of its own: inlined, every load of the product's
    // inner loop would test the borders.
    let mut todo: Vec<Tensor> = out.op().input_tensors();
    let mut seen: Vec<Operation> = Vec::new();
    let mut padded: Vec<Tensor> = Vec::new();
    while let Some(t) = todo.pop() {
        let op = t.op().clone();
        if seen.iter().any(|o| o.same_as(&op)) {
            continue;
        }
        seen.push(op.clone());
        if op.as_compute().is_none() {
            externs.push(t);
            continue;
        }
        if op.name() == crate::nn::pad::PAD_STAGE {
            padded.push(t.clone());
        } else if !op.same_as(r.op()) {
            s.stage(&t).compute_inline()?;
        }
        todo.extend(op.input_tensors());
    }
    for p in &padded {
        let st = s.stage(p);
        let axes: Vec<IterVar> = p.op().as_compute().expect("a compute").axis.to_vec();
        let (_, inner) = st.split(&axes[axes.len() - 1], lanes)?;
        st.vectorize(&inner)?;
        st.parallel(&axes[0])?;
    }
    let rows_at = row_axis(r);
    let (main, cl) = if out.op().same_as(r.op()) {
        let cl = s.cache_write(out, "local")?;
        (s.stage(out), cl)
    } else {
        (s.stage(out), r.clone())
    };
    let axes: Vec<IterVar> = out.op().as_compute().expect("a compute").axis.to_vec();
    let nd = axes.len();
    let (no, ni) = main.split(&axes[nd - 1], lanes)?;
    let rows = (cpu.accumulators() / 2).clamp(1, 8);
    let mut order: Vec<IterVar> = (0..nd - 1)
        .filter(|&j| Some(j) != rows_at)
        .map(|j| axes[j].clone())
        .collect();
    let tile = match rows_at {
        Some(j) => {
            let (mo, mi) = main.split(&axes[j], rows)?;
            order.extend([mo, no.clone(), mi.clone()]);
            Some(mi)
        }
        None => {
            order.push(no.clone());
            None
        }
    };
    order.push(ni.clone());
    main.reorder(&order)?;
    main.vectorize(&ni)?;
    if let Some(outer) = order.iter().find(|iv| {
        iv.dom()
            .is_none_or(|d| d.extent().as_int().is_none_or(|e| e > 1))
    }) {
        main.parallel(outer)?;
    }
    // The tile's accumulators: computed at the column vector, reduction loops outermost.
    let cs = s.stage(&cl);
    cs.compute_at(&main, &no)?;
    let cop = cl.op().clone();
    let cc = cop.as_compute().expect("a compute");
    let caxes: Vec<IterVar> = cc.axis.to_vec();
    let mut corder: Vec<IterVar> = (0..nd - 1)
        .filter(|&j| Some(j) != rows_at)
        .map(|j| caxes[j].clone())
        .collect();
    corder.extend(cc.reduce_axis.iter().cloned());
    if let Some(j) = rows_at {
        corder.push(caxes[j].clone());
    }
    corder.push(caxes[nd - 1].clone());
    cs.reorder(&corder)?;
    cs.vectorize(&caxes[nd - 1])?;
    if let (Some(j), Some(_)) = (rows_at, tile) {
        cs.unroll(&caxes[j])?;
    }
    Ok(())
}
