//! `build()`: an [`IRModule`] of packed-API functions to a runnable module (seed 004's
//! `tvm.build` back half, `codegen.build_llvm`).
//!
//! All functions go into one LLVM module, which is optimized at the target's level and compiled
//! to an object file. The result is a `kiln_runtime` module of kind `"llvm"` ([`LlvmModule`]):
//! `get_function` links the object into a shared library in a temporary directory and loads it
//! with Kiln's own loader on first use; [`LlvmModule::export_library`] (or the runtime's
//! `export_library`, through the `o` write format) produces one `.so` that Kiln and Apache TVM
//! 0.27 load; `inspect_source("ll" | "asm")` shows the optimized IR or the assembly.

use crate::lazy_library::LazyLibrary;
use crate::link::{link_shared, LinkOptions};
use crate::llvm::{codegen, CompiledModule, LlvmTarget};
use crate::target::{Target, TargetKind};
use kiln_ffi::{Error, Function, Result};
use kiln_runtime::module::{Module, ModuleNode};
use kiln_tir::IRModule;
use std::path::Path;

/// Compiles `module` for `target` (an `llvm` target) and wraps the result in a runtime module
/// of kind `"llvm"` whose functions run in this process.
pub fn build(module: &IRModule, target: &Target) -> Result<Module> {
    Ok(Module::new(LlvmModule::new(build_compiled(
        module, target,
    )?)?))
}

/// Compiles `module` for `target` into one optimized object file (and its IR), without
/// loading it.
pub fn build_compiled(module: &IRModule, target: &Target) -> Result<CompiledModule> {
    if target.kind != TargetKind::Llvm {
        return Err(Error::value_error(format!(
            "build: target `{target}` is not an LLVM target"
        )));
    }
    let machine = LlvmTarget::new(target)?;
    let name = module
        .functions()
        .iter()
        .next()
        .map(|(k, f)| codegen::function_symbol(k, f))
        .unwrap_or_else(|| "default".to_string());
    codegen::compile_module(&machine, module, &name)
}

/// The link options generated code needs (libm for the math functions it calls).
pub fn default_link_options() -> LinkOptions {
    LinkOptions {
        cc_options: vec!["-lm".to_string()],
        ..Default::default()
    }
}

/// A compiled LLVM module as a runtime module node (kind `"llvm"`).
pub struct LlvmModule {
    compiled: CompiledModule,
    lib: LazyLibrary,
}

impl LlvmModule {
    /// Wraps `compiled`; the exported functions are read from its IR.
    pub fn new(compiled: CompiledModule) -> Result<LlvmModule> {
        let functions = exported_functions(&compiled.ir);
        let lib = LazyLibrary::new("llvm", format!("lib{}.so", compiled.name), functions);
        Ok(LlvmModule { compiled, lib })
    }

    /// The compiled module (object file, IR).
    pub fn compiled(&self) -> &CompiledModule {
        &self.compiled
    }

    /// The names of the exported functions (without the `__tvm_ffi_` prefix).
    pub fn function_names(&self) -> &[String] {
        self.lib.functions()
    }

    /// Links the module into the shared library `path` (with libm).
    pub fn export_library(&self, path: impl AsRef<Path>) -> Result<()> {
        self.lib.with_scratch(|dir| {
            let obj = dir.join("lib0.o");
            self.compiled.write_object(&obj)?;
            link_shared(&[obj], path.as_ref(), &default_link_options())
        })
    }

    /// The module loaded in this process (linked and loaded on first use).
    pub fn loaded(&self) -> Result<&Module> {
        self.lib.loaded(|so| self.export_library(so))
    }
}

impl ModuleNode for LlvmModule {
    fn kind(&self) -> &str {
        "llvm"
    }

    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        self.lib.get_function(name, |so| self.export_library(so))
    }

    fn implements_function(&self, name: &str) -> bool {
        self.lib.implements(name)
    }

    fn write_formats(&self) -> Vec<String> {
        vec!["o".into(), "ll".into(), "s".into()]
    }

    fn write_to_file(&self, path: &Path, format: &str) -> Result<()> {
        let format = if format.is_empty() {
            path.extension().and_then(|e| e.to_str()).unwrap_or("o")
        } else {
            format
        };
        let write = |text: String| {
            std::fs::write(path, text)
                .map_err(|e| Error::runtime_error(format!("cannot write {}: {e}", path.display())))
        };
        match format {
            "o" | "obj" => self.compiled.write_object(path),
            "ll" => write(self.compiled.ir.clone()),
            "s" | "asm" => write(self.compiled.assembly()?),
            _ => Err(Error::value_error(format!(
                "an llvm module writes o, ll or s files, not `{format}`"
            ))),
        }
    }

    fn inspect_source(&self, format: &str) -> Result<String> {
        self.compiled.source(format)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The functions defined as `__tvm_ffi_<name>` in LLVM IR text (`main` excluded).
fn exported_functions(ir: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in ir.lines().filter(|l| l.starts_with("define ")) {
        if let Some(pos) = line.find("@__tvm_ffi_") {
            let rest = &line[pos + "@__tvm_ffi_".len()..];
            let rest = rest.strip_prefix('"').unwrap_or(rest);
            let name: String = rest
                .chars()
                .take_while(|c| *c != '(' && *c != '"')
                .collect();
            if name != "main" && !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}
