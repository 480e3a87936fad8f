//! Bad input to the `kiln` binary: every case must fail with exit code 1 (not a panic's 101 or a
//! signal), a `kiln: ...` message that names what is wrong and where, and no panic text. Covers
//! garbage and truncated models, unsupported opsets, unknown operators, wrong input files at run
//! time, garbage and truncated libraries, and `compile -o` over an existing file.

mod common;

use common::{kiln, kiln_ok, root, s};
use kiln_testing::npy;
use kiln_testing::process::python_with;
use std::path::{Path, PathBuf};
use std::process::Command;

fn bundled_model() -> PathBuf {
    root().join("examples/model/model.onnx")
}

/// Expects a clean failure whose message contains every one of `needles`; returns stderr.
fn fails(args: &[&str], needles: &[&str]) -> String {
    let out = kiln(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "kiln {args:?}: expected exit code 1, got {:?}\n{err}",
        out.status
    );
    assert!(!err.contains("panicked"), "kiln {args:?} panicked:\n{err}");
    assert!(err.starts_with("kiln: "), "kiln {args:?}: {err}");
    for needle in needles {
        assert!(
            err.contains(needle),
            "kiln {args:?}: expected {needle:?} in:\n{err}"
        );
    }
    err
}

/// Writes `opset0.onnx`, `opset99.onnx` and `unknown.onnx` (two custom-domain nodes and one
/// unknown default-domain node after a Relu) into `dir`.
const MAKE_BAD_MODELS: &str = r#"
import sys, onnx
from onnx import helper, TensorProto
d = sys.argv[1]
def save(nodes, opset, name, domains=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(x, 1) for x in domains]
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 8
    onnx.save(m, f"{d}/{name}")
relu = [helper.make_node("Relu", ["x"], ["y"], name="relu0")]
save(relu, 0, "opset0.onnx")
save(relu, 99, "opset99.onnx")
save([helper.make_node("Relu", ["x"], ["a"], name="relu0"),
      helper.make_node("MyCustomOp", ["a"], ["b"], name="custom0", domain="com.example"),
      helper.make_node("MyCustomOp", ["b"], ["c"], name="custom1", domain="com.example"),
      helper.make_node("FooBar", ["c"], ["y"], name="foo0")], 13, "unknown.onnx", ["com.example"])
"#;

#[test]
fn garbage_and_truncated_models() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.so");
    let garbage = dir.path().join("garbage.onnx");
    std::fs::write(
        &garbage,
        b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff garbage",
    )
    .unwrap();
    fails(
        &["compile", s(&garbage), "-o", s(&out)],
        &["garbage.onnx", "not a valid ONNX model"],
    );
    fails(
        &["inspect", s(&garbage)],
        &["garbage.onnx", "not a valid ONNX model"],
    );

    let model = std::fs::read(bundled_model()).unwrap();
    let n = model.len();
    for cut in [0, 1, 7, 20, 100, 1000, n / 2, n - 10, n - 1] {
        let path = dir.path().join(format!("cut{cut}.onnx"));
        std::fs::write(&path, &model[..cut]).unwrap();
        let name = format!("cut{cut}.onnx");
        // An empty file decodes as a model without a graph; any other cut breaks the protobuf.
        let why = if cut == 0 {
            "has no graph"
        } else {
            "not a valid ONNX model"
        };
        fails(&["compile", s(&path), "-o", s(&out)], &[&name, why]);
        fails(&["inspect", s(&path)], &[&name, why]);
    }
    assert!(!out.exists());
}

#[test]
fn unsupported_opsets_and_operators() {
    let Some(py) = python_with(&["onnx"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let made = Command::new(py)
        .arg("-c")
        .arg(MAKE_BAD_MODELS)
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let out = dir.path().join("out.so");
    for v in ["0", "99"] {
        let model = dir.path().join(format!("opset{v}.onnx"));
        let needles = [
            &format!("opset{v}.onnx") as &str,
            &format!("uses opset {v}"),
            "supports opsets",
        ];
        fails(&["compile", s(&model), "-o", s(&out)], &needles);
        fails(&["inspect", s(&model)], &needles);
    }
    let unknown = dir.path().join("unknown.onnx");
    let err = fails(
        &["compile", s(&unknown), "-o", s(&out)],
        &[
            "unknown.onnx",
            "2 unsupported operator type(s) in 3 node(s)",
            "com.example.MyCustomOp",
            "first: 'custom0'",
            "FooBar",
            "first: 'foo0'",
        ],
    );
    let custom = err.lines().find(|l| l.contains("MyCustomOp")).unwrap();
    assert!(custom.contains("2 node(s)"), "{err}");
    let foo = err.lines().find(|l| l.contains("FooBar")).unwrap();
    assert!(foo.contains("1 node(s)"), "{err}");
    assert!(!err.contains("Relu"), "{err}");
    // `inspect` still prints the summary and says why there is no graph.
    let text = kiln_ok(&["inspect", s(&unknown)]);
    assert!(
        text.contains("MyCustomOp") && text.contains("conversion failed"),
        "{text}"
    );
    assert!(!out.exists());
}

#[test]
fn wrong_inputs_at_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("deploy.so");
    kiln_ok(&["compile", s(&bundled_model()), "-o", s(&lib)]);
    let write = |name: &str, bytes: Vec<u8>| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let good = write("good.npy", npy::zeros("<f4", &[1, 3, 32, 32], 4));
    let shape = write("shape.npy", npy::zeros("<f4", &[1, 3, 8, 8], 4));
    let rank = write("rank.npy", npy::zeros("<f4", &[3072], 4));
    let dtype = write("dtype.npy", npy::zeros("<i8", &[1, 3, 32, 32], 8));
    let f64 = write("f64.npy", npy::zeros("<f8", &[1, 3, 32, 32], 8));
    let mut short = npy::zeros("<f4", &[1, 3, 32, 32], 4);
    short.truncate(short.len() - 3);
    let short = write("short.npy", short);
    let garbage = write("garbage.npy", b"\x93NUMPY\x01\x00\xff\xff{'descr'".to_vec());

    let run = |flag: String, needles: &[&str]| {
        fails(
            &[
                "run",
                s(&lib),
                "--input",
                &flag,
                "--output-dir",
                s(dir.path()),
            ],
            needles,
        );
    };
    let expects = "the model expects float32 [1, 3, 32, 32]";
    run(
        format!("input={}", s(&shape)),
        &["input \"input\"", "shape.npy", "[1, 3, 8, 8]", expects],
    );
    run(
        format!("input={}", s(&rank)),
        &["rank.npy", "[3072]", expects],
    );
    run(
        format!("input={}", s(&dtype)),
        &["dtype.npy", "holds int64", expects],
    );
    run(
        format!("input={}", s(&f64)),
        &["f64.npy", "unsupported dtype \"<f8\""],
    );
    run(
        format!("input={}", s(&short)),
        &["short.npy", "needs 12288 data bytes"],
    );
    run(
        format!("input={}", s(&garbage)),
        &["garbage.npy", "not a valid .npy file"],
    );
    run(
        format!("input={}", s(&dir.path().join("none.npy"))),
        &["none.npy", "cannot read"],
    );
    run(
        format!("nope={}", s(&good)),
        &["no input named \"nope\"", "inputs: input"],
    );
    // Params are not runtime inputs.
    run(format!("p0={}", s(&good)), &["no input named \"p0\""]);
    run("input".to_string(), &["expected name=file.npy"]);
    // The good file runs.
    kiln_ok(&[
        "run",
        s(&lib),
        "--input",
        &format!("input={}", s(&good)),
        "--output-dir",
        s(dir.path()),
    ]);
}

#[test]
fn garbage_and_truncated_libraries() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("deploy.so");
    kiln_ok(&["compile", s(&bundled_model()), "-o", s(&lib)]);
    let bytes = std::fs::read(&lib).unwrap();
    let garbage = dir.path().join("garbage.so");
    std::fs::write(&garbage, b"this is not a shared library at all").unwrap();
    for cmd in ["run", "inspect", "bench"] {
        fails(&[cmd, s(&garbage)], &["cannot load", "garbage.so"]);
    }
    // Cuts inside the ELF header, the program headers and the loaded segments (which without
    // a check would be mapped and then fault with SIGBUS).
    let n = bytes.len();
    for cut in [0, 4, 40, 64, 1000, n / 4, n / 2] {
        let path = dir.path().join(format!("cut{cut}.so"));
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let name = format!("cut{cut}.so");
        for cmd in ["run", "inspect", "bench"] {
            fails(&[cmd, s(&path)], &["cannot load", &name]);
        }
    }
    // A library that is not a model (no graph executor factory).
    let onnx_as_so = dir.path().join("model.so");
    std::fs::copy(bundled_model(), &onnx_as_so).unwrap();
    fails(&["run", s(&onnx_as_so)], &["cannot load", "model.so"]);
}

#[test]
fn failed_compile_keeps_an_existing_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("important.so");
    std::fs::write(&out, b"the user's precious file").unwrap();
    let garbage = dir.path().join("garbage.onnx");
    std::fs::write(&garbage, b"garbage").unwrap();
    fails(&["compile", s(&garbage), "-o", s(&out)], &["garbage.onnx"]);
    fails(
        &[
            "compile",
            s(&bundled_model()),
            "-o",
            s(&out),
            "--target",
            "nonsense-target",
        ],
        &["nonsense-target"],
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"the user's precious file");
    // A directory is not overwritten either.
    let as_dir = dir.path().join("dir.so");
    std::fs::create_dir(&as_dir).unwrap();
    fails(
        &["compile", s(&bundled_model()), "-o", s(&as_dir)],
        &["dir.so", "is a directory"],
    );
    assert!(as_dir.is_dir());
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    // No temporary files are left behind.
    assert_eq!(
        names(dir.path()),
        ["dir.so", "garbage.onnx", "important.so"]
    );
    // A successful compile replaces the file with a library that runs.
    kiln_ok(&["compile", s(&bundled_model()), "-o", s(&out)]);
    assert_eq!(
        names(dir.path()),
        ["dir.so", "garbage.onnx", "important.so"]
    );
    let text = kiln_ok(&["inspect", s(&out)]);
    assert!(text.contains("GraphExecutorFactory"), "{text}");
}
