//! Builders of ONNX protos for the tests that make models in Rust (no Python needed).
#![allow(dead_code)]

use kiln_onnx::proto::{
    self, tensor_proto, tensor_shape_proto, type_proto, AttributeProto, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, TypeProto, ValueInfoProto,
};

/// A tensor value of element type `ty` and shape `dims`; a dim that parses as an integer is
/// fixed, any other is symbolic.
pub fn typed_value_info<D: ToString>(
    name: &str,
    ty: tensor_proto::DataType,
    dims: &[D],
) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| {
            let d = d.to_string();
            tensor_shape_proto::Dimension {
                value: Some(match d.parse::<i64>() {
                    Ok(n) => tensor_shape_proto::dimension::Value::DimValue(n),
                    Err(_) => tensor_shape_proto::dimension::Value::DimParam(d),
                }),
                ..Default::default()
            }
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(ty as i32),
                shape: Some(proto::TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A float32 tensor value of shape `dims` (see [`typed_value_info`]).
pub fn value_info(name: &str, dims: &[&str]) -> ValueInfoProto {
    typed_value_info(name, tensor_proto::DataType::Float, dims)
}

/// A value with a name only (no type): a graph output left for inference.
pub fn untyped(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        ..Default::default()
    }
}

/// A node of `op` named `name`.
pub fn node(
    op: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

/// A model of IR version `ir_version` importing opset `opset` of `domain` around `graph`.
pub fn model_proto(ir_version: i64, domain: &str, opset: i64, graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: Some(ir_version),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(domain.into()),
            version: Some(opset),
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

/// An `INT` attribute.
pub fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

/// An `INTS` attribute.
pub fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}
