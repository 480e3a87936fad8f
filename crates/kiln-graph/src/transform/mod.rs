//! Graph passes and their infrastructure (TVM's `relay.transform`), imitating
//! `kiln_tir::transform`: a [`Pass`] is a named module-to-module function with an opt level,
//! [`sequential`] runs passes in order, and a [`PassContext`] (kiln-tir's, shared) decides which
//! run (opt level, disabled names, required names) and prints the IR after passes.
//!
//! | pass | opt level | file |
//! | --- | --- | --- |
//! | `InferType` | 0 | [`infer_type`] |
//! | `SimplifyInference` | 0 | [`simplify_inference`] |
//! | `CanonicalizeOps` | 3 (TVM's level; [`default_pipeline`] lists it) | [`canonicalize_ops`] |
//! | `EliminateCommonSubexpr` | 3 | [`eliminate_common_subexpr`] |
//! | `KeepQuantizedWeights` | 2 (before `FoldConstant`) | [`keep_quantized_weights`] |
//! | `FoldConstant` | 2 | [`fold_constant`] |
//! | `DivToMul` | 3 (division by a float constant as a product by its reciprocal) | [`div_to_mul`] |
//! | `FoldScaleAxis` | 3 | [`fold_scale_axis`] |
//! | `AlterOpLayout` | 3 (packed convolution kernels) | [`alter_op_layout`] |
//! | `ConvertBlockedLayout` | 3 (activations in channel blocks between convolutions) | [`convert_blocked_layout`] |
//! | `SinkReshape` | 3 (elementwise calls before a reshape or transpose, into their producer's group) | [`sink_reshape`] |
//! | `DeadCodeElimination` | 1 | [`dead_code_elimination`] |
//! | `FuseOps` | 0 (`-O0` still fuses nothing: its `fuse_opt_level` is the context's) | [`fuse_ops`] |
//!
//! Passes that change the graph leave new nodes untyped; they run `InferType` on their result
//! so every pass hands on a typed module.

pub mod alter_conv_transpose;
pub mod alter_integer_matmul;
pub mod alter_op_layout;
pub mod bind_params;
pub mod canonicalize_ops;
pub mod convert_blocked_layout;
pub mod dead_code_elimination;
pub mod div_to_mul;
pub mod eliminate_common_subexpr;
pub mod fold_constant;
pub mod fold_scale_axis;
pub mod fuse_ops;
pub mod infer_type;
pub mod keep_quantized_weights;
pub mod simplify_inference;
pub mod sink_reshape;

#[cfg(test)]
mod pipeline_tests;

pub use alter_op_layout::alter_op_layout;
pub use bind_params::bind_params;
pub use canonicalize_ops::canonicalize_ops;
pub use convert_blocked_layout::convert_blocked_layout;
pub use dead_code_elimination::dead_code_elimination;
pub use div_to_mul::div_to_mul;
pub use eliminate_common_subexpr::eliminate_common_subexpr;
pub use fold_constant::fold_constant;
pub use fold_scale_axis::fold_scale_axis;
pub use fuse_ops::fuse_ops;
pub use infer_type::infer_type;
pub use keep_quantized_weights::keep_quantized_weights;
pub use simplify_inference::simplify_inference;
pub use sink_reshape::sink_reshape;

/// The pass context is the TIR pipeline's: one mechanism decides what runs and prints.
pub use kiln_tir::transform::{PassContext, PrintHook, PrintIr};

use crate::ir::{Function, IRModule};
use kiln_ffi::Result;

/// The function a graph pass runs.
pub type PassFn = kiln_tir::transform::PassFn<IRModule>;

/// What a graph pass does when run (not reflected): kiln-tir's pass body over graph modules.
pub type PassBody = kiln_tir::transform::PassBody<IRModule, Pass>;

// A failing graph pass names itself in the error.
kiln_tir::declare_pass_node!(PassObj, "graph.transform.Pass", IRModule, true);

/// A graph pass handle (kiln-tir's pass type over graph modules). Cheap to clone.
pub type Pass = kiln_tir::transform::PassRef<PassObj>;

/// A pass that rewrites every function of a module with `f` (TVM's `function_pass`).
pub fn function_pass(
    name: &str,
    opt_level: i64,
    f: impl Fn(Function, &PassContext) -> Result<Function> + Send + Sync + 'static,
) -> Pass {
    Pass::new(name, opt_level, move |m, ctx| {
        let mut out = m.clone();
        for (gname, func) in m.functions() {
            let new = f(func.clone(), ctx)?;
            if !new.0.same_as(&func.0) {
                out = out.with_function(gname, new);
            }
        }
        Ok(out)
    })
}

/// Passes run in order as one pass (opt level 0: the members' levels decide).
pub fn sequential(name: &str, passes: Vec<Pass>) -> Pass {
    Pass::sequential(name, passes)
}

/// The default optimization list (what `relay.build` runs before lowering), in order.
pub fn default_pipeline() -> Pass {
    sequential(
        "graph.DefaultPipeline",
        vec![
            infer_type(),
            simplify_inference(),
            canonicalize_ops(),
            eliminate_common_subexpr(),
            keep_quantized_weights(),
            fold_constant(),
            div_to_mul(),
            fold_scale_axis(),
            fold_constant(),
            alter_op_layout(),
            convert_blocked_layout(),
            sink_reshape(),
            fold_constant(),
            dead_code_elimination(),
            fuse_ops(),
        ],
    )
}
