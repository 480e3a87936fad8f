//! `load_module` (seed 001's `load_module` + `Module::LoadFromFile`) and the loader registry.
//!
//! Loaders are global functions, so any language can add one:
//! - `ffi.Module.load_from_bytes.<kind>(bytes) -> Module` restores a module of `kind` from what
//!   its `save_to_bytes` wrote (used for the modules in a library blob);
//! - `ffi.Module.load_from_file.<ext>(path, ext) -> Module` loads a file with that suffix.
//!
//! Shared libraries (`.so`, `.dylib`, `.dll`, `.dso`) load as library modules; `.o` files and
//! `.tar` archives of objects are first linked into a shared library with the system C compiler
//! in a temporary directory.

use super::library;
use super::Module;
#[cfg(feature = "compiler")]
use crate::toolchain::{self, TempDir};
use kiln_ffi::{Bytes, Error, Result};
use std::path::Path;
#[cfg(feature = "compiler")]
use std::path::PathBuf;

/// Prefix of the loaders by module kind.
pub const LOAD_FROM_BYTES_PREFIX: &str = "ffi.Module.load_from_bytes.";
/// Prefix of the loaders by file suffix.
pub const LOAD_FROM_FILE_PREFIX: &str = "ffi.Module.load_from_file.";

/// Restores a module of `kind` from bytes with the loader registered for that kind; an unknown
/// kind is an error that names it.
pub fn load_from_bytes(kind: &str, bytes: &[u8]) -> Result<Module> {
    let name = format!("{LOAD_FROM_BYTES_PREFIX}{kind}");
    let loader = kiln_ffi::registry::get(&name).ok_or_else(|| {
        Error::runtime_error(format!(
            "cannot load a module of kind `{kind}`: no loader is registered for it (a runtime \
             that supports `{kind}` registers the global function `{name}`)"
        ))
    })?;
    let out = loader
        .invoke::<kiln_ffi::Any>((Bytes::from_bytes(bytes).0,))
        .map_err(|e| e.context(&name))?;
    out.try_as::<Module>().map_err(|_| {
        Error::type_error(format!(
            "{name} returned a value of type `{}` instead of a Kiln ffi.Module",
            out.view().type_name()
        ))
    })
}

/// The suffix of a file name after its last dot (without the dot).
fn suffix(path: &Path) -> Option<String> {
    path.file_name()?
        .to_str()?
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_string())
}

/// Loads a module from a file, dispatching on its suffix (see the module docs). Errors name the
/// path: a missing file, a file that is not a library, a library without Kiln/TVM symbols, a
/// corrupt blob, a module kind without loader.
pub fn load_module(path: impl AsRef<Path>) -> Result<Module> {
    let path = path.as_ref();
    let meta = std::fs::metadata(path).map_err(|e| {
        Error::value_error(format!("cannot find module file {}: {e}", path.display()))
    })?;
    if !meta.is_file() {
        return Err(Error::value_error(format!(
            "{} is not a file",
            path.display()
        )));
    }
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let ext = suffix(&path).ok_or_else(|| {
        Error::value_error(format!(
            "cannot tell the format of {}: the file name has no suffix (.so, .o, .tar, ...)",
            path.display()
        ))
    })?;
    match ext.as_str() {
        "so" | "dylib" | "dll" | "dso" => library::load_library(&path),
        #[cfg(not(feature = "compiler"))]
        "o" | "tar" => Err(Error::value_error(format!(
            "cannot load {}: `.{ext}` files must be linked with a C compiler first, which this \
             deployable runtime does not do (load the `.so` that export_library writes, or use \
             libkiln.so)",
            path.display()
        ))),
        #[cfg(feature = "compiler")]
        "o" => link_and_load(&path, vec![path.clone()]),
        #[cfg(feature = "compiler")]
        "tar" => {
            let dir = TempDir::new("untar")?;
            let files = toolchain::untar(&path, dir.path())?;
            let inputs: Vec<PathBuf> = files
                .into_iter()
                .filter(|f| {
                    matches!(
                        suffix(f).as_deref(),
                        Some("o" | "c" | "cc" | "cpp" | "s" | "S")
                    )
                })
                .collect();
            if inputs.is_empty() {
                return Err(Error::value_error(format!(
                    "{} holds no object or C source file to link",
                    path.display()
                )));
            }
            link_and_load(&path, inputs)
        }
        _ => {
            let name = format!("{LOAD_FROM_FILE_PREFIX}{ext}");
            let loader = kiln_ffi::registry::get(&name).ok_or_else(|| {
                Error::runtime_error(format!(
                    "cannot load {}: no loader for `.{ext}` files is registered (`{name}`)",
                    path.display()
                ))
            })?;
            let out = loader
                .invoke::<kiln_ffi::Any>((path.display().to_string(), ext.clone()))
                .map_err(|e| e.context(format!("loading {}", path.display())))?;
            out.try_as::<Module>().map_err(|_| {
                Error::type_error(format!(
                    "{name} returned `{}` instead of a Kiln ffi.Module",
                    out.view().type_name()
                ))
            })
        }
    }
}

/// Links `inputs` into a shared library in a temporary directory and loads it (the file is
/// removed once loaded; the mapping stays).
#[cfg(feature = "compiler")]
fn link_and_load(original: &Path, inputs: Vec<PathBuf>) -> Result<Module> {
    let dir = TempDir::new("link")?;
    let stem = original
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "module".into());
    let so = dir.path().join(format!("{stem}.so"));
    toolchain::link_shared(&so, &inputs, &[])
        .map_err(|e| e.context(format!("loading {}", original.display())))?;
    library::load_library(&so).map_err(|e| e.context(format!("loading {}", original.display())))
}
