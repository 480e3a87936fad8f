"""The cost of being dynamic on whole models: a CRNN line recognizer (convolutions, poolings,
a bidirectional LSTM, a classifier) compiled ONCE with its width left to run time, a
BERT-style encoder layer compiled ONCE with batch and sequence length left to run time, and a
YOLOv8-style detector (C2f, SPPF, a nearest Resize x2 path; bench/models' `yolo` with its
head reshaped by -1) compiled ONCE with height and width left to run time
(`dims={...: "any"}`), each against the same model compiled for every shape (static) and
onnxruntime, one thread, engines timed in turns, medians of 5 turns. Run with one thread:

    KILN_NUM_THREADS=1 KILN_LIBRARY_PATH=target/release PYTHONPATH=python \
        .venv/bin/python bench/dynamic/models.py
"""
import os
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort

import kiln
from kiln.graph_executor import GraphModule

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "zoo"))
from bench_common import cpu_name, median_ms  # noqa: E402
from make_arch import yolo  # noqa: E402
from test_vm import _bert, _bert_feeds, _crnn_any_width  # noqa: E402

OUT = tempfile.mkdtemp(prefix="kiln_dynamic_")
TARGET = "llvm -mcpu=native"
rng = np.random.default_rng(0)


def load(lib, name):
    path = os.path.join(OUT, name)
    lib.export_library(path)
    return GraphModule(kiln.load_module(path)["default"](kiln.cpu()))


def compare(title, m, dims, cases):
    """`cases`: (label, feeds, static input shapes)."""
    t0 = time.perf_counter()
    dyn = kiln.onnx.compile(m, target=TARGET, dims=dims)
    tc = time.perf_counter() - t0
    gd = load(dyn, f"{title}_any.so")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    print(f"{title} ({cpu_name()}, one thread): compile with {dims}: {tc:.2f} s")
    print("shape, dynamic us, static us, onnxruntime us, dynamic/static, dynamic/ort")
    for label, feeds, shapes in cases:
        gs = load(kiln.onnx.compile(m, shapes, target=TARGET), f"{title}_{label}.so")
        for g in (gd, gs):
            for k, v in feeds.items():
                g.set_input(k, v)
            g.run()
        want = sess.run(None, feeds)[0]
        for g in (gd, gs):
            assert np.allclose(g.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4), label
        def us(f):
            return median_ms(f, runs=20, warm=3) * 1e3

        res = [(us(gd.run), us(gs.run), us(lambda: sess.run(None, feeds))) for _ in range(5)]
        d, s_, o = np.median(np.array(res), axis=0)
        print(f"{label}, {d:.1f}, {s_:.1f}, {o:.1f}, {d / s_:.2f}, {d / o:.2f}", flush=True)


crnn_cases = []
for w in (96, 160, 320, 800):
    img = rng.uniform(0, 1, (1, 1, 32, w)).astype(np.float32)
    crnn_cases.append((f"width {w}", {"img": img}, {"img": img.shape}))
compare("crnn", _crnn_any_width(), {"width": "any"}, crnn_cases)

bert_cases = []
for b, s in ((1, 7), (1, 16), (1, 64), (1, 128), (4, 7), (4, 16), (4, 64), (4, 128)):
    bert_cases.append((f"{b}x{s}", _bert_feeds(rng, b, s), {"ids": (b, s), "mask": (b, s)}))
compare("bert", _bert(), {"batch": "any", "seq": "any"}, bert_cases)


def yolo_any_size():
    """bench/models' detector with its head reshaped by -1 and height and width symbolic."""
    m = yolo()
    reshape = next(n for n in m.graph.node if n.op_type == "Reshape")
    init = next(t for t in m.graph.initializer if t.name == reshape.input[1])
    init.CopyFrom(onnx.numpy_helper.from_array(np.array([1, 3, 85, -1], np.int64), init.name))
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_param, dims[3].dim_param = "h", "w"
    del m.graph.output[0].type.tensor_type.shape.dim[:]
    return m


yolo_cases = []
for h, w in ((320, 320), (256, 416), (480, 640), (640, 640)):
    img = rng.standard_normal((1, 3, h, w)).astype(np.float32)
    yolo_cases.append((f"{h}x{w}", {"x": img}, {"x": img.shape}))
compare("yolo", yolo_any_size(), {"h": "any", "w": "any"}, yolo_cases)
