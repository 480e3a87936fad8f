//! Kiln's ONNX front end, format layer: the ONNX protobuf messages and a validated, typed view
//! of a model that the graph converter maps to Kiln's graph IR.
//!
//! ```no_run
//! let model = kiln_onnx::load_model("resnet50.onnx")?;
//! model.check_supported_ops(["Conv", "Relu", "Add", "Gemm"])?; // one error lists every gap
//! let shapes = kiln_onnx::parse_input_shapes("data=1,3,224,224")?;
//! let bound = model.graph.bind_input_shapes(&shapes)?; // static shapes, symbols resolved
//! for node in &model.graph.nodes {                      // topologically ordered
//!     let _group = node.attr_i("group", 1)?;            // typed, with defaults
//!     let _weight = node.input(1).and_then(|w| model.graph.constant(w));
//! }
//! # Ok::<(), kiln_onnx::OnnxError>(())
//! ```
//!
//! [`from_onnx`] converts the view to Kiln's graph IR (see [`convert`]): runtime inputs become
//! typed variables, float initializers become parameters returned with their values, shape
//! computations fold to constants, and the result is typed by InferType:
//!
//! ```no_run
//! let model = kiln_onnx::load_model("resnet50.onnx")?;
//! let shapes = kiln_onnx::parse_input_shapes("data=1,3,224,224")?;
//! let (module, params) = kiln_onnx::from_onnx(&model, &shapes)?;
//! println!("{module}\n{} parameters", params.len());
//! # Ok::<(), kiln_onnx::OnnxError>(())
//! ```
//!
//! Supported: opsets [`MIN_OPSET`]..=[`MAX_OPSET`] of the default domain; initializers and
//! `Constant` values as typed host [`Tensor`]s (float32/16, bfloat16, float64, int8..int64,
//! uint8..uint64, bool; `raw_data` or typed fields). External data is an error.
//!
//! The protobuf code in [`proto`] is generated once by `scripts/gen_onnx_proto.sh` and
//! committed: building this crate needs `prost`, never `protoc`.

mod attr;
mod compile;
pub mod convert;
mod error;
mod globals;
mod model;
pub mod proto;
mod report;
mod shapes;
mod tensor;
mod validate;

pub use attr::AttrValue;
pub use compile::{compile, convert, Converted};
pub use convert::{
    from_onnx, from_onnx_dims, from_onnx_frozen, from_onnx_program, supported_ops, FrozenInputs,
};
pub use error::{AttrProblem, OnnxError, Result};
pub use globals::{input_shapes_arg, link_globals};
pub use model::{
    from_bytes, from_proto, load_model, Dim, Graph, Model, Node, ValueInfo, MAX_OPSET, MIN_OPSET,
};
pub use report::{UnsupportedOp, UnsupportedOps};
pub use shapes::{
    parse_dim_flags, parse_input_shape_flags, parse_input_shapes, BoundShapes, DimValues,
    InputShapes, StaticInput,
};
pub use tensor::{bf16_to_f32, f16_to_f32, onnx_type_name, DataType, Tensor, TensorData};
