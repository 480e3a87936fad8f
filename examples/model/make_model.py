#!/usr/bin/env python3
"""Makes the bundled example model of `kiln demo`, next to this script:

- model.onnx:   a small CNN built with onnx.helper (ir_version 8, opset 13), weights from a fixed
                seed: input [1,3,32,32] -> Conv(16, 3x3, pad 1) + bias -> Relu -> MaxPool 2x2
                -> Conv(32, 3x3, stride 2) + bias -> Relu -> GlobalAveragePool -> Flatten
                -> Gemm(10) -> Softmax -> output [1,10];
- input.npy:    a fixed input (float32 [1,3,32,32], another fixed seed);
- expected.npy: the reference output, computed by onnxruntime on one thread.

Run from the repository root: `.venv/bin/python examples/model/make_model.py`. The outputs are
deterministic (same numpy and onnxruntime: same bytes), so the committed files can be
regenerated and compared.
"""

import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
WEIGHT_SEED = 2024
INPUT_SEED = 7


def he(rng, shape, fan_in):
    """Random normal weights scaled by sqrt(2 / fan_in) (keeps activations near unit scale)."""
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def make_model():
    rng = np.random.default_rng(WEIGHT_SEED)
    inits = [
        numpy_helper.from_array(he(rng, (16, 3, 3, 3), 3 * 9), "conv1.weight"),
        numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype(np.float32), "conv1.bias"),
        numpy_helper.from_array(he(rng, (32, 16, 3, 3), 16 * 9), "conv2.weight"),
        numpy_helper.from_array((rng.standard_normal(32) * 0.1).astype(np.float32), "conv2.bias"),
        numpy_helper.from_array(he(rng, (10, 32), 32), "fc.weight"),
        numpy_helper.from_array((rng.standard_normal(10) * 0.1).astype(np.float32), "fc.bias"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["conv1"],
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"]),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["pool1", "conv2.weight", "conv2.bias"], ["conv2"],
                         kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node("Relu", ["conv2"], ["relu2"]),
        helper.make_node("GlobalAveragePool", ["relu2"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["output"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "kiln_example_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13)],
        ir_version=8,
        producer_name="kiln examples/model/make_model.py",
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    model = make_model()
    model_path = os.path.join(HERE, "model.onnx")
    onnx.save(model, model_path)

    x = np.random.default_rng(INPUT_SEED).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(os.path.join(HERE, "input.npy"), x)

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"input": x})
    np.save(os.path.join(HERE, "expected.npy"), y.astype(np.float32))

    size = os.path.getsize(model_path)
    print(f"{model_path}: {size} bytes; output {y.shape} {y.dtype}, argmax {int(y.argmax())}")
    print("expected:", np.array2string(y[0], precision=5))


if __name__ == "__main__":
    main()
