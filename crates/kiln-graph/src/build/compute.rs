//! The lowering of one operator call in the graph build (TVM's `FTVMCompute`): the operator's
//! own [`ComputeFn`](crate::op::ComputeFn), declared with it in its op file.
//!
//! float16 is a storage type: an operator with a float16 input computes in float32 (its inputs
//! widened, exactly) and rounds each float16 result to float16 once, at its output. So every
//! operator's float16 result is its float32 result rounded, as ONNX and numpy define it, whatever
//! the operator fuses with: a sum or a matrix product accumulates in float32, a softmax keeps its
//! intermediates in float32, and two fused operators cannot contract into one rounding.
//! float32 code is untouched.

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op;
use kiln_ffi::{DataType, Error, Result};
use kiln_te::Tensor;
use kiln_tir::CpuDesc;
use kiln_topi::elemwise::cast;

/// The output tensor(s) of operator `name` on `inputs` with attributes `a`, for code that runs
/// on `cpu`; `ty` is the call's type (a tensor or a tuple of tensors), which says which results
/// are float16.
pub fn compute(
    name: &str,
    inputs: &[Tensor],
    a: &Attrs<'_>,
    ty: &Type,
    cpu: &CpuDesc,
) -> Result<Vec<Tensor>> {
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
    let f16 = DataType::float(16);
    if !inputs.iter().any(|t| t.dtype() == f16) {
        return lower(inputs, a, cpu);
    }
    let f32 = DataType::float(32);
    let wide = inputs
        .iter()
        .map(|t| {
            if t.dtype() == f16 {
                cast(t, f32)
            } else {
                Ok(t.clone())
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let out = lower(&wide, a, cpu)?;
    let want: Vec<DataType> = match ty.as_tuple() {
        Some(fields) => fields.iter().map(Type::dtype).collect(),
        None => vec![ty.dtype()],
    };
    out.into_iter()
        .enumerate()
        .map(|(i, t)| {
            if t.dtype() == f32 && want.get(i) == Some(&f16) {
                cast(&t, f16)
            } else {
                Ok(t)
            }
        })
        .collect()
}
