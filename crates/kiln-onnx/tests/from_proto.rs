//! kiln-onnx on models built in Rust with the generated prost types (no Python needed):
//! decode errors, opset checks, Constant nodes, a round trip through bytes.

mod proto_common;

use kiln_onnx::proto::{self, tensor_proto, AttributeProto, GraphProto, ModelProto, TensorProto};
use kiln_onnx::{from_bytes, DataType, OnnxError};
use prost::Message;
use proto_common::{model_proto, node, value_info};

fn model(opset: i64) -> ModelProto {
    let k = TensorProto {
        name: Some("k".into()),
        dims: vec![2],
        data_type: Some(tensor_proto::DataType::Float as i32),
        float_data: vec![2.0, 3.0],
        ..Default::default()
    };
    let cst = AttributeProto {
        name: Some("value_ints".into()),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ints: vec![1, 2],
        ..Default::default()
    };
    model_proto(
        9,
        "ai.onnx",
        opset,
        GraphProto {
            name: Some("g".into()),
            node: vec![
                node("Constant", "c", &[], &["shape"], vec![cst]),
                node("Mul", "mul", &["x", "k"], &["y"], vec![]),
            ],
            initializer: vec![k],
            input: vec![value_info("x", &["batch", "2"])],
            output: vec![value_info("y", &["batch", "2"])],
            ..Default::default()
        },
    )
}

#[test]
fn round_trip_through_bytes() {
    let m = from_bytes(&model(17).encode_to_vec()).unwrap();
    assert_eq!(m.opset(), 17);
    assert_eq!(m.ir_version, 9);
    assert_eq!(m.source, "<bytes>");
    let g = &m.graph;
    assert_eq!(g.nodes.len(), 2);
    assert_eq!(g.initializer("k").unwrap().as_f32(), Some(&[2.0, 3.0][..]));
    let shape = g.constant("shape").unwrap();
    assert_eq!(
        (shape.dtype(), shape.dims.clone()),
        (DataType::Int64, vec![2])
    );
    assert!(g.initializer("shape").is_none());
    assert_eq!(
        g.inputs[0].dims.as_ref().unwrap()[0],
        kiln_onnx::Dim::Symbolic("batch".into())
    );
}

#[test]
fn garbage_and_truncated_bytes() {
    let e = from_bytes(b"\xff\xff\xff\xff\xff garbage").unwrap_err();
    assert!(matches!(e, OnnxError::Decode { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with("'<bytes>' is not a valid ONNX model (protobuf decode failed:"),
        "{e}"
    );
    let bytes = model(13).encode_to_vec();
    for cut in [1, bytes.len() / 3, bytes.len() - 1] {
        let e = from_bytes(&bytes[..cut]).unwrap_err();
        assert!(
            matches!(e, OnnxError::Decode { .. } | OnnxError::MissingGraph { .. }),
            "cut {cut}: {e}"
        );
    }
    let e = from_bytes(&[]).unwrap_err().to_string();
    assert_eq!(e, "'<bytes>': the ONNX model has no graph");
}

#[test]
fn opset_range_is_checked() {
    for (v, ok) in [(0, false), (1, true), (7, true), (25, true), (26, false)] {
        let r = from_bytes(&model(v).encode_to_vec());
        assert_eq!(r.is_ok(), ok, "opset {v}");
        if !ok {
            let e = r.unwrap_err().to_string();
            assert!(
                e.contains(&format!("opset {v}")) && e.contains("1-25"),
                "{e}"
            );
        }
    }
    let mut m = model(13);
    m.opset_import[0].domain = Some("com.other".into());
    let e = from_bytes(&m.encode_to_vec()).unwrap_err().to_string();
    assert!(
        e.contains("declares no opset for the default domain"),
        "{e}"
    );
}

#[test]
fn bad_constant_and_attribute_types() {
    let mut m = model(13);
    let g = m.graph.as_mut().unwrap();
    g.node[0].attribute[0] = AttributeProto {
        name: Some("value_string".into()),
        r#type: Some(proto::attribute_proto::AttributeType::String as i32),
        s: Some(b"hi".to_vec()),
        ..Default::default()
    };
    let e = from_bytes(&m.encode_to_vec()).unwrap_err().to_string();
    assert!(
        e.starts_with("node 'c' (Constant): attribute 'value_string' is invalid"),
        "{e}"
    );
}
