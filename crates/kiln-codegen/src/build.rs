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
use crate::link::{link_relocatable, link_shared, LinkOptions};
use crate::llvm::{codegen, CompiledModule, LlvmTarget};
use crate::target::{Target, TargetKind};
use crate::variants::Variant;
use kiln_ffi::{Error, Function, Result};
use kiln_runtime::module::{Module, ModuleNode};
use kiln_tir::IRModule;
use std::path::{Path, PathBuf};

/// Compiles `module` for `target` (an `llvm` target) and wraps the result in a runtime module
/// of kind `"llvm"` whose functions run in this process.
pub fn build(module: &IRModule, target: &Target) -> Result<Module> {
    Ok(Module::new(LlvmModule::new(build_compiled(
        module, target,
    )?)?))
}

/// Compiles one module per code variant (`parts[i]` is the TIR tiled for `variants[i]`'s
/// target; see [`crate::variants`]) into one runtime module of kind `"llvm"` whose library
/// holds them all; the first variant is the default.
pub fn build_variants(parts: &[(IRModule, Variant)]) -> Result<Module> {
    let compiled = parts
        .iter()
        .map(|(m, v)| build_compiled_variant(m, v))
        .collect::<Result<Vec<_>>>()?;
    Ok(Module::new(LlvmModule::with_variants(compiled)?))
}

/// Compiles `module` for `target` into one optimized object file (and its IR), without
/// loading it.
pub fn build_compiled(module: &IRModule, target: &Target) -> Result<CompiledModule> {
    build_compiled_variant(module, &Variant::single(target))
}

/// [`build_compiled`] as the code variant `variant` of a library.
pub fn build_compiled_variant(module: &IRModule, variant: &Variant) -> Result<CompiledModule> {
    let target = &variant.target;
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
    codegen::compile_module(&machine, module, &name, variant)
}

/// The link options generated code needs (libm for the math functions it calls).
pub fn default_link_options() -> LinkOptions {
    LinkOptions {
        cc_options: vec!["-lm".to_string()],
        ..Default::default()
    }
}

/// Compiled LLVM code as a runtime module node (kind `"llvm"`): one compiled module, or one per
/// code variant of the library (the default first).
pub struct LlvmModule {
    variants: Vec<CompiledModule>,
    lib: LazyLibrary,
}

impl LlvmModule {
    /// Wraps `compiled`; the exported functions are read from its IR.
    pub fn new(compiled: CompiledModule) -> Result<LlvmModule> {
        LlvmModule::with_variants(vec![compiled])
    }

    /// Wraps the code variants `variants` (the default first, with the same functions each).
    pub fn with_variants(variants: Vec<CompiledModule>) -> Result<LlvmModule> {
        let Some(first) = variants.first() else {
            return Err(Error::value_error("an llvm module needs compiled code"));
        };
        if !first.variant.is_empty() || variants[1..].iter().any(|v| v.variant.is_empty()) {
            return Err(Error::value_error(
                "an llvm module's first code variant must be the (untagged) default one, and \
                 only the first",
            ));
        }
        let functions = exported_functions(&first.ir);
        let lib = LazyLibrary::new("llvm", format!("lib{}.so", first.name), functions);
        Ok(LlvmModule { variants, lib })
    }

    /// The compiled module (object file, IR) of the default variant.
    pub fn compiled(&self) -> &CompiledModule {
        &self.variants[0]
    }

    /// Every code variant, the default first.
    pub fn variants(&self) -> &[CompiledModule] {
        &self.variants
    }

    /// The names of the exported functions (without the `__tvm_ffi_` prefix).
    pub fn function_names(&self) -> &[String] {
        self.lib.functions()
    }

    /// Writes each variant's object file into `dir`.
    fn write_objects(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut objects = Vec::with_capacity(self.variants.len());
        for (i, v) in self.variants.iter().enumerate() {
            let obj = dir.join(format!("lib{i}.o"));
            v.write_object(&obj)?;
            objects.push(obj);
        }
        Ok(objects)
    }

    /// Writes one object file at `path` holding every variant (a relocatable link when there
    /// are several).
    pub fn write_object(&self, path: &Path) -> Result<()> {
        if self.variants.len() == 1 {
            return self.variants[0].write_object(path);
        }
        self.lib
            .with_scratch(|dir| link_relocatable(&self.write_objects(dir)?, path))
    }

    /// Source text of every variant in `format` (`ll`, `asm`), each after a comment line naming
    /// its target when there are several.
    fn sources(&self, format: &str) -> Result<String> {
        if self.variants.len() == 1 {
            return self.variants[0].source(format);
        }
        let comment = if matches!(format, "ll" | "llvm") {
            ";"
        } else {
            "#"
        };
        let mut out = String::new();
        for v in &self.variants {
            let tag = if v.variant.is_empty() {
                "default"
            } else {
                &v.variant
            };
            out.push_str(&format!("{comment} code variant `{tag}`: {}\n", v.target));
            out.push_str(&v.source(format)?);
            out.push('\n');
        }
        Ok(out)
    }

    /// Links the module into the shared library `path` (with libm).
    pub fn export_library(&self, path: impl AsRef<Path>) -> Result<()> {
        self.lib.with_scratch(|dir| {
            let objects = self.write_objects(dir)?;
            link_shared(&objects, path.as_ref(), &default_link_options())
        })
    }

    /// The module loaded in this process (linked and loaded on first use).
    pub fn loaded(&self) -> Result<&Module> {
        self.lib.loaded(|so| self.export_library(so))
    }

    /// Makes `m` an import of the loaded library too (besides of this module's own object):
    /// the compiled code's packed calls look functions up in the imports of the library they
    /// were loaded with, e.g. a host function's device kernels.
    pub fn import_for_code(&self, m: &Module) -> Result<()> {
        self.lib.add_import(m)
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
            "o" | "obj" => self.write_object(path),
            "ll" => write(self.sources("ll")?),
            "s" | "asm" => write(self.sources("asm")?),
            _ => Err(Error::value_error(format!(
                "an llvm module writes o, ll or s files, not `{format}`"
            ))),
        }
    }

    fn inspect_source(&self, format: &str) -> Result<String> {
        self.sources(format)
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
