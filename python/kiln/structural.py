"""Structural comparison and JSON serialization of runtime values.

Backed by the Kiln globals ``kiln.ffi.StructuralEqual``, ``kiln.ffi.ToJSON`` and
``kiln.ffi.FromJSON``; on TVM-FFI's library the equivalents ``ffi.StructuralEqual``,
``ffi.ToJSONGraphString`` and ``ffi.FromJSONGraphString`` are used instead.
"""

from __future__ import annotations

from typing import Any

from .object import optional_global


def _require(*names: str) -> Any:
    func = optional_global(*names)
    if func is None:
        raise NotImplementedError(
            "the runtime library provides none of the global functions %s" % ", ".join(names)
        )
    return func


def structural_equal(lhs: Any, rhs: Any) -> bool:
    """True when ``lhs`` and ``rhs`` have the same structure and contents."""
    func = optional_global("kiln.ffi.StructuralEqual")
    if func is not None:
        return bool(func(lhs, rhs))
    return bool(_require("ffi.StructuralEqual")(lhs, rhs, False, False))


def to_json(value: Any) -> str:
    """Serialize a runtime value (objects, containers, plain values) to a JSON string."""
    func = optional_global("kiln.ffi.ToJSON")
    if func is not None:
        return func(value)
    return _require("ffi.ToJSONGraphString")(value, None)


def from_json(text: str) -> Any:
    """Rebuild the value serialized by :func:`to_json`."""
    return _require("kiln.ffi.FromJSON", "ffi.FromJSONGraphString")(text)
