"""Load time and per-call time of a TVM-compiled library, in Kiln or in TVM (one runtime per
process).

    python tests/tvm/measure.py kiln|tvm LIB.so [N]

LIB.so must export ``vadd(A, B, C)`` over float32 vectors (``build_libs.py``'s ``vadd.so``).
Prints one JSON line:

- ``first_load_ms``: the first ``load_module`` of the file in this process;
- ``load_ms``: median ``load_module`` of fresh copies of the file (a real ``dlopen`` each);
- ``python_call_us``: median time of one ``vadd`` call on N elements from Python;
- ``native_call_us``: the runtime's own ``time_evaluator`` (a loop in Rust / C++).
"""

import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np


def median_time(fn, inner, outer=15):
    samples = []
    for _ in range(outer):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def main(runtime, lib, n):
    if runtime == "kiln":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from dltensor import DLArg

        import kiln

        load, dev = kiln.load_module, kiln.cpu()
        tensor = getattr(kiln, "tensor", None)
        make = (lambda x: tensor(x, dev)) if tensor else DLArg
    elif runtime == "tvm":
        import tvm

        load, dev = tvm.runtime.load_module, tvm.cpu()
        make = lambda x: tvm.runtime.tensor(x, dev)
    else:
        sys.exit("runtime must be kiln or tvm")

    t0 = time.perf_counter()
    mod = load(lib)
    first = time.perf_counter() - t0
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        keep = []
        for i in range(20):
            copy = os.path.join(tmp, "copy%d.so" % i)
            shutil.copy(lib, copy)
            t0 = time.perf_counter()
            keep.append(load(copy))
            loads.append(time.perf_counter() - t0)
    rng = np.random.default_rng(0)
    a = make(rng.standard_normal(n).astype("float32"))
    b = make(rng.standard_normal(n).astype("float32"))
    c = make(np.zeros(n, "float32"))
    f = mod["vadd"]
    f(a, b, c)
    call = median_time(lambda: f(a, b, c), inner=2000)
    native = mod.time_evaluator("vadd", dev, number=2000, repeat=15)(a, b, c)
    print(
        json.dumps(
            {
                "runtime": runtime,
                "n": n,
                "first_load_ms": first * 1e3,
                "load_ms": statistics.median(loads) * 1e3,
                "python_call_us": call * 1e6,
                "native_call_us": native.median * 1e6,
            }
        )
    )


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 1024)
