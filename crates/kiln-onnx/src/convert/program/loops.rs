//! Run-time `Loop`s on the VM.

use std::collections::HashSet;

use kiln_graph::ir::{Expr, Type};
use kiln_runtime::vm::Instr;

use super::Builder;
use crate::attr::AttrValue;
use crate::convert::{node_error, to_runtime, typed, Ctx, Msg};
use crate::{Graph, Node, Result};

impl Builder {
    /// A run-time Loop: the trip count, condition and loop-carried values in registers, the
    /// body converted once (as segments, or a program of its own when it decides at run time
    /// too) and run while `i < M && cond`; scan outputs are collected in lists and stacked
    /// after the last iteration.
    pub(super) fn loop_node(&mut self, ctx: &mut Ctx<'_>, node: &Node) -> Result<()> {
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
        // The body is converted with the carried values' types; where the body gives a value
        // of the same rank and dtype but other extents, those extents are left to run time
        // and the body converted again (at most once per extent).
        let mut entry = LoopEntry {
            carried_types: inits.iter().map(|(_, t)| t.clone()).collect(),
            inits,
            max,
            cond0,
            n_scan,
        };
        let snapshot = self.clone();
        let BodyState {
            top,
            exit,
            go,
            outs,
            carried,
            lists,
            temps,
            targets,
            iter_reg,
        } = loop {
            match self.loop_body(ctx, node, &body, &entry)? {
                Ok(state) => break state,
                Err((k, ty)) => {
                    *self = snapshot.clone();
                    entry.carried_types[k] = ty;
                }
            }
        };
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

    /// The body of a run-time Loop over registers of the entry's carried types, up to the
    /// moves of its results into temporaries; `Err((k, wider))` when carried value `k` must
    /// take the wider type `wider` (the body gives it other extents).
    fn loop_body(
        &mut self,
        ctx: &Ctx<'_>,
        node: &Node,
        body: &Graph,
        entry: &LoopEntry,
    ) -> Result<std::result::Result<BodyState, (usize, Type)>> {
        let LoopEntry {
            carried_types,
            inits,
            max,
            cond0,
            n_scan,
        } = entry;
        let (max, cond0, n_scan) = (*max, *cond0, *n_scan);
        let err = |m: String| node_error(node, Msg(m));
        let i64_t = Type::tensor(&[], kiln_ffi::DataType::int(64));
        let bool_t = Type::tensor(&[], kiln_ffi::DataType::bool());
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
        let mut carried = Vec::with_capacity(inits.len());
        for (k, ((init, _), ty)) in inits.iter().zip(carried_types).enumerate() {
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
            .on_own_path(|b| b.convert(&mut inner, &body.nodes, &names))
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
                fits(&want, &got)
            };
            if !same && k > 0 {
                if let Some(wider) = widened(&want, &got) {
                    return Ok(Err((k - 1, wider)));
                }
            }
            if !same {
                return Err(err(format!(
                    "body output #{k} ('{}') is {got} but the loop carries {want}; Kiln compiles \
                     the body once, so loop-carried values keep their rank and dtype",
                    names[k]
                )));
            }
            let tmp = self.new_reg(got);
            self.instrs.push(Instr::Move { dst: tmp, src });
            temps.push(tmp);
        }
        Ok(Ok(BodyState {
            top,
            exit,
            go,
            outs,
            carried,
            lists,
            temps,
            targets,
            iter_reg,
        }))
    }
}

/// What a run-time Loop's body starts from: the carried values' registers and types, the
/// registers of the trip count and first condition, and the number of scan outputs.
struct LoopEntry {
    carried_types: Vec<Type>,
    inits: Vec<(usize, Type)>,
    max: usize,
    cond0: usize,
    n_scan: usize,
}

/// The registers and places of a converted Loop body.
struct BodyState {
    /// The instruction the loop returns to.
    top: usize,
    /// The exit jump (its target set once the loop's end is known).
    exit: usize,
    /// The register of the loop's go-on condition.
    go: usize,
    /// The body's outputs.
    outs: Vec<usize>,
    /// The carried values' registers.
    carried: Vec<usize>,
    /// The scan outputs' lists.
    lists: Vec<usize>,
    /// The temporaries holding the new condition and carried values.
    temps: Vec<usize>,
    /// Where the temporaries go.
    targets: Vec<usize>,
    /// The iteration counter.
    iter_reg: usize,
}

/// Whether a value of type `got` fits a register of type `want`: equal, or tensors of one
/// rank and dtype whose extents agree where `want` fixes them.
fn fits(want: &Type, got: &Type) -> bool {
    if want == got {
        return true;
    }
    match (want.as_tensor(), got.as_tensor()) {
        (Some((w, wd)), Some((g, gd))) => {
            wd == gd && w.len() == g.len() && w.iter().zip(g).all(|(&a, &b)| a == -1 || a == b)
        }
        _ => false,
    }
}

/// `want` with the extents where `got` differs left to run time, when both are tensors of one
/// rank and dtype and `want` is not that already.
fn widened(want: &Type, got: &Type) -> Option<Type> {
    let ((w, wd), (g, gd)) = (want.as_tensor()?, got.as_tensor()?);
    if wd != gd || w.len() != g.len() {
        return None;
    }
    let shape: Vec<i64> = w
        .iter()
        .zip(g)
        .map(|(&a, &b)| if a == b { a } else { -1 })
        .collect();
    (shape != w).then(|| Type::tensor(&shape, wd))
}
