//! Shared support for Kiln's tests and benchmarks; a development-only crate (never published,
//! used only as a `[dev-dependencies]` entry).
//!
//! Everything here works on plain slices and numbers and depends on no Kiln crate, so the tests
//! of every crate, kiln-ffi and kiln-runtime included, can use it without building a second copy
//! of the crate under test. Helpers over Kiln's own types stay in the tests of the crate that
//! owns the types, or sit behind a feature (`ffi`: [`error`]).
//!
//! - [`rng`]: the test seed (`KILN_TEST_SEED` replays a run) and seeded random data.
//! - [`poison`]: output buffers filled with NaN or a sentinel byte, so an unwritten element fails.
//! - [`compare`]: closeness with a tolerance, reporting the worst element.
//! - [`reference`]: naive reference kernels (matmul, dense, conv2d, softmax, pooling).
//! - [`shape`]: row-major index arithmetic.
//! - [`bench`]: the median-of-runs timer the micro-benchmarks share.
//! - [`process`]: running a command that must succeed, finding the project's Python.
//! - [`npy`]: NumPy `.npy` bytes, as `kiln run` reads and writes them.

pub mod bench;
pub mod compare;
#[cfg(feature = "ffi")]
pub mod error;
pub mod npy;
pub mod poison;
pub mod process;
pub mod reference;
pub mod rng;
pub mod shape;

pub use compare::{assert_allclose, assert_close, Mismatch, Tolerance};
pub use poison::nan_vec;
pub use rng::{random, random_in, seed};
