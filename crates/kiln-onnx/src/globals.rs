//! The global functions of the ONNX front end (what `kiln.onnx` in Python calls).
//!
//! `onnx.FromOnnx(model_bytes: bytes, shape_dict: {str: [int]} | None, frozen: {str: tensor} |
//! None)` -> `[IRModule, {name: tensor}]`: the serialized model converted by
//! [`crate::from_onnx_frozen`] (the inputs of `frozen` fixed to their values); errors keep the
//! front end's messages (an unsupported operator lists every unsupported op type).

use crate::{FrozenInputs, InputShapes};
use kiln_ffi::{register_global, Any, Array, Bytes, Error, Map, Result};
use kiln_runtime::tensor::Tensor;

/// Links this crate's registrations into the final library (call from `kiln::link_all`).
#[doc(hidden)]
pub fn link_globals() -> *const () {
    link_globals as *const ()
}

/// `shape_dict` as [`InputShapes`]: names to non-negative dimensions.
fn input_shapes(shape_dict: Option<Map>) -> Result<InputShapes> {
    let mut shapes = InputShapes::new();
    let Some(m) = shape_dict else {
        return Ok(shapes);
    };
    for (k, v) in m.iter() {
        let name: String = k.try_as()?;
        let dims: Array = v.try_as().map_err(|_| {
            Error::type_error(format!(
                "onnx.FromOnnx: the shape of input {name:?} must be a list of ints"
            ))
        })?;
        let dims = dims.to_vec::<i64>()?;
        let dims = dims
            .iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| {
                    Error::value_error(format!(
                        "onnx.FromOnnx: input {name:?} has a negative dimension {d} in {dims:?}"
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
