//! Compile-time evaluation of calls over constants during conversion (shape computations): the
//! operators' own reference evaluators, through kiln-graph's FoldConstant.

use kiln_graph::ir::Expr;
use kiln_graph::transform::fold_constant::try_fold;
use kiln_runtime::tensor::Tensor;

use super::CResult;

/// The most elements folding reads or writes: only small shape-like values are folded.
pub const FOLD_LIMIT: usize = 1 << 16;

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
    if args.iter().map(|a| a.numel()).sum::<usize>() > FOLD_LIMIT {
        return Ok(None);
    }
    // Nor results that would grow past that (a Tile or Expand of a small constant).
    let out_elems = e.ty()?.as_tensor().map(|(s, _)| {
        s.iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d.max(0) as usize))
            .unwrap_or(usize::MAX)
    });
    if out_elems.is_some_and(|n| n > FOLD_LIMIT) {
        return Ok(None);
    }
    match try_fold(e)? {
        Some(f) => Ok(Some(super::typed_constant(f)?)),
        None => Ok(None),
    }
}
