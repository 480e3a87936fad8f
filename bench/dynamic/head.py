"""The cost of a dimension left to run time: a token classifier head (MatMul [1, n, 256] x
[256, 256], Add, Relu, Softmax, ReduceMean over the tokens) compiled ONCE with `n` left to run
time (`dims={"n": "any"}`), against the same model compiled for each n (static) and
onnxruntime, one thread, engines timed in turns, medians. Run with KILN_NUM_THREADS=1:

    KILN_NUM_THREADS=1 .venv/bin/python bench/dynamic/head.py
"""
import os
import tempfile
import time

import kiln
from kiln.graph_executor import GraphModule
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = tempfile.mkdtemp(prefix="kiln_dynamic_")
F = TensorProto.FLOAT
rng = np.random.default_rng(0)
D = 256
nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
         helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("Softmax", ["r"], ["p"], axis=-1),
         helper.make_node("ReduceMean", ["p", "ax"], ["y"], keepdims=0)]
g = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", F, [1, "n", D])],
    [helper.make_tensor_value_info("y", F, [1, D])],
    [numpy_helper.from_array(rng.standard_normal((D, D)).astype(np.float32) * 0.1, "w"),
     numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "b"),
     numpy_helper.from_array(np.array([1], np.int64), "ax")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
t0 = time.perf_counter(); dyn = kiln.onnx.compile(m, target="llvm -mcpu=native", dims={"n": "any"})
tc = time.perf_counter() - t0
dyn.export_library(os.path.join(OUT, "head_any.so"))
so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
gd = GraphModule(kiln.load_module(os.path.join(OUT, "head_any.so"))["default"](kiln.cpu()))
def med(f, reps=30):
    for _ in range(3): f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return np.median(ts) * 1e6
print(f"compile (n=any): {tc:.2f} s")
print("n, dynamic us, static us, onnxruntime us, dynamic/static, dynamic/ort")
for n in (7, 16, 64, 128):
    st = kiln.onnx.compile(m, {"x": (1, n, D)}, target="llvm -mcpu=native")
    st.export_library(os.path.join(OUT, f"head_{n}.so"))
    gs = GraphModule(kiln.load_module(os.path.join(OUT, f"head_{n}.so"))["default"](kiln.cpu()))
    x = rng.standard_normal((1, n, D)).astype(np.float32)
    gd.set_input("x", x); gs.set_input("x", x)
    gd.run(); gs.run()
    want = sess.run(None, {"x": x})[0]
    assert np.allclose(gd.get_output(0).numpy(), want, atol=1e-5), n
    res = []
    for _ in range(5):  # in turns
        res.append((med(gd.run), med(gs.run), med(lambda: sess.run(None, {"x": x}))))
    d, s_, o = np.median(np.array(res), axis=0)
    print(f"{n}, {d:.1f}, {s_:.1f}, {o:.1f}, {d/s_:.2f}, {d/o:.2f}")
