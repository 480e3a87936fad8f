//! Building a program for the virtual machine: a model whose control flow is decided at run
//! time, as static graph segments (each a graph module, built like any static graph: optimized,
//! fused, scheduled) and the VM code that runs them ([`kiln_runtime::vm::Code`]).
//!
//! Every segment's functions go into ONE library (their names prefixed `vm<k>_` by segment),
//! and the result is a `VMFactory` module over it: `export_library` writes one `.so` and
//! `load_module(path)["default"](cpu)` gives a `VirtualMachine` executor.

use super::{build_functions, graph_codegen_for, optimize_with, target_pass_context};
use crate::ir::Function;
use crate::ir::IRModule;
use crate::transform::PassContext;
use kiln_ffi::{Error, Result};
use kiln_runtime::module::Module;
use kiln_runtime::tensor::Tensor;
use kiln_runtime::vm::{Code, Instr, Segment, VmFactory};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// A model as VM code over static graph segments.
#[derive(Clone)]
pub struct Program {
    /// The code; `Run` instructions name segments by index.
    pub code: Code,
    /// The segments: graph modules whose `main` takes the registers a `Run` passes and
    /// returns the ones it writes (a tuple for several).
    pub segments: Vec<IRModule>,
    /// The kernels `Kernel` instructions call, by name: typed primitive functions whose
    /// dimensions of -1 are known only at run time (compiled with symbolic extents).
    pub kernels: Vec<(String, Function)>,
}

impl Program {
    /// Checks that every `Run` names a segment and every segment is run (a segment nothing
    /// runs is a bug of whoever made the program), and the code itself.
    fn check(&self) -> Result<()> {
        let mut used = vec![false; self.segments.len()];
        for (pc, ins) in self.code.instrs.iter().enumerate() {
            if let Instr::Kernel { func, .. } = ins {
                if !self.kernels.iter().any(|(n, _)| n == func) {
                    return Err(Error::value_error(format!(
                        "program: instruction {pc} calls kernel `{func}`, which the program \
                         does not define"
                    )));
                }
            }
            if let Instr::Run { segment, .. } = ins {
                *used.get_mut(*segment).ok_or_else(|| {
                    Error::value_error(format!(
                        "program: instruction {pc} runs segment {segment}, but there are {}",
                        self.segments.len()
                    ))
                })? = true;
            }
        }
        if let Some(k) = used.iter().position(|u| !u) {
            return Err(Error::value_error(format!(
                "program: segment {k} is never run"
            )));
        }
        self.code.validate()
    }
}

/// Tensors of equal contents made one (the weights of a model compiled for several shapes are
/// the same in every segment), so the library holds each once.
#[derive(Default)]
struct SharedTensors {
    /// Content hash to the tensors kept with it.
    kept: HashMap<u64, Vec<(Vec<u8>, Tensor)>>,
}

impl SharedTensors {
    /// The tensor kept with `t`'s dtype, shape and bytes: `t` itself the first time.
    fn get(&mut self, t: Tensor) -> Result<Tensor> {
        let bytes = t.to_bytes()?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (t.dtype().to_string(), t.shape(), &bytes).hash(&mut h);
        let same = self.kept.entry(h.finish()).or_default();
        if let Some((_, k)) = same
            .iter()
            .find(|(b, k)| *b == bytes && k.dtype() == t.dtype() && k.shape() == t.shape())
        {
            return Ok(k.clone());
        }
        same.push((bytes, t.clone()));
        Ok(t)
    }
}

/// Builds `program` for `targets` under `ctx` (as [`super::build_targets`] builds one graph):
/// a `VMFactory` module whose library holds every segment's kernels.
pub fn build_program(program: &Program, targets: &[&str], ctx: &PassContext) -> Result<Module> {
    program.check()?;
    let ctx = target_pass_context(ctx, targets)?;
    let mut functions = program.kernels.clone();
    let mut host_functions = Vec::new();
    let mut segments = Vec::with_capacity(program.segments.len());
    let mut shared = SharedTensors::default();
    for (k, module) in program.segments.iter().enumerate() {
        let what = |e: Error| e.context(format!("program segment {k}"));
        let (module, rest) = optimize_with(module, Vec::new(), &ctx).map_err(what)?;
        debug_assert!(rest.is_empty());
        let mut cg = graph_codegen_for(&module, targets).map_err(what)?;
        let prefix = format!("vm{k}_");
        let renamed: Vec<String> = cg.functions.iter().map(|(n, _)| n.clone()).collect();
        for node in cg.graph.nodes.iter_mut() {
            if let Some(p) = node.param.as_mut() {
                if renamed.contains(&p.func_name) {
                    p.func_name = format!("{prefix}{}", p.func_name);
                }
            }
        }
        for (name, f) in cg.functions.drain(..) {
            functions.push((format!("{prefix}{name}"), f));
        }
        for name in cg.host_functions.drain(..) {
            host_functions.push(format!("{prefix}{name}"));
        }
        let params = std::mem::take(&mut cg.params)
            .into_iter()
            .map(|(name, t)| Ok((name, shared.get(t)?)))
            .collect::<Result<Vec<_>>>()?;
        segments.push(Segment::new(cg.graph.to_json(), params)?);
    }
    let lib = if functions.is_empty() && program.segments.is_empty() {
        // Builtins only: an empty library still carries the program.
        let target = targets.first().copied().unwrap_or("llvm");
        kiln_codegen::driver::codegen_build(&kiln_tir::IRModule::new(Vec::new())?, target)?
    } else {
        build_functions(&functions, &host_functions, targets)?
    };
    VmFactory::create(program.code.clone(), segments, &lib, "default")
}
