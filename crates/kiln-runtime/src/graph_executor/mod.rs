//! The graph executor (seeds 001 and 004; TVM's `GraphExecutor` and `GraphExecutorFactory`):
//! runs a compiled model described by TVM's graph JSON with the functions of a library module.
//!
//! Feature `compiler` (on in `libkiln.so`, off in the deployable `libkiln_runtime.so`) adds the
//! compiler-side pieces: `save_params`, `static_library`, and creating a factory from parts and
//! serializing it (for `export_library`).
//!
//! - [`graph_json`]: the graph format, parsed and checked ([`Graph`]).
//! - [`params`]: TVM's params file format (`save_params`, [`load_params`]).
//! - [`storage`]: memory for the entries, shared as the graph's storage plan says.
//! - [`executor`]: [`GraphExecutor`]: inputs by name or index (copy or zero copy), run,
//!   outputs, params, shared params; [`debug`]: per-node times and a table ([`Profile`]).
//! - [`module`]: the executor as a module of kind `GraphExecutor` with TVM's function names
//!   (`set_input`, `run`, `get_output`, ...).
//! - [`factory`]: the module kind `GraphExecutorFactory` (graph JSON + params + library) whose
//!   `default(device)` makes executors; it serializes into the library blob, so
//!   `export_library` writes one `.so` and `load_module` brings it back.
//! - `static_library`: object files that `export_library` links (kernels compiled elsewhere).
//! - The global functions (`tvm.graph_executor.create`, `runtime.GraphExecutorFactoryCreate`,
//!   `runtime.SaveParams`, ...) are listed in `globals.rs`.
//!
//! ```no_run
//! # use kiln_runtime::ffi as kiln_ffi;
//! # fn main() -> kiln_ffi::Result<()> {
//! use kiln_runtime::graph_executor::GraphExecutorModule;
//! use kiln_runtime::module::load_module;
//! use kiln_runtime::tensor::Tensor;
//! use kiln_ffi::Device;
//!
//! let lib = load_module("deploy.so")?;                  // a GraphExecutorFactory
//! let exec = lib.function("default")?.invoke::<kiln_runtime::module::Module>((Device::cpu(0),))?;
//! let node = exec.downcast_node::<GraphExecutorModule>().unwrap();
//! let mut g = node.lock();
//! g.set_input_by_name("x", &Tensor::from_slice(&[1.0f32; 4], &[1, 4])?)?;
//! g.run()?;
//! println!("{:?}", g.get_output(0)?.to_vec::<f32>()?);
//! # Ok(()) }
//! ```

pub mod debug;
pub mod executor;
pub mod factory;
mod globals;
pub mod graph_json;
pub mod json;
pub mod module;
pub mod params;
#[cfg(feature = "compiler")]
pub mod static_library;
pub mod storage;

pub use debug::{NodeTime, Profile};
pub use executor::GraphExecutor;
pub use factory::GraphExecutorFactory;
pub use graph_json::{Graph, Node, NodeEntry, OpParam};
pub use module::GraphExecutorModule;
pub use params::load_params;
#[cfg(feature = "compiler")]
pub use params::save_params;
#[cfg(feature = "compiler")]
pub use static_library::StaticLibrary;
