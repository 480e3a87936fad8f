//! Assertions on Kiln errors (feature `ffi`).

/// Asserts that `r` failed with an error of `kind` (TVM's error kinds: `"TypeError"`,
/// `"ValueError"`, ...) whose message contains `needle`, and returns the error.
#[track_caller]
pub fn expect_err<T>(r: kiln_ffi::Result<T>, kind: &str, needle: &str) -> kiln_ffi::Error {
    let e = match r {
        Ok(_) => panic!("expected a {kind} containing {needle:?}, got success"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), kind, "{}", e.message());
    assert!(e.message().contains(needle), "{}", e.message());
    e
}
