//! Static library modules (TVM's `runtime.ModuleLoadStaticLibrary`, module kind
//! `static_library`): an object file of compiled functions that cannot run as it is but that
//! `export_library` links into the shared library it writes. This is how a graph executor
//! factory is packed with kernels compiled elsewhere (by Apache TVM, or by a C compiler) into
//! one `.so`.
//!
//! (It lives here because the graph executor needs it first; it belongs with the other module
//! kinds in `crate::module`.)

use crate::module::{Module, ModuleNode};
use kiln_ffi::{Error, Function, Result};
use std::path::{Path, PathBuf};

/// The module kind.
pub const KIND: &str = "static_library";

/// An object file and the names of the functions it defines (`__tvm_ffi_<name>`).
pub struct StaticLibrary {
    data: Vec<u8>,
    source: PathBuf,
    func_names: Vec<String>,
}

impl StaticLibrary {
    /// Reads the object file at `path` (its bytes are kept: the file may go away) and makes a
    /// module of it. `func_names` are the functions it defines, for `implements_function`.
    pub fn load(path: impl AsRef<Path>, func_names: Vec<String>) -> Result<Module> {
        let path = path.as_ref();
        let data = std::fs::read(path).map_err(|e| {
            Error::value_error(format!(
                "cannot read static library {}: {e}",
                path.display()
            ))
        })?;
        if data.len() < 4 || &data[..4] != b"\x7fELF" {
            return Err(Error::value_error(format!(
                "{} is not an object file (no ELF header)",
                path.display()
            )));
        }
        Ok(Module::new(StaticLibrary {
            data,
            source: path.to_path_buf(),
            func_names,
        }))
    }

    /// The functions the object file defines (as given).
    pub fn func_names(&self) -> &[String] {
        &self.func_names
    }
}

impl ModuleNode for StaticLibrary {
    fn kind(&self) -> &str {
        KIND
    }

    fn get_function(&self, _name: &str) -> Result<Option<Function>> {
        Ok(None)
    }

    fn implements_function(&self, name: &str) -> bool {
        self.func_names.iter().any(|n| n == name)
    }

    fn property_mask(&self) -> i64 {
        crate::module::PROPERTY_COMPILATION_EXPORTABLE
    }

    fn write_formats(&self) -> Vec<String> {
        vec!["o".into()]
    }

    fn write_to_file(&self, path: &Path, format: &str) -> Result<()> {
        if !(format.is_empty() || format == "o") {
            return Err(Error::value_error(format!(
                "a static library is written as an object file (`o`), not `{format}`"
            )));
        }
        std::fs::write(path, &self.data).map_err(|e| {
            Error::runtime_error(format!(
                "cannot write {} (from {}): {e}",
                path.display(),
                self.source.display()
            ))
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
