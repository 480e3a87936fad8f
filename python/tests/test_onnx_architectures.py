"""Small networks of the architectures users bring, built with onnx.helper as PyTorch exports
them, compiled by Kiln and compared with onnxruntime on fresh random inputs and weights, outputs
poisoned first: a YOLO-style detector (SiLU convolutions, nearest Resize by `sizes`, a
concatenated feature pyramid, a reshaped and transposed head), a DBNet-style text detector
(BatchNorm, ConvTranspose upsampling, bilinear Resize by `scales`, residual adds), a
MobileNetV2/EfficientNet-style network (inverted residuals: 1x1 expansion, depthwise 3x3 and 5x5
convolutions at strides 1 and 2 in channel blocks, ReLU6 as Clip, residual adds), a 1-D
convolutional file classifier (Conv1d, MaxPool1d, GlobalMaxPool over one axis, Gemm), and an
int8 weight-only MiniLM-style encoder layer (int8 weights dequantized by Cast and Mul, a GatherND
attention mask, IsNaN guards, LayerNormalization)."""

import os
import sys

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, numpy_helper  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "zoo"))
from onnx_net import Net  # noqa: E402


def compare(model, x, rtol=1e-4, atol=1e-4, name="x"):
    """Kiln's output on input `name` = `x`, poisoned first, equals onnxruntime's."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {name: x})[0]
    lib = kiln.onnx.compile(model.SerializeToString(), target="llvm -mcpu=native")
    gm = GraphModule(lib["default"](kiln.cpu()))
    gm.set_input(name, x)
    got = np.full(want.shape, np.nan, dtype="float32")
    gm.run()
    gm.get_output(0, got)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_yolo_style_detector():
    net = Net(seed=np.random.SeedSequence().entropy)
    x = "x"
    c1 = net.silu(net.conv(x, 3, 8, 3, stride=2))            # 32x32
    c2 = net.silu(net.conv(c1, 8, 16, 3, stride=2))          # 16x16
    c3 = net.silu(net.conv(c2, 16, 32, 3, stride=2))         # 8x8
    lat = net.silu(net.conv(c3, 32, 16, 1))
    sizes = net.const([1, 16, 16, 16], "int64")
    up = net.op("Resize", [lat, "", "", sizes], mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    cat = net.op("Concat", [up, c2], axis=1)                  # 32 x 16 x 16
    p = net.silu(net.conv(cat, 32, 16, 3))
    head = net.conv(p, 16, 3 * 7, 1)                          # 3 anchors x (4 box + 1 + 2 cls)
    shape = net.const([1, 3, 7, 16 * 16], "int64")
    r = net.op("Reshape", [head, shape])
    t = net.op("Transpose", [r], perm=[0, 1, 3, 2])
    y = net.op("Sigmoid", [t])
    model = net.model([("x", [1, 3, 64, 64])], y, 4)
    compare(model, np.random.default_rng().standard_normal((1, 3, 64, 64)).astype("float32"))


def test_dbnet_style_text_detector():
    net = Net(seed=np.random.SeedSequence().entropy)
    relu = lambda v: net.op("Relu", [v])  # noqa: E731
    c1 = relu(net.bn(net.conv("x", 3, 8, 3, stride=2, bias=False), 8))    # 24x40
    c2 = relu(net.bn(net.conv(c1, 8, 16, 3, stride=2, bias=False), 16))   # 12x20
    c3 = relu(net.bn(net.conv(c2, 16, 16, 3, stride=2, bias=False), 16))  # 6x10
    scales = net.const([1, 1, 2, 2], "float32")
    up = net.op("Resize", [c3, "", scales], mode="linear",
                coordinate_transformation_mode="pytorch_half_pixel")
    fused = net.op("Add", [up, c2])
    f = relu(net.bn(net.conv(fused, 16, 8, 3, bias=False), 8))
    t1 = net.op("ConvTranspose", [f, net.weight((8, 8, 2, 2)), net.weight((8,), 0.1)],
                kernel_shape=[2, 2], strides=[2, 2])                     # 24x40
    t1 = relu(net.bn(t1, 8))
    t2 = net.op("ConvTranspose", [t1, net.weight((8, 1, 2, 2)), net.weight((1,), 0.1)],
                kernel_shape=[2, 2], strides=[2, 2])                     # 48x80
    y = net.op("Sigmoid", [t2])
    model = net.model([("x", [1, 3, 48, 80])], y, 4)
    compare(model, np.random.default_rng().standard_normal((1, 3, 48, 80)).astype("float32"))


def test_mobilenet_v2_style_inverted_residuals():
    net = Net(seed=np.random.SeedSequence().entropy)

    def cbr(x, ci, co, k=1, stride=1, group=1, act=True):
        y = net.bn(net.conv(x, ci, co, k, stride=stride, bias=False, group=group), co)
        return net.op("Clip", [y, net.const(0.0, "float32"), net.const(6.0, "float32")]) \
            if act else y

    x = cbr("x", 3, 16, 3, stride=2)                                   # 32x32
    for ci, co, k, s in [(16, 32, 3, 2), (32, 32, 3, 1), (32, 32, 5, 1), (32, 48, 5, 2)]:
        h = cbr(x, ci, 6 * ci)                                          # 1x1 expansion
        h = cbr(h, 6 * ci, 6 * ci, k, stride=s, group=6 * ci)            # depthwise
        h = cbr(h, 6 * ci, co, act=False)                               # 1x1 projection
        x = net.op("Add", [x, h]) if ci == co and s == 1 else h
    g = net.op("Flatten", [net.op("GlobalAveragePool", [x])], axis=1)
    y = net.op("Gemm", [g, net.weight((10, 48)), net.weight((10,), 0.1)], transB=1)
    model = net.model([("x", [1, 3, 64, 64])], y, 2)
    compare(model, np.random.default_rng().standard_normal((1, 3, 64, 64)).astype("float32"))


def test_1d_convolutional_file_classifier():
    net = Net(seed=np.random.SeedSequence().entropy)
    c1 = net.op("Relu", [net.conv("x", 16, 32, 5, stride=2, pad=2, dims=1)])   # 254
    p1 = net.op("MaxPool", [c1], kernel_shape=[3], strides=[2], pads=[1, 1])     # 127
    c2 = net.op("Relu", [net.conv(p1, 32, 32, 3, dims=1)])
    g = net.op("GlobalMaxPool", [c2])                                             # 1x32x1
    f = net.op("Flatten", [g], axis=1)
    logits = net.op("Gemm", [f, net.weight((10, 32)), net.weight((10,), 0.1)], transB=1)
    y = net.op("Softmax", [logits], axis=1)
    model = net.model([("x", [1, 16, 508])], y, 2)
    compare(model, np.random.default_rng().standard_normal((1, 16, 508)).astype("float32"),
            rtol=1e-4, atol=1e-6)


def test_int8_weight_only_minilm_style_encoder():
    # Token ids -> embeddings; int8 weights with per-column scales dequantized (Cast, Mul) before
    # each MatMul; an attention mask gathered per token pair with GatherND; IsNaN guards on the
    # scores; LayerNormalization; two heads.
    rng = np.random.default_rng()
    seq, hidden, heads, vocab = 12, 32, 2, 50
    hd = hidden // heads
    net = Net(seed=np.random.SeedSequence().entropy)

    def int8_linear(x, n_in, n_out):
        w = net.name("q")
        net.inits.append(numpy_helper.from_array(
            rng.integers(-127, 128, (n_in, n_out)).astype("int8"), w))
        scale = net.const(rng.uniform(0.5, 1.5, n_out) / (127 * np.sqrt(n_in)), "float32")
        wf = net.op("Mul", [net.op("Cast", [w], to=TensorProto.FLOAT), scale])
        return net.op("Add", [net.op("MatMul", [x, wf]), net.weight((n_out,), 0.1)])

    emb = net.weight((vocab, hidden), 1.0)
    h = net.op("Gather", [emb, "ids"], axis=0)                        # [1, seq, hidden]
    q, k, v = (int8_linear(h, hidden, hidden) for _ in range(3))
    split = net.const([1, seq, heads, hd], "int64")
    to_heads = lambda t: net.op("Transpose", [net.op("Reshape", [t, split])],  # noqa: E731
                                perm=[0, 2, 1, 3])
    qh, kh, vh = to_heads(q), to_heads(k), to_heads(v)
    kt = net.op("Transpose", [kh], perm=[0, 1, 3, 2])
    scores = net.op("Mul", [net.op("MatMul", [qh, kt]), net.const(1 / np.sqrt(hd), "float32")])
    # mask[i, j] = table[segment[i], segment[j]] via GatherND over stacked index pairs.
    pairs = net.name("pairs")
    net.inits.append(numpy_helper.from_array(
        np.stack(np.meshgrid(np.arange(seq) // 4, np.arange(seq) // 4, indexing="ij"),
                 axis=-1).astype("int64"), pairs))
    t = np.where(rng.random((3, 3)) < 0.5, -1e4, 0.0)
    np.fill_diagonal(t, 0.0)  # every token sees its own segment
    table = net.const(t, "float32")
    mask = net.op("GatherND", [table, pairs])                         # [seq, seq]
    scores = net.op("Add", [scores, mask])
    zero = net.const(0.0, "float32")
    scores = net.op("Where", [net.op("IsNaN", [scores]), zero, scores])
    probs = net.op("Softmax", [scores], axis=-1)
    ctx = net.op("Transpose", [net.op("MatMul", [probs, vh])], perm=[0, 2, 1, 3])
    ctx = net.op("Reshape", [ctx, net.const([1, seq, hidden], "int64")])
    out = int8_linear(ctx, hidden, hidden)
    res = net.op("Add", [out, h])
    y = net.op("LayerNormalization", [res, net.const(np.ones(hidden), "float32"),
                                      net.const(np.zeros(hidden), "float32")], axis=-1)
    model = net.model([("ids", [1, seq])], y, 3, name="minilm_int8", dtype=TensorProto.INT64)
    compare(model, rng.integers(0, vocab, (1, seq)).astype("int64"), name="ids")
