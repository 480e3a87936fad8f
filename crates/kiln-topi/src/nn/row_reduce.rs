//! Reductions along a row's last axis in lane partials: the row's whole vectors reduce into
//! `lanes` interleaved partial results (element `j` into lane `j % lanes`), which schedules
//! accumulate as one vector per step, so a step reduces a whole vector (a scalar chain of adds
//! waits on each add's latency for every element); the partials, halved in vector operations
//! down to two, and the last `n % lanes` elements then reduce to one value. Long rows
//! accumulate several vectors of partials in turn (independent chains), folded to one vector
//! first. Softmax's maximum and sum, layer norm's mean and variance and global pools use it.

use super::compute_tagged;
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, IterVar, Tensor};
use kiln_tir::{PrimExpr, Var};

/// The suffix of the lane-partial stage's name (`{name}_lanes`), by which schedules find it
/// ([`crate::schedule::vectorize_lane_partials`]).
pub const PARTIALS_SUFFIX: &str = "_lanes";

/// A commutative reducer over reduction axes (`kiln_te::sum`, `kiln_te::max`).
pub type Combiner = fn(PrimExpr, &[IterVar]) -> PrimExpr;

/// The reduction `combine(f(rest, j))` over `j` in `0..n` for every index `rest` of shape
/// `reduced` (extents known at run time allowed), named `name` (tagged [`tag::COMM_REDUCE`]): when `lanes > 1` and the row holds
/// at least two vectors, through a partial stage `{name}_lanes` of shape `reduced + [lanes]`
/// (see the module docs); else directly. Rows of at least `2 * lanes * CHAINS` elements
/// accumulate [`CHAINS`] vectors of partials (`{name}_lanes`, `lanes * CHAINS` wide), folded
/// lane by lane into `{name}_fold_lanes` with the row's remaining whole vectors before the
/// final step, whose scalar part stays two partials (halved from `lanes`) and `n % lanes`
/// elements (partials of four vectors reduced directly by the final step were 1.19x slower
/// on softmax rows of 640: its scalar chain grew with them; folded, the two softmaxes of an
/// SVTR-style recognizer took 1.07x less time on an Intel Xeon).
pub fn reduce_row(
    reduced: &[PrimExpr],
    n: &PrimExpr,
    lanes: i64,
    f: &dyn Fn(&[Var], PrimExpr) -> PrimExpr,
    combine: Combiner,
    name: &str,
) -> Result<Tensor> {
    reduce_row_tagged(reduced, n, lanes, f, combine, name, tag::COMM_REDUCE)
}

/// [`reduce_row`] with the final stage tagged `final_tag` (the partials stay
/// [`tag::COMM_REDUCE`]), for operators whose schedules find their reduction by tag.
pub fn reduce_row_tagged(
    reduced: &[PrimExpr],
    n: &PrimExpr,
    lanes: i64,
    f: &dyn Fn(&[Var], PrimExpr) -> PrimExpr,
    combine: Combiner,
    name: &str,
    final_tag: &'static str,
) -> Result<Tensor> {
    let Some(n) = n.as_int() else {
        return reduce_run_time_row(reduced, n, lanes, f, combine, name, final_tag);
    };
    if lanes <= 1 || n < 2 * lanes {
        return reduce_directly(reduced, PrimExpr::i32(n), f, combine, name, final_tag);
    }
    // Whole vectors in the partials (in CHAINS interleaved vectors on long rows, folded to
    // one); the last `n % lanes` elements join the final step.
    let full = n / lanes;
    let part = if n >= 2 * lanes * CHAINS {
        let wide = lane_partials(
            reduced,
            PrimExpr::i32(n / (lanes * CHAINS)),
            lanes * CHAINS,
            f,
            combine,
            name,
        )?;
        fold_partials(reduced, &wide, n, lanes, f, combine, name)?
    } else {
        lane_partials(reduced, PrimExpr::i32(full), lanes, f, combine, name)?
    };
    let (part, parts) = halve_partials(reduced, part, lanes, combine, name)?;
    let r = reduce_axis_n(parts + n % lanes, "r");
    compute_tagged(
        reduced,
        |i| {
            let idx: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            partials_then_row(
                &r,
                parts,
                |p| part.at(&[idx.as_slice(), &[p]].concat()),
                |t| f(i, PrimExpr::i32(full * lanes) + t),
                combine,
            )
        },
        name,
        final_tag,
    )
}

/// The `lanes` partials of each row combined in halves (lane `l` with lane `l + h`, stages
/// `{name}_half{h}_lanes`, each one vector operation) down to two, so that the final step's
/// scalar chain holds two partials and the row's last elements instead of a vector's worth
/// (16 dependent maxima or additions a row, at 4 cycles each on AVX-512); `(part, lanes)`
/// unchanged when `lanes` is not a power of two above 2. Returns the partials and their count.
fn halve_partials(
    reduced: &[PrimExpr],
    mut part: Tensor,
    lanes: i64,
    combine: Combiner,
    name: &str,
) -> Result<(Tensor, i64)> {
    if lanes <= 2 || lanes & (lanes - 1) != 0 {
        return Ok((part, lanes));
    }
    let mut w = lanes;
    while w > 2 {
        let h = w / 2;
        let r = reduce_axis_n(2, "h");
        let prev = part.clone();
        part = compute_tagged(
            &with_lanes(reduced, h),
            |i| {
                let (row, l) = i.split_at(i.len() - 1);
                let mut idx: Vec<PrimExpr> = row.iter().map(|v| v.to_expr()).collect();
                idx.push(l[0].to_expr() + r.expr() * h);
                combine(prev.at(&idx), std::slice::from_ref(&r))
            },
            &format!("{name}_half{h}{PARTIALS_SUFFIX}"),
            tag::COMM_REDUCE,
        )?;
        w = h;
    }
    Ok((part, 2))
}

/// `combine` along the reduction axis `c` (extent `parts` plus some row elements) of
/// `part_at(c)` for its first `parts` steps and `row_at(c - parts)` after them: both reads
/// clamped into bounds, a select keeping one (no select when `c` holds only the parts).
fn partials_then_row(
    c: &IterVar,
    parts: i64,
    part_at: impl Fn(PrimExpr) -> PrimExpr,
    row_at: impl Fn(PrimExpr) -> PrimExpr,
    combine: Combiner,
) -> PrimExpr {
    let from_part = part_at(kiln_tir::min(c.expr(), parts - 1));
    let extent = c.dom().and_then(|d| d.extent().as_int());
    let x = if extent == Some(parts) {
        from_part
    } else {
        let from_row = row_at(kiln_tir::max(c.expr() - parts, 0));
        kiln_tir::op::if_then_else(c.expr().lt(parts), from_part, from_row)
    };
    combine(x, std::slice::from_ref(c))
}

/// The shape of `reduced` rows' `lanes` partials: `reduced + [lanes]`.
fn with_lanes(reduced: &[PrimExpr], lanes: i64) -> Vec<PrimExpr> {
    let mut shape = reduced.to_vec();
    shape.push(PrimExpr::i32(lanes));
    shape
}

/// The reduction of each row of `n` elements as one scalar chain (no lane partials), the
/// stage tagged `final_tag`.
fn reduce_directly(
    reduced: &[PrimExpr],
    n: PrimExpr,
    f: &dyn Fn(&[Var], PrimExpr) -> PrimExpr,
    combine: Combiner,
    name: &str,
    final_tag: &'static str,
) -> Result<Tensor> {
    let k = reduce_axis_n(n, "k");
    compute_tagged(
        reduced,
        |i| combine(f(i, k.expr()), std::slice::from_ref(&k)),
        name,
        final_tag,
    )
}

/// [`reduce_row`] over a row whose length `n` is known only at run time: the lane partials
/// over its whole vectors (none when it is shorter than one), then the partials and the last
/// `n % lanes` elements; scalar when `lanes` is 1.
fn reduce_run_time_row(
    reduced: &[PrimExpr],
    n: &PrimExpr,
    lanes: i64,
    f: &dyn Fn(&[Var], PrimExpr) -> PrimExpr,
    combine: Combiner,
    name: &str,
    final_tag: &'static str,
) -> Result<Tensor> {
    if lanes <= 1 {
        return reduce_directly(reduced, n.clone(), f, combine, name, final_tag);
    }
    let full = kiln_tir::floordiv(n.clone(), lanes);
    let part = lane_partials(reduced, full.clone(), lanes, f, combine, name)?;
    let r = reduce_axis_n(kiln_tir::floormod(n.clone(), lanes) + lanes, "r");
    compute_tagged(
        reduced,
        |i| {
            let mut idx: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            idx.push(kiln_tir::min(r.expr(), lanes - 1));
            let from_part = part.at(&idx);
            // The tail's index clamped into the row, so neither side reads outside it.
            let t = kiln_tir::max(r.expr() - lanes, 0);
            let last = kiln_tir::max(n.clone() - 1, 0);
            let at = kiln_tir::min(full.clone() * lanes + t, last);
            let v = kiln_te::if_then_else(r.expr().lt(lanes), from_part, f(i, at));
            combine(v, std::slice::from_ref(&r))
        },
        name,
        final_tag,
    )
}

/// How many vectors of lane partials a long row accumulates in turn: independent chains of
/// vector operations, so that a step does not wait on the previous step's latency (4 cycles
/// for a float32 add or maximum on current x86 cores, two issued a cycle).
pub const CHAINS: i64 = 4;

/// The `lanes` partials of rows of `n` elements from their partials `wide` in [`CHAINS`]
/// vectors (over the first `n / (lanes * CHAINS)` groups of vectors): the vectors combined,
/// with the row's remaining whole vectors, lane by lane (stage `{name}_fold_lanes`).
fn fold_partials(
    reduced: &[PrimExpr],
    wide: &Tensor,
    n: i64,
    lanes: i64,
    f: &dyn Fn(&[Var], PrimExpr) -> PrimExpr,
    combine: Combiner,
    name: &str,
) -> Result<Tensor> {
    let covered = n / (lanes * CHAINS) * lanes * CHAINS;
    let c = reduce_axis_n(CHAINS + (n - covered) / lanes, "c");
    compute_tagged(
        &with_lanes(reduced, lanes),
        |i| {
            let (row, l) = i.split_at(i.len() - 1);
            let l = l[0].to_expr();
            let idx: Vec<PrimExpr> = row.iter().map(|v| v.to_expr()).collect();
            partials_then_row(
                &c,
                CHAINS,
                |p| wide.at(&[idx.as_slice(), &[p * lanes + l.clone()]].concat()),
                |v| f(row, PrimExpr::i32(covered) + v * lanes + l.clone()),
                combine,
            )
        },
        &format!("{name}_fold{PARTIALS_SUFFIX}"),
        tag::COMM_REDUCE,
    )
}

/// The lane partials of `reduced` rows over their first `full` whole vectors (`full` known at
/// compile time or not): element `j` of a row goes to lane `j % lanes`.
fn lane_partials(
    reduced: &[PrimExpr],
    full: PrimExpr,
    lanes: i64,
    f: &dyn Fn(&[Var], PrimExpr) -> PrimExpr,
    combine: Combiner,
    name: &str,
) -> Result<Tensor> {
    let jo = reduce_axis_n(full, "jo");
    compute_tagged(
        &with_lanes(reduced, lanes),
        |i| {
            let (rest, l) = i.split_at(i.len() - 1);
            let j = jo.expr() * lanes + l[0].to_expr();
            combine(f(rest, j), std::slice::from_ref(&jo))
        },
        &format!("{name}{PARTIALS_SUFFIX}"),
        tag::COMM_REDUCE,
    )
}
