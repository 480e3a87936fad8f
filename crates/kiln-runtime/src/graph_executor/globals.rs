//! Global functions of the graph executor, under TVM's names and Kiln's `runtime.*` names:
//!
//! | name | arguments | result |
//! | --- | --- | --- |
//! | `runtime.GraphExecutorCreate`, `tvm.graph_executor.create` | graph JSON, library module, devices... | `GraphExecutor` module |
//! | `runtime.GraphExecutorDebugCreate`, `tvm.graph_executor_debug.create` | the same | the same (every executor has the debug functions) |
//! | `runtime.GraphExecutorFactoryCreate`, `tvm.graph_executor_factory.create` | graph JSON, library, module name, then params: name, tensor, name, tensor... (or one `{name: tensor}` map, or params bytes) | `GraphExecutorFactory` module |
//! | `ffi.Module.load_from_bytes.GraphExecutorFactory` | bytes | the factory (used by `load_module`) |
//! | `runtime.SaveParams` | `{name: tensor}` | bytes (TVM's params format) |
//! | `runtime.LoadParams` | bytes | `{name: tensor}` |
//! | `runtime.ModuleLoadStaticLibrary` | path of an object file, function names | `static_library` module |
//!
//! The factory's creation from parts, `runtime.SaveParams` and `runtime.ModuleLoadStaticLibrary`
//! are compiler-side: only with feature `compiler`.
//!
//! Devices are `Device` values or (device type, device id) int pairs, as TVM accepts.

use super::executor::GraphExecutor;
use super::factory::GraphExecutorFactory;
use super::module::GraphExecutorModule;
use super::params;
#[cfg(feature = "compiler")]
use super::static_library::StaticLibrary;
use crate::module::Module;
#[cfg(feature = "compiler")]
use crate::tensor::Tensor;
use kiln_ffi::abi::type_index as ti;
#[cfg(feature = "compiler")]
use kiln_ffi::{register_global, Array, Bytes};
use kiln_ffi::{register_global_packed, Any, AnyView, Device, Error, Map, Result};

fn arg<T: kiln_ffi::TryFromAny>(
    args: &[AnyView<'_>],
    i: usize,
    fname: &str,
    what: &str,
) -> Result<T> {
    let v = args
        .get(i)
        .ok_or_else(|| Error::type_error(format!("{fname}: missing argument #{i} ({what})")))?;
    v.try_as::<T>().map_err(|_| {
        Error::type_error(format!(
            "{fname}: argument #{i} ({what}) must be {}, not `{}`",
            T::type_name(),
            v.type_name()
        ))
    })
}

/// Devices from `Device` values or (type, id) int pairs.
fn devices_arg(args: &[AnyView<'_>], fname: &str) -> Result<Vec<Device>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if args[i].type_index() == ti::INT {
            let t: i32 = arg(args, i, fname, "device type")?;
            let id: i32 = arg(args, i + 1, fname, "device id")?;
            out.push(Device::new(t, id));
            i += 2;
        } else {
            out.push(arg(args, i, fname, "device")?);
            i += 1;
        }
    }
    if out.is_empty() {
        return Err(Error::type_error(format!(
            "{fname}: pass at least one device after the library"
        )));
    }
    Ok(out)
}

fn create_executor(args: &[AnyView<'_>], fname: &str) -> Result<Any> {
    let json: String = arg(args, 0, fname, "graph JSON")?;
    let lib: Module = arg(args, 1, fname, "library module")?;
    // TVM allows a linked-params lookup function here; Kiln has no linked params.
    let first_dev = if args.get(2).is_some_and(|a| a.type_index() == ti::FUNCTION) {
        3
    } else {
        2
    };
    let devices = devices_arg(&args[first_dev.min(args.len())..], fname)?;
    let exec = GraphExecutor::from_json(&json, lib, &devices)?;
    Ok(GraphExecutorModule::new_module(exec).into())
}

register_global_packed!("runtime.GraphExecutorCreate", |args: &[AnyView<'_>]| {
    create_executor(args, "runtime.GraphExecutorCreate")
});
register_global_packed!("tvm.graph_executor.create", |args: &[AnyView<'_>]| {
    create_executor(args, "tvm.graph_executor.create")
});
register_global_packed!("runtime.GraphExecutorDebugCreate", |args: &[AnyView<
    '_,
>]| {
    create_executor(args, "runtime.GraphExecutorDebugCreate")
});
register_global_packed!("tvm.graph_executor_debug.create", |args: &[AnyView<
    '_,
>]| {
    create_executor(args, "tvm.graph_executor_debug.create")
});

#[cfg(feature = "compiler")]
fn map_params(map: &Map, fname: &str) -> Result<Vec<(String, Tensor)>> {
    map.iter()
        .map(|(k, v)| {
            let name: String = k
                .try_as()
                .map_err(|_| Error::type_error(format!("{fname}: param names must be strings")))?;
            let t: Tensor = v.try_as().map_err(|_| {
                Error::type_error(format!("{fname}: param {name:?} must be a tensor"))
            })?;
            Ok((name, t))
        })
        .collect()
}

#[cfg(feature = "compiler")]
fn create_factory(args: &[AnyView<'_>], fname: &str) -> Result<Any> {
    let json: String = arg(args, 0, fname, "graph JSON")?;
    let lib: Module = arg(args, 1, fname, "library module")?;
    let module_name: String = arg(args, 2, fname, "module name")?;
    let rest = &args[3.min(args.len())..];
    let params = match rest {
        [one] if one.type_index() == ti::MAP => map_params(&one.try_as::<Map>()?, fname)?,
        [one] if one.bytes_bytes().is_some() => {
            params::load_params(one.bytes_bytes().unwrap_or_default())?
        }
        _ => {
            if !rest.len().is_multiple_of(2) {
                return Err(Error::type_error(format!(
                    "{fname}(graph_json, lib, module_name, name0, tensor0, ...): params come in \
                     name, tensor pairs, but {} values follow the module name",
                    rest.len()
                )));
            }
            (0..rest.len() / 2)
                .map(|k| {
                    let name: String = arg(args, 3 + 2 * k, fname, "param name")?;
                    let t: Tensor = arg(args, 4 + 2 * k, fname, "param tensor")?;
                    Ok((name, t))
                })
                .collect::<Result<Vec<_>>>()?
        }
    };
    Ok(GraphExecutorFactory::create(&json, &lib, params, &module_name)?.into())
}

#[cfg(feature = "compiler")]
register_global_packed!(
    "runtime.GraphExecutorFactoryCreate",
    |args: &[AnyView<'_>]| { create_factory(args, "runtime.GraphExecutorFactoryCreate") }
);
#[cfg(feature = "compiler")]
register_global_packed!("tvm.graph_executor_factory.create", |args: &[AnyView<
    '_,
>]| {
    create_factory(args, "tvm.graph_executor_factory.create")
});

register_global_packed!(
    "ffi.Module.load_from_bytes.GraphExecutorFactory",
    |args: &[AnyView<'_>]| -> Result<Any> {
        let bytes = args.first().and_then(|a| a.bytes_bytes()).ok_or_else(|| {
            Error::type_error("ffi.Module.load_from_bytes.GraphExecutorFactory takes bytes")
        })?;
        Ok(GraphExecutorFactory::load_from_bytes(bytes)?.into())
    }
);

#[cfg(feature = "compiler")]
register_global!("runtime.SaveParams", |params: Map| -> Result<Bytes> {
    let params = map_params(&params, "runtime.SaveParams")?;
    let bytes = params::save_params(params.iter().map(|(n, t)| (n.as_str(), t)))?;
    Ok(Bytes::from_bytes(&bytes))
});

register_global_packed!(
    "runtime.LoadParams",
    |args: &[AnyView<'_>]| -> Result<Any> {
        let bytes = args.first().and_then(|a| a.bytes_bytes()).ok_or_else(|| {
            Error::type_error("runtime.LoadParams takes the bytes of a params file")
        })?;
        let map: Map = params::load_params(bytes)?
            .into_iter()
            .map(|(n, t)| (Any::from(n), Any::from(t)))
            .collect();
        Ok(map.into())
    }
);

#[cfg(feature = "compiler")]
register_global!("runtime.ModuleLoadStaticLibrary", |path: String,
                                                     func_names: Option<
    Array,
>|
 -> Result<Module> {
    let names = match func_names {
        Some(a) => a.to_vec::<String>()?,
        None => Vec::new(),
    };
    StaticLibrary::load(path, names)
});
