#!/usr/bin/env python3
"""Load and per-call times of TVM's ``vadd`` from Python, Kiln beside TVM, as records for run.sh.

Runs ``tests/tvm/measure.py`` (one runtime per process: Kiln's ctypes package, TVM's Cython
one) for each length and prints ``python <runtime> <case> <value>`` lines:

- ``vadd_<n>``: one ``vadd`` call from Python, median, ns;
- ``evaluator_<n>``: the runtime's own ``time_evaluator`` loop (Rust / C++), median, ns;
- ``load_first_us``, ``load_us``: first ``load_module`` in the process, and the median over fresh
  copies of the file, microseconds (from the first length's process).

    python bench/kernel_call/python_calls.py LIB.so [N ...]      (lengths: 1 1024)
"""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEASURE = os.path.join(REPO, "tests", "tvm", "measure.py")


def measure(runtime, lib, n):
    cmd = [sys.executable, MEASURE, runtime, lib, str(n)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("python_calls: %s failed:\n%s" % (" ".join(cmd), out.stderr))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(lib, lengths):
    for runtime in ("kiln", "tvm"):
        for i, n in enumerate(lengths):
            r = measure(runtime, lib, n)
            if i == 0:
                print("python %s load_first_us %.2f" % (runtime, r["first_load_ms"] * 1e3))
                print("python %s load_us %.2f" % (runtime, r["load_ms"] * 1e3))
            print("python %s vadd_%d %.2f" % (runtime, n, r["python_call_us"] * 1e3))
            print("python %s evaluator_%d %.2f" % (runtime, n, r["native_call_us"] * 1e3))
            sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], [int(n) for n in sys.argv[2:]] or [1, 1024])
