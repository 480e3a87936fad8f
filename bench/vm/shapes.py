"""One library for several input shapes (`kiln.onnx.compile(..., dims=...)`, `kiln compile
--dim`) at one thread: per shape, Kiln's VM library against onnxruntime and against the same
model compiled statically for that shape alone (the cost of one library for all), median of
runs after warm-up, in the same run; plus compile seconds, library sizes and the resident
memory a second one-library executor takes when made. The CPU is printed first.

    KILN_NUM_THREADS=1 .venv/bin/python bench/vm/shapes.py
"""

import os
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "tests"))
sys.path.insert(0, os.path.join(HERE, ".."))
from bench_common import cpu_name, median_ms  # noqa: E402
import kiln  # noqa: E402
from kiln.graph_executor import GraphModule  # noqa: E402
from test_onnx_recurrent import _crnn  # noqa: E402
from test_vm import _bert  # noqa: E402

TARGET = "llvm -mcpu=native"


def rss_mib():
    """This process's resident memory in MiB (Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def executor(lib, tmp, name):
    path = os.path.join(tmp, name + ".so")
    lib.export_library(path)
    factory = kiln.load_module(path)
    gm = GraphModule(factory["default"](kiln.cpu()))
    # A second executor of the same factory: what one more costs (the first may reuse heap
    # pages the compile freed, which hides its cost).
    before = rss_mib()
    executor.second = factory["default"](kiln.cpu())
    executor.memory_mib = rss_mib() - before
    return gm, os.path.getsize(path)


def timed(gm, feeds):
    for k, v in feeds.items():
        gm.set_input(k, v)
    return median_ms(gm.run, runs=9, warm=3)


def bench(name, model, dims, cases, tmp):
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    t = time.perf_counter()
    vm, vm_size = executor(kiln.onnx.compile(model, target=TARGET, dims=dims), tmp, name)
    vm_s = time.perf_counter() - t
    print(f"\n{name}: one library for {dims}: compiled in {vm_s:.1f} s, "
          f"{vm_size / 1024:.0f} KiB; a second executor took {executor.memory_mib:.1f} MiB of "
          "resident memory when made\n")
    print("| shape | Kiln one library ms | Kiln static ms | onnxruntime ms | one / static | one / ORT | static compile s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, shapes, feeds in cases:
        t = time.perf_counter()
        st, _ = executor(kiln.onnx.compile(model, shapes, target=TARGET), tmp,
                         f"{name}_static_{len(os.listdir(tmp))}")
        st_s = time.perf_counter() - t
        a = timed(vm, feeds)
        b = timed(st, feeds)
        c = median_ms(lambda: sess.run(None, feeds), runs=9, warm=3)
        got = vm.get_output(0).numpy()
        want = sess.run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
        print(f"| {label} | {a:.3f} | {b:.3f} | {c:.3f} | {a / b:.2f} | {a / c:.2f} | {st_s:.1f} |")


def main():
    print(f"CPU: {cpu_name()}; threads: {os.environ.get('KILN_NUM_THREADS', 'default')}")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        widths = [96, 160, 320, 800]
        cases = []
        for w in widths:
            img = rng.uniform(0, 1, (1, 1, 32, w)).astype(np.float32)
            cases.append((f"width {w}", {"img": img.shape}, {"img": img}))
        bench("crnn", _crnn("width", np.random.default_rng(6)), {"width": widths}, cases, tmp)

        cases = []
        for batch in (1, 4):
            for seq in (7, 16, 64, 128):
                ids = rng.integers(0, 1000, (batch, seq)).astype(np.int64)
                mask = np.ones((batch, seq), np.int64)
                cases.append((f"batch {batch} seq {seq}", {"ids": ids.shape, "mask": mask.shape},
                              {"ids": ids, "mask": mask}))
        bert = _bert(hidden=256, heads=4, ffn=1024, vocab=1000, max_pos=128)
        bench("bert", bert, {"seq": [7, 16, 64, 128], "batch": [1, 4]}, cases, tmp)


if __name__ == "__main__":
    main()
