//! The graph build (TVM's `relay.build`): a graph module to a `GraphExecutorFactory` module.
//!
//! 1. Params bound as constants ([`crate::transform::bind_params`]) and the optimization
//!    pipeline ([`crate::transform::default_pipeline`], FuseOps last), unless `main` already
//!    calls primitive functions only.
//! 2. [`graph_codegen()`]: the graph JSON (nodes, arg_nodes, heads, node_row_ptr, attrs with
//!    shape / dltype / storage_id, storage planned), the params (constants of `main`, named
//!    `p0`, ...) and the distinct primitive functions.
//! 3. [`lower::lower_primitive`]: each primitive function to one `PrimFunc` through TOPI;
//!    all of them in one TIR `IRModule`, compiled by `kiln_codegen::driver::codegen_build`.
//! 4. `GraphExecutorFactory::create(json, lib, params, "default")`.
//!
//! `export_library` of the factory writes one `.so`; `load_module(path)["default"](cpu)` gives
//! a graph executor.
//!
//! A device target (`opencl`, `cuda`) gives one library whose host code is LLVM for the host
//! CPU, launching the kernels of one imported device module (an OpenCL program for `opencl`):
//! every fused group is scheduled with threads ([`lower::ScheduleFamily`]), and the executor
//! created on the device keeps params and intermediates there. A fused group without a device
//! schedule ([`lower::needs_host`]: hand-written loop nests such as the recurrent kernels, Det,
//! TreeEnsemble) runs on the host CPU instead, lowered for `llvm` into the same library, with
//! `__copy` nodes between the device and the host ([`graph_codegen_placed`]); the executor
//! created on the device adds the CPU for those entries.
//!
//! Several targets give one library with a code variant per target (`kiln_codegen::variants`):
//! the graph is laid out for the widest CPU ([`layout_cpu`]) and each variant tiled for its own.
//!
//! # Globals
//! `graph.build(IRModule, target?, params?: {name: tensor})` -> the factory module; `target`
//! is a target string or a list of them.

pub mod compute;
pub mod graph_codegen;
pub mod hash;
pub mod lower;
pub mod program;
pub mod scalar_output;
pub mod shape_program;
pub mod storage;

pub use graph_codegen::{graph_codegen, graph_codegen_placed, GraphCodegenResult};
pub use program::{build_program, Program};

use crate::ir::{Expr, IRModule};
use crate::transform::PassContext;
use kiln_codegen::target::Target;
use kiln_ffi::{register_global, Error, Map, Result};
use kiln_runtime::graph_executor::GraphExecutorFactory;
use kiln_runtime::module::Module;
use kiln_runtime::tensor::Tensor;
use kiln_tir::CpuDesc;

/// True when every call in `main` calls a primitive function (FuseOps has run).
fn is_fused(module: &IRModule) -> Result<bool> {
    let main = module.main()?;
    Ok(crate::ir::visit::post_order(main.body())
        .iter()
        .all(|e| match e {
            Expr::Call(c) => matches!(&c.op, Expr::Function(f) if f.is_primitive()),
            _ => true,
        }))
}

/// The module after the default pipeline at opt level 3 (unchanged when `main` is already
/// fused); weights stay parameters (see [`optimize_with`] for binding them).
pub fn optimize(module: &IRModule) -> Result<IRModule> {
    Ok(optimize_with(module, Vec::new(), &PassContext::with_opt_level(3))?.0)
}

/// `params` bound as constants of `main` ([`crate::transform::bind_params`]) and the default
/// pipeline run under `ctx`, unless `main` is already fused: the optimized module and the
/// params that name no parameter of `main` (left for the executor).
pub fn optimize_with(
    module: &IRModule,
    params: Vec<(String, Tensor)>,
    ctx: &PassContext,
) -> Result<(IRModule, Vec<(String, Tensor)>)> {
    if is_fused(module)? {
        return Ok((module.clone(), params));
    }
    let (bound, rest) = crate::transform::bind_params(module, params)?;
    Ok((crate::transform::default_pipeline().run(bound, ctx)?, rest))
}

/// Compiles every primitive function of a codegen result for `target` into one library,
/// tiled for the target's CPU.
pub fn build_lib(cg: &GraphCodegenResult, target: &str) -> Result<Module> {
    build_lib_targets(cg, &[target])
}

/// Compiles every primitive function of a codegen result into one library holding a code
/// variant per target (each tiled for its target's CPU; the loader runs the best one the host
/// can, see `kiln_codegen::variants`).
pub fn build_lib_targets(cg: &GraphCodegenResult, targets: &[&str]) -> Result<Module> {
    build_functions(&cg.functions, &cg.host_functions, targets)
}

/// [`build_lib_targets`] of a list of primitive functions, `host` naming those that run on
/// the host CPU in a device build.
pub(crate) fn build_functions(
    functions: &[(String, crate::ir::Function)],
    host: &[String],
    targets: &[&str],
) -> Result<Module> {
    if functions.is_empty() {
        if let [t] = targets {
            if lower::ScheduleFamily::parse(t)?.is_device() {
                // Nothing to launch (every output a constant or an input): an empty host
                // library; the executor still runs on the device it is created for.
                return kiln_codegen::driver::codegen_build(
                    &kiln_tir::IRModule::new(Vec::new())?,
                    "llvm",
                );
            }
        }
    }
    if let [t] = targets {
        if !host.is_empty() {
            let cpu = Target::parse(t)?.cpu_desc();
            return build_functions_for(functions, host, t, &cpu);
        }
    }
    let mut parts = Vec::with_capacity(targets.len());
    for &t in targets {
        let cpu = Target::parse(t)?.cpu_desc();
        parts.push((lower_all(functions, t, &cpu)?, t.to_string()));
    }
    kiln_codegen::driver::codegen_build_variants(&parts)
}

/// [`build_lib`] with schedules tiled for `cpu` instead of the target's own description (a
/// description made by hand, for exploring tilings and testing that schedules follow it).
pub fn build_lib_for(cg: &GraphCodegenResult, target: &str, cpu: &CpuDesc) -> Result<Module> {
    build_functions_for(&cg.functions, &cg.host_functions, target, cpu)
}

fn build_functions_for(
    functions: &[(String, crate::ir::Function)],
    host_functions: &[String],
    target: &str,
    cpu: &CpuDesc,
) -> Result<Module> {
    if host_functions.is_empty() {
        return kiln_codegen::driver::codegen_build(&lower_all(functions, target, cpu)?, target);
    }
    let host_cpu = Target::parse(HOST_TARGET)?.cpu_desc();
    let mut device = Vec::new();
    let mut host = Vec::new();
    for (name, f) in functions {
        if host_functions.contains(name) {
            host.push((
                name.clone(),
                lower::lower_primitive(f, name, HOST_TARGET, &host_cpu)
                    .map_err(|e| e.context(format!("lowering `{name}` for the host")))?,
            ));
        } else {
            device.push((name.clone(), lower::lower_primitive(f, name, target, cpu)?));
        }
    }
    kiln_codegen::driver::codegen_build_with_cpu_funcs(
        &kiln_tir::IRModule::new(device)?,
        &host,
        target,
    )
}

/// The target of the functions a device build runs on the host.
const HOST_TARGET: &str = "llvm";

/// Every primitive function of `functions` lowered for `target`, tiled for `cpu`, in one TIR
/// module.
fn lower_all(
    functions: &[(String, crate::ir::Function)],
    target: &str,
    cpu: &CpuDesc,
) -> Result<kiln_tir::IRModule> {
    let mut funcs = Vec::new();
    for (name, f) in functions {
        funcs.push((name.clone(), lower::lower_primitive(f, name, target, cpu)?));
    }
    kiln_tir::IRModule::new(funcs)
}

/// The graph codegen of `module` for `targets`: for one device target, placed on its device
/// with the functions [`lower::needs_host`] names on the host CPU; else unplaced.
pub fn graph_codegen_for(module: &IRModule, targets: &[&str]) -> Result<GraphCodegenResult> {
    if let [t] = targets {
        let target = Target::parse(t)?;
        if !target.kind.is_host() {
            let cpu = target.cpu_desc();
            let device_type = target.kind.device_type();
            let place = |name: &str, f: &crate::ir::Function| lower::needs_host(f, name, t, &cpu);
            return graph_codegen_placed(module, device_type, &place);
        }
    }
    graph_codegen(module)
}

/// The CPU whose description the graph's layouts follow when code for `targets` shares one
/// graph: the one with the widest float32 vectors (so packed blocks are whole vectors there,
/// and two vectors on the narrower ones).
pub fn layout_cpu(targets: &[&str]) -> Result<CpuDesc> {
    let mut best: Option<CpuDesc> = None;
    for &t in targets {
        let cpu = Target::parse(t)?.cpu_desc();
        if best
            .as_ref()
            .is_none_or(|b| cpu.f32_lanes() > b.f32_lanes())
        {
            best = Some(cpu);
        }
    }
    best.ok_or_else(|| Error::value_error("graph.build: no target given"))
}

/// The pass context the graph of a build for `targets` is optimized under (what
/// [`build_targets`] uses; callers optimizing first, as `kiln compile` does, use it too): `ctx`
/// with layouts for [`layout_cpu`]; for a device target (`opencl`, `cuda`) without
/// AlterOpLayout, whose packed layouts suit CPU vector registers, not GPU threads.
pub fn target_pass_context(ctx: &PassContext, targets: &[&str]) -> Result<PassContext> {
    graph_ctx(ctx, targets, layout_cpu(targets)?)
}

/// `ctx` with layouts for `cpu`, without AlterOpLayout and ConvertBlockedLayout when a
/// target is a device target.
fn graph_ctx(ctx: &PassContext, targets: &[&str], cpu: CpuDesc) -> Result<PassContext> {
    let mut ctx = ctx.clone().with_cpu(cpu);
    for t in targets {
        if lower::ScheduleFamily::parse(t)?.is_device() {
            ctx = ctx.disable("AlterOpLayout").disable("ConvertBlockedLayout");
            break;
        }
    }
    Ok(ctx)
}

/// Builds `module` for `target` (`llvm`, `llvm -mcpu=native`, ...) into a graph executor
/// factory module, optimizing with the default pipeline at opt level 3. `params` bind `main`
/// parameters of the same names as constants before optimizing (TVM's `bind_params_by_name`),
/// so weights are folded and re-laid out at compile time; they reach the executor as the
/// factory's params.
pub fn build(
    module: &IRModule,
    target: &str,
    params: impl IntoIterator<Item = (String, Tensor)>,
) -> Result<Module> {
    build_with(module, target, params, &PassContext::with_opt_level(3))
}

/// [`build`] under the pass context `ctx` (opt level, disabled passes, IR printing); layouts
/// and tiles follow the target's CPU description.
pub fn build_with(
    module: &IRModule,
    target: &str,
    params: impl IntoIterator<Item = (String, Tensor)>,
    ctx: &PassContext,
) -> Result<Module> {
    build_targets(module, &[target], params, ctx)
}

/// [`build_with`] for several targets: one graph (laid out for [`layout_cpu`]) and one library
/// holding a code variant per target, each tiled for its CPU.
pub fn build_targets(
    module: &IRModule,
    targets: &[&str],
    params: impl IntoIterator<Item = (String, Tensor)>,
    ctx: &PassContext,
) -> Result<Module> {
    let ctx = target_pass_context(ctx, targets)?;
    let (module, params) = optimize_with(module, params.into_iter().collect(), &ctx)?;
    let cg = graph_codegen_for(&module, targets)?;
    let lib = build_lib_targets(&cg, targets)?;
    factory(&cg, lib, params)
}

/// [`build_with`] with layouts and tiles following `cpu` instead of the target's own
/// description (see [`build_lib_for`]).
pub fn build_for(
    module: &IRModule,
    target: &str,
    cpu: &CpuDesc,
    params: impl IntoIterator<Item = (String, Tensor)>,
    ctx: &PassContext,
) -> Result<Module> {
    let ctx = graph_ctx(ctx, &[target], cpu.clone())?;
    let (module, params) = optimize_with(module, params.into_iter().collect(), &ctx)?;
    let cg = graph_codegen_for(&module, &[target])?;
    let lib = build_lib_for(&cg, target, cpu)?;
    factory(&cg, lib, params)
}

/// The graph executor factory of `cg` over `lib`, with `cg`'s constants and the `params` left
/// unbound.
fn factory(cg: &GraphCodegenResult, lib: Module, params: Vec<(String, Tensor)>) -> Result<Module> {
    let mut all = cg.params.clone();
    for (name, t) in params {
        if all.iter().any(|(n, _)| *n == name) {
            return Err(Error::value_error(format!(
                "graph.build: param {name:?} clashes with a constant's name"
            )));
        }
        all.push((name, t));
    }
    GraphExecutorFactory::create(&cg.graph_json, &lib, all, "default")
}

/// Links this module's registrations (`graph.build`; see [`crate::link_globals`]).
#[doc(hidden)]
pub fn link_globals() -> *const () {
    link_globals as *const ()
}

register_global!("graph.build", |module: IRModule,
                                 target: Option<kiln_ffi::Any>,
                                 params: Option<Map>|
 -> Result<Module> {
    let mut ps = Vec::new();
    if let Some(m) = params {
        for (k, v) in m.iter() {
            let name: String = k.try_as()?;
            let t: Tensor = v.try_as()?;
            ps.push((name, t));
        }
    }
    let targets = kiln_codegen::driver::target_list(target)?;
    let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
    build_targets(&module, &targets, ps, &PassContext::with_opt_level(3))
});
