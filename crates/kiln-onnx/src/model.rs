//! The typed, validated view of an ONNX model, and the loader that builds it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use prost::Message;

use crate::attr::AttrValue;
use crate::error::{OnnxError, Result};
use crate::proto::{self, type_proto, ModelProto};
use crate::tensor::{DataType, Tensor, TensorData};
use crate::validate;

/// Lowest opset of the default ONNX domain that Kiln imports (before 7, binary operators
/// broadcast by their `broadcast`/`axis` attributes, which the converters handle).
pub const MIN_OPSET: i64 = 1;
/// Highest opset of the default ONNX domain that Kiln imports (22 to 25 add element types and
/// operators; the semantics of the operators Kiln converts are those of 21).
pub const MAX_OPSET: i64 = 25;

/// A loaded and validated ONNX model.
#[derive(Debug, Clone)]
pub struct Model {
    /// Where the model came from: its path, or `<bytes>`.
    pub source: String,
    /// The ONNX IR version of the file.
    pub ir_version: i64,
    /// Imported opsets, domain to version; the default domain is `""` (`ai.onnx` is folded into it).
    pub opsets: BTreeMap<String, i64>,
    /// The tool that wrote the model (`producer_name`).
    pub producer: String,
    /// The main graph.
    pub graph: Graph,
}

impl Model {
    /// The opset version of the default ONNX domain (always within [`MIN_OPSET`]..=[`MAX_OPSET`]).
    pub fn opset(&self) -> i64 {
        self.opsets[""]
    }
}

/// One dimension of a declared shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A known size.
    Fixed(usize),
    /// A named symbolic size (`dim_param`, e.g. `batch`).
    Symbolic(String),
    /// A size the model leaves unnamed and unknown.
    Unknown,
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Symbolic(s) => f.write_str(s),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// A declared value: a graph input or output, or a `value_info` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueInfo {
    /// The value's name.
    pub name: String,
    /// ONNX's element type code (0 if the type is not a tensor or is not given).
    pub elem_type: i32,
    /// The element type, if Kiln supports it.
    pub dtype: Option<DataType>,
    /// The declared shape, `None` if the rank is unknown.
    pub dims: Option<Vec<Dim>>,
}

impl ValueInfo {
    fn from_proto(v: &proto::ValueInfoProto) -> ValueInfo {
        let tensor = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(type_proto::Value::TensorType(t)) => Some(t),
            _ => None,
        };
        let elem_type = tensor.map_or(0, |t| t.elem_type());
        let dims = tensor.and_then(|t| t.shape.as_ref()).map(|s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(proto::tensor_shape_proto::dimension::Value::DimValue(n)) if *n >= 0 => {
                        Dim::Fixed(*n as usize)
                    }
                    // Exporters write `?` for a size they know nothing of: like an empty name,
                    // each such dimension is its own unknown, not one shared symbol.
                    Some(proto::tensor_shape_proto::dimension::Value::DimParam(p))
                        if !p.is_empty() && p != "?" =>
                    {
                        Dim::Symbolic(p.clone())
                    }
                    _ => Dim::Unknown,
                })
                .collect()
        });
        ValueInfo {
            name: v.name().to_string(),
            elem_type,
            dtype: DataType::from_onnx(elem_type),
            dims,
        }
    }
}

/// One operator application.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The node's name as in the file (may be empty; see [`Node::label`]).
    pub name: String,
    /// The operator (`Conv`, `Relu`...).
    pub op_type: String,
    /// The operator's domain; `""` for the default ONNX domain (`ai.onnx` is folded into it).
    pub domain: String,
    /// Input value names by position; `""` marks an omitted optional input.
    pub inputs: Vec<String>,
    /// Output value names by position; `""` marks an omitted optional output.
    pub outputs: Vec<String>,
    /// Attributes in file order.
    pub attributes: Vec<(String, AttrValue)>,
}

impl Node {
    /// A printable name for messages: `'name'`, or a description for unnamed nodes.
    pub fn label(&self) -> String {
        if !self.name.is_empty() {
            format!("'{}'", self.name)
        } else {
            match self.outputs.iter().find(|o| !o.is_empty()) {
                Some(o) => format!("<unnamed {} producing '{o}'>", self.op_type),
                None => format!("<unnamed {}>", self.op_type),
            }
        }
    }

    /// Input `i`, or `None` if it is absent or omitted (`""`).
    pub fn input(&self, i: usize) -> Option<&str> {
        self.inputs
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Whether this is a `Constant` node of the default domain.
    pub fn is_constant(&self) -> bool {
        self.domain.is_empty() && self.op_type == "Constant"
    }

    /// The op type qualified by its domain when it is not the default (`com.microsoft.Gelu`).
    pub fn qualified_op(&self) -> String {
        qualified_op(&self.domain, &self.op_type)
    }

    /// The value of a `Constant` node as a tensor named after its output.
    ///
    /// Reads `value`, `value_float(s)` and `value_int(s)`; string and sparse constants are errors.
    pub fn constant_value(&self) -> Result<Tensor> {
        let name = self.outputs.first().cloned().unwrap_or_default();
        let (attr, value) = self
            .attributes
            .first()
            .ok_or_else(|| self.missing_attr("value"))?;
        let data = match (attr.as_str(), value) {
            ("value", AttrValue::Tensor(t)) => {
                return Ok(Tensor { name, ..t.clone() });
            }
            ("value_float", AttrValue::Float(f)) => (vec![], TensorData::F32(vec![*f])),
            ("value_floats", AttrValue::Floats(v)) => (vec![v.len()], TensorData::F32(v.clone())),
            ("value_int", AttrValue::Int(i)) => (vec![], TensorData::I64(vec![*i])),
            ("value_ints", AttrValue::Ints(v)) => (vec![v.len()], TensorData::I64(v.clone())),
            _ => {
                return Err(self.attr_error(
                    attr,
                    crate::AttrProblem::Invalid(format!(
                        "Constant with a {} '{attr}' is not supported (Kiln reads value, \
                         value_float(s), value_int(s))",
                        value.type_name()
                    )),
                ))
            }
        };
        Tensor::new(name, data.0, data.1)
    }
}

/// The default domain as a node names it: `""`, with `ai.onnx` folded into it.
pub(crate) fn fold_domain(domain: &str) -> &str {
    match domain {
        "ai.onnx" => "",
        d => d,
    }
}

/// `op_type` qualified by `domain` when that is not the default domain (`com.microsoft.Gelu`);
/// `ai.onnx` counts as the default domain.
pub(crate) fn qualified_op(domain: &str, op_type: &str) -> String {
    match fold_domain(domain) {
        "" => op_type.to_string(),
        d => format!("{d}.{op_type}"),
    }
}

/// Where a constant tensor lives in a [`Graph`].
#[derive(Debug, Clone, Copy)]
enum ConstRef {
    Initializer(usize),
    ConstantNode(usize),
}

/// A validated graph: nodes in topological order, every value defined exactly once.
#[derive(Debug, Clone)]
pub struct Graph {
    /// The graph's name.
    pub name: String,
    /// Nodes in a topological order (the file's order when it already is one), `Constant`
    /// nodes included.
    pub nodes: Vec<Node>,
    /// Runtime inputs: the graph inputs that no initializer provides.
    pub inputs: Vec<ValueInfo>,
    /// Graph outputs.
    pub outputs: Vec<ValueInfo>,
    /// Declared types of intermediate values (`value_info`).
    pub value_info: Vec<ValueInfo>,
    initializers: Vec<Tensor>,
    constants: Vec<Tensor>,
    const_index: HashMap<String, ConstRef>,
}

impl Graph {
    /// Converts and validates a `GraphProto`: decodes initializers and `Constant` values,
    /// checks that every value is defined once and that node inputs and graph outputs are
    /// defined, and orders the nodes topologically (a cycle is an error).
    pub fn from_proto(g: &proto::GraphProto) -> Result<Graph> {
        Graph::from_proto_in(g, &HashSet::new())
    }

    /// [`Graph::from_proto`] for a subgraph (an If branch, a Loop or Scan body) whose nodes
    /// and outputs may also read `outer`, the names defined in its enclosing scopes.
    pub fn from_subgraph(g: &proto::GraphProto, outer: &HashSet<String>) -> Result<Graph> {
        Graph::from_proto_in(g, outer)
    }

    fn from_proto_in(g: &proto::GraphProto, outer: &HashSet<String>) -> Result<Graph> {
        let initializers = g
            .initializer
            .iter()
            .enumerate()
            .map(|(i, t)| Tensor::from_proto(t, &format!("initializer #{i}")))
            .collect::<Result<Vec<_>>>()?;
        if let Some(s) = g.sparse_initializer.first() {
            return Err(OnnxError::Tensor {
                tensor: s
                    .values
                    .as_ref()
                    .map(|v| v.name().to_string())
                    .unwrap_or_default(),
                message: "sparse initializers are not supported".into(),
            });
        }
        let init_names: HashSet<&str> = initializers.iter().map(|t| t.name.as_str()).collect();
        let mut nodes = Vec::with_capacity(g.node.len());
        for n in &g.node {
            let mut node = Node {
                name: n.name().to_string(),
                op_type: n.op_type().to_string(),
                domain: fold_domain(n.domain()).to_string(),
                inputs: n.input.clone(),
                outputs: n.output.clone(),
                attributes: Vec::with_capacity(n.attribute.len()),
            };
            let label = node.label();
            for a in &n.attribute {
                node.attributes
                    .push((a.name().to_string(), AttrValue::from_proto(a, &label)?));
            }
            nodes.push(node);
        }
        let all_inputs: Vec<ValueInfo> = g.input.iter().map(ValueInfo::from_proto).collect();
        let outputs: Vec<ValueInfo> = g.output.iter().map(ValueInfo::from_proto).collect();
        validate::check_definitions_in(&all_inputs, &initializers, &nodes, &outputs, outer)?;
        let nodes = validate::topo_sort(nodes)?;
        let inputs = all_inputs
            .into_iter()
            .filter(|v| !init_names.contains(v.name.as_str()))
            .collect();

        let mut const_index = HashMap::new();
        for (i, t) in initializers.iter().enumerate() {
            const_index.insert(t.name.clone(), ConstRef::Initializer(i));
        }
        let mut constants = Vec::new();
        for node in nodes.iter().filter(|n| n.is_constant()) {
            let t = node.constant_value()?;
            const_index.insert(t.name.clone(), ConstRef::ConstantNode(constants.len()));
            constants.push(t);
        }
        Ok(Graph {
            name: g.name().to_string(),
            nodes,
            inputs,
            outputs,
            value_info: g.value_info.iter().map(ValueInfo::from_proto).collect(),
            initializers,
            constants,
            const_index,
        })
    }

    /// Initializers in file order.
    pub fn initializers(&self) -> &[Tensor] {
        &self.initializers
    }

    /// The values of the `Constant` nodes, in node order, each named after its node's output.
    pub fn constant_nodes(&self) -> &[Tensor] {
        &self.constants
    }

    /// The initializer named `name`.
    pub fn initializer(&self, name: &str) -> Option<&Tensor> {
        match self.const_index.get(name)? {
            ConstRef::Initializer(i) => Some(&self.initializers[*i]),
            ConstRef::ConstantNode(_) => None,
        }
    }

    /// The compile-time value named `name`: an initializer or a `Constant` node's output.
    pub fn constant(&self, name: &str) -> Option<&Tensor> {
        match self.const_index.get(name)? {
            ConstRef::Initializer(i) => Some(&self.initializers[*i]),
            ConstRef::ConstantNode(i) => Some(&self.constants[*i]),
        }
    }

    /// The runtime input named `name`.
    pub fn input(&self, name: &str) -> Option<&ValueInfo> {
        self.inputs.iter().find(|v| v.name == name)
    }

    /// How many nodes use each op type (domain-qualified outside the default domain).
    pub fn op_counts(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for n in &self.nodes {
            *counts.entry(n.qualified_op()).or_default() += 1;
        }
        counts
    }
}

/// Reads and validates the ONNX model at `path` (see [`from_bytes`]).
pub fn load_model(path: impl AsRef<Path>) -> Result<Model> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| OnnxError::Io {
        path: name.clone(),
        source,
    })?;
    decode(&bytes, name)
}

/// Decodes and validates an ONNX model from its serialized bytes.
///
/// Checks, in order: the bytes decode as a `ModelProto` with a graph; the default domain's
/// opset is within [`MIN_OPSET`]..=[`MAX_OPSET`]; tensors decode (no external data); every
/// value is defined once and every use is defined; the nodes can be ordered (no cycle).
pub fn from_bytes(bytes: &[u8]) -> Result<Model> {
    decode(bytes, "<bytes>".to_string())
}

fn decode(bytes: &[u8], source: String) -> Result<Model> {
    let m = ModelProto::decode(bytes).map_err(|e| OnnxError::Decode {
        source_name: source.clone(),
        message: e.to_string(),
    })?;
    from_proto(&m, source)
}

/// Validates a decoded `ModelProto`; `source` names it in errors.
pub fn from_proto(m: &ModelProto, source: String) -> Result<Model> {
    let Some(graph) = m.graph.as_ref() else {
        return Err(OnnxError::MissingGraph {
            source_name: source,
        });
    };
    let mut opsets = BTreeMap::new();
    for o in &m.opset_import {
        let domain = match o.domain() {
            "ai.onnx" => "",
            d => d,
        };
        opsets.insert(domain.to_string(), o.version());
    }
    // A model whose nodes are all of other domains (an `ai.onnx.ml` pipeline) needs no
    // default-domain opset.
    let default_nodes = graph
        .node
        .iter()
        .any(|n| matches!(n.domain(), "" | "ai.onnx"));
    if !opsets.contains_key("") && !opsets.is_empty() && !default_nodes {
        opsets.insert(String::new(), MAX_OPSET);
    }
    match opsets.get("") {
        Some(v) if (MIN_OPSET..=MAX_OPSET).contains(v) => {}
        v => {
            return Err(OnnxError::UnsupportedOpset {
                source_name: source,
                version: v.copied(),
                min: MIN_OPSET,
                max: MAX_OPSET,
            })
        }
    }
    Ok(Model {
        ir_version: m.ir_version(),
        opsets,
        producer: m.producer_name().to_string(),
        graph: Graph::from_proto(graph)?,
        source,
    })
}
