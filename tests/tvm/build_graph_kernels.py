"""Build the graph executor test kernels with Apache TVM 0.27 (run in its own process).

    python tests/tvm/build_graph_kernels.py OUT_DIR

The kernels of ``crates/kiln-runtime/tests/graph_executor_support/mlp_graph.json``, float32,
fixed shapes, one library:

- ``dense``   x[4,8], w[16,8], b[16] -> out[4,16] = x @ w.T + b (outer loop parallel)
- ``relu``    [4,16] -> [4,16]
- ``relu1d``  [32] -> [32] (the graph passes [4,8] entries with flatten_data)
- ``add``     [4,16], [4,16] -> [4,16]
- ``split2``  [4,16] -> [4,8], [4,8] (a function with two outputs)

Writes ``kernels.o`` (the host object, for ``load_static_library`` + ``export_library``),
``kernels.so`` (TVM's own export) and ``manifest.json``. Kiln's tests import no TVM: they read
the manifest and use the files in another process.
"""

import json
import os
import sys

import tvm
from tvm import te

# The host CPU as TVM's LLVM names it: the libraries run on this machine, whatever its CPU.
TARGET = tvm.target.Target(
    {"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu()}
)


def named(func, name):
    return func.with_attr("global_symbol", name)


def dense():
    x = te.placeholder((4, 8), name="x")
    w = te.placeholder((16, 8), name="w")
    b = te.placeholder((16,), name="b")
    k = te.reduce_axis((0, 8), name="k")
    d = te.compute((4, 16), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="D")
    out = te.compute((4, 16), lambda i, j: d[i, j] + b[j], name="O")
    mod = tvm.IRModule({"dense": named(te.create_prim_func([x, w, b, out]), "dense")})
    sch = tvm.s_tir.Schedule(mod)
    i, _, _ = sch.get_loops(sch.get_sblock("D", func_name="dense"))
    sch.parallel(i)
    return sch.mod["dense"]


def unary(name, shape):
    a = te.placeholder(shape, name="a")
    out = te.compute(shape, lambda *i: te.max(a(*i), tvm.tirx.const(0, "float32")), name="out")
    return named(te.create_prim_func([a, out]), name)


def add():
    a = te.placeholder((4, 16), name="a")
    b = te.placeholder((4, 16), name="b")
    out = te.compute((4, 16), lambda i, j: a[i, j] + b[i, j], name="out")
    return named(te.create_prim_func([a, b, out]), "add")


def split2():
    a = te.placeholder((4, 16), name="a")
    lo = te.compute((4, 8), lambda i, j: a[i, j], name="lo")
    hi = te.compute((4, 8), lambda i, j: a[i, j + 8], name="hi")
    return named(te.create_prim_func([a, lo, hi]), "split2")


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    funcs = {
        "dense": dense(),
        "relu": unary("relu", (4, 16)),
        "relu1d": unary("relu1d", (32,)),
        "add": add(),
        "split2": split2(),
    }
    ex = tvm.compile(tvm.IRModule(funcs), TARGET)
    ex.mod.write_to_file(os.path.join(out_dir, "kernels.o"))
    ex.export_library(os.path.join(out_dir, "kernels.so"))
    manifest = {"tvm_version": tvm.__version__, "target": str(TARGET), "functions": sorted(funcs)}
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    print(f"built {len(funcs)} kernels in {out_dir}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
