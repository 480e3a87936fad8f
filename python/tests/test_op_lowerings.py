"""Operators that failed on real models, each in a one- to three-node model compiled by Kiln and
compared with onnxruntime on fresh random inputs, outputs poisoned first: Resize (nearest with
`sizes`, bilinear with `scales`, as YOLO- and DBNet-style detectors use it) and Xor, which the
graph build could not lower until each operator carried its own lowering; ArgMax, whose indices
must be int64; Clip of int8 without bounds, whose infinite defaults must not wrap."""

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def model_of(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def compare(model, feeds, out_shape, out_dtype):
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    lib = kiln.onnx.compile(model.SerializeToString(), target="llvm -mcpu=native")
    gm = GraphModule(lib["default"](kiln.cpu()))
    for k, v in feeds.items():
        gm.set_input(k, v)
    out = np.empty(out_shape, dtype=out_dtype)
    if np.issubdtype(out.dtype, np.floating):
        out.fill(np.nan)
    else:
        out.fill(7)
    gm.run()
    gm.get_output(0, out)
    return out, want


@pytest.mark.parametrize("mode,coord", [("nearest", "asymmetric"), ("linear", "half_pixel")])
def test_resize_with_sizes_and_scales(mode, coord):
    rng = np.random.default_rng()
    x = rng.standard_normal((1, 3, 10, 12)).astype("float32")
    if mode == "nearest":
        sizes = numpy_helper.from_array(np.array([1, 3, 20, 24], dtype="int64"), "sizes")
        node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode,
                                coordinate_transformation_mode=coord, nearest_mode="floor")
        inits = [sizes]
    else:
        scales = numpy_helper.from_array(np.array([1, 1, 2, 2], dtype="float32"), "scales")
        node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode,
                                coordinate_transformation_mode=coord)
        inits = [scales]
    m = model_of([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 20, 24])],
                 inits)
    got, want = compare(m, {"x": x}, (1, 3, 20, 24), "float32")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_xor_of_comparisons():
    rng = np.random.default_rng()
    a = rng.standard_normal((4, 33)).astype("float32")
    b = rng.standard_normal((4, 33)).astype("float32")
    nodes = [
        helper.make_node("Greater", ["a", "zero"], ["pa"]),
        helper.make_node("Greater", ["b", "zero"], ["pb"]),
        helper.make_node("Xor", ["pa", "pb"], ["y"]),
    ]
    zero = numpy_helper.from_array(np.zeros((), dtype="float32"), "zero")
    m = model_of(nodes,
                 [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape),
                  helper.make_tensor_value_info("b", TensorProto.FLOAT, b.shape)],
                 [helper.make_tensor_value_info("y", TensorProto.BOOL, a.shape)], [zero])
    got, want = compare(m, {"a": a, "b": b}, a.shape, "bool")
    np.testing.assert_array_equal(got, want)


def test_argmax_gives_int64_indices():
    rng = np.random.default_rng()
    x = rng.standard_normal((3, 17, 5)).astype("float32")
    nodes = [helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=1)]
    m = model_of(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                 [helper.make_tensor_value_info("y", TensorProto.INT64, [3, 1, 5])])
    got, want = compare(m, {"x": x}, (3, 1, 5), "int64")
    np.testing.assert_array_equal(got, want)


def test_clip_of_int8_without_bounds_keeps_values():
    rng = np.random.default_rng()
    x = rng.integers(-128, 128, size=(4, 32), dtype=np.int8)
    lo = numpy_helper.from_array(np.array(-5, dtype=np.int8), "lo")
    for inputs, inits in ((["x"], []), (["x", "lo"], [lo])):
        m = model_of([helper.make_node("Clip", inputs, ["y"])],
                     [helper.make_tensor_value_info("x", TensorProto.INT8, x.shape)],
                     [helper.make_tensor_value_info("y", TensorProto.INT8, x.shape)], inits)
        got, want = compare(m, {"x": x}, x.shape, "int8")
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["GlobalMaxPool", "GlobalAveragePool"])
@pytest.mark.parametrize("shape", [(1, 16, 508), (2, 4, 3, 5, 6)])
def test_global_pooling_over_1d_and_3d(op, shape):
    # A 1-D convolutional classifier pools [1, C, L]; a 3-D network [N, C, D, H, W].
    x = np.random.default_rng().standard_normal(shape).astype("float32")
    out_shape = shape[:2] + (1,) * (len(shape) - 2)
    m = model_of([helper.make_node(op, ["x"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    got, want = compare(m, {"x": x}, out_shape, "float32")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_binary_ops_of_opset_6_broadcast_by_axis():
    # Before opset 7, B's shape is a run of A's placed at `axis` (here [C] on axis 1 of NCHW).
    rng = np.random.default_rng()
    a = rng.standard_normal((2, 3, 4, 5)).astype("float32")
    b = rng.standard_normal(3).astype("float32")
    c = rng.standard_normal((4, 5)).astype("float32")
    nodes = [helper.make_node("Add", ["a", "b"], ["ab"], broadcast=1, axis=1),
             helper.make_node("Mul", ["ab", "c"], ["y"], broadcast=1)]
    m = model_of(nodes,
                 [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape),
                  helper.make_tensor_value_info("b", TensorProto.FLOAT, b.shape),
                  helper.make_tensor_value_info("c", TensorProto.FLOAT, c.shape)],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, a.shape)], opset=6)
    lib = kiln.onnx.compile(m.SerializeToString(), target="llvm -mcpu=native")
    gm = GraphModule(lib["default"](kiln.cpu()))
    for k, v in {"a": a, "b": b, "c": c}.items():
        gm.set_input(k, v)
    out = np.full(a.shape, np.nan, dtype="float32")
    gm.run()
    gm.get_output(0, out)
    np.testing.assert_allclose(out, (a + b[None, :, None, None]) * c, rtol=1e-6)


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                                "ReduceLogSumExp"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_derived_reductions(op, keepdims):
    rng = np.random.default_rng()
    x = rng.uniform(0.5, 30.0, size=(3, 4, 5)).astype("float32")
    axes = numpy_helper.from_array(np.array([0, 2], dtype="int64"), "axes")
    out_shape = (1, 4, 1) if keepdims else (4,)
    m = model_of([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], [axes],
                 opset=18)
    got, want = compare(m, {"x": x}, out_shape, "float32")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
