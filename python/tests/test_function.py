"""Global functions, registration and callbacks in both directions."""

import sys
import types

import pytest

import kiln


def test_get_global_func(testing):
    f = kiln.get_global_func("testing.add_one")
    assert isinstance(f, kiln.Function) and f(41) == 42
    assert kiln.get_global_func("no.such.function", allow_missing=True) is None
    with pytest.raises(ValueError, match="no.such.function"):
        kiln.get_global_func("no.such.function")


def test_nop_and_arity(testing):
    assert testing.nop() is None
    assert testing.nop(1, "two", [3]) is None


def test_python_callback_called_from_c(testing):
    calls = []

    def cb(*args):
        calls.append(args)
        return sum(args)

    assert testing.apply(cb, 1, 2, 3) == 6
    assert calls == [(1, 2, 3)]
    assert testing.apply(lambda: "no args") == "no args"
    assert testing.apply(lambda: None) is None


def test_callback_argument_kinds(testing):
    seen = {}

    def cb(i, f, s, long_s, b, arr, m, dt, dev, fn):
        seen.update(i=i, f=f, s=s, long_s=long_s, b=b, arr=arr, m=m, dt=dt, dev=dev, fn=fn)
        return fn(i)

    out = testing.apply(
        cb,
        7,
        2.5,
        "small",
        "a long string!",
        b"by",
        [1, [2]],
        {"k": 1},
        kiln.DataType("float16"),
        kiln.cuda(1),
        testing.add_one,
    )
    assert out == 8
    assert seen["i"] == 7 and seen["f"] == 2.5 and seen["s"] == "small"
    assert seen["long_s"] == "a long string!" and seen["b"] == b"by"
    assert seen["arr"] == [1, [2]] and seen["m"] == {"k": 1}
    assert seen["dt"] == "float16" and seen["dev"] == kiln.cuda(1)
    assert isinstance(seen["fn"], kiln.Function)


def test_callback_return_kinds(testing):
    for value in [
        1,
        2.5,
        "s",
        "a much longer string",
        b"\x00" * 20,
        None,
        True,
        [1, "x"],
        {"a": [1]},
        kiln.DataType("int8"),
        kiln.cpu(2),
        kiln.Shape([2, 3]),
    ]:
        assert testing.apply(lambda v=value: v) == value


def test_function_returned_from_c_is_callable(testing):
    f = testing.echo(lambda x, y: x * y)
    assert isinstance(f, kiln.Function)
    assert f(6, 7) == 42


def test_nested_callbacks(testing):
    def outer(x):
        return testing.apply(lambda y: testing.apply(lambda z: z * 10, y + 1), x + 1)

    assert testing.apply(outer, 1) == 30


def test_callback_returning_python_callable(testing):
    make_adder = lambda n: lambda x: x + n  # noqa: E731
    adder = testing.apply(make_adder, 5)
    assert isinstance(adder, kiln.Function) and adder(1) == 6
    assert testing.apply(adder, 10) == 15


def test_function_from_callable():
    f = kiln.Function.from_callable(lambda a, b="x": a + b)
    assert f("a") == "ax" and f("a", "b") == "ab"
    with pytest.raises(TypeError):
        kiln.Function.from_callable(3)


def test_register_func_forms(testing):
    @kiln.register_func("kiln_test.decorated")
    def decorated(x):
        return x + 1

    @kiln.register_func
    def kiln_test_bare(x):
        return x * 2

    kiln.register_func("kiln_test.direct", lambda s: s.upper())
    try:
        assert decorated(1) == 2  # the decorator returns the Python function
        assert kiln.get_global_func("kiln_test.decorated")(1) == 2
        assert kiln.get_global_func("kiln_test_bare")(4) == 8
        assert kiln.get_global_func("kiln_test.direct")("abc") == "ABC"
        names = kiln.list_global_func_names()
        assert {"kiln_test.decorated", "kiln_test_bare", "kiln_test.direct"} <= set(names)
        # a registered Python function called by C code
        assert testing.apply(kiln.get_global_func("kiln_test.decorated"), 9) == 10
    finally:
        for name in ("kiln_test.decorated", "kiln_test_bare", "kiln_test.direct"):
            kiln.remove_global_func(name)
    assert kiln.get_global_func("kiln_test.decorated", allow_missing=True) is None


def test_register_existing_without_override_raises():
    kiln.register_func("kiln_test.dup", lambda: 1)
    try:
        with pytest.raises(Exception, match="kiln_test.dup"):
            kiln.register_func("kiln_test.dup", lambda: 2)
        assert kiln.get_global_func("kiln_test.dup")() == 1
        kiln.register_func("kiln_test.dup", lambda: 3, override=True)
        assert kiln.get_global_func("kiln_test.dup")() == 3

        @kiln.register_func("kiln_test.dup", override=True)
        def again():
            return 4

        assert kiln.get_global_func("kiln_test.dup")() == 4
    finally:
        kiln.remove_global_func("kiln_test.dup")


def test_register_existing_error_kind_matches_tvm_ffi():
    # TVM-FFI raises RuntimeError("Global Function `name` is already registered")
    kiln.register_func("kiln_test.dup2", lambda: 1)
    try:
        with pytest.raises(RuntimeError, match="kiln_test.dup2"):
            kiln.register_func("kiln_test.dup2", lambda: 2)
    finally:
        kiln.remove_global_func("kiln_test.dup2")


def test_remove_global_func_result():
    kiln.register_func("kiln_test.tmp", lambda: 1)
    assert kiln.remove_global_func("kiln_test.tmp") is True
    assert kiln.remove_global_func("kiln_test.tmp") is False


def test_list_global_func_names(testing):
    names = kiln.list_global_func_names()
    assert len(names) == len(set(names))
    for name in ("ffi.Array", "ffi.Map", "ffi.FunctionListGlobalNamesFunctor", "testing.echo"):
        assert name in names


def test_init_ffi_api(testing):
    kiln.register_func("kiln_api_test.alpha", lambda: "a")
    kiln.register_func("kiln_api_test.beta", lambda x: x * 3)
    kiln.register_func("kiln_api_test.sub.gamma", lambda: "skipped")
    kiln.register_func("kiln_api_testx.delta", lambda: "other namespace")
    module = types.ModuleType("fake_ffi_api")
    sys.modules["fake_ffi_api"] = module
    try:
        kiln.init_ffi_api("kiln_api_test", "fake_ffi_api")
        assert module.alpha() == "a" and module.beta(2) == 6
        assert module.alpha.__name__ == "alpha"
        assert not hasattr(module, "gamma") and not hasattr(module, "sub")
        assert not hasattr(module, "delta")
    finally:
        del sys.modules["fake_ffi_api"]
        for name in ("alpha", "beta", "sub.gamma"):
            kiln.remove_global_func("kiln_api_test." + name)
        kiln.remove_global_func("kiln_api_testx.delta")


def test_testing_module_uses_init_ffi_api(testing):
    assert isinstance(kiln.testing.echo, kiln.Function)
    assert kiln.testing.add_one.__name__ == "add_one"
