"""Errors crossing the FFI boundary, in both directions.

A C function that fails returns ``-1`` after storing an ``ffi.Error`` object in a
thread-local slot.  :func:`raise_last_error` takes it out
(``TVMFFIErrorMoveFromRaised``), reads ``kind`` / ``message`` / ``backtrace`` from its
``TVMFFIErrorCell`` and raises the Python exception registered for ``kind``
(:func:`register_error`); unknown kinds raise :class:`FFIError`.

The other way, a Python exception escaping a callback that C called is turned into an
``ffi.Error`` with ``kind`` = the exception's registered kind (else its class name),
``message`` = its message and the Python traceback as backtrace
(:func:`set_raised_from_exception`).  The Python exception object is remembered, so
when the same error object comes back out to Python the original exception (same
class, same message, same traceback) is raised again.
"""

from __future__ import annotations

import builtins
import ctypes
import threading
from collections import OrderedDict
from typing import Any, Callable, NoReturn, TypeVar, overload

from . import _ctypes_abi as abi
from ._lib import LIB

_E = TypeVar("_E", bound=type)

_string_at = ctypes.string_at
_DecRef = LIB.TVMFFIObjectDecRef


class FFIError(RuntimeError):
    """An error raised by the runtime whose ``kind`` has no registered Python class.

    Attributes
    ----------
    kind : str
        The error kind reported by the runtime (e.g. ``"MyCustomError"``).
    backtrace : str
        The backtrace stored in the error object (most recent call first).
    """

    def __init__(self, message: str = "", kind: str = "FFIError", backtrace: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.backtrace = backtrace


_KIND_TO_CLS: dict[str, type] = {}
_CLS_TO_KIND: dict[type, str] = {}


@overload
def register_error(kind_or_cls: _E, cls: None = None) -> _E: ...
@overload
def register_error(kind_or_cls: str | None = None, cls: None = None) -> Callable[[_E], _E]: ...
@overload
def register_error(kind_or_cls: str | None, cls: _E) -> _E: ...


def register_error(kind_or_cls: Any = None, cls: Any = None) -> Any:
    """Map an error kind to a Python exception class (both directions).

    Usable as ``register_error("MyKind", MyError)``, as a decorator
    ``@register_error("MyKind")``, or bare ``@register_error`` (the kind is then the
    class name).  Returns the class (or a decorator).
    """
    if isinstance(kind_or_cls, type):
        cls, kind_or_cls = kind_or_cls, kind_or_cls.__name__

    def register(mycls):
        kind = kind_or_cls if isinstance(kind_or_cls, str) else mycls.__name__
        if not (isinstance(mycls, type) and issubclass(mycls, BaseException)):
            raise TypeError("register_error expects an exception class, got %r" % (mycls,))
        _KIND_TO_CLS[kind] = mycls
        _CLS_TO_KIND[mycls] = kind
        return mycls

    return register if cls is None else register(cls)


for _name in (
    "RuntimeError",
    "ValueError",
    "TypeError",
    "AttributeError",
    "IndexError",
    "KeyError",
    "NotImplementedError",
    "AssertionError",
    "MemoryError",
    "OverflowError",
    "ZeroDivisionError",
    "KeyboardInterrupt",
):
    register_error(_name, getattr(builtins, _name))
register_error("FFIError", FFIError)


def error_kind_of(exc: BaseException) -> str:
    """Return the FFI error kind used for the Python exception ``exc``."""
    kind = _CLS_TO_KIND.get(type(exc))
    if kind is not None and type(exc) is not FFIError:
        return kind
    if isinstance(exc, FFIError):
        return exc.kind
    return type(exc).__name__


def _message_of(exc):
    # KeyError('x') prints as "'x'": keep the bare argument so it survives a round trip.
    args = exc.args
    if len(args) == 1 and isinstance(args[0], str):
        return args[0]
    return str(exc)


def _format_backtrace(tb):
    # TVM-FFI convention: one `  File "f", line n, in func` per frame, most recent first.
    lines = []
    while tb is not None:
        code = tb.tb_frame.f_code
        lines.append('  File "%s", line %d, in %s\n' % (code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    return "".join(reversed(lines))


# ---------------------------------------------------------------------------
# Python exceptions raised inside callbacks: remembered by error handle so the very same
# exception object is raised again when the error comes back to Python.  Each entry owns
# one reference to its error object (so its address cannot be reused while remembered);
# the table is bounded, dropping the oldest entries (errors that C swallowed).
# ---------------------------------------------------------------------------
_PENDING: OrderedDict[int, BaseException] = OrderedDict()
_PENDING_LOCK = threading.Lock()
_PENDING_MAX = 128


def _remember(handle, exc):
    evicted = []
    with _PENDING_LOCK:
        _PENDING[handle] = exc
        while len(_PENDING) > _PENDING_MAX:
            evicted.append(_PENDING.popitem(last=False)[0])
    for h in evicted:
        _DecRef(h)


def _forget(handle):
    with _PENDING_LOCK:
        exc = _PENDING.pop(handle, None)
    if exc is not None:
        _DecRef(handle)
    return exc


def _bytes_arg(text):
    data = text.encode("utf-8", "surrogateescape")
    return abi.TVMFFIByteArray(data, len(data))


def set_raised_from_exception(exc: BaseException) -> None:
    """Store ``exc`` as the raised error of this thread (for a callback about to return -1)."""
    try:
        kind = error_kind_of(exc)
        message = _message_of(exc)
        backtrace = _format_backtrace(exc.__traceback__) + getattr(exc, "backtrace", "")
        if not isinstance(backtrace, str):
            backtrace = ""
        out = ctypes.c_void_p()
        rc = LIB.TVMFFIErrorCreate(
            ctypes.byref(_bytes_arg(kind)),
            ctypes.byref(_bytes_arg(message)),
            ctypes.byref(_bytes_arg(backtrace)),
            ctypes.byref(out),
        )
        if rc == 0 and out.value:
            LIB.TVMFFIErrorSetRaised(out.value)  # the slot takes its own reference
            _remember(out.value, exc)
            return
    except Exception:  # pragma: no cover - fall back to the simplest C entry point
        kind, message = type(exc).__name__, "<error while converting the exception>"
    LIB.TVMFFIErrorSetRaisedFromCStr(
        kind.encode("utf-8", "replace").replace(b"\0", b"?"),
        message.encode("utf-8", "replace").replace(b"\0", b"?"),
    )


def _read_bytes(ba):
    return _string_at(ba.data, ba.size) if ba.size else b""


def error_info(handle: int) -> tuple[str, str, str]:
    """Return ``(kind, message, backtrace)`` of the ``ffi.Error`` object at ``handle``."""
    cell = abi.TVMFFIErrorCell.from_address(handle + abi.OBJECT_HEADER_SIZE)
    kind, message, backtrace = (
        _read_bytes(ba).decode("utf-8", "replace") for ba in (cell.kind, cell.message, cell.backtrace)
    )
    return kind, message, backtrace


def make_exception(kind: str, message: str, backtrace: str = "") -> BaseException:
    """Build (without raising) the Python exception for an FFI error."""
    cls = _KIND_TO_CLS.get(kind)
    if cls is None or cls is FFIError:
        exc = FFIError(message, kind, backtrace)
    else:
        try:
            exc = cls(message)
        except Exception:  # a registered class with an unusual constructor
            exc = FFIError(message, kind, backtrace)
        exc.kind = kind
        exc.backtrace = backtrace
    if backtrace.strip() and hasattr(exc, "add_note"):  # Python >= 3.11
        exc.add_note("FFI backtrace (most recent call first):\n" + backtrace.rstrip("\n"))
    return exc


def exception_from_handle(handle: int) -> BaseException:
    """Turn an owned ``ffi.Error`` handle into a Python exception, releasing the handle."""
    original = _forget(handle)
    if original is not None:
        _DecRef(handle)
        return original
    try:
        kind, message, backtrace = error_info(handle)
    finally:
        _DecRef(handle)
    return make_exception(kind, message, backtrace)


def raise_last_error(rc: int = -1) -> NoReturn:
    """Take the error raised in this thread (after a call returned ``rc != 0``) and raise it."""
    handle = ctypes.c_void_p()
    LIB.TVMFFIErrorMoveFromRaised(ctypes.byref(handle))
    if not handle.value:
        raise RuntimeError("FFI call failed with code %d but no error was raised" % rc)
    exc = exception_from_handle(handle.value)
    try:
        raise exc
    finally:
        del exc


def check_call(rc: int) -> None:
    """Raise the pending FFI error when ``rc`` is nonzero."""
    if rc != 0:
        raise_last_error(rc)
