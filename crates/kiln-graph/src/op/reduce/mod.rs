//! Reductions (pattern `CommReduce`): sum, mean, max, min, prod, argmax, argmin; and two
//! operators along one axis lowered as reductions (pattern `Opaque`): cumsum and topk; and the
//! determinant over the last two axes (an extern kernel); `dyn.reduce`, a reduction over axes
//! known only at run time.

pub mod cumsum;
pub mod det;
pub mod dyn_reduce;
pub mod reduction;
pub mod topk;

use super::OpDef;

/// The definitions of this family.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    cumsum::defs(v);
    det::defs(v);
    dyn_reduce::defs(v);
    reduction::defs(v);
    topk::defs(v);
}
