#!/usr/bin/env python3
"""Graph-compiler side of bench/matmul: float32 MatMul ONNX models compiled by `kiln compile`
(the default pipeline for the host CPU, no hand-written schedule) beside numpy/OpenBLAS and
onnxruntime in the same run, one thread everywhere, timed in turns.

    model.py [--n 1024] [--reps 15] [--workdir build/bench_matmul] [--kiln-target T] [--hide-avx512]

Models: `A [n, n] x B` with B a constant initializer (weights) and with B a second runtime
input, plus classifier-shaped constant products whose columns are not whole vectors
(`[40, 120] x [120, 6625]`, `[160, 256] x [256, 97]`, `[1, 2048] x [2048, 1000]`). Kiln is
run by its graph executor (KILN_NUM_THREADS=1), numpy with threadpoolctl's one thread,
onnxruntime with intra/inter-op threads 1; the three run once each in turn for --reps rounds
after warm-up, and each reports its median. Every
output is checked against a float64 product. Prints GFLOP/s and Kiln / OpenBLAS, Kiln / ORT.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def in_turns(fns, reps):
    """Median seconds of each of `fns` over `reps` rounds that run each once in turn (the
    order reversed every other round), after three warm-up rounds: load that comes and goes
    falls on all of them alike. A function that returns a number has timed itself (Kiln's
    time evaluator, which leaves out the Python call)."""
    for _ in range(3):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for r in range(reps):
        order = list(range(len(fns)))
        for i in (order if r % 2 == 0 else order[::-1]):
            t = time.perf_counter()
            own = fns[i]()
            took = time.perf_counter() - t
            times[i].append(own if isinstance(own, float) else took)
    return [statistics.median(t) for t in times]


def make_model(path, m, k, n, const_b, rng):
    import onnx
    from onnx import helper, numpy_helper

    inputs = [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [m, k])]
    inits = []
    b = rng.standard_normal((k, n)).astype(np.float32)
    if const_b:
        inits.append(numpy_helper.from_array(b, "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [k, n]))
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "matmul", inputs,
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [m, n])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "bench_matmul"))
    ap.add_argument("--kiln-target", default=None,
                    help="Kiln's --target (default llvm -mcpu=native); with OPENBLAS_CORETYPE "
                    "set, both sides can run another CPU's code (AVX2 on an AVX-512 host)")
    ap.add_argument("--hide-avx512", action="store_true",
                    help="AVX2 code on all sides on an AVX-512 host: onnxruntime and OpenBLAS "
                    "with AVX-512 hidden from CPUID (bench/isa/hide_avx512.c), Kiln for this "
                    "host without AVX-512 unless --kiln-target says otherwise")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "bench", "models"))
    from bench_models import hide_avx512, without_preload

    if args.hide_avx512:
        args.kiln_target = hide_avx512(args.workdir, args.kiln_target)
    os.makedirs(args.workdir, exist_ok=True)
    import kiln
    import onnxruntime as ort
    from kiln.graph_executor import GraphModule
    from threadpoolctl import threadpool_info, threadpool_limits

    rng = np.random.default_rng(0)
    n = args.n
    cases = [(f"{n}^3, B constant", n, n, n, True), (f"{n}^3, B an input", n, n, n, False),
             ("40x120 x 120x6625, B constant", 40, 120, 6625, True),
             ("160x256 x 256x97, B constant", 160, 256, 97, True),
             ("1x2048 x 2048x1000, B constant", 1, 2048, 1000, True)]
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    with threadpool_limits(limits=1):
        kernels = [p.get("architecture") for p in threadpool_info()
                   if p.get("internal_api") == "openblas"]
    print(f"Kiln target {args.kiln_target or 'llvm -mcpu=native'}; OpenBLAS kernel {kernels}; "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for name, m, k, nn, const_b in cases:
        tag = f"mm_{m}_{k}_{nn}_{'const' if const_b else 'input'}"
        path = os.path.join(args.workdir, tag + ".onnx")
        b = make_model(path, m, k, nn, const_b, rng)
        a = rng.standard_normal((m, k)).astype(np.float32)
        feeds = {"a": a} if const_b else {"a": a, "b": b}
        lib = os.path.join(args.workdir, tag + ".so")
        t0 = time.perf_counter()
        target = ["--target", args.kiln_target] if args.kiln_target else []
        subprocess.run([os.path.join(ROOT, "target", "release", "kiln"), "compile", path, "-o", lib,
                        *target], check=True, stdout=subprocess.DEVNULL, env=without_preload())
        compile_s = time.perf_counter() - t0
        gm = GraphModule(kiln.load_module(lib)["default"](kiln.cpu()))
        for key, v in feeds.items():
            gm.set_input(key, v)
        gm.run()
        got = gm.get_output(0).numpy()
        ref = a.astype(np.float64) @ b.astype(np.float64)
        err = float(np.abs(got - ref).max() / np.abs(ref).max())
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        out = np.empty((m, nn), dtype=np.float32)
        with threadpool_limits(limits=1):
            evaluator = gm.module.time_evaluator("run", kiln.cpu(), repeat=1, number=1)
            t_kiln, t_np, t_ort = in_turns([lambda: float(evaluator().median),
                                            lambda: np.matmul(a, b, out=out),
                                            lambda: sess.run(None, feeds)], args.reps)
        flop = 2.0 * m * k * nn
        rows.append((name, flop / t_kiln / 1e9, flop / t_np / 1e9, flop / t_ort / 1e9,
                     t_np / t_kiln, t_ort / t_kiln, compile_s, err))
        print(f"{name}: kiln {t_kiln * 1e3:.3f} ms, numpy {t_np * 1e3:.3f} ms, ort {t_ort * 1e3:.3f} ms,"
              f" max rel error {err:.1e}", flush=True)
    print("\n| model | Kiln GFLOP/s | OpenBLAS GFLOP/s | ORT GFLOP/s | Kiln / OpenBLAS | Kiln / ORT |"
          " Kiln compile s | max rel error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, gk, gn, go, rn, ro, cs, err in rows:
        print(f"| {name} | {gk:.1f} | {gn:.1f} | {go:.1f} | {rn:.2f} | {ro:.2f} | {cs:.2f} | {err:.1e} |")
    bad = [r[0] for r in rows if r[-1] > 1e-4]
    if bad:
        sys.exit(f"outputs differ from the float64 product: {bad}")


if __name__ == "__main__":
    main()
