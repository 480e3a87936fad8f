//! The virtual machine: runs models whose control flow is decided at run time (TVM's Relax VM
//! in spirit). A program ([`code`]) holds tensors in registers and runs instructions: `Run`
//! one of its static graph segments (each a graph executor over the shared library, so every
//! kernel is compiled, fused and scheduled as in a static model), `Call` a runtime builtin
//! ([`builtins`]: operators whose output shapes depend on the data), jumps on a condition
//! tensor (If, Loop), moves, and calls of kernels compiled with extents known only at run time
//! (`Kernel`: results allocated by shapes that shape functions computed, see [`shape_fns`]). `kiln compile` emits a [`factory::VmFactory`] instead of a
//! graph executor factory when a model needs one; it lives in the same single library, and its
//! executors answer the same functions (`set_input`, `run`, `get_output`, ...).

pub mod builtins;
pub mod code;
pub mod data_dependent;
pub mod factory;
mod globals;
pub mod machine;
pub mod module;
pub mod shape_expr;
pub mod shape_fns;

pub use code::{Code, Instr, KernelOut, Slot};
pub use factory::{Segment, VmFactory};
pub use machine::VirtualMachine;
pub use module::VirtualMachineModule;
