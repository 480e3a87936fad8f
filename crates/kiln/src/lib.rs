//! Kiln as one library: the runtime plus (as they land) the compiler crates. Built as
//! `libkiln.so`, which the Python package and the CLI load.

pub use kiln_ffi as ffi;
pub use kiln_runtime as runtime;

/// Makes sure every part of Kiln is linked into this library.
#[doc(hidden)]
pub fn link_all() -> [*const (); 1] {
    [kiln_runtime::link_ffi()]
}
