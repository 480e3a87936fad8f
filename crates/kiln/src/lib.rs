//! Kiln as one library: the runtime plus (as they land) the compiler crates. Built as
//! `libkiln.so`, which the Python package and the CLI load.

pub use kiln_codegen as codegen;
pub use kiln_ffi as ffi;
pub use kiln_onnx as onnx;
pub use kiln_rpc as rpc;
pub use kiln_runtime as runtime;
pub use kiln_te as te;
pub use kiln_tir as tir;
pub use kiln_tune as tune;

/// Makes sure every part of Kiln (and the global functions each registers) is linked into this
/// library.
#[doc(hidden)]
pub fn link_all() {
    std::hint::black_box(kiln_runtime::link_ffi());
    std::hint::black_box(kiln_tir::link_globals());
    std::hint::black_box(kiln_te::link_globals());
    std::hint::black_box(kiln_graph::link_globals());
    std::hint::black_box(kiln_codegen::driver::link_globals());
    std::hint::black_box(kiln_onnx::link_globals());
    std::hint::black_box(kiln_rpc::link_globals());
    std::hint::black_box(kiln_tune::link_globals());
}
