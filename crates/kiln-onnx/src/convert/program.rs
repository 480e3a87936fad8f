//! Models whose control flow is decided at run time, converted to a program for Kiln's virtual
//! machine ([`kiln_graph::build::Program`]): an `If` whose condition is computed from run-time
//! inputs splits the model into static graph segments. Everything before the `If` (that later
//! nodes need) is one segment; each branch is converted like a graph of its own (recursively,
//! so branches may hold run-time `If`s too), and the VM runs only the branch the condition
//! takes; nodes after it form the next segment. Each segment is converted, typed and folded
//! like a static model, so it is fused and scheduled like one.
//!
//! Values cross segments in registers: graph inputs, the values a segment computes that later
//! nodes (or subgraphs) read, and an `If`'s outputs. Constants (initializers, folded values)
//! stay compile-time constants in every segment that reads them. Both branches must give
//! outputs of one type (shape and dtype), since the nodes after an `If` are compiled once.
//!
//! `If`s whose conditions fold at compile time are still inlined (see `control`); a model
//! without run-time control flow gives no program ([`from_onnx_program`] returns `None`) and
//! is compiled for the static graph executor.

use std::collections::{HashMap, HashSet};

use kiln_graph::build::Program;
use kiln_graph::ir::{Expr, Function, IRModule, Type, Var};
use kiln_runtime::vm::{Code, Instr, Slot};

use super::data_dependent::{self, RunTime};
use super::{
    convert_nodes, converters, graph_dtype, node_error, to_runtime, typed, typed_constant, Ctx,
    FrozenInputs, Msg,
};
use crate::attr::AttrValue;
use crate::proto::GraphProto;
use crate::{DimValues, Graph, InputShapes, Model, Node, OnnxError, Result};

/// The program state: code, segments and the register each register-backed variable stands
/// for.
struct Builder {
    instrs: Vec<Instr>,
    reg_types: Vec<Type>,
    segments: Vec<IRModule>,
    /// `Expr::key` of a register's variable to the register.
    reg_of: HashMap<usize, usize>,
    /// Whether a run-time decision split the model.
    split: bool,
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
        self.reg_of.insert(v.key(), reg);
        (reg, v)
    }

    fn reg_of(&self, e: &Expr) -> Option<usize> {
        self.reg_of.get(&e.key()).copied()
    }

    /// Puts the values of `names` that are computed (not constants, unless `constants`, and
    /// not registers already) into registers: one segment computes them all from the registers
    /// they read. The names are rebound to the registers' variables.
    fn materialize(&mut self, ctx: &mut Ctx<'_>, names: &[String], constants: bool) -> Result<()> {
        let mut seen = HashSet::new();
        let mut picked: Vec<(String, Expr)> = Vec::new();
        for name in names {
            if !seen.insert(name.clone()) {
                continue;
            }
            let Some(e) = ctx.values.get(name) else {
                continue; // defined inside a subgraph
            };
            if self.reg_of(e).is_some() || (!constants && matches!(e, Expr::Constant(_))) {
                continue;
            }
            picked.push((name.clone(), e.clone()));
        }
        if picked.is_empty() {
            return Ok(());
        }
        let mut types = Vec::with_capacity(picked.len());
        for (name, e) in &picked {
            let ty = e.ty().map_err(|m| OnnxError::Graph(m.to_string()))?;
            if ty.as_tensor().is_none() {
                return Err(OnnxError::Graph(format!(
                    "value '{name}' ({ty}) crosses a run-time If; Kiln's VM passes tensors only"
                )));
            }
            types.push(ty);
        }
        let outs: Vec<Expr> = picked.iter().map(|(_, e)| e.clone()).collect();
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
        for ((name, _), ty) in picked.iter().zip(types) {
            let (reg, v) = self.reg_var(name, ty);
            rets.push(reg);
            ctx.values.insert(name.clone(), v);
        }
        self.instrs.push(Instr::Run {
            segment,
            args,
            rets,
        });
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
        for (i, node) in nodes.iter().enumerate() {
            check_static_inputs(ctx, node)?;
            let kind = self.decision(ctx, node)?;
            if matches!(kind, Decision::CompileTime) {
                continue;
            }
            self.split = true;
            let mut live: Vec<String> = names_read(&nodes[i..]);
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
                Ok(self.reg_of(e).expect("materialized"))
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
                Err(e) if e.to_string().contains("known only at run time") => {
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

    /// A run-time Loop: the trip count, condition and loop-carried values in registers, the
    /// body converted once (as segments, or a program of its own when it decides at run time
    /// too) and run while `i < M && cond`; scan outputs are collected in lists and stacked
    /// after the last iteration.
    fn loop_node(&mut self, ctx: &mut Ctx<'_>, node: &Node) -> Result<()> {
        let err = |m: String| node_error(node, Msg(m));
        let g = match node.attr("body") {
            Some(AttrValue::Graph(g)) => g,
            _ => return Err(err("attribute `body` is missing or not a GRAPH".into())),
        };
        let outer: HashSet<String> = ctx.values.keys().cloned().collect();
        let body = Graph::from_subgraph(g, &outer).map_err(|e| err(format!("body: {e}")))?;
        let n_carried = node.inputs.len().saturating_sub(2);
        if body.inputs.len() != 2 + n_carried {
            return Err(err(format!(
                "body declares {} input(s), {} expected (iteration number, condition and {} \
                 loop-carried values)",
                body.inputs.len(),
                2 + n_carried,
                n_carried
            )));
        }
        let n_scan = body
            .outputs
            .len()
            .checked_sub(1 + n_carried)
            .ok_or_else(|| {
                err(format!(
                    "body has {} output(s), at least {} expected",
                    body.outputs.len(),
                    1 + n_carried
                ))
            })?;
        let i64_t = Type::tensor(&[], kiln_ffi::DataType::int(64));
        let bool_t = Type::tensor(&[], kiln_ffi::DataType::bool());
        // Trip count and first condition (absent: no limit, true).
        let max = match ctx.opt_input(node, 0).map_err(|m| node_error(node, m))? {
            Some(e) => self.value_reg(&e, node.input(0).unwrap_or(""))?,
            None => self.call_reg("int64_scalar", vec![i64::MAX], i64_t.clone()),
        };
        let cond0 = match ctx.opt_input(node, 1).map_err(|m| node_error(node, m))? {
            Some(e) => self.value_reg(&e, node.input(1).unwrap_or(""))?,
            None => self.call_reg("bool_scalar", vec![1], bool_t.clone()),
        };
        let mut inits = Vec::with_capacity(n_carried);
        for k in 0..n_carried {
            let e = ctx.input(node, 2 + k).map_err(|m| node_error(node, m))?;
            inits.push((
                self.value_reg(&e, node.input(2 + k).unwrap_or(""))?,
                e.ty().map_err(|m| err(m.to_string()))?,
            ));
        }
        // The body's inputs: registers the iterations update.
        let mut inner = Ctx {
            model: ctx.model,
            opset: ctx.opset,
            values: ctx.values.clone(),
        };
        let (iter_reg, v) = self.reg_var(&body.inputs[0].name, i64_t.clone());
        inner.values.insert(body.inputs[0].name.clone(), v);
        self.instrs.push(Instr::Call {
            func: "int64_scalar".into(),
            args: Vec::new(),
            ints: vec![0],
            rets: vec![iter_reg],
        });
        let (cond_reg, v) = self.reg_var(&body.inputs[1].name, bool_t.clone());
        inner.values.insert(body.inputs[1].name.clone(), v);
        self.instrs.push(Instr::Move {
            dst: cond_reg,
            src: cond0,
        });
        let mut carried = Vec::with_capacity(n_carried);
        for (k, (init, ty)) in inits.iter().enumerate() {
            let name = &body.inputs[2 + k].name;
            let (reg, v) = self.reg_var(name, ty.clone());
            inner.values.insert(name.clone(), v);
            self.instrs.push(Instr::Move {
                dst: reg,
                src: *init,
            });
            carried.push(reg);
        }
        for t in body.initializers() {
            let e = typed(Expr::constant(to_runtime(t)?)).map_err(|m| err(m.0))?;
            inner.values.insert(t.name.clone(), e);
        }
        let lists: Vec<usize> = (0..n_scan)
            .map(|_| self.call_reg("list_new", Vec::new(), Type::tuple(Vec::new())))
            .collect();
        let top = self.instrs.len();
        let go = self.new_reg(bool_t);
        self.instrs.push(Instr::Call {
            func: "loop_continue".into(),
            args: vec![iter_reg, max, cond_reg],
            ints: Vec::new(),
            rets: vec![go],
        });
        let exit = self.instrs.len();
        self.instrs.push(Instr::JumpUnless {
            cond: go,
            target: usize::MAX,
        });
        let names: Vec<String> = body.outputs.iter().map(|o| o.name.clone()).collect();
        let outs = self
            .convert(&mut inner, &body.nodes, &names)
            .map_err(|e| err(format!("body: {e}")))?;
        // New values through temporaries, so a body that swaps carried values stays right.
        let mut targets = vec![cond_reg];
        targets.extend(&carried);
        let mut temps = Vec::with_capacity(targets.len());
        for (k, (&src, &dst)) in outs.iter().zip(&targets).enumerate() {
            let want = self.reg_types[dst].clone();
            let got = self.reg_types[src].clone();
            let same = if k == 0 {
                got.as_tensor()
                    .is_some_and(|(s, _)| s.iter().product::<i64>() == 1)
            } else {
                got == want
            };
            if !same {
                return Err(err(format!(
                    "body output #{k} ('{}') is {got} but the loop carries {want}; Kiln compiles \
                     the body once, so loop-carried values keep their type",
                    names[k]
                )));
            }
            let tmp = self.new_reg(got);
            self.instrs.push(Instr::Move { dst: tmp, src });
            temps.push(tmp);
        }
        // Scan outputs are copied into their lists before the carried registers change (a
        // scan output may be a carried input).
        let mut scan_types = Vec::with_capacity(n_scan);
        for (j, &list) in lists.iter().enumerate() {
            let src = outs[1 + n_carried + j];
            scan_types.push(self.reg_types[src].clone());
            self.instrs.push(Instr::Call {
                func: "list_append".into(),
                args: vec![list, src],
                ints: Vec::new(),
                rets: vec![list],
            });
        }
        for (&tmp, &dst) in temps.iter().zip(&targets) {
            self.instrs.push(Instr::Move { dst, src: tmp });
        }
        self.instrs.push(Instr::Call {
            func: "add_one".into(),
            args: vec![iter_reg],
            ints: Vec::new(),
            rets: vec![iter_reg],
        });
        self.instrs.push(Instr::Jump { target: top });
        self.instrs[exit] = Instr::JumpUnless {
            cond: go,
            target: self.instrs.len(),
        };
        // The node's outputs: final carried values, then the stacked scan outputs.
        for (k, &src) in carried.iter().enumerate() {
            let Some(name) = node.outputs.get(k).filter(|n| !n.is_empty()) else {
                continue;
            };
            let (dst, v) = self.reg_var(name, self.reg_types[src].clone());
            self.instrs.push(Instr::Move { dst, src });
            ctx.values.insert(name.clone(), v);
        }
        for (j, (&list, ty)) in lists.iter().zip(&scan_types).enumerate() {
            let Some(name) = node.outputs.get(n_carried + j).filter(|n| !n.is_empty()) else {
                continue;
            };
            let (shape, dtype) = ty
                .as_tensor()
                .ok_or_else(|| err(format!("scan output #{j} is not a tensor")))?;
            let mut out_shape = vec![-1];
            out_shape.extend_from_slice(shape);
            let (dst, v) = self.reg_var(name, Type::tensor(&out_shape, dtype));
            let mut ints = vec![
                dtype.code() as i64,
                dtype.bits() as i64,
                dtype.lanes() as i64,
            ];
            ints.extend_from_slice(shape);
            self.instrs.push(Instr::Call {
                func: "list_stack".into(),
                args: vec![list],
                ints,
                rets: vec![dst],
            });
            ctx.values.insert(name.clone(), v);
        }
        Ok(())
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
        let (then_regs, then_types) = self.branch(ctx, node, "then_branch")?;
        let outs: Vec<(usize, Expr)> = node
            .outputs
            .iter()
            .zip(&then_types)
            .map(|(name, ty)| self.reg_var(name, ty.clone()))
            .collect();
        for ((dst, _), &src) in outs.iter().zip(&then_regs) {
            self.instrs.push(Instr::Move { dst: *dst, src });
        }
        let jump_end = self.instrs.len();
        self.instrs.push(Instr::Jump { target: usize::MAX });
        self.instrs[jump_else] = Instr::JumpUnless {
            cond: cond_reg,
            target: self.instrs.len(),
        };
        let (else_regs, else_types) = self.branch(ctx, node, "else_branch")?;
        for (k, (t, e)) in then_types.iter().zip(&else_types).enumerate() {
            if t != e {
                return Err(err(format!(
                    "output #{k} ('{}') is {t} in then_branch but {e} in else_branch; Kiln \
                     compiles the nodes after an If once, so both branches must give one type",
                    node.outputs.get(k).map(String::as_str).unwrap_or("")
                )));
            }
        }
        for ((dst, _), &src) in outs.iter().zip(&else_regs) {
            self.instrs.push(Instr::Move { dst: *dst, src });
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
            .convert(&mut inner, &sub.nodes, &names)
            .map_err(|e| err(e.to_string()))?;
        let types = regs.iter().map(|&r| self.reg_types[r].clone()).collect();
        Ok((regs, types))
    }
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
}

/// Refuses a node that reads a value whose shape is known only at run time (a run-time
/// Loop's scan output): such values can only be outputs of the model so far.
fn check_static_inputs(ctx: &Ctx<'_>, node: &Node) -> Result<()> {
    for name in node.inputs.iter().filter(|n| !n.is_empty()) {
        let Some(e) = ctx.values.get(name) else {
            continue;
        };
        if let Some((shape, _)) = e.checked_type().and_then(|t| t.as_tensor()) {
            if shape.contains(&-1) {
                return Err(node_error(
                    node,
                    Msg(format!(
                        "input '{name}' has the shape {shape:?}, known only at run time (a \
                         Loop's scan output); Kiln's executors take such values as model \
                         outputs only"
                    )),
                ));
            }
        }
    }
    Ok(())
}

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
const RUN_TIME_OPS: [&str; 5] = ["If", "Loop", "NonZero", "Unique", "NonMaxSuppression"];

/// Whether any node of `nodes` (subgraphs included) is one of [`RUN_TIME_OPS`].
fn may_run_time(nodes: &[Node]) -> bool {
    fn graph(g: &GraphProto) -> bool {
        g.node.iter().any(|n| {
            RUN_TIME_OPS.contains(&n.op_type())
                || n.attribute
                    .iter()
                    .any(|a| a.g.as_ref().is_some_and(graph) || a.graphs.iter().any(graph))
        })
    }
    nodes.iter().any(|n| {
        RUN_TIME_OPS.contains(&n.op_type.as_str())
            || n.attributes.iter().any(|(_, a)| match a {
                AttrValue::Graph(g) => graph(g),
                AttrValue::Graphs(gs) => gs.iter().any(graph),
                _ => false,
            })
    })
}

/// Converts `model` to a VM program when it has control flow decided at run time (an `If` or
/// `Loop` deciding on run-time values, or an operator whose output shapes depend on them);
/// `None` when every decision is known at compile time (then [`super::from_onnx_frozen`] gives
/// the static graph). `shapes` and `frozen` are [`super::from_onnx_frozen`]'s.
pub fn from_onnx_program(
    model: &Model,
    shapes: &InputShapes,
    frozen: &FrozenInputs,
) -> Result<Option<Program>> {
    if !may_run_time(&model.graph.nodes) {
        return Ok(None);
    }
    let (program, split) = convert_program(model, std::slice::from_ref(shapes), frozen, "")?;
    Ok(split.then_some(program))
}

/// Converts `model` to ONE program holding code for every combination of the symbolic
/// dimension values `dims` (see [`crate::Graph::specializations`]; `shapes` fixes other
/// inputs): the VM compares the input shapes given at run time with each combination's and
/// runs that one's code (its segments compiled for those shapes, so fused and scheduled as a
/// static model), and refuses other shapes with an error naming the dimensions and the values
/// compiled for.
pub fn from_onnx_dims(
    model: &Model,
    shapes: &InputShapes,
    dims: &DimValues,
    frozen: &FrozenInputs,
) -> Result<Program> {
    let sets = model.graph.specializations(shapes, dims)?;
    let compiled: Vec<String> = dims
        .iter()
        .map(|(name, values)| {
            let v: Vec<String> = values.iter().map(usize::to_string).collect();
            format!("'{name}' in {{{}}}", v.join(", "))
        })
        .collect();
    let unmatched = format!(
        "no code for these input shapes: the library was compiled for dimension(s) {} (add \
         values with --dim NAME=V1,V2,... when compiling)",
        compiled.join(", ")
    );
    Ok(convert_program(model, &sets, frozen, &unmatched)?.0)
}

/// The program of `model` with code for each input shape set of `sets` (tested in order, the
/// first match runs; none: a failure saying `unmatched`), and whether it needed the VM beyond
/// one static graph.
fn convert_program(
    model: &Model,
    sets: &[InputShapes],
    frozen: &FrozenInputs,
    unmatched: &str,
) -> Result<(Program, bool)> {
    model.check_supported_ops(converters().keys().copied())?;
    let bounds = sets
        .iter()
        .map(|s| model.graph.bind_input_shapes(s))
        .collect::<Result<Vec<_>>>()?;
    let first = bounds
        .first()
        .ok_or_else(|| OnnxError::Graph("no input shapes".into()))?;
    let mut b = Builder {
        instrs: Vec::new(),
        reg_types: Vec::new(),
        segments: Vec::new(),
        reg_of: HashMap::new(),
        split: sets.len() > 1,
    };
    // One register per run-time input, its shape -1 where the sets differ.
    let mut inputs = Vec::new();
    for (i, inp) in first.inputs.iter().enumerate() {
        if frozen.contains_key(&inp.name) {
            continue;
        }
        let shape: Vec<i64> = (0..inp.shape.len())
            .map(|d| {
                let n = inp.shape[d];
                if bounds
                    .iter()
                    .all(|bd| bd.inputs[i].shape.get(d) == Some(&n))
                {
                    n as i64
                } else {
                    -1
                }
            })
            .collect();
        let dtype = graph_dtype(inp.dtype);
        let reg = b.new_reg(Type::tensor(&shape, dtype));
        inputs.push((
            i,
            Slot {
                name: inp.name.clone(),
                reg,
                dtype,
                shape,
            },
        ));
    }
    let names: Vec<String> = model.graph.outputs.iter().map(|o| o.name.clone()).collect();
    let shared: Vec<usize> = if sets.len() > 1 {
        names
            .iter()
            .map(|_| b.new_reg(Type::tuple(Vec::new())))
            .collect()
    } else {
        Vec::new()
    };
    let mut results: Vec<Vec<usize>> = Vec::with_capacity(sets.len());
    let mut to_end = Vec::new();
    for bound in &bounds {
        let test = if sets.len() > 1 {
            let mut args = Vec::new();
            let mut ints = Vec::new();
            for (i, slot) in &inputs {
                if slot.shape.contains(&-1) {
                    let shape = &bound.inputs[*i].shape;
                    args.push(slot.reg);
                    ints.push(shape.len() as i64);
                    ints.extend(shape.iter().map(|&d| d as i64));
                }
            }
            let cond = b.new_reg(Type::tensor(&[], kiln_ffi::DataType::bool()));
            b.instrs.push(Instr::Call {
                func: "shape_is".into(),
                args,
                ints,
                rets: vec![cond],
            });
            b.instrs.push(Instr::JumpUnless {
                cond,
                target: usize::MAX,
            });
            Some(b.instrs.len() - 1)
        } else {
            None
        };
        let mut ctx = Ctx {
            model,
            opset: model.opset(),
            values: HashMap::new(),
        };
        for inp in &bound.inputs {
            let shape: Vec<i64> = inp.shape.iter().map(|&d| d as i64).collect();
            let ty = Type::tensor(&shape, graph_dtype(inp.dtype));
            if let Some(t) = frozen.get(&inp.name) {
                let given = Type::tensor(t.shape(), t.dtype());
                if given != ty {
                    return Err(OnnxError::Graph(format!(
                        "frozen input '{}' is declared {ty} but its value is {given}",
                        inp.name
                    )));
                }
                let e =
                    typed_constant(Expr::constant(t.clone())).map_err(|m| OnnxError::Graph(m.0))?;
                ctx.values.insert(inp.name.clone(), e);
                continue;
            }
            let reg = inputs
                .iter()
                .find(|(_, s)| s.name == inp.name)
                .map(|(_, s)| s.reg)
                .expect("a register per run-time input");
            let v = Var::new(&inp.name, ty).expr();
            b.reg_of.insert(v.key(), reg);
            ctx.values.insert(inp.name.clone(), v);
        }
        for name in frozen.keys() {
            if !bound.inputs.iter().any(|i| i.name == *name) {
                return Err(OnnxError::Graph(format!(
                    "frozen input '{name}' is not a run-time input of the graph"
                )));
            }
        }
        for t in model.graph.initializers() {
            let e = typed(Expr::constant(to_runtime(t)?)).map_err(|m| OnnxError::Graph(m.0))?;
            ctx.values.insert(t.name.clone(), e);
        }
        let regs = b.convert(&mut ctx, &model.graph.nodes, &names)?;
        if let Some(pc) = test {
            for (&dst, &src) in shared.iter().zip(&regs) {
                b.instrs.push(Instr::Move { dst, src });
            }
            to_end.push(b.instrs.len());
            b.instrs.push(Instr::Jump { target: usize::MAX });
            let next = b.instrs.len();
            if let Instr::JumpUnless { target, .. } = &mut b.instrs[pc] {
                *target = next;
            }
        }
        results.push(regs);
    }
    if sets.len() > 1 {
        b.instrs.push(Instr::Fail {
            message: unmatched.to_string(),
        });
        let end = b.instrs.len();
        for pc in to_end {
            b.instrs[pc] = Instr::Jump { target: end };
        }
    }
    // Output slots: a dimension that differs between the sets is -1.
    let mut outputs = Vec::with_capacity(names.len());
    for (j, name) in names.iter().enumerate() {
        let types: Vec<(Vec<i64>, kiln_ffi::DataType)> = results
            .iter()
            .map(|r| {
                let (s, d) = b.reg_types[r[j]].as_tensor().expect("tensor registers");
                (s.to_vec(), d)
            })
            .collect();
        let (mut shape, dtype) = types[0].clone();
        for (s, d) in &types[1..] {
            if *d != dtype || s.len() != shape.len() {
                return Err(OnnxError::Graph(format!(
                    "output '{name}' is {dtype} of rank {} for one input shape but {d} of rank {} \
                     for another",
                    shape.len(),
                    s.len()
                )));
            }
            for (a, &x) in shape.iter_mut().zip(s) {
                if *a != x {
                    *a = -1;
                }
            }
        }
        let reg = if sets.len() > 1 {
            shared[j]
        } else {
            results[0][j]
        };
        b.reg_types[reg] = Type::tensor(&shape, dtype);
        outputs.push(Slot {
            name: name.clone(),
            reg,
            dtype,
            shape,
        });
    }
    let code = Code {
        num_regs: b.reg_types.len(),
        inputs: inputs.into_iter().map(|(_, s)| s).collect(),
        outputs,
        instrs: b.instrs,
    };
    Ok((
        Program {
            code,
            segments: b.segments,
        },
        b.split,
    ))
}
