"""Base class of IR nodes, type registration and structural comparison of IR.

Every IR object (expressions, statements, buffers, functions, modules, ``te`` objects) is a
reflected runtime object: its fields read as attributes (``expr.dtype``, ``loop.body``), and
``str()`` prints the TVMScript-like text of ``tir.AsText``.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ..core import call_global
from ..object import Object, optional_global, register_object

_T = TypeVar("_T", bound=type)


def register_node(type_key: str) -> Callable[[_T], _T]:
    """Class decorator: :func:`kiln.register_object` for ``type_key`` when the runtime knows it.

    On a runtime library without the IR (TVM-FFI's own library, say) the class is returned
    unregistered, so that ``import kiln.tir`` still works there.
    """

    def register(cls: _T) -> _T:
        try:
            return register_object(type_key)(cls)
        except ValueError:
            return cls

    return register


def require_global(name: str) -> Any:
    """Return the global function ``name``; raise ``NotImplementedError`` when it is missing."""
    func = optional_global(name)
    if func is None:
        raise NotImplementedError(
            "the runtime library does not provide the global function %r "
            "(is it Kiln's libkiln with the tensor compiler?)" % name
        )
    return func


def as_text(node: Any) -> str:
    """The text form of an IR node (``tir.AsText``): TVMScript-like for functions and modules."""
    return require_global("tir.AsText")(node)


class Node(Object):
    """Base of the Python classes of IR nodes: ``str()``/``repr()`` print the node's text."""

    def __str__(self) -> str:
        return as_text(self)

    def __repr__(self) -> str:
        try:
            return as_text(self)
        except Exception:  # noqa: BLE001 - repr must not fail
            return Object.__repr__(self)

    def script(self) -> str:
        """The node's text form (same as ``str(node)``), after TVM's ``script()``."""
        return as_text(self)

    def astext(self) -> str:
        """The node's text form (same as ``str(node)``), after TVM's ``astext()``."""
        return as_text(self)


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    """True when two IR values have the same structure (``node.StructuralEqual``).

    Variables defined inside the values (loop variables, function parameters, lets) are
    matched by definition; free variables are equal only when they are the same object,
    unless ``map_free_vars`` is true.
    """
    return bool(call_global("node.StructuralEqual", lhs, rhs, False, bool(map_free_vars)))


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    """Raise ``ValueError`` showing both texts when ``lhs`` and ``rhs`` differ structurally."""
    call_global("node.StructuralEqual", lhs, rhs, True, bool(map_free_vars))


def structural_hash(node: Any, map_free_vars: bool = False) -> int:
    """A hash consistent with :func:`structural_equal` (``node.StructuralHash``)."""
    return call_global("node.StructuralHash", node, bool(map_free_vars))
