//! The compiler driver (seed 004's `tvm.lower` and `tvm.build`): a tensor-expression schedule
//! to an [`IRModule`] through the lowering passes, and to a runnable [`Module`].
//!
//! - [`lower`]: `kiln_te::lower` (the schedule as a `PrimFunc`), then the passes of
//!   [`lower_pipeline`]: phases 0-2 only in simple mode (the readable TIR `kiln.lower(...,
//!   simple_mode=True)` prints), through MakePackedAPI and LowerTVMBuiltin otherwise (what
//!   code generation takes).
//! - [`build`]: a schedule (lowered here) or an already lowered module, compiled for a target
//!   string; the target's kind picks the back end (`llvm`: [`crate::build()`]; `c`:
//!   [`crate::c::build_c`]).
//! - [`codegen_build`]: an [`IRModule`] already in packed form to a [`Module`] (TVM's
//!   `codegen.Build`).
//!
//! # Globals
//! `driver.Lower(schedule, args, name, simple_mode?)` -> `IRModule`;
//! `driver.Build(schedule_or_IRModule, args?, target, name?)` -> `runtime.Module` (modules not
//! yet in packed form are run through the remaining passes first);
//! `codegen.Build(IRModule, target)` -> `runtime.Module`; `codegen.BuildWithHost(IRModule,
//! target, target_host)`: a device target with the host part compiled for `target_host`.
//!
//! Device targets (`opencl`, `cuda`): the schedule is lowered through the phase passes
//! (without StorageRewrite), SplitHostDevice makes the kernels, the host part is lowered and
//! compiled for `target_host` (default `llvm`) and imports the device module
//! ([`crate::device::module`]). [`codegen_build_with_cpu_funcs`] adds functions already lowered
//! for the host CPU to that host code (the graph build's functions without a device schedule).

use crate::target::{Target, TargetKind};
use kiln_ffi::{register_global, Any, Error, Result};
use kiln_runtime::module::Module;
use kiln_te::{Schedule, Tensor};
use kiln_tir::node::NodeList;
use kiln_tir::transform::{lower_pipeline, Pass, PassContext};
use kiln_tir::IRModule;

/// The default function name of [`lower`] and [`build`] (TVM's `default_function`).
pub const DEFAULT_NAME: &str = "default_function";

/// The passes before host lowering (phases 0-2 of [`lower_pipeline`]).
fn phase_passes() -> Vec<Pass> {
    let all = lower_pipeline();
    all.passes()
        .iter()
        .take_while(|p| p.name() != "tir.MakePackedAPI")
        .cloned()
        .collect()
}

/// The host passes (MakePackedAPI, LowerTVMBuiltin).
fn host_passes() -> Vec<Pass> {
    let all = lower_pipeline();
    all.passes()
        .iter()
        .skip_while(|p| p.name() != "tir.MakePackedAPI")
        .cloned()
        .collect()
}

fn run_passes(passes: &[Pass], module: IRModule, ctx: &PassContext) -> Result<IRModule> {
    let mut m = module;
    for p in passes {
        m = p.run(m, ctx)?;
    }
    Ok(m)
}

/// Lowers `schedule` over `args` to a module holding one function called `name`. With
/// `simple_mode` the result stops before MakePackedAPI (readable TIR over buffers); without,
/// it is in the packed form that [`codegen_build`] compiles.
pub fn lower(
    schedule: &Schedule,
    args: &[Tensor],
    name: &str,
    simple_mode: bool,
) -> Result<IRModule> {
    lower_with(schedule, args, name, simple_mode, &PassContext::default())
}

/// [`lower`] under an explicit pass context (opt level, disabled passes, printing, config).
pub fn lower_with(
    schedule: &Schedule,
    args: &[Tensor],
    name: &str,
    simple_mode: bool,
    ctx: &PassContext,
) -> Result<IRModule> {
    let func = kiln_te::lower(schedule, args, name)
        .map_err(|e| e.context(format!("lowering schedule `{name}`")))?;
    let module = run_passes(&phase_passes(), IRModule::from_func(name, func), ctx)?;
    if simple_mode {
        Ok(module)
    } else {
        run_passes(&host_passes(), module, ctx)
    }
}

/// The context a device build lowers under: `ctx` without StorageRewrite (which would hoist a
/// kernel's `shared`/`local` arrays out of it to the host).
fn device_ctx(ctx: &PassContext) -> PassContext {
    ctx.clone().disable("tir.StorageRewrite")
}

/// The host target of a device build: `target_host`, else `llvm`.
fn host_target(target_host: Option<&str>) -> Result<Target> {
    Target::parse(target_host.unwrap_or("llvm"))
}

/// Builds a module not yet in packed form for device target `target` (host code for `host`).
fn build_device_module(module: &IRModule, target: &Target, host: &Target) -> Result<Module> {
    if is_packed(module) {
        return Err(Error::value_error(format!(
            "build for `{target}`: the module is already lowered for the host (packed form); \
             give the schedule, or the module from lower(..., simple_mode=True)"
        )));
    }
    let ctx = device_ctx(&PassContext::default());
    let module = run_passes(&phase_passes(), module.clone(), &ctx)?;
    crate::device::module::build_device(&module, target, host, &host_passes(), &ctx)
}

/// True when every function of `module` is already in packed form (`calling_conv` set).
fn is_packed(module: &IRModule) -> bool {
    module
        .functions()
        .iter()
        .all(|(_, f)| f.get_attr("calling_conv").is_some())
}

/// Compiles `module` for the target string `target`. Functions not yet in packed form are run
/// through the phase and host passes first (functions already lowered pass through them
/// unchanged).
pub fn codegen_build(module: &IRModule, target: &str) -> Result<Module> {
    codegen_build_with_host(module, target, None)
}

/// [`codegen_build`] with the host target of a device build (`opencl`, `cuda`): `target_host`
/// (default `llvm`); ignored for host targets.
pub fn codegen_build_with_host(
    module: &IRModule,
    target: &str,
    target_host: Option<&str>,
) -> Result<Module> {
    let target = Target::parse(target)?;
    if !target.kind.is_host() {
        return build_device_module(module, &target, &host_target(target_host)?);
    }
    build_for(&packed(module)?, &target)
}

/// Compiles `module` (functions not yet in packed form) for device target `target` with host
/// code for `llvm`, adding `cpu_funcs` to the host code: functions already in packed form for
/// the host CPU, which run there on CPU tensors (the graph build's functions without a device
/// schedule). Without device functions the result is the host library alone.
pub fn codegen_build_with_cpu_funcs(
    module: &IRModule,
    cpu_funcs: &[(String, kiln_tir::PrimFunc)],
    target: &str,
) -> Result<Module> {
    let target = Target::parse(target)?;
    let host = host_target(None)?;
    if target.kind.is_host() {
        return Err(Error::value_error(format!(
            "build with host functions: `{target}` is not a device target (opencl or cuda)"
        )));
    }
    if module.functions().is_empty() {
        return build_for(&IRModule::new(cpu_funcs.to_vec())?, &host);
    }
    let ctx = device_ctx(&PassContext::default());
    let module = run_passes(&phase_passes(), module.clone(), &ctx)?;
    crate::device::module::build_device_with_cpu_funcs(
        &module,
        cpu_funcs,
        &target,
        &host,
        &host_passes(),
        &ctx,
    )
}

/// `module` in packed form: as it is when it already is, else after the phase and host passes.
fn packed(module: &IRModule) -> Result<IRModule> {
    if is_packed(module) {
        return Ok(module.clone());
    }
    let ctx = PassContext::default();
    run_passes(
        &host_passes(),
        run_passes(&phase_passes(), module.clone(), &ctx)?,
        &ctx,
    )
}

/// Compiles one module per target (`parts[i]`: the TIR tiled for target string `parts[i].1`)
/// into ONE library holding a code variant per target, the least demanding the default
/// ([`crate::variants`]); the loader runs the best variant the host can. One part is
/// [`codegen_build`].
pub fn codegen_build_variants(parts: &[(IRModule, String)]) -> Result<Module> {
    if let [(module, target)] = parts {
        return codegen_build(module, target);
    }
    let targets = parts
        .iter()
        .map(|(_, t)| Target::parse(t))
        .collect::<Result<Vec<_>>>()?;
    if let Some(t) = targets.iter().find(|t| !t.kind.is_host()) {
        return Err(Error::value_error(format!(
            "build: device target `{t}` cannot be one of several code variants; build for it \
             alone"
        )));
    }
    let mut built = Vec::with_capacity(parts.len());
    for v in crate::variants::variants(&targets)? {
        let i = targets
            .iter()
            .position(|t| *t == v.target)
            .expect("every variant comes from a target");
        built.push((packed(&parts[i].0)?, v));
    }
    crate::build::build_variants(&built)
}

/// Dispatches a packed module to the back end of `target`'s kind.
fn build_for(module: &IRModule, target: &Target) -> Result<Module> {
    match target.kind {
        TargetKind::Llvm => crate::build::build(module, target),
        TargetKind::C => crate::c::build_c(module, target),
        other => Err(Error::value_error(format!(
            "build: target kind `{other}` generates device code, which needs the module before \
             host lowering (driver::build or codegen_build)"
        ))),
    }
}

/// Lowers `schedule` over `args` (full pipeline) and compiles it for `target`; the module's
/// function is called `name`.
///
/// For a device target (`opencl`, `cuda`) the result is the host module (`llvm`) importing
/// the device module (kind `opencl`: runnable kernels; `cuda`: source only); every loop that
/// touches memory must be bound to a thread axis ([`kiln_te::Stage::bind`]).
pub fn build(schedule: &Schedule, args: &[Tensor], target: &str, name: &str) -> Result<Module> {
    build_with_host(schedule, args, target, None, name)
}

/// [`build`] with the host target of a device build: `target_host` (an `llvm ...` target;
/// default `llvm`); ignored for host targets.
pub fn build_with_host(
    schedule: &Schedule,
    args: &[Tensor],
    target: &str,
    target_host: Option<&str>,
    name: &str,
) -> Result<Module> {
    let t = Target::parse(target)?;
    if !t.kind.is_host() {
        let func = kiln_te::lower(schedule, args, name)
            .map_err(|e| e.context(format!("lowering schedule `{name}`")))?;
        let module = IRModule::from_func(name, func);
        return build_device_module(&module, &t, &host_target(target_host)?);
    }
    let module = lower(schedule, args, name, false)?;
    codegen_build(&module, target)
}

/// What `driver.Build` accepts as its first argument.
pub enum BuildInput {
    /// A schedule, lowered with the given arguments.
    Schedule(Schedule),
    /// A module (lowered further if not yet in packed form).
    Module(IRModule),
}

/// [`build`] on either a schedule or a module for one or more targets (what the
/// `driver.Build` global does); several targets give one library with a code variant each
/// ([`codegen_build_variants`]).
pub fn build_any(
    input: &BuildInput,
    args: &[Tensor],
    targets: &[String],
    name: &str,
) -> Result<Module> {
    build_any_with_host(input, args, targets, None, name)
}

/// [`build_any`] with the host target of a device build (see [`build_with_host`]).
pub fn build_any_with_host(
    input: &BuildInput,
    args: &[Tensor],
    targets: &[String],
    target_host: Option<&str>,
    name: &str,
) -> Result<Module> {
    if let [t] = targets {
        if !Target::parse(t)?.kind.is_host() {
            return match input {
                BuildInput::Schedule(s) => build_with_host(s, args, t, target_host, name),
                BuildInput::Module(m) => codegen_build_with_host(m, t, target_host),
            };
        }
    }
    let module = match input {
        BuildInput::Schedule(s) => lower(s, args, name, false)?,
        BuildInput::Module(m) => m.clone(),
    };
    let parts: Vec<(IRModule, String)> = targets
        .iter()
        .map(|t| (module.clone(), t.clone()))
        .collect();
    codegen_build_variants(&parts)
}

/// The target strings of a `target` argument: a string, or a list of strings (one library
/// with a code variant per target); `None` is `llvm`.
pub fn target_list(target: Option<Any>) -> Result<Vec<String>> {
    let Some(t) = target else {
        return Ok(vec!["llvm".to_string()]);
    };
    if let Ok(s) = t.try_as::<String>() {
        return Ok(vec![s]);
    }
    let list = t.try_as::<kiln_ffi::Array>().map_err(|_| {
        Error::type_error("a target must be a target string or a list of target strings")
    })?;
    let out = list
        .iter()
        .map(|v| v.try_as::<String>())
        .collect::<Result<Vec<_>>>()?;
    if out.is_empty() {
        return Err(Error::value_error("an empty list of targets"));
    }
    Ok(out)
}

/// Links this module's registrations (call from a library's `link_all`).
#[doc(hidden)]
pub fn link_globals() -> *const () {
    link_globals as *const ()
}

register_global!("driver.Lower", |schedule: Schedule,
                                  args: NodeList<Tensor>,
                                  name: Option<String>,
                                  simple_mode: Option<bool>|
 -> Result<IRModule> {
    lower(
        &schedule,
        &args,
        name.as_deref().unwrap_or(DEFAULT_NAME),
        simple_mode.unwrap_or(false),
    )
});

register_global!("driver.Build", |input: Any,
                                  args: Option<NodeList<Tensor>>,
                                  target: Option<Any>,
                                  name: Option<String>|
 -> Result<Module> {
    let input = if let Ok(s) = input.try_as::<Schedule>() {
        BuildInput::Schedule(s)
    } else if let Ok(m) = input.try_as::<IRModule>() {
        BuildInput::Module(m)
    } else {
        return Err(Error::type_error(
            "driver.Build: the first argument must be a te.Schedule or an IRModule",
        ));
    };
    let args = args.map(|a| a.to_vec()).unwrap_or_default();
    build_any(
        &input,
        &args,
        &target_list(target)?,
        name.as_deref().unwrap_or(DEFAULT_NAME),
    )
});

register_global!("codegen.BuildWithHost", |module: IRModule,
                                           target: String,
                                           target_host: String|
 -> Result<Module> {
    codegen_build_with_host(&module, &target, Some(&target_host))
});

register_global!("codegen.Build", |module: IRModule,
                                   target: Any|
 -> Result<Module> {
    if let Ok(t) = target.try_as::<String>() {
        if !Target::parse(&t)?.kind.is_host() {
            return codegen_build(&module, &t);
        }
    }
    let parts: Vec<(IRModule, String)> = target_list(Some(target))?
        .into_iter()
        .map(|t| (module.clone(), t))
        .collect();
    codegen_build_variants(&parts)
});
