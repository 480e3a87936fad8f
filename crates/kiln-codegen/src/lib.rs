//! Kiln's code generators (seed 004's `codegen.build_llvm`, `create_shared`): what turns tensor
//! programs into a shared library that Kiln's runtime and Apache TVM 0.27 both load.
//!
//! - [`target`]: target strings (`llvm -mcpu=native -opt-level=3`, `c`, `opencl`, `cuda`),
//!   host CPU detection through LLVM 19, feature queries for schedules.
//! - [`llvm`]: LLVM 19 through inkwell: target machines, modules, the `default<On>` pipeline,
//!   object/assembly/IR output, and the TVM-FFI ABI pieces generated code needs
//!   ([`llvm::abi`], [`llvm::symbols`]).
//! - [`c`]: the `c` target: TIR to self-contained C compiled by `cc` ([`build_c`],
//!   [`CSourceModule`]), for machines without LLVM.
//! - [`device`]: OpenCL C and CUDA C++ kernels from the device part of functions with thread
//!   bindings, and the device build (host module importing the device module).
//! - [`link`]: `cc -shared -fPIC` linking through the runtime's one toolchain.
//! - [`variants`]: the target record every library carries, and code for several CPUs in one
//!   library.
//!
//! - [`driver`]: `lower` (schedule to TIR through the passes) and `build` (schedule or module
//!   to a runnable module for a target string), with the `driver.*` and `codegen.Build` globals.
//! - [`llvm::codegen`]: TIR (packed-API functions) to LLVM IR; [`build()`]: an `IRModule` to
//!   a runtime module of kind `llvm` (in-process functions, `export_library`, `inspect_source`).

pub mod build;
pub mod c;
pub mod device;
pub mod driver;
mod lazy_library;
pub mod link;
pub mod llvm;
pub(crate) mod lower_common;
pub mod target;
pub mod variants;

pub use build::{build, build_compiled, LlvmModule};
pub use c::{build_c, CSourceModule};
pub use device::module::CudaSourceModule;
pub use link::{link_shared, LinkOptions};
pub use llvm::LlvmTarget;
pub use target::{Target, TargetKind};
