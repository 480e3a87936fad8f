//! [`CompiledModule`]: the result of compiling one LLVM module, detached from its LLVM context.
//!
//! inkwell's `Module<'ctx>` borrows a `Context` that is neither `Send` nor `'static`, while a
//! runtime module node must be both. So compilation ends here: the object file and the
//! optimized IR text are kept as bytes, plus bitcode from which assembly is made on demand in a
//! fresh context (`inspect_source("asm")` is rare; emitting it for every build would double the
//! back-end time).

use super::{ir_text, LlvmTarget};
use crate::target::Target;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use kiln_ffi::{Error, Result};
use std::path::Path;

/// An optimized, compiled LLVM module: object file, IR text and bitcode.
#[derive(Clone, Debug)]
pub struct CompiledModule {
    /// The LLVM module's name.
    pub name: String,
    /// The target it was compiled for.
    pub target: Target,
    /// The code variant's tag (empty for a library's default variant; see
    /// [`crate::variants`]).
    pub variant: String,
    /// The object file (ELF on Linux).
    pub object: Vec<u8>,
    /// The optimized module as LLVM IR text.
    pub ir: String,
    bitcode: Vec<u8>,
}

impl CompiledModule {
    /// Verifies and optimizes `module` for `machine` (at the target's opt level), then emits
    /// the object file and keeps the IR and bitcode.
    pub fn compile(
        machine: &LlvmTarget,
        module: &Module<'_>,
        variant: &str,
    ) -> Result<CompiledModule> {
        machine.optimize(module)?;
        let object = machine.emit_object(module)?;
        Ok(CompiledModule {
            name: super::module_name(module),
            target: machine.target().clone(),
            variant: variant.to_string(),
            object,
            ir: ir_text(module),
            bitcode: module.write_bitcode_to_memory().as_slice().to_vec(),
        })
    }

    /// The module's assembly, regenerated from the bitcode in a fresh context.
    pub fn assembly(&self) -> Result<String> {
        let machine = LlvmTarget::new(&self.target)?;
        let ctx = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(&self.bitcode, &self.name);
        let module = Module::parse_bitcode_from_buffer(&buffer, &ctx).map_err(|e| {
            Error::runtime_error(format!(
                "cannot re-read the bitcode of LLVM module `{}`: {e}",
                self.name
            ))
        })?;
        machine.emit_assembly(&module)
    }

    /// Source text in `format`: `ll` (IR), `asm`/`s` (assembly); other formats are an error
    /// that lists these.
    pub fn source(&self, format: &str) -> Result<String> {
        match format {
            "ll" | "llvm" => Ok(self.ir.clone()),
            "asm" | "s" => self.assembly(),
            _ => Err(Error::value_error(format!(
                "an LLVM module has no `{format}` source (formats: ll, asm)"
            ))),
        }
    }

    /// Writes the object file at `path`.
    pub fn write_object(&self, path: &Path) -> Result<()> {
        std::fs::write(path, &self.object)
            .map_err(|e| Error::runtime_error(format!("cannot write {}: {e}", path.display())))
    }
}
