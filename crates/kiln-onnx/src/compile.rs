//! One call from a model to a runnable factory module, choosing the executor: the static graph
//! executor when every decision is known at compile time, Kiln's virtual machine when control
//! flow or output shapes are decided at run time ([`crate::from_onnx_program`]) or the model is
//! compiled for several shapes ([`crate::from_onnx_dims`]).

use crate::{DimValues, FrozenInputs, InputShapes, Model, OnnxError, Result};
use kiln_graph::build::Program;
use kiln_graph::ir::IRModule;
use kiln_graph::transform::PassContext;
use kiln_runtime::module::Module;
use kiln_runtime::tensor::Tensor;

/// A converted model, for the executor it needs.
pub enum Converted {
    /// A static graph and its params (the graph executor).
    Graph(IRModule, Vec<(String, Tensor)>),
    /// A program of static segments (the virtual machine).
    Program(Program),
}

/// Converts `model` for the executor it needs (see the module docs): with `dims`, a program for
/// every combination of their values; else a program when a decision is made at run time, a
/// static graph otherwise. When the program conversion fails, the static one is tried; when
/// both fail, the error gives the static conversion's message (which says what to freeze) and
/// the program's.
pub fn convert(
    model: &Model,
    shapes: &InputShapes,
    dims: &DimValues,
    frozen: &FrozenInputs,
) -> Result<Converted> {
    if !dims.is_empty() {
        return Ok(Converted::Program(crate::from_onnx_dims(
            model, shapes, dims, frozen,
        )?));
    }
    match crate::from_onnx_program(model, shapes, frozen) {
        Ok(Some(program)) => Ok(Converted::Program(program)),
        Ok(None) => {
            let (m, params) = crate::from_onnx_frozen(model, shapes, frozen)?;
            Ok(Converted::Graph(m, params))
        }
        Err(program_err) => match crate::from_onnx_frozen(model, shapes, frozen) {
            Ok((m, params)) => Ok(Converted::Graph(m, params)),
            Err(e) => Err(OnnxError::Graph(format!(
                "{e} (compiled for run-time control flow instead: {program_err})"
            ))),
        },
    }
}

/// Compiles `model` for `targets` under `ctx`: a `GraphExecutorFactory` module for a static
/// model, a `VMFactory` module for a program ([`convert`]'s choice). `shapes`, `dims` and
/// `frozen` are [`convert`]'s.
pub fn compile(
    model: &Model,
    shapes: &InputShapes,
    dims: &DimValues,
    frozen: &FrozenInputs,
    targets: &[&str],
    ctx: &PassContext,
) -> Result<Module> {
    let built = match convert(model, shapes, dims, frozen)? {
        Converted::Program(p) => kiln_graph::build::build_program(&p, targets, ctx),
        Converted::Graph(m, params) => kiln_graph::build::build_targets(&m, targets, params, ctx),
    };
    built.map_err(|e| OnnxError::Graph(e.to_string()))
}
