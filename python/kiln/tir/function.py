"""Buffers, ranges, functions and modules of the tensor IR.

:class:`Buffer` (``tir.Buffer``), :class:`Range` (``ir.Range``), :class:`PrimFunc`
(``tir.PrimFunc``) and :class:`IRModule` (``ir.IRModule``); ``str()`` of a function or module
is its TVMScript-like text.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from ..core import call_global
from ..registry import get_global_func
from . import _ffi_api
from .expr import BufferLoad, ExprLike, Var, as_expr
from .node import Node, register_node


@register_node("ir.Range")
class Range(Node):
    """The integers ``[begin, end)``: ``Range(begin, end)``, or :meth:`from_min_extent`
    (fields ``min``, ``extent``)."""

    __slots__ = ()

    def __init__(self, begin: ExprLike, end: ExprLike | None = None) -> None:
        if end is None:
            begin, end = 0, begin
        self.__init_handle_by_constructor__(get_global_func("ir.Range"), as_expr(begin), as_expr(end))

    @staticmethod
    def from_min_extent(min_value: ExprLike, extent: ExprLike) -> Range:
        """The range ``[min_value, min_value + extent)``."""
        return call_global("ir.Range_from_min_extent", as_expr(min_value), as_expr(extent))


@register_node("tir.Buffer")
class Buffer(Node):
    """A multi-dimensional view of memory (fields ``data``, ``dtype``, ``shape``, ``strides``,
    ``elem_offset``, ``name``, ``scope``, ``data_alignment``, ``offset_factor``).

    ``buf[i, j]`` is a :class:`kiln.tir.BufferLoad`. Make one with :func:`decl_buffer`.
    """

    __slots__ = ()

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    def __getitem__(self, indices: Any) -> Any:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, indices)

    def vload(self, indices: Sequence[ExprLike]) -> BufferLoad:
        """The element at ``indices`` (a :class:`kiln.tir.BufferLoad`)."""
        return self[tuple(indices)]


def decl_buffer(
    shape: Sequence[ExprLike], dtype: str = "float32", name: str = "buffer", scope: str | None = None
) -> Buffer:
    """A new buffer of ``shape`` (ints or expressions) with a fresh data pointer."""
    return _ffi_api.decl_buffer([as_expr(d) for d in shape], dtype, name, scope)


@register_node("tir.PrimFunc")
class PrimFunc(Node):
    """A function of the tensor IR: ``PrimFunc(params, body, ret_type=None, buffer_map=None,
    attrs=None)`` (fields of the same names)."""

    __slots__ = ()

    def __init__(
        self,
        params: Sequence[Var],
        body: Any,
        ret_type: Any = None,
        buffer_map: Mapping[Var, Buffer] | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        self.__init_handle_by_constructor__(
            _ffi_api.PrimFunc, list(params), body, ret_type, buffer_map, attrs
        )


@register_node("ir.IRModule")
class IRModule(Node):
    """A set of named functions: ``IRModule({"main": func})``; ``mod["main"]`` is a function,
    ``str(mod)`` the module's text, ``mod.functions`` the map of functions."""

    __slots__ = ()

    def __init__(self, functions: Mapping[str, Any] | None = None) -> None:
        self.__init_handle_by_constructor__(get_global_func("ir.IRModule"), dict(functions or {}))

    def __getitem__(self, name: str) -> Any:
        functions = self.functions
        if name not in functions:
            raise KeyError("the module has no function %r" % (name,))
        return functions[name]

    def __contains__(self, name: object) -> bool:
        return name in self.functions

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def keys(self) -> list[str]:
        """The names of the functions."""
        return list(self.functions.keys())
