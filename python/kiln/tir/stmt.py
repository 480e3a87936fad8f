"""Statements of the tensor IR (``tir.Stmt`` and its node classes).

Each class's constructor calls the ``tir.*`` global of the same name, which checks types;
fields read as attributes (``loop.loop_var``, ``loop.body``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from . import _ffi_api
from .expr import ExprLike, Var, as_expr
from .node import Node, register_node

if TYPE_CHECKING:
    from .function import Buffer


class ForKind:
    """The kinds of :class:`For` loops (the ``kind`` field)."""

    SERIAL = 0
    PARALLEL = 1
    VECTORIZED = 2
    UNROLLED = 3
    THREAD_BINDING = 4


@register_node("tir.Stmt")
class Stmt(Node):
    """Base class of statements."""

    __slots__ = ()


@register_node("tir.For")
class For(Stmt):
    """``for loop_var in range(min, min + extent)``: ``For(loop_var, min, extent, kind, body,
    annotations=None)`` with ``kind`` a :class:`ForKind` value."""

    __slots__ = ()

    def __init__(
        self,
        loop_var: Var,
        min: ExprLike,
        extent: ExprLike,
        kind: int,
        body: Stmt,
        annotations: Mapping[str, Any] | None = None,
    ) -> None:
        self.__init_handle_by_constructor__(
            _ffi_api.For, loop_var, as_expr(min), as_expr(extent), int(kind), body, annotations
        )


@register_node("tir.BufferStore")
class BufferStore(Stmt):
    """``buffer[indices] = value``: ``BufferStore(buffer, value, indices)``."""

    __slots__ = ()

    def __init__(self, buffer: Buffer, value: ExprLike, indices: Sequence[ExprLike]) -> None:
        self.__init_handle_by_constructor__(
            _ffi_api.BufferStore, buffer, as_expr(value), [as_expr(i) for i in indices]
        )


@register_node("tir.Allocate")
class Allocate(Stmt):
    """Memory for ``buffer_var`` around ``body``: ``Allocate(buffer_var, dtype, extents,
    condition, body, annotations=None, scope=None)``."""

    __slots__ = ()

    def __init__(
        self,
        buffer_var: Var,
        dtype: str,
        extents: Sequence[ExprLike],
        condition: ExprLike,
        body: Stmt,
        annotations: Mapping[str, Any] | None = None,
        scope: str | None = None,
    ) -> None:
        self.__init_handle_by_constructor__(
            _ffi_api.Allocate,
            buffer_var,
            dtype,
            [as_expr(e) for e in extents],
            as_expr(condition),
            body,
            annotations,
            scope,
        )


@register_node("tir.DeclBuffer")
class DeclBuffer(Stmt):
    """Declares ``buffer`` for ``body``: ``DeclBuffer(buffer, body)``."""

    __slots__ = ()

    def __init__(self, buffer: Buffer, body: Stmt) -> None:
        self.__init_handle_by_constructor__(_ffi_api.DeclBuffer, buffer, body)


@register_node("tir.IfThenElse")
class IfThenElse(Stmt):
    """``if condition: then_case else: else_case``: ``IfThenElse(condition, then_case,
    else_case=None)``."""

    __slots__ = ()

    def __init__(self, condition: ExprLike, then_case: Stmt, else_case: Stmt | None = None) -> None:
        self.__init_handle_by_constructor__(_ffi_api.IfThenElse, as_expr(condition), then_case, else_case)


@register_node("tir.LetStmt")
class LetStmt(Stmt):
    """``var = value`` for ``body``: ``LetStmt(var, value, body)``."""

    __slots__ = ()

    def __init__(self, var: Var, value: ExprLike, body: Stmt) -> None:
        self.__init_handle_by_constructor__(_ffi_api.LetStmt, var, as_expr(value), body)


@register_node("tir.SeqStmt")
class SeqStmt(Stmt):
    """Statements in order: ``SeqStmt(seq)``."""

    __slots__ = ()

    def __init__(self, seq: Sequence[Stmt]) -> None:
        self.__init_handle_by_constructor__(_ffi_api.SeqStmt, list(seq))


@register_node("tir.AttrStmt")
class AttrStmt(Stmt):
    """An annotation ``key = value`` on ``node`` for ``body``: ``AttrStmt(node, key, value,
    body)``."""

    __slots__ = ()

    def __init__(self, node: Any, key: str, value: ExprLike | str, body: Stmt) -> None:
        self.__init_handle_by_constructor__(_ffi_api.AttrStmt, node, key, as_expr(value), body)


@register_node("tir.AssertStmt")
class AssertStmt(Stmt):
    """``assert condition, message`` before ``body``: ``AssertStmt(condition, message, body)``."""

    __slots__ = ()

    def __init__(self, condition: ExprLike, message: ExprLike | str, body: Stmt) -> None:
        self.__init_handle_by_constructor__(_ffi_api.AssertStmt, as_expr(condition), as_expr(message), body)


@register_node("tir.Evaluate")
class Evaluate(Stmt):
    """Evaluates an expression for its effect: ``Evaluate(value)``."""

    __slots__ = ()

    def __init__(self, value: ExprLike) -> None:
        self.__init_handle_by_constructor__(_ffi_api.Evaluate, as_expr(value))
