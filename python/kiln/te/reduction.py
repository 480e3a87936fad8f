"""Reductions: :func:`sum`, :func:`max`, :func:`min`, :func:`prod` and :func:`comm_reducer`
for any commutative combiner with an identity.

A reducer called with an axis (an ``IterVar`` or a list of them) reduces over it::

    k = te.reduce_axis((0, n), name="k")
    C = te.compute((m,), lambda i: te.sum(A[i, k], axis=k))

Called with two expressions instead (``te.max(a, b)``) it combines them elementwise, as in TVM.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, Union

from ..tir import _ffi_api as _tir_api
from ..tir import op as _op
from ..tir.expr import ExprLike, PrimExpr, as_expr, dtype_of
from . import _ffi_api
from .tensor import IterVar

#: The ``axis`` of a reduction: one reduction axis or several (or, for the elementwise
#: two-operand form ``max(a, b)``, the second expression).
Axis = Union[IterVar, Sequence[IterVar], ExprLike]


def _axes(axis: Any) -> list[IterVar]:
    return [axis] if isinstance(axis, IterVar) else list(axis)


def _is_axis(axis: Any) -> bool:
    return isinstance(axis, IterVar) or (
        isinstance(axis, (list, tuple)) and all(isinstance(a, IterVar) for a in axis)
    )


def _source(expr: Any) -> Any:
    expr = as_expr(expr)
    return _op.const(expr) if isinstance(expr, (bool, int, float)) else expr


def comm_reducer(
    fcombine: Callable[[Any, Any], Any], fidentity: Callable[[str], Any], name: str = "reduce"
) -> Callable[..., PrimExpr]:
    """A reducer from a combiner ``fcombine(x, y)`` and ``fidentity(dtype)`` (the value that
    leaves any ``x`` unchanged). The reducer is called as ``reducer(expr, axis, where=None)``;
    with two expressions ``reducer(a, b)`` it returns ``fcombine(a, b)``."""

    def reducer(expr: ExprLike, axis: Axis, where: ExprLike | None = None, init: Any = None) -> PrimExpr:
        if init is not None:
            raise NotImplementedError("%s: an init value is not supported" % name)
        if not _is_axis(axis):
            if where is not None:
                raise ValueError("%s(a, b) takes no where condition" % name)
            return fcombine(as_expr(expr), as_expr(axis))
        source = _source(expr)
        dtype = dtype_of(source)
        lhs, rhs = _tir_api.Var("x", dtype), _tir_api.Var("y", dtype)
        combined = as_expr(fcombine(lhs, rhs))
        identity = _op.const(as_expr(fidentity(dtype)), dtype)
        cond = None if where is None else as_expr(where)
        return _ffi_api.CommReduce(lhs, rhs, combined, identity, source, _axes(axis), cond)

    reducer.__name__ = reducer.__qualname__ = name
    reducer.__doc__ = (
        "Reduction %s: ``%s(expr, axis, where=None)`` over the reduction axes ``axis``, or "
        "``%s(a, b)`` of two expressions." % (name, name, name)
    )
    return reducer


_sum_generic = comm_reducer(lambda x, y: x + y, lambda t: _op.const(0, t), name="sum")
_max_generic = comm_reducer(_op.max, _op.min_value, name="max")
_min_generic = comm_reducer(_op.min, _op.max_value, name="min")
_prod_generic = comm_reducer(lambda x, y: x * y, lambda t: _op.const(1, t), name="prod")


def sum(expr: ExprLike, axis: Axis, where: ExprLike | None = None, init: Any = None) -> PrimExpr:
    """Sum of ``expr`` over the reduction axes ``axis`` (an ``IterVar`` or a list), counting
    only points where ``where`` holds; ``sum(a, b)`` is ``a + b``."""
    if init is None and _is_axis(axis):
        return _ffi_api.Sum(_source(expr), _axes(axis), None if where is None else as_expr(where))
    return _sum_generic(expr, axis, where, init)


def max(expr: ExprLike, axis: Axis, where: ExprLike | None = None, init: Any = None) -> PrimExpr:
    """Maximum of ``expr`` over the reduction axes ``axis``; ``max(a, b)`` of two
    expressions is the elementwise maximum."""
    if init is None and where is None and _is_axis(axis):
        return _ffi_api.Max(_source(expr), _axes(axis))
    return _max_generic(expr, axis, where, init)


def min(expr: ExprLike, axis: Axis, where: ExprLike | None = None, init: Any = None) -> PrimExpr:
    """Minimum of ``expr`` over the reduction axes ``axis``; ``min(a, b)`` of two
    expressions is the elementwise minimum."""
    if init is None and where is None and _is_axis(axis):
        return _ffi_api.Min(_source(expr), _axes(axis))
    return _min_generic(expr, axis, where, init)


def prod(expr: ExprLike, axis: Axis, where: ExprLike | None = None, init: Any = None) -> PrimExpr:
    """Product of ``expr`` over the reduction axes ``axis``; ``prod(a, b)`` is ``a * b``."""
    if init is None and where is None and _is_axis(axis):
        return _ffi_api.Prod(_source(expr), _axes(axis))
    return _prod_generic(expr, axis, where, init)
