"""The global function registry: look up, register, list and remove global functions.

``init_ffi_api(namespace, module_name)`` attaches every global function
``<namespace>.<name>`` as attribute ``<name>`` of a Python module, the way TVM's
``_ffi_api.py`` files do.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any, Callable, Literal, TypeVar, overload

from . import _ctypes_abi as abi
from . import core
from ._lib import LIB
from .error import raise_last_error
from .function import Function

_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def get_global_func(name: str, allow_missing: Literal[False] = False) -> Function: ...
@overload
def get_global_func(name: str, allow_missing: bool) -> Function | None: ...


def get_global_func(name: str, allow_missing: bool = False) -> Function | None:
    """Return the global function ``name`` as a :class:`kiln.Function`.

    Returns ``None`` when it does not exist and ``allow_missing`` is true, else raises
    ``ValueError``.
    """
    handle = core.get_global_handle(name)
    if handle is None:
        if allow_missing:
            return None
        raise ValueError("Cannot find global function %s" % name)
    return core.adopt_object(handle, abi.K_FUNCTION)


@overload
def register_func(name_or_func: _F, f: None = None, override: bool = False) -> _F: ...
@overload
def register_func(
    name_or_func: str | None = None, f: None = None, override: bool = False
) -> Callable[[_F], _F]: ...
@overload
def register_func(name_or_func: str, f: _F, override: bool = False) -> _F: ...


def register_func(name_or_func: Any = None, f: Any = None, override: bool = False) -> Any:
    """Register a Python callable as the global function ``name``.

    Forms::

        register_func("my.add", lambda a, b: a + b)   # direct
        @register_func("my.add")                      # decorator with a name
        @register_func                                # decorator: the name is f.__name__
        @register_func("my.add", override=True)       # replace an existing function

    Registering a name that exists without ``override=True`` raises the runtime's error.
    The decorator forms return the Python callable unchanged; the direct form returns it too.
    """
    if callable(name_or_func) and not isinstance(name_or_func, str):
        f, name = name_or_func, name_or_func.__name__
    else:
        name = name_or_func
    if name is not None and not isinstance(name, str):
        raise TypeError("register_func expects a name (str) or a callable")

    def register(myf):
        func_name = name if name is not None else myf.__name__
        func = myf if isinstance(myf, Function) else Function.from_callable(myf)
        data = func_name.encode("utf-8")
        rc = LIB.TVMFFIFunctionSetGlobal(
            ctypes.byref(abi.TVMFFIByteArray(data, len(data))), func._handle, 1 if override else 0
        )
        if rc:
            raise_last_error(rc)
        return myf

    if f is not None:
        return register(f)
    return register


def remove_global_func(name: str) -> bool:
    """Remove the global function ``name``; return whether it existed."""
    return core.call_global("ffi.FunctionRemoveGlobal", name)


def list_global_func_names() -> list[str]:
    """Return the names of all registered global functions."""
    functor = core.call_global("ffi.FunctionListGlobalNamesFunctor")
    return [functor(i) for i in range(functor(-1))]


def init_ffi_api(namespace: str, target_module_name: str | None = None) -> None:
    """Attach each global ``<namespace>.<name>`` to module ``target_module_name`` as ``<name>``.

    Functions with further dots after the prefix (``<namespace>.a.b``) are skipped, like
    TVM's ``_init_api``.  ``target_module_name`` defaults to ``namespace`` and must be
    imported already (typically ``__name__`` of the calling module).
    """
    target = sys.modules[target_module_name or namespace]
    prefix = namespace + "."
    for name in list_global_func_names():
        if not name.startswith(prefix):
            continue
        short = name[len(prefix) :]
        if not short or "." in short:
            continue
        func: Any = get_global_func(name)
        func.__name__ = short
        func.__qualname__ = name
        setattr(target, short, func)
