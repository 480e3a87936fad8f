"""Zero-size tensors through Kiln: graph inputs, initializers and intermediates with an axis of
extent 0 are imported, typed, compiled and run (kernels whose loops have a zero extent do
nothing; outputs with elements that depend on empty inputs, a MatMul over an empty inner axis,
a sum over an empty axis, are still written). Each model runs on fresh random inputs and is
compared with onnxruntime and with numpy; outputs that have elements are poisoned (NaN) in
Kiln's own output buffers before the run."""

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng()


def model(nodes, inputs, outputs, inits=(), opset=18):
    """A float32 model of `nodes` over `inputs` (name, shape) and initializers `inits`."""
    graph = helper.make_graph(
        nodes, "empty",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def run(m, feeds, want):
    """Kiln's outputs of `m` on `feeds`, checked against onnxruntime's and against `want`
    (numpy's); Kiln's output buffers are poisoned first."""
    ref = ort.InferenceSession(m.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, feeds)
    lib = kiln.onnx.compile(m.SerializeToString(), {k: v.shape for k, v in feeds.items()},
                            target="llvm")
    gm = GraphModule(lib["default"](kiln.cpu()))
    assert gm.get_num_outputs() == len(want)
    for i, w in enumerate(want):
        out = gm.get_output(i)
        assert tuple(out.shape) == w.shape
        out.copyfrom(np.full(w.shape, np.nan, dtype=w.dtype))
    for k, v in feeds.items():
        gm.set_input(k, v)
    gm.run()
    for i, (r, w) in enumerate(zip(ref, want)):
        got = gm.get_output(i).numpy()
        assert got.shape == r.shape == w.shape
        assert got.dtype == w.dtype
        np.testing.assert_allclose(got, r, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("shape,target", [
    ((0, 3, 4), (3, 4, 0)),
    ((2, 0, 5), (0, 10)),
    ((3, 0), (0, 5)),
])
def test_reshape_allowzero_to_an_empty_shape(shape, target):
    x = rand(*shape)
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1)], [("x", shape)],
              ["y"], [numpy_helper.from_array(np.array(target, "int64"), "s")])
    run(m, {"x": x}, [x.reshape(target)])


def test_reshape_copies_an_empty_axis():
    n = int(RNG.integers(2, 6))
    x = rand(0, n, 4)
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", (0, n, 4))], ["y"],
              [numpy_helper.from_array(np.array([0, 4, n], "int64"), "s")])
    run(m, {"x": x}, [x.reshape(0, 4, n)])


def test_elementwise_chain_on_an_empty_batch():
    n = int(RNG.integers(1, 9))
    x, b = rand(0, n), rand(1, n)
    m = model([helper.make_node("Relu", ["x"], ["r"]),
               helper.make_node("Add", ["r", "b"], ["s"]),
               helper.make_node("Softmax", ["s"], ["y"], axis=-1)],
              [("x", (0, n)), ("b", (1, n))], ["y"])
    s = np.maximum(x, 0) + b
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    run(m, {"x": x, "b": b}, [e / e.sum(axis=-1, keepdims=True)])


def test_matmul_over_an_empty_inner_axis_is_zero():
    m_, n = int(RNG.integers(1, 7)), int(RNG.integers(1, 7))
    a, b = rand(m_, 0), rand(0, n)
    m = model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", (m_, 0)), ("b", (0, n))],
              ["y"])
    run(m, {"a": a, "b": b}, [a @ b])


def test_sum_over_an_empty_axis_is_zero():
    n = int(RNG.integers(1, 7))
    x = rand(n, 0)
    m = model([helper.make_node("ReduceSum", ["x", "a"], ["y"], keepdims=0)], [("x", (n, 0))],
              ["y"], [numpy_helper.from_array(np.array([1], "int64"), "a")])
    run(m, {"x": x}, [x.sum(axis=1)])


def test_concat_and_split_with_empty_parts():
    n = int(RNG.integers(1, 6))
    x, y = rand(0, 3), rand(n, 3)
    m = model([helper.make_node("Concat", ["x", "y"], ["c"], axis=0),
               helper.make_node("Split", ["c", "k"], ["p", "q", "r"], axis=0),
               helper.make_node("Neg", ["q"], ["nq"])],
              [("x", (0, 3)), ("y", (n, 3))], ["p", "nq", "r"],
              [numpy_helper.from_array(np.array([0, n, 0], "int64"), "k")])
    c = np.concatenate([x, y])
    run(m, {"x": x, "y": y}, [c[:0], -c, c[n:]])
