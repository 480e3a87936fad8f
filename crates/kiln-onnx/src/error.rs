//! The one error type of the ONNX front end.

use std::fmt;

use crate::report::UnsupportedOps;

/// Everything that can go wrong while loading, validating or binding an ONNX model.
///
/// Every variant names what it is about (the file, node, op type, attribute, tensor or input),
/// so the message alone tells a user where to look.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The model file could not be read.
    #[error("cannot read ONNX model '{path}': {source}")]
    Io {
        /// The path that was read.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not an ONNX `ModelProto` (garbage, truncated, wrong file).
    #[error("'{source_name}' is not a valid ONNX model (protobuf decode failed: {message})")]
    Decode {
        /// The file the bytes came from, or `<bytes>`.
        source_name: String,
        /// The protobuf decoder's message.
        message: String,
    },
    /// The model has no graph.
    #[error("'{source_name}': the ONNX model has no graph")]
    MissingGraph {
        /// The file the model came from, or `<bytes>`.
        source_name: String,
    },
    /// The model's opset for the default (`ai.onnx`) domain is missing or outside what Kiln supports.
    #[error(
        "'{source_name}': {}; Kiln supports opsets {min}-{max} of the default ONNX domain \
         (convert the model with onnx.version_converter)",
        match version { Some(v) => format!("the model uses opset {v}"), None => "the model declares no opset for the default domain".to_string() }
    )]
    UnsupportedOpset {
        /// The file the model came from, or `<bytes>`.
        source_name: String,
        /// The declared opset version (`None` if the model declares none).
        version: Option<i64>,
        /// Lowest supported version.
        min: i64,
        /// Highest supported version.
        max: i64,
    },
    /// A node reads a value that no graph input, initializer or node output defines.
    #[error("node {node} ({op_type}) reads '{input}', which no graph input, initializer or node output defines")]
    UndefinedInput {
        /// The node's label (its name, or a description if it has none).
        node: String,
        /// The node's op type.
        op_type: String,
        /// The undefined value name.
        input: String,
    },
    /// A graph output names a value that nothing defines.
    #[error("graph output '{output}' is not defined by any graph input, initializer or node")]
    UndefinedOutput {
        /// The graph output's name.
        output: String,
    },
    /// Two definitions (node outputs, graph inputs or initializers) share one name.
    #[error("value '{name}' is defined twice: by {first} and by {second}")]
    DuplicateDefinition {
        /// The value name.
        name: String,
        /// What defined it first.
        first: String,
        /// What defined it again.
        second: String,
    },
    /// The nodes cannot be ordered because they depend on each other in a cycle.
    #[error("the graph has a cycle among {} node(s): {}", nodes.len(), nodes.join(", "))]
    Cycle {
        /// Labels of the nodes on the cycle(s) (nodes that only depend on a cycle are left out).
        nodes: Vec<String>,
    },
    /// An attribute is missing or has another type than the op needs.
    #[error("node {node} ({op_type}): attribute '{attr}' {problem}")]
    Attribute {
        /// The node's label.
        node: String,
        /// The node's op type.
        op_type: String,
        /// The attribute name.
        attr: String,
        /// What is wrong with it.
        problem: AttrProblem,
    },
    /// A tensor (initializer or constant) cannot be turned into host data.
    #[error("tensor '{tensor}': {message}")]
    Tensor {
        /// The tensor's name (or where it came from).
        tensor: String,
        /// What is wrong.
        message: String,
    },
    /// A tensor keeps its data in an external file, which Kiln does not load.
    #[error(
        "tensor '{tensor}' stores its data outside the model (external data, location '{location}'); \
         Kiln needs the weights inside the .onnx file: re-save it with \
         onnx.save_model(model, path, save_as_external_data=False)"
    )]
    ExternalData {
        /// The tensor's name.
        tensor: String,
        /// The external file named by the tensor.
        location: String,
    },
    /// An `--input-shape` specification could not be parsed or does not fit the model.
    #[error("input shape: {0}")]
    InputShape(String),
    /// A dimension of a graph input is symbolic (or unknown) and no shape binds it.
    #[error(
        "input '{input}': dimension {dim} ('{symbol}') is not known at compile time; give it with \
         --input-shape {input}=..."
    )]
    UnboundDim {
        /// The graph input's name.
        input: String,
        /// The dimension's index.
        dim: usize,
        /// The symbolic name (or `?` for an unnamed unknown dimension).
        symbol: String,
    },
    /// The model uses operators that the converter does not support.
    #[error("{0}")]
    UnsupportedOps(UnsupportedOps),
    /// A node could not be converted to Kiln's graph IR (bad inputs, a shape that does not
    /// fold to a constant, a type error found by InferType...).
    #[error("node {node} ({op_type}): {message}")]
    Convert {
        /// The node's label.
        node: String,
        /// The node's op type.
        op_type: String,
        /// What went wrong.
        message: String,
    },
    /// The converted graph as a whole is invalid (e.g. a graph output has no tensor type).
    #[error("ONNX conversion: {0}")]
    Graph(String),
}

/// What is wrong with an attribute (see [`OnnxError::Attribute`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrProblem {
    /// The attribute is required but absent.
    Missing,
    /// The attribute has another type.
    WrongType {
        /// The type asked for (ONNX's name: `INT`, `FLOATS`...).
        expected: &'static str,
        /// The type found.
        found: &'static str,
    },
    /// The attribute has the right type but an unusable value.
    Invalid(String),
}

impl fmt::Display for AttrProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrProblem::Missing => write!(f, "is required but missing"),
            AttrProblem::WrongType { expected, found } => {
                write!(f, "should be {expected} but is {found}")
            }
            AttrProblem::Invalid(msg) => write!(f, "is invalid: {msg}"),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = OnnxError> = std::result::Result<T, E>;
