//! [`CSourceModule`]: generated C source as a runtime module of kind `"c"`, and [`build_c`],
//! the `c` target's build entry.
//!
//! The module holds the source and the compiler options. It is compiled with
//! `cc -shared -fPIC <source> -O2 ... -lm` ([`crate::link::link_shared`]) into a temporary
//! shared library and loaded with `kiln_runtime::module::load_module` (which fills the context
//! slots) for in-process calls. `export_library` of the runtime links its `c` write format like
//! an object; [`CSourceModule::export_library`] compiles the source into a `.so` with the
//! module's own options.

use super::generate_c;
use crate::lazy_library::LazyLibrary;
use crate::link::{link_shared, LinkOptions};
use crate::llvm::symbols::TARGET_RECORD_SECTION;
use crate::target::{Target, TargetKind};
use crate::variants::Variant;
use kiln_ffi::{Error, Function, Result};
use kiln_runtime::module::{Module, ModuleNode};
use kiln_tir::IRModule;
use std::path::Path;

/// The C compiler options for `target`: `-O2` (`-O0`/`-O1` at lower opt levels),
/// `-fno-math-errno` (libm calls may become instructions), `-ffast-math` with `-fast-math`,
/// `-march=native` when the target was written with `-mcpu=native` (for a named x86 CPU, one
/// `-m<feature>` per feature its target record names, which the C compiler knows whatever its
/// age), and `-lm`.
pub fn c_compile_options(target: &Target) -> Vec<String> {
    let mut v = vec![
        format!("-O{}", target.opt_level.min(2)),
        "-std=gnu11".to_string(),
        "-fno-math-errno".to_string(),
    ];
    if target.fast_math {
        v.push("-ffast-math".to_string());
    }
    if !target.host_features.is_empty() {
        v.push("-march=native".to_string());
    } else if target.mcpu.is_some() && target.is_x86() {
        let record = Variant::single(target).record();
        v.extend(record.features.iter().map(|f| format!("-m{f}")));
    }
    v.push("-lm".to_string());
    v
}

/// Generates C for `module` (packed-API functions, after
/// `kiln_tir::transform::lower_pipeline()`), compiles it for `target` (kind `c`) and returns a
/// runtime module of kind `"c"` whose functions run in this process. Compiler errors are
/// reported here (with the command line and the compiler's output), not at the first call. Code
/// for a CPU this machine cannot run is compiled (and can be exported) but not loaded.
///
/// This is what `build()` dispatches to for `Target.kind == TargetKind::C`:
/// `if target.kind == TargetKind::C { return crate::c::build_c(module, target); }`.
pub fn build_c(module: &IRModule, target: &Target) -> Result<Module> {
    if target.kind != TargetKind::C {
        return Err(Error::value_error(format!(
            "build_c: target `{target}` is not a `c` target"
        )));
    }
    let variant = Variant::single(target);
    let (mut source, functions) = generate_c(module)?;
    source.push_str(&c_target_record(&variant));
    let m = CSourceModule::new(source, functions, c_compile_options(target));
    if kiln_runtime::module::target_record::select(&[variant.record()]).is_ok() {
        m.loaded()?;
    } else {
        m.lib
            .with_scratch(|dir| m.export_library(dir.join("lib_check.so")))?;
    }
    Ok(Module::new(m))
}

/// The C definition of `variant`'s target record (see [`crate::variants`]): a byte array in the
/// `.kiln_target` section, kept by `used`.
pub fn c_target_record(variant: &Variant) -> String {
    let bytes = variant.record().encode();
    let body: Vec<String> = bytes.iter().map(|b| b.to_string()).collect();
    format!(
        "\n/* What this code needs of the CPU (read by Kiln's loader before loading). */\n\
         __attribute__((section(\"{TARGET_RECORD_SECTION}\"), used, aligned(1))) static const \
         unsigned char __kiln_target_record[{}] = {{{}}};\n",
        bytes.len(),
        body.join(",")
    )
}

/// Generated C source as a runtime module (kind `"c"`): `inspect_source("c")` shows it,
/// `write_to_file(path, "c")` writes it, functions are compiled and loaded on first use.
pub struct CSourceModule {
    source: String,
    cc_options: Vec<String>,
    lib: LazyLibrary,
}

impl CSourceModule {
    /// A module of `source` defining `functions` (names without the `__tvm_ffi_` prefix),
    /// compiled with `cc_options` (after the source, e.g. from [`c_compile_options`]).
    pub fn new(source: String, functions: Vec<String>, cc_options: Vec<String>) -> CSourceModule {
        CSourceModule {
            source,
            cc_options,
            lib: LazyLibrary::new("c", "libkiln_c.so".to_string(), functions),
        }
    }

    /// The C source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The names of the exported functions (without the `__tvm_ffi_` prefix).
    pub fn function_names(&self) -> &[String] {
        self.lib.functions()
    }

    /// The compiler options used for in-process loading and [`export_library`](Self::export_library).
    pub fn cc_options(&self) -> &[String] {
        &self.cc_options
    }

    /// Compiles the source into the shared library `path` (`cc -shared -fPIC`, the module's
    /// options).
    pub fn export_library(&self, path: impl AsRef<Path>) -> Result<()> {
        self.lib.with_scratch(|dir| {
            let src = dir.join("lib0.c");
            std::fs::write(&src, &self.source).map_err(|e| {
                Error::runtime_error(format!("cannot write {}: {e}", src.display()))
            })?;
            let opts = LinkOptions {
                sources: vec![src],
                cc_options: self.cc_options.clone(),
                ..Default::default()
            };
            link_shared(&[], path.as_ref(), &opts)
        })
    }

    /// The module loaded in this process (compiled and loaded on first use).
    pub fn loaded(&self) -> Result<&Module> {
        self.lib.loaded(|so| self.export_library(so))
    }
}

impl ModuleNode for CSourceModule {
    fn kind(&self) -> &str {
        "c"
    }

    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        self.lib.get_function(name, |so| self.export_library(so))
    }

    fn implements_function(&self, name: &str) -> bool {
        self.lib.implements(name)
    }

    fn write_formats(&self) -> Vec<String> {
        vec!["c".into()]
    }

    fn write_to_file(&self, path: &Path, format: &str) -> Result<()> {
        let format = if format.is_empty() {
            path.extension().and_then(|e| e.to_str()).unwrap_or("c")
        } else {
            format
        };
        if format != "c" {
            return Err(Error::value_error(format!(
                "a c module writes c files, not `{format}`"
            )));
        }
        std::fs::write(path, &self.source)
            .map_err(|e| Error::runtime_error(format!("cannot write {}: {e}", path.display())))
    }

    fn inspect_source(&self, format: &str) -> Result<String> {
        match format {
            "" | "c" => Ok(self.source.clone()),
            _ => Err(Error::value_error(format!(
                "a c module shows its source as `c`, not `{format}`"
            ))),
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
