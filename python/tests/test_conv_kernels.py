"""1x1 and 3x3 convolutions through ``kiln.onnx.compile`` against numpy (float64) on random
inputs, for every x86 vector width the host runs. 3x3 layers of whole channel blocks compute
as Winograd F(2x2, 3x3): planes of whole 2x2 tiles and not, padding 0, 1 and asymmetric, two
layers in a row (blocks between them) with a residual. 1x1 layers: planes of whole vectors and of a shorter last vector
(14x14 is 12 vectors of 16 and 4 positions), groups whose filters are whole vector blocks or
not (34 and 68 filters a group pad blocks of 16), with a bias, ReLU and a residual add fused.
These shapes reach the spatial kernel's last tile (predicated vector code accumulating in a
register tile) and the channel-blocked kernel, summed in passes over chunks of the input
channels when a tile's weights exceed L1 (1024 channels); a 1x1 layer between 3x3 layers, in
channel blocks (over flattened positions with AVX2 code). Each library runs twice on different inputs,
so an element the second run does not write still holds the first run's value and fails."""

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule
from host_cpu import host_flags

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper

rng = np.random.default_rng(23)

TARGETS = ["llvm", "llvm -mcpu=x86-64-v3"]
if "avx512f" in host_flags():
    TARGETS.append("llvm -mcpu=x86-64-v4")
if not {"avx2", "fma"} <= host_flags():
    TARGETS = ["llvm"]
# ("llvm": SSE, 4 float32 lanes; x86-64-v3: AVX2, 8; x86-64-v4: AVX-512, 16.)


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
    (1024, 64, 1, 7, 7, True),     # a tile's weights past L1: summed in passes of channels
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


def conv3x3_reference(x, weight, bias, pads):
    """Direct 3x3 convolution (stride 1) in float64, `pads` = (top, left, bottom, right)."""
    t, l, b, r = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, b), (l, r)))
    n, c, h, w = xp.shape
    oh, ow = h - 2, w - 2
    y = np.zeros((n, weight.shape[0], oh, ow))
    for ky in range(3):
        for kx in range(3):
            y += np.einsum("oc,ncyx->noyx", weight[:, :, ky, kx].astype(np.float64),
                           xp[:, :, ky:ky + oh, kx:kx + ow])
    return y + bias[None, :, None, None]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c,o,h,w,pads,chain", [
    (32, 32, 14, 14, (1, 1, 1, 1), False),   # Winograd tiles whole
    (64, 32, 13, 11, (1, 1, 1, 1), False),   # a last tile half outside the plane
    (32, 32, 15, 15, (0, 0, 0, 0), True),    # no padding; two layers in channel blocks
    (32, 64, 14, 9, (0, 1, 2, 1), False),    # asymmetric padding
    (24, 24, 12, 12, (1, 1, 1, 1), False),   # 24 channels: Winograd in blocks of 8 and 4, not 16
    (32, 32, 8, 8, (1, 1, 1, 1), False),     # 16 tiles, too few for Winograd: the direct kernel
    (128, 128, 12, 12, (1, 1, 1, 1), False), # Winograd products of all tiles at once, not in blocks
    (16, 16, 12, 12, (1, 1, 1, 1), False),   # too few channels for Winograd: the direct kernel
])
def test_conv_3x3_matches_numpy(target, c, o, h, w, pads, chain):
    w1 = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype("float32")
    b1 = rng.standard_normal(o).astype("float32")
    w2 = (rng.standard_normal((o, o, 3, 3)) / np.sqrt(9 * o)).astype("float32")
    b2 = rng.standard_normal(o).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=list(pads[:2]) + list(pads[2:])),
             helper.make_node("Relu", ["c1"], ["y1"])]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1")]
    last = "y1"
    if chain:
        nodes += [helper.make_node("Conv", ["y1", "w2", "b2"], ["c2"], pads=list(pads[:2]) + list(pads[2:])),
                  helper.make_node("Add", ["c2", "y1r"], ["y"])]
        # The residual: the first layer's output cropped to the second's plane.
        crop = helper.make_node("Slice", ["y1", "starts", "ends", "axes"], ["y1r"])
        nodes.insert(2, crop)
        oh1, ow1 = h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2
        oh2, ow2 = oh1 + pads[0] + pads[2] - 2, ow1 + pads[1] + pads[3] - 2
        inits += [numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2"),
                  numpy_helper.from_array(np.array([0, 0], np.int64), "starts"),
                  numpy_helper.from_array(np.array([oh2, ow2], np.int64), "ends"),
                  numpy_helper.from_array(np.array([2, 3], np.int64), "axes")]
        last = "y"
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, c, h, w])],
        [helper.make_empty_tensor_value_info(last)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    lib = kiln.onnx.compile(model.SerializeToString(), {"x": (1, c, h, w)}, target=target)
    gm = GraphModule(lib["default"](kiln.cpu()))
    for _ in range(2):
        x = rng.standard_normal((1, c, h, w)).astype("float32")
        gm.set_input("x", x)
        gm.run()
        y1 = np.maximum(conv3x3_reference(x, w1, b1, pads), 0.0)
        want = y1
        if chain:
            y2 = conv3x3_reference(y1, w2, b2, pads)
            want = y2 + y1[:, :, :y2.shape[2], :y2.shape[3]]
        got = gm.get_output(0).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n,c,m,h,w,stride", [
    (1, 64, 32, 7, 7, 1),    # 49 positions: register tiles across rows, a last tile of one
    (2, 32, 48, 14, 14, 1),  # a batch of two; 6 blocks of 8, 3 of 16
    (1, 24, 40, 5, 9, 1),    # an odd plane; 5 blocks of 8
    (1, 32, 32, 1, 13, 1),   # one row
    (1, 32, 48, 9, 11, 2),   # stride 2: the positions read copied together first
])
def test_conv_1x1_between_blocked_layers_matches_numpy(target, n, c, m, h, w, stride):
    """3x3 (c -> m), 1x1 (m -> m, `stride`), 3x3 (m -> c), bias and ReLU each, the input (at
    the stride) added before the last ReLU: the 1x1 layer reads and writes channel blocks,
    where it is computed over flattened positions (with AVX2 code, or with a stride)."""
    shapes = [(m, c, 3, 3), (m, m, 1, 1), (c, m, 3, 3)]
    ws = [(rng.standard_normal(s) / np.sqrt(s[1] * s[2] * s[3])).astype("float32") for s in shapes]
    bs = [rng.standard_normal(s[0]).astype("float32") for s in shapes]
    pad = dict(pads=[1, 1, 1, 1])
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], **pad),
             helper.make_node("Relu", ["c0"], ["y0"]),
             helper.make_node("Conv", ["y0", "w1", "b1"], ["c1"], strides=[stride, stride]),
             helper.make_node("Relu", ["c1"], ["y1"]),
             helper.make_node("Conv", ["y1", "w2", "b2"], ["c2"], **pad),
             helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["xs"]),
             helper.make_node("Add", ["c2", "xs"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    inits = [numpy_helper.from_array(v, f"{k}{i}")
             for i, (wt, b) in enumerate(zip(ws, bs)) for k, v in (("w", wt), ("b", b))]
    inits += [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in
              (("starts", [0, 0]), ("ends", [h, w]), ("axes", [2, 3]), ("steps", [stride] * 2))]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [n, c, h, w])],
        [helper.make_empty_tensor_value_info("y")], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    lib = kiln.onnx.compile(model.SerializeToString(), {"x": (n, c, h, w)}, target=target)
    gm = GraphModule(lib["default"](kiln.cpu()))
    same = (1, 1, 1, 1)
    for _ in range(2):
        x = rng.standard_normal((n, c, h, w)).astype("float32")
        gm.set_input("x", x)
        gm.run()
        y0 = np.maximum(conv3x3_reference(x, ws[0], bs[0], same), 0.0)
        y1 = reference(y0[:, :, ::stride, ::stride], ws[1], bs[1], 1, None)
        want = np.maximum(conv3x3_reference(y1, ws[2], bs[2], same) + x[:, :, ::stride, ::stride], 0.0)
        got = gm.get_output(0).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
