//! What the in-process code modules (`llvm`, `c`) share: a private temporary folder, the names
//! of the functions they export, and the shared library linked into that folder and loaded on
//! first use (the folder goes with the module; a loaded library stays mapped).

use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Error, Function, Result};
use kiln_runtime::module::{load_module, Module};
use kiln_runtime::toolchain::TempDir;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// A module's exported functions and its library, linked and loaded when first needed.
pub(crate) struct LazyLibrary {
    /// What the folder is named after (`llvm`, `c`).
    kind: String,
    /// The module's folder, created on first use and removed with the module (a loaded library
    /// stays mapped after its file is removed).
    dir: OnceLock<std::result::Result<TempDir, Error>>,
    file: String,
    functions: Vec<String>,
    loaded: OnceLock<std::result::Result<Module, Error>>,
    /// Modules the loaded library imports: where its code's packed calls find functions (a
    /// host module's device kernels).
    imports: Mutex<Vec<Module>>,
}

impl LazyLibrary {
    /// A library to be written as `file` in a new folder named after `kind`, exporting
    /// `functions` (names without the `__tvm_ffi_` prefix).
    pub(crate) fn new(kind: &str, file: String, functions: Vec<String>) -> LazyLibrary {
        LazyLibrary {
            kind: kind.to_string(),
            dir: OnceLock::new(),
            file,
            functions,
            loaded: OnceLock::new(),
            imports: Mutex::new(Vec::new()),
        }
    }

    /// Makes `m` an import of the loaded library (now if it is loaded, else when it loads).
    pub(crate) fn add_import(&self, m: &Module) -> Result<()> {
        self.imports.lock().recover().push(m.clone());
        if let Some(Ok(lib)) = self.loaded.get() {
            lib.import(m)?;
        }
        Ok(())
    }

    /// The module's folder, created on first use.
    fn dir(&self) -> Result<&Path> {
        self.dir
            .get_or_init(|| TempDir::new(&self.kind))
            .as_ref()
            .map(TempDir::path)
            .map_err(Clone::clone)
    }

    /// The exported function names.
    pub(crate) fn functions(&self) -> &[String] {
        &self.functions
    }

    /// Whether `name` is one of the exported functions.
    pub(crate) fn implements(&self, name: &str) -> bool {
        self.functions.iter().any(|f| f == name)
    }

    /// The library loaded in this process, made by `export(path)` on first use.
    pub(crate) fn loaded(&self, export: impl FnOnce(&Path) -> Result<()>) -> Result<&Module> {
        self.loaded
            .get_or_init(|| {
                let so = self.dir()?.join(&self.file);
                export(&so)?;
                let lib = load_module(&so)?;
                for m in self.imports.lock().recover().iter() {
                    lib.import(m)?;
                }
                Ok(lib)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Function `name` (`main` names the only function), loading the library made by
    /// `export` if needed; `None` when the module does not export it.
    pub(crate) fn get_function(
        &self,
        name: &str,
        export: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<Option<Function>> {
        let known = self.implements(name) || (name == "main" && self.functions.len() == 1);
        if !known {
            return Ok(None);
        }
        self.loaded(export)?.get_function(name, false)
    }

    /// Runs `f` with a fresh scratch folder inside the module's folder, removed afterwards.
    pub(crate) fn with_scratch<T>(&self, f: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
        let scratch = TempDir::new_in(self.dir()?, "export")?;
        f(scratch.path())
    }
}
