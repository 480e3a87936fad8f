//! One call from a model to a runnable factory module, choosing the executor: the static graph
//! executor when every decision is known at compile time, Kiln's virtual machine when control
//! flow is decided at run time ([`crate::from_onnx_program`]).

use crate::{DimValues, FrozenInputs, InputShapes, Model, OnnxError, Result};
use kiln_graph::transform::PassContext;
use kiln_runtime::module::Module;

/// Compiles `model` for `targets` under `ctx`: a `GraphExecutorFactory` module for a static
/// model, a `VMFactory` module for one whose control flow is decided at run time, or compiled
/// for several values of symbolic dimensions (`dims`, see [`crate::from_onnx_dims`]). `shapes`
/// and `frozen` are [`crate::from_onnx_frozen`]'s.
pub fn compile(
    model: &Model,
    shapes: &InputShapes,
    dims: &DimValues,
    frozen: &FrozenInputs,
    targets: &[&str],
    ctx: &PassContext,
) -> Result<Module> {
    if !dims.is_empty() {
        let program = crate::from_onnx_dims(model, shapes, dims, frozen)?;
        return kiln_graph::build::build_program(&program, targets, ctx)
            .map_err(|e| OnnxError::Graph(e.to_string()));
    }
    let built = match crate::from_onnx_program(model, shapes, frozen) {
        Ok(Some(program)) => kiln_graph::build::build_program(&program, targets, ctx),
        Ok(None) => {
            let (module, params) = crate::from_onnx_frozen(model, shapes, frozen)?;
            kiln_graph::build::build_targets(&module, targets, params, ctx)
        }
        // Not expressible as a program (yet): the static conversion's error says which inputs
        // to freeze, the program's why run-time control flow was not enough.
        Err(program_err) => match crate::from_onnx_frozen(model, shapes, frozen) {
            Ok((module, params)) => kiln_graph::build::build_targets(&module, targets, params, ctx),
            Err(e) => {
                return Err(OnnxError::Graph(format!(
                    "{e} (compiled for run-time control flow instead: {program_err})"
                )))
            }
        },
    };
    built.map_err(|e| OnnxError::Graph(e.to_string()))
}
