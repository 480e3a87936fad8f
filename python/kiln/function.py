"""``kiln.Function``: a callable ``ffi.Function`` object."""

from __future__ import annotations

from ctypes import c_void_p
from typing import TYPE_CHECKING, Any, Callable

from . import _ctypes_abi as abi
from . import core


# With the compiled call path, calls go through its C ``tp_call``; otherwise through ctypes.
_CALL_BASES: tuple[type, ...] = (core.FASTCALL.CallBase,) if core.FASTCALL is not None else ()


class Function(core.ObjectBase, *_CALL_BASES):  # type: ignore[misc]  # the base is chosen at import
    """A function object of the runtime (``ffi.Function``), callable with Python arguments.

    Arguments are converted with the rules of :func:`kiln.convert`; the result is converted
    back to Python.  Errors raised by the function are raised as Python exceptions
    (see :mod:`kiln.error`).  Obtain one with :func:`kiln.get_global_func`,
    :meth:`Function.from_callable`, or as the result of another call.
    """

    __slots__ = ("_chandle", "__dict__")

    if TYPE_CHECKING:

        def __call__(self, *args: Any) -> Any:
            """Call the function with Python arguments; return its converted result."""

    elif core.FASTCALL is None:
        __call__ = core.call_method

    @staticmethod
    def from_callable(pyfunc: Callable[..., Any]) -> Function:
        """Wrap the Python callable ``pyfunc`` as an FFI function.

        The callable is kept alive until the runtime destroys the function object.
        """
        if isinstance(pyfunc, Function):
            return pyfunc
        if not callable(pyfunc):
            raise TypeError("expected a callable, got %r" % (pyfunc,))
        return _adopt_function(core.make_callback(pyfunc), abi.K_FUNCTION)

    def __repr__(self):
        name = self.__dict__.get("__name__")
        if name:
            return "<kiln.Function %s at 0x%x>" % (name, self._handle or 0)
        return "<kiln.Function at 0x%x>" % (self._handle or 0)


_new = object.__new__


def _adopt_function(handle: int, tidx: int) -> Function:
    f = _new(Function)
    f._handle = handle
    f._type_index = tidx
    f._chandle = c_void_p(handle)
    return f


core.OBJECT_FACTORIES[abi.K_FUNCTION] = _adopt_function
core.WRITERS[Function] = core._w_object
