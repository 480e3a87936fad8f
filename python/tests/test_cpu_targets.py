"""Libraries and CPUs from Python: a library compiled for a CPU this machine is not raises a
RuntimeError naming the file, the CPU and the missing features (in a child process, so that a
crash would be reported, not end the session), also when an RPC server loads it; a library
built from a list of targets runs the best variant this machine can and matches onnxruntime.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.rpc
from kiln.graph_executor import GraphModule
from host_cpu import host_flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "examples", "model", "model.onnx")

LOAD = """
import sys, kiln
try:
    kiln.load_module(sys.argv[1])
    print("loaded")
except Exception as e:
    print(type(e).__name__ + ": " + str(e))
"""


needs_no_amx = pytest.mark.skipif(
    "amx_tile" in host_flags(), reason="this CPU has AMX: a sapphirerapids library runs here"
)


@pytest.fixture(scope="module")
def spr_lib(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cpu") / "spr.so")
    kiln.onnx.compile(MODEL, target="llvm -mcpu=sapphirerapids").export_library(path)
    return path


@needs_no_amx
def test_a_library_for_another_cpu_raises(spr_lib):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               KILN_LIBRARY_PATH=os.path.dirname(os.path.abspath(kiln.LIB_PATH)))
    p = subprocess.run([sys.executable, "-c", LOAD, spr_lib], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, f"loading crashed (exit {p.returncode}):\n{p.stderr}"
    out = p.stdout.strip()
    assert out.startswith("RuntimeError: "), out
    for needle in (spr_lib, "sapphirerapids", "amx-tile", "lacks"):
        assert needle in out, out


@needs_no_amx
def test_an_rpc_server_refuses_it_too(spr_lib):
    srv = kiln.rpc.Server(port=0)
    try:
        sess = kiln.rpc.connect("127.0.0.1", srv.port)
        sess.upload(spr_lib)
        with pytest.raises(RuntimeError, match="amx-tile"):
            sess.load_module("spr.so")
        # The session still serves.
        assert sess.get_function("testing.add_one")(1) == 2
    finally:
        srv.terminate()


def test_a_list_of_targets_gives_one_library_that_runs_here(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    targets = ["llvm -mcpu=x86-64-v3", "llvm -mcpu=x86-64-v4"]
    path = str(tmp_path / "two.so")
    kiln.onnx.compile(MODEL, target=targets).export_library(path)
    x = np.random.default_rng().standard_normal((1, 3, 32, 32)).astype("float32")
    gm = GraphModule(kiln.load_module(path)["default"](kiln.cpu()))
    gm.set_input("input", x)
    out = kiln.empty((1, 10), "float32")
    out.copyfrom(np.full((1, 10), np.nan, dtype="float32"))
    gm.run()
    got = gm.get_output(0, out).numpy()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(MODEL, so, providers=["CPUExecutionProvider"]).run(
        None, {"input": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_tensor_compiler_builds_one_library_for_two_levels(tmp_path):
    from kiln import te
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    f = kiln.build(s, [A, B], target=["llvm -mcpu=x86-64-v4", "llvm -mcpu=x86-64-v3"],
                   name="affine")
    path = str(tmp_path / "affine.so")
    f.export_library(path)
    m = kiln.load_module(path)
    records = m.target_records()
    assert sorted(r["cpu"] for r in records) == ["x86-64-v3", "x86-64-v4"], records
    chosen = [r["cpu"] for r in records if r["chosen"]]
    assert chosen == (["x86-64-v4"] if "avx512f" in host_flags() else ["x86-64-v3"]), records
    a = np.random.default_rng().standard_normal(1000).astype("float32")
    b = np.full(1000, np.nan, dtype="float32")
    m["affine"](a, b)
    np.testing.assert_allclose(b, a * 2.0 + 1.0, rtol=1e-6)
