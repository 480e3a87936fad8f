"""Transposes whose output rows read across the input's rows (attention's K transposed behind
its head reshape, a sequence's channels to rows, plain 2-D and 3-D permutations, one with an
elementwise op after it): Kiln runs them in tiles of input lines by output vectors. Each model
is compiled for this CPU and for AVX2 code, run on fresh random inputs with its output
poisoned first, and compared with numpy, exactly where nothing but data movement happens."""

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

TARGETS = ["llvm -mcpu=native", "llvm -mcpu=x86-64-v3"]


def run(nodes, x, consts, target):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    lib = kiln.onnx.compile(m.SerializeToString(), target=target)
    gm = GraphModule(lib["default"](kiln.cpu()))
    gm.set_input("x", x)
    shape = gm.get_output(0).numpy().shape
    # The library writes straight into a NaN-filled array: an element it skips stays NaN.
    buf = np.empty(int(np.prod(shape)) + 16, dtype="float32")
    start = (-buf.ctypes.data % 64) // 4
    out = buf[start:start + int(np.prod(shape))].reshape(shape)
    out[...] = np.nan
    gm.set_output_zero_copy(0, out)
    gm.run()
    return out.copy()


# (input shape, reshape to or None, permutation)
CASES = [
    ((1, 128, 256), (1, 128, 4, 64), (0, 2, 3, 1)),   # attention's K: rows of a line apart
    ((1, 80, 96), (1, 80, 2, 48), (0, 2, 3, 1)),      # 48 = three lines, no whole tile of two
    ((64, 48), None, (1, 0)),
    ((40, 24), None, (1, 0)),                          # rows of 40: not whole AVX-512 vectors
    ((3, 32, 16), None, (2, 0, 1)),
    ((2, 5, 16, 8), None, (0, 3, 1, 2)),
    ((1, 64, 8, 80), None, (0, 3, 1, 2)),              # a recognizer's channels to a sequence
]


@pytest.mark.parametrize("shape,reshape,perm", CASES)
def test_transpose_matches_numpy(shape, reshape, perm):
    rng = np.random.default_rng()
    x = rng.standard_normal(shape).astype("float32")
    nodes, consts, src = [], {}, "x"
    if reshape is not None:
        consts["s"] = np.array(reshape, "int64")
        nodes.append(helper.make_node("Reshape", ["x", "s"], ["r"]))
        src = "r"
    nodes.append(helper.make_node("Transpose", [src], ["y"], perm=list(perm)))
    want = np.transpose(x.reshape(reshape) if reshape else x, perm)
    for target in TARGETS:
        got = run(nodes, x, consts, target)
        assert got.shape == want.shape, target
        np.testing.assert_array_equal(got, want, err_msg=target)


def test_transpose_with_an_elementwise_op_after_it():
    rng = np.random.default_rng()
    x = rng.standard_normal((2, 96, 32)).astype("float32")
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Sigmoid", ["t"], ["y"])]
    want = 1.0 / (1.0 + np.exp(-np.transpose(x, (0, 2, 1)).astype(np.float64)))
    for target in TARGETS:
        got = run(nodes, x, {}, target)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=target)
