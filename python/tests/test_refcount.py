"""Ownership: no leaks, no double frees, objects freed after the last reference."""

import gc
import weakref

import kiln
from conftest import ref_count
from kiln import core


def test_object_reference_count_is_stable(testing):
    arr = kiln.convert([1, 2, 3])
    assert ref_count(arr) == 1
    for _ in range(100_000):
        testing.echo(arr)
    assert ref_count(arr) == 1
    kept = [testing.echo(arr) for _ in range(10)]
    assert ref_count(arr) == 11
    del kept
    gc.collect()
    assert ref_count(arr) == 1


def test_containers_hold_references(testing):
    inner = kiln.convert([1])
    outer = testing.echo([inner, inner])
    assert ref_count(inner) == 3
    first = outer[0]
    assert first.same_as(inner) and ref_count(inner) == 4
    del first, outer
    gc.collect()
    assert ref_count(inner) == 1


def test_many_round_trips_of_every_kind(testing):
    m = kiln.convert({"a": 1})
    f = testing.add_one
    shape = testing.echo(kiln.Shape([1, 2]))
    big = "z" * 1000
    for _ in range(20_000):
        testing.echo(m)
        testing.echo(f)
        testing.echo(shape)
        testing.echo(big)
        testing.echo(b"b" * 100)
        testing.echo([1, "two", [3]])
        testing.echo({"k": "v"})
    assert ref_count(m) == 1 and ref_count(shape) == 1
    assert ref_count(f) >= 2  # the registry holds one


def test_python_callable_freed_when_function_dies(testing):
    class Payload:
        def __call__(self, x):
            return x + 1

    payload = Payload()
    alive = weakref.ref(payload)
    before = core.live_callback_count()
    f = kiln.Function.from_callable(payload)
    del payload
    assert alive() is not None and core.live_callback_count() == before + 1
    assert testing.apply(f, 1) == 2
    arr = testing.echo([f])  # the array holds a second reference
    del f
    gc.collect()
    assert alive() is not None
    del arr
    gc.collect()
    assert alive() is None, "the deleter did not release the Python callable"
    assert core.live_callback_count() == before


def test_temporary_callbacks_are_released(testing):
    before = core.live_callback_count()
    for i in range(10_000):
        assert testing.apply(lambda x: x + 1, i) == i + 1
    gc.collect()
    assert core.live_callback_count() == before


def test_function_kept_by_runtime_survives_python(testing):
    class Payload:
        def __call__(self):
            return "still here"

    payload = Payload()
    alive = weakref.ref(payload)
    kiln.register_func("kiln_test.kept", payload)
    del payload
    gc.collect()
    assert alive() is not None
    assert kiln.get_global_func("kiln_test.kept")() == "still here"
    kiln.remove_global_func("kiln_test.kept")
    gc.collect()
    assert alive() is None


def test_returned_object_freed_after_last_python_ref(testing):
    # the callback's deleter runs exactly when the last reference (held by Python) goes
    class Payload:
        def __call__(self):
            return 1

    payload = Payload()
    alive = weakref.ref(payload)
    g = testing.echo(payload)  # converted to a Function, then returned: we own the only reference
    del payload
    assert ref_count(g) == 1 and alive() is not None
    del g
    gc.collect()
    assert alive() is None


def test_error_objects_are_released(testing):
    before = core.live_callback_count()
    for _ in range(5_000):
        try:
            testing.apply(lambda: 1 / 0)
        except ZeroDivisionError:
            pass
        try:
            testing.test_raise_error("ValueError", "x")
        except ValueError:
            pass
    from kiln import error

    assert len(error._PENDING) == 0
    assert core.live_callback_count() == before


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_no_memory_growth_for_values_without_visible_refcount(testing):
    import os

    if not os.path.exists("/proc/self/statm"):
        import pytest

        pytest.skip("needs /proc")
    text, data = "s" * 4096, b"b" * 4096

    def churn(count):
        for _ in range(count):
            testing.echo(text)
            testing.echo(data)
            testing.apply(lambda s: s + "!", text)
            testing.echo({"key": text})

    churn(2_000)  # warm up allocator pools
    before = _rss_bytes()
    churn(20_000)  # a leak of any of these would be >= 80 MB
    assert _rss_bytes() - before < 30 * 2**20


def test_clean_interpreter_exit_with_live_callbacks(testing, tmp_path):
    # Python functions still owned by the runtime (registry, containers) at exit.
    import os
    import subprocess
    import sys

    script = tmp_path / "exit_script.py"
    script.write_text(
        "import ctypes, os, sys\n"
        "sys.path.insert(0, %r)\n"
        "import kiln\n"
        "for p in os.environ.get('KILN_TEST_EXTRA_LIBS', '').split(os.pathsep):\n"
        "    p and ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)\n"
        "import kiln.testing as t\n"
        "kiln.register_func('kiln_exit.f', lambda x: x + 1)\n"
        "held = t.echo([lambda: 1, kiln.convert({'k': lambda: 2})])\n"
        "try:\n"
        "    t.apply(lambda: 1 / 0)\n"
        "except ZeroDivisionError:\n"
        "    pass\n"
        "print(kiln.get_global_func('kiln_exit.f')(1))\n" % os.path.dirname(os.path.dirname(kiln.__file__))
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2"
