"""Test helpers of the runtime: the ``testing.*`` and ``kiln.testing.*`` global functions.

Every such global is an attribute of this module, e.g. ``kiln.testing.echo(1)``,
``kiln.testing.apply(f, 1)``, ``kiln.testing.make_node(...)`` (Kiln only).
:class:`Node` is the Python class of ``kiln.testing.Node`` objects when the library has it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .object import Object, register_object
from .registry import init_ffi_api

init_ffi_api("testing", __name__)
init_ffi_api("kiln.testing", __name__)

if TYPE_CHECKING:
    # The attributes are the runtime's globals, bound at import: to type checkers, any name.
    def __getattr__(name: str) -> Any: ...


class Node(Object):
    """A reflected test object with fields ``name``, ``value``, ``scale``, ``children``."""

    __slots__ = ()


try:
    register_object("kiln.testing.Node")(Node)
    #: whether the loaded library defines the ``kiln.testing.Node`` type
    HAS_NODE = True
except ValueError:
    HAS_NODE = False
