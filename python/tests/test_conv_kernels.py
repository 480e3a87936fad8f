"""1x1 convolutions through ``kiln.onnx.compile`` against numpy (float64) on random inputs, for
every x86 vector width the host runs: planes of whole vectors and of a shorter last vector
(14x14 is 12 vectors of 16 and 4 positions), groups whose filters are whole vector blocks or
not (34 and 68 filters a group pad blocks of 16), with a bias, ReLU and a residual add fused.
These shapes reach the spatial kernel's last tile (predicated vector code accumulating in a
register tile) and the channel-blocked kernel. Each library runs twice on different inputs,
so an element the second run does not write still holds the first run's value and fails."""

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule
from host_cpu import host_flags

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper

rng = np.random.default_rng(23)

TARGETS = ["llvm -mcpu=x86-64-v3"]
if "avx512f" in host_flags():
    TARGETS.append("llvm -mcpu=x86-64-v4")
if not {"avx2", "fma"} <= host_flags():
    TARGETS = ["llvm"]


def conv_model(c, o, groups, h, w, residual):
    """Conv 1x1 (c -> o in `groups`) + bias + ReLU (+ a residual input before the ReLU)."""
    weight = (rng.standard_normal((o, c // groups, 1, 1)) / np.sqrt(c // groups)).astype("float32")
    bias = rng.standard_normal(o).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=groups)]
    inputs = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, c, h, w])]
    last = "c"
    if residual:
        inputs.append(helper.make_tensor_value_info("r", onnx.TensorProto.FLOAT, [1, o, h, w]))
        nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
        last = "s"
    nodes.append(helper.make_node("Relu", [last], ["y"]))
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_empty_tensor_value_info("y")],
        initializer=[numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, weight, bias


def reference(x, weight, bias, groups, r):
    n, c, h, w = x.shape
    o = weight.shape[0]
    cpg, opg = c // groups, o // groups
    xs = x.astype(np.float64).reshape(n, groups, cpg, h * w)
    ws = weight.astype(np.float64).reshape(groups, opg, cpg)
    y = np.einsum("goc,ngcp->ngop", ws, xs).reshape(n, o, h, w) + bias[None, :, None, None]
    if r is not None:
        y = y + r
    return np.maximum(y, 0.0)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c,o,groups,h,w,residual", [
    (272, 272, 4, 14, 14, False),  # 68 filters a group, 196 positions
    (272, 272, 4, 14, 14, True),
    (136, 136, 4, 14, 14, False),  # 34 filters a group
    (136, 136, 4, 28, 28, True),   # a large plane
    (272, 272, 4, 7, 7, False),    # fewer positions than a tile
    (544, 544, 4, 7, 7, True),     # 136 filters a group: whole blocks
    (48, 192, 1, 13, 13, False),   # no groups, 169 positions
    (60, 90, 3, 9, 11, True),      # 30 filters a group, odd plane
])
def test_conv_1x1_matches_numpy(target, c, o, groups, h, w, residual):
    model, weight, bias = conv_model(c, o, groups, h, w, residual)
    shapes = {"x": (1, c, h, w)}
    if residual:
        shapes["r"] = (1, o, h, w)
    lib = kiln.onnx.compile(model.SerializeToString(), shapes, target=target)
    gm = GraphModule(lib["default"](kiln.cpu()))
    for _ in range(2):
        x = rng.standard_normal((1, c, h, w)).astype("float32")
        r = rng.standard_normal((1, o, h, w)).astype("float32") if residual else None
        gm.set_input("x", x)
        if residual:
            gm.set_input("r", r)
        gm.run()
        want = reference(x, weight, bias, groups, r)
        got = gm.get_output(0).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
