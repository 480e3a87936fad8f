#!/usr/bin/env python3
"""Benchmark networks of the architectures users deploy, built with onnx.helper as PyTorch and
Paddle export them, with seeded random weights, plus onnxruntime references.

    make_arch.py OUTDIR [NAME ...]

NAME (default: all):
- `yolo`: a YOLOv8-style detector on 1x3x320x320: SiLU convolutions (stride-2 stages 16-32-64-
  128 channels), C2f blocks (Split, bottlenecks with residual adds, Concat), SPPF (three chained
  5x5 max pools), a nearest Resize x2 feature-pyramid path and a head reshaped and transposed.
- `dbnet`: a DBNet-style text detector on 1x3x320x320: Conv-BN-ReLU stages, a feature pyramid
  of bilinear Resize x2 and residual adds, then two ConvTranspose 2x2 stride 2 (24 channels) and
  a Sigmoid probability map.
- `svtr`: an SVTR/CRNN-style text recognizer on 1x3x32x320: a convolutional stem to [1, 64, 8,
  80], two pre-norm transformer blocks over the 640 tokens at 64 features (2 heads), average
  pooling of the height, and a 6625-class classifier with Softmax over 80 time steps.
- `bert`: a BERT/MiniLM-style encoder: token ids [1, 128] through a 1000-row embedding, two
  post-norm layers of hidden 384, 6 heads, FFN 1536 with erf GELU.
- `vit`: a ViT-Tiny-style image classifier on 1x3x224x224: a 16x16 stride-16 patch
  convolution to 196 tokens of 192 features, a class token (197 tokens, a count no vector
  divides), position embeddings, four pre-norm layers of 3 heads and MLP 768 with erf GELU, the
  class token's LayerNormalization and a 1000-class Gemm.
- `mobilenet`: a MobileNetV2 (width 1.0) on 1x3x224x224: inverted residual blocks (1x1
  expansion, 3x3 depthwise at stride 1 or 2, 1x1 projection, residual adds), Conv-BN with
  ReLU6 as Clip(0, 6), global average pooling and a 1000-class Gemm.

Writes OUTDIR/NAME.onnx, OUTDIR/NAME.input.npy and OUTDIR/NAME.expected_0.npy (onnxruntime at
one thread), the layout of make_zoo.py, for bench/models.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_net import Net  # noqa: E402

SEED = 20261125
NAMES = ["yolo", "dbnet", "svtr", "bert", "mobilenet", "vit"]


def c2f(net, x, c, n=1):
    """YOLOv8's C2f: 1x1 conv, Split in halves, n bottlenecks on the second, Concat, 1x1."""
    y = net.silu(net.conv(x, c, c, 1))
    a, b = net.op("Split", [y, net.const([c // 2, c // 2], "int64")], n_out=2, axis=1)
    parts = [a, b]
    for _ in range(n):
        h = net.silu(net.conv(parts[-1], c // 2, c // 2, 3))
        h = net.silu(net.conv(h, c // 2, c // 2, 3))
        parts.append(net.op("Add", [parts[-1], h]))
    cat = net.op("Concat", parts, axis=1)
    return net.silu(net.conv(cat, (2 + n) * c // 2, c, 1))


def yolo():
    net = Net(SEED)
    x = net.silu(net.conv("x", 3, 16, 3, stride=2))             # 160
    x = net.silu(net.conv(x, 16, 32, 3, stride=2))              # 80
    p3 = c2f(net, x, 32)
    x = net.silu(net.conv(p3, 32, 64, 3, stride=2))             # 40
    p4 = c2f(net, x, 64)
    x = net.silu(net.conv(p4, 64, 128, 3, stride=2))            # 20
    x = c2f(net, x, 128)
    s = net.silu(net.conv(x, 128, 64, 1))                        # SPPF
    m1 = net.op("MaxPool", [s], kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1])
    m2 = net.op("MaxPool", [m1], kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1])
    m3 = net.op("MaxPool", [m2], kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1])
    p5 = net.silu(net.conv(net.op("Concat", [s, m1, m2, m3], axis=1), 256, 128, 1))
    up = net.op("Resize", [p5, "", net.const([1, 1, 2, 2], "float32")], mode="nearest")
    f4 = c2f(net, net.silu(net.conv(net.op("Concat", [up, p4], axis=1), 192, 64, 1)), 64)
    head = net.conv(f4, 64, 3 * 85, 1)                           # 3 anchors x 85
    r = net.op("Reshape", [head, net.const([1, 3, 85, 40 * 40], "int64")])
    y = net.op("Sigmoid", [net.op("Transpose", [r], perm=[0, 1, 3, 2])])
    return net.model([("x", [1, 3, 320, 320])], y, 4, name="yolo")


def dbnet():
    net = Net(SEED)
    relu = lambda v: net.op("Relu", [v])  # noqa: E731
    cbr = lambda x, ci, co, s=1: relu(net.bn(net.conv(x, ci, co, 3, stride=s, bias=False), co))  # noqa: E731
    c1 = cbr(cbr("x", 3, 16, 2), 16, 16)                         # 160
    c2 = cbr(cbr(c1, 16, 24, 2), 24, 24)                         # 80
    c3 = cbr(cbr(c2, 24, 32, 2), 32, 32)                         # 40
    c4 = cbr(cbr(c3, 32, 64, 2), 64, 64)                         # 20
    lat = lambda x, c: net.conv(x, c, 24, 1, bias=False)  # noqa: E731
    up = lambda x: net.op("Resize", [x, "", net.const([1, 1, 2, 2], "float32")],  # noqa: E731
                          mode="linear", coordinate_transformation_mode="half_pixel")
    p4 = lat(c4, 64)
    p3 = net.op("Add", [up(p4), lat(c3, 32)])
    p2 = net.op("Add", [up(p3), lat(c2, 24)])
    f = cbr(p2, 24, 24)                                          # 80
    t1 = relu(net.bn(net.op("ConvTranspose", [f, net.weight((24, 24, 2, 2)), net.weight((24,), 0.1)],
                            kernel_shape=[2, 2], strides=[2, 2]), 24))   # 160
    t2 = net.op("ConvTranspose", [t1, net.weight((24, 1, 2, 2)), net.weight((1,), 0.1)],
                kernel_shape=[2, 2], strides=[2, 2])             # 320
    return net.model([("x", [1, 3, 320, 320])], net.op("Sigmoid", [t2]), 4, name="dbnet")


def attention(net, x, tokens, c, heads):
    """Multi-head self-attention on [1, tokens, c] as exported (Reshape/Transpose heads)."""
    d = c // heads
    split = net.const([1, tokens, heads, d], "int64")
    to_heads = lambda t: net.op("Transpose", [net.op("Reshape", [t, split])],  # noqa: E731
                                perm=[0, 2, 1, 3])
    q, k, v = (to_heads(net.linear(x, c, c)) for _ in range(3))
    kt = net.op("Transpose", [k], perm=[0, 1, 3, 2])
    s = net.op("Div", [net.op("MatMul", [q, kt]), net.const(np.sqrt(d), "float32")])
    p = net.op("Softmax", [s], axis=-1)
    a = net.op("Transpose", [net.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    a = net.op("Reshape", [a, net.const([1, tokens, c], "int64")])
    return net.linear(a, c, c)


def svtr():
    net = Net(SEED)
    x = net.op("Relu", [net.bn(net.conv("x", 3, 32, 3, stride=2, bias=False), 32)])   # 16x160
    x = net.op("Relu", [net.bn(net.conv(x, 32, 64, 3, stride=2, bias=False), 64)])   # 8x80
    tokens, c = 8 * 80, 64
    t = net.op("Transpose", [net.op("Reshape", [x, net.const([1, c, tokens], "int64")])],
               perm=[0, 2, 1])                                   # [1, 640, 64]
    for _ in range(2):
        t = net.op("Add", [t, attention(net, net.layer_norm(t, c), tokens, c, 2)])
        h = net.gelu(net.linear(net.layer_norm(t, c), c, 4 * c))
        t = net.op("Add", [t, net.linear(h, 4 * c, c)])
    g = net.op("Reshape", [net.op("Transpose", [t], perm=[0, 2, 1]),
                           net.const([1, c, 8, 80], "int64")])
    g = net.op("AveragePool", [g], kernel_shape=[8, 1], strides=[8, 1])    # [1, 64, 1, 80]
    seq = net.op("Transpose", [net.op("Squeeze", [g, net.const([2], "int64")])], perm=[0, 2, 1])
    logits = net.linear(seq, c, 6625)                            # [1, 80, 6625]
    return net.model([("x", [1, 3, 32, 320])], net.op("Softmax", [logits], axis=-1), 3,
                     name="svtr")


def bert():
    net = Net(SEED)
    seq, c, heads, ffn, vocab = 128, 384, 6, 1536, 1000
    h = net.op("Gather", [net.weight((vocab, c), 1.0), "x"], axis=0)      # [1, seq, c]
    h = net.layer_norm(net.op("Add", [h, net.weight((1, seq, c), 0.1)]), c)
    for _ in range(2):
        h = net.layer_norm(net.op("Add", [h, attention(net, h, seq, c, heads)]), c)
        f = net.linear(net.gelu(net.linear(h, c, ffn)), ffn, c)
        h = net.layer_norm(net.op("Add", [h, f]), c)
    return net.model([("x", [1, seq])], h, 3, name="bert", dtype=TensorProto.INT64)


def mobilenet():
    net = Net(SEED)

    def cbr(x, ci, co, k=1, stride=1, group=1, act=True):
        y = net.bn(net.conv(x, ci, co, k, stride=stride, bias=False, group=group), co)
        return net.op("Clip", [y, net.const(0.0, "float32"), net.const(6.0, "float32")]) if act else y

    x, c = cbr("x", 3, 32, 3, stride=2), 32                       # 112
    for t, co, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                        (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            h = x if t == 1 else cbr(x, c, c * t, 1)
            h = cbr(h, c * t, c * t, 3, stride=s if i == 0 else 1, group=c * t)
            h = cbr(h, c * t, co, 1, act=False)
            x, c = (net.op("Add", [x, h]) if i > 0 else h), co
    x = cbr(x, 320, 1280, 1)                                      # 7x7
    x = net.op("Flatten", [net.op("GlobalAveragePool", [x])], axis=1)
    y = net.op("Gemm", [x, net.weight((1000, 1280)), net.weight((1000,), 0.1)], transB=1)
    return net.model([("x", [1, 3, 224, 224])], y, 2, name="mobilenet")


def vit():
    net = Net(SEED)
    c, tokens, heads = 192, 197, 3
    p = net.conv("x", 3, c, 16, stride=16, pad=0)                # [1, 192, 14, 14]
    t = net.op("Transpose", [net.op("Reshape", [p, net.const([1, c, 196], "int64")])],
               perm=[0, 2, 1])                                   # [1, 196, 192]
    t = net.op("Concat", [net.weight((1, 1, c), 1.0), t], axis=1)
    t = net.op("Add", [t, net.weight((1, tokens, c), 0.1)])
    for _ in range(4):
        t = net.op("Add", [t, attention(net, net.layer_norm(t, c), tokens, c, heads)])
        h = net.gelu(net.linear(net.layer_norm(t, c), c, 4 * c))
        t = net.op("Add", [t, net.linear(h, 4 * c, c)])
    cls = net.op("Gather", [net.layer_norm(t, c), net.const(0, "int64")], axis=1)  # [1, 192]
    y = net.op("Gemm", [cls, net.weight((1000, c)), net.weight((1000,), 0.1)], transB=1)
    return net.model([("x", [1, 3, 224, 224])], y, 2, name="vit")


BUILDERS = {"yolo": yolo, "dbnet": dbnet, "svtr": svtr, "bert": bert, "mobilenet": mobilenet,
            "vit": vit}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    import onnxruntime as ort

    for name in sys.argv[2:] or NAMES:
        model = BUILDERS[name]()
        path = os.path.join(out, f"{name}.onnx")
        onnx.save(model, path)
        inp = model.graph.input[0]
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        rng = np.random.default_rng(SEED)
        if inp.type.tensor_type.elem_type == TensorProto.INT64:
            x = rng.integers(0, 1000, shape).astype(np.int64)
        else:
            x = rng.standard_normal(shape).astype(np.float32)
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        y = sess.run(None, {inp.name: x})[0]
        np.save(os.path.join(out, f"{name}.input.npy"), x)
        np.save(os.path.join(out, f"{name}.expected_0.npy"), y)
        print(name, list(y.shape))


if __name__ == "__main__":
    main()
