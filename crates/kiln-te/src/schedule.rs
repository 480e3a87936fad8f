//! Schedules (`te.Schedule`) and their stages (`te.Stage`): how each operation's loop nest is
//! split, fused, reordered, annotated and placed, following TVM's `te/schedule`.
//!
//! A [`Schedule`] is a reflected object with interior mutability (the primitives change it in
//! place, as in TVM); a [`Stage`] is a handle naming one stage of a schedule. Every primitive
//! returns an error (`ValueError`) when used on something that is not a leaf axis of the stage.

use crate::tensor::{iter_type, IterVar, OpKind, Operation, Tensor};
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Any, AnyView, Error, Object, ObjectRef, ObjectType, Result, TryFromAny};
use kiln_tir::{ForKind, Operand, PrimExpr, Var};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Mutex, MutexGuard};

/// How one iteration variable derives from others.
#[derive(Clone, Debug)]
pub(crate) enum Relation {
    /// `parent = outer * factor + inner` (with `factor` or `nparts` given).
    Split {
        parent: IterVar,
        outer: IterVar,
        inner: IterVar,
        factor: Option<PrimExpr>,
        nparts: Option<PrimExpr>,
    },
    /// `fused = outer * extent(inner) + inner`.
    Fuse {
        outer: IterVar,
        inner: IterVar,
        fused: IterVar,
    },
}

/// Where a stage's loop nest goes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Attach {
    /// At the top of the function.
    Root,
    /// Substituted into its consumers; no loop nest.
    Inline,
    /// Inside the loop of `iv` of stage `stage`.
    At { stage: usize, iv: IterVar },
}

/// One stage: an operation with its loop structure.
#[derive(Clone, Debug)]
pub(crate) struct StageData {
    pub op: Operation,
    /// The operation this stage was created for (differs from `op` after `cache_write`).
    pub origin_op: Operation,
    pub all_iter_vars: Vec<IterVar>,
    pub leaf_iter_vars: Vec<IterVar>,
    pub relations: Vec<Relation>,
    pub for_kind: HashMap<Var, ForKind>,
    pub pragmas: HashMap<Var, Vec<(String, PrimExpr)>>,
    /// Software prefetches: at each iteration of the loop, the part of the tensor that the
    /// iteration `offset` later reads ([`Stage::prefetch`]).
    pub prefetches: HashMap<Var, Vec<(Tensor, i64)>>,
    /// Loops bound to thread axes: leaf variable to thread axis.
    pub bind: HashMap<Var, IterVar>,
    pub attach: Attach,
    pub is_output: bool,
    pub scope: String,
}

impl StageData {
    pub(crate) fn new(op: Operation, is_output: bool) -> StageData {
        let roots = root_iter_vars(&op);
        StageData {
            origin_op: op.clone(),
            op,
            all_iter_vars: roots.clone(),
            leaf_iter_vars: roots,
            relations: Vec::new(),
            for_kind: HashMap::new(),
            pragmas: HashMap::new(),
            prefetches: HashMap::new(),
            bind: HashMap::new(),
            attach: Attach::Root,
            is_output,
            scope: "global".into(),
        }
    }

    pub(crate) fn is_placeholder(&self) -> bool {
        matches!(self.op.kind(), OpKind::Placeholder(_))
    }

    fn leaf_pos(&self, iv: &IterVar) -> Result<usize> {
        self.leaf_iter_vars
            .iter()
            .position(|x| x == iv)
            .ok_or_else(|| {
                Error::value_error(format!(
                    "stage `{}`: `{}` is not a leaf axis (leaves: {})",
                    self.op.name(),
                    iv.name(),
                    self.leaf_iter_vars
                        .iter()
                        .map(|x| x.name().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }
}

/// The root iteration variables of an operation: its axes, then its reduction axes.
pub(crate) fn root_iter_vars(op: &Operation) -> Vec<IterVar> {
    match op.kind() {
        OpKind::Placeholder(_) | OpKind::Extern(_) => Vec::new(),
        OpKind::Compute(c) => c.axis.iter().chain(c.reduce_axis.iter()).cloned().collect(),
    }
}

/// The mutable part of a schedule.
#[derive(Default, Debug)]
pub(crate) struct ScheduleInner {
    /// Stages by id (never removed).
    pub stages: Vec<StageData>,
    /// Stage ids, producers before consumers.
    pub order: Vec<usize>,
    /// The operations the schedule was created for.
    pub outputs: Vec<Operation>,
}

impl ScheduleInner {
    /// The stage computing `op` (or created for it).
    pub(crate) fn stage_of(&self, op: &Operation) -> Option<usize> {
        self.order
            .iter()
            .copied()
            .find(|&s| self.stages[s].op == *op)
            .or_else(|| {
                self.order
                    .iter()
                    .copied()
                    .find(|&s| self.stages[s].origin_op == *op)
            })
    }
}

/// The schedule node (`te.Schedule`); its state is not reflected.
#[derive(Object)]
#[object(type_key = "te.Schedule")]
#[repr(C)]
pub struct ScheduleObj {
    /// The stages and their order.
    #[object(skip)]
    inner: Mutex<ScheduleInner>,
}

/// A schedule handle (shared: clones see the same stages).
#[derive(Clone, ObjectRef)]
#[object_ref(methods)]
pub struct Schedule(ObjectRef<ScheduleObj>);

/// A schedule for computing `ops` and everything they read (TVM's `te.create_schedule`).
pub fn create_schedule(ops: &[Operation]) -> Schedule {
    let mut inner = ScheduleInner {
        outputs: ops.to_vec(),
        ..Default::default()
    };
    let mut seen = HashSet::new();
    fn visit(op: &Operation, inner: &mut ScheduleInner, seen: &mut HashSet<usize>) {
        if !seen.insert(op.key()) {
            return;
        }
        for t in op.input_tensors() {
            visit(t.op(), inner, seen);
        }
        let is_output = inner.outputs.contains(op);
        inner.order.push(inner.stages.len());
        inner.stages.push(StageData::new(op.clone(), is_output));
    }
    for op in ops {
        visit(op, &mut inner, &mut seen);
    }
    Schedule(ObjectRef::new(ScheduleObj {
        inner: Mutex::new(inner),
    }))
}

impl Schedule {
    pub(crate) fn lock(&self) -> MutexGuard<'_, ScheduleInner> {
        self.0.inner.lock().recover()
    }

    /// The stage of an operation (also found through the operation a stage was created for).
    ///
    /// # Panics
    /// When the operation is not part of the schedule.
    pub fn stage_op(&self, op: &Operation) -> Stage {
        self.try_stage_op(op).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Schedule::stage_op`], with an error.
    pub fn try_stage_op(&self, op: &Operation) -> Result<Stage> {
        let id = self.lock().stage_of(op).ok_or_else(|| {
            Error::value_error(format!("operation `{}` is not in the schedule", op.name()))
        })?;
        Ok(Stage {
            sch: self.clone(),
            id,
        })
    }

    /// The stage of the tensor's operation (TVM's `s[T]`).
    ///
    /// # Panics
    /// When the tensor is not part of the schedule.
    pub fn stage(&self, t: &Tensor) -> Stage {
        self.stage_op(t.op())
    }

    /// The stages, producers first.
    pub fn stages(&self) -> Vec<Stage> {
        let order = self.lock().order.clone();
        order
            .into_iter()
            .map(|id| Stage {
                sch: self.clone(),
                id,
            })
            .collect()
    }

    /// The operations the schedule was created for.
    pub fn outputs(&self) -> Vec<Operation> {
        self.lock().outputs.clone()
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        let names: Vec<&str> = inner
            .order
            .iter()
            .map(|&s| inner.stages[s].op.name())
            .collect();
        write!(f, "Schedule({})", names.join(", "))
    }
}

/// The stage object for C and Python (`te.Stage`): a schedule and a stage id.
#[derive(Object)]
#[object(type_key = "te.Stage")]
#[repr(C)]
pub struct StageObj {
    /// The schedule.
    pub schedule: Schedule,
    /// The stage id within it.
    pub id: i64,
}

/// A stage handle: one operation's loop structure in a schedule.
#[derive(Clone)]
pub struct Stage {
    sch: Schedule,
    id: usize,
}

impl From<Stage> for Any {
    fn from(s: Stage) -> Any {
        ObjectRef::new(StageObj {
            schedule: s.sch,
            id: s.id as i64,
        })
        .into()
    }
}

impl TryFromAny for Stage {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        ObjectRef::<StageObj>::try_from_view(v).map(|o| Stage {
            sch: o.schedule.clone(),
            id: o.id as usize,
        })
    }
    fn type_name() -> String {
        StageObj::TYPE_KEY.into()
    }
}

fn fresh_iter_var(name: &str, like: &IterVar) -> IterVar {
    IterVar::new(None, like.var().copy_with_name(name), like.iter_type())
}

impl Stage {
    fn with<R>(&self, f: impl FnOnce(&mut StageData) -> Result<R>) -> Result<R> {
        let mut inner = self.sch.lock();
        f(&mut inner.stages[self.id])
    }

    /// The schedule this stage belongs to.
    pub fn schedule(&self) -> &Schedule {
        &self.sch
    }

    /// The operation the stage computes now.
    pub fn op(&self) -> Operation {
        self.sch.lock().stages[self.id].op.clone()
    }

    /// The loop variables, outermost first.
    pub fn leaf_iter_vars(&self) -> Vec<IterVar> {
        self.sch.lock().stages[self.id].leaf_iter_vars.clone()
    }

    /// Every iteration variable (roots and those that splits and fuses made).
    pub fn all_iter_vars(&self) -> Vec<IterVar> {
        self.sch.lock().stages[self.id].all_iter_vars.clone()
    }

    /// Splits `parent` into `(outer, inner)` with `inner` of extent `factor`; when the extent
    /// is not a multiple, lowering guards the body.
    pub fn split(
        &self,
        parent: &IterVar,
        factor: impl Into<Operand>,
    ) -> Result<(IterVar, IterVar)> {
        let factor = factor.into().into_expr_of(parent.var().dtype())?;
        self.split_impl(parent, Some(factor), None)
    }

    /// Splits `parent` into `(outer, inner)` with `outer` of extent `nparts`.
    pub fn split_nparts(
        &self,
        parent: &IterVar,
        nparts: impl Into<Operand>,
    ) -> Result<(IterVar, IterVar)> {
        let nparts = nparts.into().into_expr_of(parent.var().dtype())?;
        self.split_impl(parent, None, Some(nparts))
    }

    fn split_impl(
        &self,
        parent: &IterVar,
        factor: Option<PrimExpr>,
        nparts: Option<PrimExpr>,
    ) -> Result<(IterVar, IterVar)> {
        self.with(|s| {
            let pos = s.leaf_pos(parent)?;
            let outer = fresh_iter_var(&format!("{}.outer", parent.name()), parent);
            let inner = fresh_iter_var(&format!("{}.inner", parent.name()), parent);
            s.leaf_iter_vars
                .splice(pos..=pos, [outer.clone(), inner.clone()]);
            s.all_iter_vars.extend([outer.clone(), inner.clone()]);
            s.relations.push(Relation::Split {
                parent: parent.clone(),
                outer: outer.clone(),
                inner: inner.clone(),
                factor,
                nparts,
            });
            Ok((outer, inner))
        })
    }

    /// Fuses two adjacent loops (`outer` directly outside `inner`) into one.
    pub fn fuse(&self, outer: &IterVar, inner: &IterVar) -> Result<IterVar> {
        self.with(|s| {
            let po = s.leaf_pos(outer)?;
            let pi = s.leaf_pos(inner)?;
            if pi != po + 1 {
                return Err(Error::value_error(format!(
                    "stage `{}`: can only fuse adjacent loops, `{}` is not directly outside `{}`",
                    s.op.name(),
                    outer.name(),
                    inner.name()
                )));
            }
            if outer.is_reduce() != inner.is_reduce() {
                return Err(Error::value_error(format!(
                    "stage `{}`: cannot fuse a reduction axis with a data-parallel one",
                    s.op.name()
                )));
            }
            let fused = fresh_iter_var(&format!("{}.{}.fused", outer.name(), inner.name()), outer);
            s.leaf_iter_vars.splice(po..=pi, [fused.clone()]);
            s.all_iter_vars.push(fused.clone());
            s.relations.push(Relation::Fuse {
                outer: outer.clone(),
                inner: inner.clone(),
                fused: fused.clone(),
            });
            Ok(fused)
        })
    }

    /// Puts the given loops in this order, in the positions they occupy together.
    pub fn reorder(&self, order: &[IterVar]) -> Result<()> {
        self.with(|s| {
            let mut pos = order
                .iter()
                .map(|iv| s.leaf_pos(iv))
                .collect::<Result<Vec<_>>>()?;
            let distinct: HashSet<usize> = pos.iter().copied().collect();
            if distinct.len() != pos.len() {
                return Err(Error::value_error(format!(
                    "stage `{}`: reorder names a loop twice",
                    s.op.name()
                )));
            }
            pos.sort_unstable();
            for (p, iv) in pos.into_iter().zip(order) {
                s.leaf_iter_vars[p] = iv.clone();
            }
            Ok(())
        })
    }

    /// Tiles two loops: splits `x` by `x_factor` and `y` by `y_factor`, and orders the results
    /// `(x.outer, y.outer, x.inner, y.inner)`, which it returns.
    pub fn tile(
        &self,
        x: &IterVar,
        y: &IterVar,
        x_factor: impl Into<Operand>,
        y_factor: impl Into<Operand>,
    ) -> Result<(IterVar, IterVar, IterVar, IterVar)> {
        let (xo, xi) = self.split(x, x_factor)?;
        let (yo, yi) = self.split(y, y_factor)?;
        self.reorder(&[xo.clone(), yo.clone(), xi.clone(), yi.clone()])?;
        Ok((xo, yo, xi, yi))
    }

    fn set_kind(&self, iv: &IterVar, kind: ForKind) -> Result<()> {
        self.with(|s| {
            s.leaf_pos(iv)?;
            if let Some(t) = s.bind.get(iv.var()) {
                return Err(Error::value_error(format!(
                    "stage `{}`: loop `{}` is bound to `{}` and cannot be made {}",
                    s.op.name(),
                    iv.name(),
                    t.thread_tag(),
                    kind.name()
                )));
            }
            s.for_kind.insert(iv.var().clone(), kind);
            Ok(())
        })
    }

    /// Makes a loop a vector loop (its iterations become lanes).
    pub fn vectorize(&self, iv: &IterVar) -> Result<()> {
        self.set_kind(iv, ForKind::Vectorized)
    }

    /// Runs a loop's iterations in parallel threads.
    pub fn parallel(&self, iv: &IterVar) -> Result<()> {
        self.set_kind(iv, ForKind::Parallel)
    }

    /// Unrolls a loop.
    pub fn unroll(&self, iv: &IterVar) -> Result<()> {
        self.set_kind(iv, ForKind::Unrolled)
    }

    /// Annotates a loop with `pragma_<key> = value` (an attribute statement around it).
    pub fn pragma(&self, iv: &IterVar, key: &str, value: impl Into<Operand>) -> Result<()> {
        let value = value.into().into_expr();
        self.with(|s| {
            s.leaf_pos(iv)?;
            s.pragmas
                .entry(iv.var().clone())
                .or_default()
                .push((key.to_string(), value));
            Ok(())
        })
    }

    /// Prefetches `tensor` in loop `iv` (TVM's `Stage.prefetch`): each iteration first asks the
    /// cache for the part of `tensor` that the iteration `offset` later reads (its loads inside
    /// the loop, this stage's and those of the stages computed there), one hint per cache line
    /// (`tir.prefetch`, inserted by the InjectPrefetch pass); the last iterations prefetch
    /// nothing. Errors when `iv` is not a leaf axis or `offset` is not positive.
    pub fn prefetch(&self, tensor: &Tensor, iv: &IterVar, offset: i64) -> Result<()> {
        if offset < 1 {
            return Err(kiln_ffi::Error::value_error(format!(
                "prefetch of `{}`: the offset must be at least one iteration, got {offset}",
                tensor.name()
            )));
        }
        self.with(|s| {
            s.leaf_pos(iv)?;
            s.prefetches
                .entry(iv.var().clone())
                .or_default()
                .push((tensor.clone(), offset));
            Ok(())
        })
    }

    /// Binds loop `iv` to the thread axis `thread` (from [`crate::thread_axis`]): lowering
    /// replaces the loop by a launch of the axis over its body (TVM's `Stage.bind`). Errors
    /// when `iv` is not a leaf axis or is bound already, when the stage binds another loop to
    /// the same tag, when `thread` is not a thread axis, and for reduction axes (cross-thread
    /// reductions are not supported).
    pub fn bind(&self, iv: &IterVar, thread: &IterVar) -> Result<()> {
        let tag = crate::thread::thread_tag_of(thread)?;
        self.with(|s| {
            s.leaf_pos(iv)?;
            let stage = s.op.name().to_string();
            if let Some(prev) = s.bind.get(iv.var()) {
                return Err(Error::value_error(format!(
                    "bind: stage `{stage}`: loop `{}` is already bound to `{}`",
                    iv.name(),
                    prev.thread_tag()
                )));
            }
            if let Some((v, _)) = s
                .bind
                .iter()
                .find(|(_, t)| t.thread_tag() == thread.thread_tag())
            {
                return Err(Error::value_error(format!(
                    "bind: stage `{stage}`: `{}` is bound to loop `{}` already, cannot bind                      `{}` to it too",
                    thread.thread_tag(),
                    v.name(),
                    iv.name()
                )));
            }
            if is_reduce_iv(iv) {
                let what = match tag.rank {
                    kiln_tir::thread_axis::ThreadRank::Block => {
                        "a reduction axis cannot be bound to a block index"
                    }
                    kiln_tir::thread_axis::ThreadRank::Thread => {
                        "cross-thread reductions are not supported"
                    }
                };
                return Err(Error::value_error(format!(
                    "bind: stage `{stage}`: `{}` is a reduction axis and `{}` a thread axis:                      {what}",
                    iv.name(),
                    thread.thread_tag()
                )));
            }
            if let Some(kind) = s.for_kind.get(iv.var()) {
                return Err(Error::value_error(format!(
                    "bind: stage `{stage}`: loop `{}` is already {} and cannot be bound to a                      thread",
                    iv.name(),
                    kind.name()
                )));
            }
            s.bind.insert(iv.var().clone(), thread.clone());
            Ok(())
        })
    }

    /// Computes this stage inside the loop `iv` of `parent`, only the region that iteration
    /// needs (bound inference finds it).
    pub fn compute_at(&self, parent: &Stage, iv: &IterVar) -> Result<()> {
        let mut inner = self.sch.lock();
        if !parent.sch.same_as(&self.sch) {
            return Err(Error::value_error(
                "compute_at: stages of different schedules",
            ));
        }
        inner.stages[parent.id].leaf_pos(iv)?;
        if parent.id == self.id {
            return Err(Error::value_error(
                "compute_at: a stage cannot attach to itself",
            ));
        }
        if !matches!(inner.stages[self.id].op.kind(), OpKind::Compute(_)) {
            return Err(Error::value_error(format!(
                "compute_at: `{}` is not a compute stage (placeholders and extern operations \
                 stay at the root)",
                inner.stages[self.id].op.name()
            )));
        }
        inner.stages[self.id].attach = Attach::At {
            stage: parent.id,
            iv: iv.clone(),
        };
        Ok(())
    }

    /// Substitutes this stage's expression into its consumers (no loop nest of its own).
    pub fn compute_inline(&self) -> Result<()> {
        self.with(|s| {
            match s.op.as_compute() {
                Some(c) if c.reduce_axis.is_empty() => {}
                _ => {
                    return Err(Error::value_error(format!(
                        "compute_inline: `{}` is not an element-wise compute (reductions and \
                         placeholders cannot be inlined)",
                        s.op.name()
                    )))
                }
            }
            s.attach = Attach::Inline;
            Ok(())
        })
    }

    /// Computes this stage at the top level again (undoes `compute_at` / `compute_inline`).
    pub fn compute_root(&self) -> Result<()> {
        self.with(|s| {
            s.attach = Attach::Root;
            Ok(())
        })
    }

    /// Sets the storage scope of the stage's buffers (`"global"`, `"local"`, ...).
    pub fn set_scope(&self, scope: &str) -> Result<()> {
        self.with(|s| {
            s.scope = scope.to_string();
            Ok(())
        })
    }
}

impl fmt::Debug for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stage({})", self.op().name())
    }
}

/// True when an iteration variable is a reduction axis (or derived from one).
pub(crate) fn is_reduce_iv(iv: &IterVar) -> bool {
    iv.iter_type() == iter_type::COMM_REDUCE
}
