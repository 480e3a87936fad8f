//! The global functions of the ONNX front end (what `kiln.onnx` in Python calls).
//!
//! `onnx.FromOnnx(model_bytes: bytes, shape_dict: {str: [int]} | None, frozen: {str: tensor} |
//! None)` -> `[IRModule, {name: tensor}]`: the serialized model converted by
//! [`crate::from_onnx_frozen`] (the inputs of `frozen` fixed to their values); errors keep the
//! front end's messages (an unsupported operator lists every unsupported op type).
//!
//! `onnx.Compile(model_bytes: bytes, shape_dict, frozen, target: str | [str] | None,
//! dims: {str: [int]} | None)` -> a factory module: [`crate::compile`]'s (a
//! `GraphExecutorFactory` for a static model, a `VMFactory` for one with control flow decided
//! at run time or compiled for several values of the symbolic dimensions `dims`); `target`
//! defaults to `llvm`.
//!
//! `onnx.ModelInfo(model_bytes: bytes)` -> `{"inputs": [...], "outputs": [...], "opset": int,
//! "producer": str}`: the model's declared graph inputs (initializers left out) and outputs,
//! each `{"name": str, "dtype": str, "shape": [int | str] | None}`; a dimension is its size,
//! its `dim_param` name, or `"?"` where the model leaves it unnamed; `dtype` is Kiln's name, or
//! `"onnx:<code>"` for an element type Kiln does not support; `shape` is `None` where the rank
//! is not given. What an onnxruntime-style session reports before anything is compiled.

use crate::{Dim, FrozenInputs, InputShapes, ValueInfo};
use kiln_ffi::{register_global, Any, Array, Bytes, Error, Map, Result};
use kiln_runtime::tensor::Tensor;

/// Links this crate's registrations into the final library (call from `kiln::link_all`).
#[doc(hidden)]
pub fn link_globals() -> *const () {
    link_globals as *const ()
}

/// `shape_dict` as [`InputShapes`]: names to non-negative dimensions.
fn input_shapes(shape_dict: Option<Map>) -> Result<InputShapes> {
    input_shapes_arg(shape_dict, "onnx.FromOnnx")
}

/// A global function's `shape_dict` argument (`{name: [int]}` or none) as [`InputShapes`];
/// errors name the function `what`, the input and the bad value.
pub fn input_shapes_arg(shape_dict: Option<Map>, what: &str) -> Result<InputShapes> {
    int_lists(shape_dict, &format!("{what}: the shape of input"))
}

/// A map of names to lists of non-negative integers (input shapes, dimension values); errors
/// start with `what` and the name.
fn int_lists(shape_dict: Option<Map>, what: &str) -> Result<InputShapes> {
    let mut shapes = InputShapes::new();
    let Some(m) = shape_dict else {
        return Ok(shapes);
    };
    for (k, v) in m.iter() {
        let name: String = k.try_as()?;
        let dims: Array = v
            .try_as()
            .map_err(|_| Error::type_error(format!("{what} {name:?} must be a list of ints")))?;
        let dims = dims.to_vec::<i64>()?;
        let dims = dims
            .iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| {
                    Error::value_error(format!(
                        "{what} {name:?} has a negative value {d} in {dims:?}"
                    ))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        shapes.insert(name, dims);
    }
    Ok(shapes)
}

/// `frozen` as [`FrozenInputs`]: input names to tensors.
fn frozen_inputs(frozen: Option<Map>) -> Result<FrozenInputs> {
    let mut out = FrozenInputs::new();
    for (k, v) in frozen.iter().flat_map(|m| m.iter()) {
        let name: String = k.try_as()?;
        let t: Tensor = v.try_as().map_err(|_| {
            Error::type_error(format!(
                "onnx.FromOnnx: the value of frozen input {name:?} must be a tensor"
            ))
        })?;
        out.insert(name, t);
    }
    Ok(out)
}

register_global!("onnx.FromOnnx", |model_bytes: Bytes,
                                   shape_dict: Option<Map>,
                                   frozen: Option<Map>|
 -> Result<Array> {
    let shapes = input_shapes(shape_dict)?;
    let frozen = frozen_inputs(frozen)?;
    let model =
        crate::from_bytes(model_bytes.as_bytes()).map_err(|e| Error::value_error(e.to_string()))?;
    let (module, params) = crate::from_onnx_frozen(&model, &shapes, &frozen)
        .map_err(|e| Error::value_error(e.to_string()))?;
    let params: Map = params.into_iter().collect();
    Ok(Array::new(vec![Any::from(module), Any::from(params)]))
});

register_global!("onnx.Compile", |model_bytes: Bytes,
                                  shape_dict: Option<Map>,
                                  frozen: Option<Map>,
                                  target: Option<Any>,
                                  dims: Option<Map>|
 -> Result<kiln_runtime::module::Module> {
    let shapes = input_shapes(shape_dict)?;
    let dims = int_lists(dims, "onnx.Compile: the values of dimension")?;
    let frozen = frozen_inputs(frozen)?;
    let model =
        crate::from_bytes(model_bytes.as_bytes()).map_err(|e| Error::value_error(e.to_string()))?;
    let targets = kiln_codegen::driver::target_list(target)?;
    let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
    let ctx = kiln_graph::transform::PassContext::with_opt_level(3);
    crate::compile(&model, &shapes, &dims, &frozen, &targets, &ctx)
        .map_err(|e| Error::value_error(e.to_string()))
});

/// One declared input or output as the map `onnx.ModelInfo` returns.
fn value_info_map(v: &ValueInfo) -> Map {
    let dtype = v
        .dtype
        .map(|d| d.to_string())
        .unwrap_or_else(|| format!("onnx:{}", v.elem_type));
    let shape: Any = match &v.dims {
        Some(dims) => Array::new(
            dims.iter()
                .map(|d| match d {
                    Dim::Fixed(n) => Any::from(*n as i64),
                    Dim::Symbolic(name) => Any::from(name.as_str()),
                    Dim::Unknown => Any::from("?"),
                })
                .collect(),
        )
        .into(),
        None => Any::from(()),
    };
    Map::new([
        (Any::from("name"), Any::from(v.name.as_str())),
        (Any::from("dtype"), Any::from(dtype)),
        (Any::from("shape"), shape),
    ])
}

register_global!("onnx.ModelInfo", |model_bytes: Bytes| -> Result<Map> {
    let model =
        crate::from_bytes(model_bytes.as_bytes()).map_err(|e| Error::value_error(e.to_string()))?;
    let graph = &model.graph;
    let inputs: Array = graph
        .inputs
        .iter()
        .filter(|v| graph.initializer(&v.name).is_none())
        .map(value_info_map)
        .collect();
    let outputs: Array = graph.outputs.iter().map(value_info_map).collect();
    Ok(Map::new([
        (Any::from("inputs"), Any::from(inputs)),
        (Any::from("outputs"), Any::from(outputs)),
        (Any::from("opset"), Any::from(model.opset() as i64)),
        (Any::from("producer"), Any::from(model.producer.as_str())),
    ]))
});
