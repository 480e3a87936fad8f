"""A transformer encoder layer (``tests/zoo/make_transformer.py``: layer norm, multi-head
self-attention, GELU feed-forward, residuals; seq 128, hidden 256, 4 heads) compiled by Kiln and
compared with onnxruntime on fresh random inputs, plus its parts on their own.

Outputs are compared after dividing both sides by the reference's largest magnitude, with rtol
1e-4 and atol 1e-5; Kiln's output is poisoned with NaN before each run.

The ``transformer`` and ``transformer_decomposed`` variants use 3-D and 4-D MatMuls (batched
attention heads); ``transformer_2d`` splits the heads with 2-D MatMuls only.
"""

import os
import sys

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
import make_transformer as mt  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5
#: The error of Kiln's 2-D-only matmul kernel on N-D MatMuls (see the module docstring).


def fresh_input(shape):
    seed = int.from_bytes(os.urandom(4), "little")
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32), seed


def reference(model, x):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def run_and_compare(lib, model, shape, runs=2):
    gm = GraphModule(lib["default"](kiln.cpu()))
    out_shape, out_dtype = (s[0] for s in gm.get_output_info())
    for _ in range(runs):
        x, seed = fresh_input(shape)
        ref = reference(model, x)
        gm.get_output(0).copyfrom(np.full(out_shape, np.nan, out_dtype))
        gm.set_input("x", x)
        gm.run()
        got = gm.get_output(0, np.full(out_shape, np.nan, out_dtype))
        assert got.shape == ref.shape and got.dtype == ref.dtype
        scale = float(np.abs(ref).max())
        np.testing.assert_allclose(
            got / scale, ref / scale, rtol=RTOL, atol=ATOL, err_msg=f"input seed {seed}"
        )


@pytest.mark.parametrize("name", mt.NAMES)
def test_encoder_layer_matches_onnxruntime(name):
    model = mt.make_named(name, seed=int.from_bytes(os.urandom(4), "little"))
    lib = kiln.onnx.compile(model)
    run_and_compare(lib, model, mt.input_shape(name.endswith("_2d")))


def part_model(build, shape):
    """A model of one part of the layer, built on input ``x`` by ``build(builder, "x")``."""
    b = mt.Builder(np.random.default_rng(int.from_bytes(os.urandom(4), "little")))
    y = build(b, "x")
    b.nodes.append(helper.make_node("Identity", [y], ["y"], name="output"))
    graph = helper.make_graph(
        b.nodes,
        "part",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=b.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", mt.OPSET)])
    model.ir_version = 8
    return model


def gelu(b, f):
    erf = b.op("Erf", [b.op("Div", [f, b.const("sqrt2", np.float32(np.sqrt(2.0)))])])
    one = b.const("one", np.float32(1.0))
    return b.op("Mul", [b.op("Mul", [f, b.op("Add", [erf, one])]), b.const("half", np.float32(0.5))])


SHAPE3 = [1, mt.SEQ, mt.HIDDEN]
PARTS = {
    "layer_norm_op": (lambda b, x: b.layer_norm(x, False, "ln"), SHAPE3),
    "layer_norm_decomposed": (lambda b, x: b.layer_norm(x, True, "ln"), SHAPE3),
    "heads_scaled_softmax": (
        lambda b, x: b.op("Softmax", [b.scale_scores(b.heads(x, [0, 2, 1, 3]), True)], axis=-1),
        SHAPE3,
    ),
    "gelu_erf": (gelu, SHAPE3),
    "linear_2d": (lambda b, x: b.linear(x, mt.HIDDEN, mt.FFN, "l"), [mt.SEQ, mt.HIDDEN]),
    "attention_2d": (lambda b, x: b.attention_2d(x), [mt.SEQ, mt.HIDDEN]),
    "linear_3d": (lambda b, x: b.linear(x, mt.HIDDEN, mt.HIDDEN, "l"), SHAPE3),
    "attention_4d": (lambda b, x: b.attention(x, use_mul=False), SHAPE3),
}


@pytest.mark.parametrize("part", list(PARTS))
def test_encoder_part_matches_onnxruntime(part):
    build, shape = PARTS[part]
    model = part_model(build, shape)
    lib = kiln.onnx.compile(model)
    run_and_compare(lib, model, shape)
