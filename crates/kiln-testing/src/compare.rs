//! Comparison of computed values against expected ones, numpy style, reporting the worst
//! element (its index, both values and the error) rather than the first.

use std::fmt;

/// How far a value may stray from the expected `w`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// `|g - w| <= tol * max(|w|, 1)`: absolute below magnitude 1, relative above (the error
    /// normalized by the scale of the expected value).
    Scaled(f64),
    /// numpy's `allclose`: `|g - w| <= atol + rtol * |w|`.
    Numpy {
        /// The relative part.
        rtol: f64,
        /// The absolute part.
        atol: f64,
    },
}

impl Tolerance {
    /// The largest error accepted around `w`.
    pub fn bound(self, w: f64) -> f64 {
        match self {
            Tolerance::Scaled(tol) => tol * w.abs().max(1.0),
            Tolerance::Numpy { rtol, atol } => atol + rtol * w.abs(),
        }
    }
}

/// The element of a comparison that strays furthest from its expected value (relative to what
/// the tolerance allows there).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mismatch {
    /// Its index in the slices.
    pub index: usize,
    /// The computed value.
    pub got: f64,
    /// The expected value.
    pub want: f64,
    /// `|got - want|` (infinite where exactly one of them is NaN).
    pub error: f64,
    /// The error the tolerance allows at `want`.
    pub allowed: f64,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}]: got {}, want {} (error {:e}, allowed {:e})",
            self.index, self.got, self.want, self.error, self.allowed
        )
    }
}

/// The worst element of `got` against `want` under `tol`, or `None` when every element is
/// close. A NaN matches only a NaN, and only with `nan_equal`.
///
/// Panics if the lengths differ.
pub fn worst_mismatch<T: Copy + Into<f64>>(
    got: &[T],
    want: &[T],
    tol: Tolerance,
    nan_equal: bool,
) -> Option<Mismatch> {
    assert_eq!(got.len(), want.len(), "lengths");
    let mut worst: Option<(f64, Mismatch)> = None;
    for (index, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (g, w): (f64, f64) = (g.into(), w.into());
        if nan_equal && g.is_nan() && w.is_nan() {
            continue;
        }
        let error = (g - w).abs();
        let allowed = tol.bound(w);
        if error <= allowed {
            continue;
        }
        // A NaN error (either side NaN) is the worst there is.
        let error = if error.is_nan() { f64::INFINITY } else { error };
        let badness = if allowed > 0.0 {
            error / allowed
        } else {
            f64::INFINITY
        };
        if worst.as_ref().map_or(true, |(b, _)| badness > *b) {
            let m = Mismatch {
                index,
                got: g,
                want: w,
                error,
                allowed,
            };
            worst = Some((badness, m));
        }
    }
    worst.map(|(_, m)| m)
}

/// Asserts `got` matches `want` under `tol` (NaN never matches), naming `what` and the worst
/// element on failure.
pub fn assert_allclose<T: Copy + Into<f64>>(got: &[T], want: &[T], tol: Tolerance, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(m) = worst_mismatch(got, want, tol, false) {
        panic!("{what}{m}");
    }
}

/// Asserts `got` matches `want` within `tol` (relative above magnitude 1, [`Tolerance::Scaled`];
/// NaN never matches), naming `what`, the worst element and the seed that replays the data
/// (`KILN_TEST_SEED`).
pub fn assert_close<T: Copy + Into<f64>>(
    got: &[T],
    want: &[T],
    tol: impl Into<f64>,
    what: &str,
    seed: u64,
) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: lengths (KILN_TEST_SEED={seed})"
    );
    if let Some(m) = worst_mismatch(got, want, Tolerance::Scaled(tol.into()), false) {
        panic!("{what}{m} (KILN_TEST_SEED={seed})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_the_worst_element() {
        let want = [1.0f32, 2.0, 3.0, 100.0];
        let got = [1.0f32, 2.1, 3.5, 100.4];
        let m = worst_mismatch(&got, &want, Tolerance::Scaled(1e-2), false).unwrap();
        assert_eq!(m.index, 2);
        assert!(worst_mismatch(&got, &want, Tolerance::Scaled(0.2), false).is_none());
        let tol = Tolerance::Numpy {
            rtol: 0.0,
            atol: 0.45,
        };
        assert!(worst_mismatch(&got, &want, tol, false).is_some());
    }

    #[test]
    fn nan_matches_only_when_asked() {
        let a = [f32::NAN, 1.0];
        assert!(worst_mismatch(&a, &a, Tolerance::Scaled(1e-6), true).is_none());
        let m = worst_mismatch(&a, &a, Tolerance::Scaled(1e-6), false).unwrap();
        assert_eq!(m.index, 0);
        let poisoned = [f32::NAN, 1.0];
        let m = worst_mismatch(&poisoned, &[0.5, 1.0], Tolerance::Scaled(1.0), false).unwrap();
        assert_eq!(m.index, 0);
    }

    #[test]
    #[should_panic(expected = "out[1]: got 3, want 2")]
    fn assert_close_names_the_element() {
        assert_close(&[1.0f64, 3.0], &[1.0, 2.0], 1e-3, "out", 5);
    }
}
