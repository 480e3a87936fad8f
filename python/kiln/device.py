"""``kiln.Device``: a DLPack device (``DLDevice``), e.g. ``kiln.cpu(0)``."""

from __future__ import annotations

from typing import Any

from . import core

#: DLPack device type codes by name
DEVICE_TYPES = {
    "cpu": 1,
    "cuda": 2,
    "cuda_host": 3,
    "opencl": 4,
    "vulkan": 7,
    "metal": 8,
    "vpi": 9,
    "rocm": 10,
    "rocm_host": 11,
    "ext_dev": 12,
    "cuda_managed": 13,
    "oneapi": 14,
    "webgpu": 15,
    "hexagon": 16,
}
_NAMES = {code: name for name, code in DEVICE_TYPES.items()}


class Device:
    """A device: DLPack device type code and device id, passed to FFI as ``DLDevice``.

    ``Device(1, 0)``, ``Device("cuda", 1)`` or ``Device("cuda:1")``; equal devices compare
    and hash equal.  Attributes (:attr:`exist`, :attr:`device_name`, ...) are read through the
    runtime's device API (globals ``runtime.DeviceExists`` / ``runtime.DeviceGetAttr``).
    """

    __slots__ = ("device_type", "device_id")

    device_type: int
    device_id: int

    def __init__(self, device_type: int | str, device_id: int | None = None) -> None:
        if isinstance(device_type, str):
            name, _, index = device_type.partition(":")
            if name not in DEVICE_TYPES:
                raise ValueError("unknown device type %r" % name)
            if index:
                if device_id is not None:
                    raise ValueError("device id given twice")
                device_id = int(index)
            device_type = DEVICE_TYPES[name]
        self.device_type = int(device_type)
        self.device_id = int(device_id or 0)

    @property
    def type_name(self) -> str:
        """The name of the device type (e.g. ``"cuda"``)."""
        return _NAMES.get(self.device_type, "device_type_%d" % self.device_type)

    def _attr(self, kind: int) -> Any:
        return core.call_global("runtime.DeviceGetAttr", self, kind)

    @property
    def exist(self) -> bool:
        """Whether the device exists (its device API is in the library and reports it)."""
        return bool(core.call_global("runtime.DeviceExists", self))

    @property
    def max_threads_per_block(self) -> int | None:
        """The largest number of threads in a block (GPUs), or ``None``."""
        return self._attr(1)

    @property
    def warp_size(self) -> int | None:
        """The warp / wavefront / subgroup size, or ``None``."""
        return self._attr(2)

    @property
    def compute_version(self) -> str | None:
        """The compute capability as text (``"8.6"``), or ``None``."""
        return self._attr(4)

    @property
    def device_name(self) -> str | None:
        """The device's name, or ``None``."""
        return self._attr(5)

    @property
    def multi_processor_count(self) -> int | None:
        """The number of multiprocessors (cores on the CPU), or ``None``."""
        return self._attr(7)

    @property
    def total_global_memory(self) -> int | None:
        """Total memory in bytes, or ``None``."""
        return self._attr(14)

    @property
    def available_global_memory(self) -> int | None:
        """Available memory in bytes, or ``None``."""
        return self._attr(15)

    def sync(self, stream: int | None = None) -> None:
        """Wait until the work queued on ``stream`` (a raw stream handle) is done; by default
        on this thread's current stream of the device (see :meth:`set_raw_stream`)."""
        core.call_global("runtime.Device_StreamSync", self, _void_p(stream or 0))

    def create_raw_stream(self) -> int:
        """A new stream of the device (an OpenCL command queue, ...), as a raw handle; the
        default stream (0) on devices without streams."""
        return _handle_value(core.call_global("runtime.Device_StreamCreate", self))

    def free_raw_stream(self, stream: int) -> None:
        """Free a stream from :meth:`create_raw_stream` (no longer current on this thread)."""
        core.call_global("runtime.Device_StreamFree", self, _void_p(stream))

    def set_raw_stream(self, stream: int) -> None:
        """Make ``stream`` this thread's current stream of the device (0: the default stream):
        kernel launches and copies for the device go to it."""
        core.call_global("runtime.Device_SetStream", self, _void_p(stream))

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(device_type, device_id)``, as DLPack producers report it."""
        return (self.device_type, self.device_id)

    def __eq__(self, other):
        return (
            isinstance(other, Device)
            and self.device_type == other.device_type
            and self.device_id == other.device_id
        )

    def __hash__(self):
        return hash((Device, self.device_type, self.device_id))

    def __repr__(self):
        return "kiln.Device(%s, %d)" % (self.type_name, self.device_id)

    def __str__(self):
        return "%s:%d" % (self.type_name, self.device_id)

    def __reduce__(self):
        return (Device, (self.device_type, self.device_id))


def device(device_type: int | str, device_id: int | None = None) -> Device:
    """Return a :class:`Device`, e.g. ``device("cuda", 1)`` or ``device("cuda:1")``."""
    return Device(device_type, device_id)


def cpu(device_id: int = 0) -> Device:
    """The CPU device ``device_id``."""
    return Device(1, device_id)


def cuda(device_id: int = 0) -> Device:
    """The CUDA GPU ``device_id``."""
    return Device(2, device_id)


def rocm(device_id: int = 0) -> Device:
    """The ROCm GPU ``device_id``."""
    return Device(10, device_id)


def metal(device_id: int = 0) -> Device:
    """The Metal GPU ``device_id``."""
    return Device(8, device_id)


def vulkan(device_id: int = 0) -> Device:
    """The Vulkan device ``device_id``."""
    return Device(7, device_id)


def opencl(device_id: int = 0) -> Device:
    """The OpenCL device ``device_id``."""
    return Device(4, device_id)


core.DEVICE_CLASS[0] = Device
core.add_writer(Device, core._w_device)


def _void_p(handle: int) -> Any:
    """A raw handle as the FFI's opaque pointer."""
    import ctypes

    return ctypes.c_void_p(handle or None)


def _handle_value(value: Any) -> int:
    """The integer value of an opaque pointer returned by the FFI (``None`` is 0)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    return int(getattr(value, "value", None) or 0)
