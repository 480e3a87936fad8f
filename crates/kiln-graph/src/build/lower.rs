//! Lowering one fused (`Primitive = 1`) function to ONE `PrimFunc` (TVM's `LowerTE` /
//! `ScheduleBuilder`).
//!
//! The function's parameters become `te` placeholders; the body is walked in post order and
//! every operator call becomes its TOPI compute ([`super::compute`]). The *master* op, the one
//! with the heaviest fusion pattern (out-elementwise-fusable such as conv2d/dense, then
//! reductions; TVM's rule), picks the schedule: the x86 schedule its definition names applied to the
//! group's output (those schedules take an injective epilogue), the reduction schedule for a
//! reduction, else the injective schedule. GPU targets (`opencl`, `cuda`) get thread-bound
//! schedules instead, whatever the master ([`ScheduleFamily`] decides which, once per target). The function is lowered through
//! `kiln_codegen::driver::lower` with the placeholders then the output(s) as arguments.

use super::compute::compute;
use crate::ir::{Expr, Function, Type};
use crate::op::{self, OpPattern};
use kiln_codegen::target::{Target, TargetKind};
use kiln_ffi::{DataType, Error, Result};
use kiln_te::{create_schedule, placeholder, Schedule, Tensor};
use kiln_tir::{CpuDesc, PrimExpr, PrimFunc};
use kiln_topi::schedule::{inline_injective, producers};
use std::collections::HashMap;

/// The tensor type of `t`, or an error naming `what`.
fn tensor_type(t: &Type, what: &str) -> Result<(Vec<i64>, DataType)> {
    t.as_tensor()
        .map(|(s, d)| (s.to_vec(), d))
        .ok_or_else(|| Error::value_error(format!("graph build: {what} must be a tensor, got {t}")))
}

/// The dimensions of a placeholder of `shape`; a dimension of -1 (known at run time) is the
/// dimension of `aligned` at the same place counted from the right, when given (the result of
/// an elementwise function: its inputs' run-time dimensions are the result's), else a size
/// variable of its own (`<name>_d<axis>`); the kernel binds them from the tensors it is
/// called with.
fn placeholder_dims(shape: &[i64], name: &str, aligned: Option<&[PrimExpr]>) -> Vec<PrimExpr> {
    shape
        .iter()
        .enumerate()
        .map(|(j, &d)| {
            if d >= 0 {
                return PrimExpr::i32(d);
            }
            let at = aligned.and_then(|a| (j + a.len()).checked_sub(shape.len()).map(|k| &a[k]));
            match at {
                Some(e) => e.clone(),
                None => {
                    kiln_tir::Var::size_var(&format!("{name}_d{j}"), DataType::int(32)).to_expr()
                }
            }
        })
        .collect()
}

/// The value of a scalar constant as `f64` (any numeric or bool dtype).
fn scalar_value(t: &kiln_runtime::tensor::Tensor) -> Result<f64> {
    t.to_f64_vec()
        .map_err(|e| {
            Error::value_error(format!(
                "graph build: a scalar constant of dtype {} inside a fused function: {}",
                t.dtype(),
                e.message()
            ))
        })?
        .first()
        .copied()
        .ok_or_else(|| Error::value_error("graph build: an empty scalar constant"))
}

/// A rank-0 compute holding a scalar constant (inlined by the schedules).
fn scalar_tensor(t: &kiln_runtime::tensor::Tensor) -> Result<Tensor> {
    if t.shape().iter().product::<i64>() != 1 {
        return Err(Error::value_error(format!(
            "graph build: a non-scalar constant of shape {:?} inside a fused function (FuseOps \
             makes such constants parameters)",
            t.shape()
        )));
    }
    let v = scalar_value(t)?;
    let dtype = t.dtype();
    let shape: Vec<PrimExpr> = t.shape().iter().map(|&d| PrimExpr::i32(d)).collect();
    kiln_topi::transform::util::compute_tagged(
        &shape,
        |_| kiln_topi::transform::util::constant(dtype, v),
        "constant",
        kiln_topi::tag::ELEMWISE,
    )
}

/// The compute graph of a fused function: its placeholders, its output tensors and the name
/// of its master operator (if any call).
pub struct FusedCompute {
    /// One placeholder per parameter (per tensor field of a tuple parameter).
    pub inputs: Vec<Tensor>,
    /// The outputs (several for a tuple result).
    pub outputs: Vec<Tensor>,
    /// The master op's name.
    pub master: Option<&'static str>,
    /// The operators whose computes contain extern operations (hand-written loop nests, which
    /// no GPU schedule can bind to threads), in call order.
    pub externs: Vec<&'static str>,
}

/// Whether every operator call in `body` is elementwise (pattern at most `Broadcast`).
pub fn is_elementwise(body: &Expr) -> bool {
    crate::ir::visit::post_order(body).iter().all(|e| match e {
        Expr::Call(_) => e
            .op_name()
            .and_then(|n| op::get(n).ok())
            .is_some_and(|d| d.pattern <= OpPattern::Broadcast),
        _ => true,
    })
}

/// The result dimensions of `f` when it is elementwise (every call's pattern at most
/// `Broadcast`) with a tensor result of dimensions known at run time: a size variable `n<j>`
/// for each -1, the others constant.
fn elementwise_result_dims(f: &Function) -> Option<Vec<PrimExpr>> {
    let (shape, _) = f.body().checked_type()?.as_tensor()?;
    if !shape.contains(&-1) {
        return None;
    }
    is_elementwise(f.body()).then(|| {
        shape
            .iter()
            .enumerate()
            .map(|(j, &d)| {
                if d >= 0 {
                    PrimExpr::i32(d)
                } else {
                    kiln_tir::Var::size_var(&format!("n{j}"), DataType::int(32)).to_expr()
                }
            })
            .collect()
    })
}

/// Builds the TOPI computes of the primitive function `f` (typed) for code that runs on `cpu`.
///
/// Parameters' dimensions known at run time start as size variables of their own; where a
/// compute needs two of them (or one and a constant) equal, it meets them
/// ([`kiln_topi::extent`]) and the compute is built again with the variable replaced, until no
/// new meeting is recorded: the kernel then checks the tensors it is called with agree.
pub fn fused_compute(f: &Function, cpu: &CpuDesc) -> Result<FusedCompute> {
    let aligned = elementwise_result_dims(f);
    let mut params = Vec::new();
    for (i, p) in f.params().iter().enumerate() {
        let ty = p
            .expr()
            .checked_type()
            .cloned()
            .ok_or_else(|| Error::value_error("graph build: untyped parameter"))?;
        let (shape, dtype) = tensor_type(&ty, &format!("parameter `{}`", p.name()))?;
        let name = format!("p{i}");
        params.push((
            placeholder_dims(&shape, &name, aligned.as_deref()),
            dtype,
            name,
        ));
    }
    // Each round replaces at least one variable; a parameter has finitely many.
    let rounds = params.iter().map(|p| p.0.len()).sum::<usize>() + 1;
    for _ in 0..rounds {
        let (fc, met) = kiln_topi::extent::collecting(|| fused_compute_over(f, cpu, &params));
        let map = meetings_map(met);
        if map.is_empty() {
            return fc;
        }
        for d in params.iter_mut().flat_map(|p| p.0.iter_mut()) {
            *d = kiln_tir::mutator::substitute(d, &map);
        }
    }
    Err(Error::value_error(
        "graph build: the run-time extents of a fused function do not settle",
    ))
}

/// The substitution the meetings of one round make, in order: each meeting is read through
/// those before it (so `a` meeting `b` then `b` meeting `a` is one meeting, not a swap), and
/// one that joins what is already joined adds nothing.
fn meetings_map(met: Vec<(kiln_tir::Var, PrimExpr)>) -> HashMap<kiln_tir::Var, PrimExpr> {
    use kiln_tir::mutator::substitute;
    let mut map: HashMap<kiln_tir::Var, PrimExpr> = HashMap::new();
    for (v, e) in met {
        let (a, b) = (substitute(&v.to_expr(), &map), substitute(&e, &map));
        if kiln_tir::structural_equal(&a, &b) {
            continue;
        }
        // The variable goes (a constant stays).
        let (gone, kept) = match (a.as_var(), b.as_var()) {
            (Some(x), _) => (x, b),
            (None, Some(y)) => (y, a),
            (None, None) => continue,
        };
        let step = HashMap::from([(gone.clone(), kept.clone())]);
        for val in map.values_mut() {
            *val = substitute(val, &step);
        }
        map.insert(gone, kept);
    }
    map
}

/// [`fused_compute`] over placeholders of the given dimensions, dtypes and names.
fn fused_compute_over(
    f: &Function,
    cpu: &CpuDesc,
    params: &[(Vec<PrimExpr>, DataType, String)],
) -> Result<FusedCompute> {
    let mut memo: HashMap<usize, Vec<Tensor>> = HashMap::new();
    let mut inputs = Vec::new();
    for (p, (dims, dtype, name)) in f.params().iter().zip(params) {
        let t = placeholder(dims, *dtype, name);
        inputs.push(t.clone());
        memo.insert(p.expr().key(), vec![t]);
    }
    let mut master: Option<(&'static str, OpPattern)> = None;
    let mut externs: Vec<&'static str> = Vec::new();
    let mut extern_ops: Vec<kiln_te::Operation> = Vec::new();
    for e in crate::ir::visit::post_order(f.body()) {
        let value = match &e {
            Expr::Var(_) => {
                if memo.contains_key(&e.key()) {
                    continue;
                }
                return Err(Error::value_error(
                    "graph build: a free variable inside a fused function",
                ));
            }
            Expr::Op(_) => continue,
            Expr::Constant(c) => vec![scalar_tensor(&c.data)?],
            Expr::Tuple(t) => {
                let mut v = Vec::new();
                for x in t.fields.iter() {
                    v.extend(memo[&x.key()].iter().cloned());
                }
                v
            }
            Expr::TupleGetItem(g) => {
                let src = &memo[&g.tuple.key()];
                vec![src
                    .get(g.index as usize)
                    .cloned()
                    .ok_or_else(|| Error::value_error("graph build: tuple index out of range"))?]
            }
            Expr::Call(c) => {
                let name = e.op_name().ok_or_else(|| {
                    Error::value_error("graph build: a fused function calls a non-operator")
                })?;
                let def = op::get(name)?;
                if master.is_none_or(|(_, p)| def.pattern > p) {
                    master = Some((def.name, def.pattern));
                }
                let mut args = Vec::new();
                for a in c.args.iter() {
                    args.extend(memo[&a.key()].iter().cloned());
                }
                let ty = e.checked_type().cloned().ok_or_else(|| {
                    Error::value_error(format!("graph build: untyped call of `{name}`"))
                })?;
                let out = compute(name, &args, &e.attrs(), &ty, cpu)
                    .map_err(|err| err.context(format!("in `{name}`")))?;
                for op in out.iter().flat_map(producers) {
                    if op.as_extern().is_some() && !extern_ops.iter().any(|x| x.same_as(&op)) {
                        extern_ops.push(op);
                        if !externs.contains(&def.name) {
                            externs.push(def.name);
                        }
                    }
                }
                out
            }
            Expr::Function(_) => {
                return Err(Error::value_error(
                    "graph build: a nested function inside a fused function",
                ))
            }
        };
        memo.insert(e.key(), value);
    }
    let outputs = memo
        .get(&f.body().key())
        .cloned()
        .ok_or_else(|| Error::value_error("graph build: the fused function has no result"))?;
    Ok(FusedCompute {
        inputs,
        outputs,
        master: master.map(|m| m.0),
        externs,
    })
}

/// How the primitive functions of one build are scheduled, decided once from the target's
/// kind (the one place that tells CPU from GPU schedules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleFamily {
    /// LLVM code for an x86 CPU: the x86 schedule each operator's definition names.
    X86,
    /// Other CPU targets (LLVM for another architecture, C): the generic fallback.
    Cpu,
    /// A GPU target (`opencl`, `cuda`): thread-bound schedules
    /// ([`kiln_topi::schedule::gpu::schedule_outputs`]) in blocks of `num_threads`.
    Gpu {
        /// Threads per block: the target's `-max_num_threads`, else
        /// [`kiln_topi::schedule::gpu::DEFAULT_NUM_THREADS`].
        num_threads: i64,
    },
}

impl ScheduleFamily {
    /// The family of a parsed target.
    pub fn of(target: &Target) -> Result<ScheduleFamily> {
        Ok(match target.kind {
            TargetKind::Llvm if target.is_x86() => ScheduleFamily::X86,
            TargetKind::Llvm | TargetKind::C => ScheduleFamily::Cpu,
            TargetKind::OpenCl | TargetKind::Cuda => {
                let num_threads = match target.attrs.get("max_num_threads") {
                    Some(v) => v.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                        Error::value_error(format!(
                            "target `{target}`: -max_num_threads={v} is not a positive integer"
                        ))
                    })?,
                    None => kiln_topi::schedule::gpu::DEFAULT_NUM_THREADS,
                };
                ScheduleFamily::Gpu { num_threads }
            }
        })
    }

    /// The family of a target string (errors name a bad string).
    pub fn parse(target: &str) -> Result<ScheduleFamily> {
        ScheduleFamily::of(&Target::parse(target)?)
    }

    /// Whether the functions run as device kernels (launched by host code).
    pub fn is_device(self) -> bool {
        matches!(self, ScheduleFamily::Gpu { .. })
    }
}

/// Applies the master op's schedule (see the module docs) for `family` on `cpu`.
fn schedule(fc: &FusedCompute, family: ScheduleFamily, cpu: &CpuDesc) -> Result<Schedule> {
    let ops: Vec<_> = fc.outputs.iter().map(|t| t.op().clone()).collect();
    let s = create_schedule(&ops);
    if let ScheduleFamily::Gpu { num_threads } = family {
        kiln_topi::schedule::gpu::schedule_outputs(&s, &fc.outputs, num_threads)?;
        return Ok(s);
    }
    if fc.outputs.len() > 1 {
        for out in &fc.outputs {
            inline_injective(&s, out, &ops)?;
            kiln_topi::transform::schedule_injective(&s, out, cpu)?;
        }
        return Ok(s);
    }
    let out = &fc.outputs[0];
    let master = fc.master.map(op::get).transpose()?;
    let pattern = master.map(|d| d.pattern);
    let symbolic = |t: &Tensor| !kiln_topi::nn::is_static(t);
    let injective =
        master.is_none_or(|d| d.schedule.is_none() && d.pattern <= OpPattern::Injective);
    // A last extent the injective schedule takes in whole vectors (it leaves others scalar).
    let whole_vectors = out
        .shape()
        .last()
        .and_then(|d| d.as_int())
        .is_some_and(|l| {
            let v = cpu.lanes(out.dtype());
            v > 1 && (l % v == 0 || l % (v / 2).max(1) == 0)
        });
    if family == ScheduleFamily::X86
        && !(injective && whole_vectors)
        && (fc.inputs.iter().any(symbolic) || symbolic(out))
    {
        // Extents known only at run time: one schedule for every compute (the operators'
        // own schedules tile by static extents); injective ones keep theirs when their rows
        // are whole vectors (else vectors and a tail here).
        kiln_topi::schedule::schedule_run_time(&s, out, cpu)?;
        return Ok(s);
    }
    match (master.and_then(|d| d.schedule), pattern) {
        (Some(sched), _) if family == ScheduleFamily::X86 => sched(&s, out, cpu)?,
        (Some(_), _) => kiln_topi::schedule::generic::schedule_generic(&s, out, cpu)?,
        (None, Some(OpPattern::CommReduce)) => {
            inline_injective(&s, out, &[])?;
            kiln_topi::reduce::schedule_reduce(&s, out)?;
        }
        _ => {
            inline_injective(&s, out, &[])?;
            kiln_topi::transform::schedule_injective(&s, out, cpu)?;
        }
    }
    Ok(s)
}

/// Whether the primitive function `f` has no schedule for `target`'s device and so runs on the
/// host CPU in a build for `target` (always false for a CPU target): one of its operators has
/// a hand-written loop nest (an extern operation: the recurrent kernels, Det, TreeEnsemble),
/// which cannot be bound to GPU threads.
pub fn needs_host(f: &Function, name: &str, target: &str, cpu: &CpuDesc) -> Result<bool> {
    if !ScheduleFamily::parse(target)?.is_device() {
        return Ok(false);
    }
    let fc = fused_compute(f, cpu).map_err(|e| e.context(format!("computing `{name}`")))?;
    Ok(!fc.externs.is_empty())
}

/// Lowers the primitive function `f` to one `PrimFunc` called `name` for `target`, tiled for
/// `cpu` (the target's [`kiln_codegen::target::Target::cpu_desc`]): its arguments are the
/// parameters then the outputs.
///
/// For a CPU target the function is in packed form, ready for code generation. For a device
/// target it is the scheduled loop nest with thread-bound loops (before the phase passes),
/// which `kiln_codegen::driver::codegen_build` splits into host code and kernels; an operator
/// whose compute is a hand-written loop nest (an extern operation: the recurrent kernels, Det,
/// TreeEnsemble) is an error naming it: the graph build places such functions on the host
/// ([`needs_host`]) and lowers them for `llvm`.
pub fn lower_primitive(f: &Function, name: &str, target: &str, cpu: &CpuDesc) -> Result<PrimFunc> {
    let family = ScheduleFamily::parse(target)?;
    let fc = fused_compute(f, cpu).map_err(|e| e.context(format!("computing `{name}`")))?;
    if family.is_device() {
        if let Some(op) = fc.externs.first() {
            return Err(Error::value_error(format!(
                "graph build for `{target}`: operator `{op}` (in `{name}`) has no device \
                 schedule: its compute is a hand-written loop nest that cannot be bound to GPU \
                 threads; lower it for the host (llvm) instead"
            )));
        }
    }
    let (fc, widened) = if family.is_device() {
        let (outputs, widened) = super::scalar_output::widen(&fc.outputs)?;
        (FusedCompute { outputs, ..fc }, widened)
    } else {
        (fc, Vec::new())
    };
    let s = schedule(&fc, family, cpu).map_err(|e| e.context(format!("scheduling `{name}`")))?;
    let mut args = fc.inputs.clone();
    args.extend(fc.outputs.iter().cloned());
    if family.is_device() {
        let func = kiln_te::lower(&s, &args, name)
            .map_err(|e| e.context(format!("lowering schedule `{name}`")))?;
        return super::scalar_output::narrow(func, fc.inputs.len(), &widened);
    }
    let m = kiln_codegen::driver::lower(&s, &args, name, false)?;
    m.lookup(name)
        .cloned()
        .ok_or_else(|| Error::runtime_error(format!("lowering `{name}` produced no function")))
}
