"""Python views of the runtime containers: :class:`Array`, :class:`Map` and :class:`Shape`.

``Array`` and ``Map`` wrap ``ffi.Array`` / ``ffi.Map`` objects and read them through the
global functions ``ffi.ArraySize``, ``ffi.ArrayGetItem``, ``ffi.MapSize``,
``ffi.MapGetItem``, ``ffi.MapCount`` and ``ffi.MapItems``.  ``Shape`` is a ``tuple`` of
ints (read once from the ``ffi.Shape`` object, which it keeps for passing back).
"""

from __future__ import annotations

import collections.abc
import ctypes
import struct
from typing import Any, Iterable, Iterator, Mapping

from . import _ctypes_abi as abi
from . import core
from .core import ObjectBase, call_global, call_raw, get_global_handle, global_handle


def _normalize_index(index, length):
    try:
        i = index.__index__()
    except AttributeError:
        raise TypeError("indices must be integers or slices, not %s" % type(index).__name__) from None
    if i < 0:
        i += length
    if not 0 <= i < length:
        raise IndexError("index %d out of range for length %d" % (index, length))
    return i


class Array(ObjectBase, collections.abc.Sequence):
    """An immutable sequence stored in the runtime (``ffi.Array``).

    ``Array([1, "a", [2]])`` builds one from any iterable; lists and tuples passed to FFI
    functions are converted to arrays automatically.  Supports ``len``, indexing (negative
    indices and slices, which return lists), iteration, ``in`` and ``==`` with lists/tuples.
    """

    __slots__ = ()

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._handle, self._type_index = None, abi.K_ARRAY
        self._handle, self._type_index = call_raw(global_handle("ffi.Array"), list(items))

    def __len__(self) -> int:
        return call_global("ffi.ArraySize", self)

    def __getitem__(self, index: Any) -> Any:
        length = len(self)
        if isinstance(index, slice):
            return [call_global("ffi.ArrayGetItem", self, i) for i in range(*index.indices(length))]
        return call_global("ffi.ArrayGetItem", self, _normalize_index(index, length))

    def __iter__(self) -> Iterator[Any]:
        getitem = global_handle("ffi.ArrayGetItem")
        for i in range(len(self)):
            yield core.call_function(getitem, (self, i))

    def __eq__(self, other):
        if self.same_as(other):
            return True
        if not isinstance(other, (Array, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = ObjectBase.__hash__

    def __repr__(self):
        return "kiln.Array(%r)" % (list(self),)


class Map(ObjectBase, collections.abc.Mapping):
    """An immutable mapping stored in the runtime (``ffi.Map``).

    ``Map({"a": 1})`` builds one from a mapping (or an iterable of pairs); dicts passed to
    FFI functions are converted automatically.  Supports ``len``, ``[]``, ``in``, ``get``,
    iteration over keys, ``keys()``, ``values()``, ``items()`` and ``==`` with dicts.
    """

    __slots__ = ()

    def __init__(self, mapping: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = ()) -> None:
        flat: list[Any] = []
        for key, value in dict(mapping).items():
            flat += (key, value)
        self._handle, self._type_index = None, abi.K_MAP
        self._handle, self._type_index = call_raw(global_handle("ffi.Map"), flat)

    def __len__(self) -> int:
        return call_global("ffi.MapSize", self)

    def __getitem__(self, key: Any) -> Any:
        try:
            return call_global("ffi.MapGetItem", self, key)
        except (KeyError, IndexError):
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        try:
            return call_global("ffi.MapCount", self, key) != 0
        except TypeError:
            return False

    def _pairs(self) -> list[tuple[Any, Any]]:
        if _HAS_MAP_ITEMS[0] is None:
            _HAS_MAP_ITEMS[0] = get_global_handle("ffi.MapItems") is not None
        if _HAS_MAP_ITEMS[0]:
            flat = list(call_global("ffi.MapItems", self))
            return list(zip(flat[0::2], flat[1::2]))
        # TVM-FFI's iterator protocol: f(0) key, f(1) value, f(2) advance (False at the end)
        size = len(self)
        if size == 0:
            return []
        functor = call_global("ffi.MapForwardIterFunctor", self)
        pairs = []
        for _ in range(size):
            pairs.append((functor(0), functor(1)))
            if not functor(2):
                break
        return pairs

    def __iter__(self) -> Iterator[Any]:
        return iter([key for key, _ in self._pairs()])

    def keys(self) -> list[Any]:  # type: ignore[override]  # a list, not a view
        """Return the keys as a list."""
        return [key for key, _ in self._pairs()]

    def values(self) -> list[Any]:  # type: ignore[override]  # a list, not a view
        """Return the values as a list."""
        return [value for _, value in self._pairs()]

    def items(self) -> list[tuple[Any, Any]]:  # type: ignore[override]  # a list, not a view
        """Return the ``(key, value)`` pairs as a list."""
        return self._pairs()

    def __eq__(self, other):
        if self.same_as(other):
            return True
        if not isinstance(other, collections.abc.Mapping):
            return NotImplemented
        if len(self) != len(other):
            return False
        for key, value in self._pairs():
            if key not in other or not (other[key] == value):
                return False
        return True

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = ObjectBase.__hash__

    def __repr__(self):
        return "kiln.Map({%s})" % ", ".join("%r: %r" % kv for kv in self._pairs())


_HAS_MAP_ITEMS: list[bool | None] = [None]


class Shape(tuple):
    """A tuple of ints backed by an ``ffi.Shape`` object (e.g. a tensor shape).

    ``Shape([2, 3])`` builds one from Python ints; the ``ffi.Shape`` object is created when
    it is first passed to an FFI function.  Shapes returned by the runtime keep their object.
    """

    _handle: int  # in the instance dict, only while an ffi.Shape object backs the shape

    def __new__(cls, dims: Iterable[Any] = ()) -> Shape:
        return super().__new__(cls, (int(d) for d in dims))

    @property
    def handle(self) -> int | None:
        """Address of the backing ``ffi.Shape`` object, or ``None`` when there is none yet."""
        return self.__dict__.get("_handle")

    def __del__(self, _decref=core._DecRef):
        handle = self.__dict__.pop("_handle", None)
        if handle:
            _decref(handle)

    def __repr__(self):
        return "kiln.Shape(%s)" % list(self)

    def __reduce__(self):
        return (Shape, (tuple(self),))


def _adopt_shape(handle, tidx):
    try:
        data, size = struct.unpack("<QQ", ctypes.string_at(handle + abi.OBJECT_HEADER_SIZE, 16))
        dims = struct.unpack("<%dq" % size, ctypes.string_at(data, 8 * size)) if size else ()
        shape = Shape(dims)
    except BaseException:
        core._DecRef(handle)
        raise
    shape._handle = handle
    return shape


core.OBJECT_FACTORIES[abi.K_ARRAY] = lambda handle, tidx: _adopt(Array, handle, tidx)
core.OBJECT_FACTORIES[abi.K_MAP] = lambda handle, tidx: _adopt(Map, handle, tidx)
core.OBJECT_FACTORIES[abi.K_SHAPE] = _adopt_shape
core.add_writer(Shape, core._w_shape)
core.WRITERS[Array] = core._w_object
core.WRITERS[Map] = core._w_object

_new = object.__new__


def _adopt(cls: type, handle: int, tidx: int) -> Any:
    obj: Any = _new(cls)
    obj._handle, obj._type_index = handle, tidx
    return obj
