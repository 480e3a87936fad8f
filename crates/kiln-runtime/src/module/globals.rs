//! Module functions in the global registry, under TVM-FFI's names where TVM-FFI has them
//! (`ffi.Module*`, `ffi.Module.load_from_file.so`) and under `runtime.*` for the rest
//! (`runtime.ModuleExportLibrary`, `runtime.ModuleGetImports`, `runtime.ModuleTargetRecords`,
//! ...).

#[cfg(feature = "compiler")]
use super::export::{export_library, ExportOptions};
use super::library::{library_target_records, LibraryModule};
use super::loader::{load_from_bytes, load_module};
use super::Module;
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{register_global, Array, Map};
#[cfg(feature = "compiler")]
use kiln_ffi::{register_global_packed, Any, AnyView, Error, Result};
use std::sync::{Mutex, OnceLock};

register_global!("ffi.ModuleLoadFromFile", |path: String| load_module(path));
register_global!(
    "ffi.Module.load_from_file.so",
    |path: String, _fmt: String| { load_module(path) }
);
register_global!(
    "ffi.ModuleGetFunction",
    |m: Module, name: String, query_imports: bool| m.get_function(&name, query_imports)
);
register_global!(
    "ffi.ModuleImplementsFunction",
    |m: Module, name: String, query_imports: bool| m.implements_function(&name, query_imports)
);
register_global!("ffi.ModuleGetKind", |m: Module| m.kind());
register_global!("ffi.ModuleGetPropertyMask", |m: Module| m.property_mask());
register_global!("ffi.ModuleInspectSource", |m: Module, fmt: String| m
    .inspect_source(&fmt));
register_global!("ffi.ModuleGetWriteFormats", |m: Module| -> Array {
    m.write_formats().into_iter().collect()
});
register_global!(
    "ffi.ModuleWriteToFile",
    |m: Module, path: String, fmt: String| m.write_to_file(std::path::Path::new(&path), &fmt)
);
register_global!("ffi.ModuleImportModule", |m: Module, other: Module| m
    .import(&other));
register_global!("ffi.ModuleClearImports", |m: Module| m.clear_imports());

/// Modules kept alive for the life of the process (`ffi.ModuleGlobalsAdd`), as TVM-FFI's
/// `load_module(keep_module_alive=True)` does.
fn kept_alive() -> &'static Mutex<Vec<Module>> {
    static KEPT: OnceLock<Mutex<Vec<Module>>> = OnceLock::new();
    KEPT.get_or_init(Default::default)
}

register_global!("ffi.ModuleGlobalsAdd", |m: Module| {
    let mut kept = kept_alive().lock().recover();
    if !kept.iter().any(|k| k.0.same_as(&m.0)) {
        kept.push(m);
    }
});
register_global!("ffi.ModuleGlobalsRemove", |m: Module| {
    kept_alive().lock().recover().retain(|k| !k.0.same_as(&m.0));
});

register_global!("runtime.ModuleGetImports", |m: Module| -> Array {
    m.imports().into_iter().collect()
});
register_global!("runtime.ModuleSaveToBytes", |m: Module| m.save_to_bytes());
register_global!(
    "runtime.ModuleLoadFromBytes",
    |kind: String, bytes: Vec<u8>| { load_from_bytes(&kind, &bytes) }
);
register_global!("runtime.ModuleListFunctions", |m: Module| -> Array {
    m.function_names().into_iter().collect()
});
// (module) -> Array of Map(str -> str): the target record of every code variant of every library
// module in the module's tree (itself and its imports), with its keys (`variant`, `triple`,
// `cpu`, `features`, `target`) and `chosen` ("1" for the variant that runs here, else "0").
register_global!("runtime.ModuleTargetRecords", |m: Module| -> Array {
    library_target_records(&m)
        .into_iter()
        .map(|(r, chosen)| {
            let map: Map = [
                ("variant", r.variant.clone()),
                ("triple", r.triple.clone()),
                ("cpu", r.cpu.clone()),
                ("features", r.features.join(",")),
                ("target", r.target.clone()),
                ("chosen", if chosen { "1" } else { "0" }.to_string()),
            ]
            .into_iter()
            .collect();
            map.0
        })
        .collect()
});
register_global!("runtime.ModuleLibraryPath", |m: Module| -> Option<String> {
    m.downcast_node::<LibraryModule>()
        .map(|l| l.library().path().display().to_string())
});

// (module, path, cc_option...) -> None. Compiler-side: only with feature `compiler`.
#[cfg(feature = "compiler")]
register_global_packed!(
    "runtime.ModuleExportLibrary",
    |args: &[AnyView<'_>]| -> Result<Any> {
        if args.len() < 2 {
            return Err(Error::type_error(
                "runtime.ModuleExportLibrary(module, path, *cc_options) needs a module and a path",
            ));
        }
        let m: Module = args[0]
            .try_as()
            .map_err(|e| e.context("runtime.ModuleExportLibrary argument #0"))?;
        let path: String = args[1]
            .try_as()
            .map_err(|e| e.context("runtime.ModuleExportLibrary argument #1"))?;
        let cc_options = args[2..]
            .iter()
            .map(|a| a.try_as::<String>())
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.context("runtime.ModuleExportLibrary cc options"))?;
        let options = ExportOptions {
            cc_options,
            workspace_dir: None,
        };
        export_library(&m, &path, &options)?;
        Ok(Any::none())
    }
);
