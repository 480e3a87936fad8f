//! kiln-onnx against the `onnx` Python package: small models that `tests/onnx/make_models.py`
//! builds at test time, and the real model graphs shipped in the onnx wheel
//! (`onnx/backend/test/data/light/`). Each loaded model is compared with what the onnx package
//! reports for the same file. Skipped, with a message, when the venv has no `onnx`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kiln_testing::process::{python_with, run_ok};

use kiln_onnx::{load_model, parse_input_shapes, Dim, Model, OnnxError};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's Python if it can import onnx (`KILN_PYTHON` overrides the path).
fn python() -> Option<PathBuf> {
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    PY.get_or_init(|| python_with(&["onnx", "numpy"])).clone()
}

fn run_python(args: &[&str]) -> String {
    let py = python().expect("checked by caller");
    run_ok(Command::new(&py).args(args), &format!("python {args:?}"))
}

/// The directory of models made once per test run, and their expected summaries.
fn made() -> Option<&'static (PathBuf, Value)> {
    static MADE: OnceLock<Option<(PathBuf, Value)>> = OnceLock::new();
    MADE.get_or_init(|| {
        python()?;
        // One directory per test process under cargo's scratch space; older ones are removed.
        let parent = Path::new(env!("CARGO_TARGET_TMPDIR")).join("onnx-models");
        for old in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let age = old
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok());
            if age.is_some_and(|a| a.as_secs() > 3600) {
                let _ = std::fs::remove_dir_all(old.path());
            }
        }
        let dir = parent.join(std::process::id().to_string());
        let script = root().join("tests/onnx/make_models.py");
        run_python(&[script.to_str().unwrap(), dir.to_str().unwrap()]);
        let expected = std::fs::read_to_string(dir.join("expected.json")).unwrap();
        Some((dir, serde_json::from_str(&expected).unwrap()))
    })
    .as_ref()
}

fn made_path(name: &str) -> Option<PathBuf> {
    made().map(|(dir, _)| dir.join(format!("{name}.onnx")))
}

fn as_usize_vec(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

fn as_f64_vec(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_f64().unwrap())
        .collect()
}

/// Compares kiln-onnx's view of a model with the onnx package's summary of it.
fn compare(m: &Model, exp: &Value, file_order: bool) {
    let ctx = &m.source;
    assert_eq!(
        m.ir_version,
        exp["ir_version"].as_i64().unwrap(),
        "{ctx}: ir_version"
    );
    for (domain, v) in exp["opsets"].as_object().unwrap() {
        assert_eq!(
            m.opsets.get(domain).copied(),
            v.as_i64(),
            "{ctx}: opset of '{domain}'"
        );
    }
    // Nodes: same set (and same order when the file is topologically sorted).
    let exp_nodes = exp["nodes"].as_array().unwrap();
    assert_eq!(m.graph.nodes.len(), exp_nodes.len(), "{ctx}: node count");
    let key = |name: &str, op: &str, ins: Vec<String>, outs: Vec<String>| {
        format!("{name}|{op}|{ins:?}|{outs:?}")
    };
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let mut ours: Vec<String> = m
        .graph
        .nodes
        .iter()
        .map(|n| key(&n.name, &n.op_type, n.inputs.clone(), n.outputs.clone()))
        .collect();
    let mut theirs: Vec<String> = exp_nodes
        .iter()
        .map(|n| {
            key(
                n["name"].as_str().unwrap(),
                n["op_type"].as_str().unwrap(),
                strs(&n["inputs"]),
                strs(&n["outputs"]),
            )
        })
        .collect();
    if !file_order {
        ours.sort();
        theirs.sort();
    }
    assert_eq!(ours, theirs, "{ctx}: nodes");
    let counts = m.graph.op_counts();
    for (op, c) in exp["op_counts"].as_object().unwrap() {
        assert_eq!(
            counts.get(op).copied(),
            c.as_u64().map(|c| c as usize),
            "{ctx}: count of {op}"
        );
    }
    assert_eq!(
        counts.len(),
        exp["op_counts"].as_object().unwrap().len(),
        "{ctx}: op types"
    );
    // Initializers: names, shapes, types, values.
    let inits = exp["initializers"].as_object().unwrap();
    assert_eq!(
        m.graph.initializers().len(),
        inits.len(),
        "{ctx}: initializer count"
    );
    for (name, e) in inits {
        let t = m
            .graph
            .initializer(name)
            .unwrap_or_else(|| panic!("{ctx}: no initializer {name}"));
        assert_eq!(t.dims, as_usize_vec(&e["dims"]), "{ctx}: dims of {name}");
        assert_eq!(
            t.dtype().onnx_code() as i64,
            e["data_type"].as_i64().unwrap(),
            "{ctx}: type of {name}"
        );
        let values = t.to_f64_vec();
        let sum: f64 = values.iter().sum();
        let want = e["sum"].as_f64().unwrap();
        assert!(
            (sum - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{ctx}: sum of {name}: {sum} vs {want}"
        );
        if let Some(v) = e.get("values") {
            // serde_json may parse a decimal 1 ulp off the nearest double.
            let want = as_f64_vec(v);
            let close = values.len() == want.len()
                && values
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| (a - b).abs() <= 1e-15 * b.abs());
            assert!(close, "{ctx}: values of {name}: {values:?} vs {want:?}");
        }
    }
    // Runtime inputs and outputs.
    let inputs = exp["inputs"].as_array().unwrap();
    assert_eq!(m.graph.inputs.len(), inputs.len(), "{ctx}: input count");
    for (ours, e) in m.graph.inputs.iter().zip(inputs) {
        assert_eq!(ours.name, e["name"].as_str().unwrap(), "{ctx}: input name");
        assert_eq!(
            ours.elem_type as i64,
            e["elem_type"].as_i64().unwrap(),
            "{ctx}: input type"
        );
        let dims: Option<Vec<Dim>> = e["dims"].as_array().map(|ds| {
            ds.iter()
                .map(|d| match d {
                    Value::Number(n) => Dim::Fixed(n.as_u64().unwrap() as usize),
                    Value::String(s) => Dim::Symbolic(s.clone()),
                    _ => Dim::Unknown,
                })
                .collect()
        });
        assert_eq!(ours.dims, dims, "{ctx}: dims of input {}", ours.name);
    }
    let outs: Vec<&str> = m.graph.outputs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(outs, strs(&exp["outputs"]), "{ctx}: outputs");
    // Constant nodes as tensors.
    let consts = exp["constants"].as_object().unwrap();
    assert_eq!(
        m.graph.constant_nodes().len(),
        consts.len(),
        "{ctx}: constant count"
    );
    for (name, e) in consts {
        let t = m
            .graph
            .constant(name)
            .unwrap_or_else(|| panic!("{ctx}: no constant {name}"));
        assert_eq!(
            t.dims,
            as_usize_vec(&e["dims"]),
            "{ctx}: dims of constant {name}"
        );
        assert_eq!(
            t.to_f64_vec(),
            as_f64_vec(&e["values"]),
            "{ctx}: constant {name}"
        );
    }
}

#[test]
fn made_models_match_onnx() {
    let Some((dir, expected)) = made() else {
        return;
    };
    for (name, exp) in expected.as_object().unwrap() {
        let m = load_model(dir.join(format!("{name}.onnx"))).unwrap();
        compare(&m, exp, name != "unsorted");
    }
    // The unsorted chain comes back in dependency order.
    let m = load_model(dir.join("unsorted.onnx")).unwrap();
    let names: Vec<&str> = m.graph.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    // Attributes with defaults on a real node.
    let m = load_model(dir.join("conv_relu.onnx")).unwrap();
    let conv = m.graph.nodes.iter().find(|n| n.op_type == "Conv").unwrap();
    assert_eq!(conv.attr_ints("pads", &[0; 4]).unwrap(), [1, 1, 1, 1]);
    assert_eq!(conv.attr_ints("dilations", &[1, 1]).unwrap(), [1, 1]);
    assert_eq!(conv.attr_i("group", 1).unwrap(), 1);
    assert_eq!(conv.attr_s("auto_pad", "NOTSET").unwrap(), "NOTSET");
    assert!(conv
        .attr_f("pads", 0.0)
        .unwrap_err()
        .to_string()
        .contains("'conv' (Conv): attribute 'pads' should be FLOAT but is INTS"));
    assert_eq!(
        m.graph.constant("shape").unwrap().as_i64(),
        Some(&[0, -1][..])
    );
    assert!(
        !m.graph.value_info.is_empty(),
        "shape inference wrote value_info"
    );
}

#[test]
fn light_models_match_onnx() {
    if python().is_none() {
        return;
    }
    let dir = run_python(&[
        "-c",
        "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/light'))",
    ]);
    let mut files: Vec<String> = std::fs::read_dir(dir.trim())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    files.sort();
    assert!(files.len() >= 9, "light models: {files:?}");
    let script = root().join("tests/onnx/make_models.py");
    let mut args = vec![script.to_str().unwrap(), "--summarize"];
    args.extend(files.iter().map(String::as_str));
    let summaries: Value = serde_json::from_str(&run_python(&args)).unwrap();
    for f in &files {
        let m = load_model(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        compare(&m, &summaries[f.as_str()], true);
        // Every light model has a static 1x3x224x224 image input and binds without flags.
        let bound = m.graph.bind_input_shapes(&Default::default()).unwrap();
        assert!(
            bound.inputs.iter().any(|i| i.shape == [1, 3, 224, 224]),
            "{f}: {bound:?}"
        );
    }
}

fn load_err(name: &str) -> Option<String> {
    let path = made_path(name)?;
    Some(load_model(&path).map(|_| ()).unwrap_err().to_string())
}

#[test]
fn bad_files_give_clear_errors() {
    let Some(dir) = made().map(|(d, _)| d) else {
        return;
    };
    let e = load_err("garbage").unwrap();
    assert!(
        e.contains("garbage.onnx") && e.contains("not a valid ONNX model"),
        "{e}"
    );
    let e = load_err("truncated").unwrap();
    assert!(
        e.contains("truncated.onnx") && e.contains("protobuf decode failed"),
        "{e}"
    );
    let e = load_err("opset0").unwrap();
    assert!(
        e.contains("opset0.onnx") && e.contains("opset 0") && e.contains("1-25"),
        "{e}"
    );
    let e = load_err("opset26").unwrap();
    assert!(e.contains("opset 26") && e.contains("1-25"), "{e}");
    let e = load_err("cycle").unwrap();
    assert_eq!(
        e,
        "the graph has a cycle among 2 node(s): 'add' (Add), 'relu' (Relu)"
    );
    let e = load_err("undefined").unwrap();
    assert_eq!(
        e,
        "node 'add' (Add) reads 'w', which no graph input, initializer or node output defines"
    );
    let e = load_err("duplicate").unwrap();
    assert_eq!(
        e,
        "value 'y' is defined twice: by node 'r1' (Relu) and by node 'r2' (Neg)"
    );
    let e = load_err("external").unwrap();
    assert!(
        e.contains("external data") && e.contains("external.bin"),
        "{e}"
    );
    let e = load_model(dir.join("missing.onnx"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot read ONNX model") && e.contains("missing.onnx"),
        "{e}"
    );
}

#[test]
fn unsupported_ops_are_listed_in_one_error() {
    let Some(path) = made_path("unsupported") else {
        return;
    };
    let m = load_model(&path).unwrap();
    let err = m.check_supported_ops(["Relu"]).unwrap_err();
    let OnnxError::UnsupportedOps(report) = &err else {
        panic!("{err}")
    };
    let summary: Vec<(&str, usize, &str)> = report
        .ops
        .iter()
        .map(|o| (o.op_type.as_str(), o.count, o.first_node.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("com.example.Foo", 2, "'foo_1'"),
            ("Sin", 2, "'sin_1'"),
            ("Einsum", 1, "<unnamed Einsum producing 'e1'>"),
        ]
    );
    let text = err.to_string();
    let expected = format!(
        "'{}': 3 unsupported operator type(s) in 5 node(s) (opset 13):\n\
         \x20 com.example.Foo     2 node(s), first: 'foo_1'\n\
         \x20 Sin                 2 node(s), first: 'sin_1'\n\
         \x20 Einsum              1 node(s), first: <unnamed Einsum producing 'e1'>",
        path.display()
    );
    assert_eq!(text, expected);
    m.check_supported_ops(["Relu", "Sin", "Einsum", "com.example.Foo"])
        .unwrap();
}

#[test]
fn input_shapes_bind_symbolic_dims() {
    let Some(path) = made_path("symbolic") else {
        return;
    };
    let g = load_model(&path).unwrap().graph;
    let bound = g
        .bind_input_shapes(&parse_input_shapes("a=2,4;b=2,7").unwrap())
        .unwrap();
    assert_eq!(bound.inputs[0].shape, [2, 4]);
    assert_eq!(bound.inputs[1].shape, [2, 7]);
    assert_eq!(bound.inputs[1].dtype, kiln_onnx::DataType::Int64);
    assert_eq!(bound.symbols["seq"], 7);
    let out = &g.outputs[1];
    assert_eq!(bound.resolve(out.dims.as_ref().unwrap()), Some(vec![2, 7]));

    let err = |spec: &str| {
        g.bind_input_shapes(&parse_input_shapes(spec).unwrap())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err("a=2,4"),
        "input 'b': dimension 1 ('seq') is not known at compile time; give it with --input-shape b=..."
    );
    assert!(err("").contains("input 'a': dimension 0 ('batch')"));
    assert!(err("a=2,4;b=3,7").contains("'batch' is given as 2 and as 3"));
    assert!(err("a=2,5;b=2,7").contains("dimension 1 is 4 in the model, but 5 was given"));
    assert!(err("a=2,4,1;b=2,7").contains("rank 2"));
    assert!(err("c=1").contains("no input 'c' (its inputs: a, b)"));
}
