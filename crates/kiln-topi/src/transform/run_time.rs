//! Operators whose result's extents are known only at run time: the kernel learns them from
//! the result tensor it is given (size variables bound when it is called), and reads the
//! values that place its elements (a slice's begin and step, a range's start and delta) from
//! small tensors computed by the caller's shape function.

use crate::tag;
use crate::transform::util::{compute_tagged, constant};
use kiln_ffi::{DataType, Error, Result};
use kiln_te::Tensor;
use kiln_tir::{cast, select, PrimExpr, Var};

/// `rank` extents known at run time (size variables `o0`, `o1`...), bound from the result
/// tensor a kernel is called with.
pub fn run_time_dims(rank: usize) -> Vec<PrimExpr> {
    (0..rank)
        .map(|j| Var::size_var(&format!("o{j}"), DataType::int(32)).to_expr())
        .collect()
}

/// `x`'s extents, with those along `axes` known at run time instead (size variables `o<j>`,
/// bound from the result tensor a kernel is called with).
fn run_time_dims_on(x: &Tensor, axes: &[usize]) -> Vec<PrimExpr> {
    x.shape()
        .iter()
        .enumerate()
        .map(|(j, d)| {
            if axes.contains(&j) {
                Var::size_var(&format!("o{j}"), DataType::int(32)).to_expr()
            } else {
                d.clone()
            }
        })
        .collect()
}

/// A tensor of `rank` run-time extents filled with `value` (ONNX ConstantOfShape).
///
/// # Errors
/// As `compute`.
pub fn full_run_time(rank: usize, value: f64, dtype: DataType) -> Result<Tensor> {
    compute_tagged(
        &run_time_dims(rank),
        |_| constant(dtype, value),
        "full",
        tag::ELEMWISE,
    )
}

/// `x` broadcast to a result of `rank` run-time extents (ONNX Expand with a run-time shape):
/// `x`'s axes align on the right; one of extent 1 reads index 0 (a run-time extent is tested
/// per read). The caller's shape computation checks that the result's extents fit `x`.
///
/// # Errors
/// A `ValueError` when `rank` is below `x`'s rank.
pub fn broadcast_run_time(x: &Tensor, rank: usize) -> Result<Tensor> {
    let off = rank.checked_sub(x.ndim()).ok_or_else(|| {
        Error::value_error(format!(
            "broadcast: a rank-{} input does not broadcast to rank {rank}",
            x.ndim()
        ))
    })?;
    compute_tagged(
        &run_time_dims(rank),
        |i| {
            let idx: Vec<PrimExpr> = x
                .shape()
                .iter()
                .enumerate()
                .map(|(k, d)| {
                    let v = i[off + k].to_expr();
                    match d.as_int() {
                        Some(1) => PrimExpr::i32(0),
                        Some(_) => v,
                        None => kiln_tir::select(d.equal(1), PrimExpr::i32(0), v),
                    }
                })
                .collect();
            x.at(&idx)
        },
        "broadcast_to",
        tag::INJECTIVE,
    )
}

/// `x` centred in a result whose extents along `axes` are known at run time (ONNX
/// CenterCropPad with a run-time shape): along each of them the result crops `x` or pads it
/// with zeros, the odd element of a difference going after; the other axes keep `x`'s.
///
/// # Errors
/// A `ValueError` for an axis out of range.
pub fn center_crop_pad_run_time(x: &Tensor, axes: &[usize]) -> Result<Tensor> {
    if let Some(a) = axes.iter().find(|&&a| a >= x.ndim()) {
        return Err(Error::value_error(format!(
            "center crop pad: axis {a} of a rank-{} input",
            x.ndim()
        )));
    }
    let dims = run_time_dims_on(x, axes);
    let out = dims.clone();
    let zero = constant(x.dtype(), 0.0);
    compute_tagged(
        &dims,
        |i| {
            let mut inside = Vec::new();
            let idx: Vec<PrimExpr> = i
                .iter()
                .enumerate()
                .map(|(j, v)| {
                    if !axes.contains(&j) {
                        return v.to_expr();
                    }
                    // The elements before: floor(d / 2) of a pad (d >= 0), -floor(-d / 2) of
                    // a crop.
                    let d = out[j].clone() - x.shape()[j].clone();
                    let before = kiln_tir::select(
                        d.clone().ge(0),
                        kiln_tir::floordiv(d.clone(), 2),
                        PrimExpr::i32(0) - kiln_tir::floordiv(PrimExpr::i32(0) - d, 2),
                    );
                    let src = v.to_expr() - before;
                    inside.push(src.clone().ge(0).logical_and(src.lt(x.shape()[j].clone())));
                    let last = kiln_tir::max(x.shape()[j].clone() - 1, 0);
                    kiln_tir::min(kiln_tir::max(src, 0), last)
                })
                .collect();
            let ok = inside
                .into_iter()
                .reduce(|a, b| a.logical_and(b))
                .unwrap_or_else(|| PrimExpr::bool(true));
            kiln_te::if_then_else(ok, x.at(&idx), zero.clone())
        },
        "center_crop_pad",
        tag::INJECTIVE,
    )
}

/// The axes a run-time pad widens: given at compile time, or a run-time int64 tensor (ONNX
/// Pad's `axes` input; negative values count from the end).
#[derive(Clone, Copy, Debug)]
pub enum PadAxes<'a> {
    /// These axes, in the order of the widths.
    Given(&'a [usize]),
    /// The axes held by this 1-D tensor, known at run time (every axis may be padded).
    RunTime(&'a Tensor),
}

/// `x` padded (or, by negative widths, cropped) along `axes` by widths known only at run time
/// (ONNX Pad with run-time pads): `pads` holds the widths before each axis of `axes`, then
/// those after (int64); `mode` is `constant` (`value`, a one-element tensor of `x`'s dtype),
/// `edge`, `reflect` or `wrap`. The result's extents along the padded axes are bound from the
/// result (every axis when the axes are known at run time: an axis no value names gets width
/// 0; the caller's shape computation checks that no axis is named twice).
///
/// # Errors
/// A `ValueError` for an unknown mode, an axis out of range or `pads` of another length.
pub fn pad_run_time(
    x: &Tensor,
    pads: &Tensor,
    value: &Tensor,
    axes: PadAxes<'_>,
    mode: &str,
) -> Result<Tensor> {
    if !["constant", "edge", "reflect", "wrap"].contains(&mode) {
        return Err(Error::value_error(format!("pad: unknown mode `{mode}`")));
    }
    let n_axes = match axes {
        PadAxes::Given(a) => Some(a.len() as i64),
        PadAxes::RunTime(t) if t.ndim() == 1 => t.shape()[0].as_int(),
        PadAxes::RunTime(_) => Some(-1),
    };
    let bad_axis = matches!(axes, PadAxes::Given(a) if a.iter().any(|&a| a >= x.ndim()));
    if bad_axis
        || n_axes.is_some_and(|n| n < 0)
        || pads.ndim() != 1
        || pads.shape()[0]
            .as_int()
            .zip(n_axes)
            .is_some_and(|(p, n)| p != 2 * n)
    {
        return Err(Error::value_error(format!(
            "pad: the axes of a rank-{} input need 2 widths each",
            x.ndim()
        )));
    }
    let i32t = DataType::int(32);
    let pad_at = |k: PrimExpr| cast(i32t, pads.at(&[k]));
    // The width before each axis (None: not padded).
    let before: Vec<Option<PrimExpr>> = match axes {
        PadAxes::Given(a) => (0..x.ndim())
            .map(|j| {
                a.iter()
                    .position(|&b| b == j)
                    .map(|k| pad_at(PrimExpr::i32(k as i64)))
            })
            .collect(),
        PadAxes::RunTime(t) => {
            let n = t.shape()[0].as_int().unwrap_or(0);
            let rank = x.ndim() as i64;
            (0..rank)
                .map(|j| {
                    let mut w = PrimExpr::i32(0);
                    for k in 0..n {
                        let a = cast(i32t, t.at(&[PrimExpr::i32(k)]));
                        let a = select(a.clone().lt(0), a.clone() + rank, a);
                        w = w + select(a.equal(j), pad_at(PrimExpr::i32(k)), PrimExpr::i32(0));
                    }
                    Some(w)
                })
                .collect()
        }
    };
    let padded: Vec<usize> = (0..x.ndim()).filter(|&j| before[j].is_some()).collect();
    let dims = run_time_dims_on(x, &padded);
    let fill = value.at(&vec![PrimExpr::i32(0); value.ndim()]);
    compute_tagged(
        &dims,
        |i| {
            let mut inside = Vec::new();
            let idx: Vec<PrimExpr> = i
                .iter()
                .enumerate()
                .map(|(j, v)| {
                    let Some(before) = before[j].clone() else {
                        return v.to_expr();
                    };
                    let n = x.shape()[j].clone();
                    let src = v.to_expr() - before;
                    let last = kiln_tir::max(n.clone() - 1, 0);
                    match mode {
                        "constant" => {
                            inside.push(src.clone().ge(0).logical_and(src.clone().lt(n)));
                            kiln_tir::min(kiln_tir::max(src, 0), last)
                        }
                        "edge" => kiln_tir::min(kiln_tir::max(src, 0), last),
                        "wrap" => kiln_tir::floormod(src, kiln_tir::max(n, 1)),
                        _ => {
                            // Reflect: a period of 2(n - 1), the second half mirrored.
                            let period = kiln_tir::max(last.clone() * 2, 1);
                            let m = kiln_tir::floormod(src, period.clone());
                            kiln_tir::min(m.clone(), period - m)
                        }
                    }
                })
                .collect();
            let v = x.at(&idx);
            match inside.into_iter().reduce(|a, b| a.logical_and(b)) {
                Some(ok) => kiln_te::if_then_else(ok, v, fill.clone()),
                None => v,
            }
        },
        "pad",
        tag::INJECTIVE,
    )
}

/// The sampling grid of the affine maps `theta` (`[N, r, r + 1]`, r = 2 or 3) over the
/// normalized coordinates of a result whose spatial extents are known at run time (ONNX
/// AffineGrid with a run-time size): `[N, (D,) H, W, r]`, each point `theta[n] (x, y[, z], 1)`,
/// `x` the coordinate along W (`(2i + 1) / n - 1`, or `-1 + 2i / (n - 1)` aligning corners,
/// 1 for one point).
///
/// # Errors
/// A `ValueError` when `theta` is not `[N, r, r + 1]` with r 2 or 3.
pub fn affine_grid_run_time(theta: &Tensor, align_corners: bool) -> Result<Tensor> {
    let r = theta.shape().get(1).and_then(|d| d.as_int()).unwrap_or(0);
    let cols = theta.shape().get(2).and_then(|d| d.as_int());
    if theta.ndim() != 3 || !(r == 2 || r == 3) || cols != Some(r + 1) {
        return Err(Error::value_error(
            "affine grid: theta must be [N, 2, 3] or [N, 3, 4]",
        ));
    }
    let r = r as usize;
    let mut dims = vec![theta.shape()[0].clone()];
    dims.extend(run_time_dims(r));
    dims.push(PrimExpr::i32(r as i64));
    let dt = theta.dtype();
    let spatial = dims.clone();
    compute_tagged(
        &dims,
        |i| {
            // Coordinate component k (x first) is along spatial axis r - 1 - k.
            let coord = |k: usize| {
                let a = r - k;
                let (v, n) = (cast(dt, i[a].to_expr()), cast(dt, spatial[a].clone()));
                let one = constant(dt, 1.0);
                if align_corners {
                    let span = kiln_tir::max(n.clone() - one.clone(), one.clone());
                    let c = constant(dt, -1.0) + constant(dt, 2.0) * v / span;
                    // A single point at 1, as onnxruntime puts it.
                    kiln_tir::select(n.equal(one.clone()), one, c)
                } else {
                    (constant(dt, 2.0) * v + one.clone()) / n - one
                }
            };
            let c = i[r + 1].to_expr();
            let n = i[0].to_expr();
            let mut acc = theta.at(&[n.clone(), c.clone(), PrimExpr::i32(r as i64)]);
            for k in 0..r {
                acc = acc + theta.at(&[n.clone(), c.clone(), PrimExpr::i32(k as i64)]) * coord(k);
            }
            acc
        },
        "affine_grid",
        tag::INJECTIVE,
    )
}

/// The coefficients `a_j` of ONNX's generalized cosine window operators
/// (`sum_j a_j cos(2 pi j n / N)`), by operator name.
pub fn cosine_window_coefficients(op: &str) -> Option<Vec<f64>> {
    let hamming = 25.0 / 46.0;
    Some(match op {
        "HannWindow" => vec![0.5, -0.5],
        "HammingWindow" => vec![hamming, -(1.0 - hamming)],
        "BlackmanWindow" => vec![0.42, -0.5, 0.08],
        _ => return None,
    })
}

/// The window `op` ([`cosine_window_coefficients`]) of a length known at run time, `N` the
/// length for a periodic window and one less for a symmetric one (a one-point symmetric
/// window is the coefficients' sum); computed in float64, returned as `dtype`.
///
/// # Errors
/// A `ValueError` for an unknown window.
pub fn cosine_window_run_time(op: &str, periodic: bool, dtype: DataType) -> Result<Tensor> {
    let coefs = cosine_window_coefficients(op)
        .ok_or_else(|| Error::value_error(format!("cosine window: unknown window `{op}`")))?;
    let f64t = DataType::float(64);
    let dims = run_time_dims(1);
    let len = cast(f64t, dims[0].clone());
    let n_1 = if periodic {
        len
    } else {
        len - constant(f64t, 1.0)
    };
    compute_tagged(
        &dims,
        |i| {
            let n = cast(f64t, i[0].to_expr());
            let mut v = constant(f64t, 0.0);
            for (j, a) in coefs.iter().enumerate() {
                let phase = constant(f64t, 2.0 * std::f64::consts::PI * j as f64) * n.clone()
                    / kiln_tir::max(n_1.clone(), constant(f64t, 1.0));
                let c = kiln_tir::select(
                    n_1.clone().equal(constant(f64t, 0.0)),
                    constant(f64t, 1.0),
                    kiln_tir::op::cos(phase),
                );
                v = v + constant(f64t, *a) * c;
            }
            cast(dtype, v)
        },
        "cosine_window",
        tag::INJECTIVE,
    )
}

/// `start + i * delta` for `i` in `[0, n)` with `n` known at run time; `start` and `delta`
/// are one-element tensors of the result's dtype (ONNX Range).
///
/// # Errors
/// A `ValueError` when `start` and `delta` differ in dtype.
pub fn range_run_time(start: &Tensor, delta: &Tensor) -> Result<Tensor> {
    let dtype = start.dtype();
    if delta.dtype() != dtype {
        return Err(Error::value_error(format!(
            "range: start is {dtype}, delta {}",
            delta.dtype()
        )));
    }
    let first = |t: &Tensor| t.at(&vec![PrimExpr::i32(0); t.ndim()]);
    compute_tagged(
        &run_time_dims(1),
        |i| first(start) + cast(dtype, i[0].to_expr()) * first(delta),
        "range",
        tag::INJECTIVE,
    )
}

/// `x[begin[j] + i_j * step[j]]` at each point `i` of a result of run-time extents (ONNX
/// Slice with run-time starts, ends, axes or steps): `begin` and `step` are int64 tensors of
/// one value per axis of `x`, computed (clamped) by the caller.
///
/// # Errors
/// A `ValueError` when `begin` or `step` is not a 1-D tensor of `x`'s rank.
pub fn strided_slice_run_time(x: &Tensor, begin: &Tensor, step: &Tensor) -> Result<Tensor> {
    let r = x.ndim() as i64;
    for (t, what) in [(begin, "begin"), (step, "step")] {
        if t.ndim() != 1 || t.shape()[0].as_int().is_some_and(|n| n != r) {
            return Err(Error::value_error(format!(
                "strided slice: {what} must hold one value per axis of the rank-{r} input"
            )));
        }
    }
    compute_tagged(
        &run_time_dims(x.ndim()),
        |i| {
            let idx: Vec<PrimExpr> = i
                .iter()
                .enumerate()
                .map(|(j, v)| {
                    let j = PrimExpr::i32(j as i64);
                    let at = begin.at(std::slice::from_ref(&j))
                        + cast(DataType::int(64), v.to_expr()) * step.at(&[j]);
                    cast(DataType::int(32), at)
                })
                .collect();
            x.at(&idx)
        },
        "strided_slice",
        tag::INJECTIVE,
    )
}

/// ONNX OneHot with a run-time depth: the result is `indices`' shape with the depth (a run-time
/// extent) inserted at `axis`; an element is `values[1]` where the index (negative ones count
/// from the depth) equals its place on that axis, else `values[0]`.
///
/// # Errors
/// A `ValueError` when `axis` is past the result's rank or `values` is not a 2-element 1-D
/// tensor.
pub fn one_hot_run_time(indices: &Tensor, values: &Tensor, axis: usize) -> Result<Tensor> {
    if axis > indices.ndim() || values.ndim() != 1 || values.shape()[0].as_int() != Some(2) {
        return Err(Error::value_error(format!(
            "one_hot: axis {axis} of a rank-{} result, values of shape {:?}",
            indices.ndim() + 1,
            values.shape()
        )));
    }
    let depth = Var::size_var("depth", DataType::int(32)).to_expr();
    let mut shape = indices.shape().to_vec();
    shape.insert(axis, depth.clone());
    let i64t = DataType::int(64);
    compute_tagged(
        &shape,
        |i| {
            let mut at: Vec<PrimExpr> = i.iter().map(Var::to_expr).collect();
            let k = cast(i64t, at.remove(axis));
            let ix = cast(i64t, indices.at(&at));
            let depth = cast(i64t, depth.clone());
            let ix = kiln_tir::select(
                ix.clone().lt(PrimExpr::const_int(i64t, 0)),
                ix.clone() + depth,
                ix,
            );
            kiln_tir::select(
                ix.equal(k),
                values.at(&[PrimExpr::i32(1)]),
                values.at(&[PrimExpr::i32(0)]),
            )
        },
        "one_hot",
        tag::INJECTIVE,
    )
}

/// ONNX Tile with run-time repeats: `x[i_j mod d_j]` at each point `i` of a result of
/// run-time extents (each a multiple of `x`'s).
///
/// # Errors
/// As `compute`.
pub fn tile_run_time(x: &Tensor) -> Result<Tensor> {
    compute_tagged(
        &run_time_dims(x.ndim()),
        |i| {
            let idx: Vec<PrimExpr> = i
                .iter()
                .zip(x.shape())
                .map(|(v, d)| kiln_tir::floormod(v.to_expr(), d.clone()))
                .collect();
            x.at(&idx)
        },
        "tile",
        tag::INJECTIVE,
    )
}
