//! The lowering of one operator call in the graph build (TVM's `FTVMCompute`): the operator's
//! own [`ComputeFn`](crate::op::ComputeFn), declared with it in its op file.

use crate::ir::attrs::Attrs;
use crate::op;
use kiln_ffi::{Error, Result};
use kiln_te::Tensor;
use kiln_tir::CpuDesc;

/// The output tensor(s) of operator `name` on `inputs` with attributes `a`, for code that runs
/// on `cpu`.
pub fn compute(name: &str, inputs: &[Tensor], a: &Attrs<'_>, cpu: &CpuDesc) -> Result<Vec<Tensor>> {
    let def = op::get(name)?;
    let lower = def.compute.ok_or_else(|| {
        let why = match def.rewritten_by {
            Some(pass) => format!("{pass} replaces it, and did not run"),
            None => "none is defined".to_string(),
        };
        Error::value_error(format!(
            "graph build: operator `{name}` has no lowering ({why})"
        ))
    })?;
    lower(inputs, a, cpu)
}
