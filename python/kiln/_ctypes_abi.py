"""ctypes mirror of the TVM-FFI C ABI (``tvm/ffi/c_api.h``).

Only what the Python binding touches is declared here: the 16-byte ``TVMFFIAny``
value, the 24-byte object header, the byte-array / error / type-info cells and
the callback signatures.  Every layout is the x86-64 / aarch64 one (LP64,
little-endian).
"""

from __future__ import annotations

from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    Union,
    c_char,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)

# ---------------------------------------------------------------------------
# Type indices (TVMFFITypeIndex)
# ---------------------------------------------------------------------------
#: ``None``
K_NONE = 0
#: ``int64_t``
K_INT = 1
#: ``bool``
K_BOOL = 2
#: ``double``
K_FLOAT = 3
#: ``void*``
K_OPAQUE_PTR = 4
#: ``DLDataType``
K_DATA_TYPE = 5
#: ``DLDevice``
K_DEVICE = 6
#: ``DLTensor*``
K_DLTENSOR_PTR = 7
#: borrowed ``const char*`` (views only)
K_RAW_STR = 8
#: borrowed ``TVMFFIByteArray*`` (views only)
K_BYTE_ARRAY_PTR = 9
#: ``TVMFFIObject**`` moved-from reference (views only)
K_OBJECT_RVALUE_REF = 10
#: string of at most 7 bytes stored inline, length in the padding word
K_SMALL_STR = 11
#: bytes of at most 7 bytes stored inline, length in the padding word
K_SMALL_BYTES = 12
#: first object type index; also ``ffi.Object``
K_OBJECT = 64
#: ``ffi.String``
K_STR = 65
#: ``ffi.Bytes``
K_BYTES = 66
#: ``ffi.Error``
K_ERROR = 67
#: ``ffi.Function``
K_FUNCTION = 68
#: ``ffi.Shape``
K_SHAPE = 69
#: ``ffi.Tensor``
K_TENSOR = 70
#: ``ffi.Array``
K_ARRAY = 71
#: ``ffi.Map``
K_MAP = 72
#: ``ffi.Module``
K_MODULE = 73
#: first type index allocated at run time
K_DYN_OBJECT_BEGIN = 128

#: size of ``TVMFFIObject`` (the header every object starts with)
OBJECT_HEADER_SIZE = 24
#: size of ``TVMFFIAny``
ANY_SIZE = 16
#: largest string / bytes length stored inline in a ``TVMFFIAny``
SMALL_STR_MAX = 7


class DLDataType(Structure):
    """``DLDataType``: type code, bit width and lane count (4 bytes)."""

    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLDevice(Structure):
    """``DLDevice``: device type and device id (8 bytes)."""

    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class TVMFFIObject(Structure):
    """``TVMFFIObject``: the 24-byte header at the start of every object."""

    _fields_ = [
        ("combined_ref_count", c_uint64),
        ("type_index", c_int32),
        ("padding", c_uint32),
        ("deleter", c_void_p),
    ]


class _AnyValue(Union):
    _fields_ = [
        ("v_int64", c_int64),
        ("v_float64", c_double),
        ("v_ptr", c_void_p),
        ("v_dtype", DLDataType),
        ("v_device", DLDevice),
        ("v_bytes", c_char * 8),
        ("v_uint64", c_uint64),
    ]


class TVMFFIAny(Structure):
    """``TVMFFIAny``: type index, padding / small-string length, 8-byte payload."""

    _anonymous_ = ("v",)
    _fields_ = [("type_index", c_int32), ("small_str_len", c_uint32), ("v", _AnyValue)]


class TVMFFIByteArray(Structure):
    """``TVMFFIByteArray``: ``{const char* data; size_t size}``."""

    _fields_ = [("data", c_char_p), ("size", c_size_t)]


class TVMFFIVersion(Structure):
    """``TVMFFIVersion``: major, minor, patch."""

    _fields_ = [("major", c_uint32), ("minor", c_uint32), ("patch", c_uint32)]


class _RawByteArray(Structure):
    # Same layout as TVMFFIByteArray but with an untyped pointer, for reading.
    _fields_ = [("data", c_void_p), ("size", c_size_t)]


class TVMFFIErrorCell(Structure):
    """``TVMFFIErrorCell``: what follows the header of an ``ffi.Error``."""

    _fields_ = [
        ("kind", _RawByteArray),
        ("message", _RawByteArray),
        ("backtrace", _RawByteArray),
        ("update_backtrace", c_void_p),
        ("cause_chain", c_void_p),
        ("extra_context", c_void_p),
    ]


class TVMFFIFieldInfo(Structure):
    """``TVMFFIFieldInfo``: one reflected field of a type (120 bytes)."""

    _fields_ = [
        ("name", _RawByteArray),
        ("doc", _RawByteArray),
        ("metadata", _RawByteArray),
        ("flags", c_int64),
        ("size", c_int64),
        ("alignment", c_int64),
        ("offset", c_int64),
        ("getter", c_void_p),
        ("setter", c_void_p),
        ("default_value_or_factory", TVMFFIAny),
        ("field_static_type_index", c_int32),
    ]


class TVMFFITypeInfo(Structure):
    """``TVMFFITypeInfo``: runtime type information (key, ancestors, reflected fields)."""

    _fields_ = [
        ("type_index", c_int32),
        ("type_depth", c_int32),
        ("type_key", _RawByteArray),
        ("type_ancestors", POINTER(c_void_p)),
        ("type_key_hash", c_uint64),
        ("num_fields", c_int32),
        ("num_methods", c_int32),
        ("fields", POINTER(TVMFFIFieldInfo)),
        ("methods", c_void_p),
        ("metadata", c_void_p),
    ]


#: ``int (*)(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result)``
SAFE_CALL = CFUNCTYPE(c_int, c_void_p, c_void_p, c_int32, c_void_p)
#: ``int (*)(void* field, TVMFFIAny* result)``
FIELD_GETTER = CFUNCTYPE(c_int, c_void_p, c_void_p)
#: ``void (*)(void* self)``
DELETER = CFUNCTYPE(None, c_void_p)
