//! `pad` with constant, edge, reflect or wrap filling (ONNX `Pad`).

use super::util::{compute_tagged, const_shape, constant, index_dtype, shape_exprs, value_error};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::if_then_else;
use kiln_te::Tensor;
use kiln_tir::{floormod, PrimExpr, Var};

/// How padded points are filled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// This value (converted to the tensor's dtype).
    Constant(f64),
    /// The nearest edge element (numpy `edge`).
    Edge,
    /// The mirror image without repeating the edge (numpy `reflect`); pads may exceed the
    /// dimension (the reflection repeats).
    Reflect,
    /// The other end of the axis, as if it repeated (numpy `wrap`); pads may exceed the
    /// dimension.
    Wrap,
}

/// `x` with `before[d]` points added before and `after[d]` after each axis `d`. Negative pads
/// crop (ONNX).
///
/// # Errors
/// A `ValueError` when the pad lists do not have one entry per axis, a dimension would
/// become negative, or edge/reflect padding is asked of an empty dimension.
pub fn pad(x: &Tensor, before: &[i64], after: &[i64], mode: PadMode) -> Result<Tensor> {
    let shape = const_shape(x, "pad")?;
    let r = shape.len();
    if before.len() != r || after.len() != r {
        return Err(value_error(
            "pad",
            format!(
                "{} / {} pads for a tensor of rank {r}",
                before.len(),
                after.len()
            ),
        ));
    }
    let out: Vec<i64> = (0..r).map(|d| shape[d] + before[d] + after[d]).collect();
    if let Some(d) = (0..r).find(|&d| out[d] < 0) {
        return Err(value_error(
            "pad",
            format!("axis {d} would have size {}", out[d]),
        ));
    }
    let padded = |d: usize| before[d] != 0 || after[d] != 0;
    if !matches!(mode, PadMode::Constant(_)) {
        if let Some(d) = (0..r).find(|&d| shape[d] == 0 && padded(d)) {
            return Err(value_error(
                "pad",
                format!("cannot {mode:?}-pad the empty axis {d}"),
            ));
        }
    }
    let dt = index_dtype(x);
    compute_tagged(
        &shape_exprs(&out, dt),
        |i: &[Var]| {
            let coord = |d: usize| -> PrimExpr {
                i[d].to_expr() - PrimExpr::const_int(i[d].dtype(), before[d])
            };
            match mode {
                PadMode::Constant(v) => {
                    let mut inside: Option<PrimExpr> = None;
                    for d in (0..r).filter(|&d| padded(d)) {
                        let c = coord(d);
                        let ok = c.ge(0).logical_and(c.lt(shape[d]));
                        inside = Some(match inside {
                            None => ok,
                            Some(acc) => acc.logical_and(ok),
                        });
                    }
                    let idx: Vec<PrimExpr> = (0..r).map(coord).collect();
                    match inside {
                        None => x.at(&idx),
                        Some(cond) => if_then_else(cond, x.at(&idx), constant(x.dtype(), v)),
                    }
                }
                PadMode::Edge => {
                    let idx: Vec<PrimExpr> = (0..r)
                        .map(|d| {
                            let c = coord(d);
                            if padded(d) {
                                kiln_tir::min(kiln_tir::max(c, 0), shape[d] - 1)
                            } else {
                                c
                            }
                        })
                        .collect();
                    x.at(&idx)
                }
                PadMode::Wrap => {
                    let idx: Vec<PrimExpr> = (0..r)
                        .map(|d| {
                            let c = coord(d);
                            if padded(d) {
                                floormod(c, shape[d])
                            } else {
                                c
                            }
                        })
                        .collect();
                    x.at(&idx)
                }
                PadMode::Reflect => {
                    let idx: Vec<PrimExpr> = (0..r)
                        .map(|d| {
                            let c = coord(d);
                            let n = shape[d];
                            if !padded(d) {
                                c
                            } else if n == 1 {
                                PrimExpr::const_int(c.dtype(), 0)
                            } else {
                                let p = 2 * (n - 1);
                                let m = floormod(c, p);
                                kiln_tir::select(
                                    m.lt(n),
                                    m.clone(),
                                    PrimExpr::const_int(m.dtype(), p) - m,
                                )
                            }
                        })
                        .collect();
                    x.at(&idx)
                }
            }
        },
        "pad",
        tag::INJECTIVE,
    )
}
