"""numpy arrays as ``DLTensor*`` arguments for Kiln calls, for the interop tests.

:class:`DLArg` wraps a 64-byte-aligned numpy array (generated code assumes that alignment)
in a ``DLTensor`` and passes it to Kiln functions as type index 7 (``DLTensor*``), sharing the
array's memory: what the kernel writes shows up in ``arg.array``. :func:`view` turns a
``DLTensor*`` received in a callback into a numpy view of the same memory.
"""

import ctypes

import numpy as np

from kiln import core

K_DLTENSOR_PTR = 7
ALIGNMENT = 64

_DTYPE_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


def aligned_empty(shape, dtype):
    """An uninitialised array whose data starts on a 64-byte boundary."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def aligned(array):
    """A 64-byte-aligned copy of ``array``."""
    out = aligned_empty(array.shape, array.dtype)
    out[...] = array
    return out


class DLArg:
    """A numpy array passed as ``DLTensor*`` (kept alive, and readable, through ``array``)."""

    def __init__(self, array):
        if array.ctypes.data % ALIGNMENT:
            array = aligned(array)
        self.array = array
        self._shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        self.dl = DLTensor()
        self.dl.data = array.ctypes.data
        self.dl.device = DLDevice(1, 0)
        self.dl.ndim = array.ndim
        self.dl.dtype = DLDataType(_DTYPE_CODES[array.dtype.kind], array.dtype.itemsize * 8, 1)
        self.dl.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        self.dl.strides = None
        self.dl.byte_offset = 0

    @property
    def address(self):
        return ctypes.addressof(self.dl)


def _write_dlarg(buf, off, value, temps):
    core._pack_any(buf, off, K_DLTENSOR_PTR, 0, value.address)


core.add_writer(DLArg, _write_dlarg)

_NP_TYPES = {(0, 32): np.int32, (0, 64): np.int64, (1, 8): np.uint8, (2, 32): np.float32, (2, 64): np.float64}


def view(ptr):
    """A numpy view of the memory a ``DLTensor*`` (int or ``c_void_p``) describes."""
    address = ptr.value if isinstance(ptr, ctypes.c_void_p) else int(ptr)
    dl = DLTensor.from_address(address)
    dtype = _NP_TYPES[(dl.dtype.code, dl.dtype.bits)]
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    count = int(np.prod(shape, dtype=np.int64))
    buf = (ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(dl.data + dl.byte_offset)
    return np.frombuffer(buf, dtype=dtype).reshape(shape)
