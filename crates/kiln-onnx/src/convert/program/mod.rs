//! Models whose decisions are made at run time, converted to a program for Kiln's virtual
//! machine ([`kiln_graph::build::Program`]): static graph segments, each converted, typed and
//! folded like a static model (so fused and scheduled like one), and VM code that runs them.
//!
//! - An `If` whose condition is computed from run-time inputs splits the model: everything
//!   before it (that later nodes need) is one segment; each branch is converted like a graph
//!   of its own (recursively, so branches may decide at run time too) and the VM runs only the
//!   branch the condition takes; nodes after it form the next segment. Branch outputs must
//!   agree in dtype and rank; dimensions that differ are known at run time (`-1`): such
//!   outputs are model outputs or read by nodes compiled as kernels with run-time extents
//!   ([`super::shaped`]), since the nodes after an `If` are compiled once.
//! - A `Loop` whose trip count or condition is known only at run time ([`loops`]): its body is
//!   converted once and iterated by the VM, loop-carried values in registers, scan outputs
//!   collected and stacked by builtins.
//! - `NonZero`, `Unique`, `NonMaxSuppression`, `Compress` of run-time values are VM builtins whose outputs
//!   are shaped by the data (`-1` dimensions); such values are model outputs or read by
//!   kernels with run-time extents.
//! - A node whose output shapes depend on small run-time integer inputs (a reduction's
//!   `axes`), or that reads a value shaped at run time and is elementwise, is a kernel with
//!   run-time extents ([`super::shaped`]): a shape function builtin, then a `Kernel`
//!   instruction (and a `View`).
//! - [`entry::from_onnx_dims`] converts a model for several input shapes (values of its
//!   symbolic dimensions) into one program that picks the code for the shapes given.
//!
//! Values cross segments in registers: graph inputs, the values a segment computes that later
//! nodes (or subgraphs) read, and the results of `If`, `Loop` and builtins. Constants
//! (initializers, folded values) stay compile-time constants in every segment that reads them.
//! `If`s and `Loop`s whose decisions fold at compile time are still inlined or unrolled (see
//! `control`); a model without run-time decisions gives no program
//! ([`entry::from_onnx_program`] returns `None`) and is compiled for the static graph executor.

mod entry;
mod loops;

pub use entry::{from_onnx_dims, from_onnx_program};

use std::collections::{HashMap, HashSet};

use kiln_graph::ir::{Expr, Function, IRModule, Type, Var};
use kiln_runtime::vm::{Instr, KernelOut};

use super::control::RUN_TIME_LOOP_CONDITION;
use super::data_dependent::{self, RunTime};
use super::shaped::{self, ShapedKernel, Shapes, Source};
use super::{convert_nodes, node_error, to_runtime, typed, Ctx, Msg};
use crate::attr::AttrValue;
use crate::proto::GraphProto;
use crate::{Graph, Node, OnnxError, Result};

/// The program state: code, segments and the register each register-backed variable stands
/// for.
#[derive(Clone)]
struct Builder {
    instrs: Vec<Instr>,
    reg_types: Vec<Type>,
    segments: Vec<IRModule>,
    /// `Expr::key` (the node's address) of a value held in a register to the register, with
    /// the node itself: kept alive here, its address cannot be reused by a later node that
    /// would then pass for a register.
    reg_of: HashMap<usize, (usize, Expr)>,
    /// Whether a run-time decision split the model.
    split: bool,
    /// The kernels compiled with run-time extents, by name.
    kernels: Vec<(String, Function)>,
}

impl Builder {
    fn new_reg(&mut self, ty: Type) -> usize {
        self.reg_types.push(ty);
        self.reg_types.len() - 1
    }

    /// A variable named `name` standing for a new register of type `ty`.
    fn reg_var(&mut self, name: &str, ty: Type) -> (usize, Expr) {
        let reg = self.new_reg(ty.clone());
        let v = Var::new(name, ty).expr();
        self.reg_of.insert(v.key(), (reg, v.clone()));
        (reg, v)
    }

    /// Runs `f` (the conversion of an If's branch or a Loop's body), then forgets the values
    /// it put into registers: those are written on that path only, so outside it (the other
    /// branch, the nodes after the If or the loop, which may run no iteration) such a value (a
    /// constant read by a kernel, say) is computed again.
    fn on_own_path<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let outside = self.reg_of.clone();
        let r = f(self);
        self.reg_of = outside;
        r
    }

    fn reg_of(&self, e: &Expr) -> Option<usize> {
        self.reg_of.get(&e.key()).map(|(reg, _)| *reg)
    }

    /// Puts the values of `names` that are computed (not constants, unless `constants`, and
    /// not registers already) into registers: one segment computes them all from the registers
    /// they read. The names are rebound to the registers' variables.
    fn materialize(&mut self, ctx: &mut Ctx<'_>, names: &[String], constants: bool) -> Result<()> {
        let mut seen = HashSet::new();
        // The values to compute, by name and (for a sequence, a tuple of values) item.
        let mut picked: Vec<(String, Option<usize>, Expr)> = Vec::new();
        // Sequences whose items are put into registers one by one: name -> items.
        let mut sequences: Vec<(String, Vec<Expr>)> = Vec::new();
        let needed = |this: &Self, e: &Expr| {
            this.reg_of(e).is_none() && (constants || !matches!(e, Expr::Constant(_)))
        };
        for name in names {
            if !seen.insert(name.clone()) {
                continue;
            }
            let Some(e) = ctx.values.get(name) else {
                continue; // defined inside a subgraph
            };
            if !needed(self, e) {
                continue;
            }
            let ty = e.ty().map_err(|m| OnnxError::Graph(m.to_string()))?;
            match ty {
                Type::Tuple(t) => {
                    let items: Vec<Expr> = match e {
                        Expr::Tuple(t) => t.fields.to_vec(),
                        _ => (0..t.fields.len())
                            .map(|k| typed(Expr::get_item(e.clone(), k)))
                            .collect::<std::result::Result<_, Msg>>()
                            .map_err(|m| OnnxError::Graph(m.0))?,
                    };
                    for (k, item) in items.iter().enumerate() {
                        if needed(self, item) {
                            picked.push((name.clone(), Some(k), item.clone()));
                        }
                    }
                    sequences.push((name.clone(), items));
                }
                _ => picked.push((name.clone(), None, e.clone())),
            }
        }
        if picked.is_empty() {
            return self.rebind_sequences(ctx, sequences, &HashMap::new());
        }
        let mut types = Vec::with_capacity(picked.len());
        for (name, _, e) in &picked {
            let ty = e.ty().map_err(|m| OnnxError::Graph(m.to_string()))?;
            if ty.as_tensor().is_none() {
                return Err(OnnxError::Graph(format!(
                    "value '{name}' ({ty}) crosses a run-time If; Kiln's VM passes tensors only"
                )));
            }
            types.push(ty);
        }
        let outs: Vec<Expr> = picked.iter().map(|(_, _, e)| e.clone()).collect();
        let body = if outs.len() == 1 {
            outs[0].clone()
        } else {
            Expr::tuple(outs)
        };
        // The segment's parameters: the register variables its values read.
        let mut params = Vec::new();
        let mut args = Vec::new();
        let mut seen_vars = HashSet::new();
        for e in kiln_graph::ir::visit::post_order(&body) {
            if let Expr::Var(v) = &e {
                let reg = self.reg_of(&e).ok_or_else(|| {
                    OnnxError::Graph(format!(
                        "value '{}' is neither a register nor computed before the If",
                        v.name()
                    ))
                })?;
                if seen_vars.insert(e.key()) {
                    params.push(v.clone());
                    args.push(reg);
                }
            }
        }
        let module = IRModule::from_main(Function::new(params, body));
        let module = kiln_graph::transform::infer_type()
            .apply(module)
            .map_err(|e| OnnxError::Graph(e.to_string()))?;
        let segment = self.segments.len();
        self.segments.push(module);
        let mut rets = Vec::with_capacity(picked.len());
        let mut items_now = HashMap::new();
        for ((name, item, _), ty) in picked.iter().zip(types) {
            let (reg, v) = self.reg_var(name, ty);
            rets.push(reg);
            match item {
                Some(k) => {
                    items_now.insert((name.clone(), *k), v);
                }
                None => {
                    ctx.values.insert(name.clone(), v);
                }
            }
        }
        self.instrs.push(Instr::Run {
            segment,
            args,
            rets,
        });
        self.rebind_sequences(ctx, sequences, &items_now)
    }

    /// Binds each sequence's name to the tuple of its items, those computed now
    /// (`items_now`, by name and position) as their registers.
    fn rebind_sequences(
        &self,
        ctx: &mut Ctx<'_>,
        sequences: Vec<(String, Vec<Expr>)>,
        items_now: &HashMap<(String, usize), Expr>,
    ) -> Result<()> {
        for (name, items) in sequences {
            let items: Vec<Expr> = items
                .into_iter()
                .enumerate()
                .map(|(k, e)| items_now.get(&(name.clone(), k)).cloned().unwrap_or(e))
                .collect();
            let t = typed(Expr::tuple(items)).map_err(|m| OnnxError::Graph(m.0))?;
            ctx.values.insert(name, t);
        }
        Ok(())
    }

    /// Converts `nodes` into `ctx`, splitting at run-time `If`s and `Loop`s, and returns the
    /// registers of `outputs` (which the caller reads after the nodes).
    fn convert(
        &mut self,
        ctx: &mut Ctx<'_>,
        nodes: &[Node],
        outputs: &[String],
    ) -> Result<Vec<usize>> {
        let mut fused_until = 0;
        let mut nodes = std::borrow::Cow::Borrowed(nodes);
        let mut i = 0;
        while i < nodes.len() {
            if i < fused_until {
                // Computed by the kernel of the group it belongs to.
                i += 1;
                continue;
            }
            // A node computed in several kernels is replaced by the nodes of its steps.
            let expanded =
                shaped::expansion(ctx, &nodes[i]).map_err(|m| node_error(&nodes[i], m))?;
            if let Some(steps) = expanded {
                nodes.to_mut().splice(i..=i, steps);
                continue;
            }
            let at = i;
            i += 1;
            let node = &nodes[at];
            let shaped = shaped::run_time(ctx, node).map_err(|m| node_error(node, m))?;
            let kind = if shaped.is_some() {
                Decision::Kernel
            } else {
                check_static_inputs(ctx, node)?;
                self.decision(ctx, node)?
            };
            if matches!(kind, Decision::CompileTime) {
                continue;
            }
            self.split = true;
            let mut live: Vec<String> = names_read(&nodes[at..]);
            live.extend(outputs.iter().cloned());
            self.materialize(ctx, &live, false)?;
            match kind {
                Decision::RunTimeIf => self.if_node(ctx, node)?,
                Decision::RunTimeLoop => self.loop_node(ctx, node)?,
                Decision::Builtin => {
                    // Described again: its inputs are registers now.
                    let call = data_dependent::run_time(ctx, node)
                        .map_err(|m| node_error(node, m))?
                        .expect("still run-time");
                    self.builtin_node(ctx, node, call)?
                }
                Decision::Kernel => {
                    // Described again: its inputs are registers now. Elementwise nodes after
                    // it join its kernel when no value inside the group is read after it.
                    let rest = &nodes[at..];
                    let reads_after = |j: usize| {
                        let mut names = names_read(&rest[j + 1..]);
                        names.extend(outputs.iter().cloned());
                        names
                    };
                    let group = shaped::fused_group(ctx, rest, &reads_after)
                        .map_err(|m| node_error(node, m))?;
                    match group {
                        Some((k, len)) => {
                            fused_until = at + len;
                            self.kernel_node(ctx, &rest[len - 1], k)?
                        }
                        None => {
                            let k = shaped::run_time(ctx, node)
                                .map_err(|m| node_error(node, m))?
                                .expect("still run-time");
                            self.kernel_node(ctx, node, k)?
                        }
                    }
                }
                Decision::CompileTime => unreachable!("converted above"),
            }
        }
        self.materialize(ctx, outputs, true)?;
        outputs
            .iter()
            .map(|name| {
                let e = ctx
                    .values
                    .get(name)
                    .ok_or_else(|| OnnxError::Graph(format!("output '{name}' is undefined")))?;
                self.reg_of(e).ok_or_else(|| {
                    OnnxError::Graph(format!(
                        "output '{name}' is not a tensor (a sequence?); Kiln's VM passes \
                         tensors only"
                    ))
                })
            })
            .collect()
    }

    /// Converts `node` into `ctx` when its decisions are known at compile time (an `If` or
    /// `Loop` whose condition and trip count fold, or any other node); otherwise says which
    /// run-time construct it is and leaves `ctx` as it was.
    fn decision(&mut self, ctx: &mut Ctx<'_>, node: &Node) -> Result<Decision> {
        let is = |op: &str| node.op_type == op && node.domain.is_empty();
        let runtime_input = |ctx: &Ctx<'_>, i: usize| -> Result<bool> {
            Ok(node.input(i).is_some()
                && ctx
                    .const_input(node, i)
                    .map_err(|m| node_error(node, m))?
                    .is_none())
        };
        if is("If") && runtime_input(ctx, 0)? {
            return Ok(Decision::RunTimeIf);
        }
        if is("Loop") {
            if runtime_input(ctx, 0)? || runtime_input(ctx, 1)? {
                return Ok(Decision::RunTimeLoop);
            }
            // A condition the body computes from run-time values shows only while unrolling:
            // try on a copy of the values.
            let mut trial = Ctx {
                model: ctx.model,
                opset: ctx.opset,
                values: ctx.values.clone(),
            };
            return match convert_nodes(&mut trial, std::slice::from_ref(node)) {
                Ok(()) => {
                    ctx.values = trial.values;
                    Ok(Decision::CompileTime)
                }
                Err(e) if e.to_string().contains(RUN_TIME_LOOP_CONDITION) => {
                    Ok(Decision::RunTimeLoop)
                }
                Err(e) => Err(e),
            };
        }
        if data_dependent::run_time(ctx, node)
            .map_err(|m| node_error(node, m))?
            .is_some()
        {
            return Ok(Decision::Builtin);
        }
        convert_nodes(ctx, std::slice::from_ref(node))?;
        Ok(Decision::CompileTime)
    }

    /// A node whose output shapes depend on its input values, computed by a VM builtin.
    fn builtin_node(&mut self, ctx: &mut Ctx<'_>, node: &Node, call: RunTime) -> Result<()> {
        let mut args = Vec::with_capacity(call.args.len());
        for (i, e) in call.args.iter().enumerate() {
            args.push(self.value_reg(e, node.input(i).unwrap_or(""))?);
        }
        let mut rets = Vec::with_capacity(call.outputs.len());
        for (k, ty) in call.outputs.into_iter().enumerate() {
            match node.outputs.get(k).filter(|n| !n.is_empty()) {
                Some(name) => {
                    let (reg, v) = self.reg_var(name, ty);
                    ctx.values.insert(name.clone(), v);
                    rets.push(reg);
                }
                None => rets.push(self.new_reg(ty)),
            }
        }
        self.instrs.push(Instr::Call {
            func: call.func.into(),
            args,
            ints: call.ints,
            rets,
        });
        Ok(())
    }

    /// A node computed by a kernel with run-time extents: the shape function's call, the
    /// kernel's call allocating its results by those shapes, and the views the node's outputs
    /// take.
    fn kernel_node(&mut self, ctx: &mut Ctx<'_>, node: &Node, k: ShapedKernel) -> Result<()> {
        let err = |m: String| node_error(node, Msg(m));
        let mut args = Vec::with_capacity(k.shape_args.len());
        for e in &k.shape_args {
            args.push(self.value_reg(e, &node.name)?);
        }
        let i64_t = kiln_ffi::DataType::int(64);
        let shapes: Vec<usize> = match k.shapes {
            Shapes::Program { code, rank } => {
                let dst = self.new_reg(Type::tensor(&[rank as i64], i64_t));
                self.instrs.push(Instr::Shape { dst, args, code });
                vec![dst]
            }
            Shapes::Given => args,
            Shapes::Function { name, ints, ranks } => {
                let shapes: Vec<usize> = ranks
                    .iter()
                    .map(|&r| self.new_reg(Type::tensor(&[r as i64], i64_t)))
                    .collect();
                self.instrs.push(Instr::Call {
                    func: name.into(),
                    args,
                    ints,
                    rets: shapes.clone(),
                });
                shapes
            }
        };
        // The kernel: a primitive function over variables typed as its inputs.
        let mut kernel_outs: Vec<usize> = Vec::new();
        if let Some(kern) = k.kernel {
            let mut inputs = Vec::with_capacity(kern.inputs.len());
            for e in &kern.inputs {
                inputs.push(self.value_reg(e, &node.name)?);
            }
            let mut params = kern.params;
            for (s, v) in k.shape_inputs {
                inputs.push(shapes[s]);
                params.push(v);
            }
            let f = kiln_graph::transform::infer_type::infer_function(&Function::new(
                params, kern.body,
            ))
            .map_err(|e| err(e.to_string()))?;
            let out_types: Vec<Type> = match f.body().ty().map_err(|m| err(m.to_string()))? {
                Type::Tuple(t) => t.fields.to_vec(),
                t => vec![t],
            };
            let name = format!(
                "kernel{}_{}",
                self.kernels.len(),
                node.op_type.to_lowercase()
            );
            self.kernels.push((name.clone(), f));
            let allocs: Vec<usize> = k
                .results
                .iter()
                .filter_map(|r| match r.source {
                    Source::Kernel(s) => Some(s),
                    Source::Value(_) | Source::Shape(_) => None,
                })
                .collect();
            if allocs.len() != out_types.len() {
                return Err(err(format!(
                    "the kernel has {} results, {} allocated",
                    out_types.len(),
                    allocs.len()
                )));
            }
            let mut outs = Vec::with_capacity(allocs.len());
            for (s, ty) in allocs.into_iter().zip(out_types) {
                let reg = self.new_reg(ty.clone());
                outs.push(KernelOut {
                    reg,
                    dtype: ty.dtype(),
                    shape: shapes[s],
                });
                kernel_outs.push(reg);
            }
            self.instrs.push(Instr::Kernel {
                func: name,
                args: inputs,
                outs,
            });
        }
        let mut next_kernel_out = kernel_outs.into_iter();
        for (j, r) in k.results.into_iter().enumerate() {
            let src = match &r.source {
                Source::Kernel(_) => next_kernel_out.next().expect("counted above"),
                Source::Value(e) => self.value_reg(e, &node.name)?,
                Source::Shape(s) => shapes[*s],
            };
            let Some(out) = node.outputs.get(j).filter(|n| !n.is_empty()) else {
                continue;
            };
            let (dst, v) = self.reg_var(out, r.ty);
            match r.view {
                Some(s) => self.instrs.push(Instr::View {
                    dst,
                    src,
                    shape: shapes[s],
                }),
                None => self.instrs.push(Instr::Move { dst, src }),
            }
            ctx.values.insert(out.clone(), v);
        }
        Ok(())
    }

    /// A register holding the value of `e` (a register variable, or a constant computed by a
    /// segment of its own; `name` is unchanged in the context).
    fn value_reg(&mut self, e: &Expr, name: &str) -> Result<usize> {
        if let Some(r) = self.reg_of(e) {
            return Ok(r);
        }
        if !matches!(e, Expr::Constant(_)) {
            return Err(OnnxError::Graph(format!(
                "value '{name}' is neither a register nor a constant"
            )));
        }
        let ty = e.ty().map_err(|m| OnnxError::Graph(m.to_string()))?;
        let module = IRModule::from_main(Function::new(Vec::new(), e.clone()));
        let module = kiln_graph::transform::infer_type()
            .apply(module)
            .map_err(|err| OnnxError::Graph(err.to_string()))?;
        let segment = self.segments.len();
        self.segments.push(module);
        let reg = self.new_reg(ty);
        self.instrs.push(Instr::Run {
            segment,
            args: Vec::new(),
            rets: vec![reg],
        });
        // Read again (a kernel's weight is its shape program's argument too): one segment.
        self.reg_of.insert(e.key(), (reg, e.clone()));
        Ok(reg)
    }

    /// A register holding the result of builtin `func` called with `ints`.
    fn call_reg(&mut self, func: &str, ints: Vec<i64>, ty: Type) -> usize {
        let reg = self.new_reg(ty);
        self.instrs.push(Instr::Call {
            func: func.into(),
            args: Vec::new(),
            ints,
            rets: vec![reg],
        });
        reg
    }

    /// A run-time If: its condition is in a register; each branch is converted on its own,
    /// then moved into the If's output registers.
    fn if_node(&mut self, ctx: &mut Ctx<'_>, node: &Node) -> Result<()> {
        let err = |m: String| node_error(node, Msg(m));
        let cond = ctx.input(node, 0).map_err(|m| node_error(node, m))?;
        let cond_reg = self
            .reg_of(&cond)
            .ok_or_else(|| err("the condition is not in a register".into()))?;
        let jump_else = self.instrs.len();
        self.instrs.push(Instr::JumpUnless {
            cond: cond_reg,
            target: usize::MAX,
        });
        // The else branch's types first (converted on a copy): a single-element output whose
        // rank differs between the branches takes the higher rank in both.
        let probe_types = self.clone().branch(ctx, node, "else_branch")?.1;
        let (then_regs, then_types) = self.branch(ctx, node, "then_branch")?;
        let then_types: Vec<Type> = then_types
            .iter()
            .zip(&probe_types)
            .map(|(t, e)| ones_of_rank(t, e).unwrap_or_else(|| t.clone()))
            .collect();
        let outs: Vec<(usize, Expr)> = node
            .outputs
            .iter()
            .zip(&then_types)
            .map(|(name, ty)| self.reg_var(name, ty.clone()))
            .collect();
        for ((dst, _), &src) in outs.iter().zip(&then_regs) {
            self.move_or_view(*dst, src);
        }
        let jump_end = self.instrs.len();
        self.instrs.push(Instr::Jump { target: usize::MAX });
        self.instrs[jump_else] = Instr::JumpUnless {
            cond: cond_reg,
            target: self.instrs.len(),
        };
        let (else_regs, else_types) = self.branch(ctx, node, "else_branch")?;
        let else_types: Vec<Type> = else_types
            .iter()
            .zip(&then_types)
            .map(|(e, t)| ones_of_rank(e, t).unwrap_or_else(|| e.clone()))
            .collect();
        // Outputs of one dtype and rank whose dimensions differ between the branches get -1
        // there: known at run time (see `check_static_inputs` for the nodes that may read
        // them).
        let mut outs = outs;
        for (k, (t, e)) in then_types.iter().zip(&else_types).enumerate() {
            if t == e {
                continue;
            }
            let name = node.outputs.get(k).map(String::as_str).unwrap_or("");
            let merged = match (t.as_tensor(), e.as_tensor()) {
                (Some((ts, td)), Some((es, ed))) if td == ed && ts.len() == es.len() => {
                    let dims: Vec<i64> = ts
                        .iter()
                        .zip(es)
                        .map(|(&a, &b)| if a == b { a } else { -1 })
                        .collect();
                    Type::tensor(&dims, td)
                }
                _ => {
                    return Err(err(format!(
                        "output #{k} ('{name}') is {t} in then_branch but {e} in else_branch; \
                         Kiln's registers hold one dtype and rank per value"
                    )))
                }
            };
            let reg = outs[k].0;
            let v = Var::new(name, merged.clone()).expr();
            self.reg_of.insert(v.key(), (reg, v.clone()));
            self.reg_types[reg] = merged;
            outs[k].1 = v;
        }
        for ((dst, _), &src) in outs.iter().zip(&else_regs) {
            self.move_or_view(*dst, src);
        }
        self.instrs[jump_end] = Instr::Jump {
            target: self.instrs.len(),
        };
        for (name, (_, v)) in node.outputs.iter().zip(outs) {
            if !name.is_empty() {
                ctx.values.insert(name.clone(), v);
            }
        }
        Ok(())
    }

    /// `dst = src`, viewed under `dst`'s shape when their ranks differ (a single element).
    fn move_or_view(&mut self, dst: usize, src: usize) {
        let (want, got) = (self.reg_types[dst].clone(), self.reg_types[src].clone());
        match (want.as_tensor(), got.as_tensor()) {
            (Some((w, _)), Some((g, _))) if w.len() != g.len() => {
                let shape =
                    self.new_reg(Type::tensor(&[w.len() as i64], kiln_ffi::DataType::int(64)));
                let mut code = Vec::new();
                for &d in w {
                    code.extend([kiln_runtime::vm::shape_expr::op::PUSH, d]);
                    code.push(kiln_runtime::vm::shape_expr::op::EMIT);
                }
                self.instrs.push(Instr::Shape {
                    dst: shape,
                    args: Vec::new(),
                    code,
                });
                self.instrs.push(Instr::View { dst, src, shape });
            }
            _ => self.instrs.push(Instr::Move { dst, src }),
        }
    }

    /// Converts branch `attr` of If `node` in a copy of `ctx` (its values stay inside) and
    /// returns the registers and types of its outputs.
    fn branch(
        &mut self,
        ctx: &Ctx<'_>,
        node: &Node,
        attr: &str,
    ) -> Result<(Vec<usize>, Vec<Type>)> {
        let err = |m: String| node_error(node, Msg(format!("{attr}: {m}")));
        let g = match node.attr(attr) {
            Some(AttrValue::Graph(g)) => g,
            _ => return Err(err("the attribute is missing or not a GRAPH".into())),
        };
        let outer: HashSet<String> = ctx.values.keys().cloned().collect();
        let sub = Graph::from_subgraph(g, &outer).map_err(|e| err(e.to_string()))?;
        if sub.outputs.len() != node.outputs.len() {
            return Err(err(format!(
                "it has {} output(s) but the node has {}",
                sub.outputs.len(),
                node.outputs.len()
            )));
        }
        let mut inner = Ctx {
            model: ctx.model,
            opset: ctx.opset,
            values: ctx.values.clone(),
        };
        for t in sub.initializers() {
            let e = typed(kiln_graph::ir::Expr::constant(to_runtime(t)?)).map_err(|m| err(m.0))?;
            inner.values.insert(t.name.clone(), e);
        }
        let names: Vec<String> = sub.outputs.iter().map(|o| o.name.clone()).collect();
        let regs = self
            .on_own_path(|b| b.convert(&mut inner, &sub.nodes, &names))
            .map_err(|e| err(e.to_string()))?;
        let types = regs.iter().map(|&r| self.reg_types[r].clone()).collect();
        Ok((regs, types))
    }
}

/// `other`'s type for a single element of type `t` when `other` is a single element of the
/// same dtype and a higher rank (an If whose branches give a scalar and a `[1]`).
fn ones_of_rank(t: &Type, other: &Type) -> Option<Type> {
    let ((ts, td), (os, od)) = (t.as_tensor()?, other.as_tensor()?);
    let single = |s: &[i64]| s.iter().all(|&d| d == 1);
    (td == od && os.len() > ts.len() && single(ts) && single(os)).then(|| other.clone())
}

/// What a node is to the program.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Decision {
    /// Converted into the current segment.
    CompileTime,
    /// An `If` whose condition is known at run time.
    RunTimeIf,
    /// A `Loop` whose trip count or condition is known at run time.
    RunTimeLoop,
    /// An operator whose output shapes depend on run-time values, computed by a VM builtin.
    Builtin,
    /// An operator computed by a kernel with run-time extents ([`shaped`]).
    Kernel,
}

/// Refuses a node that reads a value whose shape is known only at run time (a run-time
/// Loop's scan output, a builtin's result, an If output whose branches differ in shape) and
/// that no kernel with run-time extents computes ([`shaped`] is asked first).
fn check_static_inputs(ctx: &Ctx<'_>, node: &Node) -> Result<()> {
    // Sequences are tuples of values: building and indexing them computes nothing.
    if node.domain.is_empty() && SEQUENCE_STRUCTURE.contains(&node.op_type.as_str()) {
        return Ok(());
    }
    for name in node.inputs.iter().filter(|n| !n.is_empty()) {
        let Some(e) = ctx.values.get(name) else {
            continue;
        };
        // A sequence (a tuple) is checked by its items.
        let items: Vec<Type> = match e.checked_type() {
            Some(Type::Tuple(t)) => t.fields.to_vec(),
            Some(t) => vec![t.clone()],
            None => Vec::new(),
        };
        for item in &items {
            let Some((shape, _)) = item.as_tensor() else {
                continue;
            };
            if shape.contains(&-1) {
                return Err(node_error(
                    node,
                    Msg(format!(
                        "input '{name}' has the shape {shape:?}, known only at run time (a \
                         dimension left to run time, a run-time Loop's scan output, a \
                         data-dependent result or an If whose branches differ in shape), and \
                         this node has no kernel with run-time extents (its compute needs \
                         static shapes there; give the dimension's values at compile time \
                         instead)"
                    )),
                ));
            }
        }
    }
    Ok(())
}

/// The sequence operators that only build or index a sequence (a tuple of values).
const SEQUENCE_STRUCTURE: [&str; 5] = [
    "SequenceConstruct",
    "SequenceInsert",
    "SequenceErase",
    "SequenceAt",
    "SequenceLength",
];

/// The names `nodes` read, their subgraphs included (a subgraph's own names too: reading more
/// than needed only keeps a value in a register).
fn names_read(nodes: &[Node]) -> Vec<String> {
    fn graph(g: &GraphProto, out: &mut Vec<String>) {
        for n in &g.node {
            out.extend(n.input.iter().filter(|s| !s.is_empty()).cloned());
            for a in &n.attribute {
                if let Some(sub) = &a.g {
                    graph(sub, out);
                }
                for sub in &a.graphs {
                    graph(sub, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    for n in nodes {
        out.extend(n.inputs.iter().filter(|s| !s.is_empty()).cloned());
        for (_, a) in &n.attributes {
            match a {
                AttrValue::Graph(g) => graph(g, &mut out),
                AttrValue::Graphs(gs) => gs.iter().for_each(|g| graph(g, &mut out)),
                _ => {}
            }
        }
    }
    out
}

/// The operators that may need the VM: control flow, and outputs shaped by input values.
const RUN_TIME_OPS: [&str; 6] = [
    "If",
    "Loop",
    "NonZero",
    "Unique",
    "NonMaxSuppression",
    "Compress",
];

/// Whether any node of `nodes` (subgraphs included) is one of [`RUN_TIME_OPS`].
fn may_run_time(nodes: &[Node]) -> bool {
    fn graph(g: &GraphProto) -> bool {
        g.node.iter().any(|n| {
            RUN_TIME_OPS.contains(&n.op_type())
                || shaped::may_need(n.op_type())
                || n.attribute
                    .iter()
                    .any(|a| a.g.as_ref().is_some_and(graph) || a.graphs.iter().any(graph))
        })
    }
    nodes.iter().any(|n| {
        RUN_TIME_OPS.contains(&n.op_type.as_str())
            || shaped::may_need(&n.op_type)
            || n.attributes.iter().any(|(_, a)| match a {
                AttrValue::Graph(g) => graph(g),
                AttrValue::Graphs(gs) => gs.iter().any(graph),
                _ => false,
            })
    })
}
