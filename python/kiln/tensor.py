"""``kiln.Tensor``: ``ffi.Tensor`` objects (type index 70), with numpy and DLPack interop.

Make tensors with :func:`tensor` (copy of an array), :func:`empty` or :func:`from_dlpack`
(zero-copy view of numpy >= 1.22 arrays, or anything with ``__dlpack__``); tensors returned
by the runtime are :class:`Tensor` objects too.  ``np.from_dlpack(t)`` is zero-copy through
:meth:`Tensor.__dlpack__`.

Passing a numpy array (or another ``__dlpack__`` object) where a tensor is expected works: a
writeable, C-contiguous, 64-byte aligned array of a DLPack dtype is passed as a zero-copy view;
any other array is copied into an aligned tensor for the call and, when writeable, the result
is copied back afterwards (compiled code assumes 64-byte alignment and compact strides).
Other ``__dlpack__`` objects (PyTorch, ...) are always passed zero-copy, as TVM-FFI does.
DLPack's read-only flag is not enforced on tensors made by :func:`from_dlpack`.

A ``DLTensor*`` argument received by a Python callback becomes a :class:`Tensor` view that
is valid only during the call.

``bfloat16``, float8, float4, int4 and int2 tensors read as ``ml_dtypes`` arrays when
``ml_dtypes`` is installed; without it bfloat16 reads as raw ``uint16`` bits (and accepts
either) and the others cannot be read.  Vector dtypes (``float32x4``) read as arrays
with a trailing dimension of the lane count.
"""

from __future__ import annotations

import abc
import ctypes
import struct
from ctypes import byref, c_char_p, c_int, c_void_p
from typing import TYPE_CHECKING, Any, Callable, Sequence

from . import _ctypes_abi as abi
from . import core
from ._lib import LIB
from .core import ObjectBase, call_global
from .device import Device, cpu
from .dtype import DataType
from .error import raise_last_error

if TYPE_CHECKING:
    import numpy as _np

_DLTENSOR = struct.Struct("<QiiiBBHQQQ")  # data, device, ndim, dtype, shape, strides, byte_offset
_HEADER = abi.OBJECT_HEADER_SIZE
_ALIGNMENT = 64


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - numpy is a test dependency
        raise ImportError("this needs numpy (pip install numpy)") from exc
    return numpy


# Kiln dtypes that numpy holds only through ml_dtypes, by (DLPack code, bits); the names are
# the same in Kiln and ml_dtypes. All but bfloat16 take one byte per element.
_ML_DTYPES = {
    (4, 16): "bfloat16",
    (10, 8): "float8_e4m3fn",
    (11, 8): "float8_e4m3fnuz",
    (12, 8): "float8_e5m2",
    (13, 8): "float8_e5m2fnuz",
    (14, 8): "float8_e8m0fnu",
    (17, 4): "float4_e2m1fn",
    (0, 4): "int4",
    (1, 4): "uint4",
    (0, 2): "int2",
    (1, 2): "uint2",
}
_ML_NAMES = frozenset(_ML_DTYPES.values())


def _ml_dtype(name):
    try:
        import ml_dtypes
    except ImportError:
        return None
    return _numpy().dtype(getattr(ml_dtypes, name))


def _bfloat16_dtype():
    return _ml_dtype("bfloat16")


_NP_KINDS = {0: "int", 1: "uint", 2: "float", 5: "complex"}


def numpy_dtype(dtype: str) -> tuple[_np.dtype[Any], int]:
    """Return ``(numpy dtype, lanes)`` holding elements of the Kiln dtype ``dtype``.

    ``bfloat16``, the float8 and float4 types, ``int4``/``uint4``/``int2``/``uint2`` map to
    their ``ml_dtypes`` types (one element per byte, as Kiln stores them); without ml_dtypes,
    ``bfloat16`` reads as ``uint16`` (raw bits) and the others raise ``TypeError``, as do
    dtypes numpy cannot hold (``handle``, ...).
    """
    np = _numpy()
    dtype = DataType(dtype)
    code, bits, lanes = dtype.type_code, dtype.bits, dtype.lanes
    if code == 6 and bits == 8:
        return np.dtype(np.bool_), lanes
    ml_name = _ML_DTYPES.get((code, bits))
    if ml_name is not None:
        ml = _bfloat16_dtype() if ml_name == "bfloat16" else _ml_dtype(ml_name)
        if ml is not None:
            return ml, lanes
        if ml_name == "bfloat16":
            return np.dtype(np.uint16), lanes
        raise TypeError("%s arrays need ml_dtypes (pip install ml_dtypes)" % dtype)
    name = _NP_KINDS.get(code)
    if name is not None and bits in (8, 16, 32, 64, 128) and not (name == "complex" and bits < 64):
        try:
            return np.dtype("%s%d" % (name, bits)), lanes
        except TypeError:
            pass
    raise TypeError("no numpy dtype holds elements of %s" % dtype)


def kiln_dtype(np_dtype: Any) -> str:
    """Return the Kiln dtype name of a numpy dtype (``"float32"``, ``"bool"``, ``"bfloat16"``,
    ``"float8_e4m3fn"``, ``"int4"``...)."""
    np = _numpy()
    np_dtype = np.dtype(np_dtype)
    if np_dtype.name in _ML_NAMES:
        return np_dtype.name
    bits = np_dtype.itemsize * 8
    kind = np_dtype.kind
    if kind == "b":
        return "bool"
    if kind in "iufc":
        return {"i": "int", "u": "uint", "f": "float", "c": "complex"}[kind] + str(bits)
    raise TypeError("numpy dtype %s has no Kiln counterpart" % np_dtype)


# ---------------------------------------------------------------------------
# DLPack capsules (through the Python C API, with private prototypes)
# ---------------------------------------------------------------------------
def _pyapi(name, restype, *argtypes):
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_Capsule_New = _pyapi("PyCapsule_New", ctypes.py_object, c_void_p, c_char_p, c_void_p)
_Capsule_GetName = _pyapi("PyCapsule_GetName", c_char_p, ctypes.py_object)
_Capsule_GetPointer = _pyapi("PyCapsule_GetPointer", c_void_p, ctypes.py_object, c_char_p)
_Capsule_SetName = _pyapi("PyCapsule_SetName", c_int, ctypes.py_object, c_char_p)
_Capsule_IsValidRaw = _pyapi("PyCapsule_IsValid", c_int, c_void_p, c_char_p)
_Capsule_GetPointerRaw = _pyapi("PyCapsule_GetPointer", c_void_p, c_void_p, c_char_p)

# Capsule names: module constants, since a capsule keeps a pointer to its name.
_NAME_LEGACY = b"dltensor"
_NAME_VERSIONED = b"dltensor_versioned"
_NAME_USED_LEGACY = b"used_dltensor"
_NAME_USED_VERSIONED = b"used_dltensor_versioned"
# Offset of the deleter in DLManagedTensor / DLManagedTensorVersioned.
_DELETER_OFFSET = {_NAME_LEGACY: 56, _NAME_VERSIONED: 16}
_MANAGED_DELETER = ctypes.CFUNCTYPE(None, c_void_p)

_ToDLPack = LIB.TVMFFITensorToDLPack
_ToDLPack.argtypes, _ToDLPack.restype = [c_void_p, ctypes.POINTER(c_void_p)], c_int
_ToDLPackVersioned = LIB.TVMFFITensorToDLPackVersioned
_ToDLPackVersioned.argtypes, _ToDLPackVersioned.restype = [c_void_p, ctypes.POINTER(c_void_p)], c_int
_FromDLPack = LIB.TVMFFITensorFromDLPack
_FromDLPack.argtypes, _FromDLPack.restype = [c_void_p, c_int, c_int, ctypes.POINTER(c_void_p)], c_int
_FromDLPackVersioned = LIB.TVMFFITensorFromDLPackVersioned
_FromDLPackVersioned.argtypes = [c_void_p, c_int, c_int, ctypes.POINTER(c_void_p)]
_FromDLPackVersioned.restype = c_int


def _capsule_destructor(capsule):
    # Runs when a capsule we produced is freed; an unconsumed tensor is released here.
    try:
        for name, offset in _DELETER_OFFSET.items():
            if _Capsule_IsValidRaw(capsule, name):
                managed = _Capsule_GetPointerRaw(capsule, name)
                deleter = c_void_p.from_address(managed + offset).value
                if deleter:
                    _MANAGED_DELETER(deleter)(managed)
                return
    except BaseException:  # noqa: BLE001, S110 - never let an exception escape into C
        pass


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, c_void_p)(_capsule_destructor)
# Capsules may die after this module is torn down: keep the thunk for the whole process.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_CAPSULE_DESTRUCTOR))
_CAPSULE_DESTRUCTOR_ADDR = ctypes.cast(_CAPSULE_DESTRUCTOR, c_void_p).value


def _tensor_from_capsule(capsule, require_alignment=0, require_contiguous=False):
    name = _Capsule_GetName(capsule)
    if name == _NAME_VERSIONED:
        fn, used = _FromDLPackVersioned, _NAME_USED_VERSIONED
    elif name == _NAME_LEGACY:
        fn, used = _FromDLPack, _NAME_USED_LEGACY
    else:
        raise ValueError("expected a DLPack capsule, got one named %r (already consumed?)" % name)
    managed = _Capsule_GetPointer(capsule, name)
    out = c_void_p()
    rc = fn(managed, int(require_alignment), 1 if require_contiguous else 0, byref(out))
    if rc:
        raise_last_error(rc)  # the capsule still owns the tensor
    _Capsule_SetName(capsule, used)
    return _adopt_tensor(out.value, abi.K_TENSOR)  # type: ignore[arg-type]  # set when rc == 0


def _is_numpy_array(x):
    np = __import__("sys").modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def from_dlpack(x: Any, require_alignment: int = 0, require_contiguous: bool = False) -> Tensor:
    """Return a :class:`Tensor` sharing the memory of ``x`` (no copy).

    ``x`` is an object with ``__dlpack__`` (numpy >= 1.22, PyTorch, ...) or a DLPack
    capsule.  The tensor keeps ``x``'s memory alive.  ``require_alignment`` (bytes) and
    ``require_contiguous`` make the import fail with ``ValueError`` instead of giving a
    tensor compiled code cannot take.  numpy arrays of ``ml_dtypes`` types (bfloat16, float8,
    float4, int4, int2) are viewed through their raw bits, still without copying.
    """
    if isinstance(x, Tensor):
        return x
    if _is_numpy_array(x) and x.dtype.name in _ML_NAMES:
        raw = from_dlpack(x.view("uint%d" % (x.dtype.itemsize * 8)), require_alignment, require_contiguous)
        return raw.view(raw.shape, x.dtype.name)
    if hasattr(x, "__dlpack__"):
        try:
            capsule = x.__dlpack__(max_version=(1, 0))
        except TypeError:  # producers without the keyword (DLPack < 1.0)
            capsule = x.__dlpack__()
    elif type(x).__name__ == "PyCapsule":
        capsule = x
    else:
        raise TypeError(
            "from_dlpack expects an object with __dlpack__ or a DLPack capsule, got %s" % type(x).__name__
        )
    return _tensor_from_capsule(capsule, require_alignment, require_contiguous)


# ---------------------------------------------------------------------------
# Tensor
# ---------------------------------------------------------------------------
class Tensor(ObjectBase):
    """An n-dimensional array on a device (``ffi.Tensor``).

    Made by :func:`tensor`, :func:`empty`, :func:`from_dlpack`, or returned by the runtime.
    Read its metadata with :attr:`shape`, :attr:`dtype`, :attr:`device`, :attr:`strides`;
    move data with :meth:`numpy`, :meth:`copyfrom` and :meth:`copyto`.
    """

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("make tensors with kiln.tensor(array), kiln.empty(shape) or kiln.from_dlpack(x)")

    def _dltensor(self):
        if not self._handle:
            raise ValueError("the tensor has been released")
        return _DLTENSOR.unpack(ctypes.string_at(self._handle + _HEADER, _DLTENSOR.size))

    @property
    def shape(self) -> tuple[int, ...]:
        """The dimensions, as a tuple of ints."""
        fields = self._dltensor()
        ndim, shape_ptr = fields[3], fields[7]
        if not ndim:
            return ()
        return struct.unpack("<%dq" % ndim, ctypes.string_at(shape_ptr, 8 * ndim))

    @property
    def strides(self) -> tuple[int, ...] | None:
        """The strides in elements, as a tuple (``None`` means compact)."""
        fields = self._dltensor()
        ndim, strides_ptr = fields[3], fields[8]
        if not strides_ptr or not ndim:
            return None if not strides_ptr else ()
        return struct.unpack("<%dq" % ndim, ctypes.string_at(strides_ptr, 8 * ndim))

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return self._dltensor()[3]

    @property
    def dtype(self) -> DataType:
        """The element type, as a :class:`kiln.DataType` (a ``str``)."""
        fields = self._dltensor()
        return core.DTYPE_FROM_PACKED[0](fields[4] | (fields[5] << 8) | (fields[6] << 16))

    @property
    def device(self) -> Device:
        """The :class:`kiln.Device` holding the data."""
        fields = self._dltensor()
        return Device(fields[1], fields[2])

    @property
    def byte_offset(self) -> int:
        """Bytes between :attr:`data_ptr` and the first element."""
        return self._dltensor()[9]

    @property
    def data_ptr(self) -> int:
        """The raw data pointer (an int; a device handle on non-CPU devices)."""
        return self._dltensor()[0]

    @property
    def size(self) -> int:
        """The number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """The number of bytes the elements take, stored compactly."""
        dtype = self.dtype
        # Sub-byte types take one byte per element (see kiln_ffi::dtype).
        return self.size * ((dtype.bits * dtype.lanes + 7) // 8)

    @property
    def is_contiguous(self) -> bool:
        """Whether the elements are stored compactly in row-major order."""
        return call_global("runtime.TensorIsContiguous", self)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(device_type, device_id)`` of the data (DLPack protocol)."""
        fields = self._dltensor()
        return (fields[1], fields[2])

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Export the tensor as a DLPack capsule sharing its memory (DLPack protocol).

        A versioned (DLPack 1.x) capsule when ``max_version`` allows it, else a legacy one.
        ``copy=True`` exports a fresh copy.
        """
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("cannot export a tensor on %s to device %r" % (self.device, dl_device))
        source = self
        if copy:
            source = empty(self.shape, self.dtype, self.device)
            source.copyfrom(self)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        out = c_void_p()
        rc = (_ToDLPackVersioned if versioned else _ToDLPack)(source._handle, byref(out))
        if rc:
            raise_last_error(rc)
        name = _NAME_VERSIONED if versioned else _NAME_LEGACY
        return _Capsule_New(out.value, name, _CAPSULE_DESTRUCTOR_ADDR)

    def _raw_bytes_view(self, array):
        # A Kiln view, with this tensor's shape and dtype, of a C-contiguous numpy array
        # holding the same number of bytes (so any dtype works, bfloat16 included).
        np = _numpy()
        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        return call_global("runtime.TensorView", from_dlpack(raw), list(self.shape), self.dtype)

    def numpy(self) -> _np.ndarray:
        """Return a numpy copy of the data (from any device, any strides)."""
        np = _numpy()
        np_dtype, lanes = numpy_dtype(self.dtype)
        dt = DataType(self.dtype)
        native = dt.type_code in (0, 1, 2, 6) and (dt.type_code, dt.bits) not in _ML_DTYPES
        if native and lanes == 1 and self.device.device_type == 1:
            # A CPU tensor of a dtype numpy has natively: one copy out of a zero-copy view.
            return np.from_dlpack(self).copy()
        shape = self.shape + ((lanes,) if lanes > 1 else ())
        out = np.empty(shape, dtype=np_dtype)
        if out.size:
            call_global("runtime.TensorCopyFromTo", self, self._raw_bytes_view(out))
        return out

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> _np.ndarray:
        if copy is False:
            raise ValueError("kiln.Tensor converts to numpy by copying; use np.from_dlpack(t)")
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    def copyfrom(self, source: Any) -> Tensor:
        """Copy ``source`` (a :class:`Tensor`, or anything numpy can turn into an array of
        this tensor's shape) into this tensor; return ``self``.

        Arrays are converted to this tensor's dtype; a different shape is a ``ValueError``.
        """
        if isinstance(source, Tensor):
            call_global("runtime.TensorCopyFromTo", source, self)
            return self
        np_dtype, lanes = numpy_dtype(self.dtype)
        expected = self.shape + ((lanes,) if lanes > 1 else ())
        array = _as_dtype(source, np_dtype, self.dtype)
        if array.shape != expected:
            raise ValueError(
                "copyfrom: array shape %s does not match the tensor shape %s (dtype %s)"
                % (array.shape, expected, self.dtype)
            )
        if array.size:
            call_global("runtime.TensorCopyFromTo", self._raw_bytes_view(array), self)
        return self

    def copyto(self, target: Tensor | Device) -> Tensor:
        """Copy into ``target``: a :class:`Tensor` (returned), or a :class:`kiln.Device`
        (a new tensor there is returned)."""
        if isinstance(target, Tensor):
            call_global("runtime.TensorCopyFromTo", self, target)
            return target
        if isinstance(target, Device):
            return call_global("runtime.TensorToDevice", self, target)
        raise TypeError("copyto expects a kiln.Tensor or a kiln.Device, got %s" % type(target).__name__)

    def view(self, shape: int | Sequence[int], dtype: str | None = None) -> Tensor:
        """A tensor sharing this one's memory with another shape (and dtype)."""
        shape = [shape] if isinstance(shape, int) else list(shape)
        return call_global("runtime.TensorView", self, shape, DataType(dtype) if dtype else None)

    def __repr__(self):
        if not self._handle:
            return "kiln.Tensor(<released>)"
        return "kiln.Tensor(shape=%s, dtype=%s, device=%s)" % (self.shape, self.dtype, self.device)


def _as_dtype(source, np_dtype, dtype):
    np = _numpy()
    if dtype == "bfloat16" and np_dtype == np.uint16:
        # No ml_dtypes: raw uint16 bits pass through, floats are rounded to bfloat16 bits.
        array = np.asarray(source)
        if array.dtype == np.uint16:
            return array
        bits = array.astype(np.float32).view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.asarray(source, dtype=np_dtype)


_new = object.__new__


def _adopt_tensor(handle: int, tidx: int) -> Tensor:
    t: Tensor = _new(Tensor)
    t._handle, t._type_index = handle, tidx
    return t


def empty(shape: int | Sequence[int], dtype: str = "float32", device: Device | None = None) -> Tensor:
    """Allocate an uninitialized compact tensor (64-byte aligned) on ``device`` (CPU)."""
    try:
        dims = [shape] if isinstance(shape, int) else [int(d) for d in shape]
    except (TypeError, ValueError) as exc:
        raise type(exc)("empty: shape %r must be an int or a sequence of ints (%s)" % (shape, exc)) from None
    return call_global("runtime.TensorEmpty", dims, DataType(dtype), device or cpu())


def tensor(array: Any, device: Device | None = None, dtype: str | None = None) -> Tensor:
    """Copy ``array`` (numpy array or anything ``numpy.asarray`` accepts, or a Tensor) into a
    new tensor on ``device`` (CPU); ``dtype`` converts first."""
    if isinstance(array, Tensor):
        return array.copyto(device or cpu()) if dtype is None else tensor(array.numpy(), device, dtype)
    np = _numpy()
    if dtype is not None:
        np_dtype = numpy_dtype(dtype)[0]
        array = _as_dtype(array, np_dtype, DataType(dtype))
    else:
        array = np.asarray(array)
        dtype = kiln_dtype(array.dtype)
    return empty(array.shape, dtype, device).copyfrom(array)


# ---------------------------------------------------------------------------
# Arguments: numpy arrays and DLPack objects where a tensor is expected
# ---------------------------------------------------------------------------
class _DLPackLike(abc.ABC):
    """Matches any class with ``__dlpack__`` (used to pick the argument writer)."""

    @classmethod
    def __subclasshook__(cls, other):
        return True if hasattr(other, "__dlpack__") else NotImplemented


def _zero_copy_ok(array):
    # Read-only arrays are copied too, so compiled code never writes into read-only memory.
    flags = array.flags
    if not (flags.c_contiguous and flags.writeable and array.dtype.isnative):
        return False
    if array.dtype.kind not in "biufc":
        return False
    return array.__array_interface__["data"][0] % _ALIGNMENT == 0


def _copy_back(t: Tensor, array: Any) -> Callable[[], None]:
    def run():  # not annotated: made for every argument copied through a temporary
        array[...] = t.numpy().reshape(array.shape)

    return run


def _w_dlpack(buf, off, value, temps):
    if _is_numpy_array(value) and not _zero_copy_ok(value):
        t = tensor(value)
        if value.flags.writeable:
            core._pack_any(buf, off, abi.K_TENSOR, 0, t._handle)
            temps.append(_copy_back(t, value))  # keeps t alive until it runs, after the call
            return
    else:
        t = from_dlpack(value)
    handle, t._handle = t._handle, None  # the reference moves to temps, released after the call
    temps.append(handle)
    core._pack_any(buf, off, abi.K_TENSOR, 0, handle)


class _DLTensorPtr:
    __slots__ = ("address",)

    def __init__(self, address):
        self.address = address


def _w_dltensor_ptr(buf, off, value, temps):
    core._pack_any(buf, off, abi.K_DLTENSOR_PTR, 0, value.address)


_HAS_VIEW_GLOBAL: list[bool] = []


def _r_dltensor_ptr(buf, off, pad, iv):
    if not iv:
        return None
    if not _HAS_VIEW_GLOBAL:
        handle = core.get_global_handle("runtime.TensorFromDLTensor")
        if handle:
            core._DecRef(handle)
        _HAS_VIEW_GLOBAL.append(bool(handle))
    if not _HAS_VIEW_GLOBAL[0]:  # a library without Kiln's globals: the raw pointer
        return c_void_p(iv)
    return call_global("runtime.TensorFromDLTensor", _DLTensorPtr(iv))


core.OBJECT_FACTORIES[abi.K_TENSOR] = _adopt_tensor
core.add_writer(Tensor, core._w_object)
core.add_writer(_DLTensorPtr, _w_dltensor_ptr)
core.SLOW_WRITERS.append((_DLPackLike, _w_dlpack))
core._POD_READERS[abi.K_DLTENSOR_PTR] = _r_dltensor_ptr
