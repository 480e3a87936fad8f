//! Classical machine-learning operators (`ml.*`, from ONNX's `ai.onnx.ml` domain).

pub mod tree_ensemble;

use super::OpDef;

/// The definitions of this family.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    tree_ensemble::defs(v);
}
