//! Commutative reductions (TVM's `tir.Reduce` with a `CommReducer`).
//!
//! Kiln's TIR has no reduction node, so a reduction is the call `te.reduce` (a `tir.Call`,
//! dtype of the source) with the arguments
//! `[lhs, rhs, combined, identity, source, condition, var_0, min_0, extent_0, var_1, ...]`:
//! the combiner is the expression `combined` of the two variables `lhs` (the accumulator) and
//! `rhs` (the new value), `identity` its neutral element, and each reduction axis comes as its
//! variable and range. It is only meaningful at the top of a compute body; lowering turns it
//! into an initialisation and an update.

use crate::tensor::{iter_type, IterVar};
use kiln_tir::{ExprKind, PrimExpr, Range, Var};

/// The operator name of the reduction call.
pub const REDUCE_OP: &str = "te.reduce";

/// A decoded reduction.
#[derive(Clone, Debug)]
pub struct Reduce {
    /// The accumulator variable of the combiner.
    pub lhs: Var,
    /// The new-value variable of the combiner.
    pub rhs: Var,
    /// `combine(lhs, rhs)`.
    pub combined: PrimExpr,
    /// The neutral element.
    pub identity: PrimExpr,
    /// The value reduced.
    pub source: PrimExpr,
    /// Only points where this holds take part.
    pub condition: PrimExpr,
    /// The reduction axes.
    pub axis: Vec<IterVar>,
}

impl Reduce {
    /// The reduction as an expression (the `te.reduce` call).
    pub fn encode(&self) -> PrimExpr {
        let mut args = vec![
            self.lhs.to_expr(),
            self.rhs.to_expr(),
            self.combined.clone(),
            self.identity.clone(),
            self.source.clone(),
            self.condition.clone(),
        ];
        for iv in &self.axis {
            let dom = iv.dom().expect("reduction axes have domains");
            args.extend([iv.expr(), dom.min().clone(), dom.extent().clone()]);
        }
        PrimExpr::call(self.source.dtype(), REDUCE_OP, args)
    }

    /// The reduction an expression is, if it is a `te.reduce` call.
    pub fn decode(e: &PrimExpr) -> Option<Reduce> {
        let ExprKind::Call { op, args } = e.kind() else {
            return None;
        };
        if op != REDUCE_OP || args.len() < 6 || (args.len() - 6) % 3 != 0 {
            return None;
        }
        let axis = args[6..]
            .chunks(3)
            .map(|c| {
                Some(IterVar::new(
                    Some(Range::from_min_extent(c[1].clone(), c[2].clone())),
                    c[0].as_var()?,
                    iter_type::COMM_REDUCE,
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Reduce {
            lhs: args[0].as_var()?,
            rhs: args[1].as_var()?,
            combined: args[2].clone(),
            identity: args[3].clone(),
            source: args[4].clone(),
            condition: args[5].clone(),
            axis,
        })
    }

    /// `combine(acc, value)`.
    pub fn combine(&self, acc: &PrimExpr, value: &PrimExpr) -> PrimExpr {
        kiln_tir::mutator::substitute_with(&self.combined, |v| {
            if *v == self.lhs {
                Some(acc.clone())
            } else if *v == self.rhs {
                Some(value.clone())
            } else {
                None
            }
        })
    }
}

/// A general commutative reduction of `source` over `axis`: `combine(lhs, rhs)` must be
/// commutative and associative with neutral element `identity` (TVM's `te.comm_reducer`).
/// `condition` (default true) selects the points that take part.
pub fn comm_reduce(
    combine: impl FnOnce(&PrimExpr, &PrimExpr) -> PrimExpr,
    identity: PrimExpr,
    source: PrimExpr,
    axis: &[IterVar],
    condition: Option<PrimExpr>,
) -> PrimExpr {
    let t = source.dtype();
    let (lhs, rhs) = (Var::new("x", t), Var::new("y", t));
    let combined = combine(&lhs.to_expr(), &rhs.to_expr());
    Reduce {
        lhs,
        rhs,
        combined,
        identity,
        source,
        condition: condition.unwrap_or_else(|| PrimExpr::bool(true)),
        axis: axis.to_vec(),
    }
    .encode()
}

/// The sum of `source` over `axis` (TVM's `te.sum`).
pub fn sum(source: PrimExpr, axis: &[IterVar]) -> PrimExpr {
    sum_where(source, axis, None)
}

/// The sum of `source` over the points of `axis` where `condition` holds.
pub fn sum_where(source: PrimExpr, axis: &[IterVar], condition: Option<PrimExpr>) -> PrimExpr {
    let zero = PrimExpr::const_int(source.dtype(), 0);
    comm_reduce(|x, y| x + y, zero, source, axis, condition)
}

/// The product of `source` over `axis` (TVM's `te.prod`).
pub fn prod(source: PrimExpr, axis: &[IterVar]) -> PrimExpr {
    let one = PrimExpr::const_int(source.dtype(), 1);
    comm_reduce(|x, y| x * y, one, source, axis, None)
}

/// The maximum of `source` over `axis` (TVM's `te.max`); identity: `-inf` for floats (the
/// maximum of nothing, as ONNX's `ReduceMax` of an empty axis), else the type's lowest value.
pub fn max(source: PrimExpr, axis: &[IterVar]) -> PrimExpr {
    let id = infinity(source.dtype(), -1.0).unwrap_or_else(|| min_value(source.dtype()));
    comm_reduce(|x, y| kiln_tir::max(x, y), id, source, axis, None)
}

/// The minimum of `source` over `axis` (TVM's `te.min`); identity: `+inf` for floats (the
/// minimum of nothing, as ONNX's `ReduceMin` of an empty axis), else the type's highest value.
pub fn min(source: PrimExpr, axis: &[IterVar]) -> PrimExpr {
    let id = infinity(source.dtype(), 1.0).unwrap_or_else(|| max_value(source.dtype()));
    comm_reduce(|x, y| kiln_tir::min(x, y), id, source, axis, None)
}

/// `sign * inf` of a float type; `None` for other types.
fn infinity(t: kiln_tir::DataType, sign: f64) -> Option<PrimExpr> {
    use kiln_tir::DataTypeExt;
    t.is_floating()
        .then(|| PrimExpr::const_float(t, sign * f64::INFINITY))
}

/// The lowest finite value of a type (TVM's `min_value`).
pub fn min_value(t: kiln_tir::DataType) -> PrimExpr {
    use kiln_tir::DataTypeExt;
    if t.is_floating() {
        let v = match t.bits() {
            16 => -65504.0,
            32 => f32::MIN as f64,
            _ => f64::MIN,
        };
        PrimExpr::const_float(t, v)
    } else {
        PrimExpr::const_int(t, t.int_min())
    }
}

/// The highest finite value of a type (TVM's `max_value`).
pub fn max_value(t: kiln_tir::DataType) -> PrimExpr {
    use kiln_tir::DataTypeExt;
    if t.is_floating() {
        let v = match t.bits() {
            16 => 65504.0,
            32 => f32::MAX as f64,
            _ => f64::MAX,
        };
        PrimExpr::const_float(t, v)
    } else {
        PrimExpr::const_int(t, t.int_max())
    }
}
