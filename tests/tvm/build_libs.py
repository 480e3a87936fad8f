"""Build the interop test libraries with Apache TVM 0.27 (run in its own process).

    python tests/tvm/build_libs.py OUT_DIR

Writes into OUT_DIR:

- ``vadd.so``      vector add, float32, symbolic length ``n``
- ``matmul.so``    64x64x64 float32 matmul, outer loop parallel (``__TVMBackendParallelLaunch``)
- ``workspace.so`` two TE stages whose 256 KiB intermediate goes to ``__TVMBackendAllocWorkspace``
- ``multi.so``     several kernels (float32 add/mul, int32 add, float64 scale) in one library
- ``callback.so``  a kernel that calls the global ``kiln_test.scale_into`` with ``T.call_packed``
                   (library context, ``HandleInitOnce``, ``ModLookupFromImports``, ``FunctionCall``)
- ``relax_vm.so``  a Relax VM executable (its blob holds a ``relax.VMExecutable`` module)
- ``manifest.json`` what was built, the context slots each library defines, and the error text
                   TVM's own runtime gives for a few bad calls (Kiln must give the same)

Nothing of TVM is imported by Kiln's tests: they read the manifest and load the ``.so`` files in
another process.
"""

import json
import os
import subprocess
import sys

import numpy as np
import tvm
from tvm import te
from tvm.script import relax as R
from tvm.script import tirx as T

# The host CPU as TVM's LLVM names it: the libraries run on this machine, whatever its CPU.
TARGET = tvm.target.Target(
    {"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu()}
)
SLOTS = [
    "__TVMFFIFunctionCall",
    "__TVMFFIErrorSetRaisedFromCStr",
    "__TVMFFIEnvModLookupFromImports",
    "__TVMFFIHandleInitOnce",
    "__TVMBackendAllocWorkspace",
    "__TVMBackendFreeWorkspace",
    "__TVMBackendParallelLaunch",
    "__TVMBackendParallelBarrier",
    "__tvm_ffi__library_ctx",
    "__tvm_ffi__library_bin",
]


def prim(func, name):
    return func.with_attr("global_symbol", name)


def build(mod, path):
    ex = tvm.compile(mod, TARGET)
    ex.export_library(path)
    return ex


def vadd():
    n = te.var("n")
    a = te.placeholder((n,), name="A", dtype="float32")
    b = te.placeholder((n,), name="B", dtype="float32")
    c = te.compute((n,), lambda i: a[i] + b[i], name="C")
    return prim(te.create_prim_func([a, b, c]), "vadd")


def matmul(n=64):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"matmul": prim(te.create_prim_func([a, b, c]), "matmul")}))
    i, _, _ = sch.get_loops(sch.get_sblock("C", func_name="matmul"))
    sch.parallel(i)
    return sch.mod


def two_stage(n=1 << 16):
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0 + 1.0, name="B")
    c = te.compute((n,), lambda i: b[n - 1 - i] - a[i], name="C")
    return prim(te.create_prim_func([a, c]), "two_stage")


def elementwise(name, dtype, fn, n=None):
    n = te.var("n") if n is None else n
    a = te.placeholder((n,), name="A", dtype=dtype)
    b = te.placeholder((n,), name="B", dtype=dtype)
    c = te.compute((n,), lambda i: fn(a[i], b[i]), name="C")
    return prim(te.create_prim_func([a, b, c]), name)


def scale(n=None):
    n = te.var("n") if n is None else n
    a = te.placeholder((n,), name="A", dtype="float64")
    c = te.compute((n,), lambda i: a[i] * 0.5, name="C")
    return prim(te.create_prim_func([a, c]), "half64")


@T.prim_func
def call_scale(a: T.handle, b: T.handle, factor: T.int64):
    T.func_attr({"global_symbol": "call_scale"})
    A = T.match_buffer(a, (16,), "float32")
    B = T.match_buffer(b, (16,), "float32")
    T.evaluate(T.call_packed("kiln_test.scale_into", A, B, factor))


@tvm.script.ir_module
class RelaxAdd:
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        y = R.add(x, x)
        return y


def defined_slots(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True)
    names = {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}
    return sorted(s for s in SLOTS if s in names)


def error_text(func, *args):
    try:
        func(*args)
    except Exception as exc:  # noqa: BLE001 - we record whatever TVM raised
        return {"kind": type(exc).__name__, "message": str(exc)}
    raise AssertionError("expected the call to fail")


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    p = lambda name: os.path.join(out_dir, name)
    libs = {}

    build(tvm.IRModule({"vadd": vadd()}), p("vadd.so"))
    libs["vadd"] = {"file": "vadd.so", "functions": ["vadd"]}
    build(matmul(), p("matmul.so"))
    libs["matmul"] = {"file": "matmul.so", "functions": ["matmul"], "n": 64}
    build(tvm.IRModule({"two_stage": two_stage()}), p("workspace.so"))
    libs["workspace"] = {"file": "workspace.so", "functions": ["two_stage"], "n": 1 << 16}
    multi = {
        "add_f32": elementwise("add_f32", "float32", lambda x, y: x + y),
        "mul_f32": elementwise("mul_f32", "float32", lambda x, y: x * y),
        "add_i32": elementwise("add_i32", "int32", lambda x, y: x + y),
        "half64": scale(),
    }
    build(tvm.IRModule(multi), p("multi.so"))
    libs["multi"] = {"file": "multi.so", "functions": sorted(multi)}
    build(tvm.IRModule({"call_scale": call_scale}), p("callback.so"))
    libs["callback"] = {"file": "callback.so", "functions": ["call_scale"]}
    build(RelaxAdd, p("relax_vm.so"))
    libs["relax_vm"] = {"file": "relax_vm.so", "functions": []}

    for info in libs.values():
        info["slots"] = defined_slots(p(info["file"]))

    # What TVM's own runtime says for bad calls (generated code writes these messages).
    m = tvm.runtime.load_module(p("vadd.so"))
    f64 = tvm.runtime.tensor(np.zeros(4, "float64"))
    f32 = tvm.runtime.tensor(np.zeros(4, "float32"))
    f32_5 = tvm.runtime.tensor(np.zeros(5, "float32"))
    errors = {
        "vadd_wrong_dtype": error_text(m["vadd"], f64, f32, f32),
        "vadd_wrong_count": error_text(m["vadd"], f32, f32),
        "vadd_wrong_shape": error_text(m["vadd"], f32, f32, f32_5),
    }
    mm = tvm.runtime.load_module(p("matmul.so"))
    errors["matmul_wrong_ndim"] = error_text(
        mm["matmul"], f32, tvm.runtime.tensor(np.zeros((64, 64), "float32")), f32
    )
    manifest = {
        "tvm_version": tvm.__version__,
        "target": str(TARGET),
        "libraries": libs,
        "tvm_errors": errors,
    }
    with open(p("manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    print("built %d libraries in %s" % (len(libs), out_dir))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
