"""Convolutions and poolings over 1, 2 and 3 spatial axes (Conv, ConvTranspose, MaxPool,
AveragePool, LpPool), each a one-node ONNX model compiled by Kiln and compared with onnxruntime
on fresh random inputs and weights, outputs poisoned first. Kiln's graph convolves and pools over
two axes; 3-D ones are reduced to those (depth windows stacked as channels, separable pooling),
so the cases mix groups, strides, dilations, asymmetric pads, ceil mode and output padding on
every axis, the depth axis included. DepthToSpace in both modes, an upsampling ConvTranspose
chain that computes in channel blocks, and DepthToSpace's bad attributes."""

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def run_both(node, x, out_rank, initializers=(), opset=19, reference=None):
    """(Kiln's output, the reference's) of a one-node model with input `x` and output `y`; the
    reference is onnxruntime unless `reference` (a function of `x`) is given."""
    out_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * out_rank)
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [out_info], initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    if reference is None:
        want = ort.InferenceSession(m.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    else:
        want = reference(x)
    lib = kiln.onnx.compile(m.SerializeToString(), target="llvm -mcpu=native")
    gm = GraphModule(lib["default"](kiln.cpu()))
    gm.set_input("x", x)
    out = np.full(want.shape, np.nan, dtype="float32")
    gm.run()
    gm.get_output(0, out)
    return out, want


CONVS = [
    # (input shape, out channels, kernel, attributes)
    ((1, 3, 7), 4, (3,), dict(strides=[2], pads=[1, 2], dilations=[2])),
    ((2, 4, 5, 6, 7), 6, (3, 2, 3), dict(pads=[1, 0, 1, 0, 1, 1])),
    ((1, 4, 7, 5, 6), 4, (3, 3, 2), dict(group=2, strides=[2, 1, 2], dilations=[2, 1, 1])),
    ((1, 6, 4, 4, 4), 6, (2, 3, 3), dict(group=6, auto_pad="SAME_UPPER")),
    ((1, 2, 3, 4, 5), 3, (1, 1, 1), dict()),
]


@pytest.mark.parametrize("shape,cout,kernel,attrs", CONVS)
def test_conv_any_rank(shape, cout, kernel, attrs):
    rng = np.random.default_rng()
    g = attrs.get("group", 1)
    w = rng.standard_normal((cout, shape[1] // g, *kernel)).astype("float32")
    b = rng.standard_normal(cout).astype("float32")
    x = rng.standard_normal(shape).astype("float32")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=list(kernel), **attrs)
    got, want = run_both(node, x, len(shape),
                         [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


CONV_TRANSPOSES = [
    ((1, 3, 5), 2, (3,), dict(strides=[2], output_padding=[1], pads=[1, 0])),
    ((1, 2, 3, 4, 3), 3, (3, 2, 2), dict(strides=[2, 1, 2], pads=[1, 0, 0, 0, 1, 1])),
    ((2, 4, 3, 3, 2), 2, (2, 3, 3), dict(group=2, strides=[3, 2, 1], dilations=[2, 1, 2],
                                         output_padding=[1, 1, 0])),
    ((1, 2, 2, 3, 3), 2, (3, 3, 3), dict(strides=[2, 2, 2], output_shape=[6, 7, 8])),
    # 2-D, in output phases (sub-pixel convolutions), 16 channels so that they compute in
    # channel blocks: one convolution of 2x2 taps per phase (4x4, stride 2, cropped by the
    # pads); separate phases of 2x2, 2x1, 1x2 and 1x1 taps (3x3, stride 2, output padding);
    # a kernel shorter than its stride (phases without taps); rectangular strides and kernels
    # with asymmetric pads; a kernel equal to its stride; dilation (the input dilated instead).
    ((1, 16, 6, 7), 16, (4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ((2, 16, 5, 6), 16, (3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])),
    ((1, 8, 4, 5), 16, (1, 1), dict(strides=[2, 2])),
    ((1, 16, 5, 4), 8, (3, 5), dict(strides=[2, 3], pads=[0, 2, 1, 1], output_padding=[1, 2])),
    ((1, 16, 3, 5), 16, (3, 3), dict(strides=[3, 3])),
    ((1, 16, 5, 5), 16, (3, 3), dict(strides=[2, 2], dilations=[2, 2], pads=[1, 0, 0, 1])),
    # Grouped: a phase convolution of 4 groups each; depthwise (the bilinear upsampling of a
    # segmentation head).
    ((1, 16, 5, 6), 4, (3, 3), dict(group=4, strides=[2, 2], pads=[1, 1, 1, 1],
                                    output_padding=[1, 1])),
    ((1, 16, 6, 5), 1, (4, 4), dict(group=16, strides=[2, 2], pads=[1, 1, 1, 1])),
    # Stride 1: one phase, the flipped kernel.
    ((1, 16, 5, 6), 16, (3, 3), dict(pads=[1, 0, 1, 2])),
    # Grouped, kernels shorter than the stride: phases past the kernel get a zero tap.
    ((1, 16, 4, 5), 8, (1, 1), dict(group=2, strides=[2, 2])),
    ((1, 16, 3, 4), 1, (3, 3), dict(group=16, strides=[4, 4], pads=[1, 0, 1, 2])),
    # 1-D along one row: phases of 3 and 2 taps, in channel blocks.
    ((1, 16, 9), 16, (5,), dict(strides=[2], pads=[2, 1], output_padding=[1])),
]


@pytest.mark.parametrize("shape,cout_per_group,kernel,attrs", CONV_TRANSPOSES)
def test_conv_transpose_any_rank(shape, cout_per_group, kernel, attrs):
    rng = np.random.default_rng()
    g = attrs.get("group", 1)
    w = rng.standard_normal((shape[1], cout_per_group, *kernel)).astype("float32")
    b = rng.standard_normal(cout_per_group * g).astype("float32")
    x = rng.standard_normal(shape).astype("float32")
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=list(kernel),
                            **attrs)
    got, want = run_both(node, x, len(shape),
                         [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


POOLS = [
    ("MaxPool", (1, 2, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1], ceil_mode=1)),
    ("MaxPool", (2, 3, 6, 7, 8), dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2],
                                      dilations=[1, 2, 1], pads=[1, 0, 1, 1, 1, 0])),
    ("AveragePool", (1, 2, 7, 6, 5), dict(kernel_shape=[3, 3, 2], strides=[2, 2, 2],
                                          pads=[1, 1, 0, 1, 0, 1], ceil_mode=1)),
    ("AveragePool", (1, 2, 7, 6, 5), dict(kernel_shape=[3, 3, 2], strides=[2, 2, 1],
                                          pads=[1, 1, 1, 1, 1, 1], count_include_pad=1)),
    ("AveragePool", (1, 3, 5, 5, 5, 4), dict(kernel_shape=[2, 3, 2, 2], strides=[1, 2, 2, 1])),
    ("LpPool", (1, 2, 6, 5, 4), dict(kernel_shape=[2, 3, 2], strides=[2, 1, 1], p=3,
                                     pads=[0, 1, 1, 1, 1, 0])),
    ("LpPool", (1, 3, 8, 7), dict(kernel_shape=[3, 2], auto_pad="SAME_LOWER")),
]


@pytest.mark.parametrize("op,shape,attrs", POOLS)
def test_pooling_any_rank(op, shape, attrs):
    x = np.random.default_rng().standard_normal(shape).astype("float32")
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    reference = None
    if len(shape) > 5:
        # onnxruntime pools at most 3 spatial axes: the reference is a loop over windows.
        reference = lambda x: avg_pool_reference(x, attrs["kernel_shape"], attrs["strides"])
    got, want = run_both(node, x, len(shape), reference=reference)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def avg_pool_reference(x, kernel, strides):
    """Unpadded average pooling over every spatial axis, by a loop over output positions."""
    spatial = x.shape[2:]
    out_sp = [(n - k) // s + 1 for n, k, s in zip(spatial, kernel, strides)]
    out = np.empty(x.shape[:2] + tuple(out_sp), dtype="float64")
    for idx in np.ndindex(*out_sp):
        sl = tuple(slice(i * s, i * s + k) for i, k, s in zip(idx, kernel, strides))
        out[(slice(None), slice(None)) + idx] = x[(slice(None), slice(None)) + sl].mean(
            axis=tuple(range(2, x.ndim)))
    return out.astype("float32")


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lp_pool(p):
    x = np.random.default_rng().standard_normal((2, 3, 4, 5, 3)).astype("float32")
    node = helper.make_node("GlobalLpPool", ["x"], ["y"], p=p)
    reference = lambda x: (np.abs(x.astype("float64")) ** p).sum(  # noqa: E731
        axis=(2, 3, 4), keepdims=True) ** (1.0 / p)
    got, want = run_both(node, x, 5, reference=lambda x: reference(x).astype("float32"))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,block,shape", [("DCR", 2, (2, 12, 3, 5)), ("CRD", 2, (1, 8, 4, 3)),
                                              ("DCR", 3, (1, 18, 2, 2))])
def test_depth_to_space_modes(mode, block, shape):
    x = np.random.default_rng().standard_normal(shape).astype("float32")
    node = helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=block, mode=mode)
    got, want = run_both(node, x, 4)
    np.testing.assert_array_equal(got, want)


def test_upsampling_conv_transpose_in_channel_blocks():
    # A 3x3 convolution of whole channel blocks, then a ConvTranspose whose kernel equals its
    # stride (a 1x1 convolution and a block-moving pixel shuffle), then one to a single channel
    # (a head of less than one block reading the blocks), as a DBNet-style detector ends.
    rng = np.random.default_rng()
    c = 32
    x = rng.standard_normal((1, 3, 10, 12)).astype("float32")
    w = [numpy_helper.from_array(rng.standard_normal(s).astype("float32") * 0.3, n)
         for n, s in [("w0", (c, 3, 3, 3)), ("w1", (c, c, 2, 2)), ("w2", (c, 1, 2, 2))]]
    b = numpy_helper.from_array(rng.standard_normal(c).astype("float32"), "b1")
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("ConvTranspose", ["r0", "w1", "b1"], ["t1"], strides=[2, 2]),
             helper.make_node("Relu", ["t1"], ["r1"]),
             helper.make_node("ConvTranspose", ["r1", "w2"], ["t2"], strides=[2, 2]),
             helper.make_node("Sigmoid", ["t2"], ["y"])]
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=w + [b])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for target in ["llvm -mcpu=native", "llvm -mcpu=x86-64-v3"]:
        lib = kiln.onnx.compile(m.SerializeToString(), target=target)
        gm = GraphModule(lib["default"](kiln.cpu()))
        gm.set_input("x", x)
        out = np.full(want.shape, np.nan, dtype="float32")
        gm.run()
        gm.get_output(0, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5, err_msg=target)


@pytest.mark.parametrize("attrs,why", [
    (dict(blocksize=0), "blocksize must be >= 1"),
    (dict(blocksize=3), "divisible by blocksize squared"),
    (dict(blocksize=2, mode="XYZ"), "mode DCR or CRD"),
])
def test_depth_to_space_bad_attributes_name_the_node(attrs, why):
    node = helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s", **attrs)
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 9
    with pytest.raises(ValueError, match=why) as info:
        kiln.onnx.compile(m.SerializeToString())
    assert "node 'd2s' (DepthToSpace)" in str(info.value)
