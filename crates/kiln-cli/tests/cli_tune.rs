//! `kiln tune` and `kiln compile --tuning-records` on the bundled model: the records file holds
//! every distinct convolution and product with its times, a second tuning resumes with nothing
//! left to do, the tuned library matches onnxruntime's output, records of another CPU are
//! ignored with a note, and a damaged records file is a clear error naming it.

mod common;

use common::{kiln, kiln_ok, root, run_bundled, s};
use std::path::Path;

fn model() -> std::path::PathBuf {
    root().join("examples/model/model.onnx")
}

/// The records file at `path`.
fn read_records(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `kiln compile` of the bundled model into `lib` with the tuning records `records`.
fn compile_tuned(lib: &Path, records: &Path) -> std::process::Output {
    kiln(&[
        "compile",
        s(&model()),
        "-o",
        s(lib),
        "--tuning-records",
        s(records),
    ])
}

/// [`compile_tuned`], which must succeed, then the library run on the bundled input and
/// checked against onnxruntime's output.
fn compile_tuned_and_check(lib: &Path, records: &Path, dir: &Path) {
    let out = compile_tuned(lib, records);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    run_bundled(lib, dir);
}

#[test]
fn tuning_records_are_written_resumed_and_used() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records.json");
    let out = kiln_ok(&["tune", s(&model()), "-r", s(&records), "--runs", "1"]);
    assert!(
        out.contains("3 distinct layers, 0 already tuned, 3 to tune"),
        "{out}"
    );
    let file = read_records(&records);
    assert!(file["cpu"].as_str().is_some_and(|c| !c.is_empty()));
    let layers = file["layers"].as_object().unwrap();
    assert_eq!(
        layers.len(),
        3,
        "two convolutions and the classifier: {file}"
    );
    for (sig, layer) in layers {
        assert!(layer["ms"].as_f64().unwrap() > 0.0, "{sig}");
        assert!(
            layer["ms"].as_f64() <= layer["heuristic_ms"].as_f64(),
            "{sig}"
        );
        assert!(layer["records"].is_object(), "{sig}");
    }
    // Resumed: nothing left to tune, the records kept.
    let again = kiln_ok(&["tune", s(&model()), "-r", s(&records), "--runs", "1"]);
    assert!(again.contains("3 already tuned, 0 to tune"), "{again}");

    let lib = dir.path().join("tuned.so");
    compile_tuned_and_check(&lib, &records, dir.path());

    // Records of another CPU: a note, and the heuristics.
    let other = dir.path().join("other.json");
    let mut f = file.clone();
    f["cpu"] = "another-cpu [avx2]".into();
    std::fs::write(&other, f.to_string()).unwrap();
    let out = compile_tuned(&lib, &other);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tuned on another CPU (another-cpu [avx2])"),
        "{err}"
    );
    // ... and tuning into it is refused.
    let out = kiln(&["tune", s(&model()), "-r", s(&other), "--runs", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("records of another CPU"));

    // A damaged file names itself; the library already written stays.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{not json").unwrap();
    let out = compile_tuned(&lib, &bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json is not a tuning-records file"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    run_bundled(&lib, dir.path());
}

#[test]
fn tuning_times_candidates_on_an_rpc_server() {
    let server = kiln_rpc::Server::start(kiln_rpc::ServerConfig {
        port: 0,
        key: "tune".into(),
        ..Default::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("remote.json");
    let addr = format!("127.0.0.1:{}", server.port());
    let out = kiln_ok(&[
        "tune",
        s(&model()),
        "-r",
        s(&records),
        "--runs",
        "2",
        "--rpc-server",
        &addr,
        "--rpc-key",
        "tune",
    ]);
    assert!(out.contains("3 to tune"), "{out}");
    let file = read_records(&records);
    let layers = file["layers"].as_object().unwrap();
    assert_eq!(layers.len(), 3, "{file}");
    for (sig, layer) in layers {
        let ms = layer["ms"].as_f64().unwrap();
        assert!(ms > 0.0 && ms < 1e4, "{sig}: {ms}");
    }
    let lib = dir.path().join("tuned.so");
    compile_tuned_and_check(&lib, &records, dir.path());
    // A server that is not there is a clear error.
    let out = kiln(&[
        "tune",
        s(&model()),
        "-r",
        s(&records),
        "--rpc-server",
        "127.0.0.1:1",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the RPC server"));
}
