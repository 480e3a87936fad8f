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

/// Asserts that `r` failed with an error of `kind` whose message starts with `prefix`, and
/// returns the error.
#[track_caller]
pub fn expect_err_starting<T>(r: kiln_ffi::Result<T>, kind: &str, prefix: &str) -> kiln_ffi::Error {
    let e = expect_err(r, kind, "");
    assert!(e.message().starts_with(prefix), "{}", e.message());
    e
}
