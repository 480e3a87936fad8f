//! Test support: the reference interpreter and random data.

#![allow(dead_code)]

pub mod eval;

/// Deterministic pseudo-random floats in [-1, 1) (a 64-bit LCG; fresh seeds per test).
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Asserts two float slices agree within a relative-and-absolute tolerance.
pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "lengths");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "element {k}: got {g}, want {w}"
        );
    }
}
