"""The compiled call path (kiln._fastcall) against the ctypes path: the same results, errors
and reference counts for every kind of argument, calls from threads (the GIL is released
during the call), and the ctypes path still complete when forced."""

import gc
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import kiln
from conftest import ref_count
from kiln import core

pytestmark = pytest.mark.skipif(core.FASTCALL is None, reason="kiln._fastcall is not built")

PYTHON_DIR = Path(__file__).resolve().parent.parent


def _slow(f, *args):
    return core.call_method(f, *args)


def _same(a, b):
    if isinstance(a, kiln.ObjectBase):
        return isinstance(b, kiln.ObjectBase) and a.same_as(b) or kiln.structural_equal(a, b)
    return type(a) is type(b) and (a == b or (a != a and b != b))


def test_function_calls_take_the_compiled_path():
    assert issubclass(kiln.Function, core.FASTCALL.CallBase)
    assert "__call__" not in kiln.Function.__dict__


def test_every_kind_of_argument_gives_the_ctypes_result(testing):
    echo = testing.echo
    arr = kiln.convert([1, 2, 3])
    values = [0, 1, -7, (1 << 63) - 1, -(1 << 63), 1 << 70, 2.5, float("nan"), True, False, None,
              "hi", "a longer string", b"by", b"longer bytes....", arr, testing.add_one,
              kiln.Shape([2, 3]), kiln.DataType("float16"), kiln.cpu(0), [1, 2.5], {"k": 1}]
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool) and not -(1 << 63) <= v < (1 << 63):
            with pytest.raises(Exception) as fast:
                echo(v)
            with pytest.raises(Exception) as slow:
                _slow(echo, v)
            assert type(fast.value) is type(slow.value)
            continue
        got, want = echo(v), _slow(echo, v)
        if isinstance(v, (kiln.ObjectBase, kiln.Function)):
            assert got.same_as(v) and want.same_as(v)
        else:
            assert _same(got, want), (v, got, want)
    assert testing.add_one(41) == 42 == _slow(testing.add_one, 41)


def test_errors_are_the_same_exception(testing):
    add_one = testing.add_one
    with pytest.raises(TypeError) as fast:
        add_one(1.5, 2)
    with pytest.raises(TypeError) as slow:
        _slow(add_one, 1.5, 2)
    assert str(fast.value) == str(slow.value)
    with pytest.raises(TypeError, match="positional"):
        add_one(x=1)


def test_object_arguments_keep_their_reference_counts(testing):
    arr = kiln.convert([1, 2, 3])
    for _ in range(50_000):
        testing.echo(arr)
    assert ref_count(arr) == 1
    kept = [testing.echo(arr) for _ in range(5)]
    assert ref_count(arr) == 6
    del kept
    gc.collect()
    assert ref_count(arr) == 1


def test_released_object_argument_is_an_error(testing):
    arr = kiln.convert([1])
    arr.__del__()
    with pytest.raises(ValueError, match="released"):
        testing.echo(arr)


def test_calls_release_the_gil(testing):
    # A Python callback called from the runtime while other Python threads call functions:
    # deadlocks if the compiled path held the GIL across the call.
    seen = []
    apply = testing.apply
    errors = []

    def worker(k):
        try:
            for i in range(300):
                assert apply(lambda x: x + k, i) == i + k
                seen.append(k)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[0]
    assert len(seen) == 1200


def test_tensor_arguments(testing):
    a = kiln.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    back = testing.echo(a)
    np.testing.assert_array_equal(back.numpy(), a.numpy())


def test_ctypes_path_when_forced():
    code = (
        "import kiln, kiln.core as c\n"
        "assert c.FASTCALL is None\n"
        "assert '__call__' in kiln.Function.__dict__\n"
        "f = kiln.get_global_func('testing.add_one')\n"
        "assert f(41) == 42\n"
        "print('ctypes ok')\n"
    )
    env = dict(os.environ, KILN_PYTHON_CTYPES="1")
    env["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and "ctypes ok" in run.stdout, run.stdout + run.stderr


def _ctypes_callback(pyfunc):
    key = core._next_key()
    core._CALLBACKS[key] = pyfunc
    return kiln.function._adopt_function(core._make_callback_ctypes(key), core.abi.K_FUNCTION)


def test_callbacks_give_the_ctypes_results(testing):
    apply = testing.apply
    arr = kiln.convert([1, 2])
    values = [0, -3, 1 << 62, 2.5, True, None, "s", "a longer string!", b"b", arr, [1, "x"],
              {"k": 2}, kiln.DataType("int8"), kiln.cpu(0)]

    def ident(x):
        return x

    fast = kiln.Function.from_callable(ident)
    slow = _ctypes_callback(ident)
    for v in values:
        got, want = apply(fast, v), apply(slow, v)
        if isinstance(v, kiln.ObjectBase):
            assert got.same_as(v) and want.same_as(v)
        else:
            assert _same(got, want), (v, got, want)


def test_callback_errors_travel_back(testing):
    def bad(x):
        raise KeyError("missing %s" % x)

    for f in (kiln.Function.from_callable(bad), _ctypes_callback(bad)):
        with pytest.raises(KeyError, match="missing 7"):
            testing.apply(f, 7)


def test_callbacks_are_released(testing):
    gc.collect()
    before = core.live_callback_count()
    for _ in range(200):
        f = kiln.Function.from_callable(lambda x: x + 1)
        assert testing.apply(f, 1) == 2
        del f
    gc.collect()
    assert core.live_callback_count() == before
