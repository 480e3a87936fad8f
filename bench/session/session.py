#!/usr/bin/env python3
"""kiln.InferenceSession against onnxruntime's InferenceSession, one thread, same run.

For each model: the median time of `session.run(None, feeds)` for both (after warm-up), the
time of Kiln's graph executor's own `run` (no inputs set, no outputs read), and the difference,
which is what the Python binding adds (setting inputs, reading outputs, the session's checks);
then the start-up time of a session in a fresh process: with an empty cache (the model is
compiled) and with the library cached (loaded). Models: the bundled one
(examples/model/model.onnx) and squeezenet from the onnx wheel's zoo with seeded weights
(tests/zoo/make_zoo.py), or the .onnx paths given.

    KILN_NUM_THREADS=1 python bench/session/session.py [--repeat 7] [MODEL.onnx ...]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

import kiln  # noqa: E402


def median_us(fn, repeat, min_seconds=0.2):
    fn()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < 0.05:
        fn()
        calls += 1
    number = max(1, int(calls * min_seconds / 0.05))
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t) / number * 1e6)
    return statistics.median(runs)


def startup_seconds(model, cache_dir):
    code = (
        "import time, sys; sys.path.insert(0, %r); import kiln; t = time.perf_counter(); "
        "kiln.InferenceSession(%r, cache_dir=%r, show_progress=False); "
        "print(time.perf_counter() - t)" % (os.path.join(REPO, "python"), model, cache_dir)
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def bench(model, repeat):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    ref = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {a.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in a.shape])
             .astype(np.float32) for a in ref.get_inputs()}
    with tempfile.TemporaryDirectory() as cache:
        cold = startup_seconds(model, cache)
        warm = statistics.median(startup_seconds(model, cache) for _ in range(3))
        sess = kiln.InferenceSession(model, cache_dir=cache, show_progress=False)
        for a, b in zip(sess.run(None, feeds), ref.run(None, feeds)):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
        kiln_us = median_us(lambda: sess.run(None, feeds), repeat)
        ort_us = median_us(lambda: ref.run(None, feeds), repeat)
        [compiled] = sess._compiled.values()
        gm, _ = compiled.acquire()
        for k, v in feeds.items():
            gm.set_input(k, v)
        exec_us = median_us(gm._run, repeat)
    return {
        "model": os.path.basename(model),
        "kiln_run_us": kiln_us,
        "ort_run_us": ort_us,
        "executor_us": exec_us,
        "binding_us": kiln_us - exec_us,
        "cold_start_s": cold,
        "cached_start_ms": warm * 1e3,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("models", nargs="*")
    args = parser.parse_args()
    models = args.models
    if not models:
        out = os.path.join(REPO, "build", "bench_session")
        os.makedirs(out, exist_ok=True)
        if not os.path.exists(os.path.join(out, "squeezenet.onnx")):
            subprocess.run([sys.executable, os.path.join(REPO, "tests", "zoo", "make_zoo.py"),
                            out, "squeezenet"], check=True)
        models = [os.path.join(REPO, "examples", "model", "model.onnx"),
                  os.path.join(out, "squeezenet.onnx")]
    path = "compiled (kiln._fastcall)" if kiln.core.FASTCALL is not None else "ctypes"
    print(f"one thread; Kiln's Python call path: {path}; median of {args.repeat}")
    print("%-16s %12s %12s %9s %13s %12s %11s %13s" % (
        "model", "kiln run us", "ort run us", "kiln/ort", "executor us", "binding us",
        "cold start s", "cached ms"))
    for m in models:
        r = bench(m, args.repeat)
        print("%-16s %12.1f %12.1f %9.2f %13.1f %12.1f %11.2f %13.1f" % (
            r["model"], r["kiln_run_us"], r["ort_run_us"], r["kiln_run_us"] / r["ort_run_us"],
            r["executor_us"], r["binding_us"], r["cold_start_s"], r["cached_start_ms"]))


if __name__ == "__main__":
    main()
