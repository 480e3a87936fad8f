"""Kiln runs libraries compiled by Apache TVM 0.27 (issue 3's acceptance).

``build_libs.py`` compiles the libraries with TVM in a child process; this process imports
Kiln only (two runtimes exporting the same C symbols must not share a process), loads each
``.so``, runs it on fresh random inputs with the outputs poisoned with NaN, and compares with
numpy. Skipped when TVM is not installed (``scripts/tvm_interop_tests.sh`` installs it).
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from dltensor import DLArg, view

import kiln

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="apache-tvm is not installed")

RNG = np.random.default_rng()


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("tvm_libs")
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "build_libs.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out / "manifest.json") as f:
        manifest = json.load(f)
    manifest["dir"] = str(out)
    return manifest


def lib_path(built, name):
    return os.path.join(built["dir"], built["libraries"][name]["file"])


def load(built, name):
    return kiln.load_module(lib_path(built, name))


def poisoned(shape, dtype="float32"):
    arg = DLArg(np.empty(shape, dtype))
    if np.dtype(dtype).kind == "f":
        arg.array[...] = np.nan
    else:
        arg.array[...] = np.iinfo(dtype).min
    return arg


def rand(shape, dtype="float32"):
    if np.dtype(dtype).kind == "f":
        return DLArg(RNG.standard_normal(shape).astype(dtype))
    return DLArg(RNG.integers(-1000, 1000, size=shape).astype(dtype))


def test_tvm_is_not_loaded_in_this_process():
    assert "tvm" not in sys.modules and "tvm_ffi" not in sys.modules


def test_every_library_defines_the_slots_it_needs(built):
    libs = built["libraries"]
    assert "__TVMBackendParallelLaunch" in libs["matmul"]["slots"]
    assert {"__TVMBackendAllocWorkspace", "__TVMBackendFreeWorkspace"} <= set(libs["workspace"]["slots"])
    assert {
        "__tvm_ffi__library_ctx",
        "__TVMFFIEnvModLookupFromImports",
        "__TVMFFIHandleInitOnce",
        "__TVMFFIFunctionCall",
    } <= set(libs["callback"]["slots"])
    assert "__tvm_ffi__library_bin" in libs["relax_vm"]["slots"]


@pytest.mark.parametrize("n", [1, 7, 64, 1000, 4099])
def test_vadd_with_symbolic_length(built, n):
    mod = load(built, "vadd")
    assert mod.kind == "library"
    a, b, c = rand(n), rand(n), poisoned(n)
    mod["vadd"](a, b, c)
    np.testing.assert_array_equal(c.array, a.array + b.array)


def test_parallel_matmul_same_result_for_1_2_8_threads(built):
    mod = load(built, "matmul")
    n = built["libraries"]["matmul"]["n"]
    a, b = rand((n, n)), rand((n, n))
    expected = a.array.astype(np.float64) @ b.array.astype(np.float64)
    set_threads = kiln.get_global_func("runtime.SetNumThreads", allow_missing=True)
    get_threads = kiln.get_global_func("runtime.GetNumThreads", allow_missing=True)
    before = get_threads() if get_threads is not None else None
    results = []
    try:
        for threads in (1, 2, 8):
            if set_threads is not None:
                set_threads(threads)
            c = poisoned((n, n))
            mod["matmul"](a, b, c)
            np.testing.assert_allclose(c.array, expected, rtol=1e-4, atol=1e-4)
            results.append(c.array.copy())
    finally:
        if before is not None:
            set_threads(before)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_workspace_kernel(built):
    mod = load(built, "workspace")
    n = built["libraries"]["workspace"]["n"]
    a, c = rand(n), poisoned(n)
    for _ in range(3):  # the workspace is reused across calls
        c.array[...] = np.nan
        mod["two_stage"](a, c)
        np.testing.assert_allclose(c.array, (a.array * 2 + 1)[::-1] - a.array, rtol=1e-6)


def test_several_kernels_in_one_library(built):
    mod = load(built, "multi")
    assert sorted(mod.list_functions()) == built["libraries"]["multi"]["functions"]
    n = 333
    a, b, c = rand(n), rand(n), poisoned(n)
    mod["add_f32"](a, b, c)
    np.testing.assert_array_equal(c.array, a.array + b.array)
    mod["mul_f32"](a, b, c)
    np.testing.assert_array_equal(c.array, a.array * b.array)
    ai, bi, ci = rand(n, "int32"), rand(n, "int32"), poisoned(n, "int32")
    mod["add_i32"](ai, bi, ci)
    np.testing.assert_array_equal(ci.array, ai.array + bi.array)
    a64, c64 = rand(n, "float64"), poisoned(n, "float64")
    mod["half64"](a64, c64)
    np.testing.assert_array_equal(c64.array, a64.array * 0.5)
    with pytest.raises(AttributeError):
        mod["main"]  # several functions: no __tvm_ffi_main alias


def test_call_packed_reaches_a_kiln_global(built):
    calls = []

    def scale_into(src, dst, factor):
        # DLTensor* arguments arrive as tensor views of the kernel's buffers (kiln.Tensor), or
        # as raw pointers with a runtime library that lacks the tensor globals.
        if isinstance(src, kiln.Tensor):
            assert src.shape == (16,) and dst.dtype == "float32"
            dst.copyfrom(src.numpy() * factor)
        else:
            view(dst)[...] = view(src) * factor
        calls.append(factor)

    kiln.register_func("kiln_test.scale_into", scale_into, override=True)
    try:
        mod = load(built, "callback")
        a, b = rand(16), poisoned(16)
        mod["call_scale"](a, b, 3)
        np.testing.assert_allclose(b.array, a.array * 3)
        mod["call_scale"](a, b, -2)  # the handle is resolved once, then reused
        np.testing.assert_allclose(b.array, a.array * -2)
        assert calls == [3, -2]
    finally:
        kiln.remove_global_func("kiln_test.scale_into")


def test_numpy_arrays_and_kiln_tensors_as_arguments(built):
    mod = load(built, "vadd")
    n = 1000
    a = RNG.standard_normal(n).astype("float32")
    b = RNG.standard_normal(n).astype("float32")
    # Unaligned numpy output: copied in, and the result copied back after the call.
    raw = np.full(n + 1, np.nan, "float32")
    c = raw[1:]
    mod["vadd"](a, b, c)
    np.testing.assert_array_equal(c, a + b)
    ta, tb = kiln.tensor(a), kiln.tensor(b)
    tc = kiln.tensor(np.full(n, np.nan, "float32"))
    mod["vadd"](ta, tb, tc)
    np.testing.assert_array_equal(tc.numpy(), a + b)


def test_wrong_dtype_gives_tvms_own_error(built):
    mod = load(built, "vadd")
    f32 = lambda: DLArg(np.zeros(4, "float32"))
    expected = built["tvm_errors"]
    with pytest.raises(TypeError) as info:
        mod["vadd"](DLArg(np.zeros(4, "float64")), f32(), f32())
    assert str(info.value) == expected["vadd_wrong_dtype"]["message"]
    with pytest.raises(TypeError) as info:
        mod["vadd"](f32(), f32())
    assert str(info.value) == expected["vadd_wrong_count"]["message"]
    with pytest.raises(ValueError) as info:
        mod["vadd"](f32(), f32(), DLArg(np.zeros(5, "float32")))
    assert str(info.value) == expected["vadd_wrong_shape"]["message"]
    mm = load(built, "matmul")
    with pytest.raises(ValueError) as info:
        mm["matmul"](f32(), DLArg(np.zeros((64, 64), "float32")), f32())
    assert str(info.value) == expected["matmul_wrong_ndim"]["message"]


def test_relax_vm_library_fails_naming_the_kind(built):
    with pytest.raises(RuntimeError) as info:
        load(built, "relax_vm")
    msg = str(info.value)
    assert "relax.VMExecutable" in msg
    assert "relax_vm.so" in msg


def test_time_evaluator_on_a_tvm_kernel(built):
    mod = load(built, "vadd")
    a, b, c = rand(1024), rand(1024), poisoned(1024)
    res = mod.time_evaluator("vadd", kiln.cpu(), number=100, repeat=3)(a, b, c)
    assert len(res.results) == 3
    assert 0 < res.mean < 1e-3
    np.testing.assert_array_equal(c.array, a.array + b.array)
