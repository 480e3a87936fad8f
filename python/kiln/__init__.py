"""Kiln: Python binding of the Kiln runtime, through its TVM-FFI compatible C ABI.

Pure ``ctypes``; the runtime library is found as described in :mod:`kiln._lib`
(``KILN_LIBRARY_PATH``, library paths, then the cargo ``target`` folders).

Main entry points: :func:`get_global_func`, :func:`register_func`,
:func:`list_global_func_names`, :func:`convert`, the value classes (:class:`Function`,
:class:`Array`, :class:`Map`, :class:`Shape`, :class:`Object`, :class:`DataType`,
:class:`Device`), tensors (:class:`Tensor`, :func:`tensor`, :func:`empty`, :func:`from_dlpack`)
and the error mapping (:class:`FFIError`, :func:`register_error`). The tensor compiler:
:mod:`kiln.tir` (the IR), :mod:`kiln.te` (tensor expressions and schedules), :func:`lower`
and :func:`build`. The graph compiler: :mod:`kiln.onnx` (ONNX import, one-call
:func:`kiln.onnx.compile`) and :func:`kiln.graph.build`. Remote sessions, servers and trackers
(wire-compatible with Apache TVM's): :mod:`kiln.rpc`.
"""

from __future__ import annotations

from ._lib import LIB_PATH, LibraryNotFoundError, ffi_version, find_library
from .error import FFIError, register_error
from .core import ObjectBase, convert
from .function import Function
from .container import Array, Map, Shape
from .object import Object, register_object
from .dtype import DataType
from .device import Device, cpu, cuda, device, metal, opencl, rocm, vulkan
from .tensor import Tensor, empty, from_dlpack, tensor
from .registry import (
    get_global_func,
    init_ffi_api,
    list_global_func_names,
    register_func,
    remove_global_func,
)
from .structural import from_json, structural_equal, to_json
from . import registry
from .module import BenchmarkResult, Module, load_module
from . import runtime
from . import graph_executor
from . import tir, te
from . import graph, onnx, tune
from . import rpc
from .driver import build, lower
from .session import InferenceSession, NodeArg, SessionOptions

__version__ = "0.1.0"

__all__ = [
    "InferenceSession",
    "NodeArg",
    "SessionOptions",
    "LIB_PATH",
    "LibraryNotFoundError",
    "ffi_version",
    "find_library",
    "FFIError",
    "register_error",
    "ObjectBase",
    "convert",
    "Function",
    "Array",
    "Map",
    "Shape",
    "Object",
    "register_object",
    "DataType",
    "Device",
    "cpu",
    "cuda",
    "device",
    "metal",
    "opencl",
    "rocm",
    "vulkan",
    "Tensor",
    "empty",
    "from_dlpack",
    "tensor",
    "get_global_func",
    "init_ffi_api",
    "list_global_func_names",
    "register_func",
    "remove_global_func",
    "from_json",
    "structural_equal",
    "to_json",
    "registry",
    "BenchmarkResult",
    "Module",
    "load_module",
    "runtime",
    "graph_executor",
    "tir",
    "te",
    "graph",
    "onnx",
    "tune",
    "rpc",
    "lower",
    "build",
]
