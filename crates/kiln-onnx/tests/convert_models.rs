//! The ONNX -> Kiln graph converter against onnxruntime and onnx: small models made by
//! `tests/onnx/make_convert_models.py` (output shapes from onnxruntime), the unsupported-op and
//! type errors, shape folding, and the light model zoo graphs in the onnx wheel (output shapes
//! from onnx's shape inference). Each converted module is typed by InferType and its output
//! shapes are compared. Skipped, with a message, when the venv has no `onnx`/`onnxruntime`.

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_testing::process::{python_with, run_ok};

use kiln_graph::ir::{Expr, IRModule};
use kiln_onnx::{from_onnx, load_model, InputShapes, OnnxError};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's Python if it can import onnx and onnxruntime (`KILN_PYTHON` overrides it).
fn python() -> Option<PathBuf> {
    python_with(&["onnx", "onnxruntime", "numpy"])
}

fn run_python(py: &Path, args: &[&str]) -> String {
    run_ok(Command::new(py).args(args), &format!("python {args:?}"))
}

fn script() -> String {
    root()
        .join("tests/onnx/make_convert_models.py")
        .display()
        .to_string()
}

/// The models made once per test process (`None` without the venv).
fn made() -> Option<&'static PathBuf> {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let py = python()?;
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("onnx-convert-models-{}", std::process::id()));
        run_python(&py, &[&script(), dir.to_str().unwrap()]);
        Some(dir)
    })
    .as_ref()
}

fn shapes_of(v: &Value) -> InputShapes {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, s)| {
                    let dims = s
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|d| d.as_u64().unwrap() as usize)
                        .collect();
                    (k.clone(), dims)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The output shapes of `main` after InferType.
fn output_shapes(m: &IRModule) -> Vec<Vec<i64>> {
    let body = m.main().unwrap().body().clone();
    let ty = body.ty().expect("typed");
    let fields = match &body {
        Expr::Tuple(_) => ty.as_tuple().unwrap().to_vec(),
        _ => vec![ty],
    };
    fields.iter().map(|t| t.shape().to_vec()).collect()
}

fn expected_shapes(v: &Value) -> Vec<Vec<i64>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s.as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_i64().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn small_models_match_onnxruntime_shapes() {
    let Some(dir) = made() else { return };
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let mut failures = Vec::new();
    for (name, exp) in expected.as_object().unwrap() {
        let model = load_model(dir.join(format!("{name}.onnx"))).unwrap();
        let result = from_onnx(&model, &shapes_of(&exp["inputs"]));
        match (&exp.get("error"), result) {
            (Some(subs), Err(e)) => {
                let msg = e.to_string();
                for s in subs.as_array().unwrap() {
                    if !msg.contains(s.as_str().unwrap()) {
                        failures.push(format!("{name}: error lacks {s}: {msg}"));
                    }
                }
            }
            (Some(_), Ok(_)) => failures.push(format!("{name}: converted but must fail")),
            (None, Err(e)) => failures.push(format!("{name}: {e}")),
            (None, Ok((m, _))) => {
                let got = output_shapes(&m);
                let want = expected_shapes(&exp["outputs"]);
                if got != want {
                    failures.push(format!("{name}: shapes {got:?}, onnxruntime {want:?}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn unsupported_ops_give_one_error() {
    let Some(dir) = made() else { return };
    let model = load_model(dir.join("unsupported.onnx")).unwrap();
    let Err(err) = from_onnx(&model, &InputShapes::new()) else {
        panic!("the model with unsupported ops converted");
    };
    let OnnxError::UnsupportedOps(ops) = &err else {
        panic!("expected UnsupportedOps, got {err}");
    };
    let listed: Vec<(&str, usize)> = ops
        .ops
        .iter()
        .map(|o| (o.op_type.as_str(), o.count))
        .collect();
    assert_eq!(listed, [("ImageDecoder", 2), ("MaxRoiPool", 1)], "{err}");
}

#[test]
fn shape_computations_fold_to_constants() {
    let Some(dir) = made() else { return };
    let model = load_model(dir.join("shape_fold.onnx")).unwrap();
    let shapes = kiln_onnx::parse_input_shapes("x=2,3,4,6").unwrap();
    let (m, params) = from_onnx(&model, &shapes).unwrap();
    assert!(params.is_empty());
    let text = m.to_string();
    // Shape, Gather, Concat, ConstantOfShape and Range leave no trace: only data ops remain.
    for op in ["take", "concatenate", "strided_slice", "prod("] {
        assert!(!text.contains(op), "{op} was not folded:\n{text}");
    }
    assert!(text.contains("reshape(%x"), "{text}");
}

#[test]
fn model_zoo_graphs_convert() {
    let Some(py) = python() else { return };
    let zoo: Value = serde_json::from_str(&run_python(&py, &[&script(), "--zoo"])).unwrap();
    let mut failures = Vec::new();
    let mut seen = 0;
    for (path, exp) in zoo.as_object().unwrap() {
        let model = load_model(path).unwrap();
        match from_onnx(&model, &shapes_of(&exp["inputs"])) {
            Err(e) => failures.push(format!("{path}: {e}")),
            // The light graphs declare their weights as graph inputs (no stored data).
            Ok((m, _params)) => {
                let got = output_shapes(&m);
                let want = expected_shapes(&exp["outputs"]);
                if got != want {
                    failures.push(format!("{path}: shapes {got:?}, onnx {want:?}"));
                }
                seen += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(seen >= 9, "only {seen} zoo models found");
}
