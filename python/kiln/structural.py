"""Structural comparison and JSON serialization of runtime values.

Backed by the Kiln globals ``kiln.ffi.StructuralEqual``, ``kiln.ffi.ToJSON`` and
``kiln.ffi.FromJSON``; on TVM-FFI's library the equivalents ``ffi.StructuralEqual``,
``ffi.ToJSONGraphString`` and ``ffi.FromJSONGraphString`` are used instead.
"""

from .object import optional_global


def _require(*names):
    func = optional_global(*names)
    if func is None:
        raise NotImplementedError(
            "the runtime library provides none of the global functions %s" % ", ".join(names)
        )
    return func


def structural_equal(lhs, rhs):
    """True when ``lhs`` and ``rhs`` have the same structure and contents."""
    func = optional_global("kiln.ffi.StructuralEqual")
    if func is not None:
        return bool(func(lhs, rhs))
    return bool(_require("ffi.StructuralEqual")(lhs, rhs, False, False))


def to_json(value):
    """Serialize a runtime value (objects, containers, plain values) to a JSON string."""
    func = optional_global("kiln.ffi.ToJSON")
    if func is not None:
        return func(value)
    return _require("ffi.ToJSONGraphString")(value, None)


def from_json(text):
    """Rebuild the value serialized by :func:`to_json`."""
    return _require("kiln.ffi.FromJSON", "ffi.FromJSONGraphString")(text)
