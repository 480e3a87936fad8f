"""``kiln.runtime``: the deployable runtime's Python API, named as in ``tvm.runtime``.

Modules (:func:`load_module`, :class:`Module`, :class:`BenchmarkResult`) come from
:mod:`kiln.module`, devices from :mod:`kiln.device`, tensors from :mod:`kiln.tensor`.
"""

from __future__ import annotations

from ..device import Device, cpu, cuda, device, metal, opencl, rocm, vulkan
from ..module import BenchmarkResult, Module, load_from_bytes, load_module, time_evaluator
from ..tensor import Tensor, empty, from_dlpack, tensor

__all__ = [
    "BenchmarkResult",
    "Device",
    "Module",
    "Tensor",
    "cpu",
    "cuda",
    "device",
    "empty",
    "from_dlpack",
    "load_from_bytes",
    "load_module",
    "metal",
    "opencl",
    "rocm",
    "tensor",
    "time_evaluator",
    "vulkan",
]
