//! What the `kiln` binary's tests share: running the binary and checking that it succeeded.
//! Seeded data, `.npy` bytes and the project's Python come from `kiln-testing`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `kiln` binary under test.
pub const KILN: &str = env!("CARGO_BIN_EXE_kiln");

/// The root of the repository.
pub fn root() -> PathBuf {
    kiln_testing::process::repo_root()
}

/// `p` as a `&str` (test paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `kiln` with `args`.
pub fn kiln(args: &[&str]) -> Output {
    kiln_testing::process::output(Command::new(KILN).args(args))
}

/// Runs `kiln` and returns its stdout; panics with stderr on failure.
pub fn kiln_ok(args: &[&str]) -> String {
    kiln_testing::process::stdout_ok(&kiln(args), &format!("kiln {args:?}"))
}
