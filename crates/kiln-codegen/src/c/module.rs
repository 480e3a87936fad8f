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
use crate::link::{link_shared, LinkOptions};
use crate::target::{Target, TargetKind};
use kiln_ffi::{Error, Function, Result};
use kiln_runtime::module::{load_module, Module, ModuleNode};
use kiln_tir::IRModule;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The C compiler options for `target`: `-O2` (`-O0`/`-O1` at lower opt levels),
/// `-fno-math-errno` (libm calls may become instructions), `-ffast-math` with `-fast-math`,
/// `-march=native` when the target was written with `-mcpu=native`, and `-lm`.
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
    }
    v.push("-lm".to_string());
    v
}

/// Generates C for `module` (packed-API functions, after
/// `kiln_tir::transform::lower_pipeline()`), compiles it for `target` (kind `c`) and returns a
/// runtime module of kind `"c"` whose functions run in this process. Compiler errors are
/// reported here (with the command line and the compiler's output), not at the first call.
///
/// This is what `build()` dispatches to for `Target.kind == TargetKind::C`:
/// `if target.kind == TargetKind::C { return crate::c::build_c(module, target); }`.
pub fn build_c(module: &IRModule, target: &Target) -> Result<Module> {
    if target.kind != TargetKind::C {
        return Err(Error::value_error(format!(
            "build_c: target `{target}` is not a `c` target"
        )));
    }
    let (source, functions) = generate_c(module)?;
    let m = CSourceModule::new(source, functions, c_compile_options(target));
    m.loaded()?;
    Ok(Module::new(m))
}

/// Generated C source as a runtime module (kind `"c"`): `inspect_source("c")` shows it,
/// `write_to_file(path, "c")` writes it, functions are compiled and loaded on first use.
pub struct CSourceModule {
    source: String,
    functions: Vec<String>,
    cc_options: Vec<String>,
    dir: PathBuf,
    loaded: OnceLock<std::result::Result<Module, Error>>,
}

impl CSourceModule {
    /// A module of `source` defining `functions` (names without the `__tvm_ffi_` prefix),
    /// compiled with `cc_options` (after the source, e.g. from [`c_compile_options`]).
    pub fn new(source: String, functions: Vec<String>, cc_options: Vec<String>) -> CSourceModule {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kiln-c-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        CSourceModule {
            source,
            functions,
            cc_options,
            dir,
            loaded: OnceLock::new(),
        }
    }

    /// The C source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The names of the exported functions (without the `__tvm_ffi_` prefix).
    pub fn function_names(&self) -> &[String] {
        &self.functions
    }

    /// The compiler options used for in-process loading and [`export_library`](Self::export_library).
    pub fn cc_options(&self) -> &[String] {
        &self.cc_options
    }

    /// Compiles the source into the shared library `path` (`cc -shared -fPIC`, the module's
    /// options).
    pub fn export_library(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let dir = self.dir.join(format!(
            "export-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::runtime_error(format!("cannot create {}: {e}", dir.display())))?;
        let src = dir.join("lib0.c");
        let r = std::fs::write(&src, &self.source)
            .map_err(|e| Error::runtime_error(format!("cannot write {}: {e}", src.display())))
            .and_then(|_| {
                let opts = LinkOptions {
                    sources: vec![src.clone()],
                    cc_options: self.cc_options.clone(),
                    ..Default::default()
                };
                link_shared(&[], path, &opts)
            });
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    /// The module loaded in this process (compiled and loaded on first use).
    pub fn loaded(&self) -> Result<&Module> {
        self.loaded
            .get_or_init(|| {
                std::fs::create_dir_all(&self.dir).map_err(|e| {
                    Error::runtime_error(format!("cannot create {}: {e}", self.dir.display()))
                })?;
                let so = self.dir.join("libkiln_c.so");
                self.export_library(&so)?;
                load_module(&so)
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl Drop for CSourceModule {
    fn drop(&mut self) {
        // The loaded library stays mapped after its file is removed.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl ModuleNode for CSourceModule {
    fn kind(&self) -> &str {
        "c"
    }

    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        let known = self.functions.iter().any(|f| f == name)
            || (name == "main" && self.functions.len() == 1);
        if !known {
            return Ok(None);
        }
        self.loaded()?.get_function(name, false)
    }

    fn implements_function(&self, name: &str) -> bool {
        self.functions.iter().any(|f| f == name)
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
