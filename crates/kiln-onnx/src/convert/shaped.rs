//! Nodes whose output shapes depend on small run-time integer inputs (a reduction's `axes`...),
//! computed by kernels compiled with run-time extents: a shape function (a VM builtin of
//! `kiln_runtime::vm::shape_fns`) computes the shapes from the inputs, the VM allocates the
//! results by them and calls the kernel, whose extents are bound from the tensors it is given;
//! a result may then be viewed under another of the shapes (a reduction without `keepdims`).
//! Each operator describes its kernel in its own converter file; [`run_time`] picks it.

use kiln_graph::ir::{Expr, Type};

use super::{CResult, Ctx};
use crate::Node;

/// Builds a kernel's body from variables standing for its inputs.
pub(super) type Body = Box<dyn Fn(&[Expr]) -> CResult<Expr>>;

/// One result of a [`ShapedKernel`].
pub(super) struct Result_ {
    /// The shape (index among the shape function's results) the kernel's result is allocated by.
    pub alloc: usize,
    /// The shape the node's output views it as, if another.
    pub view: Option<usize>,
    /// The node output's type (-1 where known at run time).
    pub ty: Type,
}

/// A node computed by a kernel compiled with run-time extents.
pub(super) struct ShapedKernel {
    /// The shape function (`vm.builtin.<name>`).
    pub shape_fn: &'static str,
    /// Its tensor arguments.
    pub shape_args: Vec<Expr>,
    /// Its integer arguments.
    pub shape_ints: Vec<i64>,
    /// The rank of each shape it returns.
    pub shape_ranks: Vec<usize>,
    /// The kernel's inputs.
    pub inputs: Vec<Expr>,
    /// The kernel's body over them.
    pub body: Body,
    /// The node's outputs.
    pub results: Vec<Result_>,
}

/// The kernel computing `node`, when it is an operator with one and an input deciding its
/// shapes is known only at run time.
pub(super) fn run_time(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    if !node.domain.is_empty() {
        return Ok(None);
    }
    match node.op_type.as_str() {
        op if super::reduce::REDUCTIONS.contains(&op) => super::reduce::run_time_axes(ctx, node),
        _ => Ok(None),
    }
}

/// Whether `op` may need a kernel with run-time extents (so the model may need the VM).
pub(super) fn may_need(op: &str) -> bool {
    super::reduce::REDUCTIONS.contains(&op)
}
