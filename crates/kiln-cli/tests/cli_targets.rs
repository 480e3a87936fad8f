//! Libraries and CPUs from the command line: a library compiled for a CPU this machine is not
//! is refused by `kiln run` with exit code 1 and a message naming the file, the CPU and the
//! missing features (never a signal), `kiln inspect` shows what it needs; a library built for
//! two x86-64 levels runs the best variant this machine can and matches the bundled model's
//! stored onnxruntime output.

mod common;

use common::{assert_bundled_output, kiln, kiln_ok, root, s, KILN};
use std::process::Command;

fn host_has(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| {
            s.lines()
                .find(|l| l.starts_with("flags"))
                .is_some_and(|l| l.split_whitespace().any(|w| w == flag))
        })
        .unwrap_or(false)
}

#[test]
fn a_library_for_another_cpu_is_refused_with_a_clear_message() {
    if host_has("amx_tile") {
        eprintln!("skipped: this CPU has AMX, so a sapphirerapids library runs here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("spr.so");
    let model = root().join("examples/model/model.onnx");
    kiln_ok(&[
        "compile",
        s(&model),
        "-o",
        s(&lib),
        "--target",
        "llvm -mcpu=sapphirerapids",
    ]);
    let out = kiln(&["run", s(&lib), "--output-dir", s(dir.path())]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for needle in [s(&lib), "sapphirerapids", "amx-tile", "lacks"] {
        assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
    }
    assert!(!dir.path().join("output_0.npy").exists());
    // inspect shows what the library needs before refusing it.
    let out = kiln(&["inspect", s(&lib)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("code variants (1)"), "{text}");
    assert!(
        text.contains("amx-tile") && text.contains("none runs on this machine"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_library_for_two_levels_runs_the_best_variant() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("two.so");
    let model = root().join("examples/model/model.onnx");
    let out = kiln_ok(&[
        "compile",
        s(&model),
        "-o",
        s(&lib),
        "--target",
        "llvm -mcpu=x86-64-v4",
        "--target",
        "llvm -mcpu=x86-64-v3",
    ]);
    assert!(
        out.contains("x86-64-v4") && out.contains("x86-64-v3"),
        "{out}"
    );
    let text = kiln_ok(&["inspect", s(&lib)]);
    assert!(text.contains("code variants (2)"), "{text}");
    let best = if host_has("avx512f") {
        "x86_64_v4: llvm -mcpu=x86-64-v4"
    } else {
        "default: llvm -mcpu=x86-64-v3"
    };
    let line = text
        .lines()
        .find(|l| l.contains("runs on this machine"))
        .unwrap_or_else(|| panic!("no chosen variant in:\n{text}"));
    assert!(line.contains(best), "expected {best:?} chosen:\n{text}");
    // The loader says which variant it runs when asked.
    let out = Command::new(KILN)
        .args([
            "run",
            s(&lib),
            "--input",
            &format!("input={}", s(&root().join("examples/model/input.npy"))),
            "--output-dir",
            s(dir.path()),
        ])
        .env("KILN_LOG", "debug")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("running code variant"), "{err}");
    assert_bundled_output(dir.path());
}
