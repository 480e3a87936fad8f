//! Kiln's tensor expressions (TVM's `te`): describe a tensor computation point by point,
//! schedule its loops, and lower the schedule to a `tir.PrimFunc`.
//!
//! | module | what |
//! | --- | --- |
//! | [`tensor`] | [`Tensor`] (`te.Tensor`), [`Operation`] (`te.PlaceholderOp`, `te.ComputeOp`), [`IterVar`] (`te.IterVar`), [`placeholder`], [`compute`], [`reduce_axis`] |
//! | [`extern_op`] | [`extern_op()`] (`te.extern`): tensors computed by a TIR statement, for recurrences |
//! | [`reduce`] | [`sum`], [`max`], [`min`], [`prod`], [`comm_reduce`] (any commutative combiner with an identity) |
//! | [`schedule`] | [`create_schedule`], [`Schedule`] (`te.Schedule`), [`Stage`] (`te.Stage`): split, fuse, reorder, tile, vectorize, parallel, unroll, pragma, compute_at, compute_inline |
//! | `thread` | [`thread_axis`] and [`Stage::bind`]: loops bound to GPU thread axes (`blockIdx.x`, `threadIdx.x`, ...) |
//! | `cache` | [`Schedule::cache_read`], [`Schedule::cache_write`] |
//! | [`bound`] | [`infer_bound`]: the range of every loop |
//! | [`lower()`] | the schedule as a `PrimFunc` |
//!
//! ```
//! use kiln_te::*;
//! use kiln_tir::{DataType, PrimExpr, Var};
//! let n = Var::size_var("n", DataType::int(32));
//! let f32 = DataType::float(32);
//! let a = placeholder(&[n.to_expr(), PrimExpr::i32(64)], f32, "A");
//! let k = reduce_axis_n(64, "k");
//! let b = compute(&[n.to_expr()], |i| sum(a.at(&[i[0].to_expr(), k.expr()]), &[k.clone()]), "B");
//! let s = create_schedule(&[b.op().clone()]);
//! let (ko, ki) = s.stage(&b).split(&k, 16).unwrap();
//! s.stage(&b).unroll(&ki).unwrap();
//! let f = lower(&s, &[a, b], "rowsum").unwrap();
//! assert!(f.to_string().contains("for k.inner in T.unroll(0, 16):"));
//! ```
//!
//! # Representation choices
//!
//! - **Tensor reads** are `tir.BufferLoad`s of the tensor itself: `te.Tensor` is a subtype of
//!   `tir.Buffer` (buffer fields first, then `op` and `value_index`), so the TIR printer,
//!   visitors, mutators, structural equality and JSON handle compute bodies unchanged; this
//!   stands for TVM's `ProducerLoad`. Lowering maps each tensor to a real buffer.
//! - **Reductions** are `tir.Call`s of `te.reduce` (see [`reduce`] for the argument layout):
//!   Kiln's TIR has no `Reduce` node, and the call keeps the combiner, identity, condition and
//!   axes together in one expression.
//! - Loops start at 0 and split/fuse/compute_at results are rebuilt from them; an intermediate
//!   stage's buffer covers the region its consumers need (multi-dimensional; StorageFlatten
//!   flattens later).
//!
//! # Global functions
//!
//! What a Python `kiln.te` needs (TVM's `te._ffi_api` shapes; `?` = optional/None):
//!
//! - Building: `te.Placeholder(shape, dtype, name)` -> Tensor; `te.IterVar(dom?, var,
//!   iter_type, thread_tag)`; `te.ComputeOp(name, tag, attrs?, axis, body)` -> Operation
//!   (Python's `te.compute` makes one `IterVar` per dimension, calls the user function on
//!   their vars, then calls this; reductions are found in the body); `te.OpGetOutput(op, i)`,
//!   `te.OpNumOutputs(op)`, `te.OpInputTensors(op)`, `te.TensorOp(t)`; `te.TensorLoad(t,
//!   indices)` (Python `T[i, j]` / `T(i, j)`).
//! - Reductions: `te.Sum(source, axis, where?)`, `te.Max(source, axis)`, `te.Min(source,
//!   axis)`, `te.Prod(source, axis)`, `te.ReduceWithCombiner(combined, lhs, rhs, identity,
//!   source, axis)` (Python's `te.comm_reducer` builds `combined` from two fresh vars),
//!   `te.CommReduce(lhs, rhs, combined, identity, source, axis, where?)`. Reduction axes come
//!   from `te.IterVar(range, var, 2, "")`.
//! - Scheduling: `te.CreateSchedule(ops)`, `te.ScheduleGetStage(sch, op)` (`s[T]`),
//!   `te.StageOp`, `te.StageLeafIterVars`, `te.StageSplitByFactor(stage, iv, factor)` /
//!   `te.StageSplitByNParts` -> `[outer, inner]`, `te.StageFuse(stage, outer, inner)`,
//!   `te.StageReorder(stage, ivs)`, `te.StageTile(stage, x, y, xf, yf)` -> `[xo, yo, xi,
//!   yi]`, `te.StageVectorize` / `te.StageParallel` / `te.StageUnroll(stage, iv)`,
//!   `te.StagePragma(stage, iv, key, value)`, `te.StageComputeAt(stage, parent, iv)`,
//!   `te.StageComputeInline(stage)`, `te.StageBind(stage, iv, thread_axis)`, `te.ThreadAxis(tag)`, `te.StageComputeRoot(stage)`, `te.StageSetScope(stage,
//!   scope)`, `te.ScheduleCacheRead(sch, tensor, scope, readers)`,
//!   `te.ScheduleCacheWrite(sch, tensor, scope)`.
//! - Analysis and lowering: `te.InferBound(sch)` -> `{IterVar: Range}`, `te.Lower(sch, args,
//!   name)` -> `tir.PrimFunc`.
//!
//! Expressions themselves (`+`, `exp`, `if_then_else`, ...) are built with the `tir.*` globals.

pub mod bound;
mod cache;
pub mod extern_op;
mod globals;
pub mod lower;
pub mod reduce;
pub mod schedule;
pub mod tensor;
mod thread;

pub use bound::infer_bound;
pub use extern_op::{extern_op, ExternOutput};
pub use globals::link_globals;
pub use kiln_tir::op::if_then_else;
pub use lower::lower;
pub use reduce::{comm_reduce, max, max_value, min, min_value, prod, sum, sum_where, Reduce};
pub use schedule::{create_schedule, Schedule, Stage};
pub use tensor::{
    compute, compute_multi, compute_op, iter_type, placeholder, reduce_axis, reduce_axis_n,
    IterVar, OpKind, Operation, Tensor,
};
pub use thread::thread_axis;
