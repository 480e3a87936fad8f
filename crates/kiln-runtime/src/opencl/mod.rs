//! OpenCL device modules (seed 000's host/device split): the OpenCL C source of a program's
//! kernels with, for each kernel, what the host must pass to launch it ([`FunctionInfo`]).
//!
//! An [`OpenClModule`] is what `kiln.build(..., target="opencl")` imports into its host
//! module; `export_library` packs it into the host library's blob (kind `opencl`, through
//! [`ModuleNode::save_to_bytes`]) and loading restores it (`ffi.Module.load_from_bytes.opencl`).
//!
//! **Launch convention** (TVM's): the host calls a kernel as the packed function of its name
//! with the kernel's arguments (buffers as their `cl_mem` data handles, then scalars) followed by
//! one integer per launch tag of its [`FunctionInfo`], the extent of that thread index. Per
//! dimension `d`, the work-group size is the extent of `threadIdx.d` (1 when absent) and the
//! global size is the extent of `blockIdx.d` times the work-group size.
//!
//! The module keeps the program binary the driver gives for each device it was built on (by a
//! call, or [`OpenClModule::build_program`]) and saves it with the source; loaded on a device
//! with the same name and driver version, the binary is built instead of the source (the source
//! is the fallback).
//!
//! With the `opencl` feature (on by default) the module runs: [`device`] is the OpenCL device
//! API (device type 4), [`launch`] builds the program on first call per device and enqueues
//! kernels. Without it the module still loads, saves and shows its source; calling a kernel is
//! an error saying so.

#[cfg(feature = "opencl")]
pub mod api;
#[cfg(feature = "opencl")]
pub mod device;
#[cfg(feature = "opencl")]
pub mod launch;

use kiln_ffi::sync::RecoverPoison;
#[cfg(feature = "compiler")]
use kiln_ffi::{register_global, Array};
use kiln_ffi::{register_global_packed, Any, AnyView, DataType, Error, Function, Result};
use std::sync::Arc;

use crate::module::blob::Reader;
use crate::module::{Module, ModuleNode};

/// One kernel of a device module: its name, the types of its arguments (`handle` for buffers)
/// and the launch parameters that follow them in a call, by thread tag (`blockIdx.x`,
/// `threadIdx.y`, ...), in call order (TVM's `FunctionInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// The kernel's name in the source (and the name the host looks it up by).
    pub name: String,
    /// The kernel's arguments, in order: `handle` for a buffer, else the scalar's type.
    pub arg_types: Vec<DataType>,
    /// The thread tags whose extents the host passes after the arguments.
    pub launch_param_tags: Vec<String>,
}

/// Where each launch extent goes: `(is_thread, dimension)` for `threadIdx.d` / `blockIdx.d`.
#[derive(Clone, Debug)]
pub struct LaunchDims {
    slots: Vec<(bool, usize)>,
    work_dim: usize,
}

impl LaunchDims {
    /// The launch layout of `info`'s tags, or an error naming a tag that is not a thread index.
    pub fn new(info: &FunctionInfo) -> Result<LaunchDims> {
        let mut slots = Vec::with_capacity(info.launch_param_tags.len());
        let mut work_dim = 1;
        for tag in &info.launch_param_tags {
            let (kind, axis) = tag.split_once('.').unwrap_or((tag, ""));
            let d = match axis {
                "x" => 0,
                "y" => 1,
                "z" => 2,
                _ => usize::MAX,
            };
            let thread = match kind {
                "threadIdx" => true,
                "blockIdx" => false,
                _ => {
                    return Err(Error::value_error(format!(
                        "kernel `{}`: launch tag `{tag}` is not a thread index \
                         (blockIdx.x|y|z or threadIdx.x|y|z)",
                        info.name
                    )))
                }
            };
            if d == usize::MAX {
                return Err(Error::value_error(format!(
                    "kernel `{}`: launch tag `{tag}` has no axis x, y or z",
                    info.name
                )));
            }
            work_dim = work_dim.max(d + 1);
            slots.push((thread, d));
        }
        Ok(LaunchDims { slots, work_dim })
    }

    /// Global and local work sizes for the launch extents (one per tag, in order).
    pub fn sizes(&self, extents: &[usize]) -> (Vec<usize>, Vec<usize>) {
        let mut groups = vec![1usize; self.work_dim];
        let mut local = vec![1usize; self.work_dim];
        for (&(thread, d), &e) in self.slots.iter().zip(extents) {
            if thread {
                local[d] = e;
            } else {
                groups[d] = e;
            }
        }
        let global = groups.iter().zip(&local).map(|(g, l)| g * l).collect();
        (global, local)
    }
}

/// A program of OpenCL C kernels and the [`FunctionInfo`] of each.
pub struct OpenClModule {
    inner: Arc<Inner>,
}

/// Program binaries by the device they were built for ([`device::ClDevice::binary_key`]).
pub(crate) type Binaries = std::sync::Mutex<Vec<(String, Vec<u8>)>>;

struct Inner {
    source: String,
    /// Binaries of the program the driver gave for devices it was built on, saved with the
    /// module and tried before the source on a device with the same name and driver.
    binaries: Binaries,
    /// Each kernel with its launch layout (or why its tags have none).
    functions: Vec<(FunctionInfo, Result<LaunchDims>)>,
    #[cfg(feature = "opencl")]
    programs: launch::Programs,
}

/// The first bytes of a saved OpenCL module (Kiln's format, version 2: version 1 and the
/// program binaries).
const MAGIC: &[u8; 8] = b"KLNOCL02";
/// Version 1: no program binaries.
const MAGIC_V1: &[u8; 8] = b"KLNOCL01";
const LABEL: &str = "OpenCL module";

impl OpenClModule {
    /// A module holding `source` (OpenCL C) whose kernels are `functions`; an error when a
    /// launch tag is not a thread index or a kernel name repeats.
    pub fn create(source: String, functions: Vec<FunctionInfo>) -> Result<Module> {
        for (i, f) in functions.iter().enumerate() {
            if functions[..i].iter().any(|g| g.name == f.name) {
                return Err(Error::value_error(format!(
                    "OpenCL module: kernel `{}` is listed twice",
                    f.name
                )));
            }
            LaunchDims::new(f)?;
        }
        Ok(OpenClModule::module(source, functions))
    }

    /// A module holding `source` (OpenCL C) whose kernels are `functions`, for code
    /// generation, whose kernels are well formed by construction: a kernel whose launch tags
    /// are not thread indices fails when called, with the reason ([`OpenClModule::create`]
    /// checks up front).
    pub fn module(source: String, functions: Vec<FunctionInfo>) -> Module {
        let functions = functions
            .into_iter()
            .map(|f| {
                let dims = LaunchDims::new(&f);
                (f, dims)
            })
            .collect();
        Module::new(OpenClModule {
            inner: Arc::new(Inner {
                source,
                binaries: Default::default(),
                functions,
                #[cfg(feature = "opencl")]
                programs: Default::default(),
            }),
        })
    }

    /// Builds the module's program for OpenCL device `device_id` now (it is otherwise built on
    /// the first kernel call), keeping it for later calls; a failed build's error holds the
    /// OpenCL compiler's log with the source lines it points at.
    #[cfg(feature = "opencl")]
    pub fn build_program(&self, device_id: i32) -> Result<()> {
        self.inner
            .programs
            .build(&self.inner.source, &self.inner.binaries, device_id)
    }

    /// The kernels and their launch information.
    pub fn functions(&self) -> Vec<FunctionInfo> {
        self.inner
            .functions
            .iter()
            .map(|(f, _)| f.clone())
            .collect()
    }

    /// The module as bytes: the magic, the source, then each kernel's name, argument types
    /// (as text) and launch tags, then each program binary with the device it was built for;
    /// strings and lists are u64-length-prefixed, little-endian.
    fn to_bytes(&self) -> Vec<u8> {
        fn put(out: &mut Vec<u8>, b: &[u8]) {
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
        }
        let mut out = MAGIC.to_vec();
        put(&mut out, self.inner.source.as_bytes());
        out.extend_from_slice(&(self.inner.functions.len() as u64).to_le_bytes());
        for (f, _) in &self.inner.functions {
            put(&mut out, f.name.as_bytes());
            out.extend_from_slice(&(f.arg_types.len() as u64).to_le_bytes());
            for t in &f.arg_types {
                put(&mut out, t.to_string().as_bytes());
            }
            out.extend_from_slice(&(f.launch_param_tags.len() as u64).to_le_bytes());
            for t in &f.launch_param_tags {
                put(&mut out, t.as_bytes());
            }
        }
        let binaries = self.inner.binaries.lock().recover();
        out.extend_from_slice(&(binaries.len() as u64).to_le_bytes());
        for (key, b) in binaries.iter() {
            put(&mut out, key.as_bytes());
            put(&mut out, b);
        }
        out
    }

    /// The devices (name and driver version) this module holds a program binary for.
    pub fn binary_devices(&self) -> Vec<String> {
        let binaries = self.inner.binaries.lock().recover();
        binaries.iter().map(|(k, _)| k.clone()).collect()
    }

    /// Restores a module saved by [`ModuleNode::save_to_bytes`]; errors name the byte offset.
    pub fn load_from_bytes(bytes: &[u8]) -> Result<Module> {
        let mut r = Reader::new(bytes, 0, LABEL);
        let v2 = bytes.get(..8) == Some(&MAGIC[..]);
        if !v2 && bytes.get(..8) != Some(&MAGIC_V1[..]) {
            return Err(r.error(
                0,
                "missing the KLNOCL02 (or KLNOCL01) header (not a Kiln OpenCL module)",
            ));
        }
        r.take(8, "header")?;
        let source = r.string("source")?;
        let n = r.len("kernel count", 24)?;
        let mut functions = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.string("kernel name")?;
            let nargs = r.len("argument count", 8)?;
            let mut arg_types = Vec::with_capacity(nargs);
            for _ in 0..nargs {
                let at = r.pos();
                let text = r.string("argument type")?;
                arg_types.push(text.parse::<DataType>().map_err(|_| {
                    r.error(
                        at,
                        format!("kernel `{name}`: argument type {text:?} is not a dtype"),
                    )
                })?);
            }
            let ntags = r.len("launch tag count", 8)?;
            let launch_param_tags = (0..ntags)
                .map(|_| r.string("launch tag"))
                .collect::<Result<Vec<_>>>()?;
            functions.push(FunctionInfo {
                name,
                arg_types,
                launch_param_tags,
            });
        }
        let mut binaries = Vec::new();
        if v2 {
            let n = r.len("program binary count", 16)?;
            for _ in 0..n {
                let key = r.string("binary device")?;
                binaries.push((key, r.bytes("program binary")?.to_vec()));
            }
        }
        if r.remaining() != 0 {
            return Err(r.error(
                r.pos(),
                format!("{} unexpected trailing bytes", r.remaining()),
            ));
        }
        let m = OpenClModule::create(source, functions)?;
        if let Some(node) = m.downcast_node::<OpenClModule>() {
            *node.inner.binaries.lock().recover() = binaries;
        }
        Ok(m)
    }
}

impl ModuleNode for OpenClModule {
    fn kind(&self) -> &str {
        "opencl"
    }

    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        let Some(index) = self
            .inner
            .functions
            .iter()
            .position(|(f, _)| f.name == name)
        else {
            return Ok(None);
        };
        let inner = self.inner.clone();
        Ok(Some(Function::from_packed(
            move |args: &[AnyView<'_>]| {
                let (info, dims) = &inner.functions[index];
                run(&inner, info, dims.as_ref().map_err(Clone::clone)?, args)
            },
        )))
    }

    fn function_names(&self) -> Vec<String> {
        self.inner
            .functions
            .iter()
            .map(|(f, _)| f.name.clone())
            .collect()
    }

    fn is_binary_serializable(&self) -> bool {
        true
    }

    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        Ok(self.to_bytes())
    }

    fn inspect_source(&self, format: &str) -> Result<String> {
        Ok(match format {
            "" | "cl" | "opencl" => self.inner.source.clone(),
            _ => String::new(),
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(feature = "opencl")]
fn run(inner: &Inner, info: &FunctionInfo, dims: &LaunchDims, args: &[AnyView<'_>]) -> Result<Any> {
    launch::launch(
        &inner.programs,
        &inner.source,
        &inner.binaries,
        info,
        dims,
        args,
    )
}

#[cfg(not(feature = "opencl"))]
fn run(_: &Inner, info: &FunctionInfo, _: &LaunchDims, _: &[AnyView<'_>]) -> Result<Any> {
    Err(Error::runtime_error(format!(
        "kernel `{}`: this Kiln runtime was built without OpenCL (cargo feature `opencl`)",
        info.name
    )))
}

register_global_packed!("ffi.Module.load_from_bytes.opencl", |args: &[AnyView<
    '_,
>]|
 -> Result<Any> {
    let bytes = args
        .first()
        .and_then(|a| a.bytes_bytes())
        .ok_or_else(|| Error::type_error("ffi.Module.load_from_bytes.opencl takes bytes"))?;
    Ok(OpenClModule::load_from_bytes(bytes)?.into())
});

#[cfg(feature = "opencl")]
register_global_packed!("__tvm_set_device", |args: &[AnyView<'_>]| -> Result<Any> {
    let (Some(t), Some(id)) = (args.first(), args.get(1)) else {
        return Err(Error::type_error(
            "__tvm_set_device(device_type, device_id) takes two integers",
        ));
    };
    let (t, id): (i64, i64) = (t.try_as()?, id.try_as()?);
    if t == kiln_ffi::device::device_type::OPENCL as i64 {
        launch::set_current_device(id as i32);
    }
    Ok(Any::none())
});

// `runtime.OpenCLModuleCreate(source, kernels)`: an OpenCL module from hand-written OpenCL C,
// `kernels` being `[name, [arg dtype, ...], [launch tag, ...]]` per kernel. A development tool,
// so not in the deploy runtime (feature `compiler`).
#[cfg(feature = "compiler")]
register_global!("runtime.OpenCLModuleCreate", |source: String,
                                                kernels: Array|
 -> Result<Module> {
    let mut functions = Vec::with_capacity(kernels.len());
    for (i, k) in kernels.iter().enumerate() {
        let bad = |what: &str| {
            Error::type_error(format!(
                "runtime.OpenCLModuleCreate: kernel #{i} must be [name, [arg dtypes], \
                     [launch tags]]: {what}"
            ))
        };
        let parts: Array = k.try_as().map_err(|_| bad("not a list"))?;
        if parts.len() != 3 {
            return Err(bad(&format!("{} items", parts.len())));
        }
        let name: String = parts.get(0)?.try_as().map_err(|_| bad("the name"))?;
        let types: Array = parts.get(1)?.try_as().map_err(|_| bad("the dtypes"))?;
        let tags: Array = parts.get(2)?.try_as().map_err(|_| bad("the tags"))?;
        let arg_types = types
            .iter()
            .map(|t| match t.try_as::<DataType>() {
                Ok(t) => Ok(t),
                Err(_) => t
                    .try_as::<String>()
                    .ok()
                    .and_then(|s| s.parse::<DataType>().ok())
                    .ok_or_else(|| bad("an argument type is not a dtype")),
            })
            .collect::<Result<Vec<_>>>()?;
        functions.push(FunctionInfo {
            name,
            arg_types,
            launch_param_tags: tags.to_vec::<String>()?,
        });
    }
    OpenClModule::create(source, functions)
});
