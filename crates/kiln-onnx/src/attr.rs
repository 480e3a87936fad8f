//! Node attributes: typed values and accessors with defaults.

use crate::error::{AttrProblem, OnnxError, Result};
use crate::model::Node;
use crate::proto::{attribute_proto::AttributeType, AttributeProto, GraphProto};
use crate::tensor::Tensor;

/// The value of one node attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// `FLOAT`.
    Float(f32),
    /// `INT`.
    Int(i64),
    /// `STRING` (bytes; ONNX strings are usually UTF-8).
    String(Vec<u8>),
    /// `TENSOR`.
    Tensor(Tensor),
    /// `GRAPH` (a subgraph of If/Loop/Scan, kept as the raw message).
    Graph(Box<GraphProto>),
    /// `FLOATS`.
    Floats(Vec<f32>),
    /// `INTS`.
    Ints(Vec<i64>),
    /// `STRINGS`.
    Strings(Vec<Vec<u8>>),
    /// `TENSORS`.
    Tensors(Vec<Tensor>),
    /// `GRAPHS`.
    Graphs(Vec<GraphProto>),
    /// A kind Kiln keeps only by name (`SPARSE_TENSOR`, `TYPE_PROTO` and their lists).
    Other(&'static str),
}

impl AttrValue {
    /// ONNX's name for this attribute type (`INT`, `FLOATS`...).
    pub fn type_name(&self) -> &'static str {
        match self {
            AttrValue::Float(_) => "FLOAT",
            AttrValue::Int(_) => "INT",
            AttrValue::String(_) => "STRING",
            AttrValue::Tensor(_) => "TENSOR",
            AttrValue::Graph(_) => "GRAPH",
            AttrValue::Floats(_) => "FLOATS",
            AttrValue::Ints(_) => "INTS",
            AttrValue::Strings(_) => "STRINGS",
            AttrValue::Tensors(_) => "TENSORS",
            AttrValue::Graphs(_) => "GRAPHS",
            AttrValue::Other(name) => name,
        }
    }

    /// Decodes an `AttributeProto`. Old models leave `type` unset; then the type is the one
    /// field that is filled. `node` labels errors.
    pub(crate) fn from_proto(a: &AttributeProto, node: &str) -> Result<AttrValue> {
        let ty = match a.r#type() {
            AttributeType::Undefined => infer_type(a),
            t => t,
        };
        let tensor_name = |i: Option<usize>| match i {
            Some(i) => format!("{node}.{}[{i}]", a.name()),
            None => format!("{node}.{}", a.name()),
        };
        Ok(match ty {
            AttributeType::Float => AttrValue::Float(a.f()),
            AttributeType::Int => AttrValue::Int(a.i()),
            AttributeType::String => AttrValue::String(a.s().to_vec()),
            AttributeType::Tensor => {
                let t = a.t.as_ref().ok_or_else(|| OnnxError::Tensor {
                    tensor: tensor_name(None),
                    message: "TENSOR attribute without a tensor".into(),
                })?;
                AttrValue::Tensor(Tensor::from_proto(t, &tensor_name(None))?)
            }
            AttributeType::Graph => AttrValue::Graph(Box::new(a.g.clone().unwrap_or_default())),
            AttributeType::Floats => AttrValue::Floats(a.floats.clone()),
            AttributeType::Ints => AttrValue::Ints(a.ints.clone()),
            AttributeType::Strings => AttrValue::Strings(a.strings.clone()),
            AttributeType::Tensors => AttrValue::Tensors(
                a.tensors
                    .iter()
                    .enumerate()
                    .map(|(i, t)| Tensor::from_proto(t, &tensor_name(Some(i))))
                    .collect::<Result<_>>()?,
            ),
            AttributeType::Graphs => AttrValue::Graphs(a.graphs.clone()),
            AttributeType::SparseTensor => AttrValue::Other("SPARSE_TENSOR"),
            AttributeType::SparseTensors => AttrValue::Other("SPARSE_TENSORS"),
            AttributeType::TypeProto => AttrValue::Other("TYPE_PROTO"),
            AttributeType::TypeProtos => AttrValue::Other("TYPE_PROTOS"),
            AttributeType::Undefined => AttrValue::Other("UNDEFINED"),
        })
    }
}

/// The type of an attribute whose `type` field is unset: the kind of the one filled field.
fn infer_type(a: &AttributeProto) -> AttributeType {
    if a.f.is_some() {
        AttributeType::Float
    } else if a.i.is_some() {
        AttributeType::Int
    } else if a.s.is_some() {
        AttributeType::String
    } else if a.t.is_some() {
        AttributeType::Tensor
    } else if a.g.is_some() {
        AttributeType::Graph
    } else if !a.floats.is_empty() {
        AttributeType::Floats
    } else if !a.ints.is_empty() {
        AttributeType::Ints
    } else if !a.strings.is_empty() {
        AttributeType::Strings
    } else if !a.tensors.is_empty() {
        AttributeType::Tensors
    } else if !a.graphs.is_empty() {
        AttributeType::Graphs
    } else if a.sparse_tensor.is_some() {
        AttributeType::SparseTensor
    } else {
        AttributeType::Undefined
    }
}

/// Generates a pair of accessors for one attribute type: `$opt` returns `Ok(None)` when the
/// attribute is absent, `$with_default` returns the default then.
macro_rules! accessors {
    ($(#[$doc:meta])* $opt:ident, $with_default:ident, $variant:ident, $ty:ty, $default:ty, $conv:expr, $dconv:expr) => {
        $(#[$doc])*
        ///
        /// `Ok(None)` when the attribute is absent; an error naming the node, op type and
        /// attribute when it has another type.
        pub fn $opt(&self, name: &str) -> Result<Option<$ty>> {
            match self.attr(name) {
                None => Ok(None),
                Some(AttrValue::$variant(v)) => Ok(Some($conv(v))),
                Some(other) => Err(self.wrong_type(name, stringify!($variant), other)),
            }
        }

        $(#[$doc])*
        ///
        /// Returns `default` when the attribute is absent; an error naming the node, op type and
        /// attribute when it has another type.
        pub fn $with_default(&self, name: &str, default: $default) -> Result<$ty> {
            Ok(self.$opt(name)?.unwrap_or_else(|| $dconv(default)))
        }
    };
}

impl Node {
    /// The attribute named `name`, if the node has it.
    pub fn attr(&self, name: &str) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// Whether the node has an attribute named `name`.
    pub fn has_attr(&self, name: &str) -> bool {
        self.attr(name).is_some()
    }

    /// The error for a required attribute that is absent.
    pub fn missing_attr(&self, name: &str) -> OnnxError {
        self.attr_error(name, AttrProblem::Missing)
    }

    /// An error about attribute `name` of this node (for converters that check values).
    pub fn attr_error(&self, name: &str, problem: AttrProblem) -> OnnxError {
        OnnxError::Attribute {
            node: self.label(),
            op_type: self.op_type.clone(),
            attr: name.to_string(),
            problem,
        }
    }

    fn wrong_type(&self, name: &str, expected: &'static str, found: &AttrValue) -> OnnxError {
        let expected = match expected {
            "Int" => "INT",
            "Float" => "FLOAT",
            "String" => "STRING",
            "Ints" => "INTS",
            "Floats" => "FLOATS",
            "Strings" => "STRINGS",
            "Tensor" => "TENSOR",
            other => other,
        };
        self.attr_error(
            name,
            AttrProblem::WrongType {
                expected,
                found: found.type_name(),
            },
        )
    }

    accessors!(
        /// Attribute `name` as an `INT`.
        opt_i, attr_i, Int, i64, i64, |v: &i64| *v, |v| v
    );
    accessors!(
        /// Attribute `name` as a `FLOAT`.
        opt_f, attr_f, Float, f32, f32, |v: &f32| *v, |v| v
    );
    accessors!(
        /// Attribute `name` as `INTS`.
        opt_ints, attr_ints, Ints, Vec<i64>, &[i64], |v: &Vec<i64>| v.clone(), <[i64]>::to_vec
    );
    accessors!(
        /// Attribute `name` as `FLOATS`.
        opt_floats, attr_floats, Floats, Vec<f32>, &[f32], |v: &Vec<f32>| v.clone(), <[f32]>::to_vec
    );

    /// Attribute `name` as a UTF-8 `STRING`; `Ok(None)` when absent.
    pub fn opt_s(&self, name: &str) -> Result<Option<String>> {
        match self.attr(name) {
            None => Ok(None),
            Some(AttrValue::String(b)) => String::from_utf8(b.clone())
                .map(Some)
                .map_err(|_| self.attr_error(name, AttrProblem::Invalid("not UTF-8".into()))),
            Some(other) => Err(self.wrong_type(name, "String", other)),
        }
    }

    /// Attribute `name` as a UTF-8 `STRING`, or `default` when absent.
    pub fn attr_s(&self, name: &str, default: &str) -> Result<String> {
        Ok(self.opt_s(name)?.unwrap_or_else(|| default.to_string()))
    }

    /// Attribute `name` as `STRINGS` (UTF-8), or `default` when absent.
    pub fn attr_strings(&self, name: &str, default: &[&str]) -> Result<Vec<String>> {
        match self.attr(name) {
            None => Ok(default.iter().map(|s| s.to_string()).collect()),
            Some(AttrValue::Strings(v)) => v
                .iter()
                .map(|b| String::from_utf8(b.clone()))
                .collect::<Result<_, _>>()
                .map_err(|_| self.attr_error(name, AttrProblem::Invalid("not UTF-8".into()))),
            Some(other) => Err(self.wrong_type(name, "Strings", other)),
        }
    }

    /// Attribute `name` as a `TENSOR`; `Ok(None)` when absent.
    pub fn opt_tensor(&self, name: &str) -> Result<Option<&Tensor>> {
        match self.attr(name) {
            None => Ok(None),
            Some(AttrValue::Tensor(t)) => Ok(Some(t)),
            Some(other) => Err(self.wrong_type(name, "Tensor", other)),
        }
    }

    /// Attribute `name` as a `TENSOR`; an error when absent (tensor attributes have no default).
    pub fn attr_tensor(&self, name: &str) -> Result<&Tensor> {
        self.opt_tensor(name)?
            .ok_or_else(|| self.missing_attr(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(attrs: Vec<(&str, AttrValue)>) -> Node {
        Node {
            name: "conv_1".into(),
            op_type: "Conv".into(),
            domain: String::new(),
            inputs: vec!["x".into()],
            outputs: vec!["y".into()],
            attributes: attrs.into_iter().map(|(n, v)| (n.to_string(), v)).collect(),
        }
    }

    #[test]
    fn defaults_and_values() {
        let n = node(vec![
            ("group", AttrValue::Int(2)),
            ("alpha", AttrValue::Float(0.5)),
            ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
            ("auto_pad", AttrValue::String(b"SAME_UPPER".to_vec())),
        ]);
        assert_eq!(n.attr_i("group", 1).unwrap(), 2);
        assert_eq!(n.attr_i("axis", -1).unwrap(), -1);
        assert_eq!(n.attr_f("alpha", 1.0).unwrap(), 0.5);
        assert_eq!(n.attr_ints("pads", &[]).unwrap(), vec![1, 1, 1, 1]);
        assert_eq!(n.attr_ints("strides", &[1, 1]).unwrap(), vec![1, 1]);
        assert_eq!(n.attr_s("auto_pad", "NOTSET").unwrap(), "SAME_UPPER");
        assert_eq!(n.opt_floats("scales").unwrap(), None);
    }

    #[test]
    fn typed_errors_name_node_op_and_attr() {
        let n = node(vec![("group", AttrValue::Float(2.0))]);
        let e = n.attr_i("group", 1).unwrap_err().to_string();
        assert_eq!(
            e,
            "node 'conv_1' (Conv): attribute 'group' should be INT but is FLOAT"
        );
        let e = n.attr_tensor("value").unwrap_err().to_string();
        assert_eq!(
            e,
            "node 'conv_1' (Conv): attribute 'value' is required but missing"
        );
    }

    #[test]
    fn untyped_attribute_is_inferred() {
        let a = AttributeProto {
            name: Some("axis".into()),
            i: Some(3),
            ..Default::default()
        };
        assert_eq!(AttrValue::from_proto(&a, "n").unwrap(), AttrValue::Int(3));
        let a = AttributeProto {
            name: Some("p".into()),
            ints: vec![1, 2],
            ..Default::default()
        };
        assert_eq!(
            AttrValue::from_proto(&a, "n").unwrap(),
            AttrValue::Ints(vec![1, 2])
        );
    }
}
