//! The LLVM 19 backend plumbing (through inkwell): a target machine for a [`Target`], modules set
//! up for it, the new pass manager's `default<On>` pipeline, and object, assembly and IR output.
//! TIR-to-LLVM code generation builds on these pieces:
//!
//! - [`LlvmTarget`]: the target machine (triple, CPU, features, opt level, PIC) for a target;
//!   [`LlvmTarget::create_module`] gives a module with its triple and data layout set,
//!   [`LlvmTarget::set_function_attributes`] marks a function for the CPU (and fast math),
//!   [`LlvmTarget::optimize`] runs the pipeline, [`LlvmTarget::emit_object`] /
//!   [`LlvmTarget::write_object`] / [`LlvmTarget::emit_assembly`] produce machine code.
//! - [`CompiledModule`]: object + IR + bitcode of a compiled module, free of LLVM lifetimes
//!   (`Send + Sync + 'static`, what a runtime module node can hold).
//! - [`abi`]: the TVM-FFI types (`TVMFFIAny`, `DLTensor`, the safe-call signature) and field
//!   access; [`symbols`]: exported functions, context slots, `__tvm_ffi__library_ctx`, the
//!   `__tvm_ffi_main` alias and `__tvm_ffi__library_bin`.
//!
//! Contexts and modules are inkwell's own types (`inkwell::context::Context`,
//! `inkwell::module::Module`), re-exported as [`inkwell`].

pub mod abi;
pub mod codegen;
pub mod compiled;
pub mod symbols;

pub use compiled::CompiledModule;

pub use inkwell;

use crate::target::{Target, TargetKind};
use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::module::{FlagBehavior, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target as LlvmTargetKind, TargetMachine,
    TargetTriple,
};
use inkwell::values::{FastMathFlags, FunctionValue};
use inkwell::OptimizationLevel;
use kiln_ffi::{Error, Result};
use std::path::Path;
use std::sync::Once;

/// Registers LLVM's code generators (x86, AArch64, NVPTX) once per process. Every entry point
/// here calls it; calling it again is free.
pub fn initialize() {
    static INIT: Once = Once::new();
    INIT.call_once(|| LlvmTargetKind::initialize_all(&InitializationConfig::default()));
}

/// LLVM's version as `(major, minor, patch)` (19.x here).
pub fn llvm_version() -> (u32, u32, u32) {
    inkwell::support::get_llvm_version()
}

fn llvm_opt_level(level: u8) -> OptimizationLevel {
    match level {
        0 => OptimizationLevel::None,
        1 => OptimizationLevel::Less,
        2 => OptimizationLevel::Default,
        _ => OptimizationLevel::Aggressive,
    }
}

/// An LLVM target machine configured from a Kiln [`Target`] of kind `llvm`: position-independent
/// code (it goes into a shared library), the target's triple, CPU, features and opt level.
pub struct LlvmTarget {
    target: Target,
    triple: String,
    features: String,
    machine: TargetMachine,
    cpu: kiln_tir::CpuDesc,
}

impl std::fmt::Debug for LlvmTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlvmTarget")
            .field("target", &self.target.to_string())
            .field("triple", &self.triple)
            .field("cpu", &self.target.cpu_name())
            .finish()
    }
}

impl LlvmTarget {
    /// Makes the target machine. A target of another kind, a triple LLVM does not know and a
    /// CPU/feature combination LLVM refuses are errors that name the target string.
    pub fn new(target: &Target) -> Result<LlvmTarget> {
        initialize();
        if target.kind != TargetKind::Llvm {
            return Err(Error::value_error(format!(
                "target `{target}` is not an LLVM target (its kind is `{}`)",
                target.kind
            )));
        }
        let triple = match &target.mtriple {
            Some(t) => TargetMachine::normalize_triple(&TargetTriple::create(t))
                .as_str()
                .to_string_lossy()
                .into_owned(),
            None => crate::target::host_triple(),
        };
        let tt = TargetTriple::create(&triple);
        let llvm_target = LlvmTargetKind::from_triple(&tt).map_err(|e| {
            Error::value_error(format!(
                "target `{target}`: LLVM cannot generate code for triple `{triple}`: {e}"
            ))
        })?;
        let features = target.llvm_features();
        let machine = llvm_target
            .create_target_machine(
                &tt,
                target.cpu_name(),
                &features,
                llvm_opt_level(target.opt_level),
                RelocMode::PIC,
                CodeModel::Default,
            )
            .ok_or_else(|| {
                Error::runtime_error(format!(
                    "target `{target}`: LLVM refused to create a target machine for triple \
                     `{triple}`, CPU `{}`, features `{features}`",
                    target.cpu_name()
                ))
            })?;
        Ok(LlvmTarget {
            target: target.clone(),
            triple,
            features,
            machine,
            cpu: target.cpu_desc(),
        })
    }

    /// `llvm -mcpu=native`.
    pub fn host() -> Result<LlvmTarget> {
        LlvmTarget::new(&Target::host())
    }

    /// The Kiln target this machine was made from.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The inkwell target machine (for what this wrapper does not cover).
    pub fn machine(&self) -> &TargetMachine {
        &self.machine
    }

    /// The normalized LLVM triple.
    pub fn triple(&self) -> &str {
        &self.triple
    }

    /// The CPU name given to LLVM.
    pub fn cpu(&self) -> &str {
        self.target.cpu_name()
    }

    /// The description of the CPU this machine generates code for ([`Target::cpu_desc`]).
    pub fn cpu_desc(&self) -> &kiln_tir::CpuDesc {
        &self.cpu
    }

    /// The feature string given to LLVM (may be empty).
    pub fn features(&self) -> &str {
        &self.features
    }

    /// The data layout string of the target machine.
    pub fn data_layout(&self) -> String {
        self.machine
            .get_target_data()
            .get_data_layout()
            .as_str()
            .to_string_lossy()
            .into_owned()
    }

    /// A new module for this target: triple and data layout set, and a `tvm_target` module flag
    /// holding the target string (as TVM records its target, so a reader of the `.ll` sees it).
    pub fn create_module<'ctx>(&self, ctx: &'ctx Context, name: &str) -> Module<'ctx> {
        let module = ctx.create_module(name);
        module.set_triple(&TargetTriple::create(&self.triple));
        module.set_data_layout(&self.machine.get_target_data().get_data_layout());
        let md = ctx.metadata_string(&self.target.to_string());
        module.add_metadata_flag("tvm_target", FlagBehavior::Warning, md);
        module
    }

    /// Marks `function` with the target's CPU and features (`"target-cpu"`, `"target-features"`,
    /// as TVM does on every function), and with the fast-math function attributes when the
    /// target has `-fast-math`. Instructions still need [`fast_math_flags`](Self::fast_math_flags).
    pub fn set_function_attributes(&self, ctx: &Context, function: FunctionValue<'_>) {
        let add = |k: &str, v: &str| {
            function.add_attribute(AttributeLoc::Function, ctx.create_string_attribute(k, v));
        };
        add("target-cpu", self.cpu());
        if !self.features.is_empty() {
            add("target-features", &self.features);
        }
        if self.target.fast_math {
            for k in [
                "unsafe-fp-math",
                "no-infs-fp-math",
                "no-nans-fp-math",
                "no-signed-zeros-fp-math",
                "approx-func-fp-math",
            ] {
                add(k, "true");
            }
        }
    }

    /// The fast-math flags to put on floating-point instructions: all of them with `-fast-math`;
    /// otherwise only `contract` (a multiply and an add may fuse into an FMA, as Apache TVM's
    /// default `AllowFPOpFusion = Fast` allows; no other fast math unless asked).
    pub fn fast_math_flags(&self) -> FastMathFlags {
        if self.target.fast_math {
            FastMathFlags::all()
        } else {
            FastMathFlags::AllowContract
        }
    }

    /// Verifies `module`, then runs the new pass manager's `default<On>` pipeline at the
    /// target's opt level, with loop and SLP vectorization and unrolling from O2 up.
    pub fn optimize(&self, module: &Module<'_>) -> Result<()> {
        verify(module)?;
        let level = self.target.opt_level.min(3);
        let options = PassBuilderOptions::create();
        let vectorize = level >= 2;
        options.set_loop_vectorization(vectorize);
        options.set_loop_slp_vectorization(vectorize);
        options.set_loop_interleaving(vectorize);
        options.set_loop_unrolling(level >= 2);
        module
            .run_passes(&format!("default<O{level}>"), &self.machine, options)
            .map_err(|e| {
                Error::runtime_error(format!(
                    "LLVM optimization of module `{}` at O{level} failed: {e}",
                    module_name(module)
                ))
            })
    }

    fn emit(&self, module: &Module<'_>, file_type: FileType) -> Result<Vec<u8>> {
        let buffer = self
            .machine
            .write_to_memory_buffer(module, file_type)
            .map_err(|e| {
                Error::runtime_error(format!(
                    "LLVM could not emit {} for module `{}`: {e}",
                    if file_type == FileType::Object {
                        "an object file"
                    } else {
                        "assembly"
                    },
                    module_name(module)
                ))
            })?;
        Ok(buffer.as_slice().to_vec())
    }

    /// The module as an object file (ELF on Linux), ready for [`crate::link::link_shared`].
    pub fn emit_object(&self, module: &Module<'_>) -> Result<Vec<u8>> {
        self.emit(module, FileType::Object)
    }

    /// Writes the module as an object file at `path`.
    pub fn write_object(&self, module: &Module<'_>, path: &Path) -> Result<()> {
        let bytes = self.emit_object(module)?;
        std::fs::write(path, bytes)
            .map_err(|e| Error::runtime_error(format!("cannot write {}: {e}", path.display())))
    }

    /// The module as assembly text (what `inspect_source("asm")` shows).
    pub fn emit_assembly(&self, module: &Module<'_>) -> Result<String> {
        let bytes = self.emit(module, FileType::Assembly)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// Turns an inkwell builder error into a Kiln error (a bug in the generator, not in user input).
pub(crate) fn llvm_error(e: impl std::fmt::Display) -> Error {
    Error::runtime_error(format!("building LLVM IR failed: {e}"))
}

/// The module's name.
pub fn module_name(module: &Module<'_>) -> String {
    module.get_name().to_string_lossy().into_owned()
}

/// The module as LLVM IR text (what `inspect_source("ll")` shows).
pub fn ir_text(module: &Module<'_>) -> String {
    module.print_to_string().to_string()
}

/// Checks the module with LLVM's verifier; the error holds LLVM's explanation.
pub fn verify(module: &Module<'_>) -> Result<()> {
    module.verify().map_err(|e| {
        Error::runtime_error(format!(
            "generated LLVM module `{}` is invalid: {e}",
            module_name(module)
        ))
    })
}

#[cfg(test)]
mod tests;
