"""RPC interop with Apache TVM 0.27, both ways.

(a) TVM's client (``tvm.rpc.connect``) against Kiln's server (``kiln rpc server``): upload a
    library compiled by TVM, load it, allocate remote tensors, run, copy back, time it.
(b) Kiln's client (``kiln.rpc.connect``) against TVM's server
    (``python -m tvm.exec.rpc_server``) with a library compiled by Kiln.

Each side runs in its own process (two runtimes exporting the same C symbols must not share
one); the client scripts compare with numpy on outputs poisoned with NaN and print ``OK``.
"""

import importlib.util
import os
import re
import socket
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="apache-tvm is not installed")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kiln_cli():
    lib = os.environ.get("KILN_LIBRARY_PATH", os.path.join(ROOT, "target", "debug"))
    folder = lib if os.path.isdir(lib) else os.path.dirname(lib)
    path = os.path.join(folder, "kiln")
    if not os.path.isfile(path):
        pytest.skip("the kiln command is not built next to libkiln.so")
    return path


def run_script(code, *args):
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture()
def kiln_server():
    proc = subprocess.Popen([kiln_cli(), "rpc", "server", "--port", "0", "--key", "interop"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(re.search(r":(\d+)$", proc.stdout.readline().strip()).group(1))
    yield port
    proc.kill()
    proc.wait()


TVM_CLIENT = """
import sys, numpy as np, tvm
from tvm import te, rpc
port, out = int(sys.argv[1]), sys.argv[2]
n = te.var("n")
A = te.placeholder((n,), name="A"); B = te.placeholder((n,), name="B")
C = te.compute((n,), lambda i: A[i] * B[i] + 1.0, name="C")
f = te.create_prim_func([A, B, C]).with_attr("global_symbol", "fma1")
tvm.compile(tvm.IRModule({"fma1": f}), tvm.target.Target("llvm")).export_library(out)
try:
    rpc.connect("127.0.0.1", port, key="wrong")
    raise SystemExit("a wrong key was accepted")
except Exception as e:
    assert "key" in str(e), e
sess = rpc.connect("127.0.0.1", port, key="interop")
assert sess.get_function("testing.add_one")(41) == 42
sess.upload(out)
m = sess.load_module("fma1.so")
dev = sess.cpu()
rng = np.random.default_rng()
x, y = rng.random(4099).astype("float32"), rng.random(4099).astype("float32")
a, b = tvm.runtime.tensor(x, dev), tvm.runtime.tensor(y, dev)
c = tvm.runtime.tensor(np.full(4099, np.nan, "float32"), dev)
m["fma1"](a, b, c)
np.testing.assert_allclose(c.numpy(), x * y + 1.0, rtol=1e-6)
big = rng.standard_normal((256, 1024)).astype("float32")
np.testing.assert_array_equal(tvm.runtime.tensor(big, dev).numpy(), big)
res = m.time_evaluator("fma1", dev, number=10, repeat=3)(a, b, c)
assert len(res.results) == 3 and all(0 < t < 0.1 for t in res.results), res
try:
    sess.get_function("testing.test_raise_error")("ValueError", "kiln says no")
    raise SystemExit("no error")
except Exception as e:
    assert "kiln says no" in str(e), e
print("OK")
"""


def test_tvm_client_against_kiln_server(kiln_server, tmp_path):
    run_script(TVM_CLIENT, kiln_server, tmp_path / "fma1.so")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def tvm_server():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tvm.exec.rpc_server", "--host", "127.0.0.1",
         "--port", str(port), "--port-end", str(port + 1)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stderr.readline()
        if "bind to" in line or not line:
            break
    yield port
    proc.kill()
    proc.wait()


KILN_CLIENT = """
import sys, numpy as np, kiln, kiln.rpc
from kiln import te
port, out = int(sys.argv[1]), sys.argv[2]
n = te.var("n")
A = te.placeholder((n,), name="A"); B = te.placeholder((n,), name="B")
C = te.compute((n,), lambda i: A[i] - B[i] * 3.0, name="C")
s = te.create_schedule(C.op)
kiln.build(s, [A, B, C], target="llvm", name="sub3").export_library(out)
sess = kiln.rpc.connect("127.0.0.1", port)
sess.upload(out)
m = sess.load_module("sub3.so")
dev = sess.cpu(0)
rng = np.random.default_rng()
x, y = rng.random(1001).astype("float32"), rng.random(1001).astype("float32")
a, b = kiln.tensor(x, dev), kiln.tensor(y, dev)
c = kiln.tensor(np.full(1001, np.nan, "float32"), dev)
m["sub3"](a, b, c)
np.testing.assert_allclose(c.numpy(), x - y * 3.0, rtol=1e-6)
big = rng.standard_normal((512, 1024)).astype("float32")
np.testing.assert_array_equal(kiln.tensor(big, dev).numpy(), big)
res = m.time_evaluator("sub3", dev, number=10, repeat=3)(a, b, c)
assert len(res.results) == 3 and all(0 < t < 0.1 for t in res.results), res
try:
    sess.get_function("no.such.function")
    raise SystemExit("found a missing function")
except AttributeError:
    pass
print("OK")
"""


def test_kiln_client_against_tvm_server(tvm_server, tmp_path):
    run_script(KILN_CLIENT, tvm_server, tmp_path / "sub3.so")
