"""Quantized operators at one thread: Kiln against onnxruntime in the same run (median of runs
after warm-up), and Kiln without integer dot products (the same library built for the CPU's
baseline level, which has no VNNI) to show what they bring. Prints a markdown table; the CPU
is printed first. Kiln's integer outputs are checked exactly against numpy first.

    .venv/bin/python bench/quant/quant.py
"""

import os
import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import kiln  # noqa: E402
from kiln.graph_executor import GraphModule  # noqa: E402
from bench_common import cpu_name, median_ms  # noqa: E402


def model(nodes, x_name, x_type, x_shape, y_type, y_shape, inits):
    graph = helper.make_graph(
        nodes, "q", [helper.make_tensor_value_info(x_name, x_type, x_shape)],
        [helper.make_tensor_value_info("y", y_type, y_shape)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def matmul_integer(rng, m, k, n):
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    mm = model([helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"])], "a",
               TensorProto.UINT8, [m, k], TensorProto.INT32, [m, n],
               {"b": b, "az": np.array(3, np.uint8)})
    return mm, {"a": a}, (a.astype(np.int64) - 3) @ b.astype(np.int64)


def conv_integer(rng, c, o, hw, k, stride):
    w = rng.integers(-128, 128, (o, c, k, k)).astype(np.int8)
    x = rng.integers(0, 256, (1, c, hw, hw)).astype(np.uint8)
    p = k // 2
    out = (hw + 2 * p - k) // stride + 1
    mm = model([helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[p] * 4,
                                 strides=[stride] * 2)], "x", TensorProto.UINT8,
               [1, c, hw, hw], TensorProto.INT32, [1, o, out, out],
               {"w": w, "xz": np.array(3, np.uint8)})
    xp = np.pad(x.astype(np.int64) - 3, ((0, 0), (0, 0), (p, p), (p, p)))
    want = np.zeros((1, o, out, out), np.int64)
    for ky in range(k):
        for kx in range(k):
            patch = xp[:, :, ky:ky + stride * out:stride, kx:kx + stride * out:stride]
            want += np.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx].astype(np.int64))
    return mm, {"x": x}, want


def weight_only(rng, m, k, n):
    q = rng.integers(-127, 128, (k, n)).astype(np.int8)
    s = (rng.random(n) * 0.01).astype(np.float32)
    x = rng.standard_normal((1, m, k)).astype(np.float32)
    mm = model([helper.make_node("Cast", ["q"], ["qf"], to=TensorProto.FLOAT),
                helper.make_node("Mul", ["qf", "s"], ["w"]),
                helper.make_node("MatMul", ["x", "w"], ["y"])], "x", TensorProto.FLOAT,
               [1, m, k], TensorProto.FLOAT, [1, m, n], {"q": q, "s": s})
    return mm, {"x": x}, x.astype(np.float64) @ (q.astype(np.float64) * s)


def kiln_ms(m, feeds, want, target):
    lib = kiln.onnx.compile(m.SerializeToString(), target=target)
    gm = GraphModule(lib["default"](kiln.cpu()))
    for k, v in feeds.items():
        gm.set_input(k, v)
    gm.run()
    got = gm.get_output(0).numpy()
    if got.dtype.kind == "i":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return median_ms(gm.run, runs=15, warm=3)


def ort_ms(m, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return median_ms(lambda: sess.run(None, feeds), runs=15, warm=3)


def main():
    os.environ.setdefault("KILN_NUM_THREADS", "1")
    flags = open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0].split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2"
    vnni = [f for f in ("avx512_vnni", "avx_vnni") if f in flags]
    base = "llvm -mcpu=x86-64-v4" if isa == "AVX-512" else "llvm -mcpu=x86-64-v3"
    print(f"CPU: {cpu_name()} ({isa}, {', '.join(vnni) or 'no VNNI'}), one thread\n")
    print(f"| model | Kiln ms | Kiln ms, `{base}` | onnxruntime ms | Kiln / ORT |")
    print("| --- | ---: | ---: | ---: | ---: |")
    rng = np.random.default_rng(0)
    cases = [
        ("MatMulInteger 128x384 by 384x1536", matmul_integer(rng, 128, 384, 1536)),
        ("MatMulInteger 1x768 by 768x3072", matmul_integer(rng, 1, 768, 3072)),
        ("ConvInteger 64->64 3x3, 56x56", conv_integer(rng, 64, 64, 56, 3, 1)),
        ("ConvInteger 3->32 3x3 stride 2, 224x224", conv_integer(rng, 3, 32, 224, 3, 2)),
        ("ConvInteger 256->256 1x1, 14x14", conv_integer(rng, 256, 256, 14, 1, 1)),
        ("weight-only int8 MatMul 128x384 by 384x1536", weight_only(rng, 128, 384, 1536)),
    ]
    for name, (m, feeds, want) in cases:
        k = kiln_ms(m, feeds, want, "llvm -mcpu=native")
        kb = kiln_ms(m, feeds, want, base)
        o = ort_ms(m, feeds)
        print(f"| {name} | {k:.3f} | {kb:.3f} | {o:.3f} | {k / o:.2f} |")


if __name__ == "__main__":
    main()
