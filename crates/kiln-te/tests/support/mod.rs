//! Test support: the reference interpreter and the comparison the numeric tests use.

#![allow(dead_code)]

pub mod eval;
pub mod workloads;

/// Asserts two float slices agree within a relative-and-absolute tolerance
/// (`|got - want| <= tol * (1 + |want|)`).
pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    let tol = kiln_testing::Tolerance::Numpy {
        rtol: tol.into(),
        atol: tol.into(),
    };
    kiln_testing::assert_allclose(got, want, tol, "element");
}
