//! Running programs (the `kiln` binary, Python) from tests.

use std::process::{Command, Output};

/// Runs `cmd` to completion and returns its output; panics if it cannot be started.
pub fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()))
}

/// Asserts that `out` is a successful exit, panicking with `what` and the standard error
/// otherwise, and returns the standard output as text.
pub fn stdout_ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
