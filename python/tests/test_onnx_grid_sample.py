"""GridSample, Col2Im and the generator operators (EyeLike, the windows) against onnxruntime on
fresh random inputs: every interpolation mode, padding mode and align_corners setting, 2-D and
3-D images, grid locations well outside [-1, 1] so every padding rule is exercised."""

import itertools

import numpy as np
import pytest

from onnx_run import run_kiln

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402


def _model(nodes, inputs, outputs, opset):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)


CASES_2D = list(itertools.product(["nearest", "linear", "cubic"], ["zeros", "border", "reflection"],
                                  [0, 1]))


def _check_grid_sample(x_shape, grid_shape, grid_range, mode, padding, align):
    rng = np.random.default_rng(hash((mode, padding, align, len(x_shape))) % 2**32)
    x = rng.standard_normal(x_shape).astype(np.float32)
    grid = rng.uniform(-grid_range, grid_range, grid_shape).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding,
                            align_corners=align)
    m = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                        helper.make_tensor_value_info("grid", TensorProto.FLOAT, grid.shape)],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * len(x_shape))], 20)
    feeds = {"x": x, "grid": grid}
    (got,), (want,) = run_kiln(m, feeds), _ort(m, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,padding,align", CASES_2D)
def test_grid_sample_2d(mode, padding, align):
    _check_grid_sample((2, 3, 5, 7), (2, 4, 6, 2), 1.8, mode, padding, align)


@pytest.mark.parametrize("mode,padding,align",
                         list(itertools.product(["nearest", "linear"], ["zeros", "border"], [0, 1])))
def test_grid_sample_3d(mode, padding, align):
    _check_grid_sample((1, 2, 3, 4, 5), (1, 2, 3, 4, 3), 1.5, mode, padding, align)


@pytest.mark.parametrize("strides,dilations,pads", [([1, 1], [1, 1], [0, 0, 0, 0]),
                                                    ([2, 1], [1, 2], [1, 0, 2, 1]),
                                                    ([3, 2], [2, 1], [0, 1, 1, 0])])
def test_col2im(strides, dilations, pads):
    rng = np.random.default_rng(sum(strides + dilations + pads))
    image, block, c = [9, 8], [2, 3], 3
    windows = [(image[a] + pads[a] + pads[a + 2] - dilations[a] * (block[a] - 1) - 1) // strides[a] + 1
               for a in range(2)]
    x = rng.standard_normal((2, c * block[0] * block[1], windows[0] * windows[1])).astype(np.float32)
    consts = [helper.make_tensor("image", TensorProto.INT64, [2], image),
              helper.make_tensor("block", TensorProto.INT64, [2], block)]
    nodes = [helper.make_node("Constant", [], ["image"], value=consts[0]),
             helper.make_node("Constant", [], ["block"], value=consts[1]),
             helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=strides,
                              dilations=dilations, pads=pads)]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 4)], 18)
    (got,), (want,) = run_kiln(m, {"x": x}), _ort(m, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_eye_like_and_windows():
    x = np.zeros((4, 6), np.float32)
    nodes = [helper.make_node("EyeLike", ["x"], ["eye"], k=2, dtype=TensorProto.DOUBLE),
             helper.make_node("Constant", [], ["n"],
                              value=helper.make_tensor("n", TensorProto.INT64, [], [10])),
             helper.make_node("HannWindow", ["n"], ["hann"], periodic=0),
             helper.make_node("HammingWindow", ["n"], ["hamming"]),
             helper.make_node("BlackmanWindow", ["n"], ["blackman"], periodic=0)]
    outs = [helper.make_tensor_value_info(n, t, [None] * r) for n, t, r in
            [("eye", TensorProto.DOUBLE, 2), ("hann", TensorProto.FLOAT, 1),
             ("hamming", TensorProto.FLOAT, 1), ("blackman", TensorProto.FLOAT, 1)]]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)], outs, 17)
    got, want = run_kiln(m, {"x": x}), _ort(m, {"x": x})
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size,align", [([2, 3, 5, 7], 0), ([2, 3, 5, 7], 1), ([2, 1, 3, 4, 5], 0),
                                        ([2, 1, 3, 4, 5], 1),
                                        ([2, 3, 1, 4], 1), ([1, 1, 1, 1, 3], 1)])
def test_affine_grid(size, align):
    rng = np.random.default_rng(len(size) * 2 + align)
    r = len(size) - 2
    theta = rng.standard_normal((size[0], r, r + 1)).astype(np.float32)
    consts = [helper.make_tensor("size", TensorProto.INT64, [len(size)], size)]
    nodes = [helper.make_node("Constant", [], ["size"], value=consts[0]),
             helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)]
    m = _model(nodes, [helper.make_tensor_value_info("theta", TensorProto.FLOAT, theta.shape)],
               [helper.make_tensor_value_info("grid", TensorProto.FLOAT, [None] * (r + 2))], 20)
    (got,), (want,) = run_kiln(m, {"theta": theta}), _ort(m, {"theta": theta})
    assert got.shape == want.shape == (size[0], *size[2:], r)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
