"""Tensors, operations and iteration variables of tensor expressions (``te.Tensor``,
``te.PlaceholderOp``, ``te.ComputeOp``, ``te.IterVar``) and the functions that make them:
:func:`placeholder`, :func:`compute`, :func:`reduce_axis`.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Sequence

from ..tir import _ffi_api as _tir_api
from ..tir.expr import ExprLike, ExprOp, PrimExpr, Var, as_expr, dtype_of
from ..tir.function import Buffer, Range
from ..tir.node import Node, register_node
from ..tir.op import const
from . import _ffi_api

#: ``IterVar.iter_type`` values
DATA_PAR = 0
REDUCE = 2


@register_node("te.IterVar")
class IterVar(ExprOp, Node):
    """A loop axis (fields ``dom``: a :class:`kiln.tir.Range`, ``var``: its variable,
    ``iter_type``: 0 data parallel, 2 reduction). In expressions it stands for ``var``."""

    __slots__ = ()
    __hash__ = Node.__hash__

    def __init__(
        self,
        dom: Range | tuple[ExprLike, ExprLike] | None,
        var: Var | str,
        iter_type: int,
        thread_tag: str = "",
    ) -> None:
        if dom is not None and not isinstance(dom, Range):
            dom = Range(*dom)
        if isinstance(var, str):
            var = _tir_api.Var(var, "int32")
        self.__init_handle_by_constructor__(_ffi_api.IterVar, dom, var, iter_type, thread_tag)

    def asexpr(self) -> Var:
        """The axis variable (what the axis stands for in an expression)."""
        return self.var

    def __str__(self) -> str:
        dom = self.dom
        dom_text = "None" if dom is None else "T.Range(%s, %s)" % (dom.min, dom.min + dom.extent)
        kind = {DATA_PAR: "DataPar", REDUCE: "CommReduce"}.get(self.iter_type, str(self.iter_type))
        return 'T.iter_var(%s, %s, "%s", "%s")' % (self.var, dom_text, kind, self.thread_tag)

    __repr__ = __str__


@register_node("te.Operation")
class Operation(Node):
    """Base of operations (what computes tensors; fields ``name``, ``tag``, ``attrs``)."""

    __slots__ = ()

    def output(self, index: int) -> Tensor:
        """The ``index``-th output tensor."""
        return _ffi_api.OpGetOutput(self, index)

    @property
    def num_outputs(self) -> int:
        """The number of output tensors."""
        return _ffi_api.OpNumOutputs(self)

    @property
    def input_tensors(self) -> list[Tensor]:
        """The tensors the operation reads."""
        return list(_ffi_api.OpInputTensors(self))


@register_node("te.PlaceholderOp")
class PlaceholderOp(Operation):
    """The operation of an input tensor (fields ``shape``, ``dtype``)."""

    __slots__ = ()


@register_node("te.ComputeOp")
class ComputeOp(Operation):
    """An operation computing each element from an expression (fields ``axis``,
    ``reduce_axis``, ``body``)."""

    __slots__ = ()


@register_node("te.Tensor")
class Tensor(Buffer):
    """A tensor of a tensor expression (a ``tir.Buffer`` plus fields ``op`` and
    ``value_index``). ``T[i, j]`` (or ``T(i, j)``) reads an element in an expression; partial
    indexing ``T[i][j]`` works too. Two tensors are equal when they are the same output of the
    same operation."""

    __slots__ = ()

    def __getitem__(self, indices: Any) -> Any:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) < self.ndim:
            return TensorSlice(self, indices)
        return _ffi_api.TensorLoad(self, [as_expr(i) for i in indices])

    def __call__(self, *indices: ExprLike) -> Any:
        return self[indices]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return False
        return self.same_as(other) or (self.op.same_as(other.op) and self.value_index == other.value_index)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((self.op.handle, self.value_index))

    @property
    def axis(self) -> Any:
        """The data-parallel axes of the operation that computes the tensor."""
        return self.op.axis

    def __str__(self):
        return "Tensor(shape=%s, op.name=%s)" % (
            [str(d) for d in self.shape],
            self.op.name,
        )

    __repr__ = __str__


class TensorSlice:
    """A tensor indexed in its leading dimensions (``T[i]`` of a 2-D ``T``); index it further."""

    __slots__ = ("indices", "tensor")

    def __init__(self, tensor: Tensor, indices: Sequence[ExprLike]) -> None:
        self.tensor, self.indices = tensor, tuple(indices)

    def __getitem__(self, indices: Any) -> Any:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self.tensor[self.indices + indices]


def _shape(shape: Any) -> list[Any]:
    if isinstance(shape, (int, ExprOp)):
        shape = (shape,)
    return [as_expr(d) for d in shape]


def placeholder(
    shape: ExprLike | Sequence[ExprLike], dtype: str = "float32", name: str = "placeholder"
) -> Tensor:
    """An input tensor of ``shape`` (ints and/or variables) and ``dtype``."""
    return _ffi_api.Placeholder(_shape(shape), dtype, name)


def _axis_names(fcompute: Callable[..., Any], ndim: int, name: str) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        return ["i%d" % k for k in range(ndim)]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return ["i%d" % k for k in range(ndim)]
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(names) != ndim:
        raise ValueError(
            "compute %r: fcompute takes %d arguments but the shape has %d dimensions"
            % (name, len(names), ndim)
        )
    return names


def _body_expr(value: Any) -> Any:
    value = as_expr(value)
    if isinstance(value, (bool, int, float)):
        return const(value)
    return value


def compute(
    shape: ExprLike | Sequence[ExprLike],
    fcompute: Callable[..., Any],
    name: str = "compute",
    tag: str = "",
    attrs: Mapping[str, Any] | None = None,
) -> Any:
    """A tensor whose element at ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    ``fcompute`` receives one variable per dimension (named after its parameters) and returns
    an expression, possibly a reduction (:func:`kiln.te.sum`, ...); returning a tuple of
    expressions makes an operation with several outputs, and then a list of tensors is
    returned.
    """
    shape = _shape(shape)
    names = _axis_names(fcompute, len(shape), name)
    axis = [
        IterVar(Range.from_min_extent(0, extent), _tir_api.Var(n, dtype_of(extent)), DATA_PAR)
        for n, extent in zip(names, shape)
    ]
    body = fcompute(*[iv.var for iv in axis])
    bodies = list(body) if isinstance(body, (tuple, list)) else [body]
    op = _ffi_api.ComputeOp(name, tag, attrs, axis, [_body_expr(b) for b in bodies])
    outputs = [op.output(k) for k in range(op.num_outputs)]
    return outputs[0] if len(outputs) == 1 else outputs


def reduce_axis(dom: Range | tuple[ExprLike, ExprLike], name: str = "rv", thread_tag: str = "") -> IterVar:
    """A reduction axis over ``dom``: a :class:`kiln.tir.Range` or a ``(begin, end)`` pair."""
    if not isinstance(dom, Range):
        dom = Range(*dom)
    var = _tir_api.Var(name, dtype_of(dom.extent))
    return IterVar(dom, var, REDUCE, thread_tag)


def var(name: str = "tindex", dtype: str = "int32") -> Var:
    """A scalar variable (``kiln.tir.Var``)."""
    return _tir_api.Var(name, dtype)


def size_var(name: str = "size", dtype: str = "int32") -> Var:
    """A non-negative variable, for symbolic dimensions (``kiln.tir.SizeVar``)."""
    return _tir_api.SizeVar(name, dtype)
