//! The entry points: a model to a program, for its input shapes or for several.

use std::collections::HashMap;

use kiln_graph::build::Program;
use kiln_graph::ir::{Expr, Type, Var};
use kiln_runtime::vm::{Code, Instr, Slot};

use super::{may_run_time, Builder};
use crate::convert::{
    check_frozen, converters, graph_dtype, input_binding, to_runtime, typed, Ctx, FrozenInputs,
};
use crate::{DimValues, InputShapes, Model, OnnxError, Result};

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
    let (program, split) = convert_program(model, std::slice::from_ref(shapes), frozen, "", &[])?;
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
    let any: Vec<&str> = dims
        .iter()
        .filter(|(_, v)| v.is_empty())
        .map(|(n, _)| n.as_str())
        .collect();
    Ok(convert_program(model, &sets, frozen, &unmatched, &any)?.0)
}

/// Whether dimension `d` of input `name` is one of the symbolic dimensions `any` (known only
/// at run time).
fn is_any(model: &Model, name: &str, d: usize, any: &[&str]) -> bool {
    model
        .graph
        .inputs
        .iter()
        .find(|v| v.name == name)
        .and_then(|v| v.dims.as_ref())
        .and_then(|ds| ds.get(d))
        .is_some_and(|dim| matches!(dim, crate::Dim::Symbolic(s) if any.contains(&s.as_str())))
}

/// The program of `model` with code for each input shape set of `sets` (tested in order, the
/// first match runs; none: a failure saying `unmatched`), and whether it needed the VM beyond
/// one static graph. Input dimensions of the symbolic dimensions `any` are -1 (known only at
/// run time) in every set.
fn convert_program(
    model: &Model,
    sets: &[InputShapes],
    frozen: &FrozenInputs,
    unmatched: &str,
    any: &[&str],
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
        split: sets.len() > 1 || !any.is_empty(),
        kernels: Vec::new(),
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
                if !is_any(model, &inp.name, d, any)
                    && bounds
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
                    // A dimension known only at run time matches any value (-1).
                    let shape = &bound.inputs[*i].shape;
                    args.push(slot.reg);
                    ints.push(shape.len() as i64);
                    ints.extend(shape.iter().enumerate().map(|(d, &n)| {
                        if is_any(model, &slot.name, d, any) {
                            -1
                        } else {
                            n as i64
                        }
                    }));
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
        check_frozen(bound, frozen)?;
        for inp in &bound.inputs {
            let (ty, fixed) = input_binding(inp, frozen)?;
            if let Some(e) = fixed {
                ctx.values.insert(inp.name.clone(), e);
                continue;
            }
            let ty = match ty.as_tensor() {
                Some((shape, dtype)) if !any.is_empty() => {
                    let shape: Vec<i64> = shape
                        .iter()
                        .enumerate()
                        .map(|(d, &n)| {
                            if is_any(model, &inp.name, d, any) {
                                -1
                            } else {
                                n
                            }
                        })
                        .collect();
                    Type::tensor(&shape, dtype)
                }
                _ => ty,
            };
            let reg = inputs
                .iter()
                .find(|(_, s)| s.name == inp.name)
                .map(|(_, s)| s.reg)
                .expect("a register per run-time input");
            let v = Var::new(&inp.name, ty).expr();
            b.reg_of.insert(v.key(), (reg, v.clone()));
            ctx.values.insert(inp.name.clone(), v);
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
            kernels: b.kernels,
        },
        b.split,
    ))
}
