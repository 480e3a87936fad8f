//! Fuzz target: ONNX bytes through Kiln's importer, decode and validation
//! (`kiln_onnx::from_bytes`) then conversion to the graph IR (`kiln_onnx::from_onnx`, which
//! checks attributes, shapes and types node by node). Symbolic and unknown input dimensions are
//! bound to small sizes so that conversion goes as deep as the model allows. Any outcome but a
//! panic or a crash is fine: errors are the expected answer to most inputs.
#![no_main]

use kiln_onnx::{from_bytes, from_onnx, Dim, InputShapes};
use libfuzzer_sys::fuzz_target;

/// Static shapes for the inputs whose dimensions the model leaves open (each open one is 2).
fn bind_open_dims(model: &kiln_onnx::Model) -> InputShapes {
    let mut shapes = InputShapes::new();
    for inp in &model.graph.inputs {
        let Some(dims) = &inp.dims else { continue };
        if dims.iter().all(|d| matches!(d, Dim::Fixed(_))) {
            continue;
        }
        let bound = dims
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => *n,
                _ => 2,
            })
            .collect();
        shapes.insert(inp.name.clone(), bound);
    }
    shapes
}

fuzz_target!(|data: &[u8]| {
    let Ok(model) = from_bytes(data) else { return };
    // Keep each run small: huge declared shapes are valid models but only slow the fuzzer.
    let big = model.graph.inputs.iter().any(|i| {
        i.dims.as_ref().is_some_and(|d| {
            d.iter()
                .map(|d| match d {
                    Dim::Fixed(n) => *n,
                    _ => 2,
                })
                .try_fold(1usize, |acc, n| acc.checked_mul(n.max(1)))
                .is_none_or(|n| n > 1 << 16)
        })
    });
    if big {
        return;
    }
    let _ = from_onnx(&model, &bind_open_dims(&model));
});
