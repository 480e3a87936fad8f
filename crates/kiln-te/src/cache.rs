//! `cache_read` and `cache_write`: stages that copy a tensor into (or compute it in) another
//! storage scope, with the dataflow of the other stages rewritten to go through them (TVM's
//! `schedule_dataflow_rewrite.cc`).

use crate::reduce::Reduce;
use crate::schedule::{root_iter_vars, Schedule, ScheduleInner, StageData};
use crate::tensor::{compute_axes, IterVar, OpKind, Operation, Tensor};
use kiln_ffi::{Error, Map, Result};
use kiln_tir::mutator::{substitute, transform_expr};
use kiln_tir::{ExprKind, PrimExpr, Var};
use std::collections::HashMap;

/// `op` with every read of a tensor in `vmap` redirected to its replacement (same indices);
/// `None` when nothing changed.
fn rewrite_reads(op: &Operation, vmap: &[(Tensor, Tensor)]) -> Option<Operation> {
    let c = op.as_compute()?;
    let mut changed = false;
    let body: Vec<PrimExpr> = c
        .body
        .iter()
        .map(|b| {
            transform_expr(b, |e| {
                let ExprKind::BufferLoad { buffer, indices } = e.kind() else {
                    return e;
                };
                let Some(t) = Tensor::from_buffer(buffer) else {
                    return e;
                };
                match vmap.iter().find(|(old, _)| *old == t) {
                    Some((_, new)) => {
                        changed = true;
                        new.at(indices)
                    }
                    None => e,
                }
            })
        })
        .collect();
    changed.then(|| {
        Operation::compute(
            op.name(),
            op.tag(),
            op.object().attrs.clone(),
            c.axis.to_vec(),
            c.reduce_axis.to_vec(),
            body,
        )
    })
}

/// Rewrites the stages (all but `skip`) whose operations read a tensor of `vmap`; stages
/// downstream follow the rewritten operations (TVM's `ReplaceDataFlow`).
fn replace_dataflow(inner: &mut ScheduleInner, mut vmap: Vec<(Tensor, Tensor)>, skip: &[usize]) {
    let order = inner.order.clone();
    for s in order {
        if skip.contains(&s) {
            continue;
        }
        let old = inner.stages[s].op.clone();
        if let Some(new) = rewrite_reads(&old, &vmap) {
            for k in 0..old.num_outputs() {
                vmap.push((old.output(k), new.output(k)));
            }
            for out in inner.outputs.iter_mut() {
                if *out == old {
                    *out = new.clone();
                }
            }
            inner.stages[s].op = new;
        }
    }
}

impl Schedule {
    /// A stage copying `tensor` into storage `scope` that `readers` (operations) read instead
    /// of `tensor` (TVM's `cache_read`). Returns the cache tensor (named `<tensor>.<scope>`),
    /// computed at the root until scheduled otherwise.
    pub fn cache_read(
        &self,
        tensor: &Tensor,
        scope: &str,
        readers: &[Operation],
    ) -> Result<Tensor> {
        let mut inner = self.lock();
        let src = inner.stage_of(tensor.op()).ok_or_else(|| {
            Error::value_error(format!(
                "cache_read: `{}` is not in the schedule",
                tensor.name()
            ))
        })?;
        // Read the tensor of the stage's current operation.
        let current = inner.stages[src].op.output(tensor.value_index());
        let axes = compute_axes(tensor.shape());
        let vars: Vec<Var> = axes.iter().map(|iv| iv.var().clone()).collect();
        let body = current.at_vars(&vars);
        let name = format!("{}.{scope}", tensor.name());
        let cache_op = Operation::compute(
            &name,
            "",
            Map::new(Vec::new()),
            axes,
            Vec::new(),
            vec![body],
        );
        let cache = cache_op.output(0);
        let mut stage = StageData::new(cache_op, false);
        stage.scope = scope.to_string();
        let id = inner.stages.len();
        inner.stages.push(stage);
        let pos = inner
            .order
            .iter()
            .position(|&s| s == src)
            .expect("stage in order");
        inner.order.insert(pos + 1, id);
        // Only the readers change first; their consumers follow.
        let mut vmap = Vec::new();
        for r in readers {
            let rs = inner.stage_of(r).ok_or_else(|| {
                Error::value_error(format!(
                    "cache_read: reader `{}` is not in the schedule",
                    r.name()
                ))
            })?;
            let old = inner.stages[rs].op.clone();
            let new =
                rewrite_reads(&old, &[(current.clone(), cache.clone())]).ok_or_else(|| {
                    Error::value_error(format!(
                        "cache_read: `{}` does not read `{}`",
                        r.name(),
                        tensor.name()
                    ))
                })?;
            for k in 0..old.num_outputs() {
                vmap.push((old.output(k), new.output(k)));
            }
            inner.stages[rs].op = new;
        }
        replace_dataflow(&mut inner, vmap, &[]);
        Ok(cache)
    }

    /// Computes `tensor` into a stage in storage `scope` and makes `tensor`'s stage a copy of
    /// it (TVM's `cache_write`). Returns the cache tensor (named `<tensor>.<scope>`); its axes
    /// are fresh (`i.c`, ...) and its reduction axes are the original ones. Use it before any
    /// other primitive on the tensor's stage (the stage's loops are reset).
    pub fn cache_write(&self, tensor: &Tensor, scope: &str) -> Result<Tensor> {
        let mut inner = self.lock();
        let s = inner.stage_of(tensor.op()).ok_or_else(|| {
            Error::value_error(format!(
                "cache_write: `{}` is not in the schedule",
                tensor.name()
            ))
        })?;
        let op = inner.stages[s].op.clone();
        let OpKind::Compute(c) = op.kind() else {
            return Err(Error::value_error(format!(
                "cache_write: `{}` is not a compute",
                tensor.name()
            )));
        };
        if op.num_outputs() != 1 {
            return Err(Error::value_error(
                "cache_write: only single-output computes",
            ));
        }
        let new_axis: Vec<IterVar> = c
            .axis
            .iter()
            .map(|iv| {
                IterVar::new(
                    iv.dom().cloned(),
                    iv.var().copy_with_name(&format!("{}.c", iv.name())),
                    iv.iter_type(),
                )
            })
            .collect();
        let map: HashMap<Var, PrimExpr> = c
            .axis
            .iter()
            .zip(&new_axis)
            .map(|(o, n)| (o.var().clone(), n.expr()))
            .collect();
        let body = substitute(&c.body[0], &map);
        debug_assert!(Reduce::decode(&body).is_some() != c.reduce_axis.is_empty());
        let name = format!("{}.{scope}", op.name());
        let cache_op = Operation::compute(
            &name,
            op.tag(),
            op.object().attrs.clone(),
            new_axis,
            c.reduce_axis.to_vec(),
            vec![body],
        );
        let cache = cache_op.output(0);
        let idx: Vec<PrimExpr> = c.axis.iter().map(IterVar::expr).collect();
        let copy = Operation::compute(
            op.name(),
            op.tag(),
            op.object().attrs.clone(),
            c.axis.to_vec(),
            Vec::new(),
            vec![cache.at(&idx)],
        );
        let mut cstage = StageData::new(cache_op, false);
        cstage.scope = scope.to_string();
        let id = inner.stages.len();
        inner.stages.push(cstage);
        let pos = inner
            .order
            .iter()
            .position(|&x| x == s)
            .expect("stage in order");
        inner.order.insert(pos, id);
        {
            let st = &mut inner.stages[s];
            st.op = copy.clone();
            st.all_iter_vars = root_iter_vars(&copy);
            st.leaf_iter_vars = st.all_iter_vars.clone();
            st.relations.clear();
            st.for_kind.clear();
            st.pragmas.clear();
            st.prefetches.clear();
        }
        for out in inner.outputs.iter_mut() {
            if *out == op {
                *out = copy.clone();
            }
        }
        replace_dataflow(&mut inner, vec![(op.output(0), copy.output(0))], &[s, id]);
        Ok(cache)
    }
}
