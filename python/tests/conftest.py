"""Test setup: import ``kiln`` from this source tree and load extra libraries.

``KILN_TEST_EXTRA_LIBS`` (``os.pathsep``-separated) lists libraries loaded with
``RTLD_GLOBAL`` after the runtime, e.g. TVM-FFI's ``libtvm_ffi_testing.so`` which
provides the ``testing.*`` globals when testing against ``libtvm_ffi.so``::

    KILN_LIBRARY_PATH=.../libtvm_ffi.so KILN_TEST_EXTRA_LIBS=.../libtvm_ffi_testing.so pytest
"""

import ctypes
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import kiln  # noqa: E402  (loads the runtime library first)

for _path in os.environ.get("KILN_TEST_EXTRA_LIBS", "").split(os.pathsep):
    if _path:
        ctypes.CDLL(_path, mode=ctypes.RTLD_GLOBAL)

import kiln.testing  # noqa: E402  (after the extra libraries: picks up their globals)


def has_globals(*names):
    """True when every global function in ``names`` is registered."""
    return all(kiln.get_global_func(n, allow_missing=True) is not None for n in names)


def needs_globals(*names):
    """Skip marker for tests that need global functions the library may lack."""
    missing = [n for n in names if kiln.get_global_func(n, allow_missing=True) is None]
    return pytest.mark.skipif(
        bool(missing), reason="library %s lacks %s" % (os.path.basename(kiln.LIB_PATH), ", ".join(missing))
    )


def pytest_report_header(config):
    return "kiln runtime library: %s (ABI %d.%d.%d)" % ((kiln.LIB_PATH,) + kiln.ffi_version())


@pytest.fixture
def testing():
    """The ``kiln.testing`` module; the test is skipped when ``testing.echo`` is missing."""
    if not hasattr(kiln.testing, "echo"):
        pytest.skip("library lacks the testing.* globals (set KILN_TEST_EXTRA_LIBS?)")
    return kiln.testing


def ref_count(obj):
    """Strong reference count stored in the object's header (combined_ref_count low 32 bits)."""
    return ctypes.c_uint64.from_address(obj.handle).value & 0xFFFFFFFF
