//! `kiln demo`, the README's main job: it compiles the bundled model (examples/model), runs it,
//! matches onnxruntime's stored output and prints the latency; and it fails clearly when the
//! reference does not match.

use std::path::Path;
use std::process::Command;

const KILN: &str = env!("CARGO_BIN_EXE_kiln");

fn model_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/model")
}

#[test]
fn demo_compiles_runs_and_matches_the_bundled_model() {
    let out = Command::new(KILN).arg("demo").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kiln demo failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for needle in [
        "examples/model/model.onnx",
        "compiled (ONNX",
        "ok  output float32 [1, 10] matches onnxruntime's",
        "latency (1 thread): median",
        "demo passed",
    ] {
        assert!(stdout.contains(needle), "no {needle:?} in:\n{stdout}");
    }
}

/// A copy of the bundled model whose reference is off by 1e-3 in one element: the demo exits
/// non-zero, names the mismatch and does not panic.
#[test]
fn demo_fails_clearly_on_a_wrong_reference() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["model.onnx", "input.npy", "expected.npy"] {
        std::fs::copy(model_dir().join(f), dir.path().join(f)).unwrap();
    }
    // expected.npy is float32 [1, 10], stored after the header (its length is in bytes 8..10).
    let path = dir.path().join("expected.npy");
    let mut bytes = std::fs::read(&path).unwrap();
    let data = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    assert_eq!(
        bytes.len(),
        data + 40,
        "expected.npy is not float32 [1, 10]"
    );
    let at = data + 4 * 3;
    let v = f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) + 1e-3;
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();

    let out = Command::new(KILN)
        .args(["demo", "--model-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains("does not match") && stderr.contains("max abs error 1.000e-3"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
