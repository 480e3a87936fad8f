//! Models the ONNX fuzzer (`scripts/fuzz_onnx.sh`) found to crash the importer, rebuilt in
//! Rust: each must convert to a clear error naming the node, the operator and the attribute
//! or input at fault (never a panic, an abort or a runaway allocation); beside each, a valid
//! variant of the same node converts to the shape ONNX gives it.

mod proto_common;

use kiln_onnx::proto::{
    attribute_proto::AttributeType, tensor_proto, AttributeProto, GraphProto, TensorProto,
};
use kiln_onnx::{from_onnx, from_proto, Model};
use proto_common::{int_attr, model_proto, node, typed_value_info, untyped};

fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn str_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::String as i32),
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    }
}

/// A model of one node `op` named `name` from input `x` (`ty`, `dims`) to output `y`.
fn one_node(
    op: &str,
    name: &str,
    ty: tensor_proto::DataType,
    dims: &[i64],
    attrs: Vec<AttributeProto>,
) -> Model {
    let graph = GraphProto {
        name: Some("g".into()),
        node: vec![node(op, name, &["x"], &["y"], attrs)],
        input: vec![typed_value_info("x", ty, dims)],
        output: vec![untyped("y")],
        ..Default::default()
    };
    let mut m = model_proto(8, "", 13, graph);
    m.opset_import.push(kiln_onnx::proto::OperatorSetIdProto {
        domain: Some("ai.onnx.ml".into()),
        version: Some(3),
    });
    from_proto(&m, "<test>".into()).unwrap()
}

/// The conversion error of `m` as text (the test fails if `m` converts).
fn conversion_error(m: &Model) -> String {
    match from_onnx(m, &Default::default()) {
        Ok(_) => panic!("the model converted"),
        Err(e) => e.to_string(),
    }
}

/// A TfIdfVectorizer over int64 tokens `[2, 6]` with a pool of two unigrams and one bigram.
fn tfidf(indexes: &[i64]) -> Model {
    one_node(
        "TfIdfVectorizer",
        "tfidf",
        tensor_proto::DataType::Int64,
        &[2, 6],
        vec![
            ints_attr("pool_int64s", &[3, 5, 3, 5]),
            ints_attr("ngram_counts", &[0, 2]),
            ints_attr("ngram_indexes", indexes),
            int_attr("min_gram_length", 1),
            int_attr("max_gram_length", 2),
            int_attr("max_skip_count", 0),
            str_attr("mode", "TF"),
        ],
    )
}

#[test]
fn tfidf_output_columns_are_bounded() {
    // The fuzzer's model: an `ngram_indexes` entry near i64::MAX asked for that many output
    // columns, materialized as constants.
    let msg = conversion_error(&tfidf(&[0, 1, 1 << 60]));
    assert!(
        msg.contains("'tfidf'") && msg.contains("TfIdfVectorizer") && msg.contains("ngram_indexes"),
        "{msg}"
    );
    let msg = conversion_error(&tfidf(&[0, -4, 1]));
    assert!(
        msg.contains("'tfidf'") && msg.contains("ngram_indexes") && msg.contains("-4"),
        "{msg}"
    );
    // Column count max(ngram_indexes) + 1, per row.
    let (module, _) = from_onnx(&tfidf(&[4, 1, 2]), &Default::default()).unwrap();
    assert_eq!(module.main().unwrap().body().ty().unwrap().shape(), [2, 5]);
}

/// `op(Shape(x)[start:end], i)` of a float `x` `[3, 4]`, for Gather (`i` the scalar 0),
/// GatherElements (`i` = `[0]`) and GatherND (`i` = `[[0]]`).
fn gather_from_shape_slice(op: &str, start: i64, end: i64) -> Model {
    let dims = match op {
        "Gather" => vec![],
        "GatherElements" => vec![1],
        _ => vec![1, 1],
    };
    let graph = GraphProto {
        name: Some("g".into()),
        node: vec![
            node(
                "Shape",
                "shape",
                &["x"],
                &["s"],
                vec![int_attr("start", start), int_attr("end", end)],
            ),
            node(op, "gather", &["s", "i"], &["y"], vec![]),
        ],
        initializer: vec![TensorProto {
            name: Some("i".into()),
            dims,
            data_type: Some(tensor_proto::DataType::Int64 as i32),
            int64_data: vec![0],
            ..Default::default()
        }],
        input: vec![typed_value_info(
            "x",
            tensor_proto::DataType::Float,
            &[3, 4],
        )],
        output: vec![untyped("y")],
        ..Default::default()
    };
    from_proto(&model_proto(8, "", 13, graph), "<test>".into()).unwrap()
}

#[test]
fn gathers_from_an_empty_axis_are_errors() {
    // The fuzzer's model: a Shape slice with `end` before `start` is empty, and Gather's
    // folding clamped index 0 into an axis of extent 0. GatherElements and GatherND share the
    // clamp.
    for (op, want) in [("Gather", 0), ("GatherElements", 1), ("GatherND", 1)] {
        let msg = conversion_error(&gather_from_shape_slice(op, 1, 0));
        assert!(
            msg.contains("'gather'") && msg.contains(op) && msg.contains("empty"),
            "{op}: {msg}"
        );
        // Index 0 of Shape(x)[1:2] is x's extent 4.
        let m = gather_from_shape_slice(op, 1, 2);
        let (module, _) = from_onnx(&m, &Default::default()).unwrap();
        let body = module.main().unwrap().body().clone();
        assert_eq!(body.ty().unwrap().shape().len(), want, "{op}");
        let folded = body.as_constant().expect("a gather from a shape folds");
        assert_eq!(folded.to_f64_vec().unwrap(), [4.0], "{op}");
    }
}
