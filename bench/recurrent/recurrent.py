"""Recurrent layers at one thread: Kiln against onnxruntime in the same run (median of runs
after warm-up). Prints a markdown table; the CPU is printed first.

    KILN_NUM_THREADS=1 .venv/bin/python bench/recurrent/recurrent.py
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bench_common import cpu_name, median_ms  # noqa: E402
import kiln  # noqa: E402
from kiln.graph_executor import GraphModule  # noqa: E402

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def layer(op, t, b, i, h, direction):
    rng = np.random.default_rng(0)
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    inits = [numpy_helper.from_array(rng.uniform(-0.1, 0.1, (d, g * h, i)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-0.1, 0.1, (d, g * h, h)).astype(np.float32), "R"),
             numpy_helper.from_array(rng.uniform(-0.1, 0.1, (d, 2 * g * h)).astype(np.float32), "B")]
    node = helper.make_node(op, ["x", "W", "R", "B"], ["y", "y_h"], hidden_size=h,
                            direction=direction)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [t, b, i])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [t, d, b, h]),
                               helper.make_tensor_value_info("y_h", TensorProto.FLOAT, [d, b, h])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m, {"x": rng.standard_normal((t, b, i)).astype(np.float32)}


def crnn(width):
    """A CRNN line recognizer: conv stack (64 and 128 channels) over a 32-pixel-high line,
    height folded into channels, bidirectional LSTM (hidden 128), classifier over 97 classes."""
    rng = np.random.default_rng(width)
    f = TensorProto.FLOAT
    w = lambda *s: rng.uniform(-0.1, 0.1, s).astype(np.float32)  # noqa: E731
    hid, classes = 128, 97
    inits = {"c1": w(64, 1, 3, 3), "b1": w(64), "c2": w(128, 64, 3, 3), "b2": w(128),
             "W": w(2, 4 * hid, 128 * 8), "R": w(2, 4 * hid, hid), "B": w(2, 8 * hid),
             "fc": w(2 * hid, classes), "fold": np.array([0, 128 * 8, -1], np.int64),
             "flat": np.array([0, 0, 2 * hid], np.int64)}
    nodes = [
        helper.make_node("Conv", ["img", "c1", "b1"], ["a1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "c2", "b2"], ["a2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 1], strides=[2, 1]),
        helper.make_node("Reshape", ["p2", "fold"], ["seq_ncw"]),
        helper.make_node("Transpose", ["seq_ncw"], ["seq"], perm=[2, 0, 1]),
        helper.make_node("LSTM", ["seq", "W", "R", "B"], ["y"], hidden_size=hid,
                         direction="bidirectional"),
        helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["yt", "flat"], ["feat"]),
        helper.make_node("MatMul", ["feat", "fc"], ["logits"]),
        helper.make_node("LogSoftmax", ["logits"], ["out"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "crnn", [helper.make_tensor_value_info("img", f, [1, 1, 32, width])],
                              [helper.make_tensor_value_info("out", f, [width // 2, 1, classes])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, {"img": rng.uniform(0, 1, (1, 1, 32, width)).astype(np.float32)}


def compare(m, feeds):
    """Kiln's and onnxruntime's median milliseconds for model `m` (outputs checked first)."""
    gm = GraphModule(kiln.onnx.compile(m, {k: v.shape for k, v in feeds.items()})["default"](kiln.cpu()))
    for k, v in feeds.items():
        gm.set_input(k, v)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    gm.run()
    want = sess.run(None, feeds)[0]
    np.testing.assert_allclose(gm.get_output(0).numpy(), want, rtol=1e-3, atol=1e-4)
    return median_ms(gm.run), median_ms(lambda: sess.run(None, feeds))


def main():
    os.environ.setdefault("KILN_NUM_THREADS", "1")
    flags = open("/proc/cpuinfo").read()
    isa = "AVX-512" if "avx512f" in flags else "AVX2"
    print(f"CPU: {cpu_name()} ({isa}), one thread\n")
    print("| layer | T x B x I -> H | Kiln ms | onnxruntime ms | Kiln / ORT |")
    print("| --- | --- | ---: | ---: | ---: |")
    cases = [("LSTM", 200, 1, 512, 256, "bidirectional"),
             ("LSTM", 64, 4, 128, 128, "forward"),
             ("GRU", 200, 1, 512, 256, "bidirectional"),
             ("RNN", 100, 1, 64, 64, "forward")]
    for op, t, b, i, h, direction in cases:
        m, feeds = layer(op, t, b, i, h, direction)
        k, o = compare(m, feeds)
        print(f"| {op} {direction} | {t} x {b} x {i} -> {h} | {k:.3f} | {o:.3f} | {k / o:.2f} |")
    print("\n| CRNN line recognizer (conv 64/128, BiLSTM 128) | width | Kiln ms | onnxruntime ms | Kiln / ORT |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for width in (96, 160, 320, 800):
        k, o = compare(*crnn(width))
        print(f"| static shape | {width} | {k:.3f} | {o:.3f} | {k / o:.2f} |")

if __name__ == "__main__":
    main()
