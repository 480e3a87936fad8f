"""Errors in both directions across the FFI boundary."""

import threading

import pytest

import kiln

BUILTIN_KINDS = [
    TypeError,
    ValueError,
    RuntimeError,
    AttributeError,
    IndexError,
    KeyError,
    NotImplementedError,
    AssertionError,
    MemoryError,
    OverflowError,
]


@pytest.mark.parametrize("cls", BUILTIN_KINDS, ids=lambda c: c.__name__)
def test_error_from_c_maps_kind(testing, cls):
    with pytest.raises(cls) as info:
        testing.test_raise_error(cls.__name__, "message of " + cls.__name__)
    assert type(info.value) is cls
    assert info.value.args[0] == "message of " + cls.__name__


def test_unknown_kind_is_ffi_error(testing):
    with pytest.raises(kiln.FFIError) as info:
        testing.test_raise_error("SomethingWeird", "strange things")
    assert isinstance(info.value, RuntimeError)
    assert info.value.kind == "SomethingWeird"
    assert str(info.value) == "strange things"


def test_register_error(testing):
    class QuotaError(Exception):
        pass

    kiln.register_error("QuotaExceeded", QuotaError)
    with pytest.raises(QuotaError, match="too much"):
        testing.test_raise_error("QuotaExceeded", "too much")

    @kiln.register_error
    class DecoratedError(ValueError):
        pass

    with pytest.raises(DecoratedError):
        testing.test_raise_error("DecoratedError", "x")


def test_error_message_is_intact(testing):
    message = "multi\nline message with unicode ✓ and 'quotes'"
    with pytest.raises(ValueError) as info:
        testing.test_raise_error("ValueError", message)
    assert str(info.value) == message


@pytest.mark.parametrize("cls", BUILTIN_KINDS + [ZeroDivisionError], ids=lambda c: c.__name__)
def test_python_error_through_c(testing, cls):
    def raiser():
        raise cls("raised in python: " + cls.__name__)

    with pytest.raises(cls) as info:
        testing.apply(raiser)
    assert type(info.value) is cls
    assert info.value.args[0] == "raised in python: " + cls.__name__


def test_custom_python_error_through_c(testing):
    class Custom(Exception):
        def __init__(self, code):
            super().__init__("custom failure %d" % code)
            self.code = code

    def raiser(x):
        raise Custom(x)

    with pytest.raises(Custom) as info:
        testing.apply(raiser, 7)
    assert info.value.code == 7 and str(info.value) == "custom failure 7"


def test_python_error_through_nested_calls(testing):
    def inner():
        raise KeyError("deep key")

    def outer():
        return testing.apply(inner)

    with pytest.raises(KeyError) as info:
        testing.apply(outer)
    assert info.value.args == ("deep key",)
    # the traceback still shows where the error was raised
    assert any(entry.name == "inner" for entry in info.traceback)


def test_error_seen_by_c_has_kind_message_and_python_backtrace():
    # A Python exception becomes an ffi.Error whose fields C code can read.
    from kiln import core, error

    def raiser():
        raise IndexError("out of range here")

    f = kiln.Function.from_callable(raiser)
    buf = core._buffer(0)
    rc = core._RawFunctionCall(f._chandle, buf, 0, buf)
    assert rc == -1
    handle = kiln.core.c_void_p()
    error.LIB.TVMFFIErrorMoveFromRaised(kiln.core.byref(handle))
    kind, message, backtrace = error.error_info(handle.value)
    error.exception_from_handle(handle.value)  # releases it
    assert kind == "IndexError" and message == "out of range here"
    assert "in raiser" in backtrace and __file__ in backtrace


def test_callback_error_in_c_thread_free_call(testing):
    # errors are thread local: raising in several threads at once keeps them apart
    failures = []

    def worker(i):
        try:
            for _ in range(200):
                try:
                    testing.apply(lambda: (_ for _ in ()).throw(ValueError("t%d" % i)))
                except ValueError as exc:
                    assert str(exc) == "t%d" % i
                try:
                    testing.test_raise_error("TypeError", "c%d" % i)
                except TypeError as exc:
                    assert str(exc) == "c%d" % i
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_error_inside_argument_conversion_releases_temporaries(testing):
    before = kiln.core.live_callback_count()
    with pytest.raises(TypeError):
        testing.echo(lambda: 1, "a long string argument", [1, 2], object())
    assert kiln.core.live_callback_count() == before
