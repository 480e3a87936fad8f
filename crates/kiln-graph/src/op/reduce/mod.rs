//! Reductions (pattern `CommReduce`): sum, mean, max, min, prod, argmax, argmin.

pub mod reduction;

use super::OpDef;

/// The definitions of this family.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    reduction::defs(v);
}
