#!/usr/bin/env python3
"""One-operator models of the shapes users' networks bring, Kiln beside onnxruntime at one
thread: convolutions of every kind the x86 schedules cover (1x1, 3x3, 5x5, 7x7, stride 2,
dilated, grouped, depthwise, the 3-channel stem, 1-D), transposed convolutions, and matrix
products with odd and large N, K and batch (classifiers, attention).

    shapes.py [--only SUBSTRING ...] [--kiln-target T] [--hide-avx512] [--repeat 9] [--workdir D]

Each case is one ONNX node with constant weights (as exporters write them) built with
`onnx.helper`, compiled by `kiln compile`, checked against onnxruntime (scaled error) and
timed in turns with it (bench_models.paired_ms: warm-up, --repeat rounds, median). Prints
MFLOP, Kiln and onnxruntime milliseconds, Kiln GFLOP/s and Kiln / ORT time per case, then the
geometric mean of the ratios. --hide-avx512 as in bench/models/bench_models.py.

A case's data and result are NCHW on both sides, so a layer that computes in channel blocks
pays its layout changes here (onnxruntime's NCHWc kernels too) that a network keeps between
blocked layers: a depthwise layer whose input comes NCHW stays NCHW, as after a channel shuffle.
"""
import argparse
import math
import os
import subprocess
import sys
import time
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "models"))

from bench_models import (aligned, hide_avx512, kiln_runner, paired_ms,  # noqa: E402
                          scaled_error, without_preload)


def conv(name, x, o, k, s=1, p=None, d=1, g=1):
    """A Conv of `o` outputs over input shape `x` (NCHW or NCW), square kernel `k`."""
    nd = len(x) - 2
    p = (d * (k - 1)) // 2 if p is None else p
    w = [o, x[1] // g] + [k] * nd
    attrs = dict(kernel_shape=[k] * nd, strides=[s] * nd, pads=[p] * (2 * nd),
                 dilations=[d] * nd, group=g)
    outs = [(x[2 + i] + 2 * p - d * (k - 1) - 1) // s + 1 for i in range(nd)]
    y = [x[0], o] + outs
    flops = 2 * math.prod(y) * math.prod(w[1:])
    return name, "Conv", x, [w, [o]], y, attrs, flops


def conv_t(name, x, o, k, s, p=0, op=0, g=1):
    nd = len(x) - 2
    w = [x[1], o // g] + [k] * nd
    attrs = dict(kernel_shape=[k] * nd, strides=[s] * nd, pads=[p] * (2 * nd), group=g)
    if op:
        attrs["output_padding"] = [op] * nd
    outs = [(x[2 + i] - 1) * s - 2 * p + k + op for i in range(nd)]
    y = [x[0], o] + outs
    flops = 2 * math.prod(x) * math.prod(w[1:])
    return name, "ConvTranspose", x, [w], y, attrs, flops


def matmul(name, a, b, const_b=True):
    y = list(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))) + [a[-2], b[-1]]
    flops = 2 * math.prod(y) * a[-1]
    return name, "MatMul", a, [b] if const_b else [("input", b)], y, {}, flops


CASES = [
    conv("1x1 64->256 56x56", [1, 64, 56, 56], 256, 1),
    conv("1x1 1024->2048 s2 14x14", [1, 1024, 14, 14], 2048, 1, s=2, p=0),
    conv("1x1 96->24 80x80", [1, 96, 80, 80], 24, 1),
    conv("3x3 64->64 56x56", [1, 64, 56, 56], 64, 3),
    conv("3x3 256->256 14x14", [1, 256, 14, 14], 256, 3),
    conv("3x3 512->512 7x7", [1, 512, 7, 7], 512, 3),
    conv("3x3 32->64 s2 160x160", [1, 32, 160, 160], 64, 3, s=2),
    conv("3x3 48->48 40x40", [1, 48, 40, 40], 48, 3),
    conv("3x3 d2 256->256 28x28", [1, 256, 28, 28], 256, 3, d=2),
    conv("5x5 64->64 28x28", [1, 64, 28, 28], 64, 5),
    conv("5x5 s2 32->64 56x56", [1, 32, 56, 56], 64, 5, s=2),
    conv("7x7 128->128 14x14", [1, 128, 14, 14], 128, 7),
    conv("stem 3x3 s2 3->32 224", [1, 3, 224, 224], 32, 3, s=2),
    conv("stem 7x7 s2 3->64 224", [1, 3, 224, 224], 64, 7, s=2, p=3),
    conv("patchify 16x16 s16 3->192 224", [1, 3, 224, 224], 192, 16, s=16, p=0),
    conv("patchify 4x4 s4 3->96 224", [1, 3, 224, 224], 96, 4, s=4, p=0),
    conv("2x2 s2 96->192 56x56", [1, 96, 56, 56], 192, 2, s=2, p=0),
    conv("grouped 3x3 g32 256 28x28", [1, 256, 28, 28], 256, 3, g=32),
    conv("grouped 3x3 g4 128 28x28", [1, 128, 28, 28], 128, 3, g=4),
    conv("grouped 1x1 g4 240->240 28x28", [1, 240, 28, 28], 240, 1, g=4),
    conv("dw 3x3 144 56x56", [1, 144, 56, 56], 144, 3, g=144),
    conv("dw 3x3 s2 96 112x112", [1, 96, 112, 112], 96, 3, s=2, g=96),
    conv("dw 5x5 240 28x28", [1, 240, 28, 28], 240, 5, g=240),
    conv("dw 7x7 384 14x14", [1, 384, 14, 14], 384, 7, g=384),
    conv("1-D k3 256->256 L1000", [1, 256, 1000], 256, 3),
    conv("1-D k5 s2 64->128 L16000", [1, 64, 16000], 128, 5, s=2),
    conv("1-D k1 512->512 L300", [1, 512, 300], 512, 1),
    conv("1-D dw k31 256 L500", [1, 256, 500], 256, 31, g=256),
    conv_t("convT 2x2 s2 24->24 80x80", [1, 24, 80, 80], 24, 2, 2),
    conv_t("convT 4x4 s2 p1 64->32 40x40", [1, 64, 40, 40], 32, 4, 2, p=1),
    conv_t("convT 3x3 s2 p1 op1 128->64 28x28", [1, 128, 28, 28], 64, 3, 2, p=1, op=1),
    conv_t("convT 1-D k4 s2 p1 256->128 L500", [1, 256, 500], 128, 4, 2, p=1),
    conv_t("convT dw 4x4 s2 p1 64 80x80", [1, 64, 80, 80], 64, 4, 2, p=1, g=64),
    conv_t("convT grouped 3x3 s2 p1 op1 g4 64->64 40x40", [1, 64, 40, 40], 64, 3, 2, p=1, op=1, g=4),
    matmul("matvec [1,768]x[768,3072]", [1, 768], [768, 3072]),
    matmul("dense [128,768]x[768,768]", [128, 768], [768, 768]),
    matmul("dense [128,3072]x[3072,768]", [128, 3072], [3072, 768]),
    matmul("classifier [1,40,120]x[120,6625]", [1, 40, 120], [120, 6625]),
    matmul("odd [77,511]x[511,1001]", [77, 511], [511, 1001]),
    matmul("deep [256,4096]x[4096,1024]", [256, 4096], [4096, 1024]),
    matmul("attention QK [12,128,64]x[12,64,128]", [12, 128, 64], [12, 64, 128], False),
    matmul("attention AV [12,128,128]x[12,128,64]", [12, 128, 128], [12, 128, 64], False),
    matmul("odd batch [7,33,65]x[7,65,17]", [7, 33, 65], [7, 65, 17], False),
    matmul("ViT QK [12,197,64]x[12,64,197]", [12, 197, 64], [12, 64, 197], False),
    matmul("ViT AV [12,197,197]x[12,197,64]", [12, 197, 197], [12, 197, 64], False),
    matmul("two inputs [77,511]x[511,1001]", [77, 511], [511, 1001], False),
]


def build(case, path):
    import onnx
    from onnx import helper, numpy_helper

    name, op, x, ws, y, attrs, _ = case
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    inputs = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x)]
    inits, names = [], ["x"]
    for i, w in enumerate(ws):
        if isinstance(w, tuple):
            inputs.append(helper.make_tensor_value_info(f"in{i}", onnx.TensorProto.FLOAT, w[1]))
            names.append(f"in{i}")
        else:
            fan = max(1, math.prod(w[1:]) if op != "MatMul" else w[-2])
            inits.append(numpy_helper.from_array(
                (rng.standard_normal(w) / math.sqrt(fan)).astype(np.float32), f"w{i}"))
            names.append(f"w{i}")
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], "case", inputs,
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, y)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return [rng.standard_normal(s).astype(np.float32)
            for s in [x] + [w[1] for w in ws if isinstance(w, tuple)]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "bench_ops"))
    ap.add_argument("--kiln-target", default=None)
    ap.add_argument("--hide-avx512", action="store_true")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    target = hide_avx512(args.workdir, args.kiln_target) if args.hide_avx512 else (
        args.kiln_target or "llvm -mcpu=native")
    os.makedirs(args.workdir, exist_ok=True)
    os.environ.setdefault("KILN_NUM_THREADS", "1")
    import onnxruntime as ort

    kiln_bin = os.path.join(ROOT, "target", "release", "kiln")
    print(f"target: {target}; onnxruntime {ort.__version__}, one thread")
    print()
    print("| case | MFLOP | Kiln ms | ORT ms | Kiln GFLOP/s | Kiln / ORT | error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    ratios = []
    for i, case in enumerate(CASES):
        if args.only and not any(s in case[0] for s in args.only):
            continue
        onnx_path = os.path.join(args.workdir, f"case{i}.onnx")
        lib = os.path.join(args.workdir, f"case{i}.so")
        feeds = build(case, onnx_path)
        p = subprocess.run([kiln_bin, "compile", onnx_path, "-o", lib, "--target", target],
                           capture_output=True, text=True, env=without_preload())
        if p.returncode != 0:
            print(f"| {case[0]} | compile failed: {p.stderr.strip()[-160:]} |")
            continue
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        names = [x.name for x in sess.get_inputs()]
        ref = sess.run(None, dict(zip(names, feeds)))[0]
        if len(feeds) == 1:
            kiln_run = kiln_runner(lib, feeds[0])
        else:
            import kiln
            from kiln.graph_executor import GraphModule

            gm = GraphModule(kiln.load_module(lib)["default"](kiln.cpu()))
            for n, f in zip(names, feeds):
                gm.set_input(n, aligned(f))

            def kiln_run(gm=gm):
                gm.run()
                return gm.get_output(0).numpy()
        err = scaled_error(kiln_run(), ref)
        ort_out = {}

        def ort_run():
            ort_out[0] = sess.run(None, dict(zip(names, feeds)))

        t0 = time.perf_counter()
        kiln_run()
        one = time.perf_counter() - t0
        number = max(1, int(0.02 / max(one, 1e-6)))
        ms = paired_ms({"kiln": kiln_run, "ort": ort_run}, number, args.repeat, 3)
        r = ms["kiln"] / ms["ort"]
        ratios.append(r)
        mflop = case[6] / 1e6
        print(f"| {case[0]} | {mflop:.1f} | {ms['kiln']:.3f} | {ms['ort']:.3f} | "
              f"{mflop / ms['kiln']:.1f} | {r:.2f} | {err:.1e} |", flush=True)
    if ratios:
        print(f"\ngeometric mean Kiln / ORT: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}"
              f" over {len(ratios)} cases")


if __name__ == "__main__":
    main()
