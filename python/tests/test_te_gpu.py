"""GPU-style schedules from Python: te.thread_axis, Stage.bind and kiln.build for the opencl
and cuda targets (kernel source and host module; nothing runs on a device here)."""

import pytest
from conftest import has_globals

import kiln
from kiln import te

pytestmark = pytest.mark.skipif(
    not has_globals("te.ThreadAxis", "te.StageBind", kiln.driver.CODEGEN_BUILD),
    reason="the runtime library has no thread binding or no code generator",
)


def _vadd():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def test_bound_loops_lower_to_thread_extents():
    s, args = _vadd()
    text = str(kiln.lower(s, args, simple_mode=True))
    assert 'T.attr(blockIdx.x, "thread_extent", (n + 63) // 64)' in text
    assert 'T.attr(threadIdx.x, "thread_extent", 64)' in text


def test_bind_errors():
    with pytest.raises(ValueError, match="unknown thread tag"):
        te.thread_axis("vthread")
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(B.op.axis[0], tx)
    with pytest.raises(ValueError, match="already bound"):
        s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))


def test_build_opencl_and_cuda():
    s, args = _vadd()
    mod = kiln.build(s, args, target="opencl", name="vadd")
    (dev,) = mod.imports
    assert dev.kind == "opencl"
    src = dev.inspect_source("cl")
    assert "__kernel void vadd_kernel0(" in src
    assert "get_group_id(0)" in src
    s, args = _vadd()
    mod = kiln.build(s, args, target="cuda", target_host="llvm", name="vadd")
    assert "__global__ void vadd_kernel0(" in mod.imports[0].inspect_source("cu")


def test_unbound_schedule_is_refused():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ValueError, match="Did you forget to bind"):
        kiln.build(s, [A, B], target="opencl")


def test_built_kernels_run_on_the_opencl_device():
    import numpy as np

    dev = kiln.opencl(0)
    if not dev.exist:
        pytest.skip("no OpenCL device")
    s, args = _vadd()
    mod = kiln.build(s, args, target="opencl", name="vadd")
    rng = np.random.default_rng(7)
    for n in (1, 100, 1000):
        x, y = rng.random(n, dtype="float32"), rng.random(n, dtype="float32")
        a, b = kiln.tensor(x, dev), kiln.tensor(y, dev)
        c = kiln.tensor(np.full(n, np.nan, "float32"), dev)
        mod["vadd"](a, b, c)
        np.testing.assert_allclose(c.numpy(), x + y, rtol=1e-6)


def test_cuda_source_compiles_with_nvcc_where_present(tmp_path):
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc on this machine: the CUDA source is checked as text only")
    s, args = _vadd()
    src = kiln.build(s, args, target="cuda", name="vadd").imports[0].inspect_source("cu")
    path = tmp_path / "vadd.cu"
    path.write_text(src)
    subprocess.run([nvcc, "-c", str(path), "-o", str(tmp_path / "vadd.o")], check=True)


def test_kernel_compiled_here_runs_on_a_remote_opencl_device(tmp_path):
    """A client compiles for opencl, exports, uploads, and runs on the RPC server's device."""
    import numpy as np

    import kiln.rpc

    if not kiln.opencl(0).exist:
        pytest.skip("no OpenCL device")
    s, args = _vadd()
    lib = tmp_path / "vadd_cl.so"
    kiln.build(s, args, target="opencl", name="vadd").export_library(str(lib))
    with kiln.rpc.Server(port=0) as srv:
        sess = kiln.rpc.connect("127.0.0.1", srv.port)
        sess.upload(str(lib))
        remote = sess.load_module("vadd_cl.so")
        dev = sess.device("opencl", 0)
        rng = np.random.default_rng()
        x, y = rng.random(500, dtype="float32"), rng.random(500, dtype="float32")
        c = kiln.tensor(np.full(500, np.nan, "float32"), dev)
        remote["vadd"](kiln.tensor(x, dev), kiln.tensor(y, dev), c)
        np.testing.assert_allclose(c.numpy(), x + y, rtol=1e-6)
