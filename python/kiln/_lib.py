"""Find and load the Kiln runtime library (``libkiln.so`` / ``libkiln_runtime.so``).

Search order, stopping at the first hit:

1. ``KILN_LIBRARY_PATH``: one or more entries separated by ``os.pathsep``; each is a
   library file (used as given, whatever its name) or a directory to look in;
2. the library installed inside this package by ``pip install .`` (``kiln/kiln<ext suffix>``,
   built from ``crates/kiln``);
3. every directory in ``LD_LIBRARY_PATH`` (``DYLD_LIBRARY_PATH`` on macOS), then ``PATH``;
4. the cargo build folders of this source tree: ``<repo>/target/release``, ``<repo>/target/debug``.

In each directory the full library (``libkiln``) is preferred over the runtime-only one
(``libkiln_runtime``).  The library is loaded with ``RTLD_GLOBAL`` so that libraries
compiled by Kiln or TVM, loaded later, resolve their ``TVMFFI*`` symbols from it.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import os
import sys
from ctypes import POINTER, c_char_p, c_int, c_int32, c_void_p

from . import _ctypes_abi as abi

if sys.platform.startswith("win"):
    _SUFFIX = ".dll"
elif sys.platform == "darwin":
    _SUFFIX = ".dylib"
else:
    _SUFFIX = ".so"

#: file names looked for in every directory, best first
LIBRARY_NAMES = (
    ("kiln.dll", "kiln_runtime.dll")
    if _SUFFIX == ".dll"
    else ("libkiln" + _SUFFIX, "libkiln_runtime" + _SUFFIX)
)


class LibraryNotFoundError(RuntimeError):
    """Raised when no Kiln runtime library can be found; the message lists every place looked."""


def _repo_root():
    # python/kiln/_lib.py -> <repo>
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _split_paths(value):
    return [p for p in (value or "").split(os.pathsep) if p]


def candidate_places() -> list[tuple[str, str]]:
    """Return the ordered list of ``(place, kind)`` searched, kind being ``"file"`` (a path
    given by the user), ``"installed"`` (the package's own library, when present) or
    ``"dir"``."""
    places = []
    for entry in _split_paths(os.environ.get("KILN_LIBRARY_PATH")):
        places.append((entry, "dir" if os.path.isdir(entry) else "file"))
    here = os.path.dirname(os.path.abspath(__file__))
    for ext in importlib.machinery.EXTENSION_SUFFIXES:
        places.append((os.path.join(here, "kiln" + ext), "installed"))
    ld_var = "DYLD_LIBRARY_PATH" if sys.platform == "darwin" else "LD_LIBRARY_PATH"
    for var in (ld_var, "PATH"):
        for entry in _split_paths(os.environ.get(var)):
            places.append((entry, "dir"))
    root = _repo_root()
    for build in ("release", "debug"):
        places.append((os.path.join(root, "target", build), "dir"))
    return places


def find_library() -> str:
    """Return the path of the runtime library to load.

    Raises
    ------
    LibraryNotFoundError
        If no candidate exists; the message lists every path that was tried.
    """
    looked = []
    for place, kind in candidate_places():
        if kind in ("file", "installed"):
            looked.append(place)
            if os.path.isfile(place):
                return os.path.abspath(place)
            continue
        for name in LIBRARY_NAMES:
            path = os.path.join(place, name)
            looked.append(path)
            if os.path.isfile(path):
                return os.path.abspath(path)
    raise LibraryNotFoundError(
        "Cannot find the Kiln runtime library (%s). Build it with `cargo build` or set "
        "KILN_LIBRARY_PATH. Looked in:\n  %s" % (" or ".join(LIBRARY_NAMES), "\n  ".join(looked))
    )


def _declare(lib):
    """Attach argument / result types to the C functions the binding uses."""
    vp = c_void_p
    p_any = c_void_p  # TVMFFIAny* passed as raw address or ctypes buffer
    p_ba = POINTER(abi.TVMFFIByteArray)
    sigs = {
        "TVMFFIGetVersion": (None, [POINTER(abi.TVMFFIVersion)]),
        "TVMFFIObjectIncRef": (c_int, [vp]),
        "TVMFFIObjectDecRef": (c_int, [vp]),
        "TVMFFITypeKeyToIndex": (c_int, [p_ba, POINTER(c_int32)]),
        "TVMFFIFunctionCreate": (c_int, [vp, abi.SAFE_CALL, abi.DELETER, POINTER(vp)]),
        "TVMFFIFunctionCall": (c_int, [vp, p_any, c_int32, p_any]),
        "TVMFFIFunctionGetGlobal": (c_int, [p_ba, POINTER(vp)]),
        "TVMFFIFunctionSetGlobal": (c_int, [p_ba, vp, c_int]),
        "TVMFFIAnyViewToOwnedAny": (c_int, [p_any, p_any]),
        "TVMFFIStringFromByteArray": (c_int, [p_ba, p_any]),
        "TVMFFIBytesFromByteArray": (c_int, [p_ba, p_any]),
        "TVMFFIDataTypeFromString": (c_int, [p_ba, POINTER(abi.DLDataType)]),
        "TVMFFIDataTypeToString": (c_int, [POINTER(abi.DLDataType), p_any]),
        "TVMFFIErrorCreate": (c_int, [p_ba, p_ba, p_ba, POINTER(vp)]),
        "TVMFFIErrorSetRaised": (None, [vp]),
        "TVMFFIErrorSetRaisedFromCStr": (None, [c_char_p, c_char_p]),
        "TVMFFIErrorMoveFromRaised": (None, [POINTER(vp)]),
        "TVMFFIGetTypeInfo": (POINTER(abi.TVMFFITypeInfo), [c_int32]),
    }
    missing = []
    for name, (restype, argtypes) in sigs.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if missing:
        raise RuntimeError("%s does not export %s" % (lib._name, ", ".join(missing)))


def load_library(path: str | None = None) -> ctypes.CDLL:
    """Load the runtime library (found with :func:`find_library` unless ``path`` is given).

    Returns the ``ctypes.CDLL`` handle, loaded with ``RTLD_GLOBAL``.
    """
    path = path or find_library()
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    _declare(lib)
    return lib


#: the loaded runtime library (``ctypes.CDLL``)
LIB = load_library()
#: absolute path of :data:`LIB`
LIB_PATH: str = LIB._name


def ffi_version() -> tuple[int, int, int]:
    """Return the ``(major, minor, patch)`` ABI version reported by ``TVMFFIGetVersion``."""
    v = abi.TVMFFIVersion()
    LIB.TVMFFIGetVersion(ctypes.byref(v))
    return (v.major, v.minor, v.patch)
