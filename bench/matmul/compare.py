"""numpy/OpenBLAS side of bench/matmul/run.sh: times numpy's 1024^3 float32 matmul at one thread
(warm-up, median of REPS), reports which OpenBLAS kernel ran (threadpoolctl), checks Kiln's
output (dumped by the Rust bench) against numpy, and prints Kiln / OpenBLAS."""
import os
import statistics
import sys
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

n = int(sys.argv[1])
dump = sys.argv[2]
kiln_gflops = float(sys.argv[3])
kiln_compile_ms = float(sys.argv[4])
reps = int(os.environ.get("REPS", "15"))

with threadpool_limits(limits=1):
    info = [p for p in threadpool_info() if p.get("internal_api") == "openblas"]
    for p in info:
        print(f"openblas {p.get('version')} kernel={p.get('architecture')} threads={p.get('num_threads')}")
    a = np.fromfile(f"{dump}/A.f32", dtype=np.float32).reshape(n, n)
    b = np.fromfile(f"{dump}/B.f32", dtype=np.float32).reshape(n, n)
    c = np.fromfile(f"{dump}/C.f32", dtype=np.float32).reshape(n, n)
    out = np.empty((n, n), dtype=np.float32)
    for _ in range(3):
        np.matmul(a, b, out=out)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        np.matmul(a, b, out=out)
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    np_gflops = 2.0 * n**3 / med / 1e9
    np_best = 2.0 * n**3 / min(times) / 1e9
    ref = a.astype(np.float64) @ b.astype(np.float64)
    rel = float(np.max(np.abs(c - ref)) / np.max(np.abs(ref)))
    rel_np = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))

print(f"numpy/OpenBLAS: median {med*1e3:.3f} ms, {np_gflops:.1f} GFLOP/s (best {np_best:.1f})")
print(f"Kiln max rel error vs float64 reference: {rel:.2e} (numpy float32: {rel_np:.2e})")
print(f"Kiln {kiln_gflops:.1f} GFLOP/s / OpenBLAS {np_gflops:.1f} GFLOP/s = {kiln_gflops/np_gflops:.3f}; "
      f"Kiln compile {kiln_compile_ms:.1f} ms")
if not rel < 1e-4:
    sys.exit("Kiln's result does not match numpy")
