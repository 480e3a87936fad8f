"""Recurrent layers at one thread: Kiln against onnxruntime in the same run (median of runs
after warm-up). Prints a markdown table; the CPU is printed first.

    KILN_NUM_THREADS=1 .venv/bin/python bench/recurrent/recurrent.py
"""

import os
import platform
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
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


def median_ms(f, runs=7, warm=2):
    for _ in range(warm):
        f()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


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
        gm = GraphModule(kiln.onnx.compile(m, {"x": feeds["x"].shape})["default"](kiln.cpu()))
        gm.set_input("x", feeds["x"])
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        gm.run()
        want = sess.run(None, feeds)[0]
        np.testing.assert_allclose(gm.get_output(0).numpy(), want, rtol=1e-3, atol=1e-4)
        k = median_ms(gm.run)
        o = median_ms(lambda: sess.run(None, feeds))
        print(f"| {op} {direction} | {t} x {b} x {i} -> {h} | {k:.3f} | {o:.3f} | {k / o:.2f} |")


if __name__ == "__main__":
    main()
