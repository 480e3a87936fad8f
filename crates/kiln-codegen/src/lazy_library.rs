//! What the in-process code modules (`llvm`, `c`) share: a private temporary folder, the names
//! of the functions they export, and the shared library linked into that folder and loaded on
//! first use (the folder goes with the module; a loaded library stays mapped).

use kiln_ffi::{Error, Function, Result};
use kiln_runtime::module::{load_module, Module};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A module's exported functions and its library, linked and loaded when first needed.
pub(crate) struct LazyLibrary {
    dir: PathBuf,
    file: String,
    functions: Vec<String>,
    loaded: OnceLock<std::result::Result<Module, Error>>,
}

impl LazyLibrary {
    /// A library to be written as `file` in a new folder named after `kind`, exporting
    /// `functions` (names without the `__tvm_ffi_` prefix).
    pub(crate) fn new(kind: &str, file: String, functions: Vec<String>) -> LazyLibrary {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kiln-{kind}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        LazyLibrary {
            dir,
            file,
            functions,
            loaded: OnceLock::new(),
        }
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
                std::fs::create_dir_all(&self.dir).map_err(|e| {
                    Error::runtime_error(format!("cannot create {}: {e}", self.dir.display()))
                })?;
                let so = self.dir.join(&self.file);
                export(&so)?;
                load_module(&so)
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
        let dir = self.dir.join(format!(
            "export-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::runtime_error(format!("cannot create {}: {e}", dir.display())))?;
        let r = f(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        r
    }
}

impl Drop for LazyLibrary {
    fn drop(&mut self) {
        // A loaded library stays mapped after its file is removed.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
