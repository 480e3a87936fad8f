//! Building for a device target: the host part of each function through the LLVM back end, the kernels as OpenCL C in a `kiln_runtime::opencl::OpenClModule` or as
//! CUDA C++ in a [`CudaSourceModule`], imported by the host module (which launches each kernel
//! as the packed function of its name, see [`kiln_tir::transform::split_host_device`]).

use super::{generate, DeviceSource};
use crate::c::Dialect;
use crate::target::{Target, TargetKind};
use kiln_ffi::{Error, Function, Result};
use kiln_runtime::module::{Module, ModuleNode};
use kiln_runtime::opencl::OpenClModule;
use kiln_tir::transform::split_host_device::{is_device_kernel, split_host_device};
use kiln_tir::transform::{thread_sync, Pass, PassContext};
use kiln_tir::IRModule;

/// CUDA C++ kernels as a source-only module (kind `"cuda"`): `inspect_source("cu")` gives the
/// source; it has no functions to call (nothing compiles it yet).
pub struct CudaSourceModule {
    source: String,
}

impl CudaSourceModule {
    /// A module holding CUDA source `source`.
    pub fn module(source: String) -> Module {
        Module::new(CudaSourceModule { source })
    }
}

impl ModuleNode for CudaSourceModule {
    fn kind(&self) -> &str {
        "cuda"
    }

    fn get_function(&self, _name: &str) -> Result<Option<Function>> {
        Ok(None)
    }

    fn inspect_source(&self, format: &str) -> Result<String> {
        Ok(match format {
            "" | "cu" | "cuda" => self.source.clone(),
            _ => String::new(),
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The dialect of a device target kind.
fn dialect_of(kind: TargetKind) -> Result<Dialect> {
    match kind {
        TargetKind::OpenCl => Ok(Dialect::OpenCl),
        TargetKind::Cuda => Ok(Dialect::Cuda),
        other => Err(Error::value_error(format!(
            "`{other}` is not a device target (opencl or cuda)"
        ))),
    }
}

/// Splits `module` (after the phase passes, before host lowering) into host functions and
/// device kernels for `target` (with barriers around `shared` memory, ThreadSync); returns the host module (not yet host-lowered) and the
/// kernels' source.
pub fn split_and_generate(
    module: &IRModule,
    target: &Target,
    ctx: &PassContext,
) -> Result<(IRModule, DeviceSource)> {
    let dialect = dialect_of(target.kind)?;
    let split = split_host_device(target.kind.device_type() as i64, target.kind.name());
    let module = split.run(module.clone(), ctx)?;
    let module = thread_sync().run(module, ctx)?;
    let mut host = Vec::new();
    let mut kernels = Vec::new();
    for (key, f) in module.functions().iter() {
        if is_device_kernel(f) {
            kernels.push(f.clone());
        } else {
            host.push((key.clone(), f.clone()));
        }
    }
    let source = generate(&kernels, dialect)?;
    Ok((IRModule::new(host)?, source))
}

/// Builds `module` (after the phase passes, before host lowering) for device `target` with
/// host code for `host`: the host module, compiled after `host_passes`, importing the device
/// module.
pub fn build_device(
    module: &IRModule,
    target: &Target,
    host: &Target,
    host_passes: &[Pass],
    ctx: &PassContext,
) -> Result<Module> {
    build_device_with_cpu_funcs(module, &[], target, host, host_passes, ctx)
}

/// [`build_device`] with `cpu_funcs` added to the host code as they are: functions already in
/// packed form for the host CPU (lowered for `llvm`, checking that their tensors are on the
/// CPU), which the graph build places on the host when they have no device schedule.
pub fn build_device_with_cpu_funcs(
    module: &IRModule,
    cpu_funcs: &[(String, kiln_tir::PrimFunc)],
    target: &Target,
    host: &Target,
    host_passes: &[Pass],
    ctx: &PassContext,
) -> Result<Module> {
    if !host.kind.is_host() {
        return Err(Error::value_error(format!(
            "target_host `{host}` is not a host target (llvm or c)"
        )));
    }
    if host.kind == TargetKind::C {
        return Err(Error::value_error(format!(
            "target_host `{host}` cannot launch kernels: the c back end has no packed calls \
             yet; use an llvm host"
        )));
    }
    let (host_mod, source) = split_and_generate(module, target, ctx)?;
    let mut m = host_mod;
    for p in host_passes {
        m = p.run(m, ctx)?;
    }
    if !cpu_funcs.is_empty() {
        let mut funcs: Vec<_> = m
            .functions()
            .iter()
            .map(|(k, f)| (k.clone(), f.clone()))
            .collect();
        for (name, f) in cpu_funcs {
            if funcs.iter().any(|(k, _)| k == name) {
                return Err(Error::value_error(format!(
                    "build for `{target}`: host function `{name}` is also a device function"
                )));
            }
            funcs.push((name.clone(), f.clone()));
        }
        m = IRModule::new(funcs)?;
    }
    let built = crate::build::build(&m, host)?;
    let device = match target.kind {
        TargetKind::OpenCl => OpenClModule::create(source.source, source.functions)?,
        _ => CudaSourceModule::module(source.source),
    };
    built.import(&device)?;
    if let Some(llvm) = built
        .node()
        .as_any()
        .downcast_ref::<crate::build::LlvmModule>()
    {
        llvm.import_for_code(&device)?;
    }
    Ok(built)
}
