"""``kiln.DataType``: a data type such as ``"float32"``, passed as a ``DLDataType``."""

from __future__ import annotations

import ctypes
from typing import Any

from . import _ctypes_abi as abi
from . import core
from ._lib import LIB
from .error import raise_last_error

_PARSED: dict[str, int] = {}  # text -> packed DLDataType
_PRINTED: dict[int, DataType] = {}  # packed DLDataType -> DataType


class DataType(str):
    """A data type, as a ``str`` subclass (``DataType("float32") == "float32"``).

    The text is parsed once by the runtime (``TVMFFIDataTypeFromString``); FFI functions
    receive it as a ``DLDataType``.  Data types returned by the runtime are printed with
    ``TVMFFIDataTypeToString``.
    """

    __slots__ = ("_packed",)

    _packed: int

    def __new__(cls, value: Any) -> DataType:
        if isinstance(value, DataType) and cls is DataType:
            return value
        text = str(value)
        packed = _PARSED.get(text)
        if packed is None:
            data = text.encode("utf-8")
            out = abi.DLDataType()
            rc = LIB.TVMFFIDataTypeFromString(
                ctypes.byref(abi.TVMFFIByteArray(data, len(data))), ctypes.byref(out)
            )
            if rc:
                raise_last_error(rc)
            packed = out.code | (out.bits << 8) | (out.lanes << 16)
            _PARSED[text] = packed
        obj = str.__new__(cls, text)
        obj._packed = packed
        return obj

    @property
    def type_code(self) -> int:
        """The DLPack type code (0 int, 1 uint, 2 float, 3 handle, 4 bfloat, 5 complex, 6 bool)."""
        return self._packed & 0xFF

    @property
    def bits(self) -> int:
        """The number of bits of one lane."""
        return (self._packed >> 8) & 0xFF

    @property
    def lanes(self) -> int:
        """The number of lanes (1 for scalars)."""
        return self._packed >> 16

    @property
    def itemsize(self) -> int:
        """The size of one element in bytes (rounded up)."""
        return (self.bits * self.lanes + 7) // 8

    def __repr__(self):
        return "kiln.DataType(%s)" % str.__repr__(self)

    def __reduce__(self):
        return (DataType, (str(self),))


def _from_packed(packed: int) -> DataType:
    dtype = _PRINTED.get(packed)
    if dtype is None:
        value = abi.DLDataType(packed & 0xFF, (packed >> 8) & 0xFF, packed >> 16)
        slot = core._AnySlot()
        rc = LIB.TVMFFIDataTypeToString(ctypes.byref(value), slot)
        if rc:
            raise_last_error(rc)
        text = core.read_owned(slot, 0)
        dtype = str.__new__(DataType, text)
        dtype._packed = packed
        _PRINTED[packed] = dtype
        _PARSED.setdefault(text, packed)
    return dtype


core.DTYPE_FROM_PACKED[0] = _from_packed
core.add_writer(DataType, core._w_dtype)
