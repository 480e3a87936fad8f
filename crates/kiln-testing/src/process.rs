//! Running programs (the `kiln` binary, the project's Python) from tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The root of the Kiln repository (where `.venv` lives).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The project's Python (`KILN_PYTHON`, else `.venv/bin/python` under [`repo_root`]) if it can
/// import every one of `modules`; otherwise prints why the caller skips and returns `None`.
pub fn python_with(modules: &[&str]) -> Option<PathBuf> {
    let py = std::env::var_os("KILN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"));
    let mut cmd = Command::new(&py);
    if !modules.is_empty() {
        cmd.arg("-c").arg(format!("import {}", modules.join(", ")));
    } else {
        cmd.args(["-c", "pass"]);
    }
    let ok = cmd.output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: {} lacks {}", py.display(), modules.join(", "));
    }
    ok.then_some(py)
}

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

/// Runs `cmd`, asserts that it succeeds (panicking with `what` and its standard error) and
/// returns its standard output.
pub fn run_ok(cmd: &mut Command, what: &str) -> String {
    stdout_ok(&output(cmd), what)
}

/// The standard output followed by the standard error of `out`, as text.
pub fn combined(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
