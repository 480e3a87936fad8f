//! Compile-time evaluation of calls over constants during conversion (shape computations): the
//! operators' own reference evaluators, through kiln-graph's FoldConstant.

use kiln_graph::ir::Expr;
use kiln_graph::transform::fold_constant::try_fold;
use kiln_runtime::tensor::Tensor;

use super::CResult;

/// The folded value of typed call `e` when all its arguments are constants and its operator
/// has a reference evaluator; `None` otherwise.
pub fn fold(e: &Expr) -> CResult<Option<Expr>> {
    if e.op_name().is_none() {
        return Ok(None);
    }
    let args: Option<Vec<Tensor>> = e.args().iter().map(|a| a.as_constant().cloned()).collect();
    let Some(args) = args else {
        return Ok(None);
    };
    // Keep big constants (weights) as they are: only small shape-like values are folded here.
    if args.iter().map(|a| a.numel()).sum::<usize>() > 1 << 16 {
        return Ok(None);
    }
    match try_fold(e)? {
        Some(f) => Ok(Some(super::typed_constant(f)?)),
        None => Ok(None),
    }
}
