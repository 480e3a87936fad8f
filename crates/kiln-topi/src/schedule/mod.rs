//! Schedules for the operators of [`crate::nn`] (and any injective/reduction op): x86 schedules
//! ([`x86`]), the generic fallback ([`generic`]) and thread-bound schedules for GPU targets
//! ([`gpu`]); each graph operator names its x86 schedule
//! in its definition (`kiln_graph::op`).
//!
//! Every schedule function has the shape `fn(&Schedule, &Tensor) -> Result<()>`: it takes a
//! schedule created over the output's operation and the output tensor, finds the stages it
//! knows by their tags (walking the output's producers), and applies its primitives. The
//! output may be the operator itself or an injective epilogue reading it (a fused bias add or
//! activation): injective producers are inlined and the heavy operator is computed at the
//! epilogue's tile.

pub mod generic;
pub mod gpu;
pub mod run_time;
pub mod x86;

pub use generic::{schedule_generic, schedule_injective, schedule_reduce_stages};
pub use run_time::schedule_run_time;

use kiln_ffi::Result;
use kiln_te::{IterVar, OpKind, Operation, Schedule, Stage, Tensor};
use kiln_tir::CpuDesc;

/// A schedule function: applies primitives to `schedule` for the output `out`, tiled for the
/// CPU described by the third argument.
pub type ScheduleFn = fn(&Schedule, &Tensor, &CpuDesc) -> Result<()>;

/// Whether `op` is a compute without reduction axes.
pub fn is_injective_op(op: &Operation) -> bool {
    matches!(op.kind(), OpKind::Compute(c) if c.reduce_axis.is_empty())
}

/// The operations `out` depends on (itself first), breadth first, each once.
pub fn producers(out: &Tensor) -> Vec<Operation> {
    let mut seen: Vec<Operation> = vec![out.op().clone()];
    let mut i = 0;
    while i < seen.len() {
        for t in seen[i].input_tensors() {
            if !seen.iter().any(|o| o.same_as(t.op())) {
                seen.push(t.op().clone());
            }
        }
        i += 1;
    }
    seen
}

/// The first operation reachable from `out` (itself included) whose tag is one of `tags`.
pub fn find_tagged(out: &Tensor, tags: &[&str]) -> Option<Operation> {
    producers(out)
        .into_iter()
        .find(|op| tags.contains(&op.tag()))
}

/// Inlines every injective compute that `out` depends on except `out` itself, `keep`, and
/// the inputs of extern operations (computed once, whole, before the statement reads them:
/// packed weights, for example).
pub fn inline_injective(s: &Schedule, out: &Tensor, keep: &[Operation]) -> Result<()> {
    let all = producers(out);
    let extern_inputs: Vec<Operation> = all
        .iter()
        .filter(|op| op.as_extern().is_some())
        .flat_map(|op| op.input_tensors())
        .map(|t| t.op().clone())
        .collect();
    for op in all.into_iter().skip(1) {
        let read_by_extern = extern_inputs.iter().any(|e| e.same_as(&op));
        if is_injective_op(&op) && !read_by_extern && !keep.iter().any(|k| k.same_as(&op)) {
            s.stage_op(&op).compute_inline()?;
        }
    }
    Ok(())
}

/// Inlines the injective producers of `out` except `op`'s padding stage (an input named
/// `pad_data`, or the copy of a strided 1x1 convolution's positions,
/// [`crate::nn::conv2d_packed::SUBSAMPLE_STAGE`]) and `keep`; that stage stays at root with its
/// `(n, c)` loops fused and
/// parallel, so the reads of `op` need no bounds tests, and its innermost axis vector code on
/// `cpu` (a block of channel-blocked data; rows in vectors of the CPU's lanes, the edges
/// read with masked loads, a shorter last piece scalar).
pub fn inline_all_but_padding(
    s: &Schedule,
    out: &Tensor,
    op: &Operation,
    keep: &[Operation],
    cpu: &CpuDesc,
) -> Result<()> {
    let kept_stages = [
        crate::nn::pad::PAD_STAGE,
        crate::nn::conv2d_packed::SUBSAMPLE_STAGE,
    ];
    let pad = op
        .input_tensors()
        .into_iter()
        .find(|t| kept_stages.contains(&t.op().name()));
    let mut kept: Vec<_> = keep.to_vec();
    kept.extend(pad.iter().map(|p| p.op().clone()));
    inline_injective(s, out, &kept)?;
    if let Some(p) = &pad {
        let ps = s.stage(p);
        if let Some(f) = fuse_all(&ps, &[p.axis(0), p.axis(1)])? {
            ps.parallel(&f)?;
        }
        let inner = p.axis(p.ndim() - 1);
        let (width, lanes) = (extent(p, p.ndim() - 1), cpu.lanes(p.dtype()));
        if p.ndim() == 5 && width > 1 {
            // Channel-blocked data: a block is one vector.
            ps.vectorize(&inner)?;
        } else if width >= lanes && lanes > 1 {
            let (_, vi) = ps.split(&inner, lanes)?;
            ps.vectorize(&vi)?;
        }
    }
    Ok(())
}

/// Schedules the lane partials of a row reduction (`crate::nn::row_reduce`, a stage whose
/// last data axis holds one vector): its reduction loops outside that axis, which runs as one
/// vector, so each step accumulates a whole vector of the row.
pub fn vectorize_lane_partials(stage: &Stage) -> Result<()> {
    let (data, red): (Vec<_>, Vec<_>) = stage
        .leaf_iter_vars()
        .into_iter()
        .partition(|iv| !iv.is_reduce());
    let Some((lane, rest)) = data.split_last() else {
        return Ok(());
    };
    let mut order = rest.to_vec();
    order.extend(red);
    order.push(lane.clone());
    stage.reorder(&order)?;
    stage.vectorize(lane)
}

/// Schedules the register tile of a product accumulated in a local cache `stage` whose data
/// axes are `(outer, rows, columns)`: the reductions outside the rows, rows unrolled, the
/// columns split into unrolled vectors of `lanes`, each one vector.
pub fn register_tile_rows_by_vectors(stage: &Stage, lanes: i64) -> Result<()> {
    let leaf = stage.leaf_iter_vars();
    let (data, red): (Vec<_>, Vec<_>) = leaf.into_iter().partition(|iv| !iv.is_reduce());
    let (vo, vi) = stage.split(&data[2], lanes)?;
    let mut order = vec![data[0].clone()];
    order.extend(red);
    order.extend([data[1].clone(), vo.clone(), vi.clone()]);
    stage.reorder(&order)?;
    stage.unroll(&data[1])?;
    stage.unroll(&vo)?;
    stage.vectorize(&vi)
}

/// Fuses `ivs` (adjacent, outermost first) into one loop; `None` when empty.
pub fn fuse_all(stage: &Stage, ivs: &[IterVar]) -> Result<Option<IterVar>> {
    let mut it = ivs.iter();
    let Some(first) = it.next() else {
        return Ok(None);
    };
    let mut fused = first.clone();
    for iv in it {
        fused = stage.fuse(&fused, iv)?;
    }
    Ok(Some(fused))
}

/// The vector width for an innermost extent of elements `lanes` to a vector register: `lanes`
/// when it divides, the whole extent when at most `lanes`, else the largest power of two below
/// `lanes` that divides (1: do not vectorize). Never a guarded split.
pub fn vector_factor(extent: i64, lanes: i64) -> i64 {
    if extent % lanes == 0 {
        lanes
    } else if extent <= lanes {
        extent
    } else {
        let mut f = lanes / 2;
        while f >= 2 && extent % f != 0 {
            f /= 2;
        }
        f.max(1)
    }
}

/// The largest power of two up to `max` that divides `extent` (1 if none): how many rows or
/// channels an inner kernel unrolls.
pub fn unroll_factor(extent: i64, max: i64) -> i64 {
    let mut f = 1i64;
    while f * 2 <= max && extent % (f * 2) == 0 {
        f *= 2;
    }
    f
}

/// The largest of `candidates` (descending) that divides `extent` (1 if none).
pub fn dividing_factor(extent: i64, candidates: &[i64]) -> i64 {
    candidates
        .iter()
        .copied()
        .find(|f| extent % f == 0)
        .unwrap_or(1)
}

/// The constant extents of `op`'s reduction axes, in order (`None` where symbolic; empty for
/// other operations).
pub fn reduce_extents(op: &Operation) -> Vec<Option<i64>> {
    op.as_compute()
        .map(|c| {
            c.reduce_axis
                .iter()
                .map(|iv| iv.dom().and_then(|r| r.extent().as_int()))
                .collect()
        })
        .unwrap_or_default()
}

/// The constant extents of `t` (symbolic ones as 0), for workload keys.
pub fn extents(t: &Tensor) -> Vec<i64> {
    (0..t.ndim()).map(|i| extent(t, i)).collect()
}

/// The tuning key of the workload `op` computes: `kind`, its output's and its inputs' shapes
/// ([`crate::tuning::workload_key`]).
pub fn op_key(kind: &str, op: &kiln_te::Operation) -> String {
    let mut shapes = vec![extents(&op.output(0))];
    shapes.extend(op.input_tensors().iter().map(extents));
    let views: Vec<&[i64]> = shapes.iter().map(Vec::as_slice).collect();
    crate::tuning::workload_key(kind, &views)
}

/// The constant extent of the `i`th axis of `t` (0 when symbolic).
pub fn extent(t: &Tensor, i: usize) -> i64 {
    t.shape()[i].as_int().unwrap_or(0)
}

/// Whether `a` and `b` have the same constant shape.
pub fn same_shape(a: &Tensor, b: &Tensor) -> bool {
    a.ndim() == b.ndim()
        && a.shape()
            .iter()
            .zip(b.shape())
            .all(|(x, y)| x.as_int().is_some() && x.as_int() == y.as_int())
}

/// Whether `product` has `out`'s shape but for more columns (its last axis): a product over
/// padded columns that `out` reads the first of ([`crate::nn::dense_packed`]).
pub fn covers(product: &Tensor, out: &Tensor) -> bool {
    let dims = |t: &Tensor| -> Option<Vec<i64>> { t.shape().iter().map(|d| d.as_int()).collect() };
    match (dims(product), dims(out)) {
        (Some(p), Some(o)) if p.len() == o.len() && !o.is_empty() => {
            let n = o.len() - 1;
            p[..n] == o[..n] && p[n] >= o[n]
        }
        _ => false,
    }
}
