"""OpenCL from Python on whatever OpenCL platform the machine has (PoCL on CI): the device and
its attributes, tensors on it, a hand-written kernel module run with TVM's launch convention,
packed into an exported library beside a host module and run again in a fresh process by
``libkiln_runtime.so`` alone, and through Kiln's RPC server on the server's OpenCL device.
Outputs are poisoned first and compared with numpy on fresh random inputs.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
import kiln.module
import kiln.rpc
from kiln import te
from kiln.registry import get_global_func

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB_DIR = os.path.dirname(os.path.abspath(kiln.LIB_PATH))

SOURCE = """
__kernel void scale_add(__global const float* restrict a, __global const float* restrict b,
                        __global float* restrict c, float alpha, int n) {
  int i = get_group_id(0) * get_local_size(0) + get_local_id(0);
  if (i < n) {
    c[i] = alpha * a[i] + b[i];
  }
}
"""
KERNELS = [["scale_add", ["handle", "handle", "handle", "float32", "int32"],
            ["blockIdx.x", "threadIdx.x"]]]
THREADS = 32


@pytest.fixture(scope="module")
def cl():
    dev = kiln.opencl(0)
    if not dev.exist:
        pytest.skip("no OpenCL device (scripts/setup.sh installs PoCL)")
    return dev


def create(source=SOURCE, kernels=KERNELS):
    return get_global_func("runtime.OpenCLModuleCreate")(source, kernels)


def run_scale_add(f, dev, n, rng):
    x, y = rng.random(n, dtype="float32"), rng.random(n, dtype="float32")
    a, b = kiln.tensor(x, dev), kiln.tensor(y, dev)
    c = kiln.tensor(np.full(n, np.nan, "float32"), dev)
    f(a, b, c, 1.5, n, (n + THREADS - 1) // THREADS, THREADS)
    np.testing.assert_allclose(c.numpy(), 1.5 * x + y, rtol=1e-6)


def test_device_and_tensors(cl):
    assert cl.device_name and cl.max_threads_per_block >= 1 and cl.warp_size == 1
    x = np.random.default_rng().standard_normal((17, 5)).astype("float32")
    t = kiln.tensor(x, cl)
    assert t.device == cl
    np.testing.assert_array_equal(t.numpy(), x)
    u = kiln.empty((17, 5), "float32", cl)
    u.copyfrom(t)
    np.testing.assert_array_equal(u.numpy(), x)
    assert not kiln.opencl(64).exist
    with pytest.raises(ValueError, match="OpenCL device 64 does not exist"):
        kiln.empty((2,), "float32", kiln.opencl(64))


def test_hand_written_kernel(cl):
    m = create()
    assert m.kind == "opencl" and "scale_add" in m.inspect_source("cl")
    rng = np.random.default_rng()
    for n in (1, 31, 32, 1000):
        run_scale_add(m["scale_add"], cl, n, rng)
    back = kiln.module.load_from_bytes("opencl", m.save_to_bytes())
    run_scale_add(back["scale_add"], cl, 77, rng)


def test_bad_kernels_and_launches(cl):
    broken = create("__kernel void k(__global float* a) {\n  a[0] = nope;\n}\n",
                    [["k", ["handle"], ["threadIdx.x"]]])
    t = kiln.empty((4,), "float32", cl)
    with pytest.raises(RuntimeError, match=r"does not build(.|\n)*source line 2"):
        broken["k"](t, 1)
    f = create()["scale_add"]
    with pytest.raises(ValueError, match="is larger than"):
        f(t, t, t, 1.0, 4, 1, 1 << 24)
    with pytest.raises(TypeError, match="takes 5 argument"):
        f(t, t)
    with pytest.raises(ValueError, match="not a thread index"):
        create(SOURCE, [["scale_add", ["handle"], ["lane.x"]]])


@pytest.fixture(scope="module")
def exported(cl, tmp_path_factory):
    """A host module (a small LLVM function) importing the OpenCL module, exported to one .so."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    host = kiln.build(te.create_schedule(B.op), [A, B], target="llvm", name="add_one")
    host.import_module(create())
    path = str(tmp_path_factory.mktemp("opencl") / "with_opencl.so")
    host.export_library(path)
    return path


def test_exported_library_runs_in_a_fresh_runtime_only_process(exported, tmp_path):
    runtime = os.path.join(LIB_DIR, "libkiln_runtime.so")
    if not os.path.exists(runtime):
        pytest.skip(f"no {runtime}")
    only = tmp_path / "runtime_only"
    only.mkdir()
    os.symlink(runtime, only / "libkiln_runtime.so")
    script = textwrap.dedent(f"""
        import numpy as np, kiln
        assert kiln.LIB_PATH.endswith("libkiln_runtime.so"), kiln.LIB_PATH
        m = kiln.load_module({exported!r})
        assert [i.kind for i in m.imports] == ["opencl"], [i.kind for i in m.imports]
        f = m.get_function("scale_add", query_imports=True)
        dev = kiln.opencl(0)
        rng = np.random.default_rng()
        x, y = rng.random(500, dtype="float32"), rng.random(500, dtype="float32")
        c = kiln.tensor(np.full(500, np.nan, "float32"), dev)
        f(kiln.tensor(x, dev), kiln.tensor(y, dev), c, 1.5, 500, 16, 32)
        np.testing.assert_allclose(c.numpy(), 1.5 * x + y, rtol=1e-6)
        print("ok")
    """)
    env = dict(os.environ, KILN_LIBRARY_PATH=str(only), PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_kernel_through_rpc_on_the_servers_opencl_device(exported):
    with kiln.rpc.Server(port=0) as srv:
        sess = kiln.rpc.connect("127.0.0.1", srv.port)
        dev = sess.device("opencl", 0)
        assert dev.exist and dev.device_name
        sess.upload(exported)
        m = sess.load_module(os.path.basename(exported))
        run_scale_add(m["scale_add"], dev, 333, np.random.default_rng())


def test_kiln_inspect_shows_the_device_module(exported):
    exe = os.path.join(LIB_DIR, "kiln")
    if not os.access(exe, os.X_OK):
        pytest.skip(f"no kiln binary in {LIB_DIR}")
    out = subprocess.run([exe, "inspect", exported], capture_output=True, text=True, check=True)
    assert 'module "opencl"' in out.stdout and "kernels (1): scale_add" in out.stdout, out.stdout


def test_raw_streams(cl):
    s = cl.create_raw_stream()
    assert s != 0
    cl.set_raw_stream(s)
    try:
        run_scale_add(create()["scale_add"], cl, 300, np.random.default_rng())
        cl.sync(s)
    finally:
        cl.set_raw_stream(0)
        cl.free_raw_stream(s)
    assert kiln.cpu().create_raw_stream() == 0


def _te_kernels():
    """Four TE programs scheduled for the device: a vector add over a symbolic length, a row
    sum (one work-item per row), a 16 x 16 tiled matmul staged in shared memory, and a direct
    conv2d (one work-item per output element)."""
    out = {}
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    out["vadd"] = (s, [A, B, C])

    X = te.placeholder((96, 70), name="X")
    k = te.reduce_axis((0, 70), name="k")
    R = te.compute((96,), lambda i: te.sum(X[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    bx, tx = s[R].split(R.op.axis[0], factor=32)
    s[R].bind(bx, te.thread_axis("blockIdx.x"))
    s[R].bind(tx, te.thread_axis("threadIdx.x"))
    out["rowsum"] = (s, [X, R])

    m = 64
    P = te.placeholder((m, m), name="P")
    Q = te.placeholder((m, m), name="Q")
    kk = te.reduce_axis((0, m), name="kk")
    M = te.compute((m, m), lambda i, j: te.sum(P[i, kk] * Q[kk, j], axis=kk), name="M")
    s = te.create_schedule(M.op)
    PS = s.cache_read(P, "shared", [M])
    QS = s.cache_read(Q, "shared", [M])
    ML = s.cache_write(M, "local")
    i, j = s[M].op.axis
    bi, ti = s[M].split(i, factor=16)
    bj, tj = s[M].split(j, factor=16)
    s[M].reorder(bi, bj, ti, tj)
    for ax, tag in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (ti, "threadIdx.y"), (tj, "threadIdx.x")):
        s[M].bind(ax, te.thread_axis(tag))
    s[ML].compute_at(s[M], tj)
    ko, _ = s[ML].split(s[ML].op.reduce_axis[0], factor=16)
    for t in (PS, QS):
        s[t].compute_at(s[ML], ko)
        a, b = s[t].op.axis
        s[t].bind(a, te.thread_axis("threadIdx.y"))
        s[t].bind(b, te.thread_axis("threadIdx.x"))
    out["matmul"] = (s, [P, Q, M])

    D = te.placeholder((1, 3, 12, 12), name="D")
    W = te.placeholder((8, 3, 3, 3), name="W")
    rc = te.reduce_axis((0, 3), name="rc")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    O = te.compute(
        (1, 8, 10, 10),
        lambda nn, o, y, x: te.sum(D[nn, rc, y + ry, x + rx] * W[o, rc, ry, rx], axis=[rc, ry, rx]),
        name="O",
    )
    s = te.create_schedule(O.op)
    fused = s[O].fuse(*s[O].op.axis)
    bx, tx = s[O].split(fused, factor=64)
    s[O].bind(bx, te.thread_axis("blockIdx.x"))
    s[O].bind(tx, te.thread_axis("threadIdx.x"))
    out["conv2d"] = (s, [D, W, O])
    return out


def test_te_kernels_exported_run_in_a_fresh_runtime_only_process(cl, tmp_path):
    runtime = os.path.join(LIB_DIR, "libkiln_runtime.so")
    if not os.path.exists(runtime):
        pytest.skip(f"no {runtime}")
    for name, (s, args) in _te_kernels().items():
        kiln.build(s, args, target="opencl", name=name).export_library(str(tmp_path / f"{name}.so"))
    only = tmp_path / "runtime_only"
    only.mkdir()
    os.symlink(runtime, only / "libkiln_runtime.so")
    script = textwrap.dedent(f"""
        import numpy as np, kiln
        assert kiln.LIB_PATH.endswith("libkiln_runtime.so"), kiln.LIB_PATH
        dev, rng, d = kiln.opencl(0), np.random.default_rng(), {str(tmp_path)!r}
        def run(name, ins, out_shape):
            m = kiln.load_module(f"{{d}}/{{name}}.so")
            assert [i.kind for i in m.imports] == ["opencl"]
            out = kiln.tensor(np.full(out_shape, np.nan, "float32"), dev)
            m[name](*[kiln.tensor(a, dev) for a in ins], out)
            return out.numpy()
        a, b = rng.random(1000, dtype="float32"), rng.random(1000, dtype="float32")
        np.testing.assert_allclose(run("vadd", [a, b], (1000,)), a + b, rtol=1e-6)
        x = rng.random((96, 70), dtype="float32")
        np.testing.assert_allclose(run("rowsum", [x], (96,)), x.sum(axis=1), rtol=1e-5)
        p, q = rng.random((64, 64), dtype="float32"), rng.random((64, 64), dtype="float32")
        np.testing.assert_allclose(run("matmul", [p, q], (64, 64)), p @ q, rtol=1e-4)
        dd, w = rng.random((1, 3, 12, 12), dtype="float32"), rng.random((8, 3, 3, 3), dtype="float32")
        want = np.zeros((1, 8, 10, 10), np.float32)
        for o in range(8):
            for y in range(10):
                for xx in range(10):
                    want[0, o, y, xx] = (dd[0, :, y:y + 3, xx:xx + 3] * w[o]).sum()
        np.testing.assert_allclose(run("conv2d", [dd, w], (1, 8, 10, 10)), want, rtol=1e-4)
        print("ok")
    """)
    env = dict(os.environ, KILN_LIBRARY_PATH=str(only), PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
