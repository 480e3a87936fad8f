#!/usr/bin/env python3
"""Per-call time of ``testing.nop()``, ``testing.echo(1)`` and ``testing.nop(a, b, c)`` (three
tensors) called from Python.

Measured, each in its own process (two FFI runtimes must not share one):

* ``kiln`` -- our package on the Kiln library it finds (``KILN_LIBRARY_PATH``, library
  paths, then ``target/release`` and ``target/debug``), with its compiled call path
  (``kiln._fastcall``) when built;
* ``kiln ctypes`` -- the same with the ctypes path forced (``KILN_PYTHON_CTYPES=1``);
* ``kiln@tvm-ffi`` -- our package on TVM-FFI's ``libtvm_ffi.so`` (when ``apache-tvm-ffi``
  is installed), i.e. the same Python code on the reference C++ runtime;
* ``tvm_ffi`` -- the ``apache-tvm-ffi`` package itself (Cython), for comparison.

Each number is the median over ``--repeat`` timeit runs of ``--number`` calls.

    python bench/ffi_call/python_calls.py [--number 200000] [--repeat 7] [--json]
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import timeit

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STATEMENTS = ("nop()", "echo(1)", "nop(a, b, c)")


def _measure(nop, echo, tensors, number, repeat):
    a, b, c = tensors
    env = {"nop": nop, "echo": echo, "a": a, "b": b, "c": c}
    timeit.repeat("nop(); echo(1)", globals=env, number=number // 10, repeat=1)  # warm up
    out = {}
    for stmt in STATEMENTS:
        runs = timeit.repeat(stmt, globals=env, number=number, repeat=repeat)
        out[stmt] = statistics.median(runs) / number * 1e9
    return out


def _child(kind, number, repeat):
    if kind == "tvm_ffi":
        import tvm_ffi

        import numpy as np

        get, library = tvm_ffi.get_global_func, os.path.basename(tvm_ffi.libinfo.find_libtvm_ffi())
        version = getattr(tvm_ffi, "__version__", "?")
        tensors = [tvm_ffi.from_dlpack(np.zeros(16, np.float32)) for _ in range(3)]
    else:
        import ctypes

        sys.path.insert(0, os.path.join(REPO, "python"))
        import kiln

        for path in os.environ.get("KILN_BENCH_EXTRA_LIBS", "").split(os.pathsep):
            if path:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        get, library, version = kiln.get_global_func, kiln.LIB_PATH, "%d.%d.%d" % kiln.ffi_version()
        import numpy as np

        tensors = [kiln.from_dlpack(np.zeros(16, np.float32)) for _ in range(3)]
    nop, echo = get("testing.nop"), get("testing.echo")
    assert nop() is None and echo(1) == 1
    result = {"kind": kind, "library": library, "version": version}
    result.update(_measure(nop, echo, tensors, number, repeat))
    print(json.dumps(result))


def _run(kind, number, repeat, env=None):
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        kind,
        "--number",
        str(number),
        "--repeat",
        str(repeat),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        return {"kind": kind, "error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=200_000, help="calls per timeit run")
    parser.add_argument("--repeat", type=int, default=7, help="timeit runs (the median is reported)")
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child, args.number, args.repeat)

    results = [_run("kiln", args.number, args.repeat),
               dict(_run("kiln", args.number, args.repeat, {"KILN_PYTHON_CTYPES": "1"}),
                    kind="kiln ctypes")]
    spec = importlib.util.find_spec("tvm_ffi")
    if spec is not None and spec.submodule_search_locations:
        lib_dir = os.path.join(list(spec.submodule_search_locations)[0], "lib")
        env = {
            "KILN_LIBRARY_PATH": os.path.join(lib_dir, "libtvm_ffi.so"),
            "KILN_BENCH_EXTRA_LIBS": os.path.join(lib_dir, "libtvm_ffi_testing.so"),
        }
        results.append(dict(_run("kiln", args.number, args.repeat, env), kind="kiln@tvm-ffi"))
        results.append(_run("tvm_ffi", args.number, args.repeat))
    else:
        results.append({"kind": "tvm_ffi", "error": "apache-tvm-ffi is not installed"})

    if args.json:
        for r in results:
            print(json.dumps(r))
        return
    print("per-call time from Python, median of %d x %d calls" % (args.repeat, args.number))
    print("%-14s %10s %11s %14s  %s" % ("binding", "nop() ns", "echo(1) ns", "3 tensors ns",
                                          "library"))
    for r in results:
        if "error" in r:
            print("%-14s %10s %11s %14s  %s" % (r["kind"], "-", "-", "-", r["error"]))
        else:
            print("%-14s %10.0f %11.0f %14.0f  %s" % (r["kind"], r["nop()"], r["echo(1)"],
                                                    r["nop(a, b, c)"], r["library"]))


if __name__ == "__main__":
    main()
