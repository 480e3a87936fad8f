"""kiln.rpc: Kiln's Python client against Kiln's server (in process and as `kiln rpc server`)."""

import os
import subprocess

import numpy as np
import pytest

import kiln
import kiln.rpc
from kiln import te


@pytest.fixture(scope="module")
def server():
    srv = kiln.rpc.Server(port=0)
    yield srv
    srv.terminate()


@pytest.fixture(scope="module")
def vadd_lib(tmp_path_factory):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] * 2.0 + B[i], name="C")
    s = te.create_schedule(C.op)
    f = kiln.build(s, [A, B, C], target="llvm", name="axpy")
    path = str(tmp_path_factory.mktemp("rpc") / "axpy.so")
    f.export_library(path)
    return path


def test_remote_globals_and_errors(server):
    sess = kiln.rpc.connect("127.0.0.1", server.port)
    assert sess.get_function("testing.add_one")(41) == 42
    assert sess.get_function("testing.echo")("héllo") == "héllo"
    assert sess.get_function("testing.echo")(b"\x00\x01") == b"\x00\x01"
    with pytest.raises(ValueError, match="remote says no"):
        sess.get_function("testing.test_raise_error")("ValueError", "remote says no")
    with pytest.raises(AttributeError):
        sess.get_function("no.such.function")


def test_remote_tensors_round_trip(server):
    sess = kiln.rpc.connect("127.0.0.1", server.port)
    dev = sess.cpu(0)
    assert dev.device_type > 128 and dev.device_type % 128 == 1
    x = np.random.default_rng(0).standard_normal((64, 33)).astype("float32")
    a = kiln.tensor(x, dev)
    assert a.device == dev and a.shape == (64, 33)
    np.testing.assert_array_equal(a.numpy(), x)
    b = kiln.empty((64, 33), "float32", dev)
    b.copyfrom(a)
    np.testing.assert_array_equal(b.numpy(), x)
    i = kiln.tensor(np.arange(10, dtype="int64"), dev)
    np.testing.assert_array_equal(i.numpy(), np.arange(10))


def test_upload_load_run_and_time(server, vadd_lib):
    sess = kiln.rpc.connect("127.0.0.1", server.port)
    sess.upload(vadd_lib)
    assert "axpy.so" in sess.listdir(".").split(",")
    m = sess.load_module("axpy.so")
    assert m.kind == "rpc"
    dev = sess.cpu()
    rng = np.random.default_rng(1)
    x, y = rng.random(1000, dtype="float32"), rng.random(1000, dtype="float32")
    a, b = kiln.tensor(x, dev), kiln.tensor(y, dev)
    c = kiln.tensor(np.full(1000, np.nan, "float32"), dev)
    m["axpy"](a, b, c)
    np.testing.assert_allclose(c.numpy(), x * 2.0 + y, rtol=1e-6)
    res = m.time_evaluator("axpy", dev, number=5, repeat=3)(a, b, c)
    assert len(res.results) == 3 and all(0 < t < 0.1 for t in res.results)
    with pytest.raises(Exception, match="local device"):
        m["axpy"](kiln.tensor(x), b, c)


def test_key_and_paths_are_enforced():
    with kiln.rpc.Server(port=0, key="k1") as srv:
        with pytest.raises(RuntimeError, match="MISMATCH"):
            kiln.rpc.connect("127.0.0.1", srv.port)
        sess = kiln.rpc.connect("127.0.0.1", srv.port, key="k1")
        for bad in ["../x", "/tmp/x", "a/b", ".."]:
            with pytest.raises(ValueError, match="refused path"):
                sess.upload(b"data", target=bad)
        sess.upload(b"data", target="ok.bin")
        assert sess.download("ok.bin") == b"data"


def test_cli_server_and_tracker():
    tracker = kiln.rpc.Tracker(port=0, use_subprocess=True)
    srv = kiln.rpc.Server(port=0, key="dev1", tracker_addr=("127.0.0.1", tracker.port), use_subprocess=True)
    try:
        tsess = kiln.rpc.connect_tracker("127.0.0.1", tracker.port)
        for _ in range(100):
            summary = tsess.summary()
            if summary["queue_info"].get("dev1", {}).get("free"):
                break
            import time

            time.sleep(0.1)
        assert summary["queue_info"]["dev1"]["free"] >= 1
        assert any(s["key"] == "server:dev1" for s in summary["server_info"])
        sess = tsess.request("dev1")
        assert sess.get_function("testing.add_one")(1) == 2
        out = subprocess.run(
            [kiln.rpc.find_cli(), "rpc", "summary", "--tracker", "127.0.0.1:%d" % tracker.port],
            capture_output=True, text=True, check=True,
        ).stdout
        assert "server:dev1" in out
    finally:
        srv.terminate()
        tracker.terminate()
