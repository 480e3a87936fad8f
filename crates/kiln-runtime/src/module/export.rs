//! `export_library` (seed 000): one shared library out of a module tree.
//!
//! The tree is walked depth first from the root (index 0), imports in order. A module that can
//! write an object file or C source (its `write_formats` has `o`, `c`, `cc` or `cpp`) is written
//! to the work directory and linked in; it appears in the blob as `_lib`. Every other module must
//! be binary serializable: its `save_to_bytes` goes into the blob under its kind. Unless the tree
//! is a single linked root, the blob (TVM 0.27 layout) and the import tree are emitted as the
//! byte array `__tvm_ffi__library_bin` (an assembly file including the bytes, or a C array in a
//! `.tar`), and everything is linked with
//! `cc -shared -fPIC`. A `.tar` path packs the files instead of linking them (`load_module` links
//! a `.tar` when loading it).

use super::blob::{self, BlobModule, LibraryBin};
use super::library::LibraryModule;
use super::Module;
use crate::toolchain::{self, TempDir};
use kiln_ffi::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Options of [`export_library`].
#[derive(Clone, Debug, Default)]
pub struct ExportOptions {
    /// Extra arguments for the C compiler (e.g. `-O2`, `-lm`).
    pub cc_options: Vec<String>,
    /// Where to write the intermediate files (default: a temporary directory, removed after).
    pub workspace_dir: Option<PathBuf>,
}

/// Source formats a module may write that the C compiler links, best first.
const LINKABLE_FORMATS: [&str; 4] = ["o", "c", "cc", "cpp"];

/// Exports `module` and everything it imports into one shared library (or `.tar`) at `path`.
/// A wrong suffix, a module that can be neither linked nor serialized, and a failed link are
/// errors; a failed link shows the command and the compiler's output.
pub fn export_library(
    module: &Module,
    path: impl AsRef<Path>,
    options: &ExportOptions,
) -> Result<()> {
    let path = path.as_ref();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_string();
    if !matches!(ext.as_str(), "so" | "dylib" | "dll" | "tar") {
        return Err(Error::value_error(format!(
            "cannot export a library to {}: the file name must end in .so, .dylib, .dll or .tar",
            path.display()
        )));
    }
    let temp;
    let work: &Path = match &options.workspace_dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| Error::runtime_error(format!("cannot create {}: {e}", d.display())))?;
            d
        }
        None => {
            temp = TempDir::new("export")?;
            temp.path()
        }
    };

    let modules = collect(module);
    let index: HashMap<usize, usize> = modules
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_raw() as usize, i))
        .collect();
    let mut inputs = Vec::new();
    let mut entries = Vec::with_capacity(modules.len());
    for (i, m) in modules.iter().enumerate() {
        let formats = m.write_formats();
        if let Some(fmt) = LINKABLE_FORMATS
            .iter()
            .find(|f| formats.iter().any(|g| g == *f))
        {
            let file = work.join(format!("lib{i}.{fmt}"));
            m.write_to_file(&file, fmt)
                .map_err(|e| e.context(format!("exporting module #{i} ({})", m.kind())))?;
            inputs.push(file);
            entries.push(BlobModule::Lib);
        } else if m.node().is_binary_serializable() {
            let payload = m
                .save_to_bytes()
                .map_err(|e| e.context(format!("exporting module #{i} ({})", m.kind())))?;
            entries.push(BlobModule::Serialized {
                kind: m.kind(),
                payload,
            });
        } else if let Some(lib) = m.downcast_node::<LibraryModule>() {
            return Err(Error::value_error(format!(
                "cannot export module #{i}: it is a shared library loaded from {}, which cannot \
                 be linked again (export the modules it was built from)",
                lib.library().path().display()
            )));
        } else {
            return Err(Error::value_error(format!(
                "cannot export module #{i} of kind `{}`: it can neither be written as an object \
                 or C file nor saved to bytes",
                m.kind()
            )));
        }
    }
    let children: Vec<Vec<usize>> = modules
        .iter()
        .map(|m| {
            m.imports()
                .iter()
                .map(|c| index[&(c.as_raw() as usize)])
                .collect()
        })
        .collect();
    let single_linked_root = entries.len() == 1 && entries[0] == BlobModule::Lib;
    if !single_linked_root {
        let bin = LibraryBin::from_children(entries, &children);
        let bytes = blob::write(&bin);
        inputs.push(toolchain::write_blob_source(work, &bytes, ext == "tar")?);
    }
    if ext == "tar" {
        toolchain::tar(path, &inputs)
    } else {
        toolchain::link_shared(path, &inputs, &options.cc_options)
    }
}

/// The modules of the tree, depth first from the root, each once.
fn collect(root: &Module) -> Vec<Module> {
    let mut out: Vec<Module> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![root.clone()];
    while let Some(m) = stack.pop() {
        if !seen.insert(m.as_raw() as usize) {
            continue;
        }
        stack.extend(m.imports().into_iter().rev());
        out.push(m);
    }
    out
}
