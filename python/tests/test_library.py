"""Library discovery and loading."""

import os
import platform
import shutil
import subprocess

import pytest

import kiln
from conftest import needs_globals
from kiln import _lib
from host_cpu import host_flags


def test_loaded_library_exports_the_abi():
    assert os.path.isfile(kiln.LIB_PATH)
    major, minor, patch = kiln.ffi_version()
    assert (major, minor) == (0, 1)
    for name in ("TVMFFIFunctionCall", "TVMFFIErrorSetRaisedFromCStrParts", "TVMFFIObjectDecRef"):
        assert hasattr(_lib.LIB, name)


def _clear(monkeypatch):
    for var in ("KILN_LIBRARY_PATH", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "PATH"):
        monkeypatch.delenv(var, raising=False)


def test_env_file_is_used_as_given(tmp_path, monkeypatch):
    _clear(monkeypatch)
    lib = tmp_path / "anything.so"
    lib.write_bytes(b"")
    monkeypatch.setenv("KILN_LIBRARY_PATH", str(lib))
    assert _lib.find_library() == str(lib)


def test_directory_prefers_full_library(tmp_path, monkeypatch):
    _clear(monkeypatch)
    (tmp_path / "libkiln_runtime.so").write_bytes(b"")
    monkeypatch.setenv("KILN_LIBRARY_PATH", str(tmp_path))
    assert _lib.find_library() == str(tmp_path / "libkiln_runtime.so")
    (tmp_path / "libkiln.so").write_bytes(b"")
    assert _lib.find_library() == str(tmp_path / "libkiln.so")


def test_search_order(tmp_path, monkeypatch):
    _clear(monkeypatch)
    env_dir, ld_dir, path_dir = (tmp_path / n for n in ("env", "ld", "path"))
    for d in (env_dir, ld_dir, path_dir):
        d.mkdir()
        (d / "libkiln_runtime.so").write_bytes(b"")
    monkeypatch.setenv("PATH", str(path_dir))
    assert _lib.find_library() == str(path_dir / "libkiln_runtime.so")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(ld_dir))
    assert _lib.find_library() == str(ld_dir / "libkiln_runtime.so")
    monkeypatch.setenv("KILN_LIBRARY_PATH", str(env_dir))
    assert _lib.find_library() == str(env_dir / "libkiln_runtime.so")


def test_not_found_lists_every_place(tmp_path, monkeypatch):
    _clear(monkeypatch)
    monkeypatch.setenv("KILN_LIBRARY_PATH", str(tmp_path / "missing.so"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(_lib, "_repo_root", lambda: str(tmp_path / "repo"))
    with pytest.raises(kiln.LibraryNotFoundError) as info:
        _lib.find_library()
    message = str(info.value)
    assert str(tmp_path / "missing.so") in message
    assert str(tmp_path / "bin" / "libkiln.so") in message
    assert str(tmp_path / "bin" / "libkiln_runtime.so") in message
    assert str(tmp_path / "repo" / "target" / "release" / "libkiln.so") in message
    assert str(tmp_path / "repo" / "target" / "debug" / "libkiln_runtime.so") in message


def test_cargo_target_folders_are_searched_last(monkeypatch):
    _clear(monkeypatch)
    places = [p for p, kind in _lib.candidate_places() if kind != "installed"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(_lib.__file__))))
    assert places == [os.path.join(root, "target", "release"), os.path.join(root, "target", "debug")]


def test_installed_library_comes_after_the_variable_and_before_library_paths(monkeypatch, tmp_path):
    _clear(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("KILN_LIBRARY_PATH", str(tmp_path / "given.so"))
    places = _lib.candidate_places()
    kinds = [kind for _, kind in places]
    assert kinds[0] == "file" and kinds[1] == "installed"
    package = os.path.dirname(os.path.abspath(_lib.__file__))
    installed = [p for p, kind in places if kind == "installed"]
    assert all(os.path.dirname(p) == package and os.path.basename(p).startswith("kiln.")
               for p in installed)
    assert places.index((str(tmp_path / "bin"), "dir")) > kinds.index("installed")


# ---- libraries that say what CPU they need (.kiln_target records) ----

#: Features no AMD CPU has: a library needing them is refused on most machines.
FOREIGN = ("amx-tile", "avx512fp16")
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
needs_records = needs_globals("runtime.ModuleTargetRecords")




def _record(tag, cpu, features):
    """A target record as the body of a C string literal (the compiler adds the NUL)."""
    lines = ["format=kiln-target-1", "variant=" + tag, "triple=%s-pc-linux-gnu" % platform.machine(),
             "cpu=" + cpu, "features=" + ",".join(sorted(features)), "target=llvm -mcpu=" + cpu]
    return "\\n".join(lines)


def _library(tmp_path, name, records, marker, with_v1=False):
    """A library whose ``which`` returns 1 (2 in the variant tagged ``v1``), with the given
    records and a constructor that creates ``marker`` when its code runs."""
    src = [
        "#include <stdint.h>",
        "#include <stdio.h>",
        "typedef struct { int32_t type_index; uint32_t pad; int64_t v; } Any;",
        "int __tvm_ffi_which(void* s, const Any* a, int32_t n, Any* r)"
        " { r->type_index = 1; r->pad = 0; r->v = 1; return 0; }",
        '__attribute__((constructor)) static void ran(void) { FILE* f = fopen("%s", "w");'
        " if (f) fclose(f); }" % marker,
        '__attribute__((section(".kiln_target"), used)) static const char records[] = "%s";'
        % "\\0".join(records),
    ]
    if with_v1:
        src.append("int __kiln_variant_v1_which(void* s, const Any* a, int32_t n, Any* r)"
                   " { r->type_index = 1; r->pad = 0; r->v = 2; return 0; }")
    c = tmp_path / (name + ".c")
    c.write_text("\n".join(src) + "\n")
    out = str(tmp_path / name)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", out, str(c)], check=True, capture_output=True)
    return out


@needs_cc
@needs_records
def test_a_library_for_another_cpu_raises_before_its_code_runs(tmp_path):
    flags = host_flags()
    if "amx_tile" in flags and "avx512_fp16" in flags:
        pytest.skip("this CPU has AMX and AVX512-FP16: a library needing them runs here")
    marker = tmp_path / "ran"
    lib = _library(tmp_path, "spr.so", [_record("", "sapphirerapids", ("avx512f",) + FOREIGN)],
                   marker)
    with pytest.raises(RuntimeError) as info:
        kiln.load_module(lib)
    msg = str(info.value)
    assert lib in msg and "sapphirerapids" in msg and "lacks" in msg, msg
    assert any(f in msg for f in FOREIGN), msg
    assert not marker.exists(), "the library's constructor ran"


@needs_cc
@needs_records
@pytest.mark.skipif(platform.machine() != "x86_64", reason="records name x86-64 features")
def test_the_best_variant_runs_and_the_records_say_which(tmp_path):
    marker = tmp_path / "ran"
    lib = _library(tmp_path, "two.so",
                   [_record("", "x86-64", ()), _record("v1", "sse", ("sse", "sse2"))], marker,
                   with_v1=True)
    mod = kiln.load_module(lib)
    assert marker.exists()
    assert mod["which"]() == 2
    assert mod.list_functions() == ["which"]
    recs = mod.target_records()
    assert [(r["variant"], r["chosen"]) for r in recs] == [("", False), ("v1", True)]
    assert recs[1]["features"] == ["sse", "sse2"] and recs[1]["cpu"] == "sse"
    assert recs[1]["target"] == "llvm -mcpu=sse"


@needs_cc
@needs_records
def test_a_malformed_record_names_its_byte_offset(tmp_path):
    marker = tmp_path / "ran"
    good = _record("", "x86-64", ())
    lib = _library(tmp_path, "bad.so", [good, "format=kiln-target-9"], marker)
    with pytest.raises(ValueError) as info:
        kiln.load_module(lib)
    msg = str(info.value)
    offset = len(good.replace("\\n", "\n")) + 1
    assert lib in msg and "at byte %d" % offset in msg and "kiln-target-9" in msg, msg
    assert not marker.exists(), "the library's constructor ran"
