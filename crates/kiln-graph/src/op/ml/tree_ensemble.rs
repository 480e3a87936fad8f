//! `ml.tree_ensemble(data, feature, split, mode, missing_true, true_next, false_next, roots,
//! leaf_target, leaf_weight, n_targets, aggregate, depth)`: decision-tree ensembles over the
//! rows of `data` `[N, F]` (see [`kiln_topi::ml::tree_ensemble`] for the tables), giving
//! `[N, n_targets]`; `aggregate` is ONNX-ML's number (0 average, 1 sum, 2 min, 3 max).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{one, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::{DataType, Error, Result};
use kiln_te::Tensor as TeTensor;
use kiln_tir::{CpuDesc, DataTypeExt};
use kiln_topi::ml::{tree_ensemble, Aggregate, TreeTables};

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (d, dt) = ctx.tensor_rank(0, 2)?;
    if !dt.is_floating() {
        return Err(ctx.err(format!("argument `data` must be a float tensor, got {dt}")));
    }
    let (f, _) = ctx.tensor_rank(1, 1)?;
    let s = f[0];
    let i32t = DataType::int(32);
    for (i, want, dtype) in [
        (2, s, dt),
        (3, s, i32t),
        (4, s, i32t),
        (5, s, i32t),
        (6, s, i32t),
    ] {
        let (shape, got) = ctx.tensor_rank(i, 1)?;
        if shape[0] != want || got != dtype {
            return Err(ctx.err(format!(
                "argument `{}` must be [{want}] {dtype}, got {}",
                ctx.arg_name(i),
                ctx.args[i]
            )));
        }
    }
    let (l, _) = ctx.tensor_rank(8, 1)?;
    let (w, wd) = ctx.tensor_rank(9, 1)?;
    if l != w || wd != dt {
        return Err(
            ctx.err("`leaf_target` and `leaf_weight` must match (weights of the data's dtype)")
        );
    }
    let n_targets = ctx.attrs.int("n_targets")?;
    let aggregate = ctx.attrs.int("aggregate")?;
    if n_targets < 1 || !(0..=3).contains(&aggregate) || ctx.attrs.int("depth")? < 1 {
        return Err(ctx.err(format!(
            "`n_targets` ({n_targets}) and `depth` must be >= 1 and `aggregate` ({aggregate}) in 0-3"
        )));
    }
    Ok(Type::tensor(&[d[0], n_targets], dt))
}

fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    if i.len() != 10 {
        return Err(Error::value_error(
            "ml.tree_ensemble: 10 arguments expected",
        ));
    }
    let tables = TreeTables {
        feature: &i[1],
        split: &i[2],
        mode: &i[3],
        missing_true: &i[4],
        true_next: &i[5],
        false_next: &i[6],
        roots: &i[7],
        leaf_target: &i[8],
        leaf_weight: &i[9],
    };
    let aggregate = match a.int("aggregate")? {
        0 => Aggregate::Average,
        1 => Aggregate::Sum,
        2 => Aggregate::Min,
        _ => Aggregate::Max,
    };
    one(tree_ensemble(
        &i[0],
        &tables,
        a.int("n_targets")?,
        aggregate,
        a.int("depth")?,
    ))
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    // Opaque: a sequential walk per row (an extern kernel).
    v.push(
        OpDef::new(
            "ml.tree_ensemble",
            &[
                "data",
                "feature",
                "split",
                "mode",
                "missing_true",
                "true_next",
                "false_next",
                "roots",
                "leaf_target",
                "leaf_weight",
            ],
            OpPattern::Opaque,
            rel,
        )
        .attrs(vec![
            AttrSpec::new("n_targets", AttrKind::Int, 1),
            AttrSpec::new("aggregate", AttrKind::Int, 1),
            AttrSpec::new("depth", AttrKind::Int, 1),
        ])
        .compute(lower),
    );
}
