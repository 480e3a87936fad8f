//! Scatter operators (ONNX `ScatterElements`, `ScatterND`): the output is `data` with the
//! points that `indices` name replaced by, or combined with, `updates`.
//!
//! Tensor expressions have no in-place writes, so each output point gathers what is scattered
//! to it: a reduction over the update positions that can reach it, keeping those whose index
//! names the point (one stage), then the combination with `data` (a second, injective stage).
//! The work is `|data|` times the number of update positions that can reach a point (the
//! extent of `axis` for `ScatterElements`, the number of index tuples for `ScatterND`), except
//! for `ScatterND` without a reduction, where the writing tuple is found once per slice of the
//! data's first `k` axes.
//! Duplicate indices: with a reduction they all combine with the data, as ONNX says; without
//! one, the last in row-major order wins (as onnxruntime does; ONNX leaves it undefined).

use super::take::wrap_index;
use super::util::{compute_tagged, constant, normalize_axis, var_exprs};
use crate::tag;
use kiln_ffi::{DataType, Error, Result};
use kiln_te::{comm_reduce, reduce_axis_n, IterVar, Tensor};
use kiln_tir::{cast, select, DataTypeExt, PrimExpr};

/// How scattered values combine with the data and with each other (ONNX's `reduction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduction {
    /// The update replaces the data.
    None,
    /// Sum.
    Add,
    /// Product.
    Mul,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

impl ScatterReduction {
    /// The reduction ONNX's `reduction` attribute names (`none`, `add`, `mul`, `max`, `min`).
    ///
    /// # Errors
    /// A `ValueError` naming the attribute for any other name.
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "none" => Self::None,
            "add" => Self::Add,
            "mul" => Self::Mul,
            "max" => Self::Max,
            "min" => Self::Min,
            _ => {
                return Err(Error::value_error(format!(
                    "attribute `reduction` must be one of none, add, mul, max, min; got `{name}`"
                )))
            }
        })
    }

    /// `a` combined with `b` (`b` for `None`).
    pub fn combine(self, a: PrimExpr, b: PrimExpr) -> PrimExpr {
        match self {
            Self::None => b,
            Self::Add => a + b,
            Self::Mul => a * b,
            Self::Max => kiln_tir::max(a, b),
            Self::Min => kiln_tir::min(a, b),
        }
    }

    /// The neutral element of [`combine`](Self::combine) in type `t`.
    fn identity(self, t: DataType) -> PrimExpr {
        match (self, t.is_floating()) {
            (Self::Mul, _) => constant(t, 1.0),
            (Self::Max, true) => constant(t, f64::NEG_INFINITY),
            (Self::Min, true) => constant(t, f64::INFINITY),
            (Self::Max, false) => kiln_te::min_value(t),
            (Self::Min, false) => kiln_te::max_value(t),
            _ => constant(t, 0.0),
        }
    }
}

/// Output point `p` (first argument) and update position `r` (second) to a value.
type PointFn<'a> = &'a dyn Fn(&[PrimExpr], &[PrimExpr]) -> PrimExpr;

/// The scatter of updates at the positions of `extents` into `data`: position `r` writes
/// `value(p, r)` to the output point `p` when `hit(p, r)`, which reads only the first `key`
/// coordinates of `p` (so that, without a reduction, which position writes is found once per
/// slice of the remaining axes).
fn scatter(
    data: &Tensor,
    reduction: ScatterReduction,
    name: &str,
    extents: &[PrimExpr],
    key: usize,
    hit: PointFn<'_>,
    value: PointFn<'_>,
) -> Result<Tensor> {
    let shape = data.shape().to_vec();
    let axes: Vec<IterVar> = extents
        .iter()
        .enumerate()
        .map(|(k, e)| reduce_axis_n(e.clone(), &format!("u{k}")))
        .collect();
    let r: Vec<PrimExpr> = axes.iter().map(IterVar::expr).collect();
    let i64t = DataType::int(64);
    let gathered = if reduction == ScatterReduction::None {
        // The row-major number of the last position that writes the point, -1 if none.
        let mut linear = PrimExpr::const_int(i64t, 0);
        for (e, v) in extents.iter().zip(&r) {
            linear = linear * cast(i64t, e.clone()) + cast(i64t, v.clone());
        }
        let none = PrimExpr::const_int(i64t, -1);
        compute_tagged(
            &shape[..key],
            |p| {
                let hit = hit(&var_exprs(p), &r);
                if axes.is_empty() {
                    select(hit, linear, none)
                } else {
                    comm_reduce(|a, b| kiln_tir::max(a, b), none, linear, &axes, Some(hit))
                }
            },
            &format!("{name}_last"),
            tag::COMM_REDUCE_IDX,
        )?
    } else {
        compute_tagged(
            &shape,
            |p| {
                let p = var_exprs(p);
                let v = value(&p, &r);
                let id = reduction.identity(v.dtype());
                if axes.is_empty() {
                    select(hit(&p, &r), v, id)
                } else {
                    let f = |a: &PrimExpr, b: &PrimExpr| reduction.combine(a.clone(), b.clone());
                    comm_reduce(f, id, v, &axes, Some(hit(&p, &r)))
                }
            },
            &format!("{name}_acc"),
            tag::COMM_REDUCE,
        )?
    };
    compute_tagged(
        &shape,
        |p| {
            let p = var_exprs(p);
            let d = data.at(&p);
            let g = gathered.at(&p[..gathered.ndim()]);
            if reduction != ScatterReduction::None {
                return reduction.combine(d, g);
            }
            // Back from the row-major number to the position (clamped so that the read stays
            // in bounds where nothing is written).
            let last = kiln_tir::max(g.clone(), 0);
            let mut pos = vec![PrimExpr::const_int(i64t, 0); extents.len()];
            let mut stride = PrimExpr::const_int(i64t, 1);
            for k in (0..extents.len()).rev() {
                let e = cast(i64t, extents[k].clone());
                let q = kiln_tir::floordiv(last.clone(), stride.clone());
                pos[k] = cast(extents[k].dtype(), kiln_tir::floormod(q, e.clone()));
                stride = stride * e;
            }
            select(g.ge(0), value(&p, &pos), d)
        },
        name,
        tag::INJECTIVE,
    )
}

fn check(op: &str, data: &Tensor, indices: &Tensor, updates: &Tensor) -> Result<()> {
    if !indices.dtype().is_integer() {
        return Err(Error::type_error(format!(
            "{op}: indices `{}` have dtype {}, an integer type is needed",
            indices.name(),
            indices.dtype()
        )));
    }
    if updates.dtype() != data.dtype() {
        return Err(Error::type_error(format!(
            "{op}: updates have dtype {} but the data {}",
            updates.dtype(),
            data.dtype()
        )));
    }
    Ok(())
}

fn same_int(a: PrimExpr, b: PrimExpr) -> PrimExpr {
    let t = DataType::int(64);
    cast(t, a).equal(cast(t, b))
}

/// `data` with `updates[u]` scattered to `data[u with u[axis] = indices[u]]` for every
/// position `u` of `indices` (ONNX `ScatterElements`); `indices` and `updates` have one shape,
/// no larger than the data's on any axis. Negative indices count from the end.
///
/// # Errors
/// A `ValueError` for an axis out of range or shapes that do not fit; a `TypeError` for
/// non-integer indices or updates of another dtype.
pub fn scatter_elements(
    data: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
    axis: i64,
    reduction: ScatterReduction,
) -> Result<Tensor> {
    let op = "scatter_elements";
    check(op, data, indices, updates)?;
    let a = normalize_axis(axis, data.ndim(), op)?;
    let (ds, us) = (data.shape(), indices.shape());
    let fits = |d: usize| match (us[d].as_int(), ds[d].as_int()) {
        (Some(u), Some(n)) => Some(u <= n),
        _ => None,
    };
    if us.len() != ds.len() || updates.shape().len() != us.len() {
        return Err(Error::value_error(format!(
            "{op}: data, indices and updates must have one rank, got {}, {} and {}",
            ds.len(),
            us.len(),
            updates.shape().len()
        )));
    }
    if (0..ds.len()).any(|d| fits(d).is_none_or(|ok| !ok)) {
        return Err(Error::value_error(format!(
            "{op}: indices must have static extents no larger than the data's"
        )));
    }
    // The update position whose row reaches point `p` (axes where the updates are shorter
    // than the data are clamped; `hit` rejects those points).
    let source = |p: &[PrimExpr], r: &[PrimExpr]| -> Vec<PrimExpr> {
        (0..p.len())
            .map(|d| match d {
                _ if d == a => r[0].clone(),
                _ if us[d].as_int() == ds[d].as_int() => p[d].clone(),
                _ => kiln_tir::min(p[d].clone(), us[d].clone() - 1),
            })
            .collect()
    };
    let hit = |p: &[PrimExpr], r: &[PrimExpr]| {
        let u = source(p, r);
        let mut c = same_int(wrap_index(indices.at(&u), &ds[a]), p[a].clone());
        for d in (0..p.len()).filter(|&d| d != a && us[d].as_int() != ds[d].as_int()) {
            c = c.logical_and(p[d].lt(us[d].clone()));
        }
        c
    };
    let value = |p: &[PrimExpr], r: &[PrimExpr]| updates.at(&source(p, r));
    let key = ds.len();
    scatter(data, reduction, op, &[us[a].clone()], key, &hit, &value)
}

/// `data` with `updates[m]` scattered to the slice `data[indices[m]]` for every index tuple
/// `m` of `indices` (ONNX `ScatterND`): the last axis of `indices` (static length `k`) holds
/// coordinates into the first `k` axes of the data, and `updates` has shape
/// `indices.shape[..-1] ++ data.shape[k..]`. Negative coordinates count from the end.
///
/// # Errors
/// A `ValueError` for shapes that do not fit; a `TypeError` for non-integer indices or
/// updates of another dtype.
pub fn scatter_nd(
    data: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
    reduction: ScatterReduction,
) -> Result<Tensor> {
    let op = "scatter_nd";
    check(op, data, indices, updates)?;
    let q = indices.ndim();
    let k = match indices.shape().last().and_then(PrimExpr::as_int) {
        Some(k) if k as usize <= data.ndim() => k as usize,
        _ => {
            return Err(Error::value_error(format!(
                "{op}: the last axis of the indices must be static and at most the data's rank {}",
                data.ndim()
            )))
        }
    };
    if updates.ndim() != q - 1 + data.ndim() - k {
        return Err(Error::value_error(format!(
            "{op}: updates of rank {} do not fit indices of rank {q} and data of rank {}",
            updates.ndim(),
            data.ndim()
        )));
    }
    let ds = data.shape();
    let hit = |p: &[PrimExpr], r: &[PrimExpr]| {
        let mut c = PrimExpr::bool(true);
        for j in 0..k {
            let mut at = r.to_vec();
            at.push(PrimExpr::const_int(
                indices.shape()[q - 1].dtype(),
                j as i64,
            ));
            c = c.logical_and(same_int(wrap_index(indices.at(&at), &ds[j]), p[j].clone()));
        }
        c
    };
    let value = |p: &[PrimExpr], r: &[PrimExpr]| {
        let mut at = r.to_vec();
        at.extend(p[k..].iter().cloned());
        updates.at(&at)
    };
    let extents = &indices.shape()[..q - 1];
    scatter(data, reduction, op, extents, k, &hit, &value)
}
