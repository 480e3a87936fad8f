//! `AlterOpLayout`: a hook for schedules that want another data or kernel layout (NCHWc
//! convolutions, packed dense weights). No schedule asks for one yet, so the pass returns the
//! module unchanged; it keeps its place (and name) in the pipeline so that adding a layout
//! request is a change to this file only. Layout attributes (`data_layout`, `kernel_layout`)
//! are already on the calls, and the op relations reject layouts they do not know.

use super::Pass;

/// The pass (opt level 3, as in TVM).
pub fn alter_op_layout() -> Pass {
    Pass::new("AlterOpLayout", 3, |m, _| Ok(m))
}
