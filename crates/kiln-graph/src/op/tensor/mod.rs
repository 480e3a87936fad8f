//! Elementwise and broadcast operators on tensors.

pub mod binary;
pub mod bitwise;
pub mod cast;
pub mod clip;
pub mod shift;
pub mod unary;
pub mod where_op;

use super::OpDef;

/// The definitions of this family.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    unary::defs(v);
    binary::defs(v);
    clip::defs(v);
    cast::defs(v);
    where_op::defs(v);
    bitwise::defs(v);
    shift::defs(v);
}
