"""Library discovery and loading."""

import os

import pytest

import kiln
from kiln import _lib


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
    places = [p for p, _ in _lib.candidate_places()]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(_lib.__file__))))
    assert places == [os.path.join(root, "target", "release"), os.path.join(root, "target", "debug")]
