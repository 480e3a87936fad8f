#!/usr/bin/env python3
"""OpenCL kernels against the same computation on the CPU target, and the host-side cost of a
kernel launch.

* ``launch``: a vector add over 1 element built for ``opencl`` (host function + one kernel):
  the time per call of the host function (argument checks, the packed call into the OpenCL
  module, clSetKernelArg, clEnqueueNDRangeKernel), measured over a batch of calls followed by
  one device synchronisation; beside it the same function built for ``llvm`` (a plain CPU call).
* ``vadd``: C = A + B over 2^22 floats; ``matmul``: 512 x 512 x 512 float32. The OpenCL
  schedules bind the loops to blocks of threads (the matmul with 16 x 16 tiles in shared memory
  and a private accumulator); the CPU schedules use the same tiling without threads (split,
  reorder, and the inner loop vectorized), one thread (``KILN_NUM_THREADS=1`` for Kiln's CPU
  code, ``POCL_MAX_PTHREAD_COUNT=1`` for PoCL, set by the script unless given).

Each figure is the median of ``--repeat`` runs after a warm-up. PoCL runs OpenCL on this CPU's
cores, so the comparison is between two code generators for one processor, not a GPU.

    KILN_NUM_THREADS=1 .venv/bin/python bench/opencl/kernels.py [--repeat 7]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

# One core for PoCL's pthread device too (as KILN_NUM_THREADS=1 for Kiln's CPU code).
os.environ.setdefault("POCL_MAX_PTHREAD_COUNT", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_common import cpu_name  # noqa: E402
import kiln  # noqa: E402
from kiln import te  # noqa: E402


def median_time(fn, sync, repeat, number=1):
    fn()
    sync()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        sync()
        runs.append((time.perf_counter() - t0) / number)
    return statistics.median(runs)


def vadd(n, gpu):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    if gpu:
        bx, tx = s[C].split(C.op.axis[0], factor=256)
        s[C].bind(bx, te.thread_axis("blockIdx.x"))
        s[C].bind(tx, te.thread_axis("threadIdx.x"))
    else:
        _, inner = s[C].split(C.op.axis[0], factor=16)
        s[C].vectorize(inner)
    return s, [A, B, C]


def matmul(n, gpu, tile=16):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    if gpu:
        AS = s.cache_read(A, "shared", [C])
        BS = s.cache_read(B, "shared", [C])
        CL = s.cache_write(C, "local")
        i, j = s[C].op.axis
        bi, ti = s[C].split(i, factor=tile)
        bj, tj = s[C].split(j, factor=tile)
        s[C].reorder(bi, bj, ti, tj)
        s[C].bind(bi, te.thread_axis("blockIdx.y"))
        s[C].bind(bj, te.thread_axis("blockIdx.x"))
        s[C].bind(ti, te.thread_axis("threadIdx.y"))
        s[C].bind(tj, te.thread_axis("threadIdx.x"))
        s[CL].compute_at(s[C], tj)
        ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=tile)
        s[AS].compute_at(s[CL], ko)
        s[BS].compute_at(s[CL], ko)
        for t in (AS, BS):
            a, b = s[t].op.axis
            s[t].bind(a, te.thread_axis("threadIdx.y"))
            s[t].bind(b, te.thread_axis("threadIdx.x"))
    else:
        i, j = s[C].op.axis
        bi, ti = s[C].split(i, factor=tile)
        bj, tj = s[C].split(j, factor=tile)
        (kk,) = s[C].op.reduce_axis
        s[C].reorder(bi, bj, kk, ti, tj)
        s[C].vectorize(tj)
    return s, [A, B, C]


def run(make, shape_in, shape_out, flops, dev, target, repeat, number=1):
    s, args = make()
    f = kiln.build(s, args, target=target, name="f")["f"]
    rng = np.random.default_rng(0)
    ins = [kiln.tensor(rng.random(sh, dtype="float32"), dev) for sh in shape_in]
    out = kiln.empty(shape_out, "float32", dev)
    t = median_time(lambda: f(*ins, out), dev.sync, repeat, number)
    return t, (flops / t / 1e9 if flops else None), out.numpy(), [i.numpy() for i in ins]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    cl = kiln.opencl(0)
    if not cl.exist:
        sys.exit("no OpenCL device (scripts/setup.sh installs PoCL)")
    cpu = kiln.cpu(0)
    print(f"CPU: {cpu_name()}; OpenCL device: {cl.device_name}; "
          f"KILN_NUM_THREADS={os.environ.get('KILN_NUM_THREADS', 'unset')}, "
          f"POCL_MAX_PTHREAD_COUNT={os.environ['POCL_MAX_PTHREAD_COUNT']}")
    print("| what | OpenCL (PoCL) | CPU target (llvm) | OpenCL / CPU |")
    print("| --- | ---: | ---: | ---: |")
    tc, _, _, _ = run(lambda: vadd(1, True), [(1,), (1,)], (1,), 0, cl, "opencl", a.repeat, 2000)
    th, _, _, _ = run(lambda: vadd(1, False), [(1,), (1,)], (1,), 0, cpu, "llvm", a.repeat, 2000)
    print(f"| launch: one call of a 1-element vector add | {tc * 1e6:.1f} us | {th * 1e6:.2f} us | "
          f"{tc / th:.0f}x |")
    n = 1 << 22
    tc, _, oc, ic = run(lambda: vadd(n, True), [(n,), (n,)], (n,), 0, cl, "opencl", a.repeat)
    th, _, oh, ih = run(lambda: vadd(n, False), [(n,), (n,)], (n,), 0, cpu, "llvm", a.repeat)
    np.testing.assert_allclose(oc, ic[0] + ic[1], rtol=1e-6)
    np.testing.assert_allclose(oh, ih[0] + ih[1], rtol=1e-6)
    print(f"| vadd 2^22 float32 | {tc * 1e3:.2f} ms | {th * 1e3:.2f} ms | {tc / th:.2f} |")
    m = 512
    fl = 2 * m ** 3
    tc, gc, oc, ic = run(lambda: matmul(m, True), [(m, m), (m, m)], (m, m), fl, cl, "opencl",
                         a.repeat)
    th, gh, oh, ih = run(lambda: matmul(m, False), [(m, m), (m, m)], (m, m), fl, cpu, "llvm",
                         a.repeat)
    np.testing.assert_allclose(oc, ic[0] @ ic[1], rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(oh, ih[0] @ ih[1], rtol=1e-3, atol=1e-3)
    print(f"| matmul 512^3 float32 | {tc * 1e3:.2f} ms ({gc:.1f} GFLOP/s) | "
          f"{th * 1e3:.2f} ms ({gh:.1f} GFLOP/s) | {tc / th:.2f} |")


if __name__ == "__main__":
    main()
