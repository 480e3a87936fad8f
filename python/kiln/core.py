"""Python values <-> ``TVMFFIAny``, function calls and Python callbacks.

Arguments are written as 16-byte ``TVMFFIAny`` *views* into one ctypes buffer with
``struct.pack_into``; values that need an FFI object for the duration of the call
(long strings, lists, dicts, Python callables, ...) are created here and released right
after the call.  The result slot (the last 16 bytes of the same buffer) is an *owned*
``TVMFFIAny``: POD values are read directly, strings and bytes are copied out and their
object released, every other object is adopted by a Python wrapper that releases it in
``__del__``.

Python callables become ``ffi.Function`` objects through ``TVMFFIFunctionCreate`` with one
shared ``safe_call`` trampoline: the function's ``self`` pointer is a key into
:data:`_CALLBACKS`, which keeps the callable alive until the runtime calls the deleter.
"""

from __future__ import annotations

import collections.abc
import ctypes
import itertools
import numbers
import struct
from ctypes import byref, c_void_p
from typing import Any, Callable, Sequence

from . import _ctypes_abi as abi
from ._lib import LIB
from .error import raise_last_error, set_raised_from_exception

_S_ANY = struct.Struct("<iIq")  # type index, padding, 8-byte integer payload
_S_ANY_F = struct.Struct("<iId")  # ... with a double payload
_S_ANY_S = struct.Struct("<iI8s")  # ... with inline small string / bytes
_S_ANY_DEV = struct.Struct("<iIii")  # ... with a DLDevice payload
_S_F64 = struct.Struct("<d")
_S_BYTE_ARRAY = struct.Struct("<QQ")  # {data, size}

_pack_any = _S_ANY.pack_into
_unpack_any = _S_ANY.unpack_from
_string_at = ctypes.string_at
_memmove = ctypes.memmove

# Without declared argument types: every argument is passed as a ctypes object (c_void_p
# handle, buffer, byref), which halves the cost of a call compared with ``argtypes``.
_RawFunctionCall = LIB["TVMFFIFunctionCall"]
_IncRef = LIB.TVMFFIObjectIncRef
_DecRef = LIB.TVMFFIObjectDecRef
_StringFromByteArray = LIB.TVMFFIStringFromByteArray
_BytesFromByteArray = LIB.TVMFFIBytesFromByteArray

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_HEADER = abi.OBJECT_HEADER_SIZE
_K_OBJECT = abi.K_OBJECT

# ctypes buffer types holding n argument slots plus one result slot
_BUF_TYPES = [abi.c_char * (abi.ANY_SIZE * (n + 1)) for n in range(17)]
_AnySlot = _BUF_TYPES[0]


def _buffer(n):
    return _BUF_TYPES[n]() if n <= 16 else (abi.c_char * (abi.ANY_SIZE * (n + 1)))()


# ---------------------------------------------------------------------------
# Object wrappers
# ---------------------------------------------------------------------------
class ObjectBase:
    """Base of every Python wrapper owning one strong reference to an FFI object.

    The reference is released (``TVMFFIObjectDecRef``) when the wrapper is garbage
    collected.  ``_handle`` is the object's address, ``_type_index`` its type index.
    """

    __slots__ = ("_handle", "_type_index", "__weakref__")
    _handle: int | None
    _type_index: int

    def __del__(self, _decref=_DecRef):
        try:
            handle = self._handle
        except AttributeError:
            return
        if handle:
            self._handle = None
            _decref(handle)

    @property
    def handle(self) -> int | None:
        """The address of the underlying ``TVMFFIObject`` (an ``int``)."""
        return self._handle

    @property
    def type_index(self) -> int:
        """The runtime type index of the object."""
        return self._type_index

    @property
    def type_key(self) -> str:
        """The type key of the object (e.g. ``"ffi.Array"``)."""
        return type_key_of(self._type_index)

    def same_as(self, other: object) -> bool:
        """True when ``other`` wraps the very same FFI object."""
        return isinstance(other, ObjectBase) and other._handle == self._handle

    def __eq__(self, other):
        return self.same_as(other)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self._handle)

    def __reduce__(self):
        raise TypeError("%s objects cannot be pickled" % type(self).__name__)

    def _move_handle_from(self, other):
        # Take over the reference owned by ``other`` (a freshly returned wrapper).
        self._handle, self._type_index = other._handle, other._type_index
        other._handle = None

    def __init_handle_by_constructor__(self, fconstructor, *args):
        """Initialize this wrapper with the object returned by ``fconstructor(*args)``.

        For Python classes registered with :func:`kiln.register_object` whose
        ``__init__`` builds the object through a global constructor function.
        """
        handle, tidx = call_raw(fconstructor._handle, args)
        if tidx < _K_OBJECT:
            raise TypeError("constructor did not return an object (type index %d)" % tidx)
        self._handle, self._type_index = handle, tidx


_object_new = object.__new__

#: type index -> callable(handle, type_index) building the Python value (adopts the reference)
OBJECT_FACTORIES: dict[int, Callable[[int, int], Any]] = {}


def _default_factory(handle, tidx):
    # replaced by object.py with a factory resolving registered classes
    obj = _object_new(ObjectBase)
    obj._handle, obj._type_index = handle, tidx
    return obj


_FACTORY = [_default_factory]


def set_default_object_factory(factory: Callable[[int, int], Any]) -> None:
    """Install the factory used for objects without a specific one (done by ``kiln.object``)."""
    _FACTORY[0] = factory


def _read_byte_array(addr):
    data, size = _S_BYTE_ARRAY.unpack(_string_at(addr, 16))
    return _string_at(data, size) if size else b""


def _decode(raw):
    return raw.decode("utf-8", "surrogateescape")


def _adopt_str(handle, tidx):
    try:
        return _decode(_read_byte_array(handle + _HEADER))
    finally:
        _DecRef(handle)


def _adopt_bytes(handle, tidx):
    try:
        return _read_byte_array(handle + _HEADER)
    finally:
        _DecRef(handle)


OBJECT_FACTORIES[abi.K_STR] = _adopt_str
OBJECT_FACTORIES[abi.K_BYTES] = _adopt_bytes


def adopt_object(handle: int, tidx: int) -> Any:
    """Wrap an owned object reference as a Python value (the reference is taken over)."""
    factory = OBJECT_FACTORIES.get(tidx)
    if factory is None:
        return _FACTORY[0](handle, tidx)
    return factory(handle, tidx)


# ---------------------------------------------------------------------------
# Reading TVMFFIAny
# ---------------------------------------------------------------------------
def _r_none(buf, off, pad, iv):
    return None


def _r_int(buf, off, pad, iv):
    return iv


def _r_bool(buf, off, pad, iv):
    return iv != 0


def _r_float(buf, off, pad, iv):
    return _S_F64.unpack_from(buf, off + 8)[0]


def _r_ptr(buf, off, pad, iv):
    return c_void_p(iv or None)


def _r_dtype(buf, off, pad, iv):
    return DTYPE_FROM_PACKED[0](iv & 0xFFFFFFFF)


def _r_device(buf, off, pad, iv):
    dev_type, dev_id = struct.unpack_from("<ii", buf, off + 8)
    return DEVICE_CLASS[0](dev_type, dev_id)


def _r_raw_str(buf, off, pad, iv):
    return _decode(_string_at(iv)) if iv else None


def _r_byte_array_ptr(buf, off, pad, iv):
    return _read_byte_array(iv)


def _r_rvalue_ref(buf, off, pad, iv):
    handle: int = c_void_p.from_address(iv).value  # type: ignore[assignment]  # never null
    return _view_object(handle, struct.unpack_from("<i", _string_at(handle + 8, 4))[0])


def _r_small_str(buf, off, pad, iv):
    return _decode(buf[off + 8 : off + 8 + pad])


def _r_small_bytes(buf, off, pad, iv):
    return bytes(buf[off + 8 : off + 8 + pad])


def _r_unknown(buf, off, pad, iv):
    tidx = _unpack_any(buf, off)[0]
    raise TypeError("cannot convert FFI value with type index %d to Python" % tidx)


_POD_READERS = [
    _r_none,
    _r_int,
    _r_bool,
    _r_float,
    _r_ptr,
    _r_dtype,
    _r_device,
    _r_ptr,  # DLTensor*
    _r_raw_str,
    _r_byte_array_ptr,
    _r_rvalue_ref,
    _r_small_str,
    _r_small_bytes,
] + [_r_unknown] * (abi.K_OBJECT - 13)

# filled in by dtype.py / device.py (avoids an import cycle)
DTYPE_FROM_PACKED: list[Any] = [None]
DEVICE_CLASS: list[Any] = [None]


def read_owned(buf, off):
    """Convert the owned ``TVMFFIAny`` at ``buf[off:off+16]`` to Python (taking its reference)."""
    tidx, pad, iv = _unpack_any(buf, off)
    if tidx < _K_OBJECT:
        return _POD_READERS[tidx](buf, off, pad, iv)
    factory = OBJECT_FACTORIES.get(tidx)
    if factory is None:
        return _FACTORY[0](iv, tidx)
    return factory(iv, tidx)


def _view_object(handle, tidx):
    if tidx == abi.K_STR:
        return _decode(_read_byte_array(handle + _HEADER))
    if tidx == abi.K_BYTES:
        return _read_byte_array(handle + _HEADER)
    _IncRef(handle)
    return adopt_object(handle, tidx)


def read_view(buf, off):
    """Convert the borrowed ``TVMFFIAny`` at ``buf[off:off+16]`` to Python (objects are retained)."""
    tidx, pad, iv = _unpack_any(buf, off)
    if tidx < _K_OBJECT:
        return _POD_READERS[tidx](buf, off, pad, iv)
    return _view_object(iv, tidx)


# ---------------------------------------------------------------------------
# Writing TVMFFIAny views
#
# writer(buf, off, value, temps): writes a view of ``value`` at buf[off:off+16]; handles of
# objects created for the occasion are appended to ``temps`` (released by the caller).
# ---------------------------------------------------------------------------
def _w_none(buf, off, v, temps):
    _pack_any(buf, off, 0, 0, 0)


def _w_bool(buf, off, v, temps):
    _pack_any(buf, off, 2, 0, 1 if v else 0)


def _w_int(buf, off, v, temps):
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise OverflowError("Python int %d does not fit in int64 (range [-2**63, 2**63-1])" % v)
    _pack_any(buf, off, 1, 0, v)


def _w_float(buf, off, v, temps):
    _S_ANY_F.pack_into(buf, off, 3, 0, v)


def _w_from_byte_array(fn, data, buf, off, temps):
    rc = fn(byref(abi.TVMFFIByteArray(data, len(data))), byref(buf, off))
    if rc:
        raise_last_error(rc)
    tidx, _, iv = _unpack_any(buf, off)
    if tidx >= _K_OBJECT:
        temps.append(iv)


def _w_str(buf, off, v, temps):
    data = v.encode("utf-8", "surrogateescape")
    n = len(data)
    if n <= 7:
        _S_ANY_S.pack_into(buf, off, 11, n, data)
    else:
        _w_from_byte_array(_StringFromByteArray, data, buf, off, temps)


def _w_bytes(buf, off, v, temps):
    data = bytes(v)
    n = len(data)
    if n <= 7:
        _S_ANY_S.pack_into(buf, off, 12, n, data)
    else:
        _w_from_byte_array(_BytesFromByteArray, data, buf, off, temps)


def _w_object(buf, off, v, temps):
    handle = v._handle
    if not handle:
        raise ValueError("cannot pass a released %s object" % type(v).__name__)
    _pack_any(buf, off, v._type_index, 0, handle)


def _w_opaque_ptr(buf, off, v, temps):
    _pack_any(buf, off, 4, 0, v.value or 0)


def _w_dtype(buf, off, v, temps):
    _pack_any(buf, off, 5, 0, v._packed)


def _w_device(buf, off, v, temps):
    _S_ANY_DEV.pack_into(buf, off, 6, 0, v.device_type, v.device_id)


def _w_new_object(buf, off, handle, tidx, temps):
    temps.append(handle)
    _pack_any(buf, off, tidx, 0, handle)


def _w_list(buf, off, v, temps):
    _w_new_object(buf, off, *call_raw(global_handle("ffi.Array"), v), temps)


def _w_dict(buf, off, v, temps):
    flat = []
    for key, value in v.items():
        flat.append(key)
        flat.append(value)
    _w_new_object(buf, off, *call_raw(global_handle("ffi.Map"), flat), temps)


def _w_shape(buf, off, v, temps):
    handle = getattr(v, "_handle", None)
    if handle:
        _pack_any(buf, off, abi.K_SHAPE, 0, handle)
    else:
        _w_new_object(buf, off, *call_raw(global_handle("ffi.Shape"), [int(x) for x in v]), temps)


def _w_callable(buf, off, v, temps):
    _w_new_object(buf, off, make_callback(v), abi.K_FUNCTION, temps)


def _w_integral(buf, off, v, temps):
    _w_int(buf, off, int(v), temps)


def _w_real(buf, off, v, temps):
    _w_float(buf, off, float(v), temps)


#: exact Python class -> writer; extended lazily for subclasses (see _find_writer)
WRITERS: dict[type, Callable[..., None]] = {
    type(None): _w_none,
    bool: _w_bool,
    int: _w_int,
    float: _w_float,
    str: _w_str,
    bytes: _w_bytes,
    bytearray: _w_bytes,
    list: _w_list,
    tuple: _w_list,
    dict: _w_dict,
    c_void_p: _w_opaque_ptr,
}

_get_writer = WRITERS.get
_pack_any_f = _S_ANY_F.pack_into

#: (base class, writer) pairs tried in order for classes not in WRITERS; filled below and by
#: dtype.py / device.py / container.py
SLOW_WRITERS: list[tuple[Any, Callable[..., None]]] = []


def add_writer(cls: type, writer: Callable[..., None]) -> None:
    """Use ``writer`` for instances of ``cls`` (exactly, and as a base class checked first)."""
    WRITERS[cls] = writer
    SLOW_WRITERS.insert(0, (cls, writer))


def _find_writer(value):
    cls = type(value)
    for base, writer in SLOW_WRITERS:
        if isinstance(value, base):
            break
    else:
        if callable(value):
            writer = _w_callable
        else:
            raise TypeError("cannot convert a value of type %s to an FFI value" % cls.__qualname__)
    WRITERS[cls] = writer
    return writer


def write_view(buf, off, value, temps):
    """Write ``value`` as a ``TVMFFIAny`` view at ``buf[off:off+16]`` (see module docstring)."""
    writer = WRITERS.get(type(value))
    if writer is None:
        writer = _find_writer(value)
    writer(buf, off, value, temps)


def release(temps):
    """Release the temporary object references collected while writing views.

    A callable in ``temps`` is a post-call action that a writer registered (e.g. copying
    results back into a numpy array that was passed through a temporary tensor); it is run.
    """
    for handle in temps:
        if type(handle) is int:
            _DecRef(handle)
        else:
            handle()


def write_owned(addr, value):
    """Write ``value`` as an owned ``TVMFFIAny`` at address ``addr``."""
    slot = _AnySlot()
    temps: list[Any] = []
    try:
        write_view(slot, 0, value, temps)
        tidx, _, handle = _unpack_any(slot, 0)
        if tidx >= _K_OBJECT:
            if handle in temps:
                temps.remove(handle)  # created for us: hand the reference over
            else:
                _IncRef(handle)
        _memmove(addr, slot, abi.ANY_SIZE)
    finally:
        release(temps)


# ---------------------------------------------------------------------------
# Calls
# ---------------------------------------------------------------------------
def _write_args(buf, args, temps):
    off = 0
    get = WRITERS.get
    for arg in args:
        (get(type(arg)) or _find_writer(arg))(buf, off, arg, temps)
        off += 16
    return off


def _as_chandle(handle):
    return handle if type(handle) is c_void_p else c_void_p(handle)


def call_raw(fhandle: int | c_void_p, args: Sequence[Any]) -> tuple[int, int]:
    """Call a function and return its owned result as ``(payload, type_index)``.

    ``fhandle`` is the function's address (``int`` or ``c_void_p``).  For results that are
    objects the payload is the handle, whose reference the caller then owns.
    """
    n = len(args)
    buf = _buffer(n)
    temps: list[Any] = []
    try:
        off = _write_args(buf, args, temps)
        rc = _RawFunctionCall(_as_chandle(fhandle), buf, n, byref(buf, off))
    finally:
        if temps:
            release(temps)
    if rc:
        raise_last_error(rc)
    tidx, _, payload = _unpack_any(buf, off)
    return payload, tidx


def call_function(fhandle: int | c_void_p, args: Sequence[Any]) -> Any:
    """Call the ``ffi.Function`` at ``fhandle`` with Python ``args``; return the Python result."""
    n = len(args)
    buf = _buffer(n)
    temps: list[Any] = []
    try:
        off = _write_args(buf, args, temps)
        rc = _RawFunctionCall(_as_chandle(fhandle), buf, n, byref(buf, off))
    finally:
        if temps:
            release(temps)
    if rc:
        raise_last_error(rc)
    return read_owned(buf, off)


def call_method(self: Any, *args: Any) -> Any:
    """``Function.__call__``: call the wrapped function with Python arguments.

    The hot path of the binding: ints and floats are written, and plain results read,
    inline; everything else goes through WRITERS / read_owned.
    """
    n = len(args)
    if n:
        buf = _BUF_TYPES[n]() if n <= 16 else _buffer(n)
        temps: list[Any] = []
        try:
            off = 0
            for arg in args:
                cls = type(arg)
                if cls is int and _INT64_MIN <= arg <= _INT64_MAX:
                    _pack_any(buf, off, 1, 0, arg)
                elif cls is float:
                    _pack_any_f(buf, off, 3, 0, arg)
                else:
                    (_get_writer(cls) or _find_writer(arg))(buf, off, arg, temps)
                off += 16
            rc = _RawFunctionCall(self._chandle, buf, n, byref(buf, off))
        finally:
            if temps:
                release(temps)
    else:
        buf = _AnySlot()
        off = 0
        rc = _RawFunctionCall(self._chandle, buf, 0, buf)
    if rc:
        raise_last_error(rc)
    tidx, pad, iv = _unpack_any(buf, off)
    if tidx == 1:
        return iv
    if tidx < _K_OBJECT:
        return None if tidx == 0 else _POD_READERS[tidx](buf, off, pad, iv)
    factory = OBJECT_FACTORIES.get(tidx)
    if factory is None:
        return _FACTORY[0](iv, tidx)
    return factory(iv, tidx)


def convert(value: Any) -> Any:
    """Convert a Python value to its FFI counterpart and back.

    ``list``/``tuple`` become :class:`kiln.Array`, ``dict`` :class:`kiln.Map`, callables
    :class:`kiln.Function`; plain values (int, float, str, ...) come back unchanged.
    """
    slot = _AnySlot()
    temps: list[Any] = []
    try:
        write_view(slot, 0, value, temps)
        tidx, _, handle = _unpack_any(slot, 0)
        if tidx >= _K_OBJECT:
            if handle in temps:
                temps.remove(handle)
            else:
                _IncRef(handle)
    finally:
        release(temps)
    return read_owned(slot, 0)


# ---------------------------------------------------------------------------
# Global functions
# ---------------------------------------------------------------------------
_GLOBAL_HANDLES: dict[str, c_void_p] = {}


def get_global_handle(name: str) -> int | None:
    """Return an owned handle to the global function ``name``, or ``None`` when missing."""
    data = name.encode("utf-8")
    out = c_void_p()
    rc = LIB.TVMFFIFunctionGetGlobal(byref(abi.TVMFFIByteArray(data, len(data))), byref(out))
    if rc:
        raise_last_error(rc)
    return out.value


def global_handle(name: str) -> c_void_p:
    """Cached handle (a ``c_void_p``) of a global function the binding relies on.

    The reference is kept for the life of the process.
    """
    handle = _GLOBAL_HANDLES.get(name)
    if handle is None:
        address = get_global_handle(name)
        if address is None:
            raise RuntimeError("the runtime library does not provide the global function %r" % name)
        handle = _GLOBAL_HANDLES[name] = c_void_p(address)
    return handle


def call_global(name: str, *args: Any) -> Any:
    """Call the global function ``name`` (whose handle is cached) with ``args``."""
    return call_function(global_handle(name), args)


# ---------------------------------------------------------------------------
# Type information
# ---------------------------------------------------------------------------
_TYPE_KEYS: dict[int, str] = {}


def type_key_of(tidx: int) -> str:
    """Return the type key registered for type index ``tidx``."""
    key = _TYPE_KEYS.get(tidx)
    if key is None:
        info = LIB.TVMFFIGetTypeInfo(tidx)
        if not info:
            return "<type %d>" % tidx
        ba = info.contents.type_key
        key = _decode(_string_at(ba.data, ba.size))
        _TYPE_KEYS[tidx] = key
    return key


def type_ancestors_of(tidx: int) -> list[int]:
    """Return the type indices of the ancestors of ``tidx``, nearest first."""
    info = LIB.TVMFFIGetTypeInfo(tidx)
    if not info or not info.contents.type_ancestors:
        return []
    depth = info.contents.type_depth
    ancestors = info.contents.type_ancestors
    out = []
    for i in reversed(range(depth)):
        if ancestors[i]:
            out.append(abi.TVMFFITypeInfo.from_address(ancestors[i]).type_index)
    return out


def type_key_to_index(type_key: str) -> int:
    """Return the type index of ``type_key``; raise ``ValueError`` when it is unknown."""
    data = type_key.encode("utf-8")
    out = abi.c_int32()
    rc = LIB.TVMFFITypeKeyToIndex(byref(abi.TVMFFIByteArray(data, len(data))), byref(out))
    if rc:
        try:
            raise_last_error(rc)
        except Exception as exc:
            raise ValueError("unknown type key %r" % type_key) from exc
    return out.value


# ---------------------------------------------------------------------------
# Python callables as ffi.Function
# ---------------------------------------------------------------------------
#: self key -> Python callable, for every ffi.Function made from a Python callable still alive
_CALLBACKS: dict[int, Callable[..., Any]] = {}
_next_key = itertools.count(1).__next__


def _safe_call(key, args, num_args, result):
    try:
        func = _CALLBACKS[key]
        if num_args:
            raw = _string_at(args, 16 * num_args)
            ret = func(*[read_view(raw, off) for off in range(0, 16 * num_args, 16)])
        else:
            ret = func()
        write_owned(result, ret)
        return 0
    except BaseException as exc:  # noqa: BLE001 - every error must become an FFI error
        set_raised_from_exception(exc)
        return -1


def _deleter(key):
    try:
        _CALLBACKS.pop(key, None)
    except BaseException:  # noqa: BLE001 - never let an exception escape into C
        pass


_SAFE_CALL_THUNK = abi.SAFE_CALL(_safe_call)
_DELETER_THUNK = abi.DELETER(_deleter)
# The runtime may call these after this module is torn down (objects released late at exit):
# keep the C thunks alive for the whole process.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_SAFE_CALL_THUNK))
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_DELETER_THUNK))


def make_callback(pyfunc: Callable[..., Any]) -> int:
    """Create an ``ffi.Function`` calling ``pyfunc``; return its owned handle."""
    key = _next_key()
    _CALLBACKS[key] = pyfunc
    try:
        if FASTCALL is not None:
            return FASTCALL.make_callback(key)
        return _make_callback_ctypes(key)
    except BaseException:
        _CALLBACKS.pop(key, None)
        raise


def _make_callback_ctypes(key: int) -> int:
    # The ctypes trampolines: an ffi.Function calling _CALLBACKS[key]; its owned handle.
    out = c_void_p()
    rc = LIB.TVMFFIFunctionCreate(key, _SAFE_CALL_THUNK, _DELETER_THUNK, byref(out))
    if rc:
        raise_last_error(rc)
    return out.value  # type: ignore[return-value]  # set (nonzero) when rc == 0


def live_callback_count() -> int:
    """Number of Python callables currently held alive by FFI functions (for tests)."""
    return len(_CALLBACKS)


SLOW_WRITERS.extend(
    [
        (ObjectBase, _w_object),
        (bool, _w_bool),
        (str, _w_str),
        ((bytes, bytearray, memoryview), _w_bytes),
        (numbers.Integral, _w_integral),
        (numbers.Real, _w_real),
        ((list, tuple), _w_list),
        (collections.abc.Mapping, _w_dict),
        (c_void_p, _w_opaque_ptr),
    ]
)


def read_owned_parts(tidx, pad, payload):
    """:func:`read_owned` of the ``TVMFFIAny`` given by its parts (type index, padding word,
    64-bit payload): how the compiled call path hands over the results it does not convert."""
    slot = _AnySlot()
    _pack_any(slot, 0, tidx, pad, payload)
    return read_owned(slot, 0)


def read_view_parts(tidx, pad, payload):
    """:func:`read_view` of the borrowed ``TVMFFIAny`` given by its parts (what the compiled
    callback trampoline hands over for the arguments it does not convert)."""
    slot = _AnySlot()
    _pack_any(slot, 0, tidx, pad, payload)
    return read_view(slot, 0)


def _load_fastcall():
    """The compiled call path (:mod:`kiln._fastcall`), configured for the loaded library, or
    ``None`` where it is not built or ``KILN_PYTHON_CTYPES=1`` asks for the ctypes path."""
    import os

    if os.environ.get("KILN_PYTHON_CTYPES", "") not in ("", "0"):
        return None
    try:
        from . import _fastcall  # type: ignore[attr-defined]  # a C extension, without stubs
    except ImportError:
        return None
    from . import error

    call_addr = ctypes.cast(_RawFunctionCall, c_void_p).value
    _fastcall.configure(
        call_addr,
        ObjectBase.__dict__["_handle"],
        ObjectBase.__dict__["_type_index"],
        call_method,
        error.raise_last_error,
        read_owned_parts,
        OBJECT_FACTORIES,
        _FACTORY,
        WRITERS,
        _w_object,
    )
    _fastcall.configure_callbacks(
        ctypes.cast(LIB.TVMFFIFunctionCreate, c_void_p).value,
        _CALLBACKS,
        read_view_parts,
        write_owned,
        error.set_raised_from_exception,
    )
    return _fastcall


#: :mod:`kiln._fastcall` when calls take the compiled path, else ``None`` (pure ctypes).
FASTCALL = _load_fastcall()
