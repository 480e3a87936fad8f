//! x86 schedules of softmax, log-softmax and layer norm: the row statistics computed at the
//! output's row, rows in parallel, the row's elementwise work in vectors. A matrix product
//! fused before a softmax (attention scores, `FuseOps`) is computed a block of rows at a time
//! in the parallel loop, just before those rows' statistics read it from L1: an SVTR-style
//! recognizer's two [2, 640, 640] score products and softmaxes took 1.2 ms instead of 1.45
//! on an Intel Xeon, the recognizer 3.39 ms instead of 3.74.

use crate::nn::softmax;
use crate::schedule::{
    covers, extent, find_tagged, fuse_all, generic, inline_injective, is_injective_op, producers,
    same_shape,
};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{Schedule, Tensor};
use kiln_tir::visitor::{post_order_visit_expr, uses_var};
use kiln_tir::{CpuDesc, ExprKind};

/// Rows of at least this many bytes, and at most a quarter of the L1 data cache, prefetch the
/// next row's inputs (`Stage::prefetch`): the statistics of a row read it first and wait on
/// memory for it, the hardware prefetcher having stopped while the previous row computed. An
/// SVTR-style recognizer's attention softmaxes over [2, 640, 640] (rows of 2.5 KiB from L3)
/// took 16% less time on an Intel Xeon; its classifier's rows of 6625 (26 KiB) 15% more (the
/// next row pushed the current one out of L1), hence the upper bound.
pub const ROW_PREFETCH_BYTES: i64 = 1024;

/// Fuses and parallelizes the output loops outside the reduced trailing dimensions and
/// computes every reduction stage feeding `out` there; with `trailing == false` (reduced axes
/// not last) the reductions stay at root, each parallel on its first loop.
fn rows_with_stats(
    s: &Schedule,
    out: &Tensor,
    kept: usize,
    trailing: bool,
    cpu: &CpuDesc,
) -> Result<()> {
    let keep: Vec<_> = producers(out)
        .into_iter()
        .filter(|op| op.name() == softmax::EXP_STAGE)
        .collect();
    inline_injective(s, out, &keep)?;
    // A matrix product feeding the rows (attention scores fused with their softmax):
    // computed a block of rows at a time, just before those rows' statistics.
    let product = if trailing && kept > 0 {
        find_tagged(out, &[tag::DENSE, tag::MATMUL, tag::BATCH_MATMUL])
            .map(|p| p.output(0))
            .filter(|p| covers(p, out))
    } else {
        None
    };
    let mut stats: Vec<_> = producers(out)
        .into_iter()
        .skip(1)
        .filter(|op| {
            (!is_injective_op(op) || keep.iter().any(|k| k.same_as(op)))
                && matches!(op.kind(), kiln_te::OpKind::Compute(_))
                && !product.as_ref().is_some_and(|p| p.op().same_as(op))
        })
        .map(|op| op.output(0))
        .collect();
    stats.reverse();
    let st = s.stage(out);
    if trailing && kept > 0 {
        let mut axes: Vec<_> = (0..kept).map(|i| out.axis(i)).collect();
        let mut block = None;
        if let Some(p) = &product {
            match product_block(p, cpu).filter(|_| columns_contiguous(p)) {
                Some((mr, cols)) => {
                    let rows = axes.pop().expect("a row axis");
                    let (ro, ri) = st.split(&rows, mr)?;
                    axes.push(ro);
                    block = Some((ri, cols));
                }
                // Tiles that do not divide the product: the matrix kernel's schedule, the
                // whole product first.
                None => super::dense::schedule_dense(s, p, cpu)?,
            }
        }
        let outer = fuse_all(&st, &axes)?.expect("kept loops");
        st.parallel(&outer)?;
        let fused = match (&block, &product) {
            (Some((ri, cols)), Some(p)) => {
                schedule_product_block(s, p, &st, &outer, *cols, cpu)?;
                ri.clone()
            }
            _ => outer.clone(),
        };
        // Each row's statistics wait on its first read; the next row's inputs are asked for
        // while this one computes (an SVTR-style recognizer's [2, 640, 640] softmaxes: see
        // ROW_PREFETCH).
        let row_bytes = extent(out, out.ndim() - 1) * out.dtype().bytes() as i64;
        if row_bytes >= ROW_PREFETCH_BYTES && row_bytes <= cpu.caches.l1d as i64 / 4 {
            for p in producers(out) {
                let t = p.output(0);
                if matches!(p.kind(), kiln_te::OpKind::Placeholder(_)) && same_shape(&t, out) {
                    st.prefetch(&t, &fused, 1)?;
                }
            }
        }
        for t in &stats {
            s.stage(t).compute_at(&st, &fused)?;
            // A row's kept elementwise stage (softmax's exponentials) lives on the stack up to
            // kiln_tir's local limit: in the workspace, every row allocated and freed it
            // (softmax rows of 640 took 10% more time on an Intel Xeon). The statistics are
            // small enough for the stack anyway.
            if keep.iter().any(|k| k.same_as(t.op())) {
                s.stage(t).set_scope("local")?;
            }
            // Lane partials of a row reduction (`nn::softmax::softmax_in_lanes`): the lanes
            // one vector, accumulated over the row's vectors.
            if t.op()
                .name()
                .ends_with(crate::nn::row_reduce::PARTIALS_SUFFIX)
            {
                crate::schedule::vectorize_lane_partials(&s.stage(t))?;
            }
        }
        // Rows in vectors (a shorter last vector is peeled off by LoopPartition): the output
        // and the kept elementwise stages (softmax's exponentials).
        let lanes = cpu.lanes(out.dtype());
        let rows = keep.iter().map(|k| k.output(0)).chain([out.clone()]);
        for t in rows {
            let n = t.ndim();
            if n > kept && lanes > 1 && extent(&t, n - 1) >= lanes {
                let stage = s.stage(&t);
                let inner: Vec<_> = (kept..n).map(|i| t.axis(i)).collect();
                let last = fuse_all(&stage, &inner)?.expect("row loops");
                let (_, vi) = stage.split(&last, lanes)?;
                stage.vectorize(&vi)?;
            }
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

/// The block of a product computed inside a softmax: `(rows, columns)` of its register tile,
/// the matrix kernel's ([`super::dense::matrix_tile`]) for two vectors of columns (one when
/// the row is shorter than two), or as many rows down to half of those as divide the
/// product's. `None` when the columns are not whole vectors or no such row count divides the
/// rows: partial tiles would take guarded scalar code.
fn product_block(p: &Tensor, cpu: &CpuDesc) -> Option<(i64, i64)> {
    let nd = p.ndim();
    let (m, n) = (extent(p, nd - 2), extent(p, nd - 1));
    let lanes = cpu.lanes(p.dtype());
    if n % lanes != 0 {
        return None;
    }
    let vectors = if n % (2 * lanes) == 0 { 2 } else { 1 };
    let (rows, _) = super::dense::matrix_tile(m, 1, vectors, cpu);
    let rows = ((rows + 1) / 2..=rows).rev().find(|r| m % r == 0)?;
    Some((rows, vectors * lanes))
}

/// Whether every read of product `p` that depends on its last (column) axis reads along it
/// (its last index is that axis): a vector of columns is then one load, where a right-hand
/// matrix stored transposed (`[N, K]`) would take a gather per vector.
fn columns_contiguous(p: &Tensor) -> bool {
    let Some(c) = p.op().as_compute() else {
        return false;
    };
    let Some(j) = c.axis.iter().last().map(|iv| iv.var().clone()) else {
        return false;
    };
    let mut along = true;
    for b in c.body.iter() {
        post_order_visit_expr(b, |e| {
            if let ExprKind::BufferLoad { indices, .. } = e.kind() {
                let reads_j = indices.iter().any(|i| uses_var(i, &j));
                if reads_j && indices.last().and_then(|i| i.as_var()).as_ref() != Some(&j) {
                    along = false;
                }
            }
        });
    }
    along
}

/// Schedules product `p` at the softmax's row-block loop `at` of stage `st`: its block of
/// rows (on the stack, in L1 for rows of a few KiB) in column tiles of `cols`, each a
/// register tile of the block's rows by `cols / lanes` vectors accumulated over the whole
/// reduction, rows and vectors unrolled.
fn schedule_product_block(
    s: &Schedule,
    p: &Tensor,
    st: &kiln_te::Stage,
    at: &kiln_te::IterVar,
    cols: i64,
    cpu: &CpuDesc,
) -> Result<()> {
    let ps = s.stage(p);
    ps.compute_at(st, at)?;
    ps.set_scope("local")?;
    let (data, red): (Vec<_>, Vec<_>) = ps
        .leaf_iter_vars()
        .into_iter()
        .partition(|iv| !iv.is_reduce());
    let nd = data.len();
    let lanes = cpu.lanes(p.dtype());
    let (jo, ji) = ps.split(&data[nd - 1], cols)?;
    let (vo, vi) = ps.split(&ji, lanes)?;
    let mut order = data[..nd - 2].to_vec();
    order.push(jo);
    order.extend(red);
    order.extend([data[nd - 2].clone(), vo.clone(), vi.clone()]);
    ps.reorder(&order)?;
    ps.unroll(&data[nd - 2])?;
    ps.unroll(&vo)?;
    ps.vectorize(&vi)
}

/// Softmax / log-softmax ([`tag::SOFTMAX_OUTPUT`]) along `axis` (non-negative).
pub fn schedule_softmax_axis(s: &Schedule, out: &Tensor, axis: usize, cpu: &CpuDesc) -> Result<()> {
    let n = out.ndim();
    rows_with_stats(s, out, axis, axis + 1 == n, cpu)
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
    schedule_softmax_axis(s, out, axis, cpu)
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
    rows_with_stats(s, out, kept, trailing, cpu)
}
