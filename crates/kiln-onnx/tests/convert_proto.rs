//! The converter on models built in Rust with the generated prost types (no Python needed):
//! parameters from initializers, shape folding, the unsupported-op error and node-labelled
//! type errors.

mod proto_common;

use kiln_onnx::proto::{self, tensor_proto, GraphProto, NodeProto, TensorProto};
use kiln_onnx::{from_onnx, from_proto, parse_input_shapes, OnnxError};
use proto_common::{model_proto, untyped, value_info};

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    proto_common::node(op, name, inputs, outputs, vec![])
}

fn ints(name: &str, dims: Vec<i64>, v: Vec<i64>) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims,
        data_type: Some(tensor_proto::DataType::Int64 as i32),
        int64_data: v,
        ..Default::default()
    }
}

fn floats(name: &str, dims: Vec<i64>) -> TensorProto {
    let n: i64 = dims.iter().product();
    TensorProto {
        name: Some(name.into()),
        dims,
        data_type: Some(tensor_proto::DataType::Float as i32),
        float_data: (0..n).map(|i| i as f32 * 0.01).collect(),
        ..Default::default()
    }
}

fn model(nodes: Vec<NodeProto>, init: Vec<TensorProto>, input: &[&str]) -> kiln_onnx::Model {
    let graph = GraphProto {
        name: Some("g".into()),
        node: nodes,
        initializer: init,
        input: vec![value_info("x", input)],
        output: vec![untyped("y")],
        ..Default::default()
    };
    let m = model_proto(8, "", 13, graph);
    from_proto(&m, "<test>".into()).unwrap()
}

#[test]
fn shape_chain_folds_and_weights_become_params() {
    // y = MatMul(Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])), W)
    let m = model(
        vec![
            node("Shape", "shape", &["x"], &["s"]),
            node("Gather", "gather", &["s", "zero"], &["n"]),
            node("Unsqueeze", "unsqueeze", &["n", "axes"], &["n1"]),
            node("Concat", "concat", &["n1", "minus1"], &["shp"]),
            node("Reshape", "reshape", &["x", "shp"], &["r"]),
            node("MatMul", "matmul", &["r", "W"], &["y"]),
        ],
        vec![
            ints("zero", vec![], vec![0]),
            ints("axes", vec![1], vec![0]),
            ints("minus1", vec![1], vec![-1]),
            floats("W", vec![72, 5]),
            floats("unused", vec![3]), // not read by any node: not a parameter
        ],
        &["N", "3", "4", "6"],
    );
    // A Concat without an axis attribute is invalid ONNX; give it one.
    let mut m = m;
    for n in &mut m.graph.nodes {
        if n.op_type == "Concat" {
            n.attributes
                .push(("axis".into(), kiln_onnx::AttrValue::Int(0)));
        }
    }
    let (module, params) = from_onnx(&m, &parse_input_shapes("x=2,3,4,6").unwrap()).unwrap();
    assert_eq!(params.len(), 1);
    assert_eq!(params[0].0, "W");
    assert_eq!(params[0].1.shape(), [72, 5]);
    let main = module.main().unwrap();
    let names: Vec<&str> = main.params().iter().map(|v| v.name()).collect();
    assert_eq!(names, ["x", "W"]);
    assert_eq!(main.body().ty().unwrap().shape(), [2, 5]);
    let text = module.to_string();
    assert!(
        !text.contains("take") && !text.contains("concatenate"),
        "{text}"
    );
    assert!(text.contains("newshape=[2, -1]"), "{text}");
}

#[test]
fn type_errors_name_the_node() {
    let m = model(
        vec![node("MatMul", "bad_matmul", &["x", "W"], &["y"])],
        vec![floats("W", vec![4, 5])],
        &["2", "3"],
    );
    let Err(err) = from_onnx(&m, &Default::default()) else {
        panic!("a mismatched MatMul converted");
    };
    assert!(matches!(err, OnnxError::Convert { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("'bad_matmul'") && msg.contains("MatMul") && msg.contains("nn.matmul"),
        "{msg}"
    );
}

#[test]
fn unsupported_ops_are_listed_once() {
    let m = model(
        vec![
            node("ImageDecoder", "h1", &["x"], &["a"]),
            node("ImageDecoder", "h2", &["a"], &["b"]),
            node("Relu", "r", &["b"], &["y"]),
        ],
        vec![],
        &["2", "3"],
    );
    let Err(OnnxError::UnsupportedOps(ops)) = from_onnx(&m, &Default::default()) else {
        panic!("expected UnsupportedOps");
    };
    assert_eq!(ops.ops.len(), 1);
    assert_eq!(ops.ops[0].op_type, "ImageDecoder");
    assert_eq!(ops.ops[0].count, 2);
    assert_eq!(ops.ops[0].first_node, "'h1'");
}

#[test]
fn supported_ops_cover_the_issue_list() {
    let ops = kiln_onnx::supported_ops();
    for op in [
        "Conv",
        "ConvTranspose",
        "Gemm",
        "MatMul",
        "BatchNormalization",
        "Clip",
        "Softmax",
        "LayerNormalization",
        "ReduceMean",
        "Reshape",
        "Slice",
        "Resize",
        "Shape",
        "ConstantOfShape",
        "Range",
        "Constant",
        "LRN",
    ] {
        assert!(ops.contains(&op), "{op} missing from {ops:?}");
    }
}

/// The message of the error `m` converts to (a panic fails the test).
fn conversion_error(m: &kiln_onnx::Model) -> String {
    match from_onnx(m, &Default::default()) {
        Ok(_) => panic!("the model converted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn shapes_too_large_to_index_are_errors() {
    // Tile whose repeats overflow the output extent.
    let m = model(
        vec![node("Tile", "big_tile", &["x", "r"], &["y"])],
        vec![ints("r", vec![2], vec![1 << 62, 4])],
        &["2", "3"],
    );
    let msg = conversion_error(&m);
    assert!(
        msg.contains("'big_tile'") && msg.contains("repeats"),
        "{msg}"
    );
    // Reshape to a shape whose element count overflows.
    let m = model(
        vec![node("Reshape", "big_reshape", &["x", "s"], &["y"])],
        vec![ints("s", vec![3], vec![1 << 40, 1 << 40, -1])],
        &["2", "3"],
    );
    let msg = conversion_error(&m);
    assert!(
        msg.contains("'big_reshape'") && msg.contains("too many"),
        "{msg}"
    );
    // An input of more elements than a flat index can address.
    let m = model(
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![],
        &["4611686018427387904", "4"],
    );
    let msg = conversion_error(&m);
    assert!(msg.contains("elements"), "{msg}");
}

#[test]
fn a_constant_node_without_output_is_an_error() {
    let mut c = node("Constant", "no_output", &[], &[]);
    c.attribute.push(proto::AttributeProto {
        name: Some("value".into()),
        r#type: Some(proto::attribute_proto::AttributeType::Tensor as i32),
        t: Some(ints("v", vec![1], vec![3])),
        ..Default::default()
    });
    let m = model(
        vec![c, node("Relu", "relu", &["x"], &["y"])],
        vec![],
        &["2"],
    );
    let msg = conversion_error(&m);
    assert!(
        msg.contains("'no_output'") && msg.contains("no output"),
        "{msg}"
    );
}

#[test]
fn large_fills_are_not_materialized_at_import() {
    // ConstantOfShape of 2^40 elements: typed as a run-time broadcast, not allocated (the
    // conversion would abort on the allocation otherwise).
    let m = model(
        vec![
            node("ConstantOfShape", "fill", &["s"], &["f"]),
            node("Add", "add", &["x", "f"], &["y"]),
        ],
        vec![ints("s", vec![2], vec![1 << 20, 1 << 20])],
        &["1", "1"],
    );
    let (module, _) = from_onnx(&m, &Default::default()).expect("the fill converts");
    let ty = module.main().unwrap().body().ty().unwrap();
    assert_eq!(ty.as_tensor().unwrap().0, &[1 << 20, 1 << 20]);
}

#[test]
fn a_huge_range_is_an_error() {
    let m = model(
        vec![
            node("Range", "range", &["a", "b", "c"], &["r"]),
            node("Relu", "relu", &["x"], &["y"]),
        ],
        vec![
            ints("a", vec![], vec![0]),
            ints("b", vec![], vec![i64::MAX]),
            ints("c", vec![], vec![1]),
        ],
        &["2"],
    );
    let msg = conversion_error(&m);
    assert!(msg.contains("'range'") && msg.contains("elements"), "{msg}");
}

#[test]
fn a_missing_shape_input_is_named() {
    let m = model(
        vec![node("Compress", "compress", &["x"], &["y"])],
        vec![],
        &["4"],
    );
    let msg = conversion_error(&m);
    assert!(
        msg.contains("'compress'") && msg.contains("input #1 is required"),
        "{msg}"
    );
}

#[test]
fn one_dimensional_convolutions_and_pools_run_along_a_row() {
    // A 1-D Conv (stride 2, padded), MaxPool and ConvTranspose over [1, 4, 20]: each a 2-D op
    // over one row [N, C, 1, L], so that the length is the width the schedules vectorize.
    use proto_common::{int_attr, ints_attr};
    let conv = proto_common::node(
        "Conv",
        "conv",
        &["x", "w"],
        &["c"],
        vec![
            ints_attr("kernel_shape", &[3]),
            ints_attr("strides", &[2]),
            ints_attr("pads", &[1, 1]),
        ],
    );
    let pool = proto_common::node(
        "MaxPool",
        "pool",
        &["c"],
        &["p"],
        vec![ints_attr("kernel_shape", &[2]), ints_attr("strides", &[2])],
    );
    let up = proto_common::node(
        "ConvTranspose",
        "up",
        &["p", "wt"],
        &["y"],
        vec![
            ints_attr("kernel_shape", &[4]),
            ints_attr("strides", &[2]),
            ints_attr("pads", &[1, 1]),
            int_attr("group", 1),
        ],
    );
    let m = model(
        vec![conv, pool, up],
        vec![floats("w", vec![6, 4, 3]), floats("wt", vec![6, 2, 4])],
        &["1", "4", "20"],
    );
    let (module, _) = from_onnx(&m, &Default::default()).unwrap();
    assert_eq!(
        module.main().unwrap().body().ty().unwrap().shape(),
        [1, 2, 10]
    );
    let text = module.to_string();
    for want in [
        "newshape=[1, 4, 1, 20]",
        "newshape=[6, 4, 1, 3]",
        "strides=[1, 2], padding=[0, 1, 0, 1]",
        "pool_size=[1, 2]",
        "newshape=[6, 2, 1, 4]",
    ] {
        assert!(text.contains(want), "{want} not in {text}");
    }
}
