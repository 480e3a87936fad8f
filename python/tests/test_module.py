"""kiln.load_module / kiln.Module against a C library shaped like Apache TVM's output.

The library source is shared with the Rust tests
(crates/kiln-runtime/tests/module_support/fake_tvm_library.c); it is compiled here with the
system C compiler.
"""

import ctypes
import os
import shutil
import subprocess

import pytest

import kiln

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAKE_SOURCE = os.path.join(ROOT, "crates", "kiln-runtime", "tests", "module_support", "fake_tvm_library.c")

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


def _cc(out, source, *args):
    src = out + ".c"
    with open(src, "w") as f:
        f.write(source)
    subprocess.run(["cc", *args, "-o", out, src], check=True, capture_output=True)
    return out


def _fake(tmp_path, name="fake.so", extra=""):
    with open(FAKE_SOURCE) as f:
        source = f.read() + "\n" + extra
    return _cc(str(tmp_path / name), source, "-shared", "-fPIC", "-O1")


def test_load_and_call(tmp_path):
    mod = kiln.load_module(_fake(tmp_path))
    assert isinstance(mod, kiln.Module)
    assert mod.kind == "library"
    assert mod.imports == []
    assert mod["add_one"](41) == 42
    assert mod.get_function("add_one")(1) == 2
    assert mod.add_one(2) == 3
    assert "add_one" in mod.list_functions()
    assert mod.implements_function("add_one")
    assert not mod.implements_function("nope")
    assert mod.library_path.endswith("fake.so")
    assert mod.inspect_source() == ""
    with pytest.raises(AttributeError):
        mod.get_function("nope")
    with pytest.raises(AttributeError):
        mod["not_a_function"]


def test_a_rewritten_library_loads_its_new_code(tmp_path):
    # The dynamic loader keys open libraries by path: loading a file rewritten while its
    # earlier version is still loaded must give the new code, and leave the old modules alone.
    def version(v):
        return f"""
int __tvm_ffi_version(void* self, const Any* args, int32_t n, Any* ret) {{
  ret->type_index = 1; ret->small_len = 0; ret->v.i = {v};
  return 0;
}}
"""

    path = str(tmp_path / "lib.so")
    _fake(tmp_path, "lib.so", version(1))
    old = kiln.load_module(path)
    assert old["version"]() == 1
    again = kiln.load_module(path)
    assert again["version"]() == 1
    staged = _fake(tmp_path, "staged.so", version(2))
    os.replace(staged, path)
    new = kiln.load_module(path)
    assert new["version"]() == 2
    assert old["version"]() == 1
    assert new.library_path == path
    assert kiln.load_module(path)["version"]() == 2


def test_c_errors_become_python_exceptions(tmp_path):
    mod = kiln.load_module(_fake(tmp_path))
    with pytest.raises(TypeError, match="add_one: expected one int argument"):
        mod["add_one"]("x")
    with pytest.raises(ValueError, match="raised through the context slot"):
        mod["raise_value_error"]()


def test_call_packed_reaches_a_python_callback(tmp_path):
    seen = []

    def callback(x):
        seen.append(x)
        return x + 100

    kiln.register_func("kiln_test.callback", callback, override=True)
    try:
        mod = kiln.load_module(_fake(tmp_path, "cb.so"))
        assert mod["call_callback"](5) == 105
        assert seen == [5]
    finally:
        kiln.remove_global_func("kiln_test.callback")


def test_backend_slots(tmp_path):
    mod = kiln.load_module(_fake(tmp_path))
    assert mod["workspace_sum"](100) == 4950.0
    out = (ctypes.c_int64 * 64)()
    assert mod["parallel_fill"](ctypes.c_void_p(ctypes.addressof(out))) == 0
    n = out[63]
    assert n >= 1
    assert list(out[:n]) == list(range(1, n + 1))


def test_functions_outlive_the_module(tmp_path):
    mod = kiln.load_module(_fake(tmp_path))
    f = mod["add_one"]
    del mod
    import gc

    gc.collect()
    assert f(9) == 10


def test_time_evaluator(tmp_path):
    mod = kiln.load_module(_fake(tmp_path))
    ev = mod.time_evaluator("add_one", kiln.cpu(), number=5, repeat=3)
    res = ev(1)
    assert isinstance(res, kiln.BenchmarkResult)
    assert len(res.results) == 3
    assert 0 < res.mean < 0.1
    assert res.min <= res.median <= res.max
    assert "mean (ms)" in str(res)
    slow = mod.time_evaluator("workspace_sum", kiln.cpu(), number=1, repeat=2, min_repeat_ms=5)
    assert len(slow(1000).results) == 2
    f = kiln.runtime.time_evaluator(lambda: None, kiln.cpu(), number=3, repeat=2)
    assert len(f().results) == 2


def test_object_and_tar_files_are_linked(tmp_path):
    with open(FAKE_SOURCE) as f:
        source = f.read()
    obj = _cc(str(tmp_path / "k.o"), source, "-c", "-fPIC")
    assert kiln.load_module(obj)["add_one"](1) == 2
    tar = str(tmp_path / "k.tar")
    subprocess.run(["tar", "-cf", tar, "-C", str(tmp_path), "k.o"], check=True)
    assert kiln.runtime.load_module(tar)["add_one"](2) == 3


def test_bad_files(tmp_path):
    with pytest.raises(ValueError, match="missing.so"):
        kiln.load_module(tmp_path / "missing.so")
    garbage = tmp_path / "garbage.so"
    garbage.write_bytes(b"not a library")
    with pytest.raises(RuntimeError, match="garbage.so"):
        kiln.load_module(garbage)
    plain = _cc(str(tmp_path / "plain.so"), "int f(void) { return 0; }\n", "-shared", "-fPIC")
    with pytest.raises(RuntimeError, match="not a Kiln/TVM module"):
        kiln.load_module(plain)
    odd = tmp_path / "x.weird"
    odd.write_bytes(b"?")
    with pytest.raises(RuntimeError, match="ffi.Module.load_from_file.weird"):
        kiln.load_module(odd)


def test_unknown_kind_in_blob(tmp_path):
    # A blob (TVM 0.27 layout) whose root is a kind nobody registered.
    import struct

    def s(b):
        return struct.pack("<Q", len(b)) + b

    body = struct.pack("<QQQQ", 3, 0, 1, 1) + struct.pack("<QQ", 1, 1)
    body += s(b"relax.VMExecutable") + s(b"\x01\x02") + s(b"_lib")
    blob = struct.pack("<Q", len(body)) + body
    extra = "const unsigned char __tvm_ffi__library_bin[%d] = {%s};\n" % (
        len(blob),
        ",".join(str(b) for b in blob),
    )
    path = _fake(tmp_path, "vm.so", extra)
    with pytest.raises(RuntimeError, match=r"relax\.VMExecutable"):
        kiln.load_module(path)


def test_blob_imports_with_a_python_loader(tmp_path):
    # A loader written in Python: its payload is the path of another library to load.
    import struct

    inner = _fake(tmp_path, "inner.so")
    kiln.register_func(
        "ffi.Module.load_from_bytes.kiln_test.path",
        lambda data: kiln.load_module(data.decode()),
        override=True,
    )

    def s(b):
        return struct.pack("<Q", len(b)) + b

    # module 0 = _lib imports module 1 (kiln_test.path -> inner.so)
    body = struct.pack("<QQQQ", 3, 0, 1, 1) + struct.pack("<QQ", 1, 1)
    body += s(b"_lib") + s(b"kiln_test.path") + s(inner.encode())
    blob = struct.pack("<Q", len(body)) + body
    extra = "const unsigned char __tvm_ffi__library_bin[%d] = {%s};\n" % (
        len(blob),
        ",".join(str(b) for b in blob),
    )
    try:
        mod = kiln.load_module(_fake(tmp_path, "outer.so", extra))
        assert mod.kind == "library"
        (imported,) = mod.imports
        assert isinstance(imported, kiln.Module)
        assert imported.library_path.endswith("inner.so")
        assert imported["add_one"](1) == 2
        assert mod.get_function("add_one", query_imports=True)(3) == 4
    finally:
        kiln.remove_global_func("ffi.Module.load_from_bytes.kiln_test.path")


def test_export_errors(tmp_path):
    mod = kiln.load_module(_fake(tmp_path))
    with pytest.raises(ValueError, match="cannot be linked again"):
        mod.export_library(tmp_path / "again.so")
    with pytest.raises(ValueError, match=".so, .dylib"):
        mod.export_library(tmp_path / "bad.txt")
