#!/usr/bin/env python3
"""Whole models on the OpenCL device (PoCL on a CPU) beside the same models compiled for the
CPU, one thread each:

    KILN_LIBRARY_PATH=target/release PYTHONPATH=python .venv/bin/python bench/opencl/models.py \
        [--models bundled squeezenet] [--repeat 7] [--number 5] [--workdir D]

For each model (the bundled ``examples/model/model.onnx``; squeezenet from
``tests/zoo/make_zoo.py``, seeded random weights) ``kiln.onnx.compile`` builds it for ``opencl``
and for ``llvm -mcpu=native``; both are exported, loaded, and run by the graph executor created
on ``kiln.opencl(0)`` and ``kiln.cpu(0)``. Each measurement is ``--number`` runs of ``run``
followed by a device synchronization; after 3 warm-up runs the median of ``--repeat``
measurements is printed in milliseconds per run, with the compile time and both outputs' error
against onnxruntime (after dividing by the reference's largest magnitude).

One thread: ``POCL_MAX_PTHREAD_COUNT=1`` (PoCL's pthread device runs work-groups on one
thread) and ``KILN_NUM_THREADS=1``, set before the runtime starts.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["POCL_MAX_PTHREAD_COUNT"] = "1"
os.environ["KILN_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_common import cpu_name  # noqa: E402
import kiln  # noqa: E402
import kiln.onnx  # noqa: E402
from kiln.graph_executor import GraphModule  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUNDLED = os.path.join(ROOT, "examples", "model", "model.onnx")


def model_path(name, workdir):
    if name == "bundled":
        return BUNDLED
    path = os.path.join(workdir, f"{name}.onnx")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "zoo", "make_zoo.py"), workdir,
                        name], check=True, stdout=subprocess.DEVNULL)
    return path


def input_of(path):
    import onnx

    model = onnx.load(path)
    inits = {t.name for t in model.graph.initializer}
    i = next(i for i in model.graph.input if i.name not in inits)
    return i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]


def reference(path, name, x):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {name: x})[0]


def measure(path, target, dev, x, name, workdir, number, repeat):
    """Compile seconds, median milliseconds per run, and the output."""
    t = time.perf_counter()
    lib = kiln.onnx.compile(path, target=target)
    compile_s = time.perf_counter() - t
    so = os.path.join(workdir, f"{os.path.basename(path)}.{target.split()[0]}.so")
    lib.export_library(so)
    gm = GraphModule(kiln.load_module(so)["default"](dev))
    gm.set_input(name, x)

    def once():
        for _ in range(number):
            gm.run()
        dev.sync()

    for _ in range(3):
        once()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        once()
        times.append((time.perf_counter() - t) / number * 1e3)
    return compile_s, statistics.median(times), gm.get_output(0).numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["bundled", "squeezenet"])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=5)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    cl = kiln.opencl(0)
    if not cl.exist:
        raise SystemExit("no OpenCL device (scripts/setup.sh installs PoCL)")
    workdir = args.workdir or tempfile.mkdtemp(prefix="kiln_opencl_bench_")
    os.makedirs(workdir, exist_ok=True)
    print(f"CPU: {cpu_name()}; OpenCL device: {cl.device_name} (POCL_MAX_PTHREAD_COUNT=1); "
          f"Kiln CPU code: KILN_NUM_THREADS=1")
    print(f"median of {args.repeat} measurements of {args.number} runs, after 3 warm-up runs\n")
    head = (f"{'model':<12} {'target':<20} {'compile s':>9} {'ms/run':>9} {'vs llvm':>8} "
            f"{'max err':>9}")
    print(head)
    print("-" * len(head))
    for m in args.models:
        path = model_path(m, workdir)
        name, shape = input_of(path)
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        ref = reference(path, name, x)
        scale = max(float(np.abs(ref).max()), 1e-30)
        rows = []
        for target, dev in (("llvm -mcpu=native", kiln.cpu(0)), ("opencl", cl)):
            c, ms, out = measure(path, target, dev, x, name, workdir, args.number, args.repeat)
            err = float(np.abs(out / scale - ref / scale).max())
            rows.append((target, c, ms, err))
        base = rows[0][2]
        for target, c, ms, err in rows:
            print(f"{m:<12} {target:<20} {c:>9.2f} {ms:>9.3f} {ms / base:>7.2f}x {err:>9.1e}")


if __name__ == "__main__":
    main()
