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

/// Checks `dir/output_0.npy` (what `kiln run` wrote for the bundled model) against the stored
/// onnxruntime output `examples/model/expected.npy`.
pub fn assert_bundled_output(dir: &Path) {
    let got = kiln_testing::npy::read_f32_file(&dir.join("output_0.npy"));
    let want = kiln_testing::npy::read_f32_file(&root().join("examples/model/expected.npy"));
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-4 * w.abs(),
            "output {i}: {g} vs onnxruntime {w}"
        );
    }
}

/// Runs `lib` (the bundled model compiled) on the bundled input with `kiln run`, writing into
/// `dir`, and checks its output with [`assert_bundled_output`].
pub fn run_bundled(lib: &Path, dir: &Path) {
    let input = format!("input={}", s(&root().join("examples/model/input.npy")));
    kiln_ok(&["run", s(lib), "--input", &input, "--output-dir", s(dir)]);
    assert_bundled_output(dir);
}
