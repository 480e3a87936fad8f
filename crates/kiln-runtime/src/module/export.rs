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
use super::toolchain::{self, TempDir};
use super::Module;
use kiln_ffi::{Error, Result};
use std::collections::HashMap;
use std::fmt::Write as _;
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
        inputs.push(write_blob_source(work, &bytes, ext == "tar")?);
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

/// Writes the blob as a source file for `cc` in `work` and returns its path. A library linked
/// here gets an assembly file that includes the bytes with `.incbin` (on ELF targets), which
/// assembles in milliseconds even for hundreds of megabytes of weights; a `.tar` (linked later,
/// elsewhere) and other targets get a self-contained C array.
fn write_blob_source(work: &Path, bytes: &[u8], self_contained: bool) -> Result<PathBuf> {
    let write = |path: &Path, data: &[u8]| {
        std::fs::write(path, data)
            .map_err(|e| Error::runtime_error(format!("cannot write {}: {e}", path.display())))
    };
    let bin = work.join("devc.bin");
    let incbin_ok = cfg!(target_os = "linux")
        && !self_contained
        && bin.to_str().is_some_and(|p| !p.contains(['"', '\\', '\n']));
    if incbin_ok {
        write(&bin, bytes)?;
        let asm = work.join("devc.S");
        write(&asm, blob_asm_source(&bin.to_string_lossy()).as_bytes())?;
        Ok(asm)
    } else {
        let source = work.join("devc.c");
        write(&source, blob_c_source(bytes).as_bytes())?;
        Ok(source)
    }
}

/// An ELF assembly file defining the exported, sized symbol `__tvm_ffi__library_bin` as the
/// contents of the file `bin_path` (included with `.incbin`).
pub fn blob_asm_source(bin_path: &str) -> String {
    format!(
        "/* Generated by Kiln's export_library: the serialized modules of this library. */\n\
         \t.section .rodata.__tvm_ffi__library_bin,\"a\"\n\
         \t.globl __tvm_ffi__library_bin\n\
         \t.type __tvm_ffi__library_bin, @object\n\
         \t.p2align 4\n\
         __tvm_ffi__library_bin:\n\
         \t.incbin \"{bin_path}\"\n\
         \t.size __tvm_ffi__library_bin, . - __tvm_ffi__library_bin\n\
         \t.section .note.GNU-stack,\"\",@progbits\n"
    )
}

/// A C file defining the blob as the exported byte array `__tvm_ffi__library_bin`.
pub fn blob_c_source(blob: &[u8]) -> String {
    let mut s = String::with_capacity(blob.len() * 5 + 512);
    s.push_str(
        "/* Generated by Kiln's export_library: the serialized modules of this library. */\n\
         #if defined(_WIN32)\n#define KILN_EXPORT __declspec(dllexport)\n\
         #else\n#define KILN_EXPORT __attribute__((visibility(\"default\")))\n#endif\n\
         #ifdef __cplusplus\nextern \"C\" {\n#endif\n",
    );
    let _ = writeln!(
        s,
        "KILN_EXPORT extern const unsigned char __tvm_ffi__library_bin[{}];",
        blob.len()
    );
    let _ = writeln!(
        s,
        "KILN_EXPORT const unsigned char __tvm_ffi__library_bin[{}] = {{",
        blob.len()
    );
    for chunk in blob.chunks(16) {
        for b in chunk {
            let _ = write!(s, "0x{b:02x},");
        }
        s.push('\n');
    }
    s.push_str("};\n#ifdef __cplusplus\n}\n#endif\n");
    s
}
