"""``kiln.Object``: generic wrapper of runtime objects, with reflection-based attributes.

Attributes are read through the runtime's reflection: ``obj.name`` calls
``kiln.ffi.ObjectGetField(obj, "name")`` and ``dir(obj)`` includes
``kiln.ffi.ObjectFieldNames(obj)`` (without those globals, as on TVM-FFI's library, the
field getters of the ``TVMFFITypeInfo`` tables are used); ``repr(obj)`` uses ``kiln.ffi.ObjectRepr``
(``ffi.ReprPrint`` on TVM-FFI's library).  :func:`register_object` maps a type key to a
Python class, used for every object of that type (or of a subtype without its own class).
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, TypeVar, overload

from . import _ctypes_abi as abi
from . import core
from ._lib import LIB
from .core import ObjectBase, get_global_handle
from .error import raise_last_error

_T = TypeVar("_T", bound=type)

_OPTIONAL_GLOBALS: dict[tuple[str, ...], Any] = {}


def optional_global(*names: str) -> Any:
    """Return a cached :class:`kiln.Function` for the first of ``names`` that exists, or None."""
    key = names
    if key not in _OPTIONAL_GLOBALS:
        found = None
        for name in names:
            handle = get_global_handle(name)
            if handle:
                found = core.adopt_object(handle, abi.K_FUNCTION)
                break
        _OPTIONAL_GLOBALS[key] = found
    return _OPTIONAL_GLOBALS[key]


class Object(ObjectBase):
    """A runtime object whose fields are readable as Python attributes (via reflection).

    Two wrappers are equal when they hold the same object (``same_as``); use
    :func:`kiln.structural_equal` to compare contents.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_handle", "_type_index"):
            raise AttributeError(name)
        getter = optional_global("kiln.ffi.ObjectGetField")
        if getter is not None:
            try:
                return getter(self, name)
            except Exception as exc:  # an unknown field: report it the Python way
                raise AttributeError("%r object has no attribute %r" % (self.type_key, name)) from exc
        field = reflected_fields(self._type_index).get(name)
        if field is None or not self._handle:
            raise AttributeError("%r object has no attribute %r" % (self.type_key, name))
        return _read_field(self._handle, *field)

    def field_names(self) -> list[str]:
        """Return the names of the reflected fields of this object."""
        names = optional_global("kiln.ffi.ObjectFieldNames")
        if names is not None:
            return list(names(self))
        return list(reflected_fields(self._type_index))

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.field_names()))

    def __repr__(self):
        printer = optional_global("kiln.ffi.ObjectRepr", "ffi.ReprPrint")
        if printer is not None and self._handle:
            try:
                return printer(self)
            except Exception:  # noqa: BLE001 - repr must not fail
                pass
        return "<%s object at 0x%x>" % (self.type_key, self._handle or 0)


_FIELD_TABLES: dict[int, dict[str, tuple[int, Any]]] = {}


def reflected_fields(tidx: int) -> dict[str, tuple[int, Any]]:
    """Return ``{name: (offset, getter)}`` from the ``TVMFFITypeInfo`` field tables of
    ``tidx`` and its ancestors (the fallback when ``kiln.ffi.ObjectGetField`` is missing)."""
    table = _FIELD_TABLES.get(tidx)
    if table is None:
        table = {}
        for index in reversed([tidx] + core.type_ancestors_of(tidx)):
            info = LIB.TVMFFIGetTypeInfo(index)
            if not info:
                continue
            info = info.contents
            for i in range(info.num_fields if info.fields else 0):
                field = info.fields[i]
                if not field.getter:
                    continue
                name = ctypes.string_at(field.name.data, field.name.size).decode("utf-8")
                table[name] = (field.offset, abi.FIELD_GETTER(field.getter))
        _FIELD_TABLES[tidx] = table
    return table


def _read_field(handle, offset, getter):
    slot = core._AnySlot()
    rc = getter(handle + offset, ctypes.addressof(slot))
    if rc:
        raise_last_error(rc)
    return core.read_owned(slot, 0)


#: type index -> Python class registered with register_object
_REGISTERED: dict[int, type] = {}
#: type index -> resolved class (registered class of the type or of its nearest ancestor)
_RESOLVED: dict[int, type] = {}


@overload
def register_object(type_key: _T) -> _T: ...
@overload
def register_object(type_key: str | None = None) -> Callable[[_T], _T]: ...


def register_object(type_key: Any = None) -> Any:
    """Class decorator mapping the runtime type ``type_key`` to a Python class.

    Objects of that type (and of subtypes that have no class of their own) returned by
    the runtime are wrapped in the class, which should derive from :class:`Object`.
    ``@register_object`` without a key uses the class name.  Raises ``ValueError`` when the
    type key is unknown to the runtime.
    """

    def register(cls, key):
        if not (isinstance(cls, type) and issubclass(cls, ObjectBase)):
            raise TypeError("register_object expects a subclass of kiln.Object")
        tidx = core.type_key_to_index(key)
        _REGISTERED[tidx] = cls
        _RESOLVED.clear()
        core.WRITERS[cls] = core._w_object
        cls._kiln_type_index = tidx  # type: ignore[attr-defined]  # set on the registered class
        return cls

    if isinstance(type_key, type):
        return register(type_key, type_key.__name__)
    return lambda cls: register(cls, type_key or cls.__name__)


def class_of(tidx: int) -> type:
    """Return the Python class used to wrap objects of type index ``tidx``."""
    cls = _RESOLVED.get(tidx)
    if cls is None:
        cls = _REGISTERED.get(tidx)
        if cls is None:
            for ancestor in core.type_ancestors_of(tidx):
                cls = _REGISTERED.get(ancestor)
                if cls is not None:
                    break
            else:
                cls = Object
        _RESOLVED[tidx] = cls
    return cls


_new = object.__new__


def _adopt_object(handle: int, tidx: int) -> Any:
    cls = _RESOLVED.get(tidx) or class_of(tidx)
    obj: Any = _new(cls)
    obj._handle, obj._type_index = handle, tidx
    return obj


core.set_default_object_factory(_adopt_object)
core.WRITERS[Object] = core._w_object
