//! The global functions a Python `kiln.te` binds to (TVM's `te._ffi_api`); the list is in the
//! crate documentation.

use crate::reduce::{comm_reduce, Reduce};
use crate::schedule::{create_schedule, Schedule, Stage};
use crate::tensor::{compute_op, IterVar, Operation, Tensor};
use crate::{lower, max, min, prod, sum_where};
use kiln_ffi::{register_global, Any, Array, DataType, Error, Map, Result};
use kiln_tir::node::NodeList;
use kiln_tir::{PrimExpr, Range, Var};

/// Makes sure the registrations of this crate are linked into a library that depends on it
/// (call it from the library's `link_all`).
#[doc(hidden)]
pub fn link_globals() -> *const () {
    link_globals as *const ()
}

fn any_list(items: Vec<IterVar>) -> Array {
    Array::new(items.into_iter().map(Any::from).collect())
}

register_global!(
    "te.Placeholder",
    |shape: NodeList<PrimExpr>, dtype: DataType, name: String| crate::placeholder(
        &shape, dtype, &name
    )
);
register_global!(
    "te.IterVar",
    |dom: Option<Range>, var: Var, iter_type: i64, thread_tag: String| IterVar::with_tag(
        dom,
        var,
        iter_type,
        &thread_tag
    )
);
register_global!(
    "te.ComputeOp",
    |name: String,
     tag: String,
     attrs: Option<Map>,
     axis: NodeList<IterVar>,
     body: NodeList<PrimExpr>| {
        compute_op(
            &name,
            &tag,
            attrs.unwrap_or_else(|| Map::new(Vec::new())),
            axis.to_vec(),
            body.to_vec(),
        )
    }
);
register_global!("te.OpGetOutput", |op: Operation,
                                    index: i64|
 -> Result<Tensor> {
    if index < 0 || index as usize >= op.num_outputs() {
        return Err(Error::index_error(format!(
            "{} has {} outputs, asked for {index}",
            op.name(),
            op.num_outputs()
        )));
    }
    Ok(op.output(index as usize))
});
register_global!("te.OpNumOutputs", |op: Operation| op.num_outputs() as i64);
register_global!("te.OpInputTensors", |op: Operation| Array::new(
    op.input_tensors().into_iter().map(Any::from).collect()
));
register_global!("te.TensorOp", |t: Tensor| t.op().clone());
register_global!("te.TensorLoad", |t: Tensor, indices: NodeList<PrimExpr>| t
    .try_at(&indices));
register_global!(
    "te.CommReduce",
    |lhs: Var,
     rhs: Var,
     combined: PrimExpr,
     identity: PrimExpr,
     source: PrimExpr,
     axis: NodeList<IterVar>,
     condition: Option<PrimExpr>| {
        Reduce {
            lhs,
            rhs,
            combined,
            identity,
            source,
            condition: condition.unwrap_or_else(|| PrimExpr::bool(true)),
            axis: axis.to_vec(),
        }
        .encode()
    }
);
register_global!(
    "te.Sum",
    |source: PrimExpr, axis: NodeList<IterVar>, condition: Option<PrimExpr>| sum_where(
        source, &axis, condition
    )
);
register_global!("te.Max", |source: PrimExpr, axis: NodeList<IterVar>| max(
    source, &axis
));
register_global!("te.Min", |source: PrimExpr, axis: NodeList<IterVar>| min(
    source, &axis
));
register_global!("te.Prod", |source: PrimExpr, axis: NodeList<IterVar>| prod(
    source, &axis
));
register_global!(
    "te.ReduceWithCombiner",
    |combined: PrimExpr,
     lhs: Var,
     rhs: Var,
     identity: PrimExpr,
     source: PrimExpr,
     axis: NodeList<IterVar>| {
        comm_reduce(
            |x, y| {
                kiln_tir::mutator::substitute_with(&combined, |v| {
                    if *v == lhs {
                        Some(x.clone())
                    } else if *v == rhs {
                        Some(y.clone())
                    } else {
                        None
                    }
                })
            },
            identity,
            source,
            &axis,
            None,
        )
    }
);
register_global!("te.CreateSchedule", |ops: NodeList<Operation>| {
    create_schedule(&ops)
});
register_global!("te.ScheduleGetStage", |s: Schedule, op: Operation| s
    .try_stage_op(&op));
register_global!("te.StageOp", |st: Stage| st.op());
register_global!("te.StageLeafIterVars", |st: Stage| any_list(
    st.leaf_iter_vars()
));
register_global!("te.StageSplitByFactor", |st: Stage,
                                           parent: IterVar,
                                           factor: PrimExpr|
 -> Result<Array> {
    let (o, i) = st.split(&parent, factor)?;
    Ok(any_list(vec![o, i]))
});
register_global!("te.StageSplitByNParts", |st: Stage,
                                           parent: IterVar,
                                           nparts: PrimExpr|
 -> Result<Array> {
    let (o, i) = st.split_nparts(&parent, nparts)?;
    Ok(any_list(vec![o, i]))
});
register_global!(
    "te.StageFuse",
    |st: Stage, outer: IterVar, inner: IterVar| st.fuse(&outer, &inner)
);
register_global!("te.StageReorder", |st: Stage, order: NodeList<IterVar>| st
    .reorder(&order));
register_global!("te.StageTile", |st: Stage,
                                  x: IterVar,
                                  y: IterVar,
                                  xf: PrimExpr,
                                  yf: PrimExpr|
 -> Result<Array> {
    let (a, b, c, d) = st.tile(&x, &y, xf, yf)?;
    Ok(any_list(vec![a, b, c, d]))
});
register_global!("te.StageVectorize", |st: Stage, iv: IterVar| st
    .vectorize(&iv));
register_global!("te.StageParallel", |st: Stage, iv: IterVar| st
    .parallel(&iv));
register_global!("te.StageUnroll", |st: Stage, iv: IterVar| st.unroll(&iv));
register_global!(
    "te.StagePragma",
    |st: Stage, iv: IterVar, key: String, value: PrimExpr| st.pragma(&iv, &key, value)
);
register_global!(
    "te.StageComputeAt",
    |st: Stage, parent: Stage, iv: IterVar| st.compute_at(&parent, &iv)
);
register_global!("te.StageComputeInline", |st: Stage| st.compute_inline());
register_global!("te.StageComputeRoot", |st: Stage| st.compute_root());
register_global!("te.ThreadAxis", |tag: String| crate::thread_axis(&tag));
register_global!("te.StageBind", |st: Stage, iv: IterVar, thread: IterVar| st
    .bind(&iv, &thread));
register_global!("te.StageSetScope", |st: Stage, scope: String| st
    .set_scope(&scope));
register_global!(
    "te.ScheduleCacheRead",
    |s: Schedule, t: Tensor, scope: String, readers: NodeList<Operation>| s
        .cache_read(&t, &scope, &readers)
);
register_global!(
    "te.ScheduleCacheWrite",
    |s: Schedule, t: Tensor, scope: String| s.cache_write(&t, &scope)
);
register_global!("te.InferBound", |s: Schedule| -> Result<Map> {
    let pairs: Vec<(Any, Any)> = crate::infer_bound(&s)?
        .into_iter()
        .map(|(iv, r)| (Any::from(iv), Any::from(r)))
        .collect();
    Ok(Map::new(pairs))
});
register_global!("te.Lower", |s: Schedule,
                              args: NodeList<Tensor>,
                              name: String| {
    lower(&s, &args, &name)
});
